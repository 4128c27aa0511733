//! The call pipeline: the one entry point every `tools/call` goes through.
//!
//! 1. **Resolve** the name in the caller's view (hidden = unknown).
//! 2. **Validate** the arguments against the tool's `inputSchema` (cached validators); every
//!    violation is listed and the upstream is not called.
//! 3. **Pre gates**, in order; the first non-allow decision wins. `ask` becomes an
//!    elicitation to the calling client when it can answer one.
//! 4. **Around wrappers**, outermost first, each given `next`: retry → timeout → dispatch to
//!    the upstream at the base. (Retry is outside timeout so each attempt gets its own limit.)
//! 5. **Post**: the built-in `outputSchema` check, then the configured post hooks in order:
//!    `accept` may replace the result (see [`PostDecision::Accept`] for the rule), `block`
//!    turns it into an error. The size cap comes last, on what the client would receive.
//!
//! Every call runs in a `tools/call` span ([`crate::telemetry`]). Every resolved call is recorded
//! once: the span's outcome, one tracing event, one audit line, the metrics. A name that
//! resolves to nothing gets a tracing event and counts under one `(unknown)` metrics label.
//! Built-ins and user code use the same traits ([`PreGate`], [`Around`], [`PostHook`]).

mod answer;
pub mod audit;
pub mod builtin;
mod call_error;
mod dispatch;
pub mod metrics;
mod replace;
mod stages;
mod task;
pub mod validate;

use std::{
    future::Future,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Instant,
};

use rmcp::model::{CallToolResult, JsonObject};

use crate::relay::Caller;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::{
    code_mode::CodeRunner,
    config::{Mode, ProfileName},
    drain::{Admission, Drain},
    registry::{Target, ToolEntry, View},
    telemetry::{Trace, Traceparent},
    upstream::{ProgressSink, UpstreamError, Upstreams},
};

pub use answer::Answer;
pub use call_error::{CallError, CutBy};
pub use stages::{Around, GateDecision, Next, PostDecision, PostHook, PreGate};
pub use task::TaskRequest;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// `Box::pin(make())`, with the box allocated first, so that the future is built in place:
/// `Box::pin` builds it on the stack and copies all of it (a call's future is kilobytes,
/// however little of it is set when it starts).
#[inline(always)]
pub(crate) fn boxed<F: Future>(make: impl FnOnce() -> F) -> Pin<Box<F>> {
    Box::into_pin(Box::write(Box::new_uninit(), make()))
}

/// Ends when `cancel` is cancelled; never without one.
async fn cancelled(cancel: Option<&CancellationToken>) {
    match cancel {
        Some(cancel) => cancel.cancelled().await,
        None => std::future::pending().await,
    }
}

/// One call as the downstream received it.
pub struct Call {
    pub profile: ProfileName,
    pub name: String,
    pub arguments: Option<JsonObject>,
    /// Fired by the client's `notifications/cancelled`.
    pub cancel: CancellationToken,
    pub progress: Option<ProgressSink>,
    /// The calling client, when there is one: where `ask` is elicited, and where the
    /// upstream's requests and log messages during the call go.
    pub client: Option<Caller>,
    /// Set by code mode for a call a program makes: its id, `<call_id>:code:<n>`. Such a call
    /// may reach every visible tool (also in `code` mode), but not `run_code` itself.
    pub sub_call_id: Option<String>,
    /// The client's `traceparent`, or (for a program's call) the `run_code` span.
    pub trace: Trace,
}

/// A resolved call, as gates, wrappers and post hooks see it.
pub struct ToolCall {
    /// Unique in this gateway's lifetime: hooks correlate by it.
    pub call_id: String,
    pub profile: ProfileName,
    /// The caller's view: a `run_code` program's calls resolve in it too.
    pub view: Arc<View>,
    pub entry: Arc<ToolEntry>,
    pub arguments: JsonObject,
    pub progress: Option<ProgressSink>,
    pub client: Option<Caller>,
    /// The caller takes the result raw when the upstream can give it so ([`Answer::Raw`]).
    pub(crate) raw: bool,
    /// This call's `tools/call` span (disabled unless exported or logged at debug): hooks
    /// and upstream requests hang theirs under it.
    pub span: tracing::Span,
    /// The client's `traceparent`: what goes out when spans are not exported.
    pub remote: Option<Traceparent>,
    /// A task-augmented call (MCP 2025-11-25): the `task` and `_meta` it is forwarded with;
    /// its answer is the upstream's `CreateTaskResult` ([`Answer::Task`]).
    pub task: Option<Arc<TaskRequest>>,
    /// The rules this call runs by, taken when it started: a `run_code` program's calls run
    /// by them too, even after a reload.
    pub rules: Arc<Rules>,
    /// Set once every pre gate let the call through (at once when there are none): a call
    /// cancelled or cut before that is audited with no decision, not as allowed.
    pub(crate) decided: AtomicBool,
}

