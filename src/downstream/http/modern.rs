//! HTTP's modern fast path: a 2026-07-28 `tools/call` (no session) answered by toolgate's handler without rmcp's per-request service, as rmcp would answer it.
//!
//! rmcp serves each 2026-07-28 request on its own: it decodes the body into its typed enums,
//! serializes it again to check the SEP-2243 headers (looking the tool up through a handler
//! made for the purpose), then runs a one-shot service for it: a transport, a serve loop, a
//! peer with its channel, and four tasks (`BENCHMARKS.md`, "What a 2026-07-28 client costs
//! over HTTP"). The front ([`super::Front::serve`]) hands a POST here, after every check it
//! makes for any request (doors, profile and token, body limits), when all of these hold:
//! - `[gateway] fast_path` is on (the default; read at start);
//! - no `Mcp-Session-Id`;
//! - its headers are ones rmcp passes without a word: `Content-Type` JSON, an `Accept`
//!   listing `application/json` and `text/event-stream`, `MCP-Protocol-Version: 2026-07-28`,
//!   `Mcp-Method: tools/call` and `Mcp-Name` equal to the tool's name, each once (a name
//!   that would need SEP-2243's Base64 form is left to rmcp);
//! - the body is one `tools/call` request ([`ModernCall::read`]; walked when plain, else
//!   read by serde, to the same call: [`body`]): `jsonrpc: "2.0"`, a number
//!   or string id, and params made of `name`, `arguments` (absent, `null` or an object) and
//!   a `_meta` holding the protocol version `2026-07-28` and the client's capabilities (both
//!   required by that version), and at most its `clientInfo`, a `progressToken` and a
//!   `traceparent`; no other key anywhere, so no task, no retry of an input round, no
//!   per-request log level;
//! - the profile lists the tool, its input schema has no `x-mcp-header` annotation (whose
//!   `Mcp-Param-*` headers rmcp checks against the arguments), and it cannot run as a task
//!   (`execution.taskSupport` absent or `forbidden`: the Tasks extension's calls stay
//!   rmcp's).
//!
//! Everything else goes to rmcp as before, which answers it as it always did. A retry that
//! answers an input round (`requestState`, `inputResponses`) goes to rmcp and resumes the
//! exchange parked here: both paths park under the same owner (the profile and the
//! `Authorization` header).
//!
//! A taken call runs exactly what rmcp's path runs once the request is decoded: the
//! handler's 2026-07-28 `tools/call` ([`GatewayService::run_call_in_rounds`]: the exchange
//! that turns an upstream's requests into input rounds, then the pipeline with masks,
//! validation, hooks, timeouts, retry, drain, audit and metrics), on a handler and relay
//! session of its own, and rmcp's own last touches to the result (cache hints; the
//! 2026-07-28 code for a missing resource). A result that came raw from a stdio upstream,
//! which no stage read and rmcp would write unchanged, is written around the upstream's bytes
//! with `resultType` spliced in, as the stdio fast path writes it
//! ([`RawResult::reply`](crate::upstream::raw::RawResult::reply)); any other is written from
//! rmcp's types. The client is reached through the response
//! instead of an rmcp peer ([`Reach::Stream`]): the call's progress and the upstream's log
//! messages during it go there, in the order they were sent. The response is the one rmcp
//! gives: the answer as one JSON body with rmcp's HTTP status for it when it comes first;
//! else `200` and an SSE stream of what came before it, then the answer (no event ids:
//! rmcp keeps none for these requests either). A client that goes away before the answer
//! cancels the call, as in rmcp.

use std::time::Duration;

