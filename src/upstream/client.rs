//! The rmcp client handler toolgate runs against each upstream: relays progress, log messages, resource updates and server requests; notices list changes.
// Logging, sampling and roots are 2025-era features that rmcp marks deprecated (SEP-2577);
// toolgate relays them for the servers and clients that use them.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::{
    ClientHandler, ErrorData, RoleClient,
    model::{
        ClientCapabilities, ClientConfig, CreateMessageRequest, CreateMessageRequestParams,
        CreateMessageResult, ElicitRequest, ElicitRequestParams, ElicitResult, Implementation,
        InputRequest, ListRootsRequest, ListRootsResult, LoggingMessageNotificationParam,
        ProgressNotificationParam, ResourceUpdatedNotificationParam,
    },
    service::{NotificationContext, RequestContext, ServiceError},
};
use tokio::sync::Notify;

use super::{ProgressRoutes, flood::LogBudget};
use crate::{
    config::ServerId,
    relay::{Ask, Relay, Route},
};

/// The `_meta` key naming the task a message belongs to.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// What the supervisor re-imports when the server announces a change.
#[derive(Clone)]
pub struct Changes {
    pub tools: Arc<Notify>,
    /// Prompts, resources or templates.
    pub offer: Arc<Notify>,
}

pub struct UpstreamClient {
    server: ServerId,
    progress: Arc<ProgressRoutes>,
    relay: Arc<Relay>,
    changes: Changes,
    /// How much of what this server says (log notifications, stderr) reaches our log.
    pub(super) log_budget: Arc<LogBudget>,
}

impl UpstreamClient {
    pub(super) fn new(
        server: ServerId,
        progress: Arc<ProgressRoutes>,
        relay: Arc<Relay>,
        changes: Changes,
    ) -> Self {
        Self {
            server,
            progress,
            relay,
            changes,
            log_budget: Arc::default(),
        }
    }

    /// Asks the client that `ask` belongs to, and relays its answer or error: a 2025-era
    /// session gets `request` sent, a 2026-07-28 call gets `input` as an input request.
    async fn ask_client<T: serde::de::DeserializeOwned>(
        &self,
        ask: Ask,
        context: &RequestContext<RoleClient>,
        input: impl FnOnce() -> InputRequest,
        request: impl AsyncFnOnce(rmcp::service::Peer<rmcp::RoleServer>) -> Result<T, ServiceError>,
    ) -> Result<T, ErrorData> {
        // A request about a task (MCP 2025-11-25 names it in `_meta`) goes to the task's client.
        let related = context
            .meta
            .get(RELATED_TASK)
            .and_then(|r| r.get("taskId"))
            .and_then(serde_json::Value::as_str);
        let answer = async {
            match self.relay.requester(&self.server, ask, related)? {
                Route::Client(peer) => request(peer).await.map_err(|error| match error {
                    ServiceError::McpError(error) => error,
                    other => ErrorData::internal_error(
                        format!("toolgate could not relay the request to its client: {other}"),
                        None,
                    ),
                }),
                Route::Rounds(sink) => {
                    let value = sink.ask(ask, input()).await?;
                    // Checked when the client sent it; decoded here into what rmcp sends on.
                    serde_json::from_value(value).map_err(|error| {
                        ErrorData::internal_error(
                            format!(
                                "the client's answer to {} could not be read: {error}",
                                ask.method()
                            ),
                            None,
                        )
                    })
                }
            }
        };
        tokio::select! {
            // The client answered, or the request failed.
            answer = answer => answer,
            // The upstream gave up on its request.
            () = context.ct.cancelled() => Err(ErrorData::internal_error("cancelled by the server", None)),
        }
    }
}

impl ClientHandler for UpstreamClient {
    /// Declares what a client of toolgate may be asked for; whether the session a request
    /// belongs to can answer is checked per request (see [`crate::relay`]).
    fn get_info(&self) -> ClientConfig {
        let capabilities = ClientCapabilities::builder()
            .enable_roots()
            .enable_sampling()
            .enable_elicitation()
            .build();
        ClientConfig::new(
            capabilities,
            Implementation::new("toolgate", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let input = params.clone();
        self.ask_client(
            Ask::Sampling,
            &context,
            || InputRequest::CreateMessage(CreateMessageRequest::new(input)),
            async |peer| peer.create_message(params).await,
        )
        .await
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let input = request.clone();
        self.ask_client(
            Ask::Elicitation,
            &context,
            || InputRequest::Elicitation(ElicitRequest::new(input)),
            async |peer| peer.create_elicitation(request).await,
        )
        .await
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        self.ask_client(
            Ask::Roots,
            &context,
            || InputRequest::ListRoots(ListRootsRequest::default()),
            async |peer| peer.list_roots().await,
        )
        .await
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.forward(params).await;
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "upstream announced a tool list change");
        // `notify_one` stores a permit, so a change during a re-import is not lost.
        self.changes.tools.notify_one();
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "upstream announced a prompt list change");
        self.changes.offer.notify_one();
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "upstream announced a resource list change");
        self.changes.offer.notify_one();
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.relay.resource_updated(&self.server, &params.uri).await;
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        super::flood::log_within(&self.log_budget, &self.server, || {
            tracing::debug!(server = %self.server, level = ?params.level, data = %params.data, "upstream log");
        });
        self.relay.log(&self.server, params).await;
    }

    /// `notifications/tasks/status` (MCP 2025-11-25) is not one of rmcp's own notifications.
    async fn on_custom_notification(
        &self,
        notification: rmcp::model::CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) {
        if notification.method == "notifications/tasks/status"
            && let Some(params) = notification.params
        {
            self.relay.task_status(&self.server, params).await;
        }
    }
}
