//! The MCP server toolgate presents to clients: one handler, served over stdio or streamable HTTP.
//!
//! [`GatewayService`] answers `tools/list` from the current view and sends `tools/call`
//! through the [`Pipeline`](crate::pipeline::Pipeline); prompts, resources, completion and
//! the logging level are answered from the view and forwarded to their server ([`offers`]);
//! task requests go to the server that owns the task ([`tasks`]).
//! It also tells each client when its view changes: 2025-11-25 clients get the
//! `notifications/*/list_changed` from a watcher started at `notifications/initialized`
//! ([`announce`]);
//! 2026-07-28 clients get them on their `subscriptions/listen` stream.
// `logging/setLevel` and `resources/subscribe` are 2025-era requests rmcp marks deprecated;
// toolgate serves them to the clients that send them.
#![allow(deprecated)]

mod announce;
mod call;
pub mod faithful;
pub mod fast;
pub mod guard;
pub mod http;
pub mod lines;
mod offers;
mod rounds;
pub mod stdio;
pub mod tasks;

use std::sync::Arc;

use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
        GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsResult,
        ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
        ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
        SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter, Tool,
        UnsubscribeRequestParams,
    },
    service::{NotificationContext, RequestContext, SubscriptionContext},
};

use crate::{config::ProfileName, error, gateway::Gateway, registry::View, relay::SessionId};

use call::CallRequest;

/// How long a session's first messages may wait for the servers' first starts (stdio and
/// HTTP alike).
const INITIALIZE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// The handler for every downstream session; cheap to clone (HTTP makes one per session).
/// Bound to the profile the session selected.
#[derive(Clone)]
pub struct GatewayService {
    gateway: Arc<Gateway>,
    profile: ProfileName,
    /// Which session this is, for what upstreams send back unasked ([`crate::relay`]).
    session: SessionId,
    /// Over HTTP with the fast path on: where a session is registered once its handshake
    /// is over ([`http::fast`]).
    http_fast: Option<Arc<http::fast::FastSessions>>,
}

impl GatewayService {
    /// `profile` must be configured: callers check it when they select it.
    pub fn new(gateway: Arc<Gateway>, profile: ProfileName) -> Self {
        let session = gateway.relay.new_session();
        Self {
            gateway,
            profile,
            session,
            http_fast: None,
        }
    }

    /// Sessions of this handler register with the HTTP fast path.
    pub fn with_http_fast(mut self, fast: Arc<http::fast::FastSessions>) -> Self {
        self.http_fast = Some(fast);
        self
    }

    /// The handler for another session of the same profile.
    pub fn for_new_session(&self) -> Self {
        let mut service = Self::new(self.gateway.clone(), self.profile.clone());
        service.http_fast = self.http_fast.clone();
        service
    }

    fn view(&self) -> Arc<View> {
        // `None` once a reload removed this session's profile: it then sees nothing.
        self.gateway.view(&self.profile).unwrap_or_default()
    }

    /// A `tools/call` taken by the stdio fast path ([`fast`]): the result stays raw when
    /// it came raw and no stage read it; a failure is already what the client gets.
    async fn call_answer(
        &self,
        reach: &crate::relay::Reach,
        request: CallRequest,
    ) -> Result<crate::pipeline::Answer, McpError> {
        self.settled().await?;
        let call = self.call_via(reach, request, None);
        let view = self.view();
        match self.gateway.pipeline.execute_answer(&view, call).await {
            Ok(answer) => Ok(answer),
            Err(failure) => error::into_mcp(failure).map(crate::pipeline::Answer::Decoded),
        }
    }

    /// Waits (at most the start grace) until the servers' first starts are in and the
    /// configuration was checked against them, so that no list is answered half-empty and
    /// no call passes a policy that turns out to be a typo.
    async fn settled(&self) -> Result<(), McpError> {
        self.gateway.ready().await.map_err(|error| {
            McpError::internal_error(
                format!("toolgate cannot serve this configuration: {error}"),
                None,
            )
        })
    }
}