use axum::{
    body::Body,
    http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header},
    response::Response,
};
use rmcp::model::{
    CallToolResponse, ErrorCode, ErrorData, JsonRpcMessage, ProtocolVersion, RequestId,
    ServerResult,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::fast::{CallBody, accepts_both, notice_event};
use crate::downstream::fast::encoded;
use crate::{
    downstream::{
        GatewayService,
        guard::MAX_UNSENT_NOTIFICATIONS,
        rounds::{Asker, CallStep, RoundsCall, typed},
    },
    pipeline::Answer,
    registry::View,
    relay::Reach,
};
pub use body::walk_against_serde;

mod body;

const VERSION_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
const METHOD_HEADER: HeaderName = HeaderName::from_static("mcp-method");
const NAME_HEADER: HeaderName = HeaderName::from_static("mcp-name");
const TRACEPARENT_HEADER: HeaderName = HeaderName::from_static("traceparent");

/// A 2026-07-28 `tools/call` this path takes (module doc): a body its headers agree with.
pub(super) struct ModernCall(body::Body);

impl ModernCall {
    /// The call in `body`, when its headers and body are what this path takes (module doc,
    /// but for the tool's schema: [`Self::fits`]); `None` leaves the request to rmcp.
    pub(super) fn read(headers: &HeaderMap, body: &[u8]) -> Option<Self> {
        let version = ProtocolVersion::V_2026_07_28.as_str();
        if !super::envelope::is_json(headers)
            || !accepts_both(headers)
            || sole(headers, &VERSION_HEADER)? != version.as_bytes()
            || sole(headers, &METHOD_HEADER)? != b"tools/call"
        {
            return None;
        }
        let body = body::Body::read(body)?;
        let named = sole(headers, &NAME_HEADER)?;
        // `=?base64?…?=` is SEP-2243's wrapped form, which rmcp decodes: left to it.
        let wrapped = body.name.starts_with("=?") && body.name.ends_with("?=");
        if named != body.name.as_bytes() || wrapped {
            return None;
        }
        Some(Self(body))
    }

    /// Whether `view` lists the tool, with no `x-mcp-header` annotation in its input schema,
    /// and as a tool that cannot run as a task (such a call is rmcp's: the handler decides
    /// from the client's capabilities whether it becomes a task).
    pub(super) fn fits(&self, view: &View) -> bool {
        view.listed(&self.0.name).is_some_and(|entry| {
            !entry.policy.header_params
                && !matches!(
                    crate::downstream::tasks::task_support(&entry.extra),
                    "optional" | "required"
                )
        })
    }
}

/// The one value of header `name`; `None` when it is absent or given more than once.
fn sole<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Option<&'h [u8]> {
    let mut values = headers.get_all(name).iter();
    match (values.next(), values.next()) {
        (Some(value), None) => Some(value.as_bytes()),
        _ => None,
    }
}

/// Answers `call` with `service` (a handler of its own: the front has made its checks).
pub(super) async fn answer(
    service: GatewayService,
    call: ModernCall,
    parts: &axum::http::request::Parts,
    keep_alive: Duration,
) -> Response {
    let ModernCall(body::Body {
        id,
        name,
        arguments,
        progress,
        traceparent,
        capabilities,
    }) = call;
    let (stream, mut notices) = mpsc::channel(MAX_UNSENT_NOTIFICATIONS);
    let cancel = CancellationToken::new();
    let asker = Asker {
        owner: service.http_owner(&parts.headers),
        reach: Reach::Stream(stream),
        capabilities,
        ct: cancel.clone(),
    };
    let traceparent = traceparent.as_deref().or_else(|| {
        parts
            .headers
            .get(TRACEPARENT_HEADER)
            .and_then(|v| v.to_str().ok())
    });
    let request = RoundsCall {
        name,
        arguments,
        progress,
        progress_stream: None,
        traceparent: traceparent.and_then(crate::telemetry::Traceparent::parse),
        subject: parts
            .extensions
            .get::<super::oauth::Subject>()
            .map(|s| s.0.clone()),
    };
    let metrics = service.gateway.pipeline.metrics.clone();
    let mut work = crate::pipeline::boxed(move || async move {
        let outcome = service.modern_fast_call(request, asker).await;
        metrics.count_fast_path_call();
        answer_message(id, outcome)
    });
    // An answer sent after notices goes out on the stream, whatever its status would be.
    let on_stream = |(_, answer): (StatusCode, Vec<u8>)| answer;
    // The client going away before anything is sent cancels the call, as rmcp's path does.
    let gone = cancel.clone().drop_guard();
    // What was sent before the answer goes out before it: notices first.
    let first = tokio::select! {
        biased;
        notice = notices.recv() => notice,
        answer = &mut work => match notices.try_recv() {
            Ok(notice) => {
                let body = CallBody {
                    first: Some(notice_event(*notice)),
                    call: None,
                    answer: Some(Some(on_stream(answer))),
                    progress: Some(notices),
                    keep_alive,
                    idle: None,
                    done: false,
                    cancel_on_drop: None,
                };
                gone.disarm();
                return body.into_response();
            }
            Err(_) => {
                gone.disarm();
                return json(answer);
            }
        },
    };
    let Some(first) = first else {
        // Every sender is gone before the answer: cannot happen while the work holds one;
        // the answer is awaited all the same.
        let answer = work.await;
        gone.disarm();
        return json(answer);
    };
    gone.disarm();
    let answering = async move { Some(on_stream(work.await)) };
    CallBody {
        first: Some(notice_event(*first)),
        call: Some(Box::pin(answering)),
        answer: None,
        progress: Some(notices),
        keep_alive,
        idle: None,
        done: false,
        cancel_on_drop: Some(cancel),
    }
    .into_response()
}

