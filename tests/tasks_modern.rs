//! Tasks for 2026-07-28 clients (the SEP-2663 Tasks extension) through toolgate, bridged onto the 2025-11-25 tasks of its upstream: the task handle, `tasks/get` with the result or the input requests inline, `tasks/update`, `tasks/cancel`, the extension in `server/discover`, and task ids bound to their caller.
//!
//! The task server is the reference `server-everything` (its `simulate-research-query` tool
//! declares `execution.taskSupport: "required"`, runs about four seconds, and with
//! `ambiguous: true` asks for a clarification by elicitation during the task); `echo` is our
//! example server, which offers no tasks. Clients are raw JSON-RPC over toolgate's stdio and
//! HTTP endpoints.

mod common;

use std::time::{Duration, Instant};

use common::{interop::Deps, *};
use serde_json::{Value, json};

const RESEARCH: &str = "everything__simulate-research-query";
const EXTENSION: &str = "io.modelcontextprotocol/tasks";
const TERMINAL: [&str; 3] = ["completed", "failed", "cancelled"];

/// server-everything over stdio and the echo example; `plain` sees only echo. `extra` is
/// added to the config (e.g. tokens).
fn config(extra: &str) -> Workdir {
    let deps = Deps::installed();
    let work = Workdir::new("");
    let node = toml_string(&deps.node.display().to_string());
    let js = toml_string(&deps.server_js("server-everything").display().to_string());
    let toml = format!(
        "[servers.everything]\ncommand = {node}\nargs = [{js}, \"stdio\"]\n\n{}\n{extra}\n",
        server_toml("echo", "echo_server", &[]),
    );
    std::fs::write(work.config(), toml).expect("write servers.toml");
    work
}

/// The 2026-07-28 `_meta` of every request; `tasks`: the client declares the extension.
fn meta(tasks: bool) -> Value {
    let mut capabilities = json!({"elicitation": {}});
    if tasks {
        capabilities["extensions"] = json!({EXTENSION: {}});
    }
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "tasks-modern", "version": "0"}
    })
}

fn request(id: u64, method: &str, mut params: Value, tasks: bool) -> Value {
    params["_meta"] = meta(tasks);
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn call(id: u64, tool: &str, arguments: Value, tasks: bool) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
        tasks,
    )
}

