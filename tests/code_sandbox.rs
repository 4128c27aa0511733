//! Hostile programs end with a clear failure inside their limits, reach nothing outside the sandbox, and never
//! take the pool down with them.

mod common;

use std::{
    process::Command,
    time::{Duration, Instant},
};

use common::code_pool::{
    TestHost, assert_pool_serves, failure, limits, pool, run, run_with, value,
};
use serde_json::{Value, json};
use toolgate::code_mode::pool::{FailureKind, Limits, WorkerPool};

/// Runs `code` with `limits`, checks that it ends as one of `kinds` within the wall clock (plus slack for
/// killing and reporting), that its message contains `needle`, and that the pool still serves afterwards.
async fn assert_ends(
    pool: &WorkerPool,
    code: &str,
    limits: Limits,
    kinds: &[FailureKind],
    needle: &str,
) {
    let wall = limits.wall;
    let started = Instant::now();
    let outcome = run_with(pool, &TestHost::new(), code, limits).await;
    let elapsed = started.elapsed();
    let (kind, message) = failure(&outcome);
    assert!(kinds.contains(&kind), "{code}: {kind:?}: {message}");
    assert!(message.contains(needle), "{code}: {message}");
    assert!(
        elapsed < wall + Duration::from_secs(2),
        "{code}: took {elapsed:?}"
    );
    assert_pool_serves(pool).await;
}

fn wall(seconds: u64) -> Limits {
    limits(Duration::from_secs(seconds))
}

#[tokio::test]
async fn endless_loops_end_by_limit_or_deadline() {
    let (pool, _shutdown) = pool(1);
    let either = [FailureKind::Limit, FailureKind::Timeout];
    for code in [
        "while (true) {}",
        "try { while (true) {} } catch (e) { return 'caught' }",
        "await tools.read({}); while (true) {}",
        "for (;;) { try { for (;;) {} } catch (e) {} }",
    ] {
        assert_ends(&pool, code, wall(4), &either, "").await;
    }
    // A loop spread over calls is not counted by the engine: only the deadline stops it.
    let code = "const spin = () => { for (let i = 0; i < 1000; i++) {} }; while (true) { for (let i = 0; i < 1000; i++) spin() }";
    let limits = Limits {
        loop_iterations: u64::MAX,
        ..wall(2)
    };
    assert_ends(
        &pool,
        code,
        limits,
        &[FailureKind::Timeout],
        "longer than 2000 ms",
    )
    .await;
}

#[tokio::test]
async fn catastrophic_backtracking_is_killed_at_the_deadline() {
    let (pool, _shutdown) = pool(1);
    let code = r#"return /(a+)+$/.test("a".repeat(40) + "!")"#;
    assert_ends(
        &pool,
        code,
        wall(2),
        &[FailureKind::Timeout],
        "longer than 2000 ms",
    )
    .await;
    assert_eq!(pool.stats().killed, 1, "{:?}", pool.stats());
}

#[tokio::test]
async fn deep_recursion_is_a_limit() {
    let (pool, _shutdown) = pool(1);
    for code in [
        "const f = (n) => f(n + 1) + 1; return f(0)",
        "const f = (n) => [n].map(f); return f(0)",
        "const o = { get x() { return this.x } }; return o.x",
        "try { const f = () => f(); f() } catch (e) { return 'caught' }",
        // Boa alone reports this one as an internal error wrapping its recursion limit.
        "const f = async (n) => await f(n + 1); return await f(0)",
        // After an await Boa drops its own limit error; the check every function body starts
        // with must end these (see `worker/typescript.rs`), whatever the function's form.
        "await tools.read({}); const f = (n) => f(n + 1) + 1; return f(0)",
        "await null; function f(n) { return f(n + 1) + 1 } return f(0)",
        "await null; const f = (n) => [n].map(f); return f(0)",
        "await null; const o = { get x() { return this.x } }; return o.x",
        "await null; const o = { set x(v) { this.x = v } }; o.x = 1",
        "class A { m(n) { return this.m(n + 1) } } await null; return new A().m(0)",
        "class B { constructor(n) { new B(n + 1) } } await null; return new B(0)",
        "async function f(n) { if (n === 0) await null; return 1 + await f(n + 1) } return await f(0)",
        "function* g() { yield* g() } await null; return [...g()]",
        "async function deep() { await null; const f = function (n) { return f(n + 1) }; return f(0) } return await deep()",
        // Default values run before the body's check, so they carry one of their own.
        "await null; function f(a = f()) { return a } return f()",
        "await null; const f = (a = f()) => a; return f()",
        "await null; function f({ a = f() } = {}) { return a } return f()",
    ] {
        assert_ends(&pool, code, wall(5), &[FailureKind::Limit], "recursion").await;
    }
}

