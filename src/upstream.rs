//! Upstream MCP servers: one rmcp client per server, started concurrently, supervised, called by name.
//!
//! [`Upstreams::start`] connects every configured server at once (stdio children in their
//! own process group, or streamable HTTP) and imports its tools. A server that fails does not
//! stop the others. After start each live server has a supervisor task that re-imports on
//! `notifications/tools/list_changed` and notices when the server goes away; both become
//! [`UpstreamEvent`]s for the registry's owner, so this module never touches the registry.

mod client;
mod connect;
mod passthrough;
mod progress;

use std::{
    collections::HashMap,
    fmt,
    sync::{Arc, RwLock},
    time::Duration,
};

use rmcp::{
    RoleClient, RoleServer,
    model::{
        CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest,
        ErrorData, JsonObject, ProgressToken, ResultType, ServerResult, Tool,
    },
    service::{Peer, PeerRequestOptions, RunningService},
};
use tokio::sync::{Notify, mpsc};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    config::{ServerConfig, ServerId},
    registry::passthrough::Offer,
    relay::Relay,
};
use client::{Changes, UpstreamClient};
pub use passthrough::Limit;
pub use progress::ProgressRoutes;

/// How long one server may take to start and list its tools before it counts as failed.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// What the registry's owner learns from the upstreams.
#[derive(Debug)]
pub enum UpstreamEvent {
    /// `server` now exports exactly `tools`.
    Tools { server: ServerId, tools: Vec<Tool> },
    /// `server` now offers exactly these prompts, resources and templates.
    Offer { server: ServerId, offer: Offer },
    /// `server` went away; its tools stay listed and calls to them fail as unavailable.
    Down { server: ServerId, reason: String },
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

/// Where progress for one upstream call should go: the calling client and its own token.
#[derive(Clone)]
pub struct ProgressSink {
    pub peer: Peer<RoleServer>,
    pub token: ProgressToken,
}

/// What a call needs besides name and arguments.
pub struct CallContext {
    /// Fired by the client's `notifications/cancelled` (or a timeout): the upstream is told too.
    pub cancel: CancellationToken,
    pub progress: Option<ProgressSink>,
    /// The calling session: while the call is in flight, the upstream's requests and log
    /// messages go to it.
    pub session: Option<crate::relay::SessionId>,
}

/// One upstream server: its state and, while connected, the client peer to call it through.
pub struct Upstream {
    name: ServerId,
    state: RwLock<ServerState>,
    peer: RwLock<Option<Peer<RoleClient>>>,
    progress: Arc<ProgressRoutes>,
    relay: Arc<Relay>,
}

impl Upstream {
    fn new(name: ServerId, relay: Arc<Relay>) -> Self {
        Self {
            name,
            state: RwLock::new(ServerState::Starting),
            peer: RwLock::new(None),
            progress: Arc::new(ProgressRoutes::default()),
            relay,
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

    fn set_peer(&self, peer: Option<Peer<RoleClient>>) {
        match self.peer.write() {
            Ok(mut p) => *p = peer,
            Err(poisoned) => *poisoned.into_inner() = peer,
        }
    }

    fn current_peer(&self) -> Result<Peer<RoleClient>, UpstreamError> {
        let peer = match self.peer.read() {
            Ok(p) => p.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        peer.ok_or_else(|| UpstreamError::Unavailable {
            server: self.name.clone(),
            reason: match self.state() {
                ServerState::Failed(reason) => reason,
                other => other.to_string(),
            },
        })
    }

    /// Forwards one `tools/call` and relays the result. Progress from the upstream reaches
    /// `ctx.progress` under the client's own token; a cancel reaches the upstream as
    /// `notifications/cancelled`.
    #[tracing::instrument(level = "debug", skip_all, fields(server = %self.name, tool = tool))]
    pub async fn call(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        ctx: CallContext,
    ) -> Result<rmcp::model::CallToolResult, UpstreamError> {
        let peer = self.current_peer()?;
        // While this call runs, the server's requests and log messages go to its caller.
        let _in_flight = ctx
            .session
            .map(|session| self.relay.begin_call(&self.name, session));
        let request = ClientRequest::CallToolRequest(CallToolRequest::new({
            let mut params = CallToolRequestParams::new(tool.to_owned());
            params.arguments = arguments;
            params
        }));
        // rmcp picks the upstream progress token itself, so the route is keyed by it; the
        // routes lock is held across the send so that early progress cannot miss the route.
        let (handle, _route) = match &ctx.progress {
            Some(sink) => {
                let mut routes = self.progress.lock().await;
                let handle = peer
                    .send_request_with_option(request, PeerRequestOptions::no_options())
                    .await
                    .map_err(|e| self.unavailable(e))?;
                routes.insert(handle.progress_token.clone(), sink.clone());
                let route =
                    progress::RouteGuard::new(self.progress.clone(), handle.progress_token.clone());
                (handle, Some(route))
            }
            None => {
                let handle = peer
                    .send_request_with_option(request, PeerRequestOptions::no_options())
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
        match response {
            Ok(Ok(ServerResult::CallToolResult(mut result))) => {
                // An older upstream leaves it out; a 2026-07-28 client requires it. rmcp strips
                // it again for older clients.
                result.result_type.get_or_insert(ResultType::COMPLETE);
                Ok(result)
            }
            Ok(Ok(other)) => Err(UpstreamError::Protocol {
                server: self.name.clone(),
                detail: format!("expected a tool result, got {}", result_kind(&other)),
            }),
            Ok(Err(error)) => Err(self.unavailable(error)),
            Err(_closed) => Err(UpstreamError::Unavailable {
                server: self.name.clone(),
                reason: "connection closed during the call".into(),
            }),
        }
    }

    fn unavailable(&self, error: rmcp::service::ServiceError) -> UpstreamError {
        match error {
            rmcp::service::ServiceError::McpError(error) => UpstreamError::Rpc {
                server: self.name.clone(),
                error,
            },
            other => UpstreamError::Unavailable {
                server: self.name.clone(),
                reason: other.to_string(),
            },
        }
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

/// All upstream servers, by name.
pub struct Upstreams {
    by_name: HashMap<ServerId, Arc<Upstream>>,
    order: Vec<ServerId>,
    tasks: TaskTracker,
    shutdown: CancellationToken,
}

impl Upstreams {
    /// Connects every server concurrently and waits until each is ready or failed. Initial
    /// tool lists arrive on `events` before this returns.
    pub async fn start(
        servers: &[ServerConfig],
        events: mpsc::UnboundedSender<UpstreamEvent>,
        relay: Arc<Relay>,
        shutdown: CancellationToken,
    ) -> Self {
        let tasks = TaskTracker::new();
        let mut by_name = HashMap::new();
        let mut order = Vec::new();
        let mut starting = Vec::new();
        for server in servers {
            let upstream = Arc::new(Upstream::new(server.id.clone(), relay.clone()));
            by_name.insert(server.id.clone(), upstream.clone());
            order.push(server.id.clone());
            starting.push(start_one(
                upstream,
                server.clone(),
                events.clone(),
                shutdown.clone(),
                tasks.clone(),
            ));
        }
        futures::future::join_all(starting).await;
        Self {
            by_name,
            order,
            tasks,
            shutdown,
        }
    }

    pub fn get(&self, server: &ServerId) -> Option<&Arc<Upstream>> {
        self.by_name.get(server)
    }

    /// Servers in config order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Upstream>> {
        self.order.iter().filter_map(|name| self.by_name.get(name))
    }

    /// Stops every supervisor and kills every child process group, then waits for them.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        self.tasks.close();
        self.tasks.wait().await;
    }
}

/// Connects one server and, on success, leaves a supervisor running for it.
async fn start_one(
    upstream: Arc<Upstream>,
    config: ServerConfig,
    events: mpsc::UnboundedSender<UpstreamEvent>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
) {
    let name = config.id.clone();
    let list_changed = Arc::new(Notify::new());
    let offer_changed = Arc::new(Notify::new());
    let handler = UpstreamClient::new(
        name.clone(),
        upstream.progress.clone(),
        upstream.relay.clone(),
        client::Changes {
            tools: list_changed.clone(),
            offer: offer_changed.clone(),
        },
    );
    let connecting = connect::connect(&config, handler);
    let connected = tokio::select! {
        // Startup finished, one way or the other.
        result = tokio::time::timeout(START_TIMEOUT, connecting) => match result {
            Ok(result) => result,
            Err(_) => Err(format!("did not finish starting within {}s", START_TIMEOUT.as_secs())),
        },
        // The gateway is stopping before this server came up.
        () = shutdown.cancelled() => Err("gateway shutting down".to_owned()),
    };
    let mut connection = match connected {
        Ok(connection) => connection,
        Err(reason) => {
            tracing::error!(server = %name, "server failed to start: {reason}");
            upstream.set_state(ServerState::Failed(reason));
            return;
        }
    };
    match import_tools(connection.peer()).await {
        Ok(tools) => {
            upstream.set_state(ServerState::Ready { tools: tools.len() });
            upstream.set_peer(Some(connection.peer().clone()));
            tracing::info!(server = %name, tools = tools.len(), "server ready");
            let _ = events.send(UpstreamEvent::Tools {
                server: name.clone(),
                tools,
            });
            let offer = passthrough::import_offer(&name, connection.peer()).await;
            let _ = events.send(UpstreamEvent::Offer {
                server: name.clone(),
                offer,
            });
        }
        Err(reason) => {
            let reason = connection
                .describe_failure(&format!("tools/list failed: {reason}"))
                .await;
            tracing::error!(server = %name, "server failed to start: {reason}");
            upstream.set_state(ServerState::Failed(reason));
            connection.stop().await;
            return;
        }
    }
    tasks.spawn(supervise(
        upstream,
        connection,
        Changes {
            tools: list_changed,
            offer: offer_changed,
        },
        events,
        shutdown,
    ));
}

/// Follows one live server until it dies or the gateway stops.
#[tracing::instrument(level = "debug", skip_all, fields(server = %upstream.name))]
async fn supervise(
    upstream: Arc<Upstream>,
    mut connection: connect::Connection,
    changed: Changes,
    events: mpsc::UnboundedSender<UpstreamEvent>,
    shutdown: CancellationToken,
) {
    let name = upstream.name.clone();
    let peer = connection.peer().clone();
    loop {
        tokio::select! {
            // The gateway is stopping: close the client and kill the child's group.
            () = shutdown.cancelled() => break,
            // The connection ended on its own: the child exited or the HTTP session broke.
            () = connection.closed() => {
                let reason = connection.describe_failure("server exited").await;
                tracing::error!(server = %name, "server went down: {reason}");
                upstream.set_peer(None);
                upstream.set_state(ServerState::Failed(reason.clone()));
                let _ = events.send(UpstreamEvent::Down { server: name.clone(), reason });
                break;
            }
            // The server said its tools changed: import them again, whole.
            () = changed.tools.notified() => match import_tools(&peer).await {
                Ok(tools) => {
                    tracing::info!(server = %name, tools = tools.len(), "tool list changed");
                    upstream.set_state(ServerState::Ready { tools: tools.len() });
                    let _ = events.send(UpstreamEvent::Tools { server: name.clone(), tools });
                }
                Err(error) => tracing::warn!(server = %name, %error, "re-import after list_changed failed; keeping the previous list"),
            },
            // The server said its prompts or resources changed: import them again, whole.
            () = changed.offer.notified() => {
                let offer = passthrough::import_offer(&name, &peer).await;
                let _ = events.send(UpstreamEvent::Offer { server: name.clone(), offer });
            }
        }
    }
    connection.stop().await;
}

async fn import_tools(peer: &Peer<RoleClient>) -> Result<Vec<Tool>, rmcp::service::ServiceError> {
    peer.list_all_tools().await
}

/// The running client of one server: kept so the supervisor can watch and stop it.
pub(crate) type Service = RunningService<RoleClient, UpstreamClient>;
