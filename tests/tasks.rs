//! Tasks (MCP 2025-11-25) through toolgate: a task-augmented `tools/call`, `tasks/get`,
//! `tasks/result`, `tasks/list`, `tasks/cancel` and `notifications/tasks/status` reach the
//! server that owns the task and come back with toolgate's own task ids, per session.
//!
//! The task server is the reference `server-everything` (its `simulate-research-query` tool
//! declares `execution.taskSupport: "required"` and runs about four seconds); `echo` is our
//! example server, which offers no tasks. Clients are raw JSON-RPC over toolgate's stdio and
//! HTTP endpoints, so every byte that matters is checked.

mod common;

use std::time::{Duration, Instant};

use common::{interop::Deps, *};
use serde_json::{Value, json};

const RESEARCH: &str = "everything__simulate-research-query";
const TERMINAL: [&str; 3] = ["completed", "failed", "cancelled"];

/// server-everything over stdio and the echo example; `plain` sees only echo.
fn config() -> Workdir {
    let deps = Deps::installed();
    let work = Workdir::new("");
    let node = toml_string(&deps.node.display().to_string());
    let js = toml_string(&deps.server_js("server-everything").display().to_string());
    let toml = format!(
        "[servers.everything]\ncommand = {node}\nargs = [{js}, \"stdio\"]\n\n{}\n\
         [profiles.plain]\nallow = [\"echo__*\"]\n",
        server_toml("echo", "echo_server", &[]),
    );
    std::fs::write(work.config(), toml).expect("write servers.toml");
    work
}

fn initialize(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "tasks-test", "version": "0"}
    }})
}

fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn task_call(id: u64, tool: &str, arguments: Value) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": tool, "arguments": arguments, "task": {"ttl": 60000}}),
    )
}

/// One raw client of either endpoint: sends a request and returns its answer.
enum Client {
    Stdio(Box<RawStdio>),
    Http { url: String, session: String },
}

impl Client {
    async fn ask(&mut self, message: Value) -> Value {
        match self {
            Client::Stdio(raw) => {
                raw.send(&message).await;
                let answer = raw.next_answer().await;
                assert_eq!(answer["id"], message["id"], "{answer}");
                answer
            }
            Client::Http { url, session } => {
                let response = mcp_post(url, Some(session), &[], &message).await;
                jsonrpc_answer(response).await
            }
        }
    }

