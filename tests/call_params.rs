//! `tools/call` whose `arguments` is not an object is answered `-32602` (invalid params),
//! naming what is wrong, over stdio and HTTP; `null` arguments count as none.

mod common;

use common::*;
use serde_json::{Value, json};

fn echo_only() -> Workdir {
    Workdir::new(&server_toml("echo", "echo_server", &[]))
}

/// (arguments, what the message must say)
fn malformed() -> Vec<(Value, &'static str)> {
    vec![
        (json!(5), "`arguments` must be an object, found a number"),
        (json!([1]), "`arguments` must be an object, found an array"),
        (
            json!("text"),
            "`arguments` must be an object, found a string",
        ),
        (
            json!(true),
            "`arguments` must be an object, found a boolean",
        ),
    ]
}

fn assert_invalid_params(answer: &Value, id: u64, expected: &str) {
    assert_eq!(answer["id"], id, "{answer}");
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(expected), "{answer}");
}

/// `null` arguments reach the tool as none: `fail` needs none and answers its tool error.
fn assert_reached_the_tool(answer: &Value) {
    assert!(answer.get("error").is_none(), "{answer}");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
}

#[tokio::test]
async fn over_stdio_non_object_arguments_are_invalid_params() {
    let work = echo_only();
    let mut gateway = RawStdio::start(&work).await;
    for (i, (arguments, expected)) in malformed().into_iter().enumerate() {
        let id = 10 + i as u64;
        gateway
            .send(&call_request(id, "echo__echo", arguments))
            .await;
        assert_invalid_params(&gateway.next_answer().await, id, expected);
    }
    gateway
        .send(&call_request(20, "echo__fail", Value::Null))
        .await;
    assert_reached_the_tool(&gateway.next_answer().await);
    // A missing name is invalid params too, not an unknown method.
    gateway
        .send(&json!({"jsonrpc": "2.0", "id": 21, "method": "tools/call", "params": {"arguments": {}}}))
        .await;
    assert_invalid_params(&gateway.next_answer().await, 21, "`name` is missing");
}

#[tokio::test]
async fn over_http_non_object_arguments_are_invalid_params() {
    let work = echo_only();
    let gateway = HttpGateway::start(&work).await;
    let session = raw_session(&gateway.url, &[]).await;
    for (i, (arguments, expected)) in malformed().into_iter().enumerate() {
        let id = 10 + i as u64;
        let response = mcp_post(
            &gateway.url,
            Some(&session),
            &[],
            &call_request(id, "echo__echo", arguments),
        )
        .await;
        assert_eq!(response.status(), 200);
        assert_invalid_params(&jsonrpc_answer(response).await, id, expected);
    }
    let response = mcp_post(
        &gateway.url,
        Some(&session),
        &[],
        &call_request(20, "echo__fail", Value::Null),
    )
    .await;
    assert_reached_the_tool(&jsonrpc_answer(response).await);
}
