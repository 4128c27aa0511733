//! The POST body before rmcp sees it: read within a deadline and a size cap, its JSON-RPC
//! envelope peeked for the checks of [`guard`](crate::downstream::guard), and the ids in
//! flight per session.

use std::{
    collections::{HashMap, HashSet},
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard},
    task::{Context, Poll},
    time::Duration,
};

use axum::{
    body::{Body, Bytes},
    http::{StatusCode, header::CONTENT_TYPE},
    response::{IntoResponse, Response},
};
use http_body_util::BodyExt;
use rmcp::model::{ErrorData, JsonRpcError, RequestId};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::auth::Refusal;
use crate::downstream::guard::call_params_problem;

/// Largest POST body read (rmcp's own default), or `max_message_bytes` if that is smaller
/// ([`body_cap`]).
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// The cap on a POST body: 4 MiB, or `max_message_bytes` if smaller. A listener that many
/// sessions share keeps its own smaller cap even when messages may be larger over stdio.
pub fn body_cap(max_message_bytes: usize) -> usize {
    MAX_BODY_BYTES.min(max_message_bytes)
}

/// Reads the whole body within `deadline` and `cap` bytes: 408 or 413 otherwise, so a slow
/// or endless body cannot hold a connection and a buffer forever.
///
/// A body over the cap is read on (and dropped) up to [`DRAIN_BYTES`] more, for at most
/// [`DRAIN_TIME`], before the 413 goes out: a client still writing its body when the answer
/// came would otherwise see its connection reset (a broken pipe) rather than the 413.
pub async fn read_body(body: Body, deadline: Duration, cap: usize) -> Result<Bytes, Refusal> {
    let mut body = body;
    // A body of one frame (the usual) is kept as it came, without a copy.
    let mut first: Option<Bytes> = None;
    let mut collected: Vec<u8> = Vec::new();
    let reading = async {
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|error| {
                Refusal::new(
                    StatusCode::BAD_REQUEST,
                    format!("could not read the request body: {error}"),
                )
            })?;
            // Trailers carry nothing a JSON-RPC message needs.
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let held = first.as_ref().map_or(0, Bytes::len) + collected.len();
            if held + data.len() > cap {
                return Ok(false);
            }
            match first.take() {
                None if collected.is_empty() => first = Some(data),
                earlier => {
                    if let Some(earlier) = earlier {
                        collected.extend_from_slice(&earlier);
                    }
                    collected.extend_from_slice(&data);
                }
            }
        }
        Ok(true)
    };
    let whole = match tokio::time::timeout(deadline, reading).await {
        Ok(Ok(whole)) => whole,
        Ok(Err(refusal)) => return Err(refusal),
        Err(_) => {
            return Err(Refusal::new(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within {}s",
                    deadline.as_secs()
                ),
            ));
        }
    };
    if whole {
        return Ok(first.unwrap_or_else(|| Bytes::from(collected)));
    }
    drop((first, collected));
    let draining = async {
        let mut drained = 0usize;
        while drained < DRAIN_BYTES
            && let Some(Ok(frame)) = body.frame().await
        {
            drained += frame.data_ref().map_or(0, |data| data.len());
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIME, draining).await;
    Err(Refusal::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the request body exceeds {cap} bytes"),
    ))
}

/// How much of a body over the cap is read and dropped before the 413 (see [`read_body`]).
const DRAIN_BYTES: usize = 8 * 1024 * 1024;
/// How long that may take.
const DRAIN_TIME: Duration = Duration::from_secs(1);

/// Whether the request says its body is JSON (`application/json`, parameters aside), as rmcp
/// checks it.
pub fn is_json(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            let essence = value.split_once(';').map_or(value, |(essence, _)| essence);
            essence.trim().eq_ignore_ascii_case("application/json")
        })
}

/// The parts of one JSON-RPC message the checks need; the rest stays unparsed.
#[derive(Deserialize)]
pub struct Envelope {
    pub id: Option<RequestId>,
    pub method: Option<String>,
    pub params: Option<Box<RawValue>>,
}

impl Envelope {
    /// `None` for anything that is not one JSON object (a batch, broken JSON): rmcp refuses
    /// those, and the HTTP front says why.
    pub fn peek(body: &[u8]) -> Option<Self> {
        // serde would also read a struct from an array (`[1, "tools/call", {}]`).
        let first = body.iter().find(|b| !b.is_ascii_whitespace())?;
        if *first != b'{' {
            return None;
        }
        serde_json::from_slice(body).ok()
    }

    /// What is wrong with a `tools/call`'s params ([`call_params_problem`]); `None` for params
    /// too deep to decode here, which rmcp refuses on its own.
    pub fn call_params_problem(&self) -> Option<String> {
        let params = match &self.params {
            Some(raw) => Some(serde_json::from_str(raw.get()).ok()?),
            None => None,
        };
        call_params_problem(params.as_ref())
    }

    /// The id and method of a request (notifications and responses have no method or id).
    pub fn request(&self) -> Option<(&RequestId, &str)> {
        Some((self.id.as_ref()?, self.method.as_deref()?))
    }
}

/// A JSON-RPC error answer to one request, as rmcp would send it (HTTP 200, JSON): the
/// HTTP request was fine, the JSON-RPC request was not.
pub fn jsonrpc_error(id: RequestId, error: ErrorData) -> Response {
    jsonrpc_refusal(StatusCode::OK, Some(id), error)
}

