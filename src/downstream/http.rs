//! Serving MCP over streamable HTTP: `/mcp` and `/mcp/{profile}`, a profile chosen by path or bearer token.
//!
//! Every request passes these checks, in order, before any MCP handling:
//! 1. **Host and Origin** ([`doors`]): a missing, empty or malformed `Host` → 400; a `Host`
//!    that does not name this server → 403; an `Origin` that is not in
//!    `gateway.http.allowed_origins` nor loopback (unless `allow_loopback_origins = false`)
//!    → 403 (no `Origin`: not checked).
//! 2. **Profile and token** ([`auth`]); every 401 carries `WWW-Authenticate: Bearer`
//!    (with `resource_metadata` when `[gateway.auth]` is set, see [`oauth`]):
//!    - `Authorization: Bearer T` with a token no profile lists → 401, unless T is a JWT
//!      that `[gateway.auth]` accepts ([`oauth`]): it selects the profiles its claim maps
//!      to (none → 403), and its subject goes with the request;
//!    - **no token while any profile lists tokens → 401**, unless
//!      `gateway.http.allow_anonymous = true`, which lets callers without a token use the
//!      profiles that list none (as when no profile lists tokens at all);
//!    - on `/mcp/{p}`: an unknown `p` → 404; a token of another profile → 403; no token while
//!      `p` lists tokens → 401;
//!    - on `/mcp`: the token's profile, else `default` (401 if `require_profile`, or if
//!      `default` lists tokens).
//! 3. **The POST body** ([`envelope`]): read within `body_timeout_secs` (408) and 4 MiB or
//!    `max_message_bytes`, whichever is smaller (413); then a `tools/call` with malformed params is answered `-32602`, a request reusing the
//!    id of one still in flight on its session is answered `-32600` ([`guard`](super::guard)),
//!    and an `initialize` beyond the session caps gets 503 ([`sessions`]). A JSON body rmcp
//!    cannot decode is answered 400 as over stdio ([`lines::refusal`](super::lines::refusal)):
//!    `-32700` if it is not JSON, else `-32600` (rmcp would say 415).
//! 4. **The fast paths**: a plain `tools/call` on a live 2025-era session (and the client's
//!    cancel of one) is answered beside rmcp's session worker ([`fast`]); a plain 2026-07-28
//!    `tools/call` (no session) without rmcp's per-request service ([`modern`]); everything
//!    else goes to rmcp's `StreamableHttpService`.
//!
//! Connections are capped below the open-file limit, with header and idle timeouts
//! ([`connections`]). Tokens are compared in constant time (as SHA-256 digests), never
//! logged, never forwarded. `/metrics` is served on its own listener ([`metrics`]).

pub mod auth;
pub mod connections;
pub mod doors;
mod endpoint;
pub mod envelope;
pub mod fast;
mod handshake;
pub mod metrics;
pub mod modern;
pub mod oauth;
mod owners;
pub mod sessions;

use std::{collections::HashMap, net::SocketAddr, sync::Arc, time::Duration};

use axum::{
    body::Body,
    extract::{Path, Request, State},
    http::{HeaderName, HeaderValue, Method, StatusCode},
    response::{IntoResponse, Response},
    routing::any,
};
use rmcp::model::{ClientJsonRpcMessage, ErrorData};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

pub use self::metrics::MetricsListener;
use self::{
    auth::{Access, Refusal},
    connections::ConnectionLimits,
    doors::Doors,
    endpoint::{Endpoint, EndpointMaker, forward},
    envelope::{
        Envelope, InFlight, hold_until_sent, is_json, jsonrpc_error, jsonrpc_refusal, read_body,
    },
    sessions::SessionLimits,
};
use super::{
    guard::{TOOLS_CALL, duplicate_id},
    lines::refusal,
};
use crate::{config::ProfileName, gateway::Gateway};

// Header names as `HeaderName`s: a `&str` is parsed and checked on every lookup (callgrind:
// about 450 instructions a lookup by `&str`, 263 by a custom `HeaderName`; four per call POST).
/// The header naming a request's method (2026-07-28), checked by rmcp against the body.
const MCP_METHOD_HEADER: HeaderName = HeaderName::from_static("mcp-method");
/// The header naming a request's MCP session.
pub(crate) const SESSION_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");
/// How long the answer to `notifications/initialized` waits for the handler to open the
/// session to the fast path ([`fast::FastSessions::until_initialized`]).
const HANDSHAKE_WAIT: Duration = Duration::from_secs(1);
/// How long a stopping server waits for `tools/call` answers still being sent (the calls
/// themselves are over: the gateway drained them first).
const ANSWERS_OUT: Duration = Duration::from_secs(2);