/// The metrics label of calls to names that resolve to no tool.
pub const UNKNOWN_TOOL_LABEL: &str = "(unknown)";

/// Code of a deny by a gate.
pub const DENIED: &str = "DENIED";
/// Code of a block by a post hook.
pub const BLOCKED: &str = "BLOCKED";
/// Code of a hook that failed (error, timeout, garbage) and failed closed.
pub const HOOK_FAILED: &str = "HOOK_FAILED";

/// What the caller of [`Pipeline::execute_by`] does with a call.
#[derive(Clone, Copy, Default)]
pub(crate) struct How {
    /// The caller writes raw results itself ([`Answer::Raw`]).
    pub raw: bool,
    /// `call.cancel` is this call's alone, and whether its client cancelled is kept
    /// elsewhere (a fast path's map of calls in flight): the drain lists it, not a child.
    pub own_cancel: bool,
}

/// How one call is run, beside the call itself.
struct Run {
    call_id: String,
    from_program: bool,
    how: How,
    /// A task-augmented call (MCP 2025-11-25).
    task: Option<Arc<TaskRequest>>,
    span: tracing::Span,
    /// `None`: the rules current when it starts.
    rules: Option<Arc<Rules>>,
}

/// The stages a call runs through: assembled at start, replaced whole by a reload. A call
/// takes the set current when it starts and keeps it to its end.
#[derive(Default)]
pub struct Rules {
    pub gates: Vec<Arc<dyn PreGate>>,
    pub wrappers: Vec<Arc<dyn Around>>,
    pub posts: Vec<Arc<dyn PostHook>>,
    /// Results larger than this (serialized) are refused; `None`: no cap.
    pub max_result_bytes: Option<usize>,
    /// `run_code` programs, when some profile is in `code` or `both` mode.
    pub code: Option<Arc<CodeRunner>>,
}

/// The one entry point of every call; what it runs is its current [`Rules`].
pub struct Pipeline {
    upstreams: Arc<Upstreams>,
    /// This pipeline, for the programs' sub-calls (which run through it again).
    me: std::sync::Weak<Pipeline>,
    raw_upstream: bool,
    /// Read (an `Arc` clone) once per call; never held across an await.
    rules: std::sync::RwLock<Arc<Rules>>,
    pub metrics: Arc<metrics::Metrics>,
    audit: Option<audit::AuditLog>,
    next_call: AtomicU64,
    /// Admits calls until the gateway drains.
    drain: Arc<Drain>,
}

/// What goes into a [`Pipeline`] besides the upstreams.
#[derive(Default)]
pub struct Stages {
    pub gates: Vec<Arc<dyn PreGate>>,
    pub wrappers: Vec<Arc<dyn Around>>,
    pub posts: Vec<Arc<dyn PostHook>>,
    pub audit: Option<audit::AuditLog>,
    /// Results larger than this (serialized) are refused; `None`: no cap.
    pub max_result_bytes: Option<usize>,
    /// Call stdio upstreams over the raw path ([`crate::upstream::raw`]) also for typed
    /// callers (HTTP sessions, `run_code` programs): the answer is decoded once, as a tool
    /// result, instead of by rmcp's client. The gateway sets it from `fast_path`.
    pub raw_upstream: bool,
}

impl Pipeline {
    pub fn new(
        upstreams: Arc<Upstreams>,
        stages: Stages,
        code: Option<CodeRunner>,
        drain: Arc<Drain>,
    ) -> Arc<Self> {
        let rules = Rules {
            gates: stages.gates,
            wrappers: stages.wrappers,
            posts: stages.posts,
            max_result_bytes: stages.max_result_bytes,
            code: code.map(Arc::new),
        };
        Arc::new_cyclic(|me| Self {
            drain,
            upstreams,
            me: me.clone(),
            raw_upstream: stages.raw_upstream,
            rules: std::sync::RwLock::new(Arc::new(rules)),
            metrics: Arc::new(metrics::Metrics::default()),
            audit: stages.audit,
            next_call: AtomicU64::new(1),
        })
    }

