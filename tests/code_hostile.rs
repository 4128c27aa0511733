//! Hostile programs end with the right failure kind, and the gateway keeps answering another session meanwhile.

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

fn gateway_dir() -> Workdir {
    Workdir::new(&format!(
        "[gateway]\nmode = \"both\"\n[gateway.code]\ntimeout_ms = 4000\nworkers = 2\nmax_output_bytes = 65536\n\
         loop_iterations = 200000\n\n{}",
        server_toml("echo", "echo_server", &[])
    ))
}

/// Runs `code` on session `hostile` while session `bystander` makes calls; returns the run's
/// result after checking every bystander call was answered promptly.
async fn run_while_another_session_calls(
    hostile: &Client,
    bystander: &Client,
    code: &str,
) -> rmcp::model::CallToolResult {
    let peer = hostile.peer().clone();
    let code = code.to_owned();
    let run = tokio::spawn(async move {
        let mut params = rmcp::model::CallToolRequestParams::new("run_code");
        params.arguments = json!({ "code": code }).as_object().cloned();
        peer.call_tool(params).await
    });
    tokio::time::sleep(Duration::from_millis(150)).await;
    for i in 0..3 {
        let started = Instant::now();
        let echoed = tokio::time::timeout(
            Duration::from_secs(5),
            call(bystander, "echo__echo", json!({"text": format!("b{i}")})),
        )
        .await
        .expect("the other session is answered while the hostile run goes on")
        .expect("echo succeeds");
        assert_eq!(text(&echoed), format!("b{i}"));
        assert!(started.elapsed() < Duration::from_secs(5));
    }
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the hostile run ends within its limits")
        .expect("task")
        .expect("run_code answers")
}

#[tokio::test]
async fn hostile_programs_fail_with_their_kind_while_others_are_served() {
    let work = gateway_dir();
    let http = HttpGateway::start(&work).await;
    let (hostile, _) = http.client().await;
    let (bystander, _) = http.client().await;
    let cases: &[(&str, &str, &[&str])] = &[
        ("syntax error", "return (1 + ;", &["syntax"]),
        (
            "throw",
            "throw new Error('thrown on purpose')",
            &["exception"],
        ),
        (
            "unhandled rejection",
            "await Promise.reject(new Error('rejected on purpose'))",
            &["exception"],
        ),
        (
            "never-settling promise",
            "await new Promise(() => {})",
            &["exception", "timeout"],
        ),
        // A limit well under the deadline: each of these must end by the loop limit, which
        // Boa alone would lose after an `await` (see `worker/typescript.rs`).
        ("busy loop", "while (true) {}", &["limit"]),
        (
            "busy loop in try/catch",
            "try { while (true) {} } catch (e) { return 'caught'; }",
            &["limit"],
        ),
        (
            "busy loop after an await",
            "await tools.echo__echo({text: 'x'}); while (true) {}",
            &["limit"],
        ),
        (
            "busy loop after an await in a nested async function",
            "async function spin() { await null; for (;;) {} } await spin();",
            &["limit"],
        ),
        (
            "catastrophic regex",
            "return /(a+)+$/.test('a'.repeat(40) + '!')",
            &["timeout", "limit"],
        ),
        (
            "deep recursion",
            "function f(n) { return f(n + 1) + 1; } return f(0);",
            &["limit"],
        ),
        // Like the loops above: Boa's own recursion limit is lost after an `await`.
        (
            "deep recursion after an await",
            "await tools.echo__echo({text: 'x'}); function f(n) { return f(n + 1) + 1; } return f(0);",
            &["limit"],
        ),
        (
            "deep recursion after an await in a nested async function",
            "async function deep() { await null; const f = (n) => f(n + 1) + 1; return f(0); } return await deep();",
            &["limit"],
        ),
        (
            "deep recursion of async functions after an await",
            "async function f(n) { if (n === 0) await null; return 1 + await f(n + 1); } return await f(0);",
            &["limit"],
        ),
        (
            "native stack overflow attempt",
            "return eval('['.repeat(100000) + ']'.repeat(100000));",
            &["limit", "crash", "exception", "syntax"],
        ),
        (
            "huge string",
            "const s = 'x'.repeat(2 ** 28); return s.length;",
            &["limit"],
        ),
        (
            "ever-growing array",
            "const a = []; while (true) { a.push(new Array(100000).fill(7)); }",
            &["limit", "timeout"],
        ),
        (
            "console flood",
            "while (true) { console.log('y'.repeat(1000)); }",
            &["limit"],
        ),
        (
            "ten thousand tool calls",
            "for (let i = 0; i < 10000; i++) { await tools.echo__echo({text: 'x'}); }",
            &["limit"],
        ),
    ];
    for (what, program, kinds) in cases {
        let result = run_while_another_session_calls(&hostile, &bystander, program).await;
        assert_eq!(result.is_error, Some(true), "{what}: {result:?}");
        assert_eq!(code(&result).as_deref(), Some("CODE_RUN_FAILED"), "{what}");
        let found = kind(&result).unwrap_or_default();
        assert!(
            kinds.contains(&found.as_str()),
            "{what}: kind {found:?}, expected one of {kinds:?}: {}",
            text(&result)
        );
        // The same session can run a program again right after.
        let ok = call(&hostile, "run_code", json!({"code": "return 'still here'"}))
            .await
            .unwrap();
        assert_eq!(text(&ok), "still here", "after {what}");
    }
}

#[tokio::test]
async fn nothing_of_the_host_is_reachable_and_nothing_survives_a_run() {
    let work = gateway_dir();
    let (client, _) = stdio_client(&work).await;
    let probe = call(
        &client,
        "run_code",
        json!({"code": "return [typeof require, typeof process, typeof fetch, typeof setTimeout, typeof Deno, typeof Function('return this')().process]"}),
    )
    .await
    .unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&text(&probe)).unwrap(),
        json!([
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            "undefined"
        ])
    );
    let import = call(
        &client,
        "run_code",
        json!({"code": "const m = await import('/etc/passwd'); return String(m);"}),
    )
    .await
    .unwrap();
    assert_eq!(import.is_error, Some(true), "{import:?}");
    assert!(!text(&import).contains("root:"), "{}", text(&import));

    let set = call(
        &client,
        "run_code",
        json!({"code": "globalThis.leak = 42; return 'set';"}),
    )
    .await
    .unwrap();
    assert_eq!(text(&set), "set");
    for _ in 0..4 {
        // Whichever warm worker takes it, the next run starts from a fresh context.
        let seen = call(
            &client,
            "run_code",
            json!({"code": "return typeof globalThis.leak;"}),
        )
        .await
        .unwrap();
        assert_eq!(text(&seen), "undefined");
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn twenty_concurrent_runs_from_four_sessions_get_their_own_results() {
    let work = gateway_dir();
    let http = HttpGateway::start(&work).await;
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(http.client().await.0);
    }
    let runs = (0..20).map(|i| {
        let client = &clients[i % 4];
        async move {
            let code = format!(
                "const r = await tools.echo__add({{a: {i}, b: 1000}}); return {{ i: {i}, sum: r.sum }};"
            );
            let result = call(client, "run_code", json!({ "code": code })).await.unwrap();
            (i, result)
        }
    });
    for (i, result) in futures::future::join_all(runs).await {
        assert_ne!(result.is_error, Some(true), "run {i}: {result:?}");
        let value: serde_json::Value = serde_json::from_str(&text(&result)).unwrap();
        assert_eq!(value, json!({"i": i, "sum": i + 1000}), "run {i}");
    }
}