    /// Polls `tasks/get` until the task ends; every answer names `id`.
    async fn until_done(&mut self, id: &str, next_id: &mut u64) -> Value {
        let started = Instant::now();
        loop {
            *next_id += 1;
            let answer = self
                .ask(request(*next_id, "tasks/get", json!({"taskId": id})))
                .await;
            let task = answer_result(&answer).clone();
            assert_eq!(task["taskId"], id, "{answer}");
            assert!(task["createdAt"].is_string(), "{answer}");
            if TERMINAL.contains(&task["status"].as_str().unwrap_or_default()) {
                return task;
            }
            assert!(
                started.elapsed() < Duration::from_secs(40),
                "the task did not end: {task}"
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

/// Opens a raw HTTP session on `url` with a 2025-11-25 `initialize`; its id and the answer.
async fn http_session(url: &str) -> (String, Value) {
    open_session(url, &[], &initialize(0)).await
}

/// Waits until `tools/list` shows the research tool (server-everything registers it after
/// the handshake); returns its definition.
async fn research_tool(client: &mut Client, next_id: &mut u64) -> Value {
    let started = Instant::now();
    loop {
        *next_id += 1;
        let answer = client.ask(request(*next_id, "tools/list", json!({}))).await;
        let tools = answer_result(&answer)["tools"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if let Some(tool) = tools.into_iter().find(|t| t["name"] == RESEARCH) {
            return tool;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no {RESEARCH}: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The whole life of a task, then a cancelled one, the errors, and the list.
async fn lifecycle(client: &mut Client) {
    let mut id = 10;
    let tool = research_tool(client, &mut id).await;
    assert_eq!(tool["execution"]["taskSupport"], "required", "{tool}");

    id += 1;
    let created = client
        .ask(task_call(id, RESEARCH, json!({"topic": "gateways"})))
        .await;
    let task = &answer_result(&created)["task"];
    let task_id = task["taskId"].as_str().expect("a task id").to_owned();
    assert!(task_id.starts_with("tg-"), "toolgate's own id: {created}");
    assert_eq!(task["status"], "working", "{created}");
    assert!(
        task["ttl"].is_number(),
        "the server's fields pass: {created}"
    );

    let done = client.until_done(&task_id, &mut id).await;
    assert_eq!(done["status"], "completed", "{done}");

    id += 1;
    let answer = client
        .ask(request(id, "tasks/result", json!({"taskId": task_id})))
        .await;
    let payload = answer_result(&answer);
    let text = payload["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("Research Report: gateways"), "{answer}");
    assert_eq!(
        payload["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], task_id,
        "the related task is named by toolgate's id: {answer}"
    );

    // A second task, cancelled while it works.
    id += 1;
    let created = client
        .ask(task_call(id, RESEARCH, json!({"topic": "cancel me"})))
        .await;
    let second = answer_result(&created)["task"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    assert_ne!(second, task_id);
    id += 1;
    let cancelled = client
        .ask(request(id, "tasks/cancel", json!({"taskId": second})))
        .await;
    assert_eq!(answer_result(&cancelled)["taskId"], second, "{cancelled}");
    assert_eq!(
        answer_result(&cancelled)["status"],
        "cancelled",
        "{cancelled}"
    );
    // Already terminal: the server's own -32602 comes through.
    id += 1;
    let again = client
        .ask(request(id, "tasks/cancel", json!({"taskId": second})))
        .await;
    assert_eq!(answer_error_code(&again), -32602, "{again}");

    // Both tasks are listed, under toolgate's ids, with their state now.
    id += 1;
    let listed = client.ask(request(id, "tasks/list", json!({}))).await;
    let tasks = answer_result(&listed)["tasks"]
        .as_array()
        .expect("tasks")
        .clone();
    let status_of = |wanted: &str| {
        tasks
            .iter()
            .find(|t| t["taskId"] == wanted)
            .map(|t| t["status"].clone())
    };
    assert_eq!(status_of(&task_id), Some(json!("completed")), "{listed}");
    assert_eq!(status_of(&second), Some(json!("cancelled")), "{listed}");
    assert!(
        answer_result(&listed).get("nextCursor").is_none(),
        "{listed}"
    );
    id += 1;
    let bad_cursor = client
        .ask(request(id, "tasks/list", json!({"cursor": "not-a-cursor"})))
        .await;
    assert_eq!(answer_error_code(&bad_cursor), -32602, "{bad_cursor}");

    // Unknown ids, for every task method: invalid params, as the spec says.
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        for unknown in ["tg-999999", "0", ""] {
            id += 1;
            let answer = client
                .ask(request(id, method, json!({"taskId": unknown})))
                .await;
            assert_eq!(
                answer_error_code(&answer),
                -32602,
                "{method} {unknown}: {answer}"
            );
        }
    }

    // A tool of a server without tasks cannot be run as one (-32601, spec 2025-11-25)...
    id += 1;
    let answer = client
        .ask(task_call(id, "echo__echo", json!({"text": "hi"})))
        .await;
    assert_eq!(answer_error_code(&answer), -32601, "{answer}");
    // ...and a task call still meets the pipeline's checks before it is forwarded.
    id += 1;
    let answer = client
        .ask(task_call(id, RESEARCH, json!({"topic": 5})))
        .await;
    assert_eq!(answer_error_code(&answer), -32602, "{answer}");
    assert_eq!(answer["error"]["data"]["code"], "INVALID_ARGS", "{answer}");
    id += 1;
    let answer = client.ask(task_call(id, "nope__nothing", json!({}))).await;
    assert_eq!(answer_error_code(&answer), -32602, "{answer}");
}

#[tokio::test]
async fn a_stdio_client_runs_polls_reads_lists_and_cancels_tasks() {
    let work = config();
    let mut raw = RawStdio::spawn(&work);
    raw.send(&initialize(0)).await;
    let answer = raw.next_answer().await;
    assert_eq!(
        answer_result(&answer)["capabilities"]["tasks"]["requests"]["tools"]["call"],
        json!({}),
        "a visible server offers tasks, so toolgate does: {answer}"
    );
    raw.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let mut client = Client::Stdio(Box::new(raw));
    lifecycle(&mut client).await;

    // The server's status notifications reach this session, under toolgate's ids.
    let Client::Stdio(mut raw) = client else {
        unreachable!()
    };
    raw.send(&task_call(900, RESEARCH, json!({"topic": "notes"})))
        .await;
    let created = raw.next_answer().await;
    let task_id = answer_result(&created)["task"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    let started = Instant::now();
    let status = loop {
        let message = raw.next().await;
        if message["method"] == "notifications/tasks/status"
            && message["params"]["status"] == "completed"
        {
            break message;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no completed status"
        );
    };
    assert_eq!(status["params"]["taskId"], task_id, "{status}");
}

#[tokio::test]
async fn http_sessions_keep_their_tasks_apart_and_profiles_without_tasks_offer_none() {
    let work = config();
    let gateway = HttpGateway::start(&work).await;
    let (session, answer) = http_session(&gateway.url).await;
    assert!(
        answer_result(&answer)["capabilities"]["tasks"].is_object(),
        "{answer}"
    );
    let mut client = Client::Http {
        url: gateway.url.clone(),
        session,
    };
    lifecycle(&mut client).await;

    // A task of this session is unknown to another session of the same profile.
    let mut id = 500;
    let created = client
        .ask(task_call(id, RESEARCH, json!({"topic": "mine"})))
        .await;
    let mine = answer_result(&created)["task"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    let (other_session, _) = http_session(&gateway.url).await;
    let mut other = Client::Http {
        url: gateway.url.clone(),
        session: other_session,
    };
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        id += 1;
        let answer = other
            .ask(request(id, method, json!({"taskId": mine})))
            .await;
        assert_eq!(answer_error_code(&answer), -32602, "{method}: {answer}");
    }
    id += 1;
    let listed = other.ask(request(id, "tasks/list", json!({}))).await;
    assert_eq!(answer_result(&listed)["tasks"], json!([]), "{listed}");
    // Still the owner's, and still running.
    id += 1;
    let answer = client
        .ask(request(id, "tasks/get", json!({"taskId": mine})))
        .await;
    assert_eq!(answer_result(&answer)["taskId"], mine, "{answer}");

    // A profile that sees no task-capable tool declares no tasks, and runs none.
    let plain = format!("{}/plain", gateway.url);
    let (plain_session, answer) = http_session(&plain).await;
    assert!(
        answer_result(&answer)["capabilities"]
            .get("tasks")
            .is_none(),
        "{answer}"
    );
    let mut plain = Client::Http {
        url: plain,
        session: plain_session,
    };
    id += 1;
    let answer = plain
        .ask(task_call(id, RESEARCH, json!({"topic": "hidden"})))
        .await;
    assert_eq!(
        answer_error_code(&answer),
        -32602,
        "a hidden tool is unknown: {answer}"
    );
    // Spec 2025-11-25: where tasks are not declared, a call's `task` is ignored...
    id += 1;
    let answer = plain
        .ask(task_call(id, "echo__echo", json!({"text": "hi"})))
        .await;
    assert_eq!(
        answer_result(&answer)["content"][0]["text"],
        "hi",
        "{answer}"
    );
    assert!(answer_result(&answer).get("task").is_none(), "{answer}");
    // ...and the task methods are not served.
    for method in ["tasks/list", "tasks/get"] {
        id += 1;
        let answer = plain
            .ask(request(id, method, json!({"taskId": mine})))
            .await;
        assert_eq!(answer_error_code(&answer), -32601, "{method}: {answer}");
    }
}

#[tokio::test]
async fn an_http_upstream_runs_tasks_through_a_stdio_client() {
    let (_server, url) = Deps::installed().everything_over_http().await;
    let work = Workdir::new(&format!(
        "[servers.everything]\nurl = {}\n\n{}",
        toml_string(&url),
        server_toml("echo", "echo_server", &[])
    ));
    let mut raw = RawStdio::spawn(&work);
    raw.send(&initialize(0)).await;
    let answer = raw.next_answer().await;
    assert!(
        answer_result(&answer)["capabilities"]["tasks"].is_object(),
        "{answer}"
    );
    raw.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let mut client = Client::Stdio(Box::new(raw));
    let mut id = 10;
    research_tool(&mut client, &mut id).await;
    id += 1;
    let created = client
        .ask(task_call(id, RESEARCH, json!({"topic": "over http"})))
        .await;
    let task_id = answer_result(&created)["task"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    assert!(task_id.starts_with("tg-"), "{created}");
    // `tasks/result` before the end: it waits for the task, then gives its result.
    id += 1;
    let answer = client
        .ask(request(id, "tasks/result", json!({"taskId": task_id})))
        .await;
    let text = answer_result(&answer)["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("Research Report: over http"), "{answer}");
    let done = client.until_done(&task_id, &mut id).await;
    assert_eq!(done["status"], "completed", "{done}");
}

#[tokio::test]
async fn a_waiting_tasks_result_is_bounded_by_the_tool_timeout_and_can_be_cancelled() {
    let deps = Deps::installed();
    let work = Workdir::new(&format!(
        "[servers.everything]\ncommand = {}\nargs = [{}, \"stdio\"]\ntimeout_ms = 1500\n",
        toml_string(&deps.node.display().to_string()),
        toml_string(&deps.server_js("server-everything").display().to_string()),
    ));
    let raw = RawStdio::start(&work).await;
    let mut client = Client::Stdio(Box::new(raw));
    let mut id = 10;
    research_tool(&mut client, &mut id).await;
    id += 1;
    let created = client
        .ask(task_call(id, RESEARCH, json!({"topic": "slow"})))
        .await;
    let task_id = answer_result(&created)["task"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    // The task takes about four seconds; the server's calls may take 1.5.
    id += 1;
    let started = Instant::now();
    let answer = client
        .ask(request(id, "tasks/result", json!({"taskId": task_id})))
        .await;
    let waited = started.elapsed();
    assert_eq!(answer_error_code(&answer), -32603, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("no answer within 1500 ms"), "{answer}");
    assert!(waited < Duration::from_secs(3), "waited {waited:?}");

    // A client that stops waiting cancels its `tasks/result`: no answer comes for it, the
    // session goes on, and the task itself is not cancelled.
    let Client::Stdio(mut raw) = client else {
        unreachable!()
    };
    raw.send(&request(700, "tasks/result", json!({"taskId": task_id})))
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    raw.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 700, "reason": "gave up"}}),
    )
    .await;
    raw.send(&request(701, "tasks/get", json!({"taskId": task_id})))
        .await;
    let answer = raw.next_answer().await;
    assert_eq!(
        answer["id"], 701,
        "the cancelled request got no answer: {answer}"
    );
    assert_ne!(answer_result(&answer)["status"], "cancelled", "{answer}");
    // Polled past the 1.5 s the cancelled request could have waited: an answer to it would
    // fail `ask`'s id check.
    let mut client = Client::Stdio(raw);
    let mut id = 800;
    let done = client.until_done(&task_id, &mut id).await;
    assert_eq!(done["status"], "completed", "{done}");
}
