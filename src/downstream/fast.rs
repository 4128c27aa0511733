//! The stdio fast path: `tools/call` read from its raw line and answered around the upstream's raw result; `tools/list` from cached text.
//!
//! rmcp decodes every line into its typed request enums and spawns three tasks per request;
//! for a forwarded call that was half of the gateway's cost (`BENCHMARKS.md`). [`FastPath`]
//! sits in the stdio transport's reader ([`super::lines::Lines`], a task of its own) and
//! takes a line before rmcp sees it when the line is:
//! - a `tools/call` request with a number or string id, `jsonrpc: "2.0"`, and params made of
//!   `name`, `arguments` (absent, `null` or an object) and at most a `_meta` holding only a
//!   `progressToken` and a `traceparent`; or
//! - the `notifications/cancelled` of such a request still in flight; or
//! - a `tools/list` with params absent or made of `cursor` and `_meta`: it is answered with
//!   the view's cached answer text ([`crate::registry::View::tools_answer`]), the very
//!   bytes rmcp's path would write after building and encoding the list on every request.
//!
//! A plain call (no escapes, an integer or string id: what SDKs write) is read by a byte
//! walk ([`scan`], [`crate::plain_json`]) that leaves the rest to serde; both read it alike.
//!
//! Everything else (another method, other params such as a task request, other `_meta`,
//! malformed params, anything before the handshake is done, every request of a session
//! opened with 2026-07-28's `server/discover` rather than `initialize`) goes to rmcp as
//! before, where it gets the same answer and the same errors as ever.
//!
//! A taken call runs through the same [`Pipeline`](crate::pipeline::Pipeline) as any other
//! (masks, validation, hooks, timeouts, retry, drain, audit, metrics), asking for its result
//! raw: a stdio upstream's answer then comes back as the line it was
//! ([`crate::upstream::raw`]) and is written to the client around the upstream's bytes. The
//! answer is written as rmcp's typed path would write it: a result for a client of
//! 2026-07-28 or later carries `resultType`, one for an older client does not; what rmcp
//! would have to change otherwise (a non-object `structuredContent` for an older client, a
//! result without `content`), a decoded result (a stage read it, or an HTTP upstream) and
//! every error are written from rmcp's own types, with rmcp's own rules for the client's
//! protocol version. A request that reuses the id of one in flight is refused as
//! [`super::guard`] refuses it; a cancelled request gets no answer, as in rmcp.
//!
//! One difference is deliberate: a raw result goes out with the upstream's own bytes (key
//! order, escapes, fields rmcp does not model) where the typed path re-encodes it. For an
//! rmcp upstream the bytes are the same (`tests/fast_path.rs` compares them).

use std::{
    borrow::Cow,
    sync::{Arc, OnceLock, Weak},
    time::Duration,
};

use rmcp::{
    RoleServer,
    model::{
        ErrorCode, ErrorData, JsonObject, JsonRpcMessage, ProgressToken, RequestId, ServerResult,
    },
    service::{Peer, TxJsonRpcMessage},
};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

pub(crate) mod envelope;
mod ids;
pub(crate) mod scan;

pub use ids::IdsInFlight;
use ids::Taken;

use envelope::{CallParams, Envelope, Object, Params, is_object};

use super::{
    CallRequest, GatewayService,
    guard::{TOOLS_CALL, duplicate_id},
    lines::{Intercept, WriteLine},
};
use crate::{pipeline::Answer, relay::Reach};

/// How long a stopping session waits for its fast-path tasks (their calls were drained
/// before; this bounds only the writing of their answers).
const STOP_WAIT: Duration = Duration::from_secs(1);