/// Everything a request meets before rmcp: the checks of the module doc, then its endpoint.
struct Front {
    doors: Doors,
    /// Read once per request; rebuilt by the first request after a reload.
    routes: std::sync::RwLock<Arc<Routes>>,
    /// Makes the endpoint of a profile a reload added.
    make_endpoint: EndpointMaker,
    /// `[gateway.auth]`, built once at start.
    oauth: Option<Arc<oauth::OAuth>>,
    sessions: Arc<SessionLimits>,
    /// The subject that opened each session signed with an IdP token.
    owners: Arc<owners::Owners>,
    in_flight: Arc<InFlight>,
    /// `tools/call` answers not yet sent: a stopping server lets them go out first.
    answering: TaskTracker,
    body_timeout: Duration,
    /// [`envelope::body_cap`].
    body_cap: usize,
    gateway: Arc<Gateway>,
    /// The fast path for `tools/call` ([`fast`]); `None` with `fast_path = false`.
    fast: Option<Arc<fast::FastSessions>>,
}

/// Who may reach which profile, and each profile's endpoint, as of one configuration.
struct Routes {
    config: Arc<crate::config::Config>,
    access: Access,
    endpoints: HashMap<ProfileName, Endpoint>,
}

impl Front {
    /// The routes of the configuration in effect. After a reload, the profiles that stay
    /// keep their endpoints (and so their sessions); added ones get new endpoints, removed
    /// ones are gone.
    fn routes(&self) -> Arc<Routes> {
        let config = self.gateway.config();
        let current = self
            .routes
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        if Arc::ptr_eq(&current.config, &config) {
            return current;
        }
        let mut routes = self
            .routes
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !Arc::ptr_eq(&routes.config, &config) {
            let endpoints = config
                .profiles
                .iter()
                .map(|p| {
                    let endpoint = routes
                        .endpoints
                        .get(&p.name)
                        .cloned()
                        .unwrap_or_else(|| self.make_endpoint.make(&p.name));
                    (p.name.clone(), endpoint)
                })
                .collect();
            *routes = Arc::new(Routes {
                // `[gateway.auth]` itself is read at start (a reload keeps it): the IdP's
                // keys stay cached across reloads.
                access: Access::new(&config, self.oauth.clone()),
                config,
                endpoints,
            });
        }
        routes.clone()
    }

    /// `/healthz` (`live`) or `/readyz`: a status and one word, nothing about the servers.
    fn probe(&self, request: &Request, live: bool) -> Response {
        if let Err(refusal) = self.doors.check(request.headers()) {
            return refusal.into_response();
        }
        if live || self.gateway.is_ready() {
            (StatusCode::OK, "ok\n").into_response()
        } else {
            (StatusCode::SERVICE_UNAVAILABLE, "starting\n").into_response()
        }
    }

