//! `rich-lists-server`: an upstream fixture whose tools, prompts, resources and templates carry every field a list item may carry and some no SDK knows, written as raw JSON (no MCP SDK types, which would drop them); on stdio (default) or streamable HTTP (`--http ADDR`, answers as SSE, or JSON with `--json`).
//!
//! Items carry `title`, `description`, `icons` (with an unknown key in one icon),
//! `annotations` (with an unknown key), `_meta`, unknown top-level keys, and on tools
//! `execution: {"taskSupport": ...}` (2025-11-25 tasks) and an `outputSchema`.
//!
//! With `RICH_PAGE_SIZE=N` in its environment it answers the lists in pages of `N` items,
//! with `nextCursor`.
//!
//! It answers `initialize`, `ping`, the four lists, `tools/call` (its `echo` tool echoes
//! `text`; a `text` starting with `log ` is first sent as a log message on the call's own
//! stream, as SDKs send a request's related notifications), `prompts/get` and
//! `resources/read` minimally; anything else is `-32601`. Over
//! HTTP it prints `rich-lists-server: listening on http://ADDR/mcp` to stderr once it
//! listens (`ADDR` may use port 0).

use std::sync::atomic::{AtomicU64, Ordering};

use axum::{
    body::Bytes,
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::any,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const NAME: &str = "rich-lists-server";

fn tools() -> Value {
    json!([
        {
            "name": "echo",
            "title": "Echo",
            "description": "Echoes text back.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            "outputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
            "annotations": {"title": "Echo it", "readOnlyHint": true, "idempotentHint": true, "x-vendor-hint": {"cost": 0}},
            "icons": [
                {"src": "https://example.com/echo.png", "mimeType": "image/png", "sizes": ["48x48"]},
                {"src": "data:image/svg+xml;base64,PHN2Zy8+", "theme": "dark", "x-scale": 2}
            ],
            "execution": {"taskSupport": "optional"},
            "_meta": {"com.example/owner": "fixtures", "nested": {"a": [1, 2, {"b": null}]}},
            "x-unknown": {"kept": true, "list": ["a", 1, 2.5, false, null]}
        },
        {
            "name": "long_job",
            "description": "Runs as a task only.",
            "inputSchema": {"type": "object"},
            "execution": {"taskSupport": "required", "x-future": "field"},
            "x-number": 12345678901234567u64
        },
        {
            "name": "plain",
            "inputSchema": {"type": "object", "additionalProperties": false}
        }
    ])
}

fn prompts() -> Value {
    json!([
        {
            "name": "greet",
            "title": "Greeting",
            "description": "Says hello.",
            "arguments": [
                {"name": "who", "title": "Who", "description": "Whom to greet", "required": true, "x-widget": "text"},
                {"name": "tone"}
            ],
            "icons": [{"src": "https://example.com/greet.png", "x-alt": "wave"}],
            "_meta": {"com.example/prompt": 1},
            "x-category": "social"
        },
        {"name": "bare"}
    ])
}

fn resources() -> Value {
    json!([
        {
            "uri": "test://rich/readme",
            "name": "readme",
            "title": "Read me",
            "description": "A text resource.",
            "mimeType": "text/plain",
            "size": 11,
            "annotations": {"audience": ["user", "assistant"], "priority": 0.5, "lastModified": "2025-01-01T00:00:00Z", "x-tier": "gold"},
            "icons": [{"src": "https://example.com/doc.png", "sizes": ["16x16", "32x32"]}],
            "_meta": {"com.example/etag": "abc"},
            "x-checksum": "sha256:00"
        },
        {"uri": "test://rich/plain", "name": "plain"}
    ])
}

fn templates() -> Value {
    json!([
        {
            "uriTemplate": "test://rich/items/{id}",
            "name": "item",
            "title": "An item",
            "description": "Items by id.",
            "mimeType": "application/json",
            "annotations": {"priority": 1.0, "x-cache": "none"},
            "icons": [{"src": "https://example.com/item.png"}],
            "_meta": {"com.example/template": true},
            "x-params": {"id": {"pattern": "[0-9]+"}}
        }
    ])
}

/// One page of a list: all of it, or `RICH_PAGE_SIZE` items from the `cursor` (an index)
/// with the next index as `nextCursor` while items remain.
fn page(field: &str, items: Value, params: &Value) -> Value {
    let items = items.as_array().cloned().unwrap_or_default();
    let size = std::env::var("RICH_PAGE_SIZE")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|size| *size > 0);
    let Some(size) = size else {
        return json!({ field: items });
    };
    let start = params
        .get("cursor")
        .and_then(Value::as_str)
        .and_then(|c| c.parse::<usize>().ok())
        .unwrap_or(0)
        .min(items.len());
    let end = (start + size).min(items.len());
    let mut result = json!({ field: items[start..end].to_vec() });
    if end < items.len() {
        result["nextCursor"] = json!(end.to_string());
    }
    result
}

