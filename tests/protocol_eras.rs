//! Clients of the 2026-07-28 lifecycle (`server/discover`, per-request metadata, no
//! `initialize`) use toolgate, whose upstreams are 2025-era servers, over stdio and HTTP:
//! they list and call tools, get tool, prompt, resource and completion results with
//! `resultType`, and hear about tool list changes on a `subscriptions/listen` stream.

mod common;

use std::time::Duration;

use common::*;
use rmcp::model::{
    ArgumentInfo, CompleteRequestParams, GetPromptRequestParams, ProtocolVersion,
    ReadResourceRequestParams, Reference, ResultType, ServerNotification, SubscriptionFilter,
};
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(5);

fn echo_only() -> Workdir {
    Workdir::new(&server_toml("echo", "echo_server", &[]))
}

/// `toolgate serve` over stdio, and a client that connects with the 2026-07-28 lifecycle.
async fn modern_stdio_client(work: &Workdir) -> Client {
    let client = modern::over_stdio(Recorder::default(), work).await;
    assert_modern(&client);
    client
}

/// A client of `gateway` that connects with the 2026-07-28 lifecycle.
async fn modern_http_client(gateway: &HttpGateway) -> Client {
    let client = modern::over_http(Recorder::default(), &gateway.url).await;
    assert_modern(&client);
    client
}

fn assert_modern(client: &Client) {
    let info = client
        .peer_info()
        .expect("discover stored the server's info");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2026_07_28);
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("toolgate")
    );
}

/// Lists and calls through toolgate; the 2025-era upstream's results reach the 2026 client
/// with `resultType: "complete"` and otherwise unchanged.
async fn lists_and_calls(client: &Client) {
    let names = tokio::time::timeout(LIMIT, tool_names(client))
        .await
        .expect("tools/list in time");
    assert_eq!(
        names,
        [
            "echo__echo",
            "echo__add",
            "echo__sleep",
            "echo__fail",
            "echo__add_tool",
            "echo__remove_tool"
        ]
    );

    let echoed = tokio::time::timeout(LIMIT, call(client, "echo__echo", json!({"text": "hi"})))
        .await
        .expect("echo in time")
        .expect("echo accepted by a 2026-07-28 client");
    assert_eq!(text(&echoed), "hi");
    assert_eq!(echoed.result_type, Some(ResultType::COMPLETE));

    let sum = tokio::time::timeout(LIMIT, call(client, "echo__add", json!({"a": 2, "b": 3})))
        .await
        .expect("add in time")
        .expect("add accepted by a 2026-07-28 client");
    assert_eq!(sum.structured_content, Some(json!({"sum": 5})));
    assert_eq!(sum.result_type, Some(ResultType::COMPLETE));

    let failed = tokio::time::timeout(LIMIT, call(client, "echo__fail", json!({"message": "no"})))
        .await
        .expect("fail in time")
        .expect("an isError result is still a result");
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(text(&failed), "no");
    assert_eq!(failed.result_type, Some(ResultType::COMPLETE));
}