/// The fast path of one stdio session (see the module doc).
pub struct FastPath {
    me: Weak<FastPath>,
    service: GatewayService,
    writer: Arc<dyn WriteLine>,
    /// Set once the handshake is done; nothing is taken before.
    session: OnceLock<Session>,
    /// How many calls were taken: each taking's number.
    taken: std::sync::atomic::AtomicU64,
    /// The ids in flight, the calls taken and not yet answered among them; shared with rmcp's
    /// side of the session ([`super::guard::Guarded`]).
    ids: Arc<IdsInFlight>,
    tasks: TaskTracker,
    stop: CancellationToken,
}

struct Session {
    /// The client, through its rmcp peer: one for every call of the session.
    reach: Reach,
    /// The client speaks 2026-07-28 or later (how rmcp decides it, from its `initialize`).
    modern: bool,
}

impl FastPath {
    pub fn new(service: GatewayService, writer: Arc<dyn WriteLine>) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            service,
            writer,
            session: OnceLock::new(),
            taken: Default::default(),
            ids: Arc::default(),
            tasks: TaskTracker::new(),
            stop: CancellationToken::new(),
        })
    }

    /// The ids in flight, for rmcp's side of the session.
    pub fn ids(&self) -> Arc<IdsInFlight> {
        self.ids.clone()
    }

    /// The handshake is done: from now on calls are taken.
    /// A session opened without `initialize` (2026-07-28's `server/discover`) has no peer
    /// info: each of its requests names its protocol version in `_meta`, which rmcp checks,
    /// so the fast path stays off for it.
    pub fn start(&self, peer: Peer<RoleServer>) {
        let Some(info) = peer.peer_info() else {
            return;
        };
        let modern =
            info.protocol_version.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str();
        let _ = self.session.set(Session {
            reach: Reach::of(&peer),
            modern,
        });
    }

    /// Cancels what is still running (after the gateway's drain, normally nothing) and waits
    /// briefly for the tasks to end.
    pub async fn stop(&self) {
        self.stop.cancel();
        self.ids.cancel_all();
        self.tasks.close();
        let _ = tokio::time::timeout(STOP_WAIT, self.tasks.wait()).await;
    }

    fn take_call(&self, session: &Session, id: RequestId, params: CallParts) -> bool {
        let Some(me) = self.me.upgrade() else {
            return false;
        };
        // Not a child of `stop`: a child token costs two more locks of the session's shared
        // parent; `stop` cancels the calls in flight itself.
        let cancel = CancellationToken::new();
        let taking = self
            .taken
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let taken = Taken {
            taking,
            cancel: cancel.clone(),
        };
        if !self.ids.claim_as(&id, Some(taken)) {
            self.refuse_duplicate(session, id);
            return true;
        }
        // After the claim, which `stop` sees once it cancelled: a call taken as the session
        // stops is cancelled by one or the other.
        if self.stop.is_cancelled() {
            cancel.cancel();
        }
        let request = Request {
            id,
            taking,
            // stdio: no IdP tokens.
            call: params.into_request(cancel, None, None, None),
        };
        // Boxed, and built in its box: the call's whole state is kilobytes, which a task
        // would copy into place, and so would `Box::pin`.
        self.tasks
            .spawn(crate::pipeline::boxed(move || me.answer(request)));
        true
    }

    /// The client cancelled a request taken here: the call is cancelled (upstream too) and
    /// never answered.
    fn take_cancel(&self, params: Option<&RawValue>) -> bool {
        #[derive(Deserialize)]
        struct Cancelled {
            #[serde(rename = "requestId")]
            request_id: RequestId,
        }
        let Some(params) = params.filter(|p| is_object(p.get().as_bytes())) else {
            return false;
        };
        let Ok(cancelled) = serde_json::from_str::<Cancelled>(params.get()) else {
            return false;
        };
        match self.ids.cancel(&cancelled.request_id) {
            Some(cancel) => {
                cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// A `tools/list` whose params are absent or only a `cursor` (the list is never paged)
    /// and a `_meta`: answered with the view's cached text for the client's era.
    fn take_list(&self, session: &Session, id: RequestId, params: Option<&RawValue>) -> bool {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)] // read only to decide
        struct ListParams<'a> {
            cursor: Option<Cow<'a, str>>,
            #[serde(borrow, rename = "_meta")]
            meta: Option<&'a RawValue>,
        }
        if let Some(params) = params {
            if !is_object(params.get().as_bytes()) {
                return false;
            }
            match serde_json::from_str::<ListParams<'_>>(params.get()) {
                Ok(list) if list.meta.is_none_or(|m| is_object(m.get().as_bytes())) => {}
                _ => return false,
            }
        }
        let me = match self.claim(session, &id) {
            Ok(me) => me,
            Err(taken) => return taken,
        };
        let modern = session.modern;
        self.tasks.spawn(async move {
            let answer = match me.service.settled().await {
                Ok(()) => {
                    let view = me.service.view();
                    super::faithful::tools_answer(&view, modern).map(|a| a.json.clone())
                }
                Err(error) => Err(error),
            };
            me.ids.release(&id);
            let line = match answer {
                Ok(json) => {
                    let mut line = Vec::with_capacity(json.len() + 64);
                    line.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
                    // A request id always serializes.
                    let _ = serde_json::to_writer(&mut line, &id);
                    line.extend_from_slice(br#","result":"#);
                    line.extend_from_slice(json.as_bytes());
                    line.extend_from_slice(b"}\n");
                    line
                }
                Err(error) => typed_line(id, Err(error), modern),
            };
            if let Err(error) = me.writer.write_line(line).await {
                tracing::debug!(%error, "could not write a list to the client");
            }
        });
        true
    }

    /// Claims request `id` for the fast path; `Err(true)` when it was in flight already
    /// (it is refused, as [`super::guard`] would), `Err(false)` when the session is ending.
    fn claim(&self, session: &Session, id: &RequestId) -> Result<Arc<Self>, bool> {
        let me = self.me.upgrade().ok_or(false)?;
        if !self.ids.claim(id) {
            self.refuse_duplicate(session, id.clone());
            return Err(true);
        }
        Ok(me)
    }

    /// Refuses a request whose id is in flight already, as [`super::guard`] would.
    fn refuse_duplicate(&self, session: &Session, id: RequestId) {
        let line = typed_line(id.clone(), Err(duplicate_id(&id)), session.modern);
        let writer = self.writer.clone();
        // `take` cannot wait: written from a task.
        self.tasks.spawn(async move {
            if let Err(error) = writer.write_line(line).await {
                tracing::debug!(%error, "could not refuse a duplicate id");
            }
        });
    }

    async fn answer(self: Arc<Self>, request: Request) {
        let Some(session) = self.session.get() else {
            return;
        };
        let outcome = self.service.call_answer(&session.reach, request.call).await;
        // Cancelled by the client (its id may be in use again): no answer, as rmcp.
        if !self.ids.finish(&request.id, request.taking) {
            return;
        }
        let line = answer_line(request.id, outcome, session.modern);
        self.service.gateway.pipeline.metrics.count_fast_path_call();
        if let Err(error) = self.writer.write_line(line).await {
            tracing::debug!(%error, "could not write an answer to the client");
        }
    }
}

