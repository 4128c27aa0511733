//! What an upstream asks during a task (MCP 2025-11-25: an `elicitation/create` naming the task in its related-task `_meta`, delivered while the client waits in `tasks/result`) reaches the client that owns the task, over an HTTP client session and from an HTTP upstream, and the client's answer reaches the upstream.
//!
//! The task server is the reference `server-everything`: its `simulate-research-query` with
//! `ambiguous: true` asks for a clarification during the task and names the one it got in
//! its report.

mod common;

use std::time::{Duration, Instant};

use common::{interop::Deps, *};
use serde_json::{Value, json};

const RESEARCH: &str = "everything__simulate-research-query";

fn initialize(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "tasks-asks", "version": "0"}
    }})
}

fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn ambiguous_call(id: u64) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": RESEARCH, "arguments": {"topic": "python", "ambiguous": true},
               "task": {"ttl": 60000}}),
    )
}

/// server-everything over stdio.
fn everything_stdio() -> Workdir {
    let deps = Deps::installed();
    Workdir::new(&format!(
        "[servers.everything]\ncommand = {}\nargs = [{}, \"stdio\"]\n",
        toml_string(&deps.node.display().to_string()),
        toml_string(&deps.server_js("server-everything").display().to_string()),
    ))
}

/// Asks `tools/list` until the research tool is there.
async fn research_listed(mut ask: impl AsyncFnMut(Value) -> Value) {
    let started = Instant::now();
    for id in 1.. {
        let answer = ask(request(id, "tools/list", json!({}))).await;
        let listed = answer_result(&answer)["tools"]
            .as_array()
            .is_some_and(|tools| tools.iter().any(|t| t["name"] == RESEARCH));
        if listed {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{answer}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A 2025-11-25 HTTP session of toolgate at `url` that declares elicitation; its id.
async fn http_session(url: &str) -> String {
    let response = mcp_post(url, None, &[], &initialize(0)).await;
    let session = response.headers()["mcp-session-id"]
        .to_str()
        .expect("a session id")
        .to_owned();
    jsonrpc_answer(response).await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    mcp_post(url, Some(&session), &[], &initialized).await;
    session
}

#[tokio::test]
async fn over_http_the_tasks_elicitation_rides_its_tasks_result_stream() {
    an_http_client_answers_during_its_task(&everything_stdio()).await;
}

#[tokio::test]
async fn over_http_an_http_upstreams_elicitation_rides_the_tasks_result_stream() {
    let (_server, url) = Deps::installed().everything_over_http().await;
    let work = Workdir::new(&format!(
        "[servers.everything]\nurl = {}\n",
        toml_string(&url)
    ));
    an_http_client_answers_during_its_task(&work).await;
}

/// An HTTP client of `work` (server-everything as `everything`) starts an ambiguous task,
/// waits in `tasks/result`, gets the server's elicitation on that request's stream and
/// answers it.
async fn an_http_client_answers_during_its_task(work: &Workdir) {
    let gateway = HttpGateway::start(work).await;
    let url = gateway.url.clone();
    let session = http_session(&url).await;
    research_listed(async |message| {
        jsonrpc_answer(mcp_post(&url, Some(&session), &[], &message).await).await
    })
    .await;

    let created =
        jsonrpc_answer(mcp_post(&url, Some(&session), &[], &ambiguous_call(50)).await).await;
    let task = answer_result(&created)["task"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    // The client waits for the result; the question comes on that request's stream.
    let wait = request(51, "tasks/result", json!({"taskId": task}));
    let mut stream = mcp_post(&url, Some(&session), &[], &wait).await;
    let mut buffer = String::new();
    let asked = tokio::time::timeout(
        Duration::from_secs(15),
        next_event(&mut stream, &mut buffer, |m| {
            m["method"] == "elicitation/create"
        }),
    )
    .await
    .unwrap_or_else(|_| {
        let log = gateway.log.lock().unwrap().clone();
        panic!("the elicitation arrives on the tasks/result stream; log: {log}")
    });
    assert_eq!(
        asked["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], task,
        "the task is named by toolgate's id: {asked}"
    );
    let answer = json!({"jsonrpc": "2.0", "id": asked["id"],
        "result": {"action": "accept", "content": {"interpretation": "snake"}}});
    let accepted = mcp_post(&url, Some(&session), &[], &answer).await;
    assert_eq!(accepted.status(), 202);
    let done = tokio::time::timeout(
        Duration::from_secs(20),
        next_event(&mut stream, &mut buffer, |m| m["id"] == 51),
    )
    .await
    .expect("tasks/result is answered on its stream");
    let text = answer_result(&done)["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("Research Report: python (snake)"), "{done}");
}

/// A stdio client of `work` (server-everything as `everything`) starts an ambiguous task,
/// waits in `tasks/result`, gets the server's elicitation there and answers `choice`.
async fn a_stdio_client_answers_during_its_task(work: &Workdir, choice: &str) {
    let mut raw = RawStdio::spawn(work);
    raw.send(&initialize(0)).await;
    raw.next_answer().await;
    raw.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    research_listed(async |message| {
        raw.send(&message).await;
        raw.next_answer().await
    })
    .await;

    raw.send(&ambiguous_call(50)).await;
    let created = raw.next_answer().await;
    let task = answer_result(&created)["task"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    raw.send(&request(51, "tasks/result", json!({"taskId": task})))
        .await;
    let started = Instant::now();
    let asked = loop {
        let message = raw.next().await;
        if message["method"] == "elicitation/create" {
            break message;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "no elicitation: {message}"
        );
    };
    assert_eq!(
        asked["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], task,
        "{asked}"
    );
    raw.send(&json!({"jsonrpc": "2.0", "id": asked["id"],
        "result": {"action": "accept", "content": {"interpretation": choice}}}))
        .await;
    // The server's status notifications come too, under toolgate's id.
    let mut statuses = Vec::new();
    let done = loop {
        let message = raw.next().await;
        if message["method"] == "notifications/tasks/status" {
            assert_eq!(message["params"]["taskId"], task, "{message}");
            statuses.push(message["params"]["status"].clone());
        }
        if message["id"] == 51 {
            break message;
        }
    };
    let text = answer_result(&done)["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains(&format!("Research Report: python ({choice})")),
        "{done}"
    );
    assert!(statuses.contains(&json!("working")), "{statuses:?}");
}

#[tokio::test]
async fn an_http_upstreams_elicitation_during_a_task_reaches_the_client() {
    // The server asks on the stream of toolgate's own tasks/result; toolgate relays it.
    let (_server, url) = Deps::installed().everything_over_http().await;
    let work = Workdir::new(&format!(
        "[servers.everything]\nurl = {}\n",
        toml_string(&url)
    ));
    a_stdio_client_answers_during_its_task(&work, "comedy").await;
}

#[tokio::test]
async fn a_stdio_upstreams_elicitation_during_a_task_reaches_a_stdio_client() {
    a_stdio_client_answers_during_its_task(&everything_stdio(), "snake").await;
}

#[tokio::test]
async fn a_tasks_elicitation_finds_its_session_while_another_calls_the_same_server() {
    let work = everything_stdio();
    let gateway = HttpGateway::start(&work).await;
    let url = gateway.url.clone();
    let mine = http_session(&url).await;
    let other = http_session(&url).await;
    research_listed(async |message| {
        jsonrpc_answer(mcp_post(&url, Some(&mine), &[], &message).await).await
    })
    .await;

    // The other session keeps a call in flight on the same server for a few seconds: two
    // sessions busy there, which the server's elicitation alone could not choose between.
    let busy = json!({"jsonrpc": "2.0", "id": 70, "method": "tools/call", "params": {
        "name": "everything__trigger-long-running-operation",
        "arguments": {"duration": 6, "steps": 3}}});
    let (other_url, other_session) = (url.clone(), other.clone());
    let busy = tokio::spawn(async move {
        jsonrpc_answer(mcp_post(&other_url, Some(&other_session), &[], &busy).await).await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;

    let created = jsonrpc_answer(mcp_post(&url, Some(&mine), &[], &ambiguous_call(50)).await).await;
    let task = answer_result(&created)["task"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    let wait = request(51, "tasks/result", json!({"taskId": task}));
    let mut stream = mcp_post(&url, Some(&mine), &[], &wait).await;
    let mut buffer = String::new();
    let asked = tokio::time::timeout(
        Duration::from_secs(15),
        next_event(&mut stream, &mut buffer, |m| {
            m["method"] == "elicitation/create"
        }),
    )
    .await
    .expect("the elicitation reaches the task's session");
    let answer = json!({"jsonrpc": "2.0", "id": asked["id"],
        "result": {"action": "accept", "content": {"interpretation": "snake"}}});
    mcp_post(&url, Some(&mine), &[], &answer).await;
    let done = tokio::time::timeout(
        Duration::from_secs(20),
        next_event(&mut stream, &mut buffer, |m| m["id"] == 51),
    )
    .await
    .expect("tasks/result is answered");
    let text = answer_result(&done)["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("Research Report: python (snake)"), "{done}");
    let busy = busy.await.expect("the other call");
    assert!(busy.get("result").is_some(), "{busy}");
}
