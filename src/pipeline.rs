//! The call pipeline: the one entry point every `tools/call` goes through.
//!
//! Today: resolve the name in the caller's view, then dispatch to the owning upstream. The
//! hook pipeline (argument validation, pre gates, around wrappers, post hooks) slots in
//! between those two steps without changing callers.

use std::sync::Arc;

use rmcp::model::{CallToolResult, JsonObject};

use crate::{
    registry::View,
    upstream::{CallContext, UpstreamError, Upstreams},
};

/// One call as the downstream received it.
pub struct Call {
    pub name: String,
    pub arguments: Option<JsonObject>,
    pub context: CallContext,
}

#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Not in the caller's view: unknown, or hidden from this caller (indistinguishable).
    #[error("unknown tool \"{0}\"")]
    UnknownTool(String),
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
}

impl CallError {
    /// Stable machine code.
    pub fn code(&self) -> &'static str {
        match self {
            CallError::UnknownTool(_) => "UNKNOWN_TOOL",
            CallError::Upstream(error) => error.code(),
        }
    }
}

/// Runs calls against the upstreams.
pub struct Pipeline {
    upstreams: Arc<Upstreams>,
}

impl Pipeline {
    pub fn new(upstreams: Arc<Upstreams>) -> Self {
        Self { upstreams }
    }

    /// Resolves `call.name` in `view` and forwards it; `view` is the caller's, so listing and
    /// dispatch agree.
    #[tracing::instrument(level = "debug", skip_all, fields(tool = %call.name))]
    pub async fn execute(&self, view: &View, call: Call) -> Result<CallToolResult, CallError> {
        let entry = view
            .get(&call.name)
            .ok_or_else(|| CallError::UnknownTool(call.name.clone()))?;
        let upstream =
            self.upstreams
                .get(&entry.server)
                .ok_or_else(|| UpstreamError::Unavailable {
                    server: entry.server.clone(),
                    reason: "not configured".into(),
                })?;
        Ok(upstream
            .call(&entry.upstream_name, call.arguments, call.context)
            .await?)
    }
}
