//! Requests forwarded to one upstream as JSON and answered as JSON: the 2025-11-25 task methods and a task-augmented `tools/call`, which rmcp's typed client cannot carry (it knows only SEP-2663 tasks).
//!
//! A stdio server is asked over the raw path beside rmcp ([`super::raw`]), an HTTP server
//! with a request posted on rmcp's session ([`super::http_lists`]). The answer is the
//! server's own: its result object unchanged, or its JSON-RPC error as
//! [`UpstreamError::Rpc`]. Each request is bounded by `limit` (timeout and cancel); a stdio
//! request given up on is cancelled upstream with `notifications/cancelled`, an HTTP one by
//! dropping its POST.

use std::io::Write as _;

use rmcp::model::ErrorData;
use serde_json::{Map, Value};

use super::{Upstream, UpstreamError, lists::JsonLists, passthrough::Limit, raw::RawLink};

/// How long a `notifications/cancelled` for a request given up on may wait for the pipe.
const CANCEL_NOTICE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

impl Upstream {
    /// Sends `method` with `params` to this server and returns its result object as it came.
    pub async fn json_request(
        &self,
        method: &str,
        params: Map<String, Value>,
        limit: Limit,
    ) -> Result<Map<String, Value>, UpstreamError> {
        let json = self
            .read_link(|link| Some(link.json.clone()))
            .ok_or_else(|| self.not_connected())?;
        let _in_flight = self.in_flight_for(&limit);
        let answer = async {
            match &json {
                JsonLists::Stdio(link) => self.stdio_request(link, method, &params, &limit).await,
                JsonLists::Http(http) => match http
                    .request_with(method, params.clone(), Some(&self.stream_requests()))
                    .await
                {
                    Ok(answer) => self.answer_of(method, answer),
                    Err(reason) => Err(UpstreamError::Unavailable {
                        server: self.name.clone(),
                        reason,
                    }),
                },
                JsonLists::None => Err(UpstreamError::Protocol {
                    server: self.name.clone(),
                    detail: format!("{method} cannot be forwarded to this server"),
                }),
            }
        };
        tokio::select! {
            answer = tokio::time::timeout(limit.timeout, answer) => match answer {
                Ok(answer) => answer,
                Err(_) => Err(UpstreamError::Unavailable {
                    server: self.name.clone(),
                    reason: format!("{method}: no answer within {} ms", limit.timeout.as_millis()),
                }),
            },
            // The client cancelled (a stdio request tells the upstream on its own).
            () = limit.cancel.cancelled() => Err(UpstreamError::Cancelled),
        }
    }

