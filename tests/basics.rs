//! The merged surface over stdio and over HTTP: list, call, results unchanged, unknown tool.
//!
//! Each behaviour is checked once, by a function both transports run.

mod common;

use common::*;
use serde_json::json;

/// Every upstream tool, in order, with its definition as the upstream gave it.
async fn lists_every_upstream_tool_with_its_definition(client: &Client) {
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
    assert_eq!(
        echo.annotations.as_ref().and_then(|a| a.read_only_hint),
        Some(true)
    );
    assert_eq!(echo.input_schema["required"], json!(["text"]));
    let add = &tools[1];
    assert_eq!(
        add.output_schema
            .as_ref()
            .map(|s| s["properties"]["sum"]["type"].clone()),
        Some(json!("number"))
    );
}

/// Calls reach the owning server; content, structured content and `isError` come back as is.
async fn calls_reach_the_owning_server_and_results_come_back_unchanged(client: &Client) {
    let echoed = call(client, "echo__echo", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "hi");
    assert_ne!(echoed.is_error, Some(true));
    let other = call(client, "other__echo", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(text(&other), "other: hi");

    let sum = call(client, "echo__add", json!({"a": 2, "b": 3}))
        .await
        .unwrap();
    assert_eq!(sum.structured_content, Some(json!({"sum": 5})));
    assert_eq!(text(&sum), r#"{"sum":5}"#);
    assert_ne!(sum.is_error, Some(true));

    let failed = call(client, "echo__fail", json!({"message": "nope"}))
        .await
        .unwrap();
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(text(&failed), "nope");
    // An upstream tool error is the upstream's own result, not a gateway failure.
    assert_eq!(code(&failed), None, "{failed:?}");
}

/// An unknown name (the bare upstream name included) is `-32602`; the session survives it.
async fn unknown_tool_is_invalid_params_naming_it(client: &Client) {
    for name in ["no_such_tool", "echo"] {
        let error = call(client, name, json!({})).await.unwrap_err();
        let rmcp::service::ServiceError::McpError(error) = error else {
            panic!("expected a JSON-RPC error, got {error:?}");
        };
        assert_eq!(error.code.0, -32602);
        assert_eq!(error.message, format!("unknown tool \"{name}\""));
        assert_eq!(error.data, Some(json!({"code": "UNKNOWN_TOOL"})));
    }
    let echoed = call(client, "echo__echo", json!({"text": "still here"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "still here");
}

#[tokio::test]
async fn over_stdio() {
    let work = two_servers();
    let (client, _) = stdio_client(&work).await;
    lists_every_upstream_tool_with_its_definition(&client).await;
    calls_reach_the_owning_server_and_results_come_back_unchanged(&client).await;
    unknown_tool_is_invalid_params_naming_it(&client).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn over_http() {
    let work = two_servers();
    let gateway = HttpGateway::start(&work).await;
    let (client, _) = gateway.client().await;
    lists_every_upstream_tool_with_its_definition(&client).await;
    calls_reach_the_owning_server_and_results_come_back_unchanged(&client).await;
    unknown_tool_is_invalid_params_naming_it(&client).await;
    client.cancel().await.unwrap();
}