#[tokio::test]
async fn native_stack_overflow_kills_only_the_worker() {
    let (pool, _shutdown) = pool(1);
    for code in [
        r#"return eval("[".repeat(100000))"#,
        r#"let a = []; for (let i = 0; i < 200000; i++) a = [a]; return JSON.stringify(a).length"#,
    ] {
        // Generous: on a loaded machine this run has taken over 10 s before it crashed.
        let outcome = run_with(&pool, &TestHost::new(), code, wall(30)).await;
        let (kind, message) = failure(&outcome);
        assert!(
            matches!(
                kind,
                FailureKind::Crash | FailureKind::Limit | FailureKind::Exception
            ),
            "{code}: {kind:?}: {message}"
        );
        assert_pool_serves(&pool).await;
    }
}

#[tokio::test]
async fn memory_hogs_hit_the_memory_limit() {
    let (pool, _shutdown) = pool(1);
    for code in [
        r#"return "x".repeat(2 ** 28).length"#,
        // `repeat` charges the loop counter per repetition, so the 1 MiB chunk is built by doubling.
        r#"let chunk = "x"; for (let k = 0; k < 20; k++) chunk += chunk;
           const a = []; for (let i = 0; ; i++) a.push(chunk + i); return a.length"#,
        r#"let s = "xy"; while (true) s = s + s; return s.length"#,
    ] {
        assert_ends(&pool, code, wall(10), &[FailureKind::Limit], "memory").await;
    }
}

#[tokio::test]
async fn output_floods_are_cut() {
    let (pool, _shutdown) = pool(1);
    let limits = Limits {
        max_output_bytes: 64 * 1024,
        ..wall(10)
    };
    let outcome = run_with(
        &pool,
        &TestHost::new(),
        "while (true) console.log('x'.repeat(1000))",
        limits.clone(),
    )
    .await;
    let (kind, message) = failure(&outcome);
    assert_eq!(
        (kind, message.as_str()),
        (FailureKind::Limit, "output over 65536 bytes")
    );
    assert_eq!(outcome.logs.len(), 65, "the captured lines before the cut");
    assert!(outcome.text().contains("\nCaptured output:\nxxx"));

    let (kind, message) =
        failure(&run_with(&pool, &TestHost::new(), "return 'y'.repeat(70000)", limits).await);
    assert_eq!(
        (kind, message.as_str()),
        (FailureKind::Limit, "output over 65536 bytes")
    );
    assert_pool_serves(&pool).await;
}

#[tokio::test]
async fn nothing_outside_the_sandbox_is_reachable() {
    let (pool, _shutdown) = pool(1);
    let outcome = run(
        &pool,
        "return [typeof require, typeof process, typeof fetch, typeof setTimeout, typeof setInterval, \
         typeof XMLHttpRequest, typeof Deno, typeof Bun]",
    )
    .await;
    assert_eq!(value(&outcome), json!(vec!["undefined"; 8]));

    for (code, needle) in [
        ("require('fs')", "ReferenceError"),
        ("return process.env", "ReferenceError"),
        ("return await fetch('http://example.com')", "ReferenceError"),
        (
            "return await import('/etc/passwd')",
            "module resolution is disabled",
        ),
        (
            "return await import('./x.mjs')",
            "module resolution is disabled",
        ),
    ] {
        let (kind, message) = failure(&run(&pool, code).await);
        assert_eq!(kind, FailureKind::Exception, "{code}: {message}");
        assert!(message.contains(needle), "{code}: {message}");
    }

    // The global object reached through `Function` is the sandbox's own.
    let outcome = run(
        &pool,
        "const g = Function('return this')(); g.marker = 1;\n\
         return [g === globalThis, typeof g.process, typeof g.require, Object.keys(g).sort()]",
    )
    .await;
    assert_eq!(
        value(&outcome),
        json!([true, "undefined", "undefined", ["marker"]])
    );
    let outcome = run(&pool, "return typeof Function('return this')().marker").await;
    assert_eq!(value(&outcome), json!("undefined"));
    assert_pool_serves(&pool).await;
}

#[test]
fn the_worker_self_check_reports_everything_refused() {
    let output = Command::new(common::toolgate())
        .args(["worker", "--self-check"])
        .env_clear()
        // As the pool starts workers (`code_mode/pool/process.rs`).
        .env("MIMALLOC_ARENA_RESERVE", "0")
        .output()
        .expect("the binary runs");
    assert!(output.status.success(), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON line");
    for key in ["socket", "open", "exec"] {
        let verdict = report[key].as_str().unwrap_or_default();
        assert!(verdict.starts_with("refused: "), "{key}: {report}");
    }
    assert_eq!(report["open"], "refused: EPERM", "{report}");
}
