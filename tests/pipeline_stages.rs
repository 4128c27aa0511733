//! Built-in pipeline stages: argument validation, timeout with upstream cancel, retry, output schema, size cap.

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;

fn calls_logged(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn invalid_arguments_list_every_violation_and_never_reach_the_upstream() {
    let work = Workdir::new("");
    let log = work.path("calls.log");
    std::fs::write(
        work.config(),
        server_toml(
            "echo",
            "echo_server",
            &[("ECHO_CALL_LOG", &log.display().to_string())],
        ),
    )
    .unwrap();
    let (client, _) = stdio_client(&work).await;
    let result = call(&client, "echo__add", json!({"a": "one", "extra": true}))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    assert_eq!(code(&result).as_deref(), Some("INVALID_ARGS"));
    let message = text(&result);
    assert!(message.starts_with("invalid arguments: "), "{message}");
    assert!(
        message.contains("/a: "),
        "the wrong type is reported at its path: {message}"
    );
    assert!(
        message.contains("\"b\" is a required property"),
        "{message}"
    );
    assert!(
        message.contains("extra"),
        "the unexpected property is reported: {message}"
    );
    assert!(calls_logged(&log).is_empty(), "the upstream was called");

    // A valid call does reach it.
    call(&client, "echo__add", json!({"a": 1, "b": 2}))
        .await
        .unwrap();
    assert_eq!(calls_logged(&log).len(), 1);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_timeout_cancels_the_upstream_call_and_answers_tool_timeout() {
    let work = Workdir::new("");
    let cancels = work.path("cancel.log");
    std::fs::write(
        work.config(),
        format!(
            "{}[servers.echo.tools.sleep]\ntimeout_ms = 200\n",
            server_toml(
                "echo",
                "echo_server",
                &[("ECHO_CANCEL_LOG", &cancels.display().to_string())]
            )
        ),
    )
    .unwrap();
    let (client, _) = stdio_client(&work).await;
    let started = std::time::Instant::now();
    let result = call(&client, "echo__sleep", json!({"ms": 10000}))
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(result.is_error, Some(true));
    assert_eq!(code(&result).as_deref(), Some("TOOL_TIMEOUT"));
    assert_eq!(text(&result), "tool call timed out after 200ms");
    wait_for_file(&cancels, "cancelled sleep", Duration::from_secs(5)).await;
    // Other tools keep the gateway default and still work.
    assert_eq!(
        text(
            &call(&client, "echo__echo", json!({"text": "ok"}))
                .await
                .unwrap()
        ),
        "ok"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn retry_happens_only_where_configured() {
    let work = Workdir::new("");
    let retried_log = work.path("retried.log");
    let plain_log = work.path("plain.log");
    std::fs::write(
        work.config(),
        format!(
            "{}[servers.retried.tools.sleep]\ntimeout_ms = 100\nretry = {{ attempts = 3, backoff_ms = 10 }}\n\
             {}[servers.plain.tools.sleep]\ntimeout_ms = 100\n",
            server_toml("retried", "echo_server", &[("ECHO_CALL_LOG", &retried_log.display().to_string())]),
            server_toml("plain", "echo_server", &[("ECHO_CALL_LOG", &plain_log.display().to_string())]),
        ),
    )
    .unwrap();
    let (client, _) = stdio_client(&work).await;
    for server in ["retried", "plain"] {
        let result = call(&client, &format!("{server}__sleep"), json!({"ms": 2000}))
            .await
            .unwrap();
        assert_eq!(code(&result).as_deref(), Some("TOOL_TIMEOUT"), "{server}");
    }
    let sleeps = |path| {
        calls_logged(path)
            .into_iter()
            .filter(|c| c["tool"] == "sleep")
            .count()
    };
    assert_eq!(
        sleeps(&retried_log),
        3,
        "three attempts where retry is configured"
    );
    assert_eq!(sleeps(&plain_log), 1, "one attempt elsewhere");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn structured_content_violating_the_output_schema_is_an_error() {
    let work = Workdir::new(&server_toml(
        "echo",
        "echo_server",
        &[("ECHO_BAD_OUTPUT", "1")],
    ));
    let (client, _) = stdio_client(&work).await;
    let result = call(&client, "echo__add", json!({"a": 1, "b": 2}))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    assert_eq!(code(&result).as_deref(), Some("INVALID_TOOL_OUTPUT"));
    assert!(
        text(&result).starts_with("invalid tool output: /sum: "),
        "{}",
        text(&result)
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn results_over_the_size_cap_are_refused() {
    let work = Workdir::new(&format!(
        "[gateway]\nmax_result_bytes = 300\n{}",
        server_toml("echo", "echo_server", &[])
    ));
    let (client, _) = stdio_client(&work).await;
    let small = call(&client, "echo__echo", json!({"text": "short"}))
        .await
        .unwrap();
    assert_eq!(text(&small), "short");
    let big = call(&client, "echo__echo", json!({"text": "x".repeat(1000)}))
        .await
        .unwrap();
    assert_eq!(big.is_error, Some(true));
    assert_eq!(code(&big).as_deref(), Some("RESULT_TOO_LARGE"));
    assert!(
        text(&big).contains("over the 300-byte limit"),
        "{}",
        text(&big)
    );
    client.cancel().await.unwrap();
}
