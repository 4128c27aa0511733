//! Progress and cancellation through the gateway, over stdio and over HTTP.
//!
//! Progress: the upstream's `notifications/progress` reach the calling client under the
//! client's own progress token, in order. Cancel: a client abandoning a call makes the
//! upstream see `notifications/cancelled`, and the gateway keeps serving.

mod common;

use std::time::Duration;

use common::*;
use rmcp::{
    model::{CallToolRequest, CallToolRequestParams, ClientRequest, ProgressToken, ServerResult},
    service::PeerRequestOptions,
};
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(8);

fn sleep_params(args: serde_json::Value) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new("echo__sleep");
    params.arguments = args.as_object().cloned();
    params
}

/// Calls `echo__sleep {ms: 300, steps: 3}` and checks the progress the client receives.
async fn progress_reaches_the_client_under_its_own_token(client: &Client, recorder: &Recorder) {
    // rmcp numbers progress tokens per connection, from 0. Calls to an unknown tool never
    // reach an upstream, so they move the client's counter well past the gateway's own
    // upstream counter: relaying the upstream token unchanged cannot pass by coincidence.
    for _ in 0..10 {
        assert!(call(client, "no_such_tool", json!({})).await.is_err());
    }
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(sleep_params(
        json!({"ms": 300, "steps": 3}),
    )));
    let handle = client
        .peer()
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await
        .expect("send tools/call");
    let own_token: ProgressToken = handle.progress_token.clone();
    let response = tokio::time::timeout(LIMIT, handle.await_response())
        .await
        .expect("sleep answers in time")
        .expect("sleep succeeds");
    let ServerResult::CallToolResult(result) = response else {
        panic!("expected a tool result, got {response:?}");
    };
    assert_eq!(text(&result), "slept 300ms");

    // Progress is sent before the result, but give the relay a moment in case it lags.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    while recorder.progress.lock().unwrap().len() < 3 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Anything late would show up here as a fourth entry.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let progress = recorder.progress.lock().unwrap().clone();
    assert_eq!(
        progress.len(),
        3,
        "expected exactly 3 progress notifications, got {progress:?}"
    );
    for (step, param) in progress.iter().enumerate() {
        assert_eq!(
            param.progress_token, own_token,
            "progress must carry the client's own token {own_token:?}, got {param:?}"
        );
        assert_eq!(param.progress, (step + 1) as f64, "{progress:?}");
        assert_eq!(param.total, Some(3.0), "{progress:?}");
    }
}

#[tokio::test]
async fn stdio_progress_is_relayed_under_the_clients_own_token() {
    let work = Workdir::new(&server_toml("echo", "echo_server", &[]));
    let (client, recorder) = stdio_client(&work).await;
    progress_reaches_the_client_under_its_own_token(&client, &recorder).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn http_progress_is_relayed_under_the_clients_own_token() {
    let work = Workdir::new(&server_toml("echo", "echo_server", &[]));
    let gateway = HttpGateway::start(&work).await;
    let (client, recorder) = gateway.client().await;
    progress_reaches_the_client_under_its_own_token(&client, &recorder).await;
    client.cancel().await.unwrap();
}

/// An echo upstream that logs calls and cancels into the work directory.
fn logging_echo() -> Workdir {
    let dir = tempfile::tempdir().expect("temp dir");
    let calls = dir.path().join("calls.log");
    let cancels = dir.path().join("cancel.log");
    let toml = server_toml(
        "echo",
        "echo_server",
        &[
            ("ECHO_CALL_LOG", &calls.display().to_string()),
            ("ECHO_CANCEL_LOG", &cancels.display().to_string()),
        ],
    );
    std::fs::write(dir.path().join("servers.toml"), toml).expect("write config");
    Workdir { dir }
}

/// Starts a 30 s sleep, waits until the upstream has it, abandons it (dropping the call
/// future makes rmcp send `notifications/cancelled`), and checks the upstream was cancelled.
async fn abandoned_call_cancels_the_upstream(client: &Client, work: &Workdir) {
    let peer = client.peer().clone();
    let pending =
        tokio::spawn(async move { peer.call_tool(sleep_params(json!({"ms": 30_000}))).await });
    wait_for_file(&work.path("calls.log"), "\"sleep\"", LIMIT).await;
    assert!(!pending.is_finished(), "the 30 s sleep answered early");
    pending.abort();
    assert!(pending.await.unwrap_err().is_cancelled());

    wait_for_file(
        &work.path("cancel.log"),
        "cancelled sleep",
        Duration::from_secs(5),
    )
    .await;
    still_serves(client).await;
}

async fn still_serves(client: &Client) {
    let echoed = tokio::time::timeout(LIMIT, call(client, "echo__echo", json!({"text": "after"})))
        .await
        .expect("echo answers in time")
        .expect("echo succeeds after a cancel");
    assert_eq!(text(&echoed), "after");
}

#[tokio::test]
async fn stdio_abandoned_call_is_cancelled_upstream() {
    let work = logging_echo();
    let (client, _) = stdio_client(&work).await;
    abandoned_call_cancels_the_upstream(&client, &work).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn http_abandoned_call_is_cancelled_upstream() {
    let work = logging_echo();
    let gateway = HttpGateway::start(&work).await;
    let (client, _) = gateway.client().await;
    abandoned_call_cancels_the_upstream(&client, &work).await;
    client.cancel().await.unwrap();
}

/// An explicit `notifications/cancelled` naming the request id (not a dropped future).
async fn explicit_cancel_reaches_the_upstream(client: &Client, work: &Workdir) {
    let request =
        ClientRequest::CallToolRequest(CallToolRequest::new(sleep_params(json!({"ms": 30_000}))));
    let handle = client
        .peer()
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await
        .expect("send tools/call");
    wait_for_file(&work.path("calls.log"), "\"sleep\"", LIMIT).await;
    handle
        .cancel(Some("test cancels".into()))
        .await
        .expect("send notifications/cancelled");
    wait_for_file(
        &work.path("cancel.log"),
        "cancelled sleep",
        Duration::from_secs(5),
    )
    .await;
    still_serves(client).await;
}

#[tokio::test]
async fn stdio_explicit_cancel_is_forwarded_upstream() {
    let work = logging_echo();
    let (client, _) = stdio_client(&work).await;
    explicit_cancel_reaches_the_upstream(&client, &work).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn http_explicit_cancel_is_forwarded_upstream() {
    let work = logging_echo();
    let gateway = HttpGateway::start(&work).await;
    let (client, _) = gateway.client().await;
    explicit_cancel_reaches_the_upstream(&client, &work).await;
    client.cancel().await.unwrap();
}
