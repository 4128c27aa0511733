//! The gateway side of one run: answer the worker's requests, schedule its tool calls, enforce the deadline
//! and the limits, and decide how the run ended.

use std::{collections::VecDeque, sync::Arc, time::Duration};

use futures::{StreamExt, stream::FuturesUnordered};
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::{
    BoxFuture, RunFailure, RunHost, RunRequest,
    process::{Incoming, WorkerProcess},
};
use crate::code_mode::wire::{
    self, FailureKind, FromWorker, RunLimits, ToWorker, ToolFailure, value_bytes,
};

/// How long abandoned sub-calls keep being polled after their cancel token fired, so that the pipeline can
/// tell the upstream; after that they are dropped.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// How a run ended, which decides what happens to its worker.
pub(super) enum RunEnd {
    /// The worker reported `done`; it can serve again.
    Done(Result<Option<Value>, RunFailure>),
    /// The gateway ended the run (deadline, limit, cancel, protocol garbage); the worker must be killed.
    Stopped(RunFailure),
    /// The worker's output closed: it died.
    Died,
}

pub(super) struct Driven {
    pub end: RunEnd,
    pub logs: Vec<String>,
    pub tool_calls: u32,
}

/// What the loop is waiting for besides the worker.
pub(super) struct Context<'a> {
    pub request: &'a RunRequest,
    pub host: &'a Arc<dyn RunHost>,
    pub cancel: &'a CancellationToken,
    pub shutdown: &'a CancellationToken,
    pub deadline: Instant,
    /// Owns the tasks that drain abandoned sub-calls.
    pub tasks: &'a TaskTracker,
}

/// Sends the run frame and serves the worker until the run ends.
pub(super) async fn drive(worker: &mut WorkerProcess, cx: Context<'_>) -> Driven {
    let limits = &cx.request.limits;
    worker.set_max_frame(wire::max_frame_bytes(limits.max_output_bytes));
    worker.send(&ToWorker::Run {
        code: cx.request.code.clone(),
        tools: cx.request.tools.iter().map(|t| t.name.clone()).collect(),
        limits: RunLimits {
            loop_iterations: limits.loop_iterations,
            recursion_depth: limits.recursion_depth,
            max_tool_calls: limits.max_tool_calls,
            max_output_bytes: limits.max_output_bytes,
        },
    });
    let mut run = Run {
        calls: Calls::new(limits.max_parallel),
        logs: Vec::new(),
        output_bytes: 0,
        tool_calls: 0,
    };
    let end = run.serve(worker, &cx).await;
    run.calls.abandon(cx.tasks, cx.shutdown);
    Driven {
        end,
        logs: run.logs,
        tool_calls: run.tool_calls,
    }
}

struct Run {
    calls: Calls,
    logs: Vec<String>,
    output_bytes: usize,
    tool_calls: u32,
}

fn stopped(kind: FailureKind, message: String) -> RunEnd {
    RunEnd::Stopped(RunFailure { kind, message })
}

impl Run {
    async fn serve(&mut self, worker: &mut WorkerProcess, cx: &Context<'_>) -> RunEnd {
        let deadline = tokio::time::sleep_until(cx.deadline);
        tokio::pin!(deadline);
        loop {
            let incoming = tokio::select! {
                biased;
                () = cx.cancel.cancelled() => {
                    return stopped(FailureKind::Timeout, "the run was cancelled".to_owned());
                }
                () = cx.shutdown.cancelled() => {
                    return stopped(FailureKind::Crash, "the gateway is shutting down".to_owned());
                }
                () = &mut deadline => {
                    let wall = cx.request.limits.wall.as_millis();
                    return stopped(FailureKind::Timeout, format!("the program ran longer than {wall} ms"));
                }
                Some(finished) = self.calls.in_flight.next(), if !self.calls.in_flight.is_empty() => {
                    self.calls.finished(finished, worker, cx.host);
                    continue;
                }
                incoming = worker.next_frame() => incoming,
            };
            let frame = match incoming {
                Incoming::Frame(frame) => frame,
                Incoming::Garbage(message) => return stopped(FailureKind::Crash, message),
                Incoming::Closed => return RunEnd::Died,
            };
            if let Some(end) = self.on_frame(frame, worker, cx) {
                return end;
            }
        }
    }