#[tokio::test]
async fn modern_stdio_client_lists_and_calls() {
    let work = echo_only();
    let client = modern_stdio_client(&work).await;
    lists_and_calls(&client).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn modern_http_client_lists_and_calls() {
    let work = echo_only();
    let gateway = HttpGateway::start(&work).await;
    let client = modern_http_client(&gateway).await;
    lists_and_calls(&client).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn legacy_client_gets_results_without_result_type() {
    // toolgate fills in `resultType` for modern clients; a 2025-era client must not see it.
    let work = echo_only();
    let (client, _) = stdio_client(&work).await;
    let echoed = call(&client, "echo__echo", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "hi");
    assert_eq!(echoed.result_type, None);
    client.cancel().await.unwrap();
}

/// Gets a prompt, reads a resource and completes an argument through toolgate: each result
/// of the 2025-era upstream reaches the 2026 client with `resultType: "complete"` (the
/// Python SDK rejects a result without it), and a 2025-era client gets them without.
async fn offers_with_result_type(client: &Client, expected: Option<ResultType>) {
    let mut get = GetPromptRequestParams::new("notes__greet");
    get.arguments = json!({"name": "Ann"}).as_object().cloned();
    let prompt = tokio::time::timeout(LIMIT, client.get_prompt(get))
        .await
        .expect("prompts/get in time")
        .expect("prompts/get");
    let said = prompt.messages[0]
        .content
        .as_text()
        .map(|t| t.text.as_str());
    assert_eq!(said, Some("Hello, Ann!"));
    assert_eq!(prompt.result_type, expected, "prompts/get");

    let read = tokio::time::timeout(
        LIMIT,
        client.read_resource(ReadResourceRequestParams::new("notes+note://welcome")),
    )
    .await
    .expect("resources/read in time")
    .expect("resources/read");
    assert_eq!(read.contents.len(), 1);
    assert_eq!(read.result_type, expected, "resources/read");

    let request = CompleteRequestParams::new(
        Reference::for_prompt("notes__greet"),
        ArgumentInfo::new("name", "a"),
    );
    let completed = tokio::time::timeout(LIMIT, client.complete(request))
        .await
        .expect("completion/complete in time")
        .expect("completion/complete");
    assert_eq!(completed.completion.values, ["alice"]);
    assert_eq!(completed.result_type, expected, "completion/complete");
}

fn notes_only() -> Workdir {
    Workdir::new(&server_toml("notes", "notes_server", &[]))
}

#[tokio::test]
async fn modern_stdio_client_gets_offers_with_result_type() {
    let work = notes_only();
    let client = modern_stdio_client(&work).await;
    offers_with_result_type(&client, Some(ResultType::COMPLETE)).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn modern_http_client_gets_offers_with_result_type() {
    let work = notes_only();
    let gateway = HttpGateway::start(&work).await;
    let client = modern_http_client(&gateway).await;
    offers_with_result_type(&client, Some(ResultType::COMPLETE)).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn legacy_client_gets_offers_without_result_type() {
    let work = notes_only();
    let (client, _) = stdio_client(&work).await;
    offers_with_result_type(&client, None).await;
    client.cancel().await.unwrap();
}

/// Opens a `subscriptions/listen` stream for tool list changes, adds a tool upstream, and
/// expects the change on the stream (and the new tool in `tools/list`).
async fn hears_list_changed_on_listen(client: &Client) {
    let mut subscription = tokio::time::timeout(
        LIMIT,
        client.listen(SubscriptionFilter::builder().tools_list_changed().build()),
    )
    .await
    .expect("listen acknowledged in time")
    .expect("subscriptions/listen accepted");
    assert_eq!(
        subscription.acknowledged().tools_list_changed,
        Some(true),
        "{:?}",
        subscription.acknowledged()
    );

    let added = tokio::time::timeout(
        LIMIT,
        call(client, "echo__add_tool", json!({"name": "fresh"})),
    )
    .await
    .expect("add_tool in time")
    .expect("add_tool succeeds");
    assert_eq!(text(&added), "added fresh");

    let notification = tokio::time::timeout(LIMIT, subscription.next())
        .await
        .expect("a notification on the listen stream in time")
        .expect("the listen stream is healthy")
        .expect("the listen stream is still open");
    assert!(
        matches!(
            notification,
            ServerNotification::ToolListChangedNotification(_)
        ),
        "{notification:?}"
    );
    assert!(tool_names(client).await.contains(&"echo__fresh".into()));
    let fresh = call(client, "echo__fresh", json!({"text": "new"}))
        .await
        .expect("the new tool is callable");
    assert_eq!(text(&fresh), "new");
    subscription.cancel().await.expect("end the subscription");
}

#[tokio::test]
async fn modern_stdio_client_hears_list_changed_on_listen() {
    let work = echo_only();
    let client = modern_stdio_client(&work).await;
    hears_list_changed_on_listen(&client).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn modern_http_client_hears_list_changed_on_listen() {
    let work = echo_only();
    let gateway = HttpGateway::start(&work).await;
    let client = modern_http_client(&gateway).await;
    hears_list_changed_on_listen(&client).await;
    client.cancel().await.unwrap();
}