/// One raw 2026-07-28 client: stdio, or HTTP with a bearer token (no session).
enum Client {
    Stdio(Box<RawStdio>),
    Http { url: String, token: Option<String> },
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
            Client::Http { url, token } => {
                let method = message["method"].as_str().unwrap_or_default().to_owned();
                let name = message["params"]["name"]
                    .as_str()
                    .or(message["params"]["taskId"].as_str())
                    .unwrap_or_default()
                    .to_owned();
                let bearer = token.as_ref().map(|t| format!("Bearer {t}"));
                let mut headers = vec![
                    ("mcp-protocol-version", "2026-07-28"),
                    ("mcp-method", method.as_str()),
                ];
                if !name.is_empty() {
                    headers.push(("mcp-name", name.as_str()));
                }
                if let Some(bearer) = &bearer {
                    headers.push(("authorization", bearer.as_str()));
                }
                let response = mcp_post(url, None, &headers, &message).await;
                jsonrpc_answer(response).await
            }
        }
    }

    /// Polls `tasks/get` until the task is in one of `statuses`; every answer names `id`.
    async fn until(&mut self, id: &str, statuses: &[&str], next_id: &mut u64) -> Value {
        let started = Instant::now();
        loop {
            *next_id += 1;
            let answer = self
                .ask(request(*next_id, "tasks/get", json!({"taskId": id}), true))
                .await;
            let task = answer_result(&answer).clone();
            assert_eq!(task["taskId"], id, "{answer}");
            assert_eq!(task["resultType"], "complete", "{answer}");
            assert!(task["createdAt"].is_string(), "{answer}");
            let status = task["status"].as_str().unwrap_or_default();
            if statuses.contains(&status) {
                return task;
            }
            assert!(
                !TERMINAL.contains(&status),
                "the task ended as {status}, not {statuses:?}: {task}"
            );
            assert!(
                started.elapsed() < Duration::from_secs(40),
                "the task did not reach {statuses:?}: {task}"
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    /// Waits until the research tool is listed (server-everything registers it after its
    /// handshake).
    async fn research_listed(&mut self, next_id: &mut u64) {
        let started = Instant::now();
        loop {
            *next_id += 1;
            let answer = self
                .ask(request(*next_id, "tools/list", json!({}), true))
                .await;
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

    /// Starts a research task; its toolgate id.
    async fn start(&mut self, arguments: Value, next_id: &mut u64) -> String {
        *next_id += 1;
        let created = self.ask(call(*next_id, RESEARCH, arguments, true)).await;
        let handle = answer_result(&created);
        assert_eq!(handle["resultType"], "task", "a task handle: {created}");
        assert_eq!(handle["status"], "working", "{created}");
        assert!(handle["ttlMs"].is_number(), "the server's ttl: {created}");
        assert!(
            handle.get("task").is_none(),
            "not the 2025 shape: {created}"
        );
        let id = handle["taskId"].as_str().expect("a task id").to_owned();
        assert!(id.starts_with("tg-"), "toolgate's own id: {created}");
        id
    }
}

/// A task's whole life, one that asks for input, one cancelled, and the refusals.
async fn lifecycle(client: &mut Client) {
    let mut id = 10;
    client.research_listed(&mut id).await;

    // `server/discover` declares the extension: a visible tool may run as a task.
    id += 1;
    let discovered = client
        .ask(request(id, "server/discover", json!({}), true))
        .await;
    assert_eq!(
        answer_result(&discovered)["capabilities"]["extensions"][EXTENSION],
        json!({}),
        "{discovered}"
    );
    assert!(
        answer_result(&discovered)["capabilities"]
            .get("tasks")
            .is_none(),
        "no 2025 tasks capability in this era: {discovered}"
    );

    // Created, polled, and completed with the tool's result inline.
    let task = client.start(json!({"topic": "gateways"}), &mut id).await;
    let done = client.until(&task, &["completed"], &mut id).await;
    let text = done["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("Research Report: gateways"), "{done}");
    // Asked again, the result is still there.
    id += 1;
    let again = client
        .ask(request(id, "tasks/get", json!({"taskId": task}), true))
        .await;
    assert_eq!(answer_result(&again)["status"], "completed", "{again}");
    assert_eq!(answer_result(&again)["result"], done["result"], "{again}");

    // A task that needs input: `input_required` with the elicitation inline, answered by
    // `tasks/update`, and the answer reaches the tool.
    let asking = client
        .start(json!({"topic": "python", "ambiguous": true}), &mut id)
        .await;
    let waiting = client.until(&asking, &["input_required"], &mut id).await;
    let requests = waiting["inputRequests"]
        .as_object()
        .expect("inputRequests")
        .clone();
    assert_eq!(requests.len(), 1, "{waiting}");
    let (key, asked) = requests.iter().next().expect("one request");
    assert_eq!(asked["method"], "elicitation/create", "{waiting}");
    id += 1;
    let ack = client
        .ask(request(
            id,
            "tasks/update",
            json!({"taskId": asking, "inputResponses": {
                key.clone(): {"action": "accept", "content": {"interpretation": "snake"}},
                "never-asked": {"action": "decline"}
            }}),
            true,
        ))
        .await;
    assert_eq!(
        answer_result(&ack),
        &json!({"resultType": "complete"}),
        "{ack}"
    );
    let done = client.until(&asking, &["completed"], &mut id).await;
    let text = done["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("Research Report: python (snake)"), "{done}");

    // Cancelled while it works: acknowledged, then reported cancelled.
    let cancelled = client.start(json!({"topic": "cancel me"}), &mut id).await;
    id += 1;
    let ack = client
        .ask(request(
            id,
            "tasks/cancel",
            json!({"taskId": cancelled}),
            true,
        ))
        .await;
    assert_eq!(answer_result(&ack)["resultType"], "complete", "{ack}");
    let after = client.until(&cancelled, &["cancelled"], &mut id).await;
    assert!(after.get("result").is_none(), "{after}");

    // A client that does not declare the extension: no task methods (-32021)...
    id += 1;
    let answer = client
        .ask(request(id, "tasks/get", json!({"taskId": task}), false))
        .await;
    assert_eq!(answer_error_code(&answer), -32021, "{answer}");
    // ...and no task handle: the required tool runs as a plain call, toolgate waiting for
    // the task's result; what the server asks meanwhile comes as input rounds.
    let arguments = json!({"topic": "python", "ambiguous": true});
    id += 1;
    let answer = client
        .ask(call(id, RESEARCH, arguments.clone(), false))
        .await;
    let round = answer_result(&answer);
    assert_eq!(round["resultType"], "input_required", "{answer}");
    let (key, asked) = round["inputRequests"]
        .as_object()
        .and_then(|requests| requests.iter().next())
        .map(|(key, asked)| (key.clone(), asked.clone()))
        .unwrap_or_else(|| panic!("an input request: {answer}"));
    assert_eq!(asked["method"], "elicitation/create", "{answer}");
    id += 1;
    let mut retry = call(id, RESEARCH, arguments, false);
    retry["params"]["requestState"] = round["requestState"].clone();
    retry["params"]["inputResponses"] =
        json!({key: {"action": "accept", "content": {"interpretation": "comedy"}}});
    let answer = client.ask(retry).await;
    assert_eq!(answer_result(&answer)["resultType"], "complete", "{answer}");
    let text = answer_result(&answer)["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("Research Report: python (comedy)"),
        "{answer}"
    );
    assert!(answer_result(&answer).get("taskId").is_none(), "{answer}");
    id += 1;
    let answer = client
        .ask(call(id, "echo__echo", json!({"text": "hi"}), true))
        .await;
    assert_eq!(
        answer_result(&answer)["content"][0]["text"],
        "hi",
        "{answer}"
    );
    assert_eq!(answer_result(&answer)["resultType"], "complete", "{answer}");

    // The 2025-only methods do not exist in this era; unknown ids are invalid params.
    for method in ["tasks/result", "tasks/list"] {
        id += 1;
        let answer = client
            .ask(request(id, method, json!({"taskId": task}), true))
            .await;
        assert_eq!(answer_error_code(&answer), -32601, "{method}: {answer}");
    }
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        for unknown in ["tg-999999", "0"] {
            id += 1;
            let answer = client
                .ask(request(
                    id,
                    method,
                    json!({"taskId": unknown, "inputResponses": {}}),
                    true,
                ))
                .await;
            assert_eq!(
                answer_error_code(&answer),
                -32602,
                "{method} {unknown}: {answer}"
            );
        }
    }
}

#[tokio::test]
async fn a_modern_stdio_client_runs_answers_and_cancels_tasks() {
    let work = config("");
    let raw = RawStdio::spawn(&work);
    let mut client = Client::Stdio(Box::new(raw));
    lifecycle(&mut client).await;
}

#[tokio::test]
async fn over_http_a_task_belongs_to_the_token_that_created_it() {
    let work = config("[profiles.default]\ntokens = [\"token-a\", \"token-b\"]\n");
    let gateway = HttpGateway::start(&work).await;
    let mut mine = Client::Http {
        url: gateway.url.clone(),
        token: Some("token-a".into()),
    };
    lifecycle(&mut mine).await;

    let mut id = 500;
    let task = mine.start(json!({"topic": "mine"}), &mut id).await;
    let mut other = Client::Http {
        url: gateway.url.clone(),
        token: Some("token-b".into()),
    };
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        id += 1;
        let answer = other
            .ask(request(
                id,
                method,
                json!({"taskId": task, "inputResponses": {}}),
                true,
            ))
            .await;
        assert_eq!(answer_error_code(&answer), -32602, "{method}: {answer}");
    }
    // The id has a random part: its number alone reaches nothing, even for its owner.
    let (bare, secret) = task.split_once('.').expect("a random part in the id");
    assert_eq!(secret.len(), 32, "{task}");
    id += 1;
    let answer = mine
        .ask(request(id, "tasks/get", json!({"taskId": bare}), true))
        .await;
    assert_eq!(answer_error_code(&answer), -32602, "{answer}");
    // Still the owner's, and not cancelled by the other's attempt.
    let done = mine.until(&task, &["completed"], &mut id).await;
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("Research Report: mine"),
        "{done}"
    );
}

#[tokio::test]
async fn a_profile_without_task_tools_declares_no_extension() {
    let work = config("[profiles.plain]\nallow = [\"echo__*\"]\n");
    let gateway = HttpGateway::start(&work).await;
    // The default profile sees the research tool: once it is in, the extension is declared.
    let mut full = Client::Http {
        url: gateway.url.clone(),
        token: None,
    };
    let mut id = 1;
    full.research_listed(&mut id).await;
    let mut plain = Client::Http {
        url: format!("{}/plain", gateway.url),
        token: None,
    };
    id += 1;
    let discovered = plain
        .ask(request(id, "server/discover", json!({}), true))
        .await;
    assert!(
        answer_result(&discovered)["capabilities"]
            .get("extensions")
            .is_none(),
        "{discovered}"
    );
    id += 1;
    let answer = plain
        .ask(request(id, "tasks/get", json!({"taskId": "tg-1"}), true))
        .await;
    assert_eq!(answer_error_code(&answer), -32601, "{answer}");
    // A 2025-era session of the full profile gets the 2025 capability, not the extension.
    let response = mcp_post(&gateway.url, None, &[], &initialize_request(id + 1)).await;
    let answer = jsonrpc_answer(response).await;
    let capabilities = &answer_result(&answer)["capabilities"];
    assert!(capabilities["tasks"].is_object(), "{answer}");
    assert!(capabilities.get("extensions").is_none(), "{answer}");
}

#[tokio::test]
async fn an_http_upstreams_tasks_are_bridged_too() {
    let (_server, url) = Deps::installed().everything_over_http().await;
    let work = Workdir::new(&format!(
        "[servers.everything]\nurl = {}\n\n{}",
        toml_string(&url),
        server_toml("echo", "echo_server", &[])
    ));
    let raw = RawStdio::spawn(&work);
    let mut client = Client::Stdio(Box::new(raw));
    lifecycle(&mut client).await;
}

/// A stdio client of toolgate in front of the TypeScript SDK task fixture (`counter`: `count`
/// with optional task support, `fail` that fails as a task), once its tools are in; the
/// config's directory lives as long as the returned `Workdir`.
async fn fixture_client(next_id: &mut u64) -> (Workdir, Client) {
    let deps = Deps::installed();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/task_progress_server.cjs");
    let work = Workdir::new(&format!(
        "[servers.counter]\ncommand = {}\nargs = [{}, {}]\n",
        toml_string(&deps.node.display().to_string()),
        toml_string(&fixture.display().to_string()),
        toml_string(&deps.node_modules.display().to_string()),
    ));
    let mut client = Client::Stdio(Box::new(RawStdio::spawn(&work)));
    let started = Instant::now();
    loop {
        *next_id += 1;
        let answer = client
            .ask(request(*next_id, "tools/list", json!({}), true))
            .await;
        let tools = answer_result(&answer)["tools"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if tools.len() == 2 {
            return (work, client);
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{answer}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn an_optional_task_tool_is_a_task_only_for_a_client_that_declares_the_extension() {
    let mut id = 1;
    let (_work, mut client) = fixture_client(&mut id).await;
    id += 1;
    let plain = client
        .ask(call(id, "counter__count", json!({"steps": 1}), false))
        .await;
    assert_eq!(answer_result(&plain)["resultType"], "complete", "{plain}");
    assert_eq!(
        answer_result(&plain)["content"][0]["text"],
        "counted to 1",
        "{plain}"
    );
    id += 1;
    let created = client
        .ask(call(id, "counter__count", json!({"steps": 1}), true))
        .await;
    assert_eq!(answer_result(&created)["resultType"], "task", "{created}");
    let task = answer_result(&created)["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    let done = client.until(&task, &["completed"], &mut id).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "counted to 1",
        "{done}"
    );
}

#[tokio::test]
async fn a_failed_task_carries_the_servers_error() {
    let mut id = 1;
    let (_work, mut client) = fixture_client(&mut id).await;
    id += 1;
    let created = client.ask(call(id, "counter__fail", json!({}), true)).await;
    assert_eq!(answer_result(&created)["resultType"], "task", "{created}");
    let task = answer_result(&created)["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    let failed = client.until(&task, &["failed"], &mut id).await;
    // The server's own JSON-RPC error for its `tasks/result`, with the task named by
    // toolgate's id; the status message is the server's.
    assert_eq!(failed["error"]["code"], -32603, "{failed}");
    assert_eq!(
        failed["error"]["message"],
        format!("Task {task} has no result stored"),
        "{failed}"
    );
    assert_eq!(failed["statusMessage"], "it broke", "{failed}");
    assert!(failed.get("result").is_none(), "{failed}");
}