    async fn serve(&self, path_profile: Option<&str>, request: Request) -> Response {
        if let Err(refusal) = self.doors.check(request.headers()) {
            return refusal.into_response();
        }
        let mut request = request;
        let routes = self.routes();
        let (profile, subject) = match routes.access.select(path_profile, request.headers()).await {
            Ok(selected) => {
                let subject: Option<Arc<str>> = selected.subject.map(Into::into);
                if let Some(subject) = &subject {
                    // For the handler: the call's audit line and hook requests carry it.
                    request
                        .extensions_mut()
                        .insert(oauth::Subject(subject.clone()));
                }
                (selected.profile, subject)
            }
            Err(refusal) => return refusal.into_response(),
        };
        if let Some(session) = request
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            && let Err(not_yours) = self.owners.check(session, subject.as_deref())
        {
            return Refusal::new(StatusCode::FORBIDDEN, not_yours.to_string()).into_response();
        }
        let Some(endpoint) = routes.endpoints.get(&profile) else {
            return Refusal::new(StatusCode::NOT_FOUND, "unknown profile").into_response();
        };
        if request.method() != Method::POST {
            let delete = request.method() == Method::DELETE;
            let mut response = forward(endpoint, request).await;
            // rmcp answers a session's DELETE with 202. The TypeScript SDK's server answers
            // 200, and the Python SDK's client takes only 200 or 204 as the session closed
            // (it logs "Session termination failed: 202" otherwise).
            if delete && response.status() == StatusCode::ACCEPTED {
                *response.status_mut() = StatusCode::OK;
            }
            return response;
        }
        let (mut parts, body) = request.into_parts();
        let mut bytes = match read_body(body, self.body_timeout, self.body_cap).await {
            Ok(bytes) => bytes,
            Err(refusal) => return refusal.into_response(),
        };
        // A plain call (what SDKs write) on a session the fast path answers is read by the
        // walk alone, not by serde too ([`super::fast::CallParts::walk`]). Its params hold only
        // `name`, `arguments` and `_meta`: no task, nothing to divert or to refuse.
        if let Some(fast) = &self.fast
            && let Some(session) = parts.headers.get(SESSION_HEADER)
            && let Ok(session) = session.to_str()
            && let Some((id, call)) = super::fast::CallParts::walk(&bytes)
            && let Some(live) = fast.session(session, &profile, &parts.headers)
            && live.takes_calls()
        {
            let answering = self.answering.token();
            let Some(claim) = self.in_flight.begin(session, &id) else {
                return jsonrpc_error(id.clone(), duplicate_id(&id));
            };
            let response = fast.call(live, id, call, &parts).respond(&fast.heads).await;
            return hold_until_sent(response, (Some(claim), Some(answering)));
        }
        // A 2026-07-28 call (no session) that rmcp would pass without a word is answered
        // without rmcp's per-request service ([`modern`]), on a handler of its own as rmcp
        // would give it.
        if let Some(fast) = &self.fast
            && !parts.headers.contains_key(SESSION_HEADER)
            && let Some(call) = modern::ModernCall::read(&parts.headers, &bytes)
        {
            let service = super::GatewayService::new(self.gateway.clone(), profile.clone());
            if call.fits(&service.view()) {
                let answering = self.answering.token();
                let response = modern::answer(service, call, &parts, fast.keep_alive()).await;
                return hold_until_sent(response, answering);
            }
        }
        let envelope = Envelope::peek(&bytes);
        let mut diverted = false;
        // The four lists go to the handler under private names, to be answered with every
        // field the upstreams gave ([`super::faithful`]); so do task requests ([`super::tasks`]).
        if let Some(method) = envelope.as_ref().and_then(|e| e.method.as_deref())
            && (super::faithful::private_method(method).is_some()
                || method.starts_with("tasks/")
                || (method == TOOLS_CALL && super::tasks::may_carry_task(&bytes)))
            && let Some((renamed, private)) = super::faithful::divert_named(&bytes)
        {
            diverted = true;
            bytes = renamed.into();
            // A matching `Mcp-Method` follows the body (a mismatching one is left for rmcp
            // to refuse).
            if parts.headers.get(MCP_METHOD_HEADER).map(|v| v.as_bytes()) == Some(method.as_bytes())
            {
                parts
                    .headers
                    .insert(MCP_METHOD_HEADER, HeaderValue::from_static(private));
            }
        }
        let session = parts
            .headers
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok());
        let mut claim = None;
        let mut answering = None;
        let mut reservation = None;
        let mut handshake = false;
        // A session the fast path may answer this request for.
        let fast = match (&self.fast, session, &envelope) {
            (Some(fast), Some(session), Some(_)) if !diverted => fast
                .session(session, &profile, &parts.headers)
                .map(|session| (fast, session)),
            _ => None,
        };
        if let Some((fast, session)) = &fast
            && envelope.as_ref().is_some_and(|e| e.id.is_none())
            && let Some(accepted) = fast.cancel(session, &bytes)
        {
            return accepted;
        }
        if let Some(envelope) = &envelope
            && let Some((id, method)) = envelope.request()
        {
            // A call the fast path takes has params rmcp decodes: not checked again. A plain
            // one was taken above: only serde's reading is left to try.
            let fast_call = match &fast {
                Some((_, session)) if method == TOOLS_CALL && session.takes_calls() => {
                    super::fast::CallParts::peek_by_serde(&bytes)
                }
                _ => None,
            };
            if method == TOOLS_CALL
                && fast_call.is_none()
                && let Some(problem) = envelope.call_params_problem()
            {
                return jsonrpc_error(id.clone(), ErrorData::invalid_params(problem, None));
            }
            if method == TOOLS_CALL {
                answering = Some(self.answering.token());
            }
            handshake = method == "initialize";
            match session {
                Some(session) => match self.in_flight.begin(session, id) {
                    Some(taken) => claim = Some(taken),
                    None => return jsonrpc_error(id.clone(), duplicate_id(id)),
                },
                None if method == "initialize" => match self.sessions.reserve(&profile) {
                    Ok(held) => reservation = Some(held),
                    Err(full) => return full.refusal(id),
                },
                None => {}
            }
            if let (Some((fast, session)), Some((id, call))) = (fast, fast_call) {
                let response = fast
                    .call(session, id, call, &parts)
                    .respond(&fast.heads)
                    .await;
                return hold_until_sent(response, (claim, answering));
            }
        }
        let json_body = is_json(&parts.headers);
        // The handshake's last step: its answer waits for the fast path to open the session.
        let initialized = session
            .filter(|_| {
                self.fast.is_some()
                    && envelope.as_ref().is_some_and(|e| {
                        e.id.is_none() && e.method.as_deref() == Some("notifications/initialized")
                    })
            })
            .map(str::to_owned);
        if !self.gateway.is_ready() {
            // As over stdio: a request during the first starts waits for them (bounded), so
            // that its answer (capabilities, a listen's resources) includes what they offer.
            let wait = super::INITIALIZE_WAIT.min(self.gateway.config().supervise.start_grace);
            let _ = tokio::time::timeout(wait, self.gateway.ready()).await;
        }
        let response = forward(
            endpoint,
            Request::from_parts(parts, Body::from(bytes.clone())),
        )
        .await;
        // rmcp has counted the new session (if any) by now.
        drop(reservation);
        if handshake
            && response.status().is_success()
            && let Some(subject) = subject
            && let Some(session) = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
        {
            self.owners.bind(session, subject);
        }
        if let (Some(fast), Some(session)) = (&self.fast, &initialized)
            && response.status().is_success()
        {
            fast.until_initialized(session, HANDSHAKE_WAIT).await;
        }
        // rmcp answers a JSON body it cannot decode with 415, which blames the content type:
        // say what is wrong instead, as over stdio. Decoded again only on this path.
        if response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE
            && json_body
            && let Err(error) = serde_json::from_slice::<ClientJsonRpcMessage>(&bytes)
            && let Some((id, refused)) = refusal(&bytes, Some(&error))
        {
            return jsonrpc_refusal(StatusCode::BAD_REQUEST, id, refused);
        }
        let response = if handshake && response.status().is_success() {
            let patch = super::tasks::handshake_patch_for(self.gateway.clone(), profile.clone());
            handshake::patch(response, patch.as_ref(), self.body_timeout, self.body_cap).await
        } else {
            response
        };
        match (claim, answering) {
            (None, None) => response,
            held => hold_until_sent(response, held),
        }
    }
}

