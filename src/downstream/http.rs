//! Serving MCP over streamable HTTP at `/mcp` (axum, through rmcp's `StreamableHttpService`).

use std::{net::SocketAddr, sync::Arc};

use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};

use super::GatewayService;
use crate::gateway::Gateway;

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
    let service = GatewayService::new(gateway.clone());
    let mcp = StreamableHttpService::new(
        move || Ok(service.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let app = axum::Router::new().nest_service("/mcp", mcp);
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
