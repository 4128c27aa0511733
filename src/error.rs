//! Stable error codes and their one mapping to MCP: a JSON-RPC error or an `isError` result.
//!
//! Clients and scripts match on the code, not the text: it goes in the result's
//! `_meta["toolgate/error"].code` (or the JSON-RPC error's `data.code`).

use rmcp::model::{CallToolResult, ContentBlock, ErrorData, MetaObject};
use serde_json::json;

use crate::{pipeline::CallError, upstream::UpstreamError};

/// Key of the error object in a failed result's `_meta`.
pub const META_KEY: &str = "toolgate/error";

/// The gateway is draining ([`crate::drain`]): a call that arrived then was not started, or
/// one still running at the end of the grace was cancelled.
pub const SHUTTING_DOWN: &str = "SHUTTING_DOWN";

/// An HTTP upstream with `auth` needs `toolgate login` (no token, a refused token that could
/// not be refreshed, or a scope not granted); the message names the server and the command.
pub const UPSTREAM_AUTH_REQUIRED: &str = "UPSTREAM_AUTH_REQUIRED";

/// Turns a failed call into what the client receives.
///
/// An unknown (or hidden) tool is a protocol error, `-32602`, as the MCP spec asks; an
/// upstream's own JSON-RPC error is relayed unchanged; everything else is a tool result with
/// `isError: true`, so the model reads why.
///
/// The failure is logged here, at debug, so that every path that answers one (rmcp's, the
/// fast paths', the exchanges' and the tasks') logs it the same way.
pub fn into_mcp(error: CallError) -> Result<CallToolResult, ErrorData> {
    let code = error.code();
    tracing::debug!(code, "{error}");
    match error {
        CallError::UnknownTool(_) | CallError::CodeOnly(_) => Err(ErrorData::invalid_params(
            error.to_string(),
            Some(json!({ "code": code })),
        )),
        CallError::CodeRun { kind, text } => {
            let mut result = error_result(code, text);
            if let Some(meta) = result.meta.as_mut() {
                meta.insert(META_KEY.to_owned(), json!({ "code": code, "kind": kind }));
            }
            Ok(result)
        }
        // A result, not a protocol error: the model reads why, and a client that retries
        // elsewhere keys on the code.
        CallError::ShuttingDown | CallError::CutShort(_) => {
            Ok(error_result(code, error.to_string()))
        }
        CallError::Upstream(UpstreamError::Rpc { error, .. }) => Err(error),
        CallError::Upstream(UpstreamError::Cancelled) => {
            // rmcp drops the response of a cancelled request, as the spec says; this never
            // reaches the client.
            Err(ErrorData::internal_error(
                error.to_string(),
                Some(json!({ "code": code })),
            ))
        }
        _ => Ok(error_result(code, error.to_string())),
    }
}

/// An `isError` result whose text is `message` and whose `_meta` carries `code`.
pub fn error_result(code: &str, message: String) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(message)]);
    let mut meta = MetaObject::new();
    meta.insert(META_KEY.to_owned(), json!({ "code": code }));
    result.meta = Some(meta);
    result
}

/// Turns a failed forwarded request other than `tools/call` (prompts, resources, completion,
/// logging level) into the JSON-RPC error the client receives: the upstream's own error
/// unchanged, else `-32603` naming the server, with the stable code in `data.code`.
pub fn request_failed(error: UpstreamError) -> ErrorData {
    let code = error.code();
    match error {
        UpstreamError::Rpc { error, .. } => error,
        other => ErrorData::internal_error(other.to_string(), Some(json!({ "code": code }))),
    }
}

/// Turns a refused or failed round of a 2026-07-28 multi round-trip request
/// ([`crate::rounds`]) into the JSON-RPC error the client receives: `-32602` for a
/// `requestState` or `inputResponses` toolgate cannot take, else `-32603`; the stable code
/// in `data.code`.
pub fn rounds_failed(error: crate::rounds::RoundsError) -> ErrorData {
    use crate::rounds::RoundsError;
    let data = Some(json!({ "code": error.code() }));
    match error {
        RoundsError::UnknownState
        | RoundsError::Mismatch { .. }
        | RoundsError::InvalidResponse { .. } => ErrorData::invalid_params(error.to_string(), data),
        _ => ErrorData::internal_error(error.to_string(), data),
    }
}
