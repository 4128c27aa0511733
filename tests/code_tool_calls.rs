//! Tool calls made from code: results, `ToolCallError`, read-only overlap, exclusive ordering, limits, cancel.

mod common;

use std::{sync::atomic::Ordering, time::Duration};

use common::code_pool::{
    TestHost, assert_pool_serves, failure, limits, pool, run_with, tools, value,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use toolgate::code_mode::pool::{FailureKind, Limits, RunRequest};

fn wall(seconds: u64) -> Limits {
    limits(Duration::from_secs(seconds))
}

#[tokio::test]
async fn a_tool_result_resolves_the_call() {
    let (pool, _shutdown) = pool(1);
    let host = TestHost::new();
    let outcome = run_with(
        &pool,
        &host,
        "const r = await tools.read({tag: 'x'}); const w = await tools.write({id: 7}); return [r, w]",
        wall(10),
    )
    .await;
    assert_eq!(
        value(&outcome),
        json!([{"echo": {"tag": "x"}}, {"wrote": 7}])
    );
    assert_eq!(outcome.tool_calls, 2);
    let finished = host.finished.lock().unwrap().clone();
    assert_eq!(
        finished,
        [(1, "read".to_owned(), true), (2, "write".to_owned(), true)]
    );
}

#[tokio::test]
async fn a_failed_call_rejects_with_a_catchable_tool_call_error() {
    let (pool, _shutdown) = pool(1);
    let host = TestHost::new();
    let outcome = run_with(
        &pool,
        &host,
        "try { await tools.deny({}); return 'not reached'; } catch (e) {\n\
           return [e instanceof ToolCallError, e instanceof Error, e.name, e.toolName, e.code, e.message];\n\
         }",
        wall(10),
    )
    .await;
    assert_eq!(
        value(&outcome),
        json!([
            true,
            true,
            "ToolCallError",
            "deny",
            "DENIED",
            "writes are not allowed here"
        ])
    );
    assert_eq!(
        host.finished.lock().unwrap().clone(),
        [(1, "deny".to_owned(), false)]
    );

    let outcome = run_with(&pool, &host, "await tools.deny()", wall(10)).await;
    let (kind, message) = failure(&outcome);
    assert_eq!(kind, FailureKind::Exception);
    assert_eq!(message, "ToolCallError: writes are not allowed here");

    // Arguments that are not JSON are refused inside the program, before reaching the host.
    let outcome = run_with(
        &pool,
        &host,
        "const a = {}; a.self = a; try { await tools.read(a) } catch (e) { return [e.code, e.toolName] }",
        wall(10),
    )
    .await;
    assert_eq!(value(&outcome), json!(["INVALID_ARGS", "read"]));

    // A result nested too deeply for the worker to parse is refused by the pool instead of crashing the run.
    let outcome = run_with(
        &pool,
        &host,
        "let a = 0; for (let i = 0; i < 110; i++) a = [a];\n\
         try { await tools.read({a}) } catch (e) { return [e.code, e.message] }",
        wall(10),
    )
    .await;
    assert_eq!(
        value(&outcome),
        json!([
            "RESULT_TOO_DEEP",
            "the result of read nests deeper than 100 levels"
        ])
    );
}

#[tokio::test]
async fn read_only_calls_overlap_up_to_max_parallel() {
    let (pool, _shutdown) = pool(1);
    let host = TestHost::new();
    let limits = Limits {
        max_parallel: 4,
        ..wall(20)
    };
    let outcome = run_with(
        &pool,
        &host,
        "const all = await Promise.all(Array.from({length: 12}, (_, i) => tools.read({ms: 150, id: i})));\n\
         return all.map((r) => r.echo.id)",
        limits,
    )
    .await;
    assert_eq!(value(&outcome), json!((0..12).collect::<Vec<_>>()));
    assert_eq!(host.max_in_flight.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn other_calls_run_alone_and_in_order() {
    let (pool, _shutdown) = pool(1);
    let host = TestHost::new();
    let outcome = run_with(
        &pool,
        &host,
        "await Promise.all([\n\
           tools.read({id: 'r1', ms: 100}), tools.read({id: 'r2', ms: 100}),\n\
           tools.write({id: 'w1', ms: 50}), tools.write({id: 'w2', ms: 10}),\n\
           tools.read({id: 'r3', ms: 10}), tools.read({id: 'r4', ms: 10}),\n\
         ]);",
        wall(20),
    )
    .await;
    assert_eq!(outcome.result, Ok(None), "{}", outcome.text());
    let events = host.events();
    let position = |event: &str| {
        events
            .iter()
            .position(|e| e == event)
            .unwrap_or_else(|| panic!("{event} missing from {events:?}"))
    };
    // The two leading reads overlap; the first write waits for both, the second for the first; later reads
    // wait for the writes.
    assert!(
        position("start read \"r2\"") < position("end read \"r1\""),
        "{events:?}"
    );
    assert!(
        position("end read \"r1\"") < position("start write \"w1\""),
        "{events:?}"
    );
    assert!(
        position("end read \"r2\"") < position("start write \"w1\""),
        "{events:?}"
    );
    assert_eq!(
        position("start write \"w1\"") + 1,
        position("end write \"w1\""),
        "{events:?}"
    );
    assert_eq!(
        position("end write \"w1\"") + 1,
        position("start write \"w2\""),
        "{events:?}"
    );
    assert_eq!(
        position("start write \"w2\"") + 1,
        position("end write \"w2\""),
        "{events:?}"
    );
    assert!(
        position("end write \"w2\"") < position("start read \"r3\""),
        "{events:?}"
    );
    assert!(
        position("start read \"r4\"") < position("end read \"r3\""),
        "{events:?}"
    );
}

#[tokio::test]
async fn more_calls_than_allowed_end_the_run_with_a_limit() {
    let (pool, _shutdown) = pool(1);
    let host = TestHost::new();
    let limits = Limits {
        max_tool_calls: 100,
        ..wall(30)
    };
    let outcome = run_with(
        &pool,
        &host,
        "for (let i = 0; i < 10000; i++) { try { await tools.read({}) } catch (e) {} }",
        limits.clone(),
    )
    .await;
    let (kind, message) = failure(&outcome);
    assert_eq!(kind, FailureKind::Limit);
    assert_eq!(message, "more than 100 tool calls");
    assert_eq!(outcome.tool_calls, 100);

    // The same without awaiting: the calls are all fired at once.
    let outcome = run_with(
        &pool,
        &host,
        "for (let i = 0; i < 10000; i++) { tools.read({}) }",
        limits,
    )
    .await;
    let (kind, message) = failure(&outcome);
    assert_eq!(
        (kind, message.as_str()),
        (FailureKind::Limit, "more than 100 tool calls")
    );
    assert_pool_serves(&pool).await;
}

#[tokio::test]
async fn cancelling_a_run_kills_it_and_cancels_its_calls() {
    let (pool, _shutdown) = pool(1);
    let host = TestHost::new();
    let cancel = CancellationToken::new();
    let request = RunRequest {
        code: "await Promise.all([tools.hang(), tools.hang()]); return 'not reached'".to_owned(),
        tools: tools(),
        limits: wall(30),
    };
    let run = tokio::spawn({
        let pool = pool.clone();
        let host = host.clone();
        let cancel = cancel.clone();
        async move { pool.run(request, host, cancel).await }
    });
    // Both calls are in flight before cancelling.
    let waited = tokio::time::timeout(Duration::from_secs(20), async {
        while host.events().len() < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "the calls never started: {:?}",
        host.events()
    );
    cancel.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("the run ends at once")
        .expect("the run task does not panic");
    let (kind, message) = failure(&outcome);
    assert_eq!(
        (kind, message.as_str()),
        (FailureKind::Timeout, "the run was cancelled")
    );
    let cancelled = tokio::time::timeout(Duration::from_secs(5), async {
        while host.cancelled.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(
        cancelled.is_ok(),
        "the sub-calls' cancel tokens did not fire"
    );
    assert_eq!(pool.stats().killed, 1, "{:?}", pool.stats());
    assert_pool_serves(&pool).await;
}

#[tokio::test]
async fn a_deadline_cancels_in_flight_calls_too() {
    let (pool, _shutdown) = pool(1);
    let host = TestHost::new();
    let outcome = run_with(&pool, &host, "await tools.hang()", wall(2)).await;
    let (kind, message) = failure(&outcome);
    assert_eq!(kind, FailureKind::Timeout);
    assert_eq!(message, "the program ran longer than 2000 ms");
    let cancelled = tokio::time::timeout(Duration::from_secs(5), async {
        while host.cancelled.load(Ordering::SeqCst) < 1 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(
        cancelled.is_ok(),
        "the sub-call's cancel token did not fire"
    );
    assert_pool_serves(&pool).await;
}
