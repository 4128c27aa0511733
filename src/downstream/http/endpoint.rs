//! Each profile's rmcp endpoint (`StreamableHttpService` over toolgate's handler): its settings, how one is made, and requests forwarded to it.

use std::{sync::Arc, time::Duration};

use axum::{body::Body, extract::Request, response::Response};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;
use tower_service::Service;

use super::{
    doors::Doors,
    fast::FastSessions,
    owners::Owners,
    sessions::{CappedSessions, SessionLimits},
};
use crate::{
    config::{HttpSettings, ProfileName},
    downstream::GatewayService,
    gateway::Gateway,
};

/// One profile's MCP endpoint.
pub(super) type Endpoint = StreamableHttpService<GatewayService, CappedSessions>;

/// rmcp's SSE keep-alive, when the idle timeout leaves room for it.
const SSE_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// rmcp's settings, the same for every endpoint: `stop` ends its sessions and streams.
pub(super) fn rmcp_settings(
    settings: &HttpSettings,
    doors: &Doors,
    stop: CancellationToken,
    body_cap: usize,
) -> StreamableHttpServerConfig {
    let mut config = StreamableHttpServerConfig::default()
        .with_cancellation_token(stop)
        .with_allowed_hosts(doors.rmcp_hosts())
        // SSE pings are what keeps a long call's connection from looking idle.
        .with_sse_keep_alive(Some(SSE_KEEP_ALIVE.min(settings.connection_idle / 2)))
        // Read by rmcp only for sessionless (2026-07-28) requests: an answer sent first goes as
        // JSON, which a client reads to its end and keeps its connection for (the Python SDK's
        // reconnects after each SSE answer); a notification first keeps SSE. Sessions keep SSE.
        .with_json_response(true);
    config.max_request_body_bytes = body_cap;
    config
}

/// The SSE keep-alive rmcp was given (the fast path keeps the same pace).
pub(super) fn keep_alive(config: &StreamableHttpServerConfig) -> Duration {
    config.sse_keep_alive.unwrap_or(SSE_KEEP_ALIVE)
}

/// Makes the endpoint of a profile: at start, and for a profile a reload adds.
pub(super) struct EndpointMaker {
    pub(super) gateway: Arc<Gateway>,
    pub(super) sessions: Arc<SessionLimits>,
    pub(super) owners: Arc<Owners>,
    /// rmcp expires a session idle this long.
    pub(super) session_idle: Duration,
    pub(super) fast: Option<Arc<FastSessions>>,
    pub(super) config: StreamableHttpServerConfig,
}

impl EndpointMaker {
    /// `profile`'s endpoint: toolgate's handler for it, its sessions counted against the
    /// shared caps.
    pub(super) fn make(&self, profile: &ProfileName) -> Endpoint {
        let mut service = GatewayService::new(self.gateway.clone(), profile.clone());
        if let Some(fast) = &self.fast {
            service = service.with_http_fast(fast.clone());
        }
        let manager = CappedSessions::new(
            self.sessions.clone(),
            self.owners.clone(),
            profile.clone(),
            self.session_idle,
            self.fast.clone(),
        );
        StreamableHttpService::new(
            move || Ok(service.for_new_session()),
            Arc::new(manager),
            self.config.clone(),
        )
    }
}

/// `request` answered by rmcp.
pub(super) async fn forward(endpoint: &Endpoint, request: Request) -> Response {
    let mut endpoint = endpoint.clone();
    match endpoint.call(request).await {
        Ok(response) => {
            let (parts, body) = response.into_parts();
            Response::from_parts(parts, Body::new(body))
        }
        Err(never) => match never {},
    }
}