/// A JSON-RPC error answer with this HTTP status; `id` `None` is null (no readable id).
pub fn jsonrpc_refusal(status: StatusCode, id: Option<RequestId>, error: ErrorData) -> Response {
    let body = serde_json::to_vec(&JsonRpcError::new(id, error)).unwrap_or_default();
    (status, [(CONTENT_TYPE, "application/json")], body).into_response()
}

/// Request ids in flight, per MCP session.
///
/// A session's set is kept while the session makes calls, not made again for each: a claim
/// holds its session's set, so that releasing it is one lock of that set and one hash of the
/// id, with nothing allocated or freed (a set per claim, removed when emptied, was five
/// SipHash lookups and three allocations a call). Sets no claim holds are swept when the map
/// has doubled since the last sweep (session ids come from clients: unknown ones must not
/// pile up).
#[derive(Default)]
pub struct InFlight {
    sessions: Mutex<Sessions>,
}

#[derive(Default)]
struct Sessions {
    ids: HashMap<Box<str>, Arc<SessionIds>>,
    /// The map's size after the last sweep.
    swept: usize,
}

type SessionIds = Mutex<HashSet<RequestId>>;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Fewest sessions before a sweep: a few idle sessions are not worth one.
const SWEEP_FROM: usize = 64;

impl InFlight {
    /// Marks `id` in flight on `session`; `None` when it already is.
    pub fn begin(&self, session: &str, id: &RequestId) -> Option<Claim> {
        let ids = {
            let mut sessions = lock(&self.sessions);
            match sessions.ids.get(session) {
                Some(ids) => ids.clone(),
                None => sessions.add(session),
            }
        };
        if !lock(&ids).insert(id.clone()) {
            return None;
        }
        Some(Claim {
            ids,
            id: id.clone(),
        })
    }

    #[cfg(test)]
    fn sessions_kept(&self) -> usize {
        lock(&self.sessions).ids.len()
    }
}

impl Sessions {
    fn add(&mut self, session: &str) -> Arc<SessionIds> {
        if self.ids.len() >= SWEEP_FROM.max(2 * self.swept) {
            // Under the map's lock no claim is being made; a set a claim holds is shared.
            self.ids
                .retain(|_, ids| Arc::strong_count(ids) > 1 || !lock(ids).is_empty());
            self.swept = self.ids.len();
        }
        let ids = Arc::<SessionIds>::default();
        self.ids.insert(session.into(), ids.clone());
        ids
    }
}

/// One id in flight; freed on drop (when its response body is finished or dropped).
pub struct Claim {
    ids: Arc<SessionIds>,
    id: RequestId,
}

impl Drop for Claim {
    fn drop(&mut self) {
        lock(&self.ids).remove(&self.id);
    }
}

/// `response` with `claim` held until its body is done, so the id stays taken while the
/// answer is still streaming (and, for a `tools/call`, a stopping server waits for it).
pub fn hold_until_sent<C: Send + Sync + Unpin + 'static>(response: Response, claim: C) -> Response {
    let (parts, body) = response.into_parts();
    Response::from_parts(
        parts,
        Body::new(Held {
            body,
            _claim: claim,
        }),
    )
}

/// A body and what it holds until hyper drops it (after its last frame, or at once when it is
/// empty); the body is dropped first, being the first field. Unlike `http_body_util`'s
/// `map_frame`, it keeps the body's size hint, so a whole JSON answer goes out with its
/// `Content-Length`, not chunked.
struct Held<C> {
    body: Body,
    _claim: C,
}

impl<C: Unpin> hyper::body::Body for Held<C> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_taken_per_session_until_released() {
        let in_flight = Arc::new(InFlight::default());
        let one = RequestId::Number(1);
        let claim = in_flight.begin("s1", &one).unwrap();
        assert!(in_flight.begin("s1", &one).is_none());
        assert!(in_flight.begin("s2", &one).is_some(), "another session");
        assert!(
            in_flight
                .begin("s1", &RequestId::String("1".into()))
                .is_some(),
            "\"1\" is not 1"
        );
        drop(claim);
        assert!(in_flight.begin("s1", &one).is_some());
    }

    #[test]
    fn sets_no_claim_holds_are_swept_as_sessions_pile_up() {
        let in_flight = InFlight::default();
        let one = RequestId::Number(1);
        let held = in_flight.begin("held", &one).unwrap();
        for n in 0..SWEEP_FROM - 1 {
            drop(in_flight.begin(&format!("gone-{n}"), &one));
        }
        assert_eq!(in_flight.sessions_kept(), SWEEP_FROM);
        // The next new session sweeps: only the held one is left, then the new one.
        drop(in_flight.begin("new", &one));
        assert_eq!(in_flight.sessions_kept(), 2);
        assert!(in_flight.begin("held", &one).is_none(), "still in flight");
        drop(held);
        assert!(in_flight.begin("held", &one).is_some());
        // The next sweep waits until the map doubles from what the last one left, at least
        // to the floor.
        for n in 0..SWEEP_FROM - 2 {
            drop(in_flight.begin(&format!("later-{n}"), &one));
        }
        assert_eq!(in_flight.sessions_kept(), SWEEP_FROM);
    }

    #[test]
    fn envelopes_peek_requests_only() {
        let call = Envelope::peek(
            br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x"}}"#,
        )
        .unwrap();
        assert_eq!(call.request().map(|(_, m)| m), Some("tools/call"));
        let note =
            Envelope::peek(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(note.request().is_none());
        assert!(Envelope::peek(b"[1,2]").is_none());
        assert!(Envelope::peek(br#"[1, "tools/call", {}]"#).is_none());
        assert!(Envelope::peek(b"{nope").is_none());
    }
}
