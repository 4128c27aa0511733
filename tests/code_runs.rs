//! Code mode runs end to end on real worker processes: values, logs, TypeScript, errors, isolation, concurrency.

mod common;

use std::time::{Duration, Instant};

use common::code_pool::{
    TestHost, assert_pool_serves, failure, limits, pool, run, run_with, value,
};
use serde_json::json;
use toolgate::code_mode::pool::{FailureKind, RunFailure, RunOutcome};

#[tokio::test]
async fn an_empty_program_returns_nothing() {
    let (pool, _shutdown) = pool(1);
    let outcome = run(&pool, "").await;
    assert_eq!(outcome.result, Ok(None));
    assert_eq!(outcome.text(), "(run_code completed with no output)");
}

#[tokio::test]
async fn values_and_logs_come_back_as_the_model_reads_them() {
    let (pool, _shutdown) = pool(1);
    let outcome = run(&pool, "return 40 + 2").await;
    assert_eq!(outcome.result, Ok(Some(json!(42))));
    assert_eq!(outcome.text(), "42");

    let outcome = run(&pool, "return null").await;
    assert_eq!(outcome.result, Ok(Some(json!(null))));

    let outcome = run(
        &pool,
        "console.log('a', 1, [2]); console.warn({x: 1}); console.error(new TypeError('t')); return {b: 2}",
    )
    .await;
    assert_eq!(outcome.logs, ["a 1 [2]", r#"{"x":1}"#, "TypeError: t"]);
    assert_eq!(
        outcome.text(),
        "a 1 [2]\n{\"x\":1}\nTypeError: t\n{\n  \"b\": 2\n}"
    );

    let outcome = run(&pool, "console.info('only logs')").await;
    assert_eq!(outcome.text(), "only logs");

    let outcome = run(&pool, "return 'raw string'").await;
    assert_eq!(outcome.text(), "raw string");

    let outcome = run(&pool, "return function named() {}").await;
    let text = value(&outcome);
    assert!(text.as_str().is_some_and(|t| t.contains("named")), "{text}");
}

#[tokio::test]
async fn typescript_is_stripped_and_its_errors_have_positions() {
    let (pool, _shutdown) = pool(1);
    let outcome = run(
        &pool,
        "interface P { x: number }\n\
         type Pair = [number, string];\n\
         const p: P = { x: 21 } as P;\n\
         const double = (a: number): number => a * 2;\n\
         const pair: Pair = [1, 'a'];\n\
         return double(p.x!) + pair.length - 2;",
    )
    .await;
    assert_eq!(value(&outcome), json!(42), "{}", outcome.text());

    let outcome = run(&pool, "const a = 1;\nconst b: number = ;").await;
    let (kind, message) = failure(&outcome);
    assert_eq!(kind, FailureKind::Syntax);
    assert!(message.starts_with("2:19: "), "{message}");
    assert!(
        outcome
            .text()
            .starts_with("code run failed (syntax): 2:19: "),
        "{}",
        outcome.text()
    );

    let (kind, message) = failure(&run(&pool, "return 1 +;").await);
    assert_eq!(kind, FailureKind::Syntax, "{message}");

    let (kind, message) = failure(&run(&pool, "import fs from 'fs';\nreturn 1").await);
    assert_eq!(kind, FailureKind::Syntax);
    assert!(message.contains("import and export"), "{message}");
}

#[tokio::test]
async fn thrown_errors_and_rejections_are_exceptions() {
    let (pool, _shutdown) = pool(1);
    let outcome = run(
        &pool,
        "console.log('before'); throw new TypeError('bad input')",
    )
    .await;
    assert_eq!(
        outcome.result,
        Err(RunFailure {
            kind: FailureKind::Exception,
            message: "TypeError: bad input".to_owned()
        })
    );
    assert_eq!(
        outcome.text(),
        "code run failed (exception): TypeError: bad input\nCaptured output:\nbefore"
    );

    let (kind, message) = failure(&run(&pool, "throw 'just a string'").await);
    assert_eq!(
        (kind, message.as_str()),
        (FailureKind::Exception, "just a string")
    );

    let (kind, message) = failure(&run(&pool, "await Promise.reject(new Error('nope'))").await);
    assert_eq!(
        (kind, message.as_str()),
        (FailureKind::Exception, "Error: nope")
    );

    let (kind, message) = failure(
        &run(
            &pool,
            "Promise.reject(new RangeError('dropped')); await tools.read({ms: 1}); return 1",
        )
        .await,
    );
    assert_eq!(kind, FailureKind::Exception);
    assert_eq!(message, "unhandled promise rejection: RangeError: dropped");

    let (kind, message) = failure(&run(&pool, "return undefinedVariable + 1").await);
    assert_eq!(kind, FailureKind::Exception);
    assert!(message.starts_with("ReferenceError"), "{message}");
}

#[tokio::test]
async fn a_promise_that_never_settles_fails_at_once() {
    let (pool, _shutdown) = pool(1);
    let started = Instant::now();
    let outcome = run_with(
        &pool,
        &TestHost::new(),
        "await new Promise(() => {}); return 1",
        limits(Duration::from_secs(20)),
    )
    .await;
    let (kind, message) = failure(&outcome);
    assert_eq!(kind, FailureKind::Exception);
    assert!(message.contains("never settled"), "{message}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn globals_do_not_survive_into_the_next_run() {
    // One worker, so both runs are served by the same process.
    let (pool, _shutdown) = pool(1);
    assert_pool_serves(&pool).await;
    let outcome = run(
        &pool,
        "globalThis.leak = 42; Array.prototype.evil = 1; return leak",
    )
    .await;
    assert_eq!(value(&outcome), json!(42));
    let outcome = run(&pool, "return [typeof leak, typeof [].evil]").await;
    assert_eq!(value(&outcome), json!(["undefined", "undefined"]));
    assert_eq!(pool.stats().spawned, 1, "{:?}", pool.stats());
}

#[tokio::test]
async fn the_catalog_answers_through_the_host() {
    let (pool, _shutdown) = pool(1);
    let outcome = run(
        &pool,
        "const found = await catalog.search('rea', 3);\n\
         const text = await catalog.describe('read');\n\
         const none = await catalog.describe('nothing');\n\
         return { found, text, none }",
    )
    .await;
    assert_eq!(
        value(&outcome),
        json!({
            "found": {"query": "rea", "limit": 3, "tools": ["read"]},
            "text": "read(args: { ms?: number }): Promise<unknown>",
            "none": null
        })
    );
}

#[tokio::test]
async fn twenty_concurrent_runs_each_get_their_own_result() {
    let (pool, _shutdown) = pool(2);
    let host = TestHost::new();
    let runs = (0..20).map(|i| {
        let pool = pool.clone();
        let host = host.clone();
        async move {
            let code = format!(
                "console.log('run {i}'); const r = await tools.read({{ms: 20, tag: {i}}}); return r.echo.tag * 2"
            );
            run_with(&pool, &host, &code, limits(Duration::from_secs(30))).await
        }
    });
    let outcomes: Vec<RunOutcome> = futures::future::join_all(runs).await;
    for (i, outcome) in outcomes.iter().enumerate() {
        assert_eq!(value(outcome), json!(i * 2), "{}", outcome.text());
        assert_eq!(outcome.logs, [format!("run {i}")]);
        assert_eq!(outcome.tool_calls, 1);
    }
    assert_pool_serves(&pool).await;
}

#[tokio::test]
async fn workers_are_recycled_and_the_pool_never_shrinks() {
    let shutdown = tokio_util::sync::CancellationToken::new();
    let pool = toolgate::code_mode::pool::WorkerPool::new(
        toolgate::code_mode::pool::PoolConfig {
            size: 2,
            worker_exe: common::toolgate(),
            recycle_after_runs: 3,
        },
        shutdown.clone(),
    );
    for i in 0..7 {
        assert_eq!(value(&run(&pool, &format!("return {i}")).await), json!(i));
    }
    // A killed worker is replaced too.
    let outcome = run_with(
        &pool,
        &TestHost::new(),
        "while (true) {}",
        toolgate::code_mode::pool::Limits {
            loop_iterations: u64::MAX,
            ..limits(Duration::from_millis(500))
        },
    )
    .await;
    assert_eq!(failure(&outcome).0, FailureKind::Timeout);
    let stats = pool.stats();
    assert!(stats.recycled >= 2, "{stats:?}");
    assert_eq!(stats.killed, 1, "{stats:?}");
    let refilled = tokio::time::timeout(Duration::from_secs(20), async {
        while pool.stats().idle < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(refilled.is_ok(), "{:?}", pool.stats());
    assert_eq!(pool.stats().live, 2, "{:?}", pool.stats());
    shutdown.cancel();
    let emptied = tokio::time::timeout(Duration::from_secs(5), async {
        while pool.stats().live > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(emptied.is_ok(), "shutdown left workers: {:?}", pool.stats());
}
