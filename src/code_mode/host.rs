//! `run_code` as a pipeline tool: runs the program on the worker pool, its tool calls as sub-calls of the caller.

use std::{sync::Arc, time::Duration};

use rmcp::model::{CallToolResult, ContentBlock, ProgressNotificationParam};

use crate::relay::Caller;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{
    pool::{BoxFuture, Limits, PoolConfig, RunHost, RunRequest, ToolInfo, WorkerPool},
    wire::ToolFailure,
};
use crate::{
    config::{CodeSettings, ProfileName},
    downstream::guard::json_kind,
    error::META_KEY,
    pipeline::{Call, CallError, Pipeline, ToolCall},
    registry::View,
    telemetry::Trace,
    upstream::ProgressSink,
};

/// Runs `run_code` programs on a warm pool of sandboxed workers.
pub struct CodeRunner {
    pool: Arc<WorkerPool>,
    limits: Limits,
}

/// The limits of one run, as configured.
fn run_limits(settings: &CodeSettings) -> Limits {
    Limits {
        wall: Duration::from_millis(settings.timeout_ms),
        max_tool_calls: settings.max_tool_calls,
        max_output_bytes: settings.max_output_bytes,
        memory_bytes: settings.memory_mb * 1024 * 1024,
        loop_iterations: settings.loop_iterations,
        recursion_depth: settings.recursion_depth,
        max_parallel: settings.max_parallel,
    }
}

impl CodeRunner {
    /// Starts the pool's warm workers in the background; `shutdown` kills them.
    pub fn start(settings: &CodeSettings, shutdown: CancellationToken) -> Self {
        let config = PoolConfig {
            size: settings.workers,
            ..PoolConfig::default()
        };
        Self {
            pool: WorkerPool::new(config, shutdown),
            limits: run_limits(settings),
        }
    }

    /// The same warm pool, with the run limits of `settings` (a reload; the pool's size
    /// stays).
    pub fn with_limits(&self, settings: &CodeSettings) -> Self {
        Self {
            pool: self.pool.clone(),
            limits: run_limits(settings),
        }
    }

    pub fn pool(&self) -> &Arc<WorkerPool> {
        &self.pool
    }