impl ServerHandler for GatewayService {
    /// Tools always; prompts, resources (with subscribe), completions and logging when a
    /// server this profile sees offers them; the 2026-07-28 Tasks extension when a tool it
    /// sees may run as a task (taken out of a 2025-era `initialize` answer:
    /// [`tasks::handshake_patch`]).
    fn get_info(&self) -> ServerConfig {
        let view = self.view();
        let mut features = view.offers().features();
        let pending = self.gateway.first_starts_pending();
        if pending {
            // `initialize` is answered before slow servers are in, and what they offer is
            // unknown yet: declare it all, so that their prompts and resources can be
            // announced with `list_changed` when they arrive.
            features = crate::registry::passthrough::Features::all();
        }
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        if features.prompts {
            let mut prompts = rmcp::model::PromptsCapability::default();
            prompts.list_changed = Some(true);
            capabilities.prompts = Some(prompts);
        }
        if features.resources {
            let mut resources = rmcp::model::ResourcesCapability::default();
            resources.list_changed = Some(true);
            resources.subscribe = features.subscribe.then_some(true);
            capabilities.resources = Some(resources);
        }
        if features.completions {
            capabilities.completions = Some(Default::default());
        }
        if features.logging {
            capabilities.logging = Some(Default::default());
        }
        if pending || tasks::offers_tasks(&view) {
            capabilities
                .extensions
                .get_or_insert_default()
                .insert(rmcp::model::TASKS_EXTENSION_ID.into(), Default::default());
        }
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("toolgate", env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.settled().await?;
        let view = self.view();
        Ok(ListToolsResult::with_all_items(
            view.listed_entries().map(|e| e.tool.clone()).collect(),
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
        self.settled().await?;
        if Self::modern(&context) {
            if let Some(answer) = self.modern_task_call(&request, &context).await {
                return answer;
            }
            return self.call_in_rounds(request, context).await;
        }
        let traceparent = traceparent_of(&context);
        let request = CallRequest {
            name: request.name.into_owned(),
            arguments: request.arguments,
            progress: context.meta.get_progress_token(),
            progress_stream: None,
            cancel: context.ct.clone(),
            traceparent,
            subject: subject_of(&context),
        };
        let call = self.call_of(&context.peer, request, None);
        let view = self.view();
        match self.gateway.pipeline.execute(&view, call).await {
            Ok(result) => Ok(result.into()),
            Err(failure) => error::into_mcp(failure).map(Into::into),
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        self.settled().await?;
        self.prompts()
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        self.settled().await?;
        if Self::modern(&context) {
            return self.prompt_in_rounds(request, context).await;
        }
        let limit = self.limit(&context, true);
        self.prompt(request, limit)
            .await
            .map(GetPromptResponse::Complete)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        self.settled().await?;
        self.resources()
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        self.settled().await?;
        self.templates()
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.settled().await?;
        if Self::modern(&context) {
            return self.read_in_rounds(request, context).await;
        }
        let limit = self.limit(&context, true);
        self.read(request, limit)
            .await
            .map(ReadResourceResponse::Complete)
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.settled().await?;
        self.subscribe_to(request.uri, context).await
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.settled().await?;
        self.unsubscribe_from(request.uri, context).await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        self.settled().await?;
        self.completion(request, context).await
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.settled().await?;
        self.level(request.level, context).await
    }

    /// The four lists, renamed by the fronts ([`faithful`]), answered with every field; the
    /// task requests, renamed too, routed to the task's server ([`tasks`]).
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, McpError> {
        if let Some(answer) = self.faithful_list(&request.method, &context).await {
            return answer.map(rmcp::model::CustomResult);
        }
        match self
            .task_request(&request.method, request.params, &context)
            .await
        {
            Some(answer) => answer.map(rmcp::model::CustomResult),
            None => Err(McpError::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                request.method,
                None,
            )),
        }
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if let Some(fast) = &self.http_fast
            && let Some(parts) = context.extensions.get::<::http::request::Parts>()
            && let Some(id) = parts
                .headers
                .get(http::SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
        {
            fast.initialized(id, self.clone(), context.peer.clone());
        }
        let gateway = &self.gateway;
        gateway
            .relay
            .register(self.session, &self.profile, &context.peer);
        let views = gateway.watch_views();
        let stop = gateway.shutdown_token().child_token();
        gateway.tasks().spawn(announce::announce_changes(
            self.clone(),
            views,
            context.peer,
            stop,
        ));
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = Some(true);
        accepted.prompts_list_changed = Some(true);
        accepted.resources_list_changed = Some(true);
        // Only resources this profile has (rmcp keeps those the client asked for, if the
        // profile advertises `resources.subscribe`).
        accepted.resource_subscriptions = requested
            .resource_subscriptions
            .as_deref()
            .map(|uris| self.routable(uris));
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let mut views = self.gateway.watch_views();
        // Lists wait for the start rather than change under the client: the baseline is
        // what a list shows once the gateway is ready; only later arrivals are announced.
        let _ = self.gateway.ready().await;
        let mut announced = announce::Marks::of(&mut views, &self.profile);
        let resources = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        let mut listening = match resources.is_empty() {
            true => None,
            false => Some(
                self.listen_to(&resources, context.request_context())
                    .await?,
            ),
        };
        let ended =
            self.listen_until_ended(&context, &mut views, &mut announced, listening.as_mut());
        let ended = ended.await;
        if let Some(listening) = listening {
            self.stop_listening(listening.id).await;
        }
        ended
    }
}

impl GatewayService {
    /// Writes on a listen stream what changed (lists, subscribed resources) until the client
    /// ends it, the gateway stops or the stream is gone.
    async fn listen_until_ended(
        &self,
        context: &SubscriptionContext,
        views: &mut tokio::sync::watch::Receiver<Arc<crate::registry::Views>>,
        announced: &mut announce::Marks,
        mut listening: Option<&mut crate::relay::Listening>,
    ) -> Result<(), McpError> {
        let stop = self.gateway.shutdown_token();
        loop {
            let updated = async {
                match listening.as_mut() {
                    Some(listening) => listening.updates.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                // The client ended the subscription.
                () = context.cancelled() => return Ok(()),
                // The gateway is stopping: end the stream gracefully.
                () = stop.cancelled() => return Ok(()),
                // A subscribed resource changed: named as the client named it.
                Some(uri) = updated => {
                    if context.sink().notify_resource_updated(uri).await.is_err() {
                        return Ok(());
                    }
                }
                // A new view: announce what really changed for this client.
                changed = views.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    let now = announce::Marks::of(views, &self.profile);
                    let sink = context.sink();
                    let sent = async {
                        if now.tools != announced.tools {
                            sink.notify_tool_list_changed().await?;
                        }
                        if now.prompts != announced.prompts {
                            sink.notify_prompt_list_changed().await?;
                        }
                        if now.resources != announced.resources {
                            sink.notify_resource_list_changed().await?;
                        }
                        Ok::<(), rmcp::service::SubscriptionSendError>(())
                    };
                    if sent.await.is_err() {
                        return Ok(());
                    }
                    *announced = now;
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

    /// Resolves on the next SIGTERM (a service manager or `kill`) or SIGINT (Ctrl-C).
    pub async fn recv(&mut self) {
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

/// The subject of the request's IdP token, which the HTTP front verified and put there.
pub(crate) fn subject_of(context: &RequestContext<RoleServer>) -> Option<Arc<str>> {
    let parts = context.extensions.get::<::http::request::Parts>()?;
    let subject = parts.extensions.get::<http::oauth::Subject>()?;
    Some(subject.0.clone())
}

/// The client's W3C `traceparent` of a request: from its `_meta`, else (HTTP) its header.
pub(crate) fn traceparent_of(
    context: &RequestContext<RoleServer>,
) -> Option<crate::telemetry::Traceparent> {
    let text = context.meta.get_traceparent().or_else(|| {
        let parts = context.extensions.get::<::http::request::Parts>()?;
        parts.headers.get("traceparent")?.to_str().ok()
    });
    text.and_then(crate::telemetry::Traceparent::parse)
}