    /// One request over the raw path; cancelled upstream when its future is dropped unanswered.
    async fn stdio_request(
        &self,
        link: &RawLink,
        method: &str,
        params: &Map<String, Value>,
        limit: &Limit,
    ) -> Result<Map<String, Value>, UpstreamError> {
        let closed = || UpstreamError::Unavailable {
            server: self.name.clone(),
            reason: format!("{method}: the connection closed"),
        };
        let mut waiting = link.expect(false).ok_or_else(closed)?;
        let id = waiting.id;
        let mut line = Vec::with_capacity(128);
        let _ = write!(line, r#"{{"jsonrpc":"2.0","id":"tg-{id}","method":"#);
        let written = serde_json::to_writer(&mut line, method)
            .and_then(|()| {
                line.extend_from_slice(br#","params":"#);
                serde_json::to_writer(&mut line, params)
            })
            .map_err(|error| UpstreamError::Protocol {
                server: self.name.clone(),
                detail: format!("{method}: could not write the request: {error}"),
            });
        written?;
        line.extend_from_slice(b"}\n");
        let mut cancel = CancelOnDrop {
            link,
            id,
            armed: true,
        };
        let outcome = tokio::select! {
            answer = async {
                link.send(line, Some(id)).await.map_err(|()| closed())?;
                waiting.events.answer().await.map_err(|()| closed())
            } => answer,
            () = limit.cancel.cancelled() => Err(UpstreamError::Cancelled),
        };
        let answer = match outcome {
            Ok(answer) => answer,
            Err(error) => {
                cancel.send().await;
                return Err(error);
            }
        };
        cancel.armed = false;
        let span = |(start, end): (usize, usize)| answer.line.get(start..end).unwrap_or_default();
        match (answer.result, answer.error) {
            (Some(result), None) => match serde_json::from_slice::<Value>(span(result)) {
                Ok(Value::Object(result)) => Ok(result),
                Ok(_) => Err(self.protocol(method, "the result is not an object")),
                Err(error) => Err(self.protocol(method, &format!("unreadable result: {error}"))),
            },
            (None, Some(error)) => match serde_json::from_slice::<ErrorData>(span(error)) {
                Ok(error) => Err(UpstreamError::Rpc {
                    server: self.name.clone(),
                    error,
                }),
                Err(error) => Err(self.protocol(method, &format!("unreadable error: {error}"))),
            },
            _ => Err(self.protocol(method, "an answer with neither a result nor an error")),
        }
    }

    /// A whole JSON-RPC answer (HTTP) as a result object or the server's error.
    fn answer_of(
        &self,
        method: &str,
        mut answer: Value,
    ) -> Result<Map<String, Value>, UpstreamError> {
        if let Some(error) = answer.get_mut("error").map(Value::take) {
            return match serde_json::from_value::<ErrorData>(error) {
                Ok(error) => Err(UpstreamError::Rpc {
                    server: self.name.clone(),
                    error,
                }),
                Err(error) => Err(self.protocol(method, &format!("unreadable error: {error}"))),
            };
        }
        match answer.get_mut("result").map(Value::take) {
            Some(Value::Object(result)) => Ok(result),
            _ => Err(self.protocol(method, "the answer has no result object")),
        }
    }

    fn protocol(&self, method: &str, detail: &str) -> UpstreamError {
        UpstreamError::Protocol {
            server: self.name.clone(),
            detail: format!("{method}: {detail}"),
        }
    }

    /// A progress token for a task-augmented call and the route that relays its progress to
    /// `sink` for as long as the route is kept (the task's life).
    pub async fn task_progress(
        &self,
        sink: super::ProgressSink,
    ) -> (rmcp::model::ProgressToken, super::ProgressRoute) {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let number = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let token = rmcp::model::ProgressToken(rmcp::model::NumberOrString::String(
            format!("tg-task-{number}").into(),
        ));
        let route = self.progress.route(token.clone(), sink).await;
        (token, route)
    }

    /// Answers what an HTTP server asks on the stream of a task request (an elicitation
    /// during `tasks/result`), as its requests on rmcp's session are answered.
    fn stream_requests(&self) -> super::http_lists::StreamRequests {
        let (relay, server) = (self.relay.clone(), self.name.clone());
        std::sync::Arc::new(move |message| {
            Box::pin(super::client::answer_stream_request(
                relay.clone(),
                server.clone(),
                message,
            ))
        })
    }

    /// While a task request runs, the server's requests (elicitation, sampling) go to its session.
    fn in_flight_for(&self, limit: &Limit) -> Option<crate::relay::InFlight<'_>> {
        let (session, rounds) = limit.caller.clone()?;
        Some(self.relay.begin_call(&self.name, session, rounds))
    }
}

/// Tells the server to stop a raw request that nobody waits for any more (timed out, cancelled,
/// or dropped by a caller that stopped waiting).
struct CancelOnDrop<'a> {
    link: &'a RawLink,
    id: u64,
    armed: bool,
}

impl CancelOnDrop<'_> {
    fn notice(&self) -> Vec<u8> {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{{\"requestId\":\"tg-{}\",\"reason\":\"cancelled by the gateway's client\"}}}}\n",
            self.id
        )
        .into_bytes()
    }

    async fn send(&mut self) {
        self.armed = false;
        let sent = tokio::time::timeout(CANCEL_NOTICE_WAIT, self.link.send(self.notice(), None));
        if !matches!(sent.await, Ok(Ok(()))) {
            tracing::debug!(id = self.id, "could not forward a cancel");
        }
    }
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        // Dropped unanswered (the timeout around it fired): queue the notice if there is room
        // now; waiting for room is not possible here.
        if self.armed {
            self.link.try_send(self.notice());
        }
    }
}
