//! What the around chain returns: a tool result decoded, or as the upstream wrote it.

use rmcp::model::CallToolResult;

use super::CallError;
use crate::upstream::raw::RawResult;

/// A call's result on its way back. The stdio fast path keeps it raw from the upstream to
/// the client; it is decoded only where a stage must read it (an `outputSchema` check, a
/// post hook) or a caller wants the typed result.
pub enum Answer {
    Decoded(CallToolResult),
    Raw(RawResult),
    /// The `CreateTaskResult` of a task-augmented call, as the upstream wrote it.
    Task {
        server: crate::config::ServerId,
        result: serde_json::Map<String, serde_json::Value>,
        /// Relays the task's progress to the client while kept.
        progress: Option<crate::upstream::ProgressRoute>,
    },
}

impl Answer {
    /// Whether the tool says it failed (`isError: true`).
    pub fn is_error(&self) -> bool {
        match self {
            Answer::Decoded(result) => result.is_error == Some(true),
            Answer::Raw(raw) => raw.is_error(),
            Answer::Task { .. } => false,
        }
    }

    /// The typed result; a raw one is decoded the way rmcp's client would.
    pub fn decode(self) -> Result<CallToolResult, CallError> {
        match self {
            Answer::Decoded(result) => Ok(result),
            Answer::Raw(raw) => Ok(raw.decode()?),
            Answer::Task { server, .. } => Err(CallError::Upstream(
                crate::upstream::UpstreamError::Protocol {
                    server,
                    detail: "a task was created where a tool result was expected".into(),
                },
            )),
        }
    }
}

impl From<CallToolResult> for Answer {
    fn from(result: CallToolResult) -> Self {
        Answer::Decoded(result)
    }
}
