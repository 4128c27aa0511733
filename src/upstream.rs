//! Upstream MCP servers: one rmcp client per server, started concurrently, supervised, called by name.
//!
//! [`Upstreams::start`] gives every configured server its own supervisor task
//! ([`supervisor`]) and returns at once: each one connects (a stdio child in its own process
//! group, or streamable HTTP), imports the tools, re-imports on `list_changed`, pings the
//! server, and restarts it with backoff when it dies or hangs. A server that fails does not
//! stop the others. Everything a supervisor learns becomes an [`UpstreamEvent`] for the
//! registry's owner, so this module never touches the registry.

mod bounded_http;
mod client;
mod connect;
mod flood;
mod http_lists;
mod lists;
mod logs;
pub mod oauth;
mod passthrough;
mod progress;
mod pump;
pub mod raw;
mod servers;
mod size_guard;
mod supervisor;
mod tasks;

use std::{
    fmt,
    sync::{
        Arc, RwLock,
        atomic::{AtomicU32, Ordering},
    },
};

use rmcp::{
    RoleClient,
    model::{
        CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
        ClientRequest, ErrorData, JsonObject, ProgressToken, ResultType, ServerResult, Tool,
    },
    service::{Peer, PeerRequestOptions, RunningService},
};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{config::ServerId, registry::passthrough::Offer, relay::Relay};
use client::UpstreamClient;
pub use passthrough::Limit;
pub use progress::{ProgressRoute, ProgressRoutes};
pub use servers::{Retiring, Upstreams};
pub(crate) use size_guard::find_id;

/// What the registry's owner learns from the upstreams.
#[derive(Debug)]
pub enum UpstreamEvent {
    /// `server` now exports exactly `tools`; `extras` is what it listed for them that
    /// [`Tool`] cannot hold, by tool name ([`crate::registry::extra`]).
    Tools {
        server: ServerId,
        tools: Vec<Tool>,
        extras: crate::registry::extra::Extras,
    },
    /// `server` now offers exactly these prompts, resources and templates.
    Offer { server: ServerId, offer: Offer },
    /// `server` went away (died, hung, or failed to start): its tools and offer are
    /// withdrawn until it is imported again.
    Down { server: ServerId, reason: String },
    /// `server`'s first start is over, one way or the other (sent once, after its first
    /// `Tools`/`Offer` or `Down`).
    Started { server: ServerId },
}

#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The server is not connected (failed to start, or died).
    #[error("server \"{server}\" is unavailable: {reason}")]
    Unavailable { server: ServerId, reason: String },
    /// The server answered with a JSON-RPC error: relayed to the client as is.
    #[error("server \"{server}\" answered with an error: {error}")]
    Rpc { server: ServerId, error: ErrorData },
    /// The server answered with something that is not a tool result.
    #[error("server \"{server}\" sent an unexpected answer: {detail}")]
    Protocol { server: ServerId, detail: String },
    /// The server's answer was over `max_message_bytes`: dropped unread, the call failed at
    /// once. `bytes` is its size when known (a stdio line is counted to its end; an HTTP body
    /// or SSE event is left unread past the limit).
    #[error(
        "server \"{server}\" sent an answer{}, over max_message_bytes ({limit})",
        .bytes.map(|b| format!(" of {b} bytes")).unwrap_or_default()
    )]
    TooLarge {
        server: ServerId,
        bytes: Option<u64>,
        limit: u64,
    },
    /// The server needs `toolgate login`: no stored token, a refused token whose refresh
    /// failed, or a scope toolgate was not granted. `reason` names the server and the command.
    #[error("{reason}")]
    AuthRequired { server: ServerId, reason: String },
    /// The calling client cancelled; the upstream was told.
    #[error("call cancelled by the client")]
    Cancelled,
}

impl UpstreamError {
    pub fn code(&self) -> &'static str {
        match self {
            UpstreamError::Unavailable { .. } => "UPSTREAM_UNAVAILABLE",
            UpstreamError::Rpc { .. } => "UPSTREAM_ERROR",
            UpstreamError::Protocol { .. } => "UPSTREAM_PROTOCOL",
            UpstreamError::TooLarge { .. } => "MESSAGE_TOO_LARGE",
            UpstreamError::AuthRequired { .. } => crate::error::UPSTREAM_AUTH_REQUIRED,
            UpstreamError::Cancelled => "CANCELLED",
        }
    }
}

