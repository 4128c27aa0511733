//! Why a call failed, each with its stable code.

use crate::upstream::UpstreamError;

#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Not in the caller's view: unknown, or hidden from this caller (indistinguishable).
    #[error("unknown tool \"{0}\"")]
    UnknownTool(String),
    /// In `code` mode only `run_code` is listed; the others are for programs.
    #[error("only run_code is callable directly; call {0} from inside a run_code program")]
    CodeOnly(String),
    /// A `run_code` program failed; `text` is what the model reads (kind, message, logs).
    #[error("{text}")]
    CodeRun { kind: &'static str, text: String },
    #[error("invalid arguments: {}", .0.join("; "))]
    InvalidArgs(Vec<String>),
    /// A gate said no (or a failing hook failed closed).
    #[error("Error: {reason}")]
    Denied { reason: String, code: &'static str },
    #[error("tool call timed out after {0}ms")]
    Timeout(u64),
    /// A post hook blocked the result; the feedback is what the model reads.
    #[error("{feedback}")]
    Blocked {
        feedback: String,
        code: &'static str,
    },
    #[error("invalid tool output: {}", .0.join("; "))]
    InvalidOutput(Vec<String>),
    #[error("tool result is {size} bytes, over the {limit}-byte limit")]
    TooLarge { size: usize, limit: usize },
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// The gateway is draining: the call was not started.
    #[error("the gateway is shutting down and takes no new calls")]
    ShuttingDown,
    /// The gateway is draining and cancelled the call upstream: it outlasted the grace, or a
    /// second stop signal came first.
    #[error("the gateway is shutting down: the call was cancelled {0}")]
    CutShort(CutBy),
}

/// What cut a drained call short, as its client reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutBy {
    /// The drain grace, in milliseconds, ran out.
    Grace(u64),
    /// A second SIGTERM or SIGINT ended the grace early.
    Signal,
}

impl std::fmt::Display for CutBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CutBy::Grace(ms) => write!(f, "at the end of the {ms}ms drain grace"),
            CutBy::Signal => {
                f.write_str("by a second stop signal, before the end of the drain grace")
            }
        }
    }
}

impl CallError {
    /// Stable machine code.
    pub fn code(&self) -> &'static str {
        match self {
            CallError::UnknownTool(_) | CallError::CodeOnly(_) => "UNKNOWN_TOOL",
            CallError::CodeRun { .. } => "CODE_RUN_FAILED",
            CallError::InvalidArgs(_) => "INVALID_ARGS",
            CallError::Denied { code, .. } | CallError::Blocked { code, .. } => code,
            CallError::Timeout(_) => "TOOL_TIMEOUT",
            CallError::InvalidOutput(_) => "INVALID_TOOL_OUTPUT",
            CallError::TooLarge { .. } => "RESULT_TOO_LARGE",
            CallError::Upstream(error) => error.code(),
            CallError::ShuttingDown | CallError::CutShort(_) => crate::error::SHUTTING_DOWN,
        }
    }

    /// Whether trying again could help: the upstream was unreachable or too slow.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            CallError::Timeout(_) | CallError::Upstream(UpstreamError::Unavailable { .. })
        )
    }
}
