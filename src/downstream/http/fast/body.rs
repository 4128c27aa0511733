//! The response body of a call taken by the HTTP fast path: SSE events, and headers held back for the call's first event.

use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use axum::{
    body::{Body, Bytes},
    http::{HeaderValue, header},
    response::Response,
};
use rmcp::{
    RoleServer,
    model::{JsonRpcMessage, ServerNotification},
    service::TxJsonRpcMessage,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::heads;

/// How long a session's call may hold its response's headers back for its first event
/// ([`CallBody::respond`]): longer than a quick tool of a local upstream takes, too short for
/// a client to notice.
pub(super) const HEAD_WAIT: Duration = Duration::from_millis(5);

pub(in crate::downstream::http) type Answering =
    Pin<Box<dyn Future<Output = Option<Vec<u8>>> + Send>>;

/// The response body of one call: its progress, then its answer, as SSE events.
pub(in crate::downstream::http) struct CallBody {
    /// An event already taken (from `progress`, or by [`Self::respond`]), sent first.
    pub(in crate::downstream::http) first: Option<Bytes>,
    /// The call, until it is over.
    pub(in crate::downstream::http) call: Option<Answering>,
    /// The call is over: its answer (`None`: cancelled, no answer).
    pub(in crate::downstream::http) answer: Option<Option<Vec<u8>>>,
    pub(in crate::downstream::http) progress: Option<mpsc::Receiver<Box<ServerNotification>>>,
    pub(in crate::downstream::http) keep_alive: Duration,
    /// Armed while the call runs and nothing is sent.
    pub(in crate::downstream::http) idle: Option<Pin<Box<tokio::time::Sleep>>>,
    pub(in crate::downstream::http) done: bool,
    /// Cancelled when the client goes away before the answer (a 2026-07-28 request, as
    /// rmcp cancels its handler); `None`: the call runs on (a session's call, as rmcp's
    /// session worker lets it).
    pub(in crate::downstream::http) cancel_on_drop: Option<CancellationToken>,
}

impl CallBody {
    /// The response of a session's call, once the stream has its first event (the answer or
    /// a progress notice) or [`HEAD_WAIT`] has passed. The headers then go out in the same
    /// write as that event: sent on their own, as rmcp sends them when the call starts, they
    /// cost toolgate a write and the client a wake-up per call. A call slower than that gets
    /// its headers at [`HEAD_WAIT`], so that a client still learns soon that its request was
    /// taken. The wait ([`heads`]) begins only if the call's first poll brings no event:
    /// a call refused at once (unknown tool, invalid arguments) sets no timer. No keep-alive
    /// timer is armed while the headers wait: it starts with the stream.
    pub(in crate::downstream::http) async fn respond(
        mut self,
        heads: &heads::HeadWaits,
    ) -> Response {
        let mut wait = heads.wait();
        let first = std::future::poll_fn(|cx| match self.poll_event(cx, false) {
            Poll::Ready(event) => Poll::Ready(event),
            // `None`: the wait is over and the call still runs.
            Poll::Pending => Pin::new(&mut wait).poll(cx).map(|()| None),
        })
        .await;
        drop(wait);
        // `None` from the body: cancelled, the stream is over without an answer.
        self.first = first;
        self.into_response()
    }

    /// The response: `200` and the SSE stream, with the headers rmcp sends with one.
    pub(in crate::downstream::http) fn into_response(self) -> Response {
        let mut response = Response::new(Body::from_stream(self));
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
        response
    }
}

impl futures::Stream for CallBody {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.poll_event(cx, true).map(|event| event.map(Ok))
    }
}

impl CallBody {
    /// The next event; with `keep_alive`, an SSE comment after each quiet `keep_alive`.
    fn poll_event(&mut self, cx: &mut Context<'_>, keep_alive: bool) -> Poll<Option<Bytes>> {
        let this = self;
        // First even when done: [`Self::respond`] may have taken the answer itself.
        if let Some(first) = this.first.take() {
            return Poll::Ready(Some(first));
        }
        if this.done {
            return Poll::Ready(None);
        }
        if let Some(call) = &mut this.call
            && let Poll::Ready(answer) = call.as_mut().poll(cx)
        {
            this.call = None;
            this.answer = Some(answer);
        }
        if let Some(progress) = &mut this.progress {
            // Everything sent before the answer goes out before it.
            let next = if this.answer.is_some() {
                progress.try_recv().ok()
            } else {
                match progress.poll_recv(cx) {
                    Poll::Ready(next) => next,
                    Poll::Pending => None,
                }
            };
            if let Some(notice) = next {
                this.idle = None;
                return Poll::Ready(Some(notice_event(*notice)));
            }
        }
        if let Some(answer) = this.answer.take() {
            this.done = true;
            return Poll::Ready(answer.map(|line| event(&line)));
        }
        if !keep_alive {
            return Poll::Pending;
        }
        let keep_alive = this.keep_alive;
        let idle = this
            .idle
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(keep_alive)));
        if idle.as_mut().poll(cx).is_ready() {
            this.idle = None;
            return Poll::Ready(Some(Bytes::from_static(b":\n\n")));
        }
        Poll::Pending
    }
}

impl Drop for CallBody {
    /// The client went away before the answer: the call still runs to its end (and is
    /// audited), as rmcp's session worker lets it; cancelled first when `cancel_on_drop`
    /// says so.
    fn drop(&mut self) {
        if let Some(call) = self.call.take() {
            if let Some(cancel) = &self.cancel_on_drop {
                cancel.cancel();
            }
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(call);
            }
        }
    }
}

/// One SSE event carrying `json` (a JSON-RPC message; a trailing newline is left out). A
/// line break inside (JSON whitespace from an upstream) starts another `data:` line, which
/// the client joins back with a newline: the same JSON.
pub(in crate::downstream::http) fn event(json: &[u8]) -> Bytes {
    let json = json.strip_suffix(b"\n").unwrap_or(json);
    let mut out = Vec::with_capacity(json.len() + 9);
    for (n, piece) in json.split(|b| *b == b'\n' || *b == b'\r').enumerate() {
        if n > 0 {
            out.push(b'\n');
        }
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(piece);
    }
    out.extend_from_slice(b"\n\n");
    out.into()
}

/// A notification's event, as rmcp's peer writes it.
pub(in crate::downstream::http) fn notice_event(notice: ServerNotification) -> Bytes {
    let message: TxJsonRpcMessage<RoleServer> = JsonRpcMessage::notification(notice);
    match serde_json::to_vec(&message) {
        Ok(json) => event(&json),
        Err(error) => {
            tracing::debug!(%error, "could not encode a notification");
            Bytes::from_static(b":\n\n")
        }
    }
}
