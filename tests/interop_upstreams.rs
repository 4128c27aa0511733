//! Third-party servers behind toolgate (server-everything, -filesystem, -memory, mcp-server-time in one servers.toml) offer through it what they offer directly.
//!
//! For each server, an rmcp client that declares what toolgate's upstream client declares
//! (roots, sampling, elicitation) connects to it directly; another connects to toolgate. The
//! tool, prompt and resource lists must match item by item (only the name or URI prefixed),
//! and the same calls must give the same results. `.ci/interop-deps` installs the servers.
#![allow(deprecated)] // roots and sampling are deprecated by SEP-2577 in rmcp; toolgate declares them

mod common;

use std::{path::Path, process::Stdio, time::Duration};

use common::{interop::*, *};
use rmcp::{
    ClientHandler, RoleClient, ServiceExt,
    model::{CallToolRequestParams, ClientConfig, Implementation},
    service::{RunningService, ServiceError},
    transport::TokioChildProcess,
};
use serde_json::{Value, json};

/// A client with the capabilities toolgate's upstream client declares, so that
/// server-everything shows it the same conditional tools.
#[derive(Clone, Default)]
struct LikeToolgate;

impl ClientHandler for LikeToolgate {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            answers::relayed_capabilities(),
            Implementation::new("interop-direct", "0"),
        )
    }
}

type Direct = RunningService<RoleClient, LikeToolgate>;

/// `server`'s command from the interop servers.toml, started without toolgate.
async fn direct(deps: &Deps, work: &Workdir, server: &str) -> Direct {
    let mut command = match server {
        "time" => tokio::process::Command::new(&deps.time_server),
        _ => tokio::process::Command::new(&deps.node),
    };
    match server {
        "everything" => command
            .arg(deps.server_js("server-everything"))
            .arg("stdio"),
        "filesystem" => command
            .arg(deps.server_js("server-filesystem"))
            .arg(work.dir.path()),
        "memory" => command
            .arg(deps.server_js("server-memory"))
            .env("MEMORY_FILE_PATH", work.path("memory.jsonl")),
        _ => &mut command,
    };
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the server");
    LikeToolgate
        .serve(transport)
        .await
        .unwrap_or_else(|e| panic!("MCP handshake with {server} directly: {e}"))
}

/// toolgate over stdio in front of all four, once each has listed its tools.
async fn through(work: &Workdir) -> Client {
    let (client, _) = stdio_client(work).await;
    let ready = async {
        loop {
            let names = tool_names(&client).await;
            if SERVERS
                .iter()
                .all(|s| names.iter().any(|n| n.starts_with(&format!("{s}__"))))
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), ready)
        .await
        .expect("all four servers listed within 60s");
    client
}

/// Seeds `dir` with a note and a memory graph, so reads and calls have something to find.
fn seed(dir: &Path) {
    std::fs::write(dir.join("note.txt"), "the note\n").expect("write note");
    let graph = [
        json!({"type": "entity", "name": "toolgate", "entityType": "gateway", "observations": ["fronts MCP servers"]}),
        json!({"type": "relation", "from": "toolgate", "to": "toolgate", "relationType": "proxies"}),
    ];
    let lines: Vec<String> = graph.iter().map(Value::to_string).collect();
    std::fs::write(dir.join("memory.jsonl"), lines.join("\n")).expect("write memory");
}

/// `items` (serialized) whose `key` starts with `prefix`, with the prefix taken off.
fn unprefixed(items: &[Value], key: &str, prefix: &str) -> Vec<Value> {
    items
        .iter()
        .filter_map(|item| {
            let name = item[key].as_str()?.strip_prefix(prefix)?.to_owned();
            let mut item = item.clone();
            item[key] = Value::String(name);
            Some(item)
        })
        .collect()
}

fn values<T: serde::Serialize>(items: &[T]) -> Vec<Value> {
    items
        .iter()
        .map(|i| serde_json::to_value(i).expect("serializes"))
        .collect()
}