/// The answer to one request (`None` for a notification).
fn answer(message: &Value) -> Option<Value> {
    let id = message.get("id")?.clone();
    let method = message.get("method").and_then(Value::as_str).unwrap_or("");
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    let result = match method {
        "initialize" => {
            let version = params
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or("2025-11-25");
            json!({
                "protocolVersion": version,
                "capabilities": {"tools": {}, "prompts": {}, "resources": {}},
                "serverInfo": {"name": NAME, "version": "1.0.0"}
            })
        }
        "ping" => json!({}),
        "tools/list" => page("tools", tools(), &params),
        "prompts/list" => page("prompts", prompts(), &params),
        "resources/list" => page("resources", resources(), &params),
        "resources/templates/list" => page("resourceTemplates", templates(), &params),
        "tools/call" => {
            let text = params
                .pointer("/arguments/text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            json!({"content": [{"type": "text", "text": text}], "structuredContent": {"text": text}})
        }
        "prompts/get" => json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": "hello"}}]
        }),
        "resources/read" => {
            let uri = params.get("uri").cloned().unwrap_or(Value::Null);
            json!({"contents": [{"uri": uri, "mimeType": "text/plain", "text": "hello world"}]})
        }
        other => {
            return Some(json!({
                "jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": format!("method not found: {other}")}
            }));
        }
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

/// The log message a `tools/call` of `echo` with a `text` starting `log ` is preceded by.
fn log_first(message: &Value) -> Option<Value> {
    if message.get("method").and_then(Value::as_str) != Some("tools/call") {
        return None;
    }
    let text = message.pointer("/params/arguments/text")?.as_str()?;
    text.starts_with("log ").then(|| {
        json!({
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "logger": "rich", "data": text}
        })
    })
}

async fn serve_stdio() -> anyhow::Result<()> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut stdout = tokio::io::stdout();
    while let Some(line) = lines.next_line().await? {
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if let Some(log) = log_first(&message) {
            let mut out = serde_json::to_vec(&log)?;
            out.push(b'\n');
            stdout.write_all(&out).await?;
        }
        if let Some(answer) = answer(&message) {
            let mut out = serde_json::to_vec(&answer)?;
            out.push(b'\n');
            stdout.write_all(&out).await?;
            stdout.flush().await?;
        }
    }
    Ok(())
}

static SESSIONS: AtomicU64 = AtomicU64::new(1);

async fn mcp(
    json_answers: bool,
    method: axum::http::Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match method {
        axum::http::Method::POST => {}
        axum::http::Method::DELETE => return StatusCode::OK.into_response(),
        // No server-initiated stream.
        _ => return StatusCode::METHOD_NOT_ALLOWED.into_response(),
    }
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let is_initialize = message.get("method").and_then(Value::as_str) == Some("initialize");
    if !is_initialize && !headers.contains_key("mcp-session-id") {
        return (StatusCode::BAD_REQUEST, "missing mcp-session-id").into_response();
    }
    let Some(answer) = answer(&message) else {
        return StatusCode::ACCEPTED.into_response();
    };
    let mut response = if json_answers {
        (
            [(header::CONTENT_TYPE, "application/json")],
            answer.to_string(),
        )
            .into_response()
    } else {
        let log = log_first(&message)
            .map(|log| format!("event: message\ndata: {log}\n\n"))
            .unwrap_or_default();
        (
            [(header::CONTENT_TYPE, "text/event-stream")],
            format!("{log}event: message\ndata: {answer}\n\n"),
        )
            .into_response()
    };
    if is_initialize {
        let session = format!("rich-{}", SESSIONS.fetch_add(1, Ordering::Relaxed));
        if let Ok(value) = session.parse() {
            response.headers_mut().insert("mcp-session-id", value);
        }
    }
    response
}

async fn serve_http(addr: &str, json_answers: bool) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = axum::Router::new().route(
        "/mcp",
        any(move |method, headers, body| mcp(json_answers, method, headers, body)),
    );
    eprintln!("{NAME}: listening on http://{bound}/mcp");
    axum::serve(listener, app).await?;
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        [] => serve_stdio().await,
        ["--http", addr] => serve_http(addr, false).await,
        ["--http", addr, "--json"] => serve_http(addr, true).await,
        _ => {
            eprintln!("usage: {NAME} [--http ADDR [--json]]   (stdio by default)");
            std::process::exit(2);
        }
    }
}
