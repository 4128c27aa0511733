//! Built-in stages: approval through elicitation, per-call timeout, retry, result size cap.

use std::{collections::HashMap, time::Duration};

use rmcp::{
    model::{
        CallToolResult, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
        ElicitationSchema, InputRequest,
    },
    service::ServiceError,
};
use tokio_util::sync::CancellationToken;

use rmcp::model::Tool;

use super::{Answer, Around, BoxFuture, CallError, DENIED, Next, ToolCall};
use crate::config::{Config, Retry, ServerId, ToolPolicy};
use crate::relay::Ask;

/// Limits configured for one server and its tools.
#[derive(Debug, Clone, Default)]
pub struct ServerLimits {
    timeout_ms: Option<u64>,
    retry: Option<Retry>,
    tools: HashMap<String, ToolPolicy>,
}

/// Every server's limits plus the gateway default, resolved per call.
#[derive(Debug, Clone)]
pub struct Limits {
    default_timeout_ms: u64,
    servers: HashMap<ServerId, ServerLimits>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            default_timeout_ms: crate::config::DEFAULT_CALL_TIMEOUT_MS,
            servers: HashMap::new(),
        }
    }
}

impl Limits {
    pub fn from_config(config: &Config) -> Self {
        Self {
            default_timeout_ms: config.call_timeout_ms,
            servers: config
                .servers
                .iter()
                .map(|s| {
                    let limits = ServerLimits {
                        timeout_ms: s.timeout_ms,
                        retry: s.retry,
                        tools: s
                            .tools
                            .iter()
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect(),
                    };
                    (s.id.clone(), limits)
                })
                .collect(),
        }
    }

    /// `tool`'s time limit (tool, then server, then gateway default) and retry (the tool's
    /// own, or the server's for tools annotated `idempotentHint`), resolved at import.
    pub fn for_tool(&self, server: &ServerId, tool: &Tool) -> (u64, Option<Retry>) {
        let limits = self.servers.get(server);
        let own = limits.and_then(|s| s.tools.get(tool.name.as_ref()));
        let timeout_ms = own
            .and_then(|t| t.timeout_ms)
            .or_else(|| limits.and_then(|s| s.timeout_ms))
            .unwrap_or(self.default_timeout_ms);
        let idempotent = tool
            .annotations
            .as_ref()
            .and_then(|a| a.idempotent_hint)
            .unwrap_or(false);
        let retry = own
            .and_then(|t| t.retry)
            .or_else(|| limits.and_then(|s| s.retry).filter(|_| idempotent));
        (timeout_ms, retry)
    }
}

/// Ends a call that takes too long: cancels it upstream and answers `TOOL_TIMEOUT`.
pub struct Timeout;

/// How long a timed-out call waits for its cancel to reach the upstream before it answers.
const CANCEL_SEND_GRACE: Duration = Duration::from_millis(100);

impl Around for Timeout {
    fn around<'a>(
        &'a self,
        call: &'a ToolCall,
        cancel: CancellationToken,
        next: Next<'a>,
    ) -> BoxFuture<'a, Result<Answer, CallError>> {
        super::boxed(move || async move {
            let limit = call.entry.policy.timeout_ms;
            // Expiry cancels this attempt upstream, not the client's request: a child token,
            // unless the token is already the call's alone (a child cost two allocations and
            // about 500 instructions per call, BENCHMARKS.md).
            let attempt = match next.owns_token() {
                true => cancel,
                false => cancel.child_token(),
            };
            let running = next.run_inline(call, attempt.clone());
            tokio::pin!(running);
            tokio::select! {
                // In order, not by lot: an answer ready at the deadline is taken.
                biased;
                // The chain answered in time.
                outcome = &mut running => outcome,
                // Too slow: cancel upstream, give the chain a moment to send the cancel, answer.
                // Only a moment: a hung server with a full pipe takes neither the request nor
                // the cancel, and the deadline must hold anyway.
                () = tokio::time::sleep(Duration::from_millis(limit)) => {
                    attempt.cancel();
                    let _ = tokio::time::timeout(CANCEL_SEND_GRACE, running).await;
                    Err(CallError::Timeout(limit))
                }
            }
        })
    }
}

/// Tries again after a transient failure, for calls configured retryable.
pub struct RetryTransient;

impl Around for RetryTransient {
    /// Only tools with a retry policy: the others skip this stage.
    fn wraps(&self, call: &ToolCall) -> bool {
        call.entry.policy.retry.is_some()
    }