/// Binds `addr` and serves until `stop_serving` fires (after a signal, once the calls in
/// flight are drained) or the gateway stops; answers still being sent go out first.
/// Calls `on_bound` with the real address (useful with port 0).
pub async fn serve(
    gateway: Arc<Gateway>,
    addr: SocketAddr,
    stop_serving: CancellationToken,
    on_bound: impl FnOnce(SocketAddr),
) -> anyhow::Result<()> {
    let config = gateway.config();
    let settings = &config.http;
    // Raised by `serve` already; asked again (idempotent) for the limit it reached.
    let fd_limit = crate::child::raise_open_file_limit();
    let limits = ConnectionLimits {
        max_connections: connections::connection_cap(
            settings.max_connections,
            fd_limit,
            config.servers.len() + config.hooks.len(),
        ),
        header_timeout: settings.header_timeout,
        idle_timeout: settings.connection_idle,
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("could not listen on {addr}: {e}"))?;
    let bound = listener.local_addr()?;
    on_bound(bound);

    let stop = gateway.shutdown_token().child_token();
    let doors = Doors::new(
        bound,
        &settings.allowed_hosts,
        &settings.allowed_origins,
        settings.allow_loopback_origins,
    );
    let body_cap = envelope::body_cap(gateway.config().supervise.max_message_bytes);
    let rmcp_config = endpoint::rmcp_settings(settings, &doors, stop.clone(), body_cap);
    let sessions = SessionLimits::new(settings);
    let owners = Arc::new(owners::Owners::default());
    let fast = config.fast_path.then(|| {
        fast::FastSessions::new(
            settings.session_idle,
            endpoint::keep_alive(&rmcp_config),
            stop.clone(),
        )
    });
    let make_endpoint = EndpointMaker {
        gateway: gateway.clone(),
        sessions: sessions.clone(),
        owners: owners.clone(),
        session_idle: settings.session_idle,
        fast: fast.clone(),
        config: rmcp_config,
    };
    let endpoints = config
        .profiles
        .iter()
        .map(|p| (p.name.clone(), make_endpoint.make(&p.name)))
        .collect();
    let oauth = match &config.auth {
        Some(settings) => Some(Arc::new(
            oauth::OAuth::new(settings).map_err(|e| anyhow::anyhow!("[gateway.auth]: {e}"))?,
        )),
        None => None,
    };
    let front = Arc::new(Front {
        doors,
        routes: std::sync::RwLock::new(Arc::new(Routes {
            access: Access::new(&config, oauth.clone()),
            endpoints,
            config: config.clone(),
        })),
        make_endpoint,
        oauth: oauth.clone(),
        sessions,
        owners,
        in_flight: Arc::default(),
        answering: TaskTracker::new(),
        body_timeout: settings.body_timeout,
        body_cap,
        gateway: gateway.clone(),
        fast,
    });
    let answering = front.answering.clone();

    let mut app =
        axum::Router::new()
            .route(
                "/mcp",
                any(
                    |State(front): State<Arc<Front>>, request: Request| async move {
                        front.serve(None, request).await
                    },
                ),
            )
            .route(
                "/mcp/{profile}",
                any(
                    |State(front): State<Arc<Front>>,
                     Path(profile): Path<String>,
                     request: Request| async move {
                        front.serve(Some(&profile), request).await
                    },
                ),
            )
            // Liveness and readiness without details (server names and errors are for the
            // operator listener's `/readyz`); the doors still apply.
            .route(
                "/healthz",
                any(
                    |State(front): State<Arc<Front>>, request: Request| async move {
                        front.probe(&request, true)
                    },
                ),
            )
            .route(
                "/readyz",
                any(
                    |State(front): State<Arc<Front>>, request: Request| async move {
                        front.probe(&request, false)
                    },
                ),
            )
            .fallback(|uri: axum::http::Uri| async move {
                Refusal::new(
                    StatusCode::NOT_FOUND,
                    format!("no MCP endpoint at {uri}: use /mcp or /mcp/{{profile}}"),
                )
            })
            .with_state(front);
    if let Some(oauth) = oauth {
        // Public (issuer and resource URL only) and read by clients before they have a
        // token, from any origin: no doors. Served at the root and suffixed with `/mcp`.
        let suffixed = format!("{}/mcp", oauth::METADATA_PATH);
        let metadata = axum::Router::new()
            .route(
                oauth::METADATA_PATH,
                axum::routing::get(|State(oauth): State<Arc<oauth::OAuth>>| async move {
                    oauth.metadata()
                }),
            )
            .route(
                &suffixed,
                axum::routing::get(|State(oauth): State<Arc<oauth::OAuth>>| async move {
                    oauth.metadata()
                }),
            )
            .with_state(oauth);
        app = app.merge(metadata);
    }
    tracing::info!(
        %bound,
        max_connections = limits.max_connections,
        fd_limit = fd_limit.unwrap_or(0),
        max_sessions = settings.max_sessions,
        "serving MCP over HTTP at /mcp and /mcp/{{profile}}"
    );
    let stopper = async {
        tokio::select! {
            // Asked to stop by signal.
            () = stop_serving.cancelled() => {}
            // The gateway is stopping for another reason.
            () = stop.cancelled() => {}
        }
        // Closing the sessions now would drop answers on their way out.
        answering.close();
        if tokio::time::timeout(ANSWERS_OUT, answering.wait())
            .await
            .is_err()
        {
            tracing::debug!("tools/call answers still unsent after {ANSWERS_OUT:?}");
        }
        stop.cancel();
        // The listener drains and returns on its own now.
        std::future::pending::<()>().await;
    };
    tokio::select! {
        () = connections::serve(listener, app, limits, stop.clone()) => {}
        () = stopper => {}
    }
    Ok(())
}