    /// Runs the program in `call`'s `code` argument; its tool calls go through `pipeline`
    /// for `call`'s profile and view. `cancel` (client cancel or timeout) ends the run and
    /// cancels its sub-calls.
    pub async fn run(
        &self,
        pipeline: Arc<Pipeline>,
        call: &ToolCall,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, CallError> {
        // The input schema (checked before this runs) requires a string.
        let code = call
            .arguments
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let tools = call
            .view
            .upstream_entries()
            .map(|entry| ToolInfo {
                name: entry.exposed.to_string(),
                read_only: entry
                    .tool
                    .annotations
                    .as_ref()
                    .and_then(|a| a.read_only_hint)
                    .unwrap_or(false),
            })
            .collect();
        let (finished_tx, mut finished) = mpsc::unbounded_channel();
        let host = Arc::new(Host {
            pipeline,
            view: call.view.clone(),
            rules: call.rules.clone(),
            profile: call.profile.clone(),
            call_id: call.call_id.clone(),
            client: call.client.clone(),
            trace: Trace {
                parent: Some(call.span.clone()),
                remote: call.remote,
            },
            finished: finished_tx,
        });
        let request = RunRequest {
            code,
            tools,
            limits: self.limits.clone(),
        };
        let run = self.pool.run(request, host, cancel);
        tokio::pin!(run);
        let mut done = 0u64;
        let outcome = loop {
            tokio::select! {
                outcome = &mut run => break outcome,
                // A sub-call finished: progress for the client that asked for it.
                Some((name, ok)) = finished.recv() => {
                    done += 1;
                    if let Some(progress) = &call.progress {
                        report(progress, done, &name, ok).await;
                    }
                }
            }
        };
        let text = outcome.text();
        match &outcome.result {
            Ok(_) => Ok(CallToolResult::success(vec![ContentBlock::text(text)])),
            Err(failure) => Err(CallError::CodeRun {
                kind: failure.kind.as_str(),
                text,
            }),
        }
    }
}

/// Tells the client a sub-call finished, under the client's own progress token.
async fn report(progress: &ProgressSink, done: u64, name: &str, ok: bool) {
    let message = if ok {
        format!("{name} finished")
    } else {
        format!("{name} failed")
    };
    let params =
        ProgressNotificationParam::new(progress.token.clone(), done as f64).with_message(message);
    if let Err(error) = progress.notify(params).await {
        tracing::debug!("run_code progress not delivered: {error}");
    }
}

/// What one run may do outside its worker: call the caller's tools, search its catalog.
struct Host {
    pipeline: Arc<Pipeline>,
    view: Arc<View>,
    /// The `run_code` call's rules: its sub-calls run by them, even after a reload.
    rules: Arc<crate::pipeline::Rules>,
    profile: ProfileName,
    /// The `run_code` call's id: sub-calls are `<call_id>:code:<n>`.
    call_id: String,
    client: Option<Caller>,
    /// Sub-call spans are children of the `run_code` call's span.
    trace: Trace,
    finished: mpsc::UnboundedSender<(String, bool)>,
}

impl RunHost for Host {
    fn call_tool(
        &self,
        n: u64,
        name: String,
        arguments: Value,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<Value, ToolFailure>> {
        Box::pin(async move {
            let arguments = match arguments {
                Value::Object(arguments) => Some(arguments),
                Value::Null => None,
                other => {
                    return Err(ToolFailure {
                        code: "INVALID_ARGS".into(),
                        message: format!(
                            "invalid arguments: the arguments of {name} must be an object, found {}",
                            json_kind(&other)
                        ),
                    });
                }
            };
            let call = Call {
                profile: self.profile.clone(),
                name: name.clone(),
                arguments,
                cancel,
                progress: None,
                client: self.client.clone(),
                sub_call_id: Some(format!("{}:code:{n}", self.call_id)),
                trace: self.trace.clone(),
            };
            let outcome = match self
                .pipeline
                .execute_under(&self.view, call, self.rules.clone())
                .await
            {
                Ok(result) if result.is_error == Some(true) => Err(failure_of(&result)),
                Ok(result) => Ok(value_of(result)),
                Err(error) => Err(ToolFailure {
                    code: error.code().to_owned(),
                    message: match error {
                        // The hook's own words, as the model would read them natively.
                        CallError::Denied { reason, .. } => reason,
                        other => other.to_string(),
                    },
                }),
            };
            // The run may have ended meanwhile; then nobody is listening, which is fine.
            let _ = self.finished.send((name, outcome.is_ok()));
            outcome
        })
    }

    fn search(&self, query: String, limit: Option<usize>) -> Value {
        self.view.catalog().search(&query, limit)
    }

    fn describe(&self, name: String) -> Option<String> {
        self.view.catalog().describe(&name)
    }
}

/// What `await tools.x()` resolves to: `structuredContent`; else a lone text block,
/// JSON-parsed when it parses; else the content array.
fn value_of(result: CallToolResult) -> Value {
    if let Some(structured) = result.structured_content {
        return structured;
    }
    if let [block] = result.content.as_slice()
        && let Some(text) = block.as_text()
    {
        return serde_json::from_str(&text.text)
            .unwrap_or_else(|_| Value::String(text.text.clone()));
    }
    serde_json::to_value(&result.content).unwrap_or(Value::Null)
}

/// A tool's own `isError` result as the `ToolCallError` the program sees.
fn failure_of(result: &CallToolResult) -> ToolFailure {
    let code = result
        .meta
        .as_ref()
        .and_then(|meta| meta.get(META_KEY))
        .and_then(|error| error.get("code"))
        .and_then(Value::as_str)
        .unwrap_or("TOOL_ERROR")
        .to_owned();
    let message = result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|text| text.text.as_str()))
        .collect::<Vec<_>>()
        .join("\n");
    ToolFailure { code, message }
}