/// The answer as rmcp's handler and serve loop write it for a 2026-07-28 request, and the
/// HTTP status rmcp gives it when it is all the response holds: around the upstream's bytes
/// when the result stayed raw and rmcp would write it unchanged, else from rmcp's types.
fn answer_message(id: RequestId, outcome: Result<CallStep, ErrorData>) -> (StatusCode, Vec<u8>) {
    let outcome = match outcome {
        Ok(CallStep::Done(Ok(Answer::Raw(raw)))) => match raw.reply(&id, true) {
            Some(mut line) => {
                // A line for stdio: the body has no line end.
                line.pop();
                return (StatusCode::OK, line);
            }
            None => typed(Ok(Answer::Raw(raw))).map(CallToolResponse::from),
        },
        Ok(CallStep::Done(answer)) => typed(answer).map(CallToolResponse::from),
        Ok(CallStep::Input(input)) => Ok(CallToolResponse::InputRequired(input)),
        Err(error) => Err(error),
    };
    let (status, message): (_, rmcp::service::TxJsonRpcMessage<rmcp::RoleServer>) = match outcome {
        Ok(response) => {
            let mut result = ServerResult::from(response);
            result.fill_missing_cache_hints();
            (StatusCode::OK, JsonRpcMessage::response(result, id))
        }
        Err(mut error) => {
            if error.code == ErrorCode::RESOURCE_NOT_FOUND {
                error.code = ErrorCode::INVALID_PARAMS;
            }
            (
                status_of(error.code),
                JsonRpcMessage::error(error, Some(id)),
            )
        }
    };
    (status, encoded(message))
}