/// A server's state, as `toolgate check` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    Starting,
    Ready { tools: usize },
    Failed(String),
}

impl fmt::Display for ServerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerState::Starting => f.write_str("starting"),
            ServerState::Ready { tools } => write!(f, "ready ({tools} tools)"),
            ServerState::Failed(reason) => write!(f, "failed: {reason}"),
        }
    }
}

/// One server's health, as `GET /readyz` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Health {
    pub server: String,
    /// `starting`, `ready`, `down` or `needs_login`.
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<usize>,
    /// Restarts since the gateway started.
    pub restarts: u32,
    /// Why it last went down, if it ever did.
    pub last_error: Option<String>,
    /// Why it needs `toolgate login` (and the command), if it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needs_login: Option<String>,
}

/// What a connected server is reached through.
struct Link {
    peer: Peer<RoleClient>,
    raw: Option<Arc<raw::RawLink>>,
    /// Where requests are sent and answered as JSON (lists, tasks).
    json: lists::JsonLists,
}

/// Where progress for one upstream call should go: the calling client and its own token.
#[derive(Clone)]
pub struct ProgressSink {
    pub to: crate::relay::Reach,
    pub token: ProgressToken,
}

impl ProgressSink {
    /// Sends one notification (its token already the client's) to the client.
    pub async fn notify(
        &self,
        params: rmcp::model::ProgressNotificationParam,
    ) -> Result<(), String> {
        self.to.progress(params).await
    }
}

/// What a call needs besides name and arguments.
pub struct CallContext {
    /// Fired by the client's `notifications/cancelled` (or a timeout): the upstream is told too.
    pub cancel: CancellationToken,
    pub progress: Option<ProgressSink>,
    /// The calling session: while the call is in flight, the upstream's requests and log
    /// messages go to it.
    pub session: Option<crate::relay::SessionId>,
    /// The client's `traceparent`, passed on when spans are not exported
    /// ([`crate::telemetry::outgoing`]).
    pub remote: Option<crate::telemetry::Traceparent>,
    /// For a 2026-07-28 call: where the upstream's requests go ([`crate::rounds`]).
    pub rounds: Option<crate::rounds::AskSink>,
}

/// One upstream server: its state and, while connected, the client peer to call it through.
pub struct Upstream {
    name: ServerId,
    state: RwLock<ServerState>,
    /// While connected: the rmcp client, and for a stdio server the raw path beside it.
    link: RwLock<Option<Link>>,
    progress: Arc<ProgressRoutes>,
    /// The server's log messages on their way to clients ([`logs`]).
    logs: Arc<logs::LogRelays>,
    relay: Arc<Relay>,
    restarts: AtomicU32,
    last_error: RwLock<Option<String>>,
    /// One token per call in flight: a retired server stops only once they are over.
    calls: TaskTracker,
    /// Sign-in state of a server with `auth` ([`oauth`]); never set for others.
    auth: Arc<oauth::AuthWatch>,
}

impl Upstream {
    fn new(name: ServerId, relay: Arc<Relay>, auth: Arc<oauth::AuthWatch>) -> Self {
        Self {
            auth,
            name,
            state: RwLock::new(ServerState::Starting),
            link: RwLock::new(None),
            progress: Arc::new(ProgressRoutes::default()),
            logs: Arc::default(),
            relay,
            restarts: AtomicU32::new(0),
            last_error: RwLock::new(None),
            calls: TaskTracker::new(),
        }
    }

    /// Held for the length of one call: a reload that retires this server waits for it.
    pub fn track_call(&self) -> tokio_util::task::task_tracker::TaskTrackerToken {
        self.calls.token()
    }

