//! Tasks for 2026-07-28 clients (the SEP-2663 Tasks extension), bridged onto the 2025-11-25 tasks of toolgate's upstreams.
//!
//! - **Creation.** A 2026-07-28 `tools/call` whose request declares the extension
//!   (`_meta["io.modelcontextprotocol/clientCapabilities"].extensions`) and names a tool whose
//!   server declares `execution.taskSupport` (`optional` or `required`) goes upstream as a
//!   task-augmented call (every pipeline stage before the upstream runs, as for a 2025 task);
//!   the client gets a `CreateTaskResult` (`resultType: "task"`) with toolgate's id. A client
//!   that does not declare the extension may not get a task handle (SEP-2663): an `optional`
//!   tool runs as a plain call, a `required` one (which the server runs only as a task) as
//!   an upstream task that toolgate waits out within the tool's timeout, answering with its
//!   result; what the server asks meanwhile comes to the client as input rounds.
//! - **Ownership.** The id is bound to the caller ([`Owner`]): the connection over stdio,
//!   the profile and a SHA-256 of the bearer token over HTTP (a 2026-07-28 request has no
//!   session). Another caller's id is unknown: `-32602`. The id carries 128 random bits
//!   (anonymous HTTP callers of a profile are one owner).
//! - **`tasks/get`** asks the upstream's `tasks/get` and answers with its state. While the
//!   upstream task waits for input, or once it has ended, toolgate keeps a `tasks/result`
//!   running upstream ([`Bridge`]): the requests it brings are the `inputRequests` of an
//!   `input_required` task, and its answer the `result` of a `completed` task (an `isError`
//!   tool result included) or the `error` of a `failed` one.
//! - **`tasks/update`** answers the waiting requests (unknown keys are ignored);
//!   **`tasks/cancel`** forwards `tasks/cancel` and withdraws them. Both answer with an empty
//!   acknowledgement. `tasks/result` and `tasks/list` do not exist in this era (`-32601`).

use std::{sync::Arc, time::Duration};

use rmcp::{
    ErrorData as McpError, RoleServer,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities,
        CreateTaskResult, DetailedTask, ErrorCode, GetTaskResult, InputResponses, JsonObject,
        ResultType, Task, TaskAckResult, TaskPayload, TaskStatus,
    },
    service::RequestContext,
};
use serde_json::{Map, Value};

use super::{
    super::{CallRequest, GatewayService},
    TaskRequest, offers_tasks, rename_related, task_support,
};
use crate::{
    registry::ToolEntry,
    relay::tasks::{Bridge, BridgeState, Held, Owner, TaskRoute},
    rounds::{AskSink, Outcome, Step, What},
    upstream::{Limit, UpstreamError},
};

/// How long `tasks/get` waits for the requests of an upstream task that says it waits for
/// input (they come through the `tasks/result` toolgate sends when it sees that status).
const INPUT_GRACE: Duration = Duration::from_millis(1500);
/// How long the cancel of a task toolgate gave up waiting for may take.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

fn missing_extension() -> McpError {
    McpError::missing_required_client_capability(
        ClientCapabilities::builder().enable_tasks().build(),
    )
}

fn declares_tasks(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .is_some_and(|capabilities| capabilities.supports_tasks())
}

/// A 2025-11-25 task (the server's JSON) as a SEP-2663 `Task` named `id`.
fn modern_task(id: &str, upstream: &Map<String, Value>) -> Task {
    let text = |key: &str| upstream.get(key).and_then(Value::as_str).map(str::to_owned);
    let status = upstream
        .get("status")
        .cloned()
        .and_then(|status| serde_json::from_value::<TaskStatus>(status).ok())
        .unwrap_or_default();
    let created = text("createdAt").unwrap_or_default();
    let updated = text("lastUpdatedAt").unwrap_or_else(|| created.clone());
    let mut task = Task::new(id, status, created, updated);
    if let Some(message) = text("statusMessage") {
        task = task.with_status_message(message);
    }
    if let Some(ttl) = upstream.get("ttl").and_then(Value::as_u64) {
        task = task.with_ttl_ms(ttl);
    }
    if let Some(poll) = upstream.get("pollInterval").and_then(Value::as_u64) {
        task = task.with_poll_interval_ms(poll);
    }
    task
}

