//! Lists pass through whole: every field an upstream gives on a tool, prompt, resource or
//! template (unknown ones, `execution`, `_meta`, icons, annotations, and unknown keys inside
//! those) reaches the client unchanged; only the name or URI is prefixed.
//!
//! The fixture `rich_lists_server` writes its lists as raw JSON. Each test reads them
//! straight from it over the wire, then through toolgate, and compares item by item, field
//! by field: with the fixture as a stdio upstream and as an HTTP upstream (answering as SSE,
//! and as JSON), over toolgate's stdio and HTTP endpoints, for a 2025-11-25 client
//! (`initialize`) and a 2026-07-28 client (`server/discover`, per-request `_meta`). Behind
//! toolgate the fixture answers in pages of one item (`RICH_PAGE_SIZE=1`), so every list is
//! read page by page; read directly it answers whole.

mod common;

use std::{process::Stdio, time::Duration};

use common::*;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const LIMIT: Duration = Duration::from_secs(20);

/// The four lists: method, result field, the key toolgate renames and how.
const LISTS: [(&str, &str, &str); 4] = [
    ("tools/list", "tools", "name"),
    ("prompts/list", "prompts", "name"),
    ("resources/list", "resources", "uri"),
    (
        "resources/templates/list",
        "resourceTemplates",
        "uriTemplate",
    ),
];

/// What `prefix = "always"` makes of `value` under `key` for the server `rich`.
fn exposed(key: &str, value: &str) -> String {
    if key == "name" {
        format!("rich__{value}")
    } else {
        format!("rich+{value}")
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Era {
    /// `initialize` with 2025-11-25.
    Legacy,
    /// `server/discover`, 2026-07-28 `_meta` on every request.
    Modern,
}

fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "faithful-lists", "version": "0"}
    })
}

fn list_request(id: u64, method: &str, era: Era) -> Value {
    let params = match era {
        Era::Legacy => json!({}),
        Era::Modern => json!({"_meta": modern_meta()}),
    };
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn initialize(id: u64) -> Value {
    let mut request = initialize_request(id);
    request["params"]["protocolVersion"] = json!("2025-11-25");
    request
}

/// A process spoken to in JSON lines.
struct Lines {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Lines {
    fn spawn(mut command: tokio::process::Command) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Self {
            child,
            stdin,
            stdout,
        }
    }

    async fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).expect("serialize");
        line.push(b'\n');
        self.stdin.write_all(&line).await.expect("write");
        self.stdin.flush().await.expect("flush");
    }

    /// The answer to `id`, skipping notifications.
    async fn answer(&mut self, id: u64) -> Value {
        tokio::time::timeout(LIMIT, async {
            loop {
                let line = self
                    .stdout
                    .next_line()
                    .await
                    .expect("read")
                    .expect("still running");
                let message: Value =
                    serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line}"));
                if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                    return message;
                }
            }
        })
        .await
        .expect("answered in time")
    }

    async fn request(&mut self, message: Value) -> Value {
        let id = message["id"].as_u64().expect("numeric id");
        self.send(&message).await;
        self.answer(id).await
    }
}

fn result(answer: Value, what: &str) -> Map<String, Value> {
    match answer.get("result") {
        Some(Value::Object(result)) => result.clone(),
        _ => panic!("{what}: no result: {answer}"),
    }
}

/// The four lists as the fixture gives them over stdio, directly.
async fn direct_stdio() -> Vec<Map<String, Value>> {
    let mut fixture = Lines::spawn(tokio::process::Command::new(example("rich_lists_server")));
    fixture.request(initialize(0)).await;
    let mut lists = Vec::new();
    for (n, (method, _, _)) in LISTS.iter().enumerate() {
        let answer = fixture
            .request(list_request(n as u64 + 1, method, Era::Legacy))
            .await;
        lists.push(result(answer, method));
    }
    drop(fixture.stdin);
    let _ = fixture.child.wait().await;
    lists
}

