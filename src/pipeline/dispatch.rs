//! The base of the chain: a call forwarded to the upstream that owns its tool, or a `run_code` program run.

use tokio_util::sync::CancellationToken;

use super::{Answer, CallError, Pipeline, Rules, ToolCall, task};
use crate::{
    registry::Target,
    upstream::{CallContext, UpstreamError},
};

/// The base of the chain: forward to the owning upstream, or run a program.
///
/// Only the raw upstream call is awaited in place: a program, a task and rmcp's typed call
/// are boxed, so that this future (held inside the last wrapper's own, normally the
/// timeout's: [`super::stages::Next::run_inline`]) is the size of the common path, not of its
/// largest branch.
pub(super) async fn dispatch(
    pipeline: &Pipeline,
    rules: &Rules,
    call: &ToolCall,
    cancel: CancellationToken,
) -> Result<Answer, CallError> {
    let entry = &call.entry;
    if entry.target == Target::RunCode {
        let (Some(code), Some(pipeline)) = (&rules.code, pipeline.me.upgrade()) else {
            return Err(CallError::UnknownTool(entry.exposed.to_string()));
        };
        return Box::pin(code.run(pipeline, call, cancel))
            .await
            .map(Answer::Decoded);
    }
    let upstream =
        pipeline
            .upstreams
            .get(&entry.server)
            .ok_or_else(|| UpstreamError::Unavailable {
                server: entry.server.clone(),
                reason: "not configured".into(),
            })?;
    // A reload that retires this server lets this call finish first.
    let _in_flight = upstream.track_call();
    let context = CallContext {
        cancel,
        progress: call.progress.clone(),
        session: call.client.as_ref().map(|c| c.session),
        remote: call.remote,
        rounds: call.client.as_ref().and_then(|c| c.rounds.clone()),
    };
    if let Some(task) = &call.task {
        return Box::pin(task::dispatch(&upstream, call, task, context)).await;
    }
    if call.raw && upstream.raw_link().is_some() {
        pipeline.metrics.count_raw_upstream_call();
        let raw = upstream
            .call_raw(&entry.upstream_name, &call.arguments, context)
            .await?;
        return Ok(Answer::Raw(raw));
    }
    Ok(Answer::Decoded(
        Box::pin(upstream.call(&entry.upstream_name, Some(call.arguments.clone()), context))
            .await?,
    ))
}
