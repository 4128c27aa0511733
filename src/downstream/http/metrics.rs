//! `GET /metrics`, `/healthz` and `/readyz` on their own listener (`serve --metrics ADDR` or
//! `gateway.http.metrics_addr`), never on the MCP one: metric labels name every tool, a
//! token-only profile's included, and `/readyz` names every server and its last error.
//!
//! A non-loopback address needs `gateway.http.metrics_token`; with a token set, every scrape
//! must send `Authorization: Bearer <token>` (401 otherwise). The `Host` check is the MCP
//! listener's (loopback names, the bound address, `allowed_hosts`); `Origin` is checked too.

use std::{fmt::Write as _, net::SocketAddr, sync::Arc, time::Duration};

use axum::{
    extract::{Request, State},
    http::{StatusCode, header::CONTENT_TYPE},
    response::{IntoResponse, Response},
    routing::get,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::{
    auth::{Refusal, TokenSet, bearer_token},
    connections::{self, ConnectionLimits},
    doors::Doors,
};
use crate::gateway::Gateway;

/// Scrapers are few: a small cap keeps a flood here from costing the MCP listener descriptors.
const MAX_CONNECTIONS: usize = 16;

/// A bound metrics listener, not yet serving.
pub struct MetricsListener {
    listener: TcpListener,
    bound: SocketAddr,
}

impl MetricsListener {
    /// Binds `addr`, refusing a non-loopback one unless a metrics token is configured.
    pub async fn bind(gateway: &Gateway, addr: SocketAddr) -> anyhow::Result<Self> {
        gateway
            .config()
            .http
            .check_metrics_addr(addr)
            .map_err(anyhow::Error::msg)?;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("could not listen for metrics on {addr}: {e}"))?;
        let bound = listener.local_addr()?;
        Ok(Self { listener, bound })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.bound
    }

    /// Serves `/metrics` until `stop` fires.
    pub async fn serve(self, gateway: Arc<Gateway>, stop: CancellationToken) {
        let settings = &gateway.config().http;
        let mut token = TokenSet::default();
        if let Some(secret) = &settings.metrics_token {
            token.insert(secret.expose(), ());
        }
        let scrape = Arc::new(Scrape {
            doors: Doors::new(
                self.bound,
                &settings.allowed_hosts,
                &settings.allowed_origins,
                settings.allow_loopback_origins,
            ),
            token,
            gateway: gateway.clone(),
        });
        let limits = ConnectionLimits {
            max_connections: MAX_CONNECTIONS,
            header_timeout: settings.header_timeout,
            idle_timeout: settings.connection_idle.min(Duration::from_secs(60)),
        };
        let app = axum::Router::new()
            .route("/metrics", get(metrics))
            .route("/healthz", get(healthz))
            .route("/readyz", get(readyz))
            .fallback(|| async {
                Refusal::new(
                    StatusCode::NOT_FOUND,
                    "only /metrics, /healthz and /readyz are served here",
                )
            })
            .with_state(scrape);
        tracing::info!(bound = %self.bound, "serving metrics at /metrics");
        connections::serve(self.listener, app, limits, stop).await;
    }
}

struct Scrape {
    doors: Doors,
    token: TokenSet<()>,
    gateway: Arc<Gateway>,
}

impl Scrape {
    /// The Host/Origin doors and, when configured, the token.
    fn admit(&self, request: &Request) -> Result<(), Refusal> {
        self.doors.check(request.headers())?;
        if !self.token.is_empty() {
            match bearer_token(request.headers()) {
                Ok(Some(token)) if self.token.get(token).is_some() => {}
                Ok(None) => return Err(Refusal::unauthorized("metrics require a bearer token")),
                _ => return Err(Refusal::bad_token("unknown metrics token")),
            }
        }
        Ok(())
    }
}

/// Liveness: the process answers.
async fn healthz(State(scrape): State<Arc<Scrape>>, request: Request) -> Response {
    if let Err(refusal) = scrape.admit(&request) {
        return refusal.into_response();
    }
    (StatusCode::OK, "ok\n").into_response()
}

/// Readiness, with every server's state, restarts and last error, and the last refused
/// reload's error: 503 until the start check is done.
async fn readyz(State(scrape): State<Arc<Scrape>>, request: Request) -> Response {
    if let Err(refusal) = scrape.admit(&request) {
        return refusal.into_response();
    }
    let gateway = &scrape.gateway;
    let ready = gateway.is_ready();
    let body = serde_json::json!({
        "ready": ready,
        "servers": gateway.upstreams.all().iter().map(|u| u.health()).collect::<Vec<_>>(),
        // Why the last reload was refused (the running configuration kept serving); `null`
        // once a reload succeeds.
        "last_reload_error": gateway.last_reload_error(),
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, axum::Json(body)).into_response()
}

async fn metrics(State(scrape): State<Arc<Scrape>>, request: Request) -> Response {
    if let Err(refusal) = scrape.admit(&request) {
        return refusal.into_response();
    }
    let mut text = scrape.gateway.pipeline.metrics.render();
    let _ = writeln!(
        text,
        "# HELP toolgate_client_sessions Client sessions upstream messages can reach now (stdio, 2025-era HTTP, and 2026-07-28 HTTP requests until their answer is out).\n# TYPE toolgate_client_sessions gauge\ntoolgate_client_sessions {}",
        scrape.gateway.relay.sessions()
    );
    ([(CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}
