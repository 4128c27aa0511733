//! Profiles: each caller sees (and may call) only its profile's tools, over stdio and HTTP.

mod common;

use common::*;
use serde_json::json;

/// POSTs an MCP initialize to `url` with an optional bearer token: (status, body).
async fn initialize_status(url: &str, token: Option<&str>) -> (u16, String) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

fn config_with_tokens() -> Workdir {
    Workdir::new(&format!(
        "{}{}\
         [profiles.reviewer]\nallow = [\"other__*\"]\ntokens = [\"reviewer-token\"]\n\
         [profiles.ops]\ntokens = [\"ops-token\"]\n",
        server_toml("echo", "echo_server", &[]),
        server_toml("other", "other_server", &[])
    ))
}

#[tokio::test]
async fn a_bearer_token_at_mcp_selects_its_profile() {
    let work = config_with_tokens();
    let http = HttpGateway::start(&work).await;
    let (reviewer, _) = try_http_client(&http.url, Some("reviewer-token"))
        .await
        .unwrap();
    assert_eq!(
        tool_names(&reviewer).await,
        ["other__echo", "other__reverse"]
    );
    let (ops, _) = try_http_client(&format!("{}/ops", http.url), Some("ops-token"))
        .await
        .unwrap();
    assert_eq!(tool_names(&ops).await.len(), 8);
    // No token while tokens are in use: refused (tests/http_auth.rs has the details).
    assert!(try_http_client(&http.url, None).await.is_err());
    for client in [reviewer, ops] {
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn wrong_missing_or_unknown_tokens_are_refused_with_a_clear_body() {
    let work = config_with_tokens();
    let http = HttpGateway::start(&work).await;
    let url = &http.url;
    let (status, body) = initialize_status(&format!("{url}/ops"), Some("reviewer-token")).await;
    assert_eq!(
        (status, body.as_str()),
        (403, "this bearer token does not grant profile \"ops\"\n")
    );
    let (status, body) = initialize_status(&format!("{url}/ops"), None).await;
    assert_eq!(
        (status, body.as_str()),
        (
            401,
            "this gateway requires a bearer token: profiles are guarded by tokens, and callers without one are refused\n"
        )
    );
    let (status, body) = initialize_status(url, Some("guess")).await;
    assert_eq!((status, body.as_str()), (401, "unknown bearer token\n"));
    let (status, _) = initialize_status(&format!("{url}/ops"), Some("ops-token")).await;
    assert_eq!(status, 200);
}

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
    let (status, body) = initialize_status(&format!("{}/nobody", http.url), None).await;
    assert_eq!(
        (status, body.as_str()),
        (404, "unknown profile \"nobody\"\n")
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

#[tokio::test]
async fn require_profile_refuses_callers_that_select_none() {
    let work = Workdir::new(&format!(
        "[gateway]\nrequire_profile = true\n{}[profiles.p]\n",
        server_toml("other", "other_server", &[])
    ));
    let config = work.config().display().to_string();
    let (code, _, stderr) = run_toolgate(&["--config", &config, "serve"]);
    assert_eq!(code, Some(64));
    assert!(
        stderr.contains("`gateway.require_profile` is true: pass --profile NAME"),
        "{stderr}"
    );

    let http = HttpGateway::start(&work).await;
    let (status, body) = initialize_status(&http.url, None).await;
    assert_eq!(status, 401);
    assert!(body.contains("requires a profile"), "{body}");
    let (status, _) = initialize_status(&format!("{}/p", http.url), None).await;
    assert_eq!(status, 200);
}