/// The client's answer to a call taken by a fast path: around the upstream's bytes when the
/// result stayed raw and rmcp would write it unchanged, else from rmcp's types.
pub(crate) fn answer_line(
    id: RequestId,
    outcome: Result<Answer, ErrorData>,
    modern: bool,
) -> Vec<u8> {
    match outcome {
        Ok(Answer::Raw(raw)) => match raw.reply(&id, modern) {
            Some(line) => line,
            None => typed_line(
                id,
                raw.decode()
                    .map_err(crate::pipeline::CallError::Upstream)
                    .or_else(crate::error::into_mcp),
                modern,
            ),
        },
        Ok(answer @ (Answer::Decoded(_) | Answer::Task { .. })) => {
            typed_line(id, answer.decode().or_else(crate::error::into_mcp), modern)
        }
        Err(error) => typed_line(id, Err(error), modern),
    }
}

/// The walk against serde over one message, for `examples/fuzz.rs`: whatever
/// [`CallParts::walk`] takes, [`CallParts::peek_by_serde`] must read the same (the walk's
/// promise, see [`scan`]). `Err` shows both readings.
#[doc(hidden)]
pub fn walk_against_serde(message: &[u8]) -> Result<(), String> {
    let serde = CallParts::peek_by_serde(message);
    match CallParts::walk(message) {
        Some(walked) if Some(&walked) != serde.as_ref() => {
            Err(format!("the walk read {walked:?}, serde {serde:?}"))
        }
        _ => Ok(()),
    }
}