    fn on_frame(
        &mut self,
        frame: FromWorker,
        worker: &mut WorkerProcess,
        cx: &Context<'_>,
    ) -> Option<RunEnd> {
        let limits = &cx.request.limits;
        let request_id = match &frame {
            FromWorker::Call { n, .. }
            | FromWorker::Search { n, .. }
            | FromWorker::Describe { n, .. } => Some(*n),
            _ => None,
        };
        if let Some(n) = request_id {
            if n <= worker.last_request {
                return Some(stopped(
                    FailureKind::Crash,
                    format!("the worker reused request id {n}"),
                ));
            }
            worker.last_request = n;
        }
        match frame {
            FromWorker::Ready => {
                return Some(stopped(
                    FailureKind::Crash,
                    "the worker sent ready in the middle of a run".to_owned(),
                ));
            }
            FromWorker::Log { text, .. } => {
                self.output_bytes = self.output_bytes.saturating_add(text.len());
                if self.output_bytes > limits.max_output_bytes {
                    let max = limits.max_output_bytes;
                    return Some(stopped(
                        FailureKind::Limit,
                        format!("output over {max} bytes"),
                    ));
                }
                self.logs.push(text);
            }
            FromWorker::Call { n, tool, args } => {
                self.tool_calls = self.tool_calls.saturating_add(1);
                if self.tool_calls > limits.max_tool_calls {
                    let max = limits.max_tool_calls;
                    return Some(stopped(
                        FailureKind::Limit,
                        format!("more than {max} tool calls"),
                    ));
                }
                let Some(info) = cx.request.tools.iter().find(|t| t.name == tool) else {
                    worker.send(&ToWorker::Result {
                        n,
                        ok: None,
                        error: Some(ToolFailure {
                            code: "UNKNOWN_TOOL".to_owned(),
                            message: format!("unknown tool \"{tool}\""),
                        }),
                    });
                    return None;
                };
                self.calls.queue.push_back(Queued {
                    wire_n: n,
                    ordinal: u64::from(self.tool_calls),
                    tool,
                    args,
                    read_only: info.read_only,
                });
                self.calls.start_ready(cx.host);
            }
            FromWorker::Search { n, query, limit } => {
                let mut value = cx.host.search(query, limit);
                if wire::nests_deeper_than(&value, wire::MAX_VALUE_DEPTH) {
                    value = Value::Null;
                }
                worker.send(&ToWorker::SearchResult { n, value });
            }
            FromWorker::Describe { n, name } => {
                let text = cx.host.describe(name);
                worker.send(&ToWorker::DescribeResult { n, text });
            }
            FromWorker::Done { value, error } => {
                if let Some(error) = error {
                    return Some(RunEnd::Done(Err(RunFailure {
                        kind: error.kind,
                        message: error.message,
                    })));
                }
                let bytes = value.as_ref().map_or(0, value_bytes);
                if self.output_bytes.saturating_add(bytes) > limits.max_output_bytes {
                    let max = limits.max_output_bytes;
                    return Some(RunEnd::Done(Err(RunFailure {
                        kind: FailureKind::Limit,
                        message: format!("output over {max} bytes"),
                    })));
                }
                return Some(RunEnd::Done(Ok(value)));
            }
        }
        None
    }
}

/// A result the worker could not parse is refused here instead.
fn too_deep(tool: &str) -> ToolFailure {
    ToolFailure {
        code: "RESULT_TOO_DEEP".to_owned(),
        message: format!(
            "the result of {tool} nests deeper than {} levels",
            wire::MAX_VALUE_DEPTH
        ),
    }
}

/// A tool call waiting for its turn.
struct Queued {
    wire_n: u64,
    ordinal: u64,
    tool: String,
    args: Value,
    read_only: bool,
}

struct Finished {
    wire_n: u64,
    ordinal: u64,
    tool: String,
    read_only: bool,
    result: Result<Value, ToolFailure>,
}

/// The run's tool calls: read-only ones overlap up to `max_parallel`; any other runs alone, and everything
/// starts in submission order.
struct Calls {
    queue: VecDeque<Queued>,
    in_flight: FuturesUnordered<BoxFuture<'static, Finished>>,
    shared_running: usize,
    exclusive_running: bool,
    max_parallel: usize,
    /// Parent of every sub-call's cancel token; fired when the run ends.
    run_token: CancellationToken,
}

impl Calls {
    fn new(max_parallel: usize) -> Self {
        Self {
            queue: VecDeque::new(),
            in_flight: FuturesUnordered::new(),
            shared_running: 0,
            exclusive_running: false,
            max_parallel: max_parallel.max(1),
            run_token: CancellationToken::new(),
        }
    }

    fn start_ready(&mut self, host: &Arc<dyn RunHost>) {
        while let Some(next) = self.queue.front() {
            if self.exclusive_running {
                return;
            }
            if next.read_only {
                if self.shared_running >= self.max_parallel {
                    return;
                }
                self.shared_running += 1;
            } else {
                if self.shared_running > 0 {
                    return;
                }
                self.exclusive_running = true;
            }
            let Some(call) = self.queue.pop_front() else {
                return;
            };
            let host = host.clone();
            let token = self.run_token.child_token();
            self.in_flight.push(Box::pin(async move {
                let result = host
                    .call_tool(call.ordinal, call.tool.clone(), call.args, token)
                    .await;
                Finished {
                    wire_n: call.wire_n,
                    ordinal: call.ordinal,
                    tool: call.tool,
                    read_only: call.read_only,
                    result,
                }
            }));
        }
    }

    fn finished(&mut self, finished: Finished, worker: &WorkerProcess, host: &Arc<dyn RunHost>) {
        if finished.read_only {
            self.shared_running -= 1;
        } else {
            self.exclusive_running = false;
        }
        host.call_finished(finished.ordinal, &finished.tool, finished.result.is_ok());
        let (ok, error) = match finished.result {
            Ok(value) if wire::nests_deeper_than(&value, wire::MAX_VALUE_DEPTH) => {
                (None, Some(too_deep(&finished.tool)))
            }
            Ok(value) => (Some(value), None),
            Err(failure) => (None, Some(failure)),
        };
        worker.send(&ToWorker::Result {
            n: finished.wire_n,
            ok,
            error,
        });
        self.start_ready(host);
    }

    /// The run is over: queued calls never start, in-flight ones get their cancel token fired and are polled a
    /// little longer in the background so that cancellation can reach the upstream.
    fn abandon(&mut self, tasks: &TaskTracker, shutdown: &CancellationToken) {
        self.queue.clear();
        self.run_token.cancel();
        if self.in_flight.is_empty() {
            return;
        }
        let mut in_flight = std::mem::take(&mut self.in_flight);
        let shutdown = shutdown.clone();
        tasks.spawn(async move {
            let drain = async { while in_flight.next().await.is_some() {} };
            tokio::select! {
                () = shutdown.cancelled() => {}
                _ = tokio::time::timeout(DRAIN_TIMEOUT, drain) => {}
            }
        });
    }
}
