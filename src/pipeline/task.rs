//! A task-augmented `tools/call` (MCP 2025-11-25): the pipeline's stages as for any call, then the upstream's `CreateTaskResult` instead of a tool result.

use std::sync::Arc;

use super::{Answer, Call, CallError, Pipeline, ToolCall, View};
use crate::upstream::{CallContext, Upstream, UpstreamError};

/// What a task-augmented `tools/call` carries besides name and arguments.
pub struct TaskRequest {
    /// The client's `task` (e.g. `{"ttl": 60000}`), forwarded as it came.
    pub task: serde_json::Value,
    /// The client's `_meta`, without its `progressToken` (the call's progress sink carries
    /// it; the upstream gets a token of toolgate's).
    pub meta: Option<serde_json::Map<String, serde_json::Value>>,
}

impl Pipeline {
    /// A task-augmented call: every stage before the upstream as for any call, then the
    /// upstream's `CreateTaskResult` as it came (post hooks and output checks do not see it:
    /// there is no tool result yet).
    pub async fn execute_task(
        &self,
        view: &Arc<View>,
        call: Call,
        task: TaskRequest,
    ) -> Result<
        (
            serde_json::Map<String, serde_json::Value>,
            Option<crate::upstream::ProgressRoute>,
        ),
        CallError,
    > {
        match self
            .execute_by(
                view,
                call,
                super::How::default(),
                Some(Arc::new(task)),
                None,
            )
            .await?
        {
            Answer::Task {
                result, progress, ..
            } => Ok((result, progress)),
            other => Err(CallError::Upstream(UpstreamError::Protocol {
                server: crate::config::ServerId::global(crate::config::ServerName::gateway()),
                detail: format!(
                    "a task-augmented call ended without a task (error result: {})",
                    other.is_error()
                ),
            })),
        }
    }
}

/// The base of the chain for a task call: the upstream's `CreateTaskResult`, as it came.
pub(super) async fn dispatch(
    upstream: &Upstream,
    call: &ToolCall,
    task: &TaskRequest,
    context: CallContext,
) -> Result<Answer, CallError> {
    let entry = &call.entry;
    let mut params = serde_json::Map::new();
    params.insert("name".into(), entry.upstream_name.clone().into());
    params.insert(
        "arguments".into(),
        serde_json::Value::Object(call.arguments.clone()),
    );
    params.insert("task".into(), task.task.clone());
    let mut meta = task.meta.clone().unwrap_or_default();
    // The task's progress keeps its token past this call: a route of its own, kept with
    // the task (MCP 2025-11-25).
    let progress = match context.progress {
        Some(sink) => {
            let (token, route) = upstream.task_progress(sink).await;
            meta.insert(
                "progressToken".into(),
                serde_json::to_value(&token).unwrap_or_default(),
            );
            Some(route)
        }
        None => None,
    };
    if !meta.is_empty() {
        params.insert("_meta".into(), serde_json::Value::Object(meta));
    }
    let limit = crate::upstream::Limit {
        timeout: std::time::Duration::from_millis(entry.policy.timeout_ms),
        cancel: context.cancel,
        caller: context.session.map(|session| (session, context.rounds)),
    };
    let result = upstream.json_request("tools/call", params, limit).await?;
    Ok(Answer::Task {
        server: entry.server.clone(),
        result,
        progress,
    })
}
