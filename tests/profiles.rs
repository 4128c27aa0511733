//! Profiles: each caller sees (and may call) only its profile's tools, over stdio and HTTP.

mod common;

use common::*;
use serde_json::json;

fn config_with_profiles() -> Workdir {
    Workdir::new(&format!(
        "{}{}\
         [profiles.reviewer]\nallow = [\"echo__echo\", \"echo__add\", \"other__*\"]\n\
         [profiles.ops]\nextends = \"reviewer\"\ndeny = [\"other__reverse\"]\n",
        server_toml("echo", "echo_server", &[]),
        server_toml("other", "other_server", &[])
    ))
}

fn expect_unknown(
    result: Result<rmcp::model::CallToolResult, rmcp::service::ServiceError>,
    name: &str,
) {
    match result {
        Err(rmcp::service::ServiceError::McpError(error)) => {
            assert_eq!(error.code.0, -32602);
            assert_eq!(error.message, format!("unknown tool \"{name}\""));
        }
        other => panic!("expected the unknown-tool error for {name}, got {other:?}"),
    }
}

#[tokio::test]
async fn two_http_clients_with_different_profiles_see_and_call_different_tools() {
    let work = config_with_profiles();
    let http = HttpGateway::start(&work).await;
    let (reviewer_client, _) = http_client(&format!("{}/reviewer", http.url)).await;
    let (ops_client, _) = http_client(&format!("{}/ops", http.url)).await;
    let (default_client, _) = http.client().await;

    assert_eq!(
        tool_names(&reviewer_client).await,
        ["echo__echo", "echo__add", "other__echo", "other__reverse"]
    );
    assert_eq!(
        tool_names(&ops_client).await,
        ["echo__echo", "echo__add", "other__echo"]
    );
    assert_eq!(tool_names(&default_client).await.len(), 8);

    let reversed = call(&reviewer_client, "other__reverse", json!({"text": "abc"}))
        .await
        .unwrap();
    assert_eq!(text(&reversed), "cba");
    // Hidden from ops by its own deny; from both by reviewer's allow: exactly an unknown tool.
    expect_unknown(
        call(&ops_client, "other__reverse", json!({"text": "abc"})).await,
        "other__reverse",
    );
    expect_unknown(
        call(&ops_client, "echo__fail", json!({})).await,
        "echo__fail",
    );
    let failed = call(&default_client, "echo__fail", json!({}))
        .await
        .unwrap();
    assert_eq!(failed.is_error, Some(true));
    for client in [reviewer_client, ops_client, default_client] {
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn an_unknown_profile_path_is_404_with_a_clear_body() {
    let work = config_with_profiles();
    let http = HttpGateway::start(&work).await;
    let response = reqwest::Client::new()
        .post(format!("{}/nobody", http.url))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("no MCP endpoint at /mcp/nobody")
    );
}

#[tokio::test]
async fn stdio_serves_the_profile_named_on_the_command_line() {
    let work = config_with_profiles();
    let (client, _) = stdio_client_with(&work, &["--profile", "ops"]).await;
    assert_eq!(
        tool_names(&client).await,
        ["echo__echo", "echo__add", "other__echo"]
    );
    expect_unknown(
        call(&client, "echo__sleep", json!({"ms": 1})).await,
        "echo__sleep",
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn tools_prints_exactly_what_a_profile_sees() {
    let work = config_with_profiles();
    let config = work.config().display().to_string();
    let (code, stdout, stderr) = run_toolgate(&["--config", &config, "tools", "--profile", "ops"]);
    assert_eq!(code, Some(0), "{stderr}");
    let names: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names, ["echo__echo", "echo__add", "other__echo"]);

    let (code, _, stderr) = run_toolgate(&["--config", &config, "tools", "--profile", "nobody"]);
    assert_eq!(code, Some(64));
    assert!(stderr.contains("unknown profile \"nobody\""), "{stderr}");
}

#[tokio::test]
async fn a_restriction_entry_matching_nothing_is_a_startup_error_listing_known_names() {
    let work = Workdir::new(&format!(
        "{}[profiles.typo]\nallow = [\"other__revers\"]\n",
        server_toml("other", "other_server", &[])
    ));
    let config = work.config().display().to_string();
    let (code, _, stderr) = run_toolgate(&["--config", &config, "tools"]);
    assert_eq!(code, Some(64), "{stderr}");
    assert!(
        stderr.contains("key `profiles.typo.allow`: entry \"other__revers\" matches no tool"),
        "{stderr}"
    );
    assert!(
        stderr.contains("known tools: other__echo, other__reverse"),
        "{stderr}"
    );
}
