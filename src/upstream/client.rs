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
        ProgressNotificationParam, ProtocolVersion, ResourceUpdatedNotificationParam,
    },
    service::{NotificationContext, RequestContext, ServiceError},
};
use tokio::sync::Notify;

use super::{ProgressRoutes, flood::LogBudget, logs::LogRelays};
use crate::{
    config::ServerId,
    relay::{Ask, Relay, Route, TaskJob},
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
    /// Log messages read and not yet relayed ([`super::logs`]).
    pub(super) logs: Arc<LogRelays>,
}

impl UpstreamClient {
    pub(super) fn new(
        server: ServerId,
        progress: Arc<ProgressRoutes>,
        logs: Arc<LogRelays>,
        relay: Arc<Relay>,
        changes: Changes,
    ) -> Self {
        Self {
            server,
            progress,
            logs,
            relay,
            changes,
            log_budget: Arc::default(),
        }
    }

    /// Asks the client that `ask` belongs to (see [`ask_for`]); the upstream's cancel of
    /// its request withdraws it.
    async fn ask_client<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
        asking: Asking<T>,
        context: &RequestContext<RoleClient>,
    ) -> Result<T, ErrorData> {
        let related = related_task(&context.meta);
        let answer = ask_for(&self.relay, &self.server, related, asking);
        tokio::select! {
            // The client answered, or the request failed.
            answer = answer => answer,
            // The upstream gave up on its request.
            () = context.ct.cancelled() => Err(ErrorData::internal_error("cancelled by the server", None)),
        }
    }
}

/// The upstream task a request's `_meta` names (MCP 2025-11-25: a request about a task does).
fn related_task(meta: &serde_json::Map<String, serde_json::Value>) -> Option<&str> {
    meta.get(RELATED_TASK)
        .and_then(|r| r.get("taskId"))
        .and_then(serde_json::Value::as_str)
}

/// One request of a server for a client, in both forms it may reach the client in.
struct Asking<T> {
    ask: Ask,
    /// For a 2026-07-28 call or task: an input request.
    input: InputRequest,
    /// For a 2025-era session: the request itself.
    send: SendTo<T>,
}

impl Asking<CreateMessageResult> {
    fn sampling(params: CreateMessageRequestParams) -> Self {
        Self {
            ask: Ask::Sampling,
            input: InputRequest::CreateMessage(CreateMessageRequest::new(params.clone())),
            send: Box::new(|peer, task| {
                Box::pin(async move {
                    peer.create_message(with_related(params, task.as_deref()))
                        .await
                })
            }),
        }
    }
}

impl Asking<ElicitResult> {
    fn elicitation(request: ElicitRequestParams) -> Self {
        Self {
            ask: Ask::Elicitation,
            input: InputRequest::Elicitation(ElicitRequest::new(request.clone())),
            send: Box::new(|peer, task| {
                Box::pin(async move {
                    peer.create_elicitation(with_related(request, task.as_deref()))
                        .await
                })
            }),
        }
    }
}

impl Asking<ListRootsResult> {
    fn roots() -> Self {
        Self {
            ask: Ask::Roots,
            input: InputRequest::ListRoots(ListRootsRequest::default()),
            send: Box::new(|peer, _| Box::pin(async move { peer.list_roots().await })),
        }
    }
}