/// The fixture over HTTP (`--json`: JSON answers, else SSE), answering lists in pages of
/// `page_size` items when given; its URL.
async fn http_fixture(
    json_answers: bool,
    page_size: Option<&str>,
) -> (tokio::process::Child, String) {
    let mut command = tokio::process::Command::new(example("rich_lists_server"));
    command.args(["--http", "127.0.0.1:0"]);
    if let Some(size) = page_size {
        command.env("RICH_PAGE_SIZE", size);
    }
    if json_answers {
        command.arg("--json");
    }
    listening_example(command, "rich-lists-server: listening on ").await
}

/// The four lists as the HTTP fixture at `url` gives them, directly.
async fn direct_http(url: &str) -> Vec<Map<String, Value>> {
    let response = mcp_post(url, None, &[], &initialize(0)).await;
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("a session")
        .to_owned();
    let mut lists = Vec::new();
    for (n, (method, _, _)) in LISTS.iter().enumerate() {
        let request = list_request(n as u64 + 1, method, Era::Legacy);
        let answer = jsonrpc_answer(mcp_post(url, Some(&session), &[], &request).await).await;
        lists.push(result(answer, method));
    }
    lists
}

/// The four lists through toolgate over stdio, in `era`.
async fn through_stdio(work: &Workdir, era: Era) -> Vec<Map<String, Value>> {
    let mut command = tokio::process::Command::new(toolgate());
    command.arg("--config").arg(work.config()).arg("serve");
    let mut gateway = Lines::spawn(command);
    match era {
        Era::Legacy => {
            let answer = gateway.request(initialize(0)).await;
            assert_eq!(answer["result"]["protocolVersion"], "2025-11-25");
            gateway
                .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
                .await;
        }
        Era::Modern => {
            let discover = json!({
                "jsonrpc": "2.0", "id": 0, "method": "server/discover",
                "params": {"_meta": modern_meta()}
            });
            let answer = gateway.request(discover).await;
            assert!(
                answer["result"]["supportedVersions"]
                    .as_array()
                    .is_some_and(|v| v.contains(&json!("2026-07-28")))
            );
        }
    }
    let mut lists = Vec::new();
    for (n, (method, _, _)) in LISTS.iter().enumerate() {
        let answer = gateway
            .request(list_request(n as u64 + 1, method, era))
            .await;
        lists.push(result(answer, method));
    }
    drop(gateway.stdin);
    let _ = gateway.child.wait().await;
    lists
}

/// The four lists through toolgate's HTTP endpoint at `url`, in `era` (2026-07-28: no
/// session, the method in `Mcp-Method`).
async fn through_http(url: &str, era: Era) -> Vec<Map<String, Value>> {
    let session = match era {
        Era::Legacy => Some(raw_session(url, &[]).await),
        Era::Modern => None,
    };
    let mut lists = Vec::new();
    for (n, (method, _, _)) in LISTS.iter().enumerate() {
        let request = list_request(n as u64 + 1, method, era);
        let headers: Vec<(&str, &str)> = match era {
            Era::Legacy => vec![("mcp-protocol-version", "2025-11-25")],
            Era::Modern => vec![
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", method),
            ],
        };
        let response = mcp_post(url, session.as_deref(), &headers, &request).await;
        let answer = jsonrpc_answer(response).await;
        lists.push(result(answer, method));
    }
    lists
}

