//! Over streamable HTTP: list the merged surface, call tools, relay results unchanged (structured
//! content, `isError`), unknown tool error.

mod common;

use common::*;
use serde_json::json;

fn two_servers() -> Workdir {
    Workdir::new(&format!(
        "{}{}",
        server_toml("echo", "echo_server", &[]),
        server_toml("other", "other_server", &[])
    ))
}

#[tokio::test]
async fn http_lists_every_upstream_tool_with_its_definition() {
    let work = two_servers();
    let gateway = HttpGateway::start(&work).await;
    let (client, _) = gateway.client().await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "echo__echo",
            "echo__add",
            "echo__sleep",
            "echo__fail",
            "echo__add_tool",
            "echo__remove_tool",
            "other__echo",
            "other__reverse"
        ]
    );
    let echo = &tools[0];
    assert_eq!(echo.title.as_deref(), Some("Echo"));
    assert_eq!(echo.input_schema["required"], json!(["text"]));
    let add = &tools[1];
    assert_eq!(
        add.output_schema
            .as_ref()
            .map(|s| s["properties"]["sum"]["type"].clone()),
        Some(json!("number"))
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn http_calls_reach_the_owning_server_and_results_come_back_unchanged() {
    let work = two_servers();
    let gateway = HttpGateway::start(&work).await;
    let (client, _) = gateway.client().await;

    let echoed = call(&client, "echo__echo", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "hi");
    assert_ne!(echoed.is_error, Some(true));
    let other = call(&client, "other__echo", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(text(&other), "other: hi");

    let sum = call(&client, "echo__add", json!({"a": 2, "b": 3}))
        .await
        .unwrap();
    assert_eq!(sum.structured_content, Some(json!({"sum": 5})));
    assert_eq!(text(&sum), r#"{"sum":5}"#);
    assert_ne!(sum.is_error, Some(true));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn http_tool_errors_pass_through_as_is_error_results() {
    let work = two_servers();
    let gateway = HttpGateway::start(&work).await;
    let (client, _) = gateway.client().await;
    let failed = call(&client, "echo__fail", json!({"message": "nope"}))
        .await
        .unwrap();
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(text(&failed), "nope");
    // An upstream tool error is the upstream's own result, not a gateway failure.
    assert!(
        failed
            .meta
            .as_ref()
            .is_none_or(|meta| !meta.contains_key("toolgate/error")),
        "{failed:?}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn http_unknown_tool_is_invalid_params_naming_it() {
    let work = two_servers();
    let gateway = HttpGateway::start(&work).await;
    let (client, _) = gateway.client().await;
    let error = call(&client, "x", json!({})).await.unwrap_err();
    let rmcp::service::ServiceError::McpError(error) = error else {
        panic!("expected a JSON-RPC error, got {error:?}");
    };
    assert_eq!(error.code.0, -32602);
    assert_eq!(error.message, "unknown tool \"x\"");
    // The session survives the error.
    let echoed = call(&client, "echo__echo", json!({"text": "still here"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "still here");
    client.cancel().await.unwrap();
}
