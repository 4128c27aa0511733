//! A task-augmented `tools/call` (MCP 2025-11-25) keeps its progress token for the task's life: the upstream's `notifications/progress` for the task reach the client that created it, under the client's own token, after the call itself has been answered.
//!
//! The upstream is `tests/fixtures/task_progress_server.cjs` (on the TypeScript SDK the
//! interop tests install): its `count` tool runs as a task and reports one progress
//! notification per step on the token of the call that created the task.

mod common;

use std::time::{Duration, Instant};

use common::{interop::Deps, *};
use serde_json::json;

#[tokio::test]
async fn a_tasks_progress_reaches_its_client_under_the_clients_token() {
    let deps = Deps::installed();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/task_progress_server.cjs");
    let work = Workdir::new(&format!(
        "[servers.counter]\ncommand = {}\nargs = [{}, {}]\n",
        toml_string(&deps.node.display().to_string()),
        toml_string(&fixture.display().to_string()),
        toml_string(&deps.node_modules.display().to_string()),
    ));
    let mut raw = RawStdio::spawn(&work);
    raw.send(
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "tasks-progress", "version": "0"}}}),
    )
    .await;
    raw.next_answer().await;
    raw.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;

    raw.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "counter__count", "arguments": {"steps": 3},
        "task": {"ttl": 60000}, "_meta": {"progressToken": "mine-7"}}}),
    )
    .await;
    let created = raw.next_answer().await;
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned();

    // Every step's progress arrives, under the token this client gave.
    let started = Instant::now();
    let mut steps: Vec<f64> = Vec::new();
    while steps.len() < 3 {
        let message = raw.next().await;
        if message["method"] == "notifications/progress" {
            assert_eq!(message["params"]["progressToken"], "mine-7", "{message}");
            steps.push(message["params"]["progress"].as_f64().unwrap_or(-1.0));
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "progress so far: {steps:?}"
        );
    }
    assert_eq!(steps, vec![1.0, 2.0, 3.0]);

    raw.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/result",
        "params": {"taskId": task}}))
        .await;
    let done = raw.next_answer().await;
    assert_eq!(
        done["result"]["content"][0]["text"], "counted to 3",
        "{done}"
    );
}
