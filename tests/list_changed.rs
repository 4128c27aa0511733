//! Dynamic tools: an upstream's `notifications/tools/list_changed` is followed (re-import) and
//! announced to every connected client; paginated upstream lists are imported whole.

mod common;

use std::{sync::atomic::Ordering, time::Duration};

use common::*;
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(5);

const ECHO_TOOLS: [&str; 6] = [
    "echo__echo",
    "echo__add",
    "echo__sleep",
    "echo__fail",
    "echo__add_tool",
    "echo__remove_tool",
];

/// Waits until `recorder` has seen at least `count` `tools/list_changed` notifications.
async fn wait_list_changed(recorder: &Recorder, count: usize) {
    let waited = tokio::time::timeout(LIMIT, async {
        loop {
            // Register interest before checking, so a notification in between is not lost.
            let seen = recorder.list_changed_seen.notified();
            tokio::pin!(seen);
            seen.as_mut().enable();
            if recorder.list_changed.load(Ordering::SeqCst) >= count {
                return;
            }
            seen.await;
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "expected {count} tools/list_changed within {LIMIT:?}, got {}",
        recorder.list_changed.load(Ordering::SeqCst)
    );
}

async fn ok_call(client: &Client, name: &str, args: serde_json::Value) -> String {
    let result = tokio::time::timeout(LIMIT, call(client, name, args))
        .await
        .expect("call answers in time")
        .unwrap_or_else(|e| panic!("{name} failed: {e:?}"));
    assert_ne!(result.is_error, Some(true), "{name}: {result:?}");
    text(&result)
}

fn assert_unknown_tool(error: rmcp::service::ServiceError, name: &str) {
    let rmcp::service::ServiceError::McpError(error) = error else {
        panic!("expected a JSON-RPC error, got {error:?}");
    };
    assert_eq!(error.code.0, -32602);
    assert_eq!(error.message, format!("unknown tool \"{name}\""));
}

#[tokio::test]
async fn added_tool_is_announced_listed_and_callable_then_removed() {
    let work = Workdir::new(&server_toml("echo", "echo_server", &[]));
    let (client, recorder) = stdio_client(&work).await;
    assert!(!tool_names(&client).await.contains(&"echo__fresh".into()));
    assert_eq!(recorder.list_changed.load(Ordering::SeqCst), 0);

    let added = ok_call(&client, "echo__add_tool", json!({"name": "fresh"})).await;
    assert_eq!(added, "added fresh");
    wait_list_changed(&recorder, 1).await;
    let names = tool_names(&client).await;
    let mut expected: Vec<String> = ECHO_TOOLS.iter().map(|s| s.to_string()).collect();
    expected.push("echo__fresh".into());
    assert_eq!(names, expected);
    assert_eq!(
        ok_call(&client, "echo__fresh", json!({"text": "new"})).await,
        "new"
    );

    let removed = ok_call(&client, "echo__remove_tool", json!({"name": "fresh"})).await;
    assert_eq!(removed, "removed fresh");
    wait_list_changed(&recorder, 2).await;
    assert_eq!(tool_names(&client).await, ECHO_TOOLS);
    let error = call(&client, "echo__fresh", json!({"text": "gone"}))
        .await
        .unwrap_err();
    assert_unknown_tool(error, "echo__fresh");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn every_http_client_hears_about_a_change() {
    let work = Workdir::new(&server_toml("echo", "echo_server", &[]));
    let gateway = HttpGateway::start(&work).await;
    let (first, first_recorder) = gateway.client().await;
    let (second, second_recorder) = gateway.client().await;
    // Both sessions are fully up (and their watchers started) before anything changes.
    assert_eq!(tool_names(&first).await, ECHO_TOOLS);
    assert_eq!(tool_names(&second).await, ECHO_TOOLS);

    ok_call(&first, "echo__add_tool", json!({"name": "fresh"})).await;
    wait_list_changed(&first_recorder, 1).await;
    wait_list_changed(&second_recorder, 1).await;
    // The session that did not make the change sees and can call the new tool.
    assert!(tool_names(&second).await.contains(&"echo__fresh".into()));
    assert_eq!(
        ok_call(&second, "echo__fresh", json!({"text": "both"})).await,
        "both"
    );
    first.cancel().await.unwrap();
    second.cancel().await.unwrap();
}

#[tokio::test]
async fn paginated_upstream_is_imported_whole_and_reimported_whole() {
    // 6 built-in + 3 extra tools in pages of 2: five pages, the last one short.
    let work = Workdir::new(&server_toml(
        "echo",
        "echo_server",
        &[("ECHO_PAGE_SIZE", "2"), ("ECHO_EXTRA_TOOLS", "3")],
    ));
    let (client, recorder) = stdio_client(&work).await;
    let mut expected: Vec<String> = ECHO_TOOLS.iter().map(|s| s.to_string()).collect();
    expected.extend(["echo__tool_0000", "echo__tool_0001", "echo__tool_0002"].map(String::from));
    assert_eq!(tool_names(&client).await, expected);
    assert_eq!(
        ok_call(&client, "echo__tool_0002", json!({"text": "last page"})).await,
        "last page"
    );

    // The re-import after list_changed walks every page too.
    ok_call(&client, "echo__add_tool", json!({"name": "fresh"})).await;
    wait_list_changed(&recorder, 1).await;
    expected.push("echo__fresh".into());
    assert_eq!(tool_names(&client).await, expected);
    client.cancel().await.unwrap();
}
