//! Tasks (MCP 2025-11-25): a task-augmented `tools/call`, `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel`, routed to the server that owns the task; 2026-07-28's Tasks extension is bridged onto them (`modern`).
//!
//! rmcp 3.11 knows only the SEP-2663 form of tasks, so, as with the lists
//! ([`super::faithful`]), the fronts rename these requests to private methods before rmcp
//! decodes them ([`private_method`]) and `on_custom_request` answers them with the server's
//! JSON. A task-augmented call runs every stage of the pipeline that comes before the
//! upstream (resolution in the caller's view, masks, argument validation, pre gates,
//! timeout and retry wrappers); its `CreateTaskResult` comes back with the task id replaced
//! by one of this session's (`tg-<n>`, [`crate::relay::tasks`]). Post hooks and output checks
//! do not run on a task's result: `tasks/result` relays it as the server wrote it.

mod handshake;
mod modern;

use std::time::Duration;

use rmcp::{
    ErrorData as McpError, RoleServer,
    model::{ErrorCode, JsonObject},
    service::RequestContext,
};
use serde_json::{Map, Value};

pub use handshake::{capability, handshake_patch, handshake_patch_for};

use super::{CallRequest, GatewayService};
use crate::{
    error,
    pipeline::TaskRequest,
    relay::tasks::{Held, Owner, TaskRoute, Tasks},
    upstream::{Limit, UpstreamError},
};

/// Tasks per `tasks/list` page.
const PAGE: usize = 50;
/// Requests of a server about one task that may wait to be sent at once.
const JOBS: usize = 16;
/// The `_meta` key naming the task a message belongs to.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// The task methods of both eras and the private names they are renamed to; a
/// task-augmented `tools/call` (params with `task`) becomes [`TASK_CALL`].
const METHODS: [(&str, &str); 5] = [
    ("tasks/get", "toolgate/tasks/get"),
    ("tasks/result", "toolgate/tasks/result"),
    ("tasks/list", "toolgate/tasks/list"),
    ("tasks/cancel", "toolgate/tasks/cancel"),
    ("tasks/update", "toolgate/tasks/update"),
];
const TASK_CALL: &str = "toolgate/tasks/call";

/// The private name of a request that is about tasks, `None` for any other.
pub fn private_method(method: &str, params: Option<&Value>) -> Option<&'static str> {
    if method == "tools/call" {
        return params
            .and_then(|p| p.get("task"))
            .is_some()
            .then_some(TASK_CALL);
    }
    METHODS
        .iter()
        .find(|(public, _)| *public == method)
        .map(|(_, private)| *private)
}

/// Whether a line may be a task-augmented `tools/call`: a cheap look before decoding it.
pub fn may_carry_task(line: &[u8]) -> bool {
    memchr::memmem::find(line, b"\"task\"").is_some()
}

/// Whether a tool's definition (its extra) lets it run as a task.
pub(in crate::downstream) fn task_support(extra: &crate::registry::extra::Extra) -> &str {
    extra
        .as_ref()
        .and_then(|e| e.get("execution"))
        .and_then(|e| e.get("taskSupport"))
        .and_then(Value::as_str)
        .unwrap_or("forbidden")
}

/// Whether a profile's view has a tool that can run as a task: then it offers tasks.
pub fn offers_tasks(view: &crate::registry::View) -> bool {
    view.listed_entries()
        .any(|entry| matches!(task_support(&entry.extra), "optional" | "required"))
}

/// A task an upstream created for a call.
struct Created {
    /// The upstream's `CreateTaskResult`.
    result: Map<String, Value>,
    entry: std::sync::Arc<crate::registry::ToolEntry>,
    upstream_id: String,
    progress: Option<crate::upstream::ProgressRoute>,
}

fn invalid(message: String) -> McpError {
    McpError::invalid_params(message, None)
}

/// A failure of a forwarded task request: the server's own error as it came, else ours.
fn upstream_error(method: &str, failure: UpstreamError) -> McpError {
    match failure {
        UpstreamError::Rpc { error, .. } => error,
        other => McpError::internal_error(
            format!("{method}: {other}"),
            Some(serde_json::json!({"code": other.code()})),
        ),
    }
}