    /// The rules calls starting now run by.
    pub fn rules(&self) -> Arc<Rules> {
        self.rules
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Replaces the rules for calls that start from now on; calls in flight keep theirs.
    pub fn set_rules(&self, rules: Rules) {
        *self
            .rules
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(rules);
    }

    /// Runs one call through every stage. `view` is the caller's, so listing and dispatch
    /// agree.
    pub async fn execute(&self, view: &Arc<View>, call: Call) -> Result<CallToolResult, CallError> {
        self.execute_undecoded(view, call).await?.decode()
    }

    /// [`execute`](Self::execute), the result left as it came: raw when it came raw from a
    /// stdio upstream and no stage had to read it. For a caller that writes raw results itself
    /// and whose cancel is the client's (HTTP's modern fast path).
    pub(crate) async fn execute_undecoded(
        &self,
        view: &Arc<View>,
        call: Call,
    ) -> Result<Answer, CallError> {
        self.execute_by(view, call, self.how(), None, None).await
    }

    /// A typed caller's: raw only by the gateway's choice, and its token shared.
    fn how(&self) -> How {
        How {
            raw: self.raw_upstream,
            own_cancel: false,
        }
    }

    /// A fast path's call: [`execute`](Self::execute), with the result left raw when it came
    /// raw from a stdio upstream and no stage had to read it (the caller writes raw results
    /// itself). `call.cancel` must be the call's alone, and the caller must not take its
    /// cancel for the client's: the drain's cut cancels it too.
    pub(crate) async fn execute_answer(
        &self,
        view: &Arc<View>,
        call: Call,
    ) -> Result<Answer, CallError> {
        let how = How {
            raw: true,
            own_cancel: true,
        };
        self.execute_by(view, call, how, None, None).await
    }

    /// A `run_code` program's call: [`execute`](Self::execute) under its program's rules.
    pub async fn execute_under(
        &self,
        view: &Arc<View>,
        call: Call,
        rules: Arc<Rules>,
    ) -> Result<CallToolResult, CallError> {
        self.execute_by(view, call, self.how(), None, Some(rules))
            .await?
            .decode()
    }

    /// A call by `rules`, or by the current rules; `task`: a task-augmented call.
    pub(crate) async fn execute_by(
        &self,
        view: &Arc<View>,
        mut call: Call,
        how: How,
        task: Option<Arc<TaskRequest>>,
        rules: Option<Arc<Rules>>,
    ) -> Result<Answer, CallError> {
        let from_program = call.sub_call_id.is_some();
        let call_id = match call.sub_call_id.take() {
            Some(id) => id,
            None => {
                // Without `fmt`, which costs a few hundred instructions a call.
                let number = self.next_call.fetch_add(1, Ordering::Relaxed);
                let mut id = String::with_capacity(8);
                id.push('c');
                id.push_str(itoa::Buffer::new().format(number));
                id
            }
        };
        let span = call
            .trace
            .call_span(&call_id, call.profile.as_str(), &call.name);
        let run = Run {
            call_id,
            from_program,
            how,
            task,
            span: span.clone(),
            rules,
        };
        self.execute_in(view, call, run).instrument(span).await
    }

    /// [`execute_answer`](Self::execute_answer) inside the call's span.
    async fn execute_in(
        &self,
        view: &Arc<View>,
        call: Call,
        run: Run,
    ) -> Result<Answer, CallError> {
        let Run {
            call_id,
            from_program,
            how,
            task,
            span,
            rules,
        } = run;
        let started = Instant::now();
        let reject = |server: Option<&dyn std::fmt::Display>, code: &str| {
            let elapsed = started.elapsed().as_micros() as u64;
            crate::telemetry::finish(&span, server, "reject", code, elapsed);
        };
        // A program cannot start another program: `run_code` is unknown inside code.
        let entry = view
            .get(&call.name)
            .filter(|e| !(from_program && e.target == Target::RunCode))
            .cloned();
        let Some(entry) = entry else {
            if let Some(server) = view.withdrawn(&call.name) {
                // A tool of a server that is down: say so, not that the tool is unknown.
                let error = self.upstreams.unavailable(server);
                self.metrics
                    .record(&call.name, Some(error.code()), started.elapsed());
                reject(Some(server), error.code());
                tracing::debug!(target: "toolgate::audit", call_id, profile = %call.profile, tool = %call.name, server = %server, outcome = error.code(), "call");
                return Err(CallError::Upstream(error));
            }
            // One fixed label: client-chosen names must not grow the metric series without bound.
            self.metrics
                .record(UNKNOWN_TOOL_LABEL, Some("UNKNOWN_TOOL"), started.elapsed());
            reject(None, "UNKNOWN_TOOL");
            tracing::debug!(target: "toolgate::audit", call_id, profile = %call.profile, tool = %call.name, outcome = "UNKNOWN_TOOL", "call");
            return Err(CallError::UnknownTool(call.name));
        };
        if view.mode() == Mode::Code && !from_program && entry.target == Target::Upstream {
            self.metrics
                .record(UNKNOWN_TOOL_LABEL, Some("UNKNOWN_TOOL"), started.elapsed());
            reject(Some(&entry.server), "UNKNOWN_TOOL");
            return Err(CallError::CodeOnly(call.name));
        }
        // Validated as a `Value` without copying: wrapped for the check, unwrapped after.
        let arguments = serde_json::Value::Object(call.arguments.unwrap_or_default());
        let violations = validate::check_input(&entry, &arguments);
        let arguments = match arguments {
            serde_json::Value::Object(arguments) => arguments,
            _ => JsonObject::new(),
        };
        let tool_call = ToolCall {
            call_id,
            profile: call.profile,
            view: view.clone(),
            entry,
            arguments,
            progress: call.progress,
            client: call.client,
            raw: how.raw,
            span,
            remote: call.trace.remote,
            task,
            rules: rules.unwrap_or_else(|| self.rules()),
            decided: AtomicBool::new(false),
        };
        let rules = tool_call.rules.clone();
        let mut admitted = None;
        let outcome = if !violations.is_empty() {
            Err(CallError::InvalidArgs(violations))
        } else if from_program {
            // Part of its program's call, which was admitted and is cancelled with it. The
            // token is the host's, not made here: a timeout cancels a child of it.
            self.run(&rules, &tool_call, call.cancel, false).await
        } else if let Some(admission) = self.drain.admit() {
            let outcome = self
                .run_admitted(&rules, &admission, &tool_call, call.cancel, how.own_cancel)
                .await;
            admitted = Some(admission);
            outcome
        } else {
            Err(CallError::ShuttingDown)
        };
        self.record(&tool_call, &outcome, started);
        // In flight until recorded: when a drain ends, every drained call's audit line is queued.
        drop(admitted);
        outcome
    }

    /// Runs an admitted call; a drain that outlasts its grace cancels it like the client could.
    async fn run_admitted(
        &self,
        rules: &Rules,
        admission: &Admission,
        call: &ToolCall,
        client: CancellationToken,
        own_cancel: bool,
    ) -> Result<Answer, CallError> {
        let run = |cancel| self.run(rules, call, cancel, true);
        let outcome = match own_cancel {
            // The drain's cut, a timeout and the client cancel the same token here; a
            // client's cancel is told by its fast path, which then writes no answer at all.
            true => admission.run_on(client, run).await,
            false => admission.run(&client, run).await,
        };
        match outcome {
            // Whatever the cancel made of it (cancelled, timed out, a failed run), the drain
            // is the reason the client should read, unless someone cancelled the call first.
            Err(_) if admission.cut_short() => {
                Err(CallError::CutShort(match self.drain.hurried() {
                    true => CutBy::Signal,
                    false => CutBy::Grace(self.drain.grace().as_millis() as u64),
                }))
            }
            outcome => outcome,
        }
    }

    /// Waits until every audit line so far is written (bounded): before the process exits.
    pub async fn flush_audit(&self) {
        if let Some(audit) = &self.audit {
            audit.flush().await;
        }
    }

    /// `own_token`: `cancel` is this call's alone (see [`Next::owns_token`]).
    async fn run(
        &self,
        rules: &Rules,
        call: &ToolCall,
        cancel: CancellationToken,
        own_token: bool,
    ) -> Result<Answer, CallError> {
        for gate in &rules.gates {
            // A gate may take long (a command hook that waits on a person): the client's
            // cancel and the drain's cut end the call now, not at the hook's `timeout_ms`.
            let decision = tokio::select! {
                biased;
                decision = gate.check(call) => decision,
                () = cancel.cancelled() => return Err(CallError::Upstream(UpstreamError::Cancelled)),
            };
            match decision {
                GateDecision::Allow => {}
                GateDecision::Deny { reason, code } => {
                    return Err(CallError::Denied { reason, code });
                }
                // Boxed: an elicitation's future is large, and most calls never ask.
                GateDecision::Ask { reason } => {
                    Box::pin(builtin::ask(call, &reason, &cancel)).await?
                }
            }
        }
        call.decided.store(true, Ordering::Relaxed);
        let next = Next::chain(&rules.wrappers, self, rules, own_token);
        // Post hooks wait on the same cancel; cloned only when there are any (a clone takes
        // the token tree's lock).
        let posts_cancel = (!rules.posts.is_empty()).then(|| cancel.clone());
        let answer = next.run(call, cancel).await?;
        // Decoded only for a stage that reads it; otherwise it may go out as it came.
        let mut result = match answer {
            // No tool result yet: checks and post hooks have nothing to read.
            task @ Answer::Task { .. } => return Ok(task),
            Answer::Raw(raw) if call.entry.policy.output.is_none() && rules.posts.is_empty() => {
                if let Some(limit) = rules.max_result_bytes
                    && raw.size() > limit
                {
                    return Err(CallError::TooLarge {
                        size: raw.size(),
                        limit,
                    });
                }
                return Ok(Answer::Raw(raw));
            }
            answer => answer.decode()?,
        };
        let violations = validate::check_output(&call.entry, &result);
        if !violations.is_empty() {
            return Err(CallError::InvalidOutput(violations));
        }
        for post in &rules.posts {
            let decision = tokio::select! {
                biased;
                decision = post.after(call, &result) => decision,
                () = cancelled(posts_cancel.as_ref()) => {
                    return Err(CallError::Upstream(UpstreamError::Cancelled));
                }
            };
            match decision {
                PostDecision::Accept {
                    content: None,
                    structured_content: None,
                } => {}
                PostDecision::Accept {
                    content,
                    structured_content,
                } => replace::replace(&call.entry, &mut result, content, structured_content)?,
                PostDecision::Block { feedback, code } => {
                    return Err(CallError::Blocked { feedback, code });
                }
            }
        }
        if let Some(limit) = rules.max_result_bytes {
            builtin::check_size(&result, limit)?;
        }
        Ok(Answer::Decoded(result))
    }

    /// One event per call: tracing, audit log, metrics.
    fn record(&self, call: &ToolCall, outcome: &Result<Answer, CallError>, started: Instant) {
        let elapsed = started.elapsed();
        let code = match outcome {
            Ok(answer) if answer.is_error() => "TOOL_ERROR",
            Ok(_) => "OK",
            Err(error) => error.code(),
        };
        let decision = match outcome {
            Err(CallError::Denied { .. }) => "deny",
            Err(CallError::Blocked { .. }) => "block",
            Err(CallError::InvalidArgs(_))
            | Err(CallError::UnknownTool(_))
            | Err(CallError::ShuttingDown) => "reject",
            // Ended before the pre gates had decided: a hook's wait cancelled or cut, or an
            // approval cut (an approval the client cancels is refused: a deny, above).
            Err(_) if !call.decided.load(Ordering::Relaxed) => "none",
            _ => "allow",
        };
        // Counted like the audit log: an upstream's own `isError` result is an error too.
        self.metrics
            .record(&call.entry.exposed, (code != "OK").then_some(code), elapsed);
        // Debug level: emitted for every call, printed only when asked (RUST_LOG), so a busy
        // gateway does not pay for formatting by default. `--audit-log` is the durable record.
        tracing::debug!(
            target: "toolgate::audit",
            call_id = %call.call_id,
            profile = %call.profile,
            tool = %call.entry.exposed,
            server = %call.entry.server,
            decision,
            outcome = code,
            duration_us = elapsed.as_micros() as u64,
            "call"
        );
        crate::telemetry::finish(
            &call.span,
            Some(&call.entry.server),
            decision,
            code,
            elapsed.as_micros() as u64,
        );
        if let Some(audit) = &self.audit {
            audit.write(call, decision, code, elapsed);
        }
    }
}