/// A `tools/call` a fast path may take, read from its params (see the module doc for which).
#[derive(Debug, PartialEq)]
pub(crate) struct CallParts {
    name: String,
    arguments: Option<JsonObject>,
    progress: Option<ProgressToken>,
    /// `_meta.traceparent` when there is one, read (unreadable is `Some(None)`).
    traceparent: Option<Option<crate::telemetry::Traceparent>>,
}

impl CallParts {
    /// `None` leaves the request to rmcp: params not an object, other keys, other `_meta`.
    fn parse(params: Params<'_>) -> Option<Self> {
        let params = match params {
            Params::Call(params) => params,
            // Before the method: read now.
            Params::Raw(raw) => {
                serde_json::from_str::<Object<CallParams<'_>>>(raw.get())
                    .ok()?
                    .0
            }
            Params::Absent => return None,
        };
        let (progress, traceparent) = match params.meta {
            Some(Object(meta)) => (
                meta.progress_token,
                // Unreadable is absent, as on the typed path: the call starts a trace.
                meta.traceparent
                    .as_deref()
                    .map(crate::telemetry::Traceparent::parse),
            ),
            None => (None, None),
        };
        Some(Self {
            name: params.name.into_owned(),
            arguments: params.arguments,
            progress,
            traceparent,
        })
    }

    /// A whole plain message (an HTTP POST body), read by the walk alone ([`scan`]): `Some`
    /// for a `tools/call` request with a number or string id, `jsonrpc: "2.0"` and params
    /// [`CallParts::parse`] takes, written without escapes. A call that is not plain is
    /// `None` here, and [`peek_by_serde`](Self::peek_by_serde) may still take it.
    pub(crate) fn walk(message: &[u8]) -> Option<(RequestId, Self)> {
        scan::call(message)
    }

    /// Either reading, as the HTTP front tries them.
    #[cfg(test)]
    fn peek(message: &[u8]) -> Option<(RequestId, Self)> {
        Self::walk(message).or_else(|| Self::peek_by_serde(message))
    }

    /// A whole message read by serde: what [`walk`](Self::walk) takes and more (escapes,
    /// params before the method).
    pub(crate) fn peek_by_serde(message: &[u8]) -> Option<(RequestId, Self)> {
        let envelope = Envelope::read(message)?;
        if envelope.jsonrpc != "2.0" || envelope.method.as_deref() != Some(TOOLS_CALL) {
            return None;
        }
        Some((envelope.id?, Self::parse(envelope.params)?))
    }

    /// Whether the client asked for progress.
    pub(crate) fn wants_progress(&self) -> bool {
        self.progress.is_some()
    }

    /// The request for the pipeline, as the `call_tool` of [`GatewayService`] reads it:
    /// `header_traceparent` (HTTP's `traceparent` header) counts when `_meta` has none;
    /// `progress_stream` is where progress goes instead of the session's peer.
    pub(super) fn into_request(
        self,
        cancel: CancellationToken,
        header_traceparent: Option<&str>,
        subject: Option<Arc<str>>,
        progress_stream: Option<crate::relay::NoticeStream>,
    ) -> CallRequest {
        let traceparent = match self.traceparent {
            Some(read) => read,
            None => header_traceparent.and_then(crate::telemetry::Traceparent::parse),
        };
        CallRequest {
            name: self.name,
            arguments: self.arguments,
            progress: self.progress,
            progress_stream,
            cancel,
            traceparent,
            subject,
        }
    }
}

