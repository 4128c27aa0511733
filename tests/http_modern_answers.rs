//! Over HTTP, a 2026-07-28 request gets its answer as one JSON body (with its `Content-Length`) when the answer is all there is to send, and an SSE stream when progress comes first; a 2025-era session keeps SSE.

mod common;

use common::*;
use serde_json::{Value, json};

fn meta(progress: Option<u64>) -> Value {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}
    });
    if let Some(token) = progress {
        meta["progressToken"] = json!(token);
    }
    meta
}

/// POSTs a 2026-07-28 `tools/call` (no session), with the headers that version asks for.
async fn post_modern(
    url: &str,
    id: u64,
    name: &str,
    arguments: Value,
    meta: Value,
) -> reqwest::Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": meta}
    });
    let headers = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", name),
    ];
    mcp_post(url, None, &headers, &body).await
}

fn content_type(response: &reqwest::Response) -> String {
    header_text(response, "content-type")
}

/// An SSE stream, which has no length to give.
fn assert_sse(response: &reqwest::Response, case: &str) {
    assert!(
        content_type(response).starts_with("text/event-stream"),
        "{case}: {response:?}"
    );
    assert!(
        header_text(response, "content-length").is_empty(),
        "{case}: {response:?}"
    );
}

#[tokio::test]
async fn a_modern_answer_with_nothing_before_it_is_one_json_body() {
    let work = Workdir::new(&server_toml("echo", "echo_server", &[]));
    let gateway = HttpGateway::start(&work).await;
    for id in 1..=3 {
        let response = post_modern(
            &gateway.url,
            id,
            "echo__echo",
            json!({"text": "héllo ✓"}),
            meta(None),
        )
        .await;
        assert_eq!(response.status(), 200);
        assert!(
            content_type(&response).starts_with("application/json"),
            "{response:?}"
        );
        // Whole, so sized: not chunked.
        let length = header_text(&response, "content-length");
        assert!(
            header_text(&response, "transfer-encoding").is_empty(),
            "{response:?}"
        );
        let body = response.text().await.expect("body");
        assert_eq!(length, body.len().to_string(), "{body}");
        let answer: Value = serde_json::from_str(&body).expect("the body is one JSON-RPC message");
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
        assert_eq!(
            answer["result"]["content"][0]["text"], "héllo ✓",
            "{answer}"
        );
    }
}

#[tokio::test]
async fn a_modern_call_whose_progress_comes_first_gets_every_message_on_sse() {
    let work = Workdir::new(&server_toml("echo", "echo_server", &[]));
    let gateway = HttpGateway::start(&work).await;
    let response = post_modern(
        &gateway.url,
        7,
        "echo__sleep",
        json!({"ms": 60, "steps": 3}),
        meta(Some(42)),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_sse(&response, "progress first");
    let text = response.text().await.expect("body");
    let messages: Vec<Value> = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim()).ok())
        .collect();
    let progress = messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .inspect(|m| assert_eq!(m["params"]["progressToken"], 42, "{m}"))
        .count();
    assert_eq!(progress, 3, "{text}");
    let answer = messages.last().expect("an answer");
    assert_eq!(answer["id"], 7, "{text}");
    assert_eq!(answer["result"]["resultType"], "complete", "{text}");
}

/// Both ways a 2025-era session's call is answered: toolgate's HTTP fast path, and rmcp's
/// session worker (`fast_path = false`).
#[tokio::test]
async fn a_session_of_2025_keeps_its_answers_on_sse() {
    for gateway_section in ["", "[gateway]\nfast_path = false\n"] {
        let work = Workdir::new(&format!(
            "{gateway_section}{}",
            server_toml("echo", "echo_server", &[])
        ));
        let gateway = HttpGateway::start(&work).await;
        let session = raw_session(&gateway.url, &[]).await;
        let response = mcp_post(
            &gateway.url,
            Some(&session),
            &[],
            &call_request(1, "echo__echo", json!({"text": "hi"})),
        )
        .await;
        assert_eq!(response.status(), 200);
        assert_sse(&response, gateway_section);
        let answer = jsonrpc_answer(response).await;
        assert_eq!(answer["result"]["content"][0]["text"], "hi", "{answer}");
    }
}