/// Every list item through toolgate is the direct one, field by field, but for its name or
/// URI; the envelope is the one of `era`.
fn assert_faithful(
    label: &str,
    era: Era,
    direct: &[Map<String, Value>],
    through: &[Map<String, Value>],
) {
    for (((method, field, key), direct), through) in LISTS.iter().zip(direct).zip(through) {
        let modern_envelope = through.get("resultType") == Some(&json!("complete"))
            && through.contains_key("ttlMs")
            && through.contains_key("cacheScope");
        match era {
            Era::Modern => assert!(
                modern_envelope,
                "{label} {method}: 2026-07-28 envelope: {through:?}"
            ),
            Era::Legacy => assert!(
                !through.contains_key("resultType") && !through.contains_key("ttlMs"),
                "{label} {method}: 2025-11-25 envelope: {through:?}"
            ),
        }
        let direct_items = direct[*field].as_array().expect("direct items");
        let through_items = through
            .get(*field)
            .and_then(Value::as_array)
            .unwrap_or_else(|| panic!("{label} {method}: no {field}: {through:?}"));
        assert_eq!(
            through_items.len(),
            direct_items.len(),
            "{label} {method}: item count"
        );
        for (direct, through) in direct_items.iter().zip(through_items) {
            let direct = direct.as_object().expect("object");
            let through = through.as_object().expect("object");
            let id = direct[*key].as_str().expect("a name or URI");
            assert_eq!(
                through.get(*key),
                Some(&json!(exposed(key, id))),
                "{label} {method} {id}: {key}"
            );
            let mut keys: Vec<&String> = direct.keys().chain(through.keys()).collect();
            keys.sort();
            keys.dedup();
            for field in keys.into_iter().filter(|k| *k != key) {
                assert_eq!(
                    through.get(field),
                    direct.get(field),
                    "{label} {method} {id}: field {field:?}"
                );
            }
        }
    }
}

/// The fixture carries what this test is about, so that a pass means something.
fn assert_rich(direct: &[Map<String, Value>]) {
    let echo = &direct[0]["tools"][0];
    assert_eq!(echo["execution"], json!({"taskSupport": "optional"}));
    assert!(echo["_meta"].is_object() && echo["x-unknown"].is_object());
    assert!(echo["annotations"]["x-vendor-hint"].is_object());
    assert_eq!(echo["icons"][1]["x-scale"], 2);
    assert!(direct[1]["prompts"][0]["arguments"][0]["x-widget"].is_string());
    assert!(direct[2]["resources"][0]["annotations"]["x-tier"].is_string());
    assert!(direct[3]["resourceTemplates"][0]["x-params"].is_object());
}

async fn check_both_doors(label: &str, work: &Workdir, direct: &[Map<String, Value>]) {
    for era in [Era::Legacy, Era::Modern] {
        let through = through_stdio(work, era).await;
        assert_faithful(
            &format!("{label}, stdio client, {era:?}"),
            era,
            direct,
            &through,
        );
    }
    let gateway = HttpGateway::start(work).await;
    for era in [Era::Legacy, Era::Modern] {
        let through = through_http(&gateway.url, era).await;
        assert_faithful(
            &format!("{label}, HTTP client, {era:?}"),
            era,
            direct,
            &through,
        );
    }
}

#[tokio::test]
async fn a_stdio_upstreams_lists_reach_clients_whole() {
    let direct = direct_stdio().await;
    assert_rich(&direct);
    let work = Workdir::new(&server_toml(
        "rich",
        "rich_lists_server",
        &[("RICH_PAGE_SIZE", "1")],
    ));
    check_both_doors("stdio upstream", &work, &direct).await;
}

#[tokio::test]
async fn an_http_upstreams_lists_reach_clients_whole_over_sse_and_json() {
    for json_answers in [false, true] {
        let (_whole, whole_url) = http_fixture(json_answers, None).await;
        let direct = direct_http(&whole_url).await;
        assert_rich(&direct);
        let (_paged, url) = http_fixture(json_answers, Some("1")).await;
        let first_page = direct_http(&url).await;
        assert_eq!(first_page[0]["tools"].as_array().map(Vec::len), Some(1));
        assert_eq!(first_page[0]["nextCursor"], "1");
        let work = Workdir::new(&format!("[servers.rich]\nurl = {}\n", toml_string(&url)));
        let label = if json_answers {
            "HTTP upstream (JSON)"
        } else {
            "HTTP upstream (SSE)"
        };
        check_both_doors(label, &work, &direct).await;
    }
}