/// The request id of a `notifications/cancelled` message (an HTTP POST body).
pub(crate) fn peek_cancel(message: &[u8]) -> Option<RequestId> {
    #[derive(Deserialize)]
    struct Cancelled {
        #[serde(rename = "requestId")]
        request_id: RequestId,
    }
    let envelope = Envelope::read(message)?;
    if envelope.jsonrpc != "2.0"
        || envelope.id.is_some()
        || envelope.method.as_deref() != Some("notifications/cancelled")
    {
        return None;
    }
    let params = envelope
        .params
        .raw()
        .filter(|p| is_object(p.get().as_bytes()))?;
    serde_json::from_str::<Cancelled>(params.get())
        .ok()
        .map(|c| c.request_id)
}

impl Intercept for FastPath {
    fn take(&self, line: &[u8]) -> bool {
        let Some(session) = self.session.get() else {
            return false;
        };
        if let Some((id, call)) = scan::call(line) {
            return self.take_call(session, id, call);
        }
        let Some(envelope) = Envelope::read(line) else {
            return false;
        };
        if envelope.jsonrpc != "2.0" {
            return false;
        }
        match (envelope.method.as_deref(), envelope.id) {
            (Some(TOOLS_CALL), Some(id)) => match CallParts::parse(envelope.params) {
                Some(call) => self.take_call(session, id, call),
                None => false,
            },
            (Some("tools/list"), Some(id)) => self.take_list(session, id, envelope.params.raw()),
            (Some("notifications/cancelled"), None) => self.take_cancel(envelope.params.raw()),
            _ => false,
        }
    }
}

struct Request {
    id: RequestId,
    taking: u64,
    call: CallRequest,
}

/// An answer written from rmcp's types, by rmcp's rules for the client's protocol version
/// (see `ServerHandler::handle_request` in rmcp).
fn typed_line(
    id: RequestId,
    outcome: Result<rmcp::model::CallToolResult, ErrorData>,
    modern: bool,
) -> Vec<u8> {
    let message: TxJsonRpcMessage<RoleServer> = match outcome {
        Ok(result) => {
            let mut result = ServerResult::CallToolResult(result);
            if modern {
                result.fill_missing_cache_hints();
            } else {
                result.strip_result_type_for_legacy_peer();
                result.strip_non_object_output_for_legacy_peer();
            }
            JsonRpcMessage::response(result, id)
        }
        Err(mut error) => {
            if modern && error.code == ErrorCode::RESOURCE_NOT_FOUND {
                error.code = ErrorCode::INVALID_PARAMS;
            }
            JsonRpcMessage::error(error, Some(id))
        }
    };
    let mut line = encoded(message);
    line.push(b'\n');
    line
}

/// An answer as JSON; one that cannot be encoded becomes the internal error that says so, to
/// the same id.
pub(crate) fn encoded(message: TxJsonRpcMessage<RoleServer>) -> Vec<u8> {
    match serde_json::to_vec(&message) {
        Ok(json) => json,
        Err(error) => {
            tracing::warn!(%error, "could not encode an answer");
            let error =
                ErrorData::internal_error(format!("could not encode the answer: {error}"), None);
            let id = match message {
                JsonRpcMessage::Response(response) => Some(response.id),
                JsonRpcMessage::Error(error) => error.id,
                _ => None,
            };
            serde_json::to_vec(&TxJsonRpcMessage::<RoleServer>::error(error, id))
                .unwrap_or_default()
        }
    }
}

#[cfg(test)]
mod tests;