    /// How many times the supervisor has restarted this server.
    pub fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::Relaxed)
    }

    fn count_restart(&self) {
        self.restarts.fetch_add(1, Ordering::Relaxed);
    }

    /// Why the server last went down, if it ever did.
    pub fn last_error(&self) -> Option<String> {
        match self.last_error.read() {
            Ok(e) => e.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn set_last_error(&self, reason: String) {
        match self.last_error.write() {
            Ok(mut e) => *e = Some(reason),
            Err(poisoned) => *poisoned.into_inner() = Some(reason),
        }
    }

    pub fn health(&self) -> Health {
        let (state, tools) = match self.state() {
            ServerState::Starting => ("starting", None),
            ServerState::Ready { tools } => ("ready", Some(tools)),
            ServerState::Failed(_) => ("down", None),
        };
        let needs_login = self.needs_login();
        Health {
            server: self.name.to_string(),
            state: if needs_login.is_some() {
                "needs_login"
            } else {
                state
            },
            tools,
            restarts: self.restarts(),
            last_error: self.last_error(),
            needs_login,
        }
    }

    /// The server's capabilities as it declared them, while connected.
    pub fn features(&self) -> Option<crate::registry::passthrough::Features> {
        let peer = self.current_peer().ok()?;
        Some(passthrough::features_of(&peer.peer_info()?.capabilities))
    }

    pub fn name(&self) -> &ServerId {
        &self.name
    }

    pub fn state(&self) -> ServerState {
        self.state
            .read()
            .map(|s| s.clone())
            .unwrap_or_else(|poisoned| poisoned.into_inner().clone())
    }

    fn set_state(&self, state: ServerState) {
        match self.state.write() {
            Ok(mut s) => *s = state,
            Err(poisoned) => *poisoned.into_inner() = state,
        }
    }

    fn set_link(&self, link: Option<Link>) {
        match self.link.write() {
            Ok(mut l) => *l = link,
            Err(poisoned) => *poisoned.into_inner() = link,
        }
    }

    fn read_link<T>(&self, read: impl FnOnce(&Link) -> Option<T>) -> Option<T> {
        let link = match self.link.read() {
            Ok(l) => l,
            Err(poisoned) => poisoned.into_inner(),
        };
        link.as_ref().and_then(read)
    }

    fn current_peer(&self) -> Result<Peer<RoleClient>, UpstreamError> {
        self.read_link(|link| Some(link.peer.clone()))
            .ok_or_else(|| self.not_connected())
    }

    /// The raw path to this server, while a stdio connection is up.
    pub fn raw_link(&self) -> Option<Arc<raw::RawLink>> {
        self.read_link(|link| link.raw.clone())
    }

    /// Why the server needs `toolgate login`, if it does.
    pub fn needs_login(&self) -> Option<String> {
        self.auth.needs_login()
    }

    fn not_connected(&self) -> UpstreamError {
        if let Some(reason) = self.needs_login() {
            return UpstreamError::AuthRequired {
                server: self.name.clone(),
                reason,
            };
        }
        UpstreamError::Unavailable {
            server: self.name.clone(),
            reason: match self.state() {
                ServerState::Failed(reason) => reason,
                other => other.to_string(),
            },
        }
    }

    /// Forwards one `tools/call` and relays the result. Progress from the upstream reaches
    /// `ctx.progress` under the client's own token; a cancel reaches the upstream as
    /// `notifications/cancelled`.
    #[tracing::instrument(name = "upstream tools/call", target = "toolgate::call::upstream", level = "debug", skip_all, fields(otel.kind = "client", server = %self.name, tool = tool))]
    pub async fn call(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        ctx: CallContext,
    ) -> Result<CallToolResult, UpstreamError> {
        let peer = self.current_peer()?;
        // While this call runs, the server's requests and log messages go to its caller.
        let _in_flight = ctx.session.map(|session| {
            self.relay
                .begin_call(&self.name, session, ctx.rounds.clone())
        });
        let request = ClientRequest::CallToolRequest(CallToolRequest::new({
            let mut params = CallToolRequestParams::new(tool.to_owned());
            params.arguments = arguments;
            params
        }));
        // `_meta.traceparent` (SEP-414); an HTTP upstream also gets it as a header
        // (`bounded_http`).
        let options = || {
            let mut options = PeerRequestOptions::no_options();
            if let Some(traceparent) =
                crate::telemetry::outgoing(&tracing::Span::current(), ctx.remote)
            {
                let mut meta = rmcp::model::RequestMetaObject::new();
                meta.set_traceparent(traceparent.to_string());
                options.meta = Some(meta);
            }
            options
        };
        // rmcp picks the upstream progress token itself, so the route is keyed by it; the
        // routes lock is held across the send so that early progress cannot miss the route.
        let (handle, _route) = match &ctx.progress {
            Some(sink) => {
                let mut routes = self.progress.lock().await;
                let handle = peer
                    .send_request_with_option(request, options())
                    .await
                    .map_err(|e| self.unavailable(e))?;
                routes.insert(handle.progress_token.clone(), sink.clone());
                let route =
                    progress::RouteGuard::new(self.progress.clone(), handle.progress_token.clone());
                (handle, Some(route))
            }
            None => {
                let handle = peer
                    .send_request_with_option(request, options())
                    .await
                    .map_err(|e| self.unavailable(e))?;
                (handle, None)
            }
        };
        let id = handle.id.clone();
        let response = tokio::select! {
            // The upstream answered (or its connection closed).
            response = handle.rx => response,
            // The client cancelled: tell the upstream, and give no answer.
            () = ctx.cancel.cancelled() => {
                let notice = CancelledNotificationParam::new(
                    Some(id),
                    Some("cancelled by the gateway's client".into()),
                );
                if let Err(error) = peer.notify_cancelled(notice).await {
                    tracing::debug!(server = %self.name, %error, "could not forward cancel");
                }
                return Err(UpstreamError::Cancelled);
            }
        };
        if ctx.progress.is_some() {
            self.progress.settle().await;
        }
        // Log messages the server wrote before its answer reach the client before it.
        self.logs.settle().await;
        match response {
            Ok(Ok(result)) => tool_result(&self.name, result),
            Ok(Err(error)) => Err(self.unavailable(error)),
            Err(_closed) => Err(self.closed_during_call()),
        }
    }

    fn closed_during_call(&self) -> UpstreamError {
        UpstreamError::Unavailable {
            server: self.name.clone(),
            reason: "connection closed during the call".into(),
        }
    }

    fn unavailable(&self, error: rmcp::service::ServiceError) -> UpstreamError {
        match error {
            rmcp::service::ServiceError::McpError(error) => {
                // The stand-in answer for a line too large to read (see `size_guard`).
                let too_large = error
                    .data
                    .as_ref()
                    .and_then(|data| data.get(size_guard::TOO_LARGE_MARK));
                match too_large {
                    Some(sizes) => UpstreamError::TooLarge {
                        server: self.name.clone(),
                        bytes: sizes["bytes"].as_u64(),
                        limit: sizes["limit"].as_u64().unwrap_or_default(),
                    },
                    None => UpstreamError::Rpc {
                        server: self.name.clone(),
                        error,
                    },
                }
            }
            other => match self.auth.refused(&self.name) {
                Some(reason) => UpstreamError::AuthRequired {
                    server: self.name.clone(),
                    reason,
                },
                None => UpstreamError::Unavailable {
                    server: self.name.clone(),
                    reason: other.to_string(),
                },
            },
        }
    }
}

/// The tool result in `server`'s answer to `tools/call`, or why there is none.
pub(crate) fn tool_result(
    server: &ServerId,
    result: ServerResult,
) -> Result<CallToolResult, UpstreamError> {
    match result {
        ServerResult::CallToolResult(mut result) => {
            // An older upstream leaves it out; a 2026-07-28 client requires it. rmcp strips
            // it again for older clients.
            result.result_type.get_or_insert(ResultType::COMPLETE);
            Ok(result)
        }
        other => Err(UpstreamError::Protocol {
            server: server.clone(),
            detail: format!("expected a tool result, got {}", result_kind(&other)),
        }),
    }
}

fn result_kind(result: &ServerResult) -> &'static str {
    match result {
        ServerResult::InputRequiredResult(_) => "an input_required result (not supported yet)",
        ServerResult::CreateTaskResult(_) => "a task (not supported yet)",
        ServerResult::EmptyResult(_) => "an empty result",
        _ => "another kind of result",
    }
}

/// The server's tools, with their extras when it has a raw path.
async fn import_tools(
    server: &ServerId,
    peer: &Peer<RoleClient>,
    source: &lists::JsonLists,
) -> Result<lists::Listed<Tool>, String> {
    lists::list(server, &lists::TOOLS, source, peer.list_all_tools()).await
}

/// The running client of one server: kept so the supervisor can watch and stop it.
pub(crate) type Service = RunningService<RoleClient, UpstreamClient>;