#[tokio::test]
async fn lists_match_each_server_directly() {
    let deps = Deps::installed();
    let work = deps.workdir();
    seed(work.dir.path());
    let gateway = through(&work).await;
    let tools = values(&gateway.list_all_tools().await.expect("tools/list"));
    let prompts = values(&gateway.list_all_prompts().await.expect("prompts/list"));
    let resources = values(&gateway.list_all_resources().await.expect("resources/list"));
    let templates = values(
        &gateway
            .list_all_resource_templates()
            .await
            .expect("resources/templates/list"),
    );

    for server in SERVERS {
        let own = direct(&deps, &work, server).await;
        let direct_tools = values(&own.list_all_tools().await.expect("tools/list directly"));
        assert!(!direct_tools.is_empty(), "{server} has tools");
        assert_eq!(
            unprefixed(&tools, "name", &format!("{server}__")),
            direct_tools,
            "{server}'s tools through toolgate"
        );
        let info = own.peer_info().expect("server info");
        if info.capabilities.prompts.is_some() {
            let direct_prompts = values(&own.list_all_prompts().await.expect("prompts/list"));
            assert_eq!(
                unprefixed(&prompts, "name", &format!("{server}__")),
                direct_prompts,
                "{server}'s prompts through toolgate"
            );
        }
        if info.capabilities.resources.is_some() {
            let direct_resources = values(&own.list_all_resources().await.expect("resources/list"));
            assert_eq!(
                unprefixed(&resources, "uri", &format!("{server}+")),
                direct_resources,
                "{server}'s resources through toolgate"
            );
            let direct_templates = values(
                &own.list_all_resource_templates()
                    .await
                    .expect("resources/templates/list"),
            );
            assert_eq!(
                unprefixed(&templates, "uriTemplate", &format!("{server}+")),
                direct_templates,
                "{server}'s templates through toolgate"
            );
        }
        own.cancel().await.ok();
    }
    // The servers that offer them, so the comparisons above compared something.
    assert!(
        prompts
            .iter()
            .any(|p| p["name"] == "everything__simple-prompt")
    );
    assert!(
        resources
            .iter()
            .any(|r| r["uri"] == "memory+memory://knowledge-graph")
    );
    gateway.cancel().await.ok();
}

#[tokio::test]
async fn calls_match_each_server_directly() {
    let deps = Deps::installed();
    let work = deps.workdir();
    seed(work.dir.path());
    let note = work.path("note.txt").display().to_string();
    let gateway = through(&work).await;
    let calls = [
        ("everything", "get-sum", json!({"a": 2, "b": 40})),
        (
            "everything",
            "get-structured-content",
            json!({"location": "New York"}),
        ),
        ("filesystem", "read_text_file", json!({"path": note})),
        ("filesystem", "get_file_info", json!({"path": note})),
        (
            "filesystem",
            "read_text_file",
            json!({"path": "/etc/hostname"}),
        ),
        ("memory", "read_graph", json!({})),
        ("memory", "search_nodes", json!({"query": "gateway"})),
        (
            "time",
            "convert_time",
            json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
        ),
        ("time", "get_current_time", json!({"timezone": "Not/AZone"})),
    ];
    for server in SERVERS {
        let own = direct(&deps, &work, server).await;
        for (_, tool, args) in calls.iter().filter(|(s, ..)| *s == server) {
            let mut params = CallToolRequestParams::new(tool.to_string());
            params.arguments = args.as_object().cloned();
            let direct_result = own.call_tool(params).await;
            let through_result = call(&gateway, &format!("{server}__{tool}"), args.clone()).await;
            assert_eq!(
                outcome(through_result),
                outcome(direct_result),
                "{server} {tool} {args}: through toolgate vs directly"
            );
        }
        own.cancel().await.ok();
    }
    // What a call found, so equal results are not equal failures.
    let sum = call(&gateway, "everything__get-sum", json!({"a": 2, "b": 40}))
        .await
        .expect("get-sum");
    assert_eq!(text(&sum), "The sum of 2 and 40 is 42.");
    let read = call(
        &gateway,
        "filesystem__read_text_file",
        json!({"path": note}),
    )
    .await
    .expect("read_text_file");
    assert_eq!(text(&read), "the note\n");
    let converted = call(
        &gateway,
        "time__convert_time",
        json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
    )
    .await
    .expect("convert_time");
    let converted: Value = serde_json::from_str(&text(&converted)).expect("JSON");
    assert_eq!(converted["time_difference"], "+9.0h", "{converted}");
    gateway.cancel().await.ok();
}

/// A call's result as JSON, or its JSON-RPC error code and message.
fn outcome(result: Result<rmcp::model::CallToolResult, ServiceError>) -> Value {
    match result {
        Ok(result) => serde_json::to_value(result).expect("serializes"),
        Err(ServiceError::McpError(error)) => {
            json!({"code": error.code.0, "message": error.message})
        }
        Err(other) => panic!("the call failed outside MCP: {other}"),
    }
}