    fn around<'a>(
        &'a self,
        call: &'a ToolCall,
        cancel: CancellationToken,
        next: Next<'a>,
    ) -> BoxFuture<'a, Result<Answer, CallError>> {
        Box::pin(async move {
            let Some(retry) = call.entry.policy.retry else {
                return next.run_inline(call, cancel).await;
            };
            let mut attempt = 1;
            loop {
                let outcome = next.run_inline(call, cancel.clone()).await;
                match outcome {
                    Err(error)
                        if error.is_transient()
                            && attempt < retry.attempts
                            && !cancel.is_cancelled() =>
                    {
                        tracing::debug!(call_id = %call.call_id, attempt, code = error.code(), "retrying");
                        attempt += 1;
                        tokio::select! {
                            // Wait out the backoff.
                            () = tokio::time::sleep(Duration::from_millis(retry.backoff_ms)) => {}
                            // The client gave up meanwhile.
                            () = cancel.cancelled() => return Err(error),
                        }
                    }
                    outcome => return outcome,
                }
            }
        })
    }
}

/// An `io::Write` that only counts.
struct ByteCounter(usize);

impl std::io::Write for ByteCounter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Refuses results larger than the cap: a flood would fill the model's context. Applied last,
/// to what the client would really receive (after every post hook).
pub fn check_size(result: &CallToolResult, limit: usize) -> Result<(), CallError> {
    let mut counter = ByteCounter(0);
    // Counted, not built: the result is serialized again on its way out anyway.
    let size = serde_json::to_writer(&mut counter, result).map_or(0, |()| counter.0);
    if size > limit {
        Err(CallError::TooLarge { size, limit })
    } else {
        Ok(())
    }
}

/// How long an approval request may wait for the user.
pub const APPROVAL_TIMEOUT: Duration = Duration::from_secs(300);

/// `ask`: elicits approval from the calling client when it declared elicitation: sent to a
/// 2025-era session, asked in an input round of a 2026-07-28 call; otherwise the call is
/// denied.
pub async fn ask(
    call: &ToolCall,
    reason: &str,
    cancel: &CancellationToken,
) -> Result<(), CallError> {
    let name = &call.entry.exposed;
    // A 2026-07-28 call asks through its input rounds ([`crate::rounds`]), with the
    // capabilities its request declared; a 2025-era session is sent the request.
    let rounds = call
        .client
        .as_ref()
        .and_then(|c| c.rounds.as_ref())
        .filter(|sink| sink.declared(Ask::Elicitation));
    let modern = call.client.as_ref().is_some_and(|c| c.rounds.is_some());
    let client = call
        .client
        .as_ref()
        .and_then(|c| c.reach.peer())
        .filter(|peer| {
            peer.peer_info()
                .is_some_and(|info| info.capabilities.elicitation.is_some())
        })
        .filter(|_| !modern);
    if rounds.is_none() && client.is_none() {
        return Err(CallError::Denied {
            reason: format!(
                "tool \"{name}\" requires approval, but no approval channel is available"
            ),
            code: DENIED,
        });
    }
    let request = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!("Allow tool \"{name}\"? {reason}"),
        requested_schema: ElicitationSchema::new(Default::default()),
    };
    let cancelled = || CallError::Denied {
        reason: format!("approval for tool \"{name}\" was cancelled"),
        code: DENIED,
    };
    let asking = async {
        match (rounds, client) {
            (Some(sink), _) => {
                let input = InputRequest::Elicitation(ElicitRequest::new(request));
                let value = sink
                    .ask(Ask::Elicitation, input)
                    .await
                    .map_err(ServiceError::McpError)?;
                serde_json::from_value::<ElicitResult>(value).map_err(|e| {
                    ServiceError::McpError(rmcp::model::ErrorData::internal_error(
                        e.to_string(),
                        None,
                    ))
                })
            }
            (None, Some(client)) => client.create_elicitation(request).await,
            (None, None) => Err(ServiceError::UnexpectedResponse),
        }
    };
    let answer = tokio::select! {
        // The user answered (or the request failed).
        answer = asking => answer,
        // Nobody answered in time: an approval cannot hold a call forever.
        () = tokio::time::sleep(APPROVAL_TIMEOUT) => return Err(cancelled()),
        // The client cancelled the call meanwhile.
        () = cancel.cancelled() => return Err(cancelled()),
    };
    match answer {
        Ok(answer) => match answer.action {
            ElicitationAction::Accept => Ok(()),
            ElicitationAction::Decline => Err(CallError::Denied {
                reason: format!("the user rejected tool \"{name}\""),
                code: DENIED,
            }),
            _ => Err(CallError::Denied {
                reason: format!("approval for tool \"{name}\" was cancelled"),
                code: DENIED,
            }),
        },
        Err(error) => {
            tracing::warn!(%error, tool = %name, "elicitation failed; denying");
            Err(CallError::Denied {
                reason: format!("approval for tool \"{name}\" was cancelled"),
                code: DENIED,
            })
        }
    }
}
