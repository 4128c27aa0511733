//! A task-augmented `tools/call` (MCP 2025-11-25) keeps its progress token for the task's life: the upstream's `notifications/progress` for the task reach the client that created it, under the client's own token, after the call itself has been answered (over HTTP, on the session's event stream).
//!
//! The upstream is `tests/fixtures/task_progress_server.cjs` (on the TypeScript SDK the
//! interop tests install): its `count` tool runs as a task and reports one progress
//! notification per step on the token of the call that created the task.

mod common;

use std::time::{Duration, Instant};

use common::{interop::Deps, *};
use serde_json::json;

/// The fixture as the server `counter`.
fn counter() -> Workdir {
    let deps = Deps::installed();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/task_progress_server.cjs");
    Workdir::new(&format!(
        "[servers.counter]\ncommand = {}\nargs = [{}, {}]\n",
        toml_string(&deps.node.display().to_string()),
        toml_string(&fixture.display().to_string()),
        toml_string(&deps.node_modules.display().to_string()),
    ))
}

fn initialize() -> serde_json::Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "tasks-progress", "version": "0"}}})
}

/// A task call of `count` for three steps, with the progress token `mine-7`.
fn count_call(id: u64) -> serde_json::Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "counter__count", "arguments": {"steps": 3},
        "task": {"ttl": 60000}, "_meta": {"progressToken": "mine-7"}}})
}

#[tokio::test]
async fn a_tasks_progress_reaches_its_client_under_the_clients_token() {
    let work = counter();
    let mut raw = RawStdio::spawn(&work);
    raw.send(&initialize()).await;
    raw.next_answer().await;
    raw.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    raw.send(&count_call(1)).await;
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

#[tokio::test]
async fn over_http_a_tasks_progress_reaches_the_sessions_event_stream() {
    let work = counter();
    let gateway = HttpGateway::start(&work).await;
    let url = gateway.url.clone();
    let response = mcp_post(&url, None, &[], &initialize()).await;
    let session = response.headers()["mcp-session-id"]
        .to_str()
        .expect("a session id")
        .to_owned();
    jsonrpc_answer(response).await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    mcp_post(&url, Some(&session), &[], &initialized).await;
    // The session's event stream, where what belongs to no open request goes.
    let mut events = reqwest::Client::new()
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .send()
        .await
        .expect("GET the event stream");
    assert_eq!(events.status(), 200);

    let created = loop {
        let answer =
            jsonrpc_answer(mcp_post(&url, Some(&session), &[], &count_call(1)).await).await;
        if answer.get("result").is_some() {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(created["result"]["task"]["taskId"].is_string(), "{created}");
    let mut buffer = String::new();
    let mut steps = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), async {
        while steps.len() < 3 {
            let chunk = events
                .chunk()
                .await
                .expect("the event stream stays readable")
                .expect("the event stream stays open");
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find('\n') {
                let line: String = buffer.drain(..=end).collect();
                if let Some(data) = line.trim_end().strip_prefix("data:")
                    && let Ok(message) = serde_json::from_str::<serde_json::Value>(data.trim())
                    && message["method"] == "notifications/progress"
                {
                    assert_eq!(message["params"]["progressToken"], "mine-7", "{message}");
                    steps.push(message["params"]["progress"].as_f64().unwrap_or(-1.0));
                }
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("progress on the event stream: {steps:?}"));
    assert_eq!(steps, vec![1.0, 2.0, 3.0]);
}
