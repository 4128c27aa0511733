//! Clients of the 2026-07-28 lifecycle (`server/discover`, no `initialize`) connected to a toolgate over stdio or HTTP, with any client handler.

use std::{process::Stdio, time::Duration};

use rmcp::{
    ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient,
    model::ProtocolVersion,
    service::RunningService,
    transport::{StreamableHttpClientTransport, TokioChildProcess},
};

use super::{Workdir, toolgate};

/// The 2026-07-28 lifecycle only: no fallback to `initialize`.
pub fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

/// `toolgate serve` on `work`'s config over stdio, and `handler` connected to it.
pub async fn over_stdio<H: ClientHandler>(
    handler: H,
    work: &Workdir,
) -> RunningService<RoleClient, H> {
    let mut command = tokio::process::Command::new(toolgate());
    command
        .arg("--config")
        .arg(work.config())
        .arg("serve")
        .env("RUST_LOG", "toolgate=debug");
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn toolgate");
    tokio::time::timeout(
        Duration::from_secs(60),
        handler.serve_with_lifecycle(transport, lifecycle()),
    )
    .await
    .expect("discover within 60 s")
    .expect("2026-07-28 discover with toolgate over stdio")
}

/// `handler` connected to the toolgate serving HTTP at `url`.
pub async fn over_http<H: ClientHandler>(handler: H, url: &str) -> RunningService<RoleClient, H> {
    let transport = StreamableHttpClientTransport::from_uri(url);
    tokio::time::timeout(
        Duration::from_secs(10),
        handler.serve_with_lifecycle(transport, lifecycle()),
    )
    .await
    .expect("discover in time")
    .expect("2026-07-28 discover with toolgate over HTTP")
}

/// Opens a listen stream for updates of `uris` (bounded wait); what the gateway acknowledged
/// is on the subscription.
pub async fn listen_to_resources<H: ClientHandler>(
    client: &RunningService<RoleClient, H>,
    uris: &[&str],
) -> rmcp::service::Subscription {
    let mut filter = rmcp::model::SubscriptionFilter::new();
    filter.resource_subscriptions = Some(uris.iter().map(|u| u.to_string()).collect());
    tokio::time::timeout(Duration::from_secs(10), client.listen(filter))
        .await
        .expect("listen acknowledged in time")
        .expect("subscriptions/listen accepted")
}
