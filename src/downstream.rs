//! The MCP server toolgate presents to clients: one handler, served over stdio or streamable HTTP.
//!
//! [`GatewayService`] answers `tools/list` from the current view and sends `tools/call`
//! through the [`Pipeline`](crate::pipeline::Pipeline). It also tells each client when its
//! view changes: 2025-11-25 clients get `notifications/tools/list_changed` from a watcher
//! started at `notifications/initialized`; 2026-07-28 clients get it on their
//! `subscriptions/listen` stream.

pub mod guard;
pub mod http;
pub mod stdio;

use std::sync::Arc;

use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
        PaginatedRequestParams, ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
    },
    service::{NotificationContext, Peer, RequestContext, SubscriptionContext},
};
use tokio::sync::watch;

use crate::{
    config::ProfileName,
    error,
    gateway::Gateway,
    pipeline::Call,
    registry::{View, Views},
    upstream::ProgressSink,
};

/// The handler for every downstream session; cheap to clone (HTTP makes one per session).
/// Bound to the profile the session selected.
#[derive(Clone)]
pub struct GatewayService {
    gateway: Arc<Gateway>,
    profile: ProfileName,
}

impl GatewayService {
    /// `profile` must be configured: callers check it when they select it.
    pub fn new(gateway: Arc<Gateway>, profile: ProfileName) -> Self {
        Self { gateway, profile }
    }

    fn view(&self) -> Arc<View> {
        // Profiles are fixed at start and checked at selection, so this is always `Some`.
        self.gateway.view(&self.profile).unwrap_or_default()
    }
}

impl ServerHandler for GatewayService {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("toolgate", env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let view = self.view();
        Ok(ListToolsResult::with_all_items(
            view.tools().as_ref().clone(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.view().listed(name).map(|entry| entry.tool.clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let progress = context.meta.get_progress_token().map(|token| ProgressSink {
            peer: context.peer.clone(),
            token,
        });
        let call = Call {
            profile: self.profile.clone(),
            name: request.name.into_owned(),
            arguments: request.arguments,
            cancel: context.ct.clone(),
            progress,
            client: Some(context.peer.clone()),
            sub_call_id: None,
        };
        let view = self.view();
        match self.gateway.pipeline.execute(&view, call).await {
            Ok(result) => Ok(result.into()),
            Err(failure) => {
                tracing::debug!(code = failure.code(), "{failure}");
                error::into_mcp(failure).map(Into::into)
            }
        }
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let gateway = &self.gateway;
        let views = gateway.watch_views();
        let stop = gateway.shutdown_token().child_token();
        gateway.tasks().spawn(announce_changes(
            views,
            self.profile.clone(),
            context.peer,
            stop,
        ));
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = Some(true);
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let mut views = self.gateway.watch_views();
        let mut announced = fingerprint_of(&mut views, &self.profile);
        let stop = self.gateway.shutdown_token();
        loop {
            tokio::select! {
                // The client ended the subscription.
                () = context.cancelled() => return Ok(()),
                // The gateway is stopping: end the stream gracefully.
                () = stop.cancelled() => return Ok(()),
                // A new view: announce it if this client's tools really changed.
                changed = views.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    if let Some(fingerprint) = changed_fingerprint(&mut views, &self.profile, announced) {
                        announced = fingerprint;
                        if context.sink().notify_tool_list_changed().await.is_err() {
                            return Ok(());
                        }
                    }
                }
            }
        }
    }
}

/// The fingerprint of `profile`'s current view, marking the change as seen.
fn fingerprint_of(views: &mut watch::Receiver<Arc<Views>>, profile: &ProfileName) -> u64 {
    views
        .borrow_and_update()
        .get(profile)
        .map_or(0, |view| view.fingerprint())
}

/// `Some(new fingerprint)` when `profile`'s view differs from what was last announced.
fn changed_fingerprint(
    views: &mut watch::Receiver<Arc<Views>>,
    profile: &ProfileName,
    announced: u64,
) -> Option<u64> {
    let fingerprint = fingerprint_of(views, profile);
    (fingerprint != announced).then_some(fingerprint)
}

/// How often a change announcer checks that its session still exists.
const SESSION_REAP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);

/// Sends `notifications/tools/list_changed` to one 2025-era session whenever its view changes;
/// ends when the session's transport is gone or the gateway stops.
async fn announce_changes(
    mut views: watch::Receiver<Arc<Views>>,
    profile: ProfileName,
    peer: Peer<RoleServer>,
    stop: tokio_util::sync::CancellationToken,
) {
    let mut announced = fingerprint_of(&mut views, &profile);
    // A session can end without a word (HTTP clients just leave): look now and then, so this
    // task does not outlive it until the next change.
    let mut reap = tokio::time::interval(SESSION_REAP_INTERVAL);
    reap.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            // The gateway is stopping.
            () = stop.cancelled() => return,
            // Time to check whether the session is still there.
            _ = reap.tick() => {
                if peer.is_transport_closed() {
                    return;
                }
            }
            // A new view was published.
            changed = views.changed() => {
                if changed.is_err() || peer.is_transport_closed() {
                    return;
                }
                if let Some(fingerprint) = changed_fingerprint(&mut views, &profile, announced) {
                    announced = fingerprint;
                    if peer.notify_tool_list_changed().await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}

/// SIGTERM and SIGINT handlers, registered when this is made (not when first awaited), so
/// that no signal between start and the first await kills the process by default action.
pub struct Termination {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
}

impl Termination {
    /// Must run inside the runtime.
    pub fn register() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self {
                term: signal(SignalKind::terminate())?,
                interrupt: signal(SignalKind::interrupt())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// Resolves on SIGTERM (a service manager or `kill`) or SIGINT (Ctrl-C).
    pub async fn wait(mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.interrupt.recv() => {}
        }
        #[cfg(not(unix))]
        {
            let _ = &mut self;
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