/// Asks the client that `asking` from `server` belongs to, and relays its answer or error:
/// a 2025-era session gets the request itself, a 2026-07-28 call or task an input request.
/// `related`: the upstream task the request is about.
async fn ask_for<T: serde::de::DeserializeOwned + Send + 'static>(
    relay: &Relay,
    server: &ServerId,
    related: Option<&str>,
    asking: Asking<T>,
) -> Result<T, ErrorData> {
    let Asking { ask, input, send } = asking;
    // The task as its client knows it, for the request's own related-task `_meta`.
    let client_task = related
        .and_then(|id| relay.tasks.owner(server, id))
        .map(|(_, route)| route.id);
    let relayed = |error: ServiceError| match error {
        ServiceError::McpError(error) => error,
        other => ErrorData::internal_error(
            format!("toolgate could not relay the request to its client: {other}"),
            None,
        ),
    };
    match relay.requester(server, ask, related)? {
        Route::Client(peer) => send(peer, client_task).await.map_err(relayed),
        Route::Waiting(jobs) => {
            let (done, answer) = tokio::sync::oneshot::channel();
            let job: TaskJob = Box::new(move |peer| {
                Box::pin(async move {
                    // The upstream may have given up on it meanwhile.
                    let _ = done.send(send(peer, client_task).await);
                })
            });
            let gone = || {
                ErrorData::internal_error(
                    format!(
                        "the client's tasks/result ended before it answered {}",
                        ask.method()
                    ),
                    None,
                )
            };
            jobs.send(job).await.map_err(|_| gone())?;
            answer.await.map_err(|_| gone())?.map_err(relayed)
        }
        Route::Rounds(sink) => {
            let value = sink.ask(ask, input).await?;
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
}

/// Answers one request an HTTP server sent on the stream of a request toolgate posted
/// beside rmcp ([`super::http_lists`]): `message` is the whole JSON-RPC request, the
/// answer the whole JSON-RPC response; `None` for a message that is no request.
pub(super) async fn answer_stream_request(
    relay: Arc<Relay>,
    server: ServerId,
    message: serde_json::Value,
) -> Option<serde_json::Value> {
    let id = message.get("id")?.clone();
    let method = message.get("method")?.as_str()?.to_owned();
    let mut params = message
        .get("params")
        .cloned()
        .unwrap_or_else(|| serde_json::json!({}));
    // The server's `_meta` stays here, as rmcp keeps it out of the requests it decodes.
    let meta = params.as_object_mut().and_then(|p| p.remove("_meta"));
    let related = meta
        .as_ref()
        .and_then(serde_json::Value::as_object)
        .and_then(related_task)
        .map(str::to_owned);
    let related = related.as_deref();
    fn decode<P: serde::de::DeserializeOwned>(params: serde_json::Value) -> Result<P, ErrorData> {
        serde_json::from_value(params)
            .map_err(|error| ErrorData::invalid_params(error.to_string(), None))
    }
    fn encode<T: serde::Serialize>(
        answer: Result<T, ErrorData>,
    ) -> Result<serde_json::Value, ErrorData> {
        answer.and_then(|result| {
            serde_json::to_value(result)
                .map_err(|error| ErrorData::internal_error(error.to_string(), None))
        })
    }
    let answer = match method.as_str() {
        "elicitation/create" => match decode::<ElicitRequestParams>(params) {
            Ok(request) => {
                encode(ask_for(&relay, &server, related, Asking::elicitation(request)).await)
            }
            Err(error) => Err(error),
        },
        "sampling/createMessage" => match decode::<CreateMessageRequestParams>(params) {
            Ok(request) => {
                encode(ask_for(&relay, &server, related, Asking::sampling(request)).await)
            }
            Err(error) => Err(error),
        },
        "roots/list" => encode(ask_for(&relay, &server, related, Asking::roots()).await),
        "ping" => Ok(serde_json::json!({})),
        other => Err(ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            format!("{other}: not a request toolgate answers for its clients"),
            None,
        )),
    };
    Some(match answer {
        Ok(result) => serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(error) => serde_json::json!({"jsonrpc": "2.0", "id": id, "error": error}),
    })
}

/// Sends a request to a client session through the peer it is given; the second argument
/// is the client's id of the task the request is about.
type SendTo<T> = Box<
    dyn FnOnce(
            rmcp::service::Peer<rmcp::RoleServer>,
            Option<String>,
        ) -> futures::future::BoxFuture<'static, Result<T, ServiceError>>
        + Send,
>;

/// `params` with `_meta` naming the client's task `id` (MCP 2025-11-25: a request about a
/// task says so); unchanged without one.
fn with_related<T: serde::Serialize + serde::de::DeserializeOwned>(
    params: T,
    id: Option<&str>,
) -> T {
    let Some(id) = id else { return params };
    let Ok(mut value) = serde_json::to_value(&params) else {
        return params;
    };
    let Some(object) = value.as_object_mut() else {
        return params;
    };
    let meta = object
        .entry("_meta")
        .or_insert_with(|| serde_json::Value::Object(Default::default()));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(RELATED_TASK.into(), serde_json::json!({"taskId": id}));
    }
    serde_json::from_value(value).unwrap_or(params)
}

impl ClientHandler for UpstreamClient {
    /// Declares what a client of toolgate may be asked for; whether the session a request
    /// belongs to can answer is checked per request (see [`crate::relay`]).
    ///
    /// toolgate opens upstream sessions with the `initialize` handshake, so it offers the
    /// newest version that has one (2025-11-25): 2026-07-28 removed `initialize`, and rmcp's
    /// default (its latest version) would name in a handshake a revision that has none.
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
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.ask_client(Asking::sampling(params), &context).await
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.ask_client(Asking::elicitation(request), &context)
            .await
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        self.ask_client(Asking::roots(), &context).await
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
        self.logs.relayed();
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