impl GatewayService {
    /// The answer to a renamed task request; `None` for any other custom method.
    pub(super) async fn task_request(
        &self,
        method: &str,
        params: Option<Value>,
        context: &RequestContext<RoleServer>,
    ) -> Option<Result<Value, McpError>> {
        let public = METHODS
            .iter()
            .find(|(_, private)| *private == method)
            .map(|(public, _)| *public)
            .or((method == TASK_CALL).then_some("tools/call"))?;
        if let Err(error) = self.settled().await {
            return Some(Err(error));
        }
        let params = match params {
            None => Map::new(),
            Some(Value::Object(params)) => params,
            Some(other) => {
                return Some(Err(invalid(format!(
                    "{public}: params must be an object, found {}",
                    super::guard::json_kind(&other)
                ))));
            }
        };
        if Self::modern(context) {
            return Some(self.modern_task_request(public, params, context).await);
        }
        if public == "tasks/update" {
            return Some(Err(McpError::new(
                ErrorCode::METHOD_NOT_FOUND,
                "tasks/update: a 2026-07-28 Tasks extension method; this session speaks 2025-11-25",
                None,
            )));
        }
        if public != "tools/call"
            && !offers_tasks(&self.view())
            && !self.gateway.relay.tasks.has_tasks(&self.legacy_owner())
        {
            // Like the other capabilities: not declared, not served.
            return Some(Err(McpError::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("{public}: no server this profile sees offers tasks"),
                None,
            )));
        }
        Some(match public {
            "tools/call" => self.task_call(params, context).await,
            "tasks/list" => self.list_tasks(&params, context).await,
            _ => self.forward_task(public, &params, context).await,
        })
    }

    /// A task-augmented `tools/call`: the pipeline's stages, then the owning server.
    async fn task_call(
        &self,
        mut params: Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, McpError> {
        let object = Value::Object(params.clone());
        if let Some(problem) = super::guard::call_params_problem(Some(&object)) {
            return Err(invalid(problem));
        }
        let view = self.view();
        if !offers_tasks(&view) {
            // Spec 2025-11-25: a receiver that does not declare tasks for `tools/call`
            // processes the request normally, ignoring `task`.
            params.remove("task");
            return self.plain_call(params, context).await;
        }
        let task = params.remove("task").unwrap_or(Value::Null);
        if !task.is_object() {
            return Err(invalid(format!(
                "tools/call: `task` must be an object, found {}",
                super::guard::json_kind(&task)
            )));
        }
        let name = match params.remove("name") {
            Some(Value::String(name)) => name,
            _ => return Err(invalid("tools/call: `name` is missing".into())),
        };
        let arguments: Option<JsonObject> = match params.remove("arguments") {
            Some(Value::Object(arguments)) => Some(arguments),
            _ => None,
        };
        // Spec 2025-11-25: a tool that does not declare task support is not run as a task.
        let entry = view.get(&name).cloned();
        if let Some(entry) = &entry
            && !matches!(task_support(&entry.extra), "optional" | "required")
        {
            return Err(McpError::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("tool \"{name}\" does not support task-augmented calls"),
                None,
            ));
        }
        // The client's progress token goes with the task (the upstream gets one of
        // toolgate's, routed to the client for the task's life). rmcp takes a request's
        // `_meta` out of its params (into `context.meta`).
        let mut progress = context.meta.get_progress_token();
        let meta = match params.remove("_meta") {
            Some(Value::Object(mut meta)) => {
                if let Some(token) = meta.remove("progressToken") {
                    progress = serde_json::from_value(token).ok();
                }
                (!meta.is_empty()).then_some(meta)
            }
            _ => None,
        };
        let request = CallRequest {
            name,
            arguments,
            progress,
            progress_stream: None,
            cancel: context.ct.clone(),
            traceparent: super::traceparent_of(context),
            subject: super::subject_of(context),
        };
        let call = self.call_of(&context.peer, request, None);
        let Created {
            mut result,
            entry,
            upstream_id,
            progress,
        } = self
            .create_task(&view, entry, call, TaskRequest { task, meta })
            .await?;
        let route = self.gateway.relay.tasks.add(
            self.legacy_owner(),
            entry.server.clone(),
            upstream_id,
            entry.policy.timeout_ms,
            Held {
                bridge: None,
                progress,
            },
        );
        if let Some(task) = result.get_mut("task") {
            task["taskId"] = Value::String(route.id.clone());
        }
        rename_related(&mut result, &route.id);
        Ok(Value::Object(result))
    }

    /// Runs a task-augmented call through the pipeline: the upstream's `CreateTaskResult`,
    /// the tool's entry, and the upstream's task id. No task created: a protocol error.
    async fn create_task(
        &self,
        view: &std::sync::Arc<crate::registry::View>,
        entry: Option<std::sync::Arc<crate::registry::ToolEntry>>,
        call: crate::pipeline::Call,
        task: TaskRequest,
    ) -> Result<Created, McpError> {
        let outcome = self.gateway.pipeline.execute_task(view, call, task).await;
        let (result, progress) = match outcome {
            Ok(created) => created,
            Err(failure) => {
                // No task was created: a protocol error, which a client expecting a
                // `CreateTaskResult` can read (an `isError` tool result it could not).
                let code = failure.code();
                return Err(match error::into_mcp(failure) {
                    Err(error) => error,
                    Ok(result) => McpError::new(
                        if code == "INVALID_ARGS" {
                            ErrorCode::INVALID_PARAMS
                        } else {
                            ErrorCode::INTERNAL_ERROR
                        },
                        text_of(&result),
                        Some(serde_json::json!({"code": code})),
                    ),
                });
            }
        };
        // Resolved by the pipeline, so known: checked rather than assumed.
        let Some(entry) = entry else {
            return Err(McpError::internal_error(
                "tools/call: the tool is gone",
                None,
            ));
        };
        let upstream_id = result
            .get("task")
            .and_then(|t| t.get("taskId"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| {
                McpError::internal_error(
                    format!(
                        "server \"{}\" answered a task-augmented call without a task id",
                        entry.server
                    ),
                    Some(serde_json::json!({"code": "UPSTREAM_PROTOCOL"})),
                )
            })?;
        Ok(Created {
            result,
            entry,
            upstream_id,
            progress,
        })
    }

    /// The owner of a 2025-era session's tasks: the session.
    fn legacy_owner(&self) -> Owner {
        Owner::Session(self.session)
    }

    /// A `tools/call` without its `task`, answered as rmcp's handler answers any call.
    async fn plain_call(
        &self,
        mut params: Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, McpError> {
        let mut context = context.clone();
        if let Some(meta) = params.remove("_meta") {
            context.meta = serde_json::from_value(meta)
                .map_err(|e| invalid(format!("tools/call: unreadable `_meta`: {e}")))?;
        }
        let request: rmcp::model::CallToolRequestParams =
            serde_json::from_value(Value::Object(params))
                .map_err(|e| invalid(format!("invalid params for tools/call: {e}")))?;
        let modern = Self::modern(&context);
        let response = rmcp::ServerHandler::call_tool(self, request, context).await?;
        let mut result = rmcp::model::ServerResult::from(response);
        if modern {
            result.fill_missing_cache_hints();
        } else {
            result.strip_result_type_for_legacy_peer();
            result.strip_non_object_output_for_legacy_peer();
        }
        serde_json::to_value(&result)
            .map_err(|e| McpError::internal_error(format!("tools/call: {e}"), None))
    }

    /// `tasks/get`, `tasks/result` and `tasks/cancel`: to the task's server, under its id.
    async fn forward_task(
        &self,
        method: &str,
        params: &Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, McpError> {
        let route = self.task_route(method, params)?;
        let mut forwarded = params.clone();
        forwarded.insert("taskId".into(), Value::String(route.upstream_id.clone()));
        // The client's `_meta` goes on, but for a related-task key naming its own id.
        if let Some(Value::Object(meta)) = forwarded.get_mut("_meta") {
            meta.remove(RELATED_TASK);
        }
        let timeout = if method == "tasks/result" {
            // It waits for the task to end: as long as a call of that tool may take.
            Duration::from_millis(route.timeout_ms)
        } else {
            Duration::from_millis(self.gateway.config().call_timeout_ms)
        };
        let mut result = if method == "tasks/result" {
            self.await_result(&route, forwarded, timeout, context)
                .await?
        } else {
            self.ask(&route, method, forwarded, timeout, context)
                .await?
        };
        // `tasks/get` and `tasks/cancel` answer with the task; `tasks/result` with the
        // tool's result, which is left as it is but for its related-task `_meta`.
        if method != "tasks/result" && result.contains_key("taskId") {
            result.insert("taskId".into(), Value::String(route.id.clone()));
        }
        rename_related(&mut result, &route.id);
        Ok(Value::Object(result))
    }

    /// `tasks/result`: waits for the task's result; meanwhile what the server asks about the
    /// task is sent from here, so that over HTTP it rides this request's stream.
    async fn await_result(
        &self,
        route: &TaskRoute,
        params: Map<String, Value>,
        timeout: Duration,
        context: &RequestContext<RoleServer>,
    ) -> Result<Map<String, Value>, McpError> {
        use futures::StreamExt as _;
        let (jobs, mut queued) = tokio::sync::mpsc::channel(JOBS);
        let _waiting = self
            .gateway
            .relay
            .await_task(&route.server, &route.upstream_id, jobs);
        let answer = self.ask(route, "tasks/result", params, timeout, context);
        tokio::pin!(answer);
        let mut running = futures::stream::FuturesUnordered::new();
        loop {
            tokio::select! {
                // The task ended (or the wait failed): requests still open are withdrawn.
                answer = &mut answer => return answer,
                // The server asks the client something about the task.
                Some(job) = queued.recv() => running.push(job(context.peer.clone())),
                // A request was answered and its answer handed on.
                Some(()) = running.next(), if !running.is_empty() => {}
            }
        }
    }

    /// `tasks/list`: this session's tasks (never another's), each as its server says now.
    async fn list_tasks(
        &self,
        params: &Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, McpError> {
        let cursor = match params.get("cursor") {
            None | Some(Value::Null) => None,
            Some(Value::String(cursor)) => Some(cursor.as_str()),
            Some(other) => {
                return Err(invalid(format!(
                    "tasks/list: `cursor` must be a string, found {}",
                    super::guard::json_kind(other)
                )));
            }
        };
        let tasks = &self.gateway.relay.tasks;
        let (page, more) = tasks
            .page(&self.legacy_owner(), cursor, PAGE)
            .ok_or_else(|| invalid(format!("tasks/list: unknown cursor {cursor:?}")))?;
        let timeout = Duration::from_millis(self.gateway.config().call_timeout_ms);
        let asks = page.iter().map(|route| async move {
            let mut params = Map::new();
            params.insert("taskId".into(), Value::String(route.upstream_id.clone()));
            (
                route,
                self.ask(route, "tasks/get", params, timeout, context).await,
            )
        });
        let mut listed = Vec::with_capacity(page.len());
        for (route, answer) in futures::future::join_all(asks).await {
            match answer {
                Ok(mut task) => {
                    task.insert("taskId".into(), Value::String(route.id.clone()));
                    listed.push(Value::Object(task));
                }
                // The server no longer knows it (its ttl passed): forgotten here too.
                Err(error) if error.code == ErrorCode::INVALID_PARAMS => {
                    tasks.remove(&self.legacy_owner(), &route.id);
                }
                // Its server is down or slow: left out of this page, kept for later.
                Err(error) => {
                    tracing::debug!(task = %route.id, server = %route.server, "tasks/list: {}", error.message)
                }
            }
        }
        let mut result = Map::new();
        result.insert("tasks".into(), Value::Array(listed));
        if more && let Some(last) = page.last() {
            result.insert("nextCursor".into(), Value::String(Tasks::cursor_of(last)));
        }
        Ok(Value::Object(result))
    }

    /// The route of the task named in `params`, if it is this session's.
    fn task_route(&self, method: &str, params: &Map<String, Value>) -> Result<TaskRoute, McpError> {
        let id = match params.get("taskId") {
            Some(Value::String(id)) => id,
            Some(other) => {
                return Err(invalid(format!(
                    "{method}: `taskId` must be a string, found {}",
                    super::guard::json_kind(other)
                )));
            }
            None => return Err(invalid(format!("{method}: `taskId` is missing"))),
        };
        self.gateway
            .relay
            .tasks
            .get(&self.legacy_owner(), id)
            .ok_or_else(|| invalid(format!("{method}: task not found: {id:?}")))
    }

    /// One request to a task's server.
    async fn ask(
        &self,
        route: &TaskRoute,
        method: &str,
        params: Map<String, Value>,
        timeout: Duration,
        context: &RequestContext<RoleServer>,
    ) -> Result<Map<String, Value>, McpError> {
        let upstream = self.gateway.upstreams.get(&route.server).ok_or_else(|| {
            McpError::internal_error(
                format!("server \"{}\" is not configured", route.server),
                None,
            )
        })?;
        let limit = Limit {
            timeout,
            cancel: context.ct.clone(),
            // A task waiting for input asks its client through `tasks/result`.
            caller: Some((self.session, None)),
        };
        upstream
            .json_request(method, params, limit)
            .await
            .map_err(|failure| upstream_error(method, failure))
    }
}

/// What an error result says, for the message of the protocol error that replaces it.
fn text_of(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `_meta["io.modelcontextprotocol/related-task"].taskId`, when present, names `id`.
fn rename_related(result: &mut Map<String, Value>, id: &str) {
    if let Some(related) = result
        .get_mut("_meta")
        .and_then(|m| m.get_mut(RELATED_TASK))
        .and_then(Value::as_object_mut)
        && related.contains_key("taskId")
    {
        related.insert("taskId".into(), Value::String(id.to_owned()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_task_requests_are_renamed() {
        let with_task = json!({"name": "t", "task": {"ttl": 1000}});
        assert_eq!(
            private_method("tools/call", Some(&with_task)),
            Some(TASK_CALL)
        );
        assert_eq!(
            private_method("tools/call", Some(&json!({"name": "t"}))),
            None
        );
        assert_eq!(
            private_method("tasks/result", None),
            Some("toolgate/tasks/result")
        );
        assert_eq!(
            private_method("tasks/update", None),
            Some("toolgate/tasks/update")
        );
        assert_eq!(private_method("tasks/nonsense", None), None);
        assert!(may_carry_task(br#"{"params":{"task":{}}}"#));
        assert!(!may_carry_task(br#"{"params":{"tasks":{}}}"#));
    }
}
