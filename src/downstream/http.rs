//! Serving MCP over streamable HTTP at `/mcp` (axum, through rmcp's `StreamableHttpService`).

use std::{net::SocketAddr, sync::Arc};

use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};

use super::GatewayService;
use crate::{config::ProfileName, gateway::Gateway};

fn endpoint(
    gateway: &Arc<Gateway>,
    profile: ProfileName,
    config: StreamableHttpServerConfig,
) -> StreamableHttpService<GatewayService, LocalSessionManager> {
    let service = GatewayService::new(gateway.clone(), profile);
    StreamableHttpService::new(
        move || Ok(service.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// Binds `addr` and serves until SIGTERM/SIGINT. Calls `on_bound` with the real address
/// (useful with port 0).
pub async fn serve(
    gateway: Arc<Gateway>,
    addr: SocketAddr,
    on_bound: impl FnOnce(SocketAddr),
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("could not listen on {addr}: {e}"))?;
    let bound = listener.local_addr()?;
    on_bound(bound);

    let stop = gateway.shutdown_token().child_token();
    let mut config = StreamableHttpServerConfig::default().with_cancellation_token(stop.clone());
    // Loopback names are allowed by default (DNS-rebinding protection); a non-loopback bind
    // also accepts its own address.
    if !bound.ip().is_loopback() && !bound.ip().is_unspecified() {
        config.allowed_hosts.push(bound.ip().to_string());
    }
    // One MCP endpoint per profile at `/mcp/{profile}`; `/mcp` is the `default` profile
    // unless the config requires callers to choose.
    let mut app = axum::Router::new();
    for profile in &gateway.config.profiles {
        let endpoint = endpoint(&gateway, profile.name.clone(), config.clone());
        app = app.route_service(&format!("/mcp/{}", profile.name), endpoint);
    }
    if gateway.config.require_profile {
        app = app.route(
            "/mcp",
            axum::routing::any(|| async {
                (
                    axum::http::StatusCode::FORBIDDEN,
                    "this gateway requires a profile: use /mcp/{profile}\n",
                )
            }),
        );
    } else {
        app = app.route_service(
            "/mcp",
            endpoint(&gateway, ProfileName::default_profile(), config),
        );
    }
    let app = app.fallback(|uri: axum::http::Uri| async move {
        (
            axum::http::StatusCode::NOT_FOUND,
            format!(
                "no MCP endpoint at {uri}: use /mcp or /mcp/{{profile}} with a configured profile\n"
            ),
        )
    });
    tracing::info!(%bound, "serving MCP over HTTP at /mcp");
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            tokio::select! {
                // Asked to stop by signal.
                () = super::termination() => {}
                // The gateway is stopping for another reason.
                () = stop.cancelled() => {}
            }
            stop.cancel();
        })
        .await?;
    Ok(())
}
