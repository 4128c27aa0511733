//! Over HTTP, as over stdio, a request that comes while the servers make their first start waits for them (bounded), so that its answer includes what they offer.

mod common;

use common::*;

#[tokio::test]
async fn a_session_opened_during_the_first_starts_can_subscribe_to_their_resources() {
    // The notes server starts 200 ms late; a 2026-07-28 client (no `initialize`) subscribes
    // to one of its resources on a listen stream as soon as the gateway listens.
    let late = format!("sleep 0.2; exec {}", example("notes_server").display());
    let work = Workdir::new(&format!(
        "[gateway]\nprefix = \"always\"\n\n[servers.notes]\ncommand = \"sh\"\nargs = [\"-c\", {}]\n",
        toml_string(&late)
    ));
    let gateway = HttpGateway::start(&work).await;
    let client = modern::over_http(Recorder::default(), &gateway.url).await;
    let subscription = modern::listen_to_resources(&client, &["notes+note://today"]).await;
    assert_eq!(
        subscription.acknowledged().resource_subscriptions,
        Some(vec!["notes+note://today".to_owned()]),
        "the late server's resource is acknowledged"
    );
    client.cancel().await.ok();
}
