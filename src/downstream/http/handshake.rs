//! The answer to `initialize` rewritten before it leaves: for what rmcp's typed capabilities cannot hold (the 2025-11-25 `tasks` capability, [`crate::downstream::tasks`]).
//!
//! The answer is small and rmcp ends its stream after it, so it is read whole (bounded in
//! size and time), each JSON-RPC response in it patched, and sent on. An answer that cannot
//! be read within the bounds is refused with a JSON-RPC error rather than sent unpatched.

use std::time::Duration;

use axum::{
    body::Body,
    http::{HeaderValue, StatusCode, header},
    response::Response,
};
use rmcp::model::ErrorData;
use serde_json::Value;

use super::envelope::jsonrpc_refusal;

/// Patches every JSON-RPC response in `response` (a JSON body or an SSE stream) with `patch`.
pub async fn patch(
    response: Response,
    patch: &(dyn Fn(&mut Value) + Send + Sync),
    wait: Duration,
    cap: usize,
) -> Response {
    let (mut parts, body) = response.into_parts();
    let bytes = match tokio::time::timeout(wait, axum::body::to_bytes(body, cap)).await {
        Ok(Ok(bytes)) => bytes,
        _ => {
            let error = ErrorData::internal_error(
                "toolgate could not read its own answer to the handshake",
                None,
            );
            return jsonrpc_refusal(StatusCode::INTERNAL_SERVER_ERROR, None, error);
        }
    };
    let sse = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let patched = match std::str::from_utf8(&bytes) {
        Ok(text) if sse => text
            .split_inclusive('\n')
            .map(|line| match line.strip_prefix("data:") {
                Some(data) => patch_data(data, patch).unwrap_or_else(|| line.to_owned()),
                None => line.to_owned(),
            })
            .collect::<String>()
            .into_bytes(),
        Ok(text) => patch_json(text.trim(), patch)
            .map(String::into_bytes)
            .unwrap_or_else(|| bytes.to_vec()),
        Err(_) => bytes.to_vec(),
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    if let Ok(length) = HeaderValue::from_str(&patched.len().to_string()) {
        parts.headers.insert(header::CONTENT_LENGTH, length);
    }
    Response::from_parts(parts, Body::from(patched))
}

/// One SSE `data:` line (its text after `data:`), patched, as a whole line again.
fn patch_data(data: &str, patch: &(dyn Fn(&mut Value) + Send + Sync)) -> Option<String> {
    let ending = &data[data.trim_end_matches(['\r', '\n']).len()..];
    let json = patch_json(data.trim(), patch)?;
    Some(format!("data: {json}{ending}"))
}

fn patch_json(text: &str, patch: &(dyn Fn(&mut Value) + Send + Sync)) -> Option<String> {
    let mut message: Value = serde_json::from_str(text).ok()?;
    message.get("result")?;
    patch(&mut message);
    serde_json::to_string(&message).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_responses_in_data_lines_are_patched() {
        let add = |message: &mut Value| message["result"]["x"] = Value::Bool(true);
        let line = patch_data(" {\"id\":1,\"result\":{}}\n", &add).unwrap();
        assert_eq!(line, "data: {\"id\":1,\"result\":{\"x\":true}}\n");
        assert!(patch_data(" {\"method\":\"n\"}\n", &add).is_none());
        assert!(patch_data(" not json\n", &add).is_none());
    }
}
