//! 2026-07-28 clients subscribe to resources on their `subscriptions/listen` stream (`resourceSubscriptions`), over stdio and HTTP: only resources of their profile are acknowledged, and an upstream's `notifications/resources/updated` reaches the stream under the URI the client gave, for the subscribed resource only.

mod common;

use std::time::Duration;

use common::*;
use rmcp::model::ServerNotification;
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(10);

/// The notes server, its URIs namespaced (`notes+note://…`), beside a second one (so that a
/// URI of neither routes nowhere).
fn notes() -> Workdir {
    Workdir::new(&format!(
        "[gateway]\nprefix = \"always\"\n\n{}{}",
        server_toml("notes", "notes_server", &[]),
        server_toml("more", "notes_server", &[]),
    ))
}

async fn hears_updates_of_what_it_subscribed_to(client: &Client) {
    let mut subscription =
        modern::listen_to_resources(client, &["notes+note://today", "nowhere://unknown"]).await;
    assert_eq!(
        subscription.acknowledged().resource_subscriptions,
        Some(vec!["notes+note://today".to_owned()]),
        "only the profile's resource is acknowledged"
    );

    // Another note changes first: nothing for this stream. Then the subscribed one.
    call(client, "notes__touch", json!({"name": "elsewhere"}))
        .await
        .expect("touch elsewhere");
    call(client, "notes__touch", json!({"name": "today"}))
        .await
        .expect("touch today");
    let notification = tokio::time::timeout(LIMIT, subscription.next())
        .await
        .expect("an update on the listen stream in time")
        .expect("the listen stream is healthy")
        .expect("the listen stream is still open");
    match notification {
        ServerNotification::ResourceUpdatedNotification(updated) => {
            assert_eq!(updated.params.uri, "notes+note://today");
        }
        other => panic!("expected a resource update, got {other:?}"),
    }
    subscription.cancel().await.expect("end the subscription");
}

#[tokio::test]
async fn a_stdio_client_hears_its_resource_updates_on_listen() {
    let work = notes();
    let client = modern::over_stdio(Recorder::default(), &work).await;
    hears_updates_of_what_it_subscribed_to(&client).await;
    client.cancel().await.ok();
}

#[tokio::test]
async fn an_http_client_hears_its_resource_updates_on_listen() {
    let work = notes();
    let gateway = HttpGateway::start(&work).await;
    let client = modern::over_http(Recorder::default(), &gateway.url).await;
    hears_updates_of_what_it_subscribed_to(&client).await;
    client.cancel().await.ok();
}