fn to_value<T: serde::Serialize>(method: &str, value: &T) -> Result<Value, McpError> {
    serde_json::to_value(value)
        .map_err(|e| McpError::internal_error(format!("{method}: {e}"), None))
}

impl GatewayService {
    /// A 2026-07-28 `tools/call` of a tool that may run as a task: its answer, or `None` for
    /// a call that runs as any other.
    pub(in crate::downstream) async fn modern_task_call(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Option<Result<CallToolResponse, McpError>> {
        // A retry of a multi round-trip exchange belongs to that exchange.
        if request.request_state.is_some() {
            return None;
        }
        let view = self.view();
        let entry = view.listed(&request.name).cloned()?;
        let support = task_support(&entry.extra);
        if !matches!(support, "optional" | "required") {
            return None;
        }
        if !declares_tasks(context) {
            if support != "required" {
                return None;
            }
            return Some(self.waited_task_call(request, entry, context).await);
        }
        let call = CallRequest {
            name: request.name.to_string(),
            arguments: request.arguments.clone(),
            progress: None,
            progress_stream: None,
            cancel: context.ct.clone(),
            traceparent: super::super::traceparent_of(context),
            subject: super::super::subject_of(context),
        };
        let call = self.call_of(&context.peer, call, None);
        // The upstream picks the task's ttl: SEP-2663 clients do not ask for one.
        let task = TaskRequest {
            task: Value::Object(Map::new()),
            meta: None,
        };
        let created = self.create_task(&view, Some(entry), call, task).await;
        // `call_of` made this request's session known to the relay.
        self.forget_request_session_later(context);
        Some(created.map(|created| {
            let bridge = Arc::new(Bridge::new(
                context.client_capabilities().unwrap_or_default(),
            ));
            let route = self.gateway.relay.tasks.add(
                self.owner(context),
                created.entry.server.clone(),
                created.upstream_id,
                created.entry.policy.timeout_ms,
                Held {
                    bridge: Some(bridge),
                    progress: None,
                },
            );
            let seed = created
                .result
                .get("task")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            CallToolResponse::Task(CreateTaskResult::new(modern_task(&route.id, &seed)))
        }))
    }

    /// A `required` task tool called by a 2026-07-28 client without the extension, which may
    /// not get a task handle (SEP-2663): toolgate runs the upstream task and answers with
    /// its result once it ends, as a plain call within the tool's timeout. What the server
    /// asks meanwhile reaches the client as input rounds, as during any call.
    async fn waited_task_call(
        &self,
        request: &CallToolRequestParams,
        entry: Arc<ToolEntry>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let what = What {
            method: "tools/call",
            name: request.name.to_string(),
        };
        let peer = context.peer.clone();
        let traceparent = super::super::traceparent_of(context);
        let subject = super::super::subject_of(context);
        let (name, arguments) = (request.name.to_string(), request.arguments.clone());
        let step = self
            .in_rounds(what, None, None, self.asker(context), move |service, sink, cancel| {
                let call = CallRequest {
                    name,
                    arguments,
                    progress: None,
                    progress_stream: None,
                    cancel: cancel.clone(),
                    traceparent,
                    subject,
                };
                let call = service.call_of(&peer, call, Some(sink.clone()));
                async move { Outcome::from(service.wait_for_task(entry, call, sink, cancel).await) }
            })
            .await?;
        match step {
            Step::Done(Outcome::Tool(answer)) => {
                super::super::rounds::typed(answer).map(Into::into)
            }
            Step::Done(_) => Err(McpError::internal_error(
                "a tools/call exchange ended with another request's result",
                None,
            )),
            Step::Input(input) => Ok(CallToolResponse::InputRequired(input)),
        }
    }

    /// Creates the upstream task for `call` and waits for its result (`tasks/result`).
    async fn wait_for_task(
        &self,
        entry: Arc<ToolEntry>,
        call: crate::pipeline::Call,
        sink: AskSink,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Result<CallToolResult, McpError> {
        let view = self.view();
        let task = TaskRequest {
            task: Value::Object(Map::new()),
            meta: None,
        };
        let created = self.create_task(&view, Some(entry), call, task).await?;
        let server = created.entry.server.clone();
        let upstream = self.gateway.upstreams.get(&server).ok_or_else(|| {
            McpError::internal_error(format!("server \"{server}\" is not configured"), None)
        })?;
        let mut params = Map::new();
        params.insert("taskId".into(), Value::String(created.upstream_id));
        let limit = Limit {
            timeout: Duration::from_millis(created.entry.policy.timeout_ms),
            cancel,
            // What the server asks during the task goes to this call's rounds.
            caller: Some((self.session, Some(sink))),
        };
        match upstream
            .json_request("tasks/result", params.clone(), limit)
            .await
        {
            Ok(mut result) => {
                // The task is this call's own business: its id is not shown.
                if let Some(Value::Object(meta)) = result.get_mut("_meta") {
                    meta.remove(super::RELATED_TASK);
                    if meta.is_empty() {
                        result.remove("_meta");
                    }
                }
                let mut result: CallToolResult = serde_json::from_value(Value::Object(result))
                    .map_err(|error| {
                        McpError::internal_error(
                            format!(
                                "server \"{server}\" answered tasks/result with no tool result: {error}"
                            ),
                            Some(serde_json::json!({"code": "UPSTREAM_PROTOCOL"})),
                        )
                    })?;
                // A 2026-07-28 result says what it is.
                result.result_type.get_or_insert(ResultType::COMPLETE);
                Ok(result)
            }
            Err(UpstreamError::Rpc { error, .. }) => Err(error),
            Err(failure) => {
                // Given up (timed out, cancelled): so is the task, as far as toolgate can.
                let limit = Limit {
                    timeout: CANCEL_WAIT,
                    cancel: tokio_util::sync::CancellationToken::new(),
                    caller: None,
                };
                self.gateway.tasks().spawn(async move {
                    if let Err(error) = upstream.json_request("tasks/cancel", params, limit).await {
                        tracing::debug!(%error, "could not cancel an abandoned task");
                    }
                });
                Err(McpError::internal_error(
                    format!("tools/call: {failure}"),
                    Some(serde_json::json!({"code": failure.code()})),
                ))
            }
        }
    }

    /// A task request of a 2026-07-28 client (renamed by the fronts like a 2025 one).
    pub(super) async fn modern_task_request(
        &self,
        public: &str,
        mut params: Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, McpError> {
        if public == "tools/call" {
            // SEP-2663: a `task` parameter is not an opt-in any more; it is ignored.
            params.remove("task");
            return self.plain_call(params, context).await;
        }
        let owner = self.owner(context);
        if !matches!(public, "tasks/get" | "tasks/update" | "tasks/cancel")
            || (!offers_tasks(&self.view()) && !self.gateway.relay.tasks.has_tasks(&owner))
        {
            return Err(McpError::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!(
                    "{public}: not a method of the 2026-07-28 Tasks extension toolgate serves here"
                ),
                None,
            ));
        }
        if !declares_tasks(context) {
            return Err(missing_extension());
        }
        let route = self.task_route_of(&owner, public, &params)?;
        let Some(bridge) = route.bridge.clone() else {
            // A 2025-era task of the same connection is not one of this era's.
            return Err(super::invalid(format!(
                "{public}: task not found: {:?}",
                route.id
            )));
        };
        match public {
            "tasks/get" => self.get_modern(&owner, &route, &bridge, context).await,
            "tasks/update" => {
                let responses: InputResponses = match params.remove("inputResponses") {
                    Some(Value::Object(responses)) => responses.into_iter().collect(),
                    _ => {
                        return Err(super::invalid(
                            "tasks/update: `inputResponses` must be an object".into(),
                        ));
                    }
                };
                bridge
                    .state
                    .lock()
                    .await
                    .answer(responses)
                    .map_err(crate::error::rounds_failed)?;
                to_value(public, &TaskAckResult::new())
            }
            _ => self.cancel_modern(&owner, &route, &bridge, context).await,
        }
    }

    /// The route of the task named in `params`, if `owner`'s.
    fn task_route_of(
        &self,
        owner: &Owner,
        method: &str,
        params: &Map<String, Value>,
    ) -> Result<TaskRoute, McpError> {
        let Some(Value::String(id)) = params.get("taskId") else {
            return Err(super::invalid(format!(
                "{method}: `taskId` must be a string"
            )));
        };
        self.gateway
            .relay
            .tasks
            .get(owner, id)
            .ok_or_else(|| super::invalid(format!("{method}: task not found: {id:?}")))
    }

    /// The upstream's `tasks/get` for `route`; a task it no longer knows is forgotten here.
    async fn upstream_task(
        &self,
        owner: &Owner,
        route: &TaskRoute,
        context: &RequestContext<RoleServer>,
    ) -> Result<Map<String, Value>, McpError> {
        let mut params = Map::new();
        params.insert("taskId".into(), Value::String(route.upstream_id.clone()));
        let timeout = Duration::from_millis(self.gateway.config().call_timeout_ms);
        let answer = self.ask(route, "tasks/get", params, timeout, context).await;
        if let Err(error) = &answer
            && error.code == ErrorCode::INVALID_PARAMS
        {
            self.gateway.relay.tasks.remove(owner, &route.id);
        }
        answer
    }

    async fn get_modern(
        &self,
        owner: &Owner,
        route: &TaskRoute,
        bridge: &Bridge,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, McpError> {
        let upstream = self.upstream_task(owner, route, context).await?;
        let task = modern_task(&route.id, &upstream);
        let mut state = bridge.state.lock().await;
        match task.status {
            TaskStatus::InputRequired => {
                self.drive(route, bridge, &mut state);
                state.wait(INPUT_GRACE, true).await;
            }
            TaskStatus::Completed | TaskStatus::Failed => {
                self.drive(route, bridge, &mut state);
                let wait = Duration::from_millis(self.gateway.config().call_timeout_ms);
                state.wait(wait, false).await;
            }
            _ => {}
        }
        let payload = if task.status == TaskStatus::Cancelled {
            TaskPayload::Cancelled
        } else {
            match state.outcome() {
                Some(Ok(result)) => {
                    let mut result = result.clone();
                    rename_related(&mut result, &route.id);
                    TaskPayload::Completed { result }
                }
                Some(Err(error)) => {
                    let mut error = error.clone();
                    // The client never sees the server's id for the task, here neither.
                    if error.message.contains(route.upstream_id.as_str()) {
                        error.message = error
                            .message
                            .replace(route.upstream_id.as_str(), &route.id)
                            .into();
                    }
                    TaskPayload::Failed {
                        error: match serde_json::to_value(error) {
                            Ok(Value::Object(error)) => error,
                            _ => JsonObject::new(),
                        },
                    }
                }
                None => {
                    let input_requests = state.open_requests();
                    if input_requests.is_empty() {
                        TaskPayload::Working
                    } else {
                        TaskPayload::InputRequired { input_requests }
                    }
                }
            }
        };
        to_value(
            "tasks/get",
            &GetTaskResult::new(DetailedTask::new(task, payload)),
        )
    }

    /// Starts the `tasks/result` that brings the upstream task's requests and outcome, if
    /// none runs and the outcome is not known yet.
    fn drive(&self, route: &TaskRoute, bridge: &Bridge, state: &mut BridgeState) {
        if !state.needs_driver() {
            return;
        }
        let Some(upstream) = self.gateway.upstreams.get(&route.server) else {
            return;
        };
        let (done, outcome) = tokio::sync::oneshot::channel();
        let mut params = Map::new();
        params.insert("taskId".into(), Value::String(route.upstream_id.clone()));
        let limit = Limit {
            timeout: Duration::from_millis(route.timeout_ms),
            cancel: bridge.driver_token(),
            // Its requests name the task; the relay finds the bridge by that.
            caller: None,
        };
        self.gateway.tasks().spawn(async move {
            let answer = upstream.json_request("tasks/result", params, limit).await;
            // Nobody may wait any more (the task was forgotten).
            let _ = done.send(answer);
        });
        state.driving(outcome);
    }

    async fn cancel_modern(
        &self,
        owner: &Owner,
        route: &TaskRoute,
        bridge: &Bridge,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, McpError> {
        let mut params = Map::new();
        params.insert("taskId".into(), Value::String(route.upstream_id.clone()));
        let timeout = Duration::from_millis(self.gateway.config().call_timeout_ms);
        match self
            .ask(route, "tasks/cancel", params, timeout, context)
            .await
        {
            Ok(_) => {}
            // The upstream refuses to cancel a task that has ended: SEP-2663 cancellation
            // is cooperative, so a task that is still known is acknowledged.
            Err(error) if error.code == ErrorCode::INVALID_PARAMS => {
                self.upstream_task(owner, route, context).await?;
            }
            Err(error) => return Err(error),
        }
        bridge.state.lock().await.withdraw();
        to_value("tasks/cancel", &TaskAckResult::new())
    }
}
