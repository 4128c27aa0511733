//! Serving MCP over streamable HTTP: `/mcp` and `/mcp/{profile}`, a profile chosen by path or bearer token.
//!
//! Selection rules, checked before any MCP handling:
//! - `Authorization: Bearer T` with a token no profile lists → 401;
//! - on `/mcp/{p}`: an unknown `p` → 404; a token of another profile → 403; no token while
//!   `p` lists tokens → 401;
//! - on `/mcp`: the token's profile, else `default` (401 if `require_profile`, or if
//!   `default` lists tokens).
//!
//! Tokens are compared in constant time (as SHA-256 digests), never logged, never forwarded.

use std::{collections::HashMap, net::SocketAddr, sync::Arc};

use axum::{
    body::Body,
    extract::{Path, Request, State},
    http::{StatusCode, header::AUTHORIZATION},
    response::{IntoResponse, Response},
    routing::any,
};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use tower_service::Service;

use super::GatewayService;
use crate::{config::ProfileName, gateway::Gateway};

type Endpoint = StreamableHttpService<GatewayService, LocalSessionManager>;

/// Every profile's MCP endpoint and the tokens that select them.
struct Endpoints {
    by_profile: HashMap<ProfileName, Endpoint>,
    /// (SHA-256 of a token, its profile): digests have one length, so comparing them in
    /// constant time reveals nothing about the token's length either.
    tokens: Vec<([u8; 32], ProfileName)>,
    guarded: Vec<ProfileName>,
    require_profile: bool,
}

impl Endpoints {
    fn profile_of_token(&self, token: &str) -> Option<&ProfileName> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        // Look at every entry whatever matches, so timing does not tell which one did.
        let mut found = None;
        for (candidate, profile) in &self.tokens {
            let difference = candidate
                .iter()
                .zip(digest.iter())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b));
            if difference == 0 {
                found = Some(profile);
            }
        }
        found
    }

    /// Which profile this request is for, or the refusal to send.
    fn select(
        &self,
        path_profile: Option<&str>,
        request: &Request,
    ) -> Result<ProfileName, Refusal> {
        let token_profile = match bearer_token(request) {
            Ok(Some(token)) => match self.profile_of_token(token) {
                Some(profile) => Some(profile),
                None => {
                    return Err(Refusal(
                        StatusCode::UNAUTHORIZED,
                        "unknown bearer token".to_owned(),
                    ));
                }
            },
            Ok(None) => None,
            Err(()) => {
                return Err(Refusal(
                    StatusCode::UNAUTHORIZED,
                    "the Authorization header must be `Bearer <token>`".to_owned(),
                ));
            }
        };
        let profile = match (path_profile, token_profile) {
            (Some(name), token_profile) => {
                let Some(profile) = self.by_profile.keys().find(|p| p.as_str() == name) else {
                    return Err(Refusal(
                        StatusCode::NOT_FOUND,
                        format!("unknown profile {name:?}"),
                    ));
                };
                match token_profile {
                    Some(owner) if owner != profile => {
                        return Err(Refusal(
                            StatusCode::FORBIDDEN,
                            format!("this bearer token does not grant profile {name:?}"),
                        ));
                    }
                    Some(_) => {}
                    None if self.guarded.contains(profile) => {
                        return Err(Refusal(
                            StatusCode::UNAUTHORIZED,
                            format!("profile {name:?} requires a bearer token"),
                        ));
                    }
                    None => {}
                }
                profile.clone()
            }
            (None, Some(profile)) => profile.clone(),
            (None, None) => {
                let default = ProfileName::default_profile();
                if self.require_profile || self.guarded.contains(&default) {
                    return Err(Refusal(
                        StatusCode::UNAUTHORIZED,
                        "this gateway requires a profile: use /mcp/{profile} or a bearer token"
                            .to_owned(),
                    ));
                }
                default
            }
        };
        Ok(profile)
    }

    async fn serve(&self, path_profile: Option<&str>, request: Request) -> Response {
        let profile = match self.select(path_profile, &request) {
            Ok(profile) => profile,
            Err(Refusal(status, message)) => return refuse(status, &message),
        };
        let Some(endpoint) = self.by_profile.get(&profile) else {
            return refuse(StatusCode::NOT_FOUND, "unknown profile");
        };
        let mut endpoint = endpoint.clone();
        match endpoint.call(request).await {
            Ok(response) => {
                let (parts, body) = response.into_parts();
                Response::from_parts(parts, Body::new(body))
            }
            Err(never) => match never {},
        }
    }
}