/// The answer alone: one JSON body, with the status rmcp gives it.
fn json((status, answer): (StatusCode, Vec<u8>)) -> Response {
    let mut response = Response::new(Body::from(answer));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// rmcp's HTTP status for a 2026-07-28 request's error (its `jsonrpc_http_status`, for a
/// request whose `_meta` is well formed).
fn status_of(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(name: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert(VERSION_HEADER, HeaderValue::from_static("2026-07-28"));
        headers.insert(METHOD_HEADER, HeaderValue::from_static("tools/call"));
        headers.insert(NAME_HEADER, HeaderValue::from_str(name).unwrap());
        headers
    }

    const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"0"}}"#;

    fn body(params: &str) -> Vec<u8> {
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{{params}}}}}"#)
            .into_bytes()
    }

    #[test]
    fn a_plain_modern_call_is_taken() {
        let taken = ModernCall::read(
            &headers("e"),
            &body(&format!(r#""name":"e","arguments":{{"a":1}},{META}"#)),
        )
        .expect("taken");
        assert_eq!(taken.0.name, "e");
        assert_eq!(taken.0.id, RequestId::Number(1));
        let with_progress = body(&format!(
            r#""name":"e",{}"#,
            META.replace(r#""_meta":{"#, r#""_meta":{"progressToken":"p","#)
        ));
        assert!(ModernCall::read(&headers("e"), &with_progress).is_some());
    }

    #[test]
    fn anything_else_is_left_to_rmcp() {
        let plain = body(&format!(r#""name":"e",{META}"#));
        // Headers that do not match, or come twice.
        assert!(ModernCall::read(&headers("f"), &plain).is_none());
        let mut twice = headers("e");
        twice.append(METHOD_HEADER, HeaderValue::from_static("tools/call"));
        assert!(ModernCall::read(&twice, &plain).is_none());
        let mut old = headers("e");
        old.insert(VERSION_HEADER, HeaderValue::from_static("2025-11-25"));
        assert!(ModernCall::read(&old, &plain).is_none());
        let mut no_method = headers("e");
        no_method.remove(METHOD_HEADER);
        assert!(ModernCall::read(&no_method, &plain).is_none());
        // Bodies with more, or less, than this path reads.
        for params in [
            r#""name":"e""#.to_owned(),
            format!(r#""name":"e","requestState":"s",{META}"#),
            format!(r#""name":"e","task":{{}},{META}"#),
            format!(r#""name":"e","arguments":[1],{META}"#),
            format!(
                r#""name":"e",{}"#,
                META.replace(
                    r#""_meta":{"#,
                    r#""_meta":{"io.modelcontextprotocol/logLevel":"info","#
                )
            ),
            format!(
                r#""name":"e",{}"#,
                META.replace(r#""2026-07-28""#, r#""2025-11-25""#)
            ),
            format!(
                r#""name":"e",{}"#,
                META.replace(r#"clientCapabilities":{}"#, r#"clientCapabilities":[]"#)
            ),
        ] {
            assert!(
                ModernCall::read(&headers("e"), &body(&params)).is_none(),
                "{params}"
            );
        }
        assert!(
            ModernCall::read(
                &headers("=?x?="),
                &body(&format!(r#""name":"=?x?=",{META}"#))
            )
            .is_none()
        );
    }

    #[test]
    fn statuses_are_rmcps() {
        assert_eq!(
            status_of(ErrorCode::METHOD_NOT_FOUND),
            StatusCode::NOT_FOUND
        );
        assert_eq!(status_of(ErrorCode::INVALID_PARAMS), StatusCode::OK);
        assert_eq!(
            status_of(ErrorCode::HEADER_MISMATCH),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(status_of(ErrorCode::INTERNAL_ERROR), StatusCode::OK);
    }

    #[test]
    fn a_raw_result_is_written_as_the_typed_path_writes_it() {
        let id = || RequestId::Number(3);
        let raw = |result: &str| {
            Ok(CallStep::Done(Ok(Answer::Raw(
                crate::upstream::raw::RawResult::answered(result),
            ))))
        };
        let typed = |result: &str| {
            let raw = crate::upstream::raw::RawResult::answered(result);
            Ok(CallStep::Done(Ok(Answer::Decoded(raw.decode().unwrap()))))
        };
        // As rmcp writes them (the upstreams of the differential test are rmcp's): the same
        // bytes either way.
        for result in [
            // Plain: written around the upstream's bytes, `resultType` spliced in first.
            r#"{"content":[{"type":"text","text":"é"}],"isError":false}"#,
            r#"{"resultType":"complete","content":[]}"#,
            // Not plain (rmcp adds `content`): decoded and written from rmcp's types.
            r#"{"structuredContent":{"a":1}}"#,
        ] {
            let (status, body) = answer_message(id(), raw(result));
            assert_eq!(status, StatusCode::OK);
            assert_eq!(
                String::from_utf8(body).unwrap(),
                String::from_utf8(answer_message(id(), typed(result)).1).unwrap(),
                "{result}"
            );
        }
        // A plain result goes out as the upstream wrote it, escapes and all.
        let (_, body) = answer_message(id(), raw(r#"{"content":[],"x":"\u00e9"}"#));
        assert_eq!(
            String::from_utf8(body).unwrap(),
            r#"{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete","content":[],"x":"\u00e9"}}"#
        );
    }
}
