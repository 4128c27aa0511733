//! The HTTP fast path: a `tools/call` POST on a live 2025-era session answered beside rmcp's session worker, through the stdio fast path's pipeline entry.
//!
//! rmcp's `StreamableHttpService` decodes every POST into its typed enums, hands it to the
//! session's worker task, which hands it to the handler task, whose answer comes back the
//! same way and is framed as SSE (`BENCHMARKS.md`: 0.09× direct). [`FastSessions`] keeps,
//! per MCP session, what the call needs (the session's handler and rmcp peer); the front
//! ([`super::Front::serve`]) takes a POST here, after every check it makes for any request
//! (doors, profile and token, body limits, params, duplicate ids; a plain call, read by the
//! walk, has params that pass the params check by construction, which a test compares), when
//! all of these hold:
//! - `[gateway] fast_path` is on (the default; read at start);
//! - the body is one `tools/call` request that the stdio fast path would take
//!   ([`CallParts::walk`], else [`CallParts::peek_by_serde`]: `jsonrpc: "2.0"`, a number
//!   or string id, `name`, `arguments`, and a `_meta` of at most `progressToken` and
//!   `traceparent`), and no task request;
//! - it names (`Mcp-Session-Id`) a session of this profile whose handshake is over
//!   (`notifications/initialized` was handled) and that negotiated a version before
//!   2026-07-28;
//! - no pre gate could make the call ask its client, or the client declared no elicitation
//!   ([`Session::takes_calls`]): an approval's elicitation must ride the call's own stream,
//!   which rmcp arranges only for the calls it runs;
//! - its headers are ones rmcp would accept without a word: `Content-Type` JSON, an `Accept`
//!   listing `application/json` and `text/event-stream` without parameters, and no
//!   `MCP-Protocol-Version` or one of the known versions before 2026-07-28 (which carry no
//!   SEP-2243 standard headers to check).
//!
//! Everything else goes to rmcp as before, which answers it as it always did (a request the
//! fast path could have answered differently is never taken: the checks above only say when
//! rmcp would have nothing to object to). 2026-07-28 requests never have a session: those
//! are [`super::modern`]'s.
//!
//! A taken call runs [`GatewayService::call_answer`](super::super::GatewayService) (the
//! stdio fast path's entry: masks, validation, hooks, timeouts with upstream cancel, retry,
//! drain, audit, metrics) and is answered with [`answer_line`]. The response is what rmcp
//! sends for a call on a session: `200`, `text/event-stream`, the call's
//! `notifications/progress` (when the client sent a `progressToken`) and then the answer,
//! one `data:` event each, SSE comments as keep-alive while a call runs. Differences, by
//! choice (`BENCHMARKS.md`, "HTTP fast path"):
//! - the headers go out with the first event (the answer or a notice) when it comes within
//!   5 ms, in one write, else at 5 ms (timed by one task per front, [`heads`]); rmcp sends
//!   them as the call starts ([`CallBody::respond`]);
//! - no priming event and no event ids: the stream cannot be resumed with `Last-Event-ID`
//!   (rmcp keeps a call's events for 60 s so that a client whose connection broke can
//!   fetch them); a client that loses the connection loses that answer, as over stdio;
//! - the answer carries the upstream's own bytes, as over stdio.
//!
//! The client's `notifications/cancelled` for a call taken here (a POST of its own) is
//! taken too: the call is cancelled (upstream as well), its stream ends without an answer,
//! and the POST gets rmcp's `202`. A session closed by rmcp (`DELETE`, idle expiry, the
//! gateway stopping) leaves the map, and its calls here are cancelled as rmcp cancels its
//! own. rmcp expires a session that its worker has not heard from for `session_idle_secs`;
//! calls taken here do not reach the worker, so each one that starts or ends more than a
//! quarter of that after the last poke opens and closes an empty request stream on the
//! worker, which counts as activity.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, RwLock,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{
    body::Body,
    http::{HeaderMap, HeaderName, StatusCode, header},
    response::Response,
};
use rmcp::{
    RoleServer, model::RequestId, service::Peer,
    transport::streamable_http_server::session::local::LocalSessionHandle,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::{
    config::ProfileName,
    downstream::{
        GatewayService,
        fast::{CallParts, answer_line},
        guard::MAX_UNSENT_NOTIFICATIONS,
    },
    relay::Reach,
};

/// The header naming the protocol version of a request (a `HeaderName`: a `&str` is parsed
/// on every lookup).
const VERSION_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// W3C trace context, when `_meta` has none.
const TRACEPARENT_HEADER: HeaderName = HeaderName::from_static("traceparent");

/// The live sessions the fast path may answer for, by `Mcp-Session-Id`.
pub struct FastSessions {
    /// Created by rmcp, handshake not yet over: the worker's handle and the profile.
    // Session ids are rmcp's (random): foldhash, not SipHash, looked up on every call.
    pending: Mutex<crate::FastMap<Arc<str>, Pending>>,
    live: RwLock<crate::FastMap<Arc<str>, Arc<Session>>>,
    /// Between SSE comments while a call runs.
    keep_alive: Duration,
    /// How often the fast path tells a session's worker it is in use.
    poke_every: Duration,
    start: Instant,
    /// Ends the calls' waits for their first event ([`CallBody::respond`]).
    pub(super) heads: Arc<heads::HeadWaits>,
}

/// A session rmcp created whose handshake is not over yet.
struct Pending {
    profile: ProfileName,
    handle: LocalSessionHandle,
    /// Notified when the handler has registered it.
    initialized: Arc<tokio::sync::Notify>,
}

/// One session as the fast path needs it.
pub struct Session {
    id: Arc<str>,
    profile: ProfileName,
    service: GatewayService,
    /// The client, through its rmcp peer: one for every call of the session.
    reach: Reach,
    handle: LocalSessionHandle,
    /// Calls taken here and not yet answered: which taking (an id may come again once its
    /// call is cancelled) and what cancels it.
    calls: Mutex<HashMap<RequestId, (u64, CancellationToken)>>,
    taken: AtomicU64,
    /// Cancelled when rmcp closes the session.
    closed: CancellationToken,
    /// When the worker was last poked, in ms since [`FastSessions::start`].
    poked_at: AtomicU64,
    /// The client declared elicitation: a gate's `ask` would send it a request.
    elicits: bool,
}

impl FastSessions {
    /// `session_idle`: rmcp's idle expiry of a session; `keep_alive`: rmcp's SSE keep-alive;
    /// `stop`: the front's, which ends the task that times the calls' waits for their headers.
    pub fn new(session_idle: Duration, keep_alive: Duration, stop: CancellationToken) -> Arc<Self> {
        Arc::new(Self {
            pending: Mutex::default(),
            live: RwLock::default(),
            keep_alive,
            poke_every: (session_idle / 4).max(Duration::from_millis(10)),
            start: Instant::now(),
            heads: heads::HeadWaits::start(HEAD_WAIT, stop),
        })
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, crate::FastMap<Arc<str>, Pending>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// rmcp created session `id` of `profile` (its handshake is still to come).
    pub fn created(&self, id: &str, profile: &ProfileName, handle: LocalSessionHandle) {
        let pending = Pending {
            profile: profile.clone(),
            handle,
            initialized: Arc::default(),
        };
        self.pending().insert(id.into(), pending);
    }

    /// The handshake of session `id` is over (`notifications/initialized` was handled):
    /// from now on its calls may be taken. A session that negotiated 2026-07-28 or later is
    /// left to rmcp.
    pub fn initialized(&self, id: &str, service: GatewayService, peer: Peer<RoleServer>) {
        // Held until the session is live: whoever finds it no longer pending finds it live.
        let mut pending = self.pending();
        let Some(Pending {
            profile,
            handle,
            initialized,
        }) = pending.remove(id)
        else {
            return;
        };
        let legacy = peer.peer_info().is_some_and(|info| {
            info.protocol_version.as_str() < rmcp::model::ProtocolVersion::V_2026_07_28.as_str()
        });
        if legacy {
            self.go_live(id, profile, service, peer, handle);
        }
        drop(pending);
        // Whatever became of it, the handshake is over.
        initialized.notify_one();
    }

    fn go_live(
        &self,
        id: &str,
        profile: ProfileName,
        service: GatewayService,
        peer: Peer<RoleServer>,
        handle: LocalSessionHandle,
    ) {
        let elicits = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.elicitation.is_some());
        let session = Arc::new(Session {
            elicits,
            id: id.into(),
            profile,
            service,
            reach: Reach::of(&peer),
            handle,
            calls: Mutex::default(),
            taken: AtomicU64::new(0),
            closed: CancellationToken::new(),
            poked_at: AtomicU64::new(self.now_ms()),
        });
        self.live
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(session.id.clone(), session);
    }

    /// Waits (at most `limit`) until the handler has registered session `id` after its
    /// `notifications/initialized`, so that the client's first call, sent as soon as that
    /// notification is answered, already finds it. Returns at once for any other session.
    pub async fn until_initialized(&self, id: &str, limit: Duration) {
        let Some(initialized) = self.pending().get(id).map(|p| p.initialized.clone()) else {
            return;
        };
        // `notify_one` keeps a permit: a registration before this wait is not missed.
        let _ = tokio::time::timeout(limit, initialized.notified()).await;
    }

    /// rmcp closed session `id`: its calls here are cancelled.
    pub fn closed(&self, id: &str) {
        self.pending().remove(id);
        let session = self
            .live
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        if let Some(session) = session {
            session.closed.cancel();
        }
    }

    /// Between SSE comments while a call runs (rmcp's pace).
    pub(super) fn keep_alive(&self) -> Duration {
        self.keep_alive
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The live session `id` of `profile`, when the request's headers let the fast path
    /// answer it (module doc).
    pub fn session(
        &self,
        id: &str,
        profile: &ProfileName,
        headers: &HeaderMap,
    ) -> Option<Arc<Session>> {
        if !plain_headers(headers) {
            return None;
        }
        let live = self.live.read().unwrap_or_else(|p| p.into_inner());
        live.get(id).filter(|s| s.profile == *profile).cloned()
    }

    /// Takes the client's `notifications/cancelled` when it names a call taken here: the
    /// call is cancelled and never answered; `Some` is the POST's answer.
    pub fn cancel(&self, session: &Session, body: &[u8]) -> Option<Response> {
        let id = crate::downstream::fast::peek_cancel(body)?;
        let (_, cancel) = session.calls().remove(&id)?;
        cancel.cancel();
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::ACCEPTED;
        Some(response)
    }

    /// Call `id` of `session` (the front has checked and claimed it), registered for the
    /// client's cancel, as the body of its response: the call starts when the body is first
    /// polled, which [`CallBody::respond`] does.
    pub(super) fn call(
        self: &Arc<Self>,
        session: Arc<Session>,
        id: RequestId,
        call: CallParts,
        parts: &axum::http::request::Parts,
    ) -> CallBody {
        let cancel = session.closed.child_token();
        let taking = session.taken.fetch_add(1, Ordering::Relaxed);
        session.calls().insert(id.clone(), (taking, cancel.clone()));
        let (progress_tx, progress_rx) = if call.wants_progress() {
            let (tx, rx) = mpsc::channel(MAX_UNSENT_NOTIFICATIONS);
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let header_traceparent = parts
            .headers
            .get(TRACEPARENT_HEADER)
            .and_then(|v| v.to_str().ok());
        let subject = parts
            .extensions
            .get::<super::oauth::Subject>()
            .map(|s| s.0.clone());
        let request = call.into_request(cancel, header_traceparent, subject, progress_tx);
        self.poke_if_due(&session);
        let me = self.clone();
        let answer = move || async move {
            let outcome = session.service.call_answer(&session.reach, request).await;
            me.poke_if_due(&session);
            if !session.finish(&id, taking) {
                // Cancelled by the client: no answer, as in rmcp.
                return None;
            }
            session
                .service
                .gateway
                .pipeline
                .metrics
                .count_fast_path_call();
            Some(answer_line(id, outcome, false))
        };
        CallBody {
            first: None,
            call: Some(crate::pipeline::boxed(answer)),
            answer: None,
            progress: progress_rx,
            keep_alive: self.keep_alive,
            idle: None,
            done: false,
            cancel_on_drop: None,
        }
    }

    /// Tells the session's worker it is in use, at most every [`FastSessions::poke_every`]:
    /// an empty request stream opened and closed, from a task of its own.
    fn poke_if_due(&self, session: &Session) {
        let now = self.now_ms();
        let last = session.poked_at.load(Ordering::Relaxed);
        let every = u64::try_from(self.poke_every.as_millis()).unwrap_or(u64::MAX);
        if now.saturating_sub(last) < every
            || session
                .poked_at
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let handle = session.handle.clone();
        tokio::spawn(async move {
            match handle.establish_request_wise_channel().await {
                Ok(stream) => {
                    if let Some(id) = stream.http_request_id {
                        let _ = handle.close_request_wise_channel(id).await;
                    }
                }
                Err(error) => tracing::debug!(%error, "could not refresh an HTTP session"),
            }
        });
    }
}

impl Session {
    /// Whether a call of this session can be taken now: not when a pre gate could `ask`
    /// and the client would then be sent an elicitation. rmcp sends that request on the
    /// POST stream of the call it belongs to, which it knows only for the calls it runs
    /// itself; from here it would go to the session's GET stream, which a client need not
    /// open.
    pub fn takes_calls(&self) -> bool {
        !self.elicits || self.service.gateway.pipeline.rules().gates.is_empty()
    }

    fn calls(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, (u64, CancellationToken)>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The call `id` (this `taking` of it) is over; `false` when it was cancelled meanwhile.
    fn finish(&self, id: &RequestId, taking: u64) -> bool {
        let mut calls = self.calls();
        match calls.remove(id) {
            Some((t, _)) if t == taking => true,
            // Rare (cancelled, and the id reused): put back what was there.
            Some(other) => {
                calls.insert(id.clone(), other);
                false
            }
            None => false,
        }
    }
}

/// Whether rmcp would pass these headers of a POST on a session without a word (module doc).
fn plain_headers(headers: &HeaderMap) -> bool {
    if !super::envelope::is_json(headers) {
        return false;
    }
    let version_ok = match headers.get(VERSION_HEADER) {
        None => true,
        Some(value) => value.to_str().is_ok_and(|version| {
            version < rmcp::model::ProtocolVersion::V_2026_07_28.as_str()
                && rmcp::model::ProtocolVersion::KNOWN_VERSIONS
                    .iter()
                    .any(|known| known.as_str() == version)
        }),
    };
    version_ok && accepts_both(headers)
}

/// An `Accept` that plainly lists both JSON and SSE (no parameters, no weights: those are
/// left to rmcp).
pub(super) fn accepts_both(headers: &HeaderMap) -> bool {
    // What the SDKs send (the TypeScript and Python SDKs one order, rmcp the other),
    // compared whole: splitting and trimming each item cost more than the whole check.
    let mut values = headers.get_all(header::ACCEPT).iter();
    if let (Some(value), None) = (values.next(), values.next())
        && matches!(
            value.as_bytes(),
            b"application/json, text/event-stream" | b"text/event-stream, application/json"
        )
    {
        return true;
    }
    lists_both(headers)
}

/// [`accepts_both`] item by item.
fn lists_both(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        for item in value.split(',') {
            let item = item.trim();
            if item.contains(';') || item.contains('"') {
                return false;
            }
            json |= item.eq_ignore_ascii_case("application/json");
            sse |= item.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

mod body;
mod heads;

use body::HEAD_WAIT;
pub(super) use body::{CallBody, notice_event};
#[cfg(test)]
mod tests;