/// `Ok(None)` without an Authorization header; `Err` for one that is not a bearer token.
fn bearer_token(request: &Request) -> Result<Option<&str>, ()> {
    let Some(value) = request.headers().get(AUTHORIZATION) else {
        return Ok(None);
    };
    let value = value.to_str().map_err(|_| ())?;
    let (scheme, token) = value.split_once(' ').ok_or(())?;
    if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() {
        Ok(Some(token.trim()))
    } else {
        Err(())
    }
}

/// Why a request gets no MCP endpoint: the status and a one-line explanation.
struct Refusal(StatusCode, String);

fn refuse(status: StatusCode, message: &str) -> Response {
    (status, format!("{message}\n")).into_response()
}

/// Binds `addr` and serves until `stop` fires (SIGTERM/SIGINT). Calls `on_bound` with the
/// real address (useful with port 0).
pub async fn serve(
    gateway: Arc<Gateway>,
    addr: SocketAddr,
    stop_serving: CancellationToken,
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
    let profiles = &gateway.config.profiles;
    let endpoints = Arc::new(Endpoints {
        by_profile: profiles
            .iter()
            .map(|p| {
                let service = GatewayService::new(gateway.clone(), p.name.clone());
                let endpoint = StreamableHttpService::new(
                    move || Ok(service.clone()),
                    Arc::new(LocalSessionManager::default()),
                    config.clone(),
                );
                (p.name.clone(), endpoint)
            })
            .collect(),
        tokens: profiles
            .iter()
            .flat_map(|p| {
                p.tokens
                    .iter()
                    .map(|t| (Sha256::digest(t.expose().as_bytes()).into(), p.name.clone()))
            })
            .collect(),
        guarded: profiles
            .iter()
            .filter(|p| !p.tokens.is_empty())
            .map(|p| p.name.clone())
            .collect(),
        require_profile: gateway.config.require_profile,
    });

    let app = axum::Router::new()
        .route(
            "/mcp",
            any(
                |State(endpoints): State<Arc<Endpoints>>, request: Request| async move {
                    endpoints.serve(None, request).await
                },
            ),
        )
        .route(
            "/mcp/{profile}",
            any(
                |State(endpoints): State<Arc<Endpoints>>,
                 Path(profile): Path<String>,
                 request: Request| async move {
                    endpoints.serve(Some(&profile), request).await
                },
            ),
        )
        .route(
            "/metrics",
            axum::routing::get({
                let gateway = gateway.clone();
                move || async move {
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "text/plain; version=0.0.4",
                        )],
                        gateway.pipeline.metrics.render(),
                    )
                }
            }),
        )
        .fallback(|uri: axum::http::Uri| async move {
            refuse(
                StatusCode::NOT_FOUND,
                &format!("no MCP endpoint at {uri}: use /mcp or /mcp/{{profile}}"),
            )
        })
        .with_state(endpoints);
    tracing::info!(%bound, "serving MCP over HTTP at /mcp and /mcp/{{profile}}");
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            tokio::select! {
                // Asked to stop by signal.
                () = stop_serving.cancelled() => {}
                // The gateway is stopping for another reason.
                () = stop.cancelled() => {}
            }
            stop.cancel();
        })
        .await?;
    Ok(())
}
