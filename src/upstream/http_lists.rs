//! An HTTP server's lists read as JSON: rmcp's HTTP client decodes every answer into its types (which drop unknown fields), so list pages are asked for beside it, on the same session.
//!
//! rmcp's transport uses [`BoundedHttp`], which notes the session, the token and the headers
//! of the requests it sends. [`HttpLists::page`] then posts one list request with them itself
//! and reads the answer, JSON or an SSE stream, up to the event that answers it. A request
//! the server makes on that stream (an elicitation during a task's `tasks/result`) is
//! answered through the handler given ([`HttpLists::request_with`]) and the answer posted
//! back; other messages on it (a server's log or progress while it lists) are not relayed.

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicU64, Ordering},
};

use serde_json::{Map, Value};

use super::{
    bounded_http::{BoundedHttp, Seen},
    oauth::AuthWatch,
};

/// Answers a request a server sent on a response stream: the whole JSON-RPC request in, the
/// whole JSON-RPC response out (`None`: nothing to send back).
pub type StreamRequests =
    Arc<dyn Fn(Value) -> futures::future::BoxFuture<'static, Option<Value>> + Send + Sync>;

/// Requests of the server on one response stream answered at once; more wait.
const STREAM_REQUESTS: usize = 16;

/// Reads list pages from one HTTP server, on the session rmcp's client ([`BoundedHttp`]) noted.
pub struct HttpLists {
    client: reqwest::Client,
    seen: Arc<Mutex<Option<Seen>>>,
    next: AtomicU64,
    max_bytes: usize,
    watch: Option<Arc<AuthWatch>>,
}

/// The client for rmcp's transport and the list reader beside it; `max_bytes` bounds every
/// answer rmcp reads and every list page. `watch` hears of the server's auth challenges.
pub fn tap(
    max_bytes: usize,
    watch: Option<Arc<AuthWatch>>,
) -> Result<(BoundedHttp, Arc<HttpLists>), String> {
    let bounded = BoundedHttp::new(max_bytes, watch.clone())?;
    let lists = Arc::new(HttpLists {
        client: bounded.reqwest().clone(),
        seen: bounded.seen(),
        next: AtomicU64::new(1),
        max_bytes,
        watch,
    });
    Ok((bounded, lists))
}

impl HttpLists {
    /// One page's result object: `method` with `cursor`, on rmcp's session.
    pub async fn page(
        &self,
        method: &str,
        cursor: Option<&str>,
    ) -> Result<Map<String, Value>, String> {
        let mut params = Map::new();
        if let Some(cursor) = cursor {
            params.insert("cursor".to_owned(), Value::String(cursor.to_owned()));
        }
        let answer = self.request(method, params).await?;
        result_of(method, answer)
    }

    /// The whole answer (`result` or `error`) to one request, posted on rmcp's session.
    pub async fn request(&self, method: &str, params: Map<String, Value>) -> Result<Value, String> {
        self.request_with(method, params, None).await
    }

    /// The last session rmcp's requests carried.
    fn seen(&self) -> Option<Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// A POST of `body` on the session `seen`.
    fn post(client: &reqwest::Client, seen: &Seen, body: &Value) -> reqwest::RequestBuilder {
        let mut request = client
            .post(seen.uri.as_ref())
            .header(http::header::ACCEPT, "application/json, text/event-stream")
            .json(body);
        if let Some(auth) = &seen.auth {
            request = request.bearer_auth(auth);
        }
        for (name, value) in &seen.headers {
            request = request.header(name, value);
        }
        if let Some(session) = &seen.session {
            request = request.header("mcp-session-id", session.as_ref());
        }
        request
    }

    /// [`Self::request`]; the server's requests on the answer's stream go to `on_request`,
    /// and its answers back to the server.
    pub async fn request_with(
        &self,
        method: &str,
        params: Map<String, Value>,
        on_request: Option<&StreamRequests>,
    ) -> Result<Value, String> {
        let seen = self
            .seen()
            .ok_or_else(|| format!("{method}: no session with the server yet"))?;
        let id = format!("tg-list-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let body =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let request = Self::post(&self.client, &seen, &body);
        // The server's requests being answered; dropped (abandoned) with the answer.
        let mut answering = tokio::task::JoinSet::new();
        let mut response = request.send().await.map_err(|e| format!("{method}: {e}"))?;
        if !response.status().is_success() {
            let status = response.status().as_u16();
            if let (Some(watch), 401 | 403) = (&self.watch, status)
                && let Some(challenge) = response
                    .headers()
                    .get(http::header::WWW_AUTHENTICATE)
                    .and_then(|v| v.to_str().ok())
            {
                watch.saw_challenge(status, challenge);
            }
            return Err(format!("{method}: HTTP {}", response.status()));
        }
        let sse = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let mut body = Vec::new();
        let mut events = SseEvents::default();
        // Everything read, events included, counts against the bound.
        let mut read = 0usize;
        loop {
            let chunk = response
                .chunk()
                .await
                .map_err(|e| format!("{method}: {e}"))?;
            let Some(chunk) = chunk else { break };
            read = read.saturating_add(chunk.len());
            if read > self.max_bytes {
                return Err(format!(
                    "{method}: the answer is over {} bytes",
                    self.max_bytes
                ));
            }
            if sse {
                events.buffer.extend_from_slice(&chunk);
                while let Some(data) = events.next_data() {
                    if let Some(answer) = answer_to(&data, &id) {
                        return Ok(answer);
                    }
                    if let Some(handler) = on_request {
                        self.answer_request(&data, handler, &seen, &mut answering);
                    }
                }
            } else {
                body.extend_from_slice(&chunk);
            }
        }
        if sse {
            return Err(format!(
                "{method}: the event stream ended without an answer"
            ));
        }
        serde_json::from_slice(&body).map_err(|e| format!("{method}: unreadable answer: {e}"))
    }
}

impl HttpLists {
    /// Answers the request in `data`, if it is one, in a task of `answering`; the answer is
    /// posted on the session `seen`.
    fn answer_request(
        &self,
        data: &str,
        handler: &StreamRequests,
        seen: &Seen,
        answering: &mut tokio::task::JoinSet<()>,
    ) {
        let Ok(message) = serde_json::from_str::<Value>(data) else {
            return;
        };
        if message.get("method").is_none() || message.get("id").is_none() {
            return;
        }
        while answering.try_join_next().is_some() {}
        if answering.len() >= STREAM_REQUESTS {
            tracing::debug!("a server request on a response stream is dropped: too many open");
            return;
        }
        let (handler, client, seen) = (handler.clone(), self.client.clone(), seen.clone());
        answering.spawn(async move {
            let Some(reply) = handler(message).await else {
                return;
            };
            match Self::post(&client, &seen, &reply).send().await {
                Ok(response) if response.status().is_success() => {}
                Ok(response) => {
                    tracing::debug!(status = %response.status(), "the server refused an answer to its request")
                }
                Err(error) => tracing::debug!(%error, "could not answer the server's request"),
            }
        });
    }
}

/// The answer (`result` or `error`) in `data` if it answers `id`.
fn answer_to(data: &str, id: &str) -> Option<Value> {
    let message: Value = serde_json::from_str(data).ok()?;
    (message.get("id").and_then(Value::as_str) == Some(id)).then_some(message)
}

fn result_of(method: &str, mut answer: Value) -> Result<Map<String, Value>, String> {
    if let Some(error) = answer.get("error") {
        return Err(format!("{method}: {error}"));
    }
    match answer.get_mut("result").map(Value::take) {
        Some(Value::Object(result)) => Ok(result),
        _ => Err(format!("{method}: the answer has no result object")),
    }
}

/// Server-sent events read from a growing buffer: each event's `data` lines, joined.
#[derive(Default)]
struct SseEvents {
    buffer: Vec<u8>,
}

impl SseEvents {
    /// The data of the next whole event in the buffer (events without data are skipped).
    fn next_data(&mut self) -> Option<String> {
        loop {
            let text = std::str::from_utf8(&self.buffer).ok()?;
            let normalized_end = ["\n\n", "\r\n\r\n", "\r\r"]
                .iter()
                .filter_map(|sep| text.find(sep).map(|at| (at, sep.len())))
                .min();
            let (at, len) = normalized_end?;
            let event: String = text[..at].to_owned();
            self.buffer.drain(..at + len);
            let data: Vec<&str> = event
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(|rest| rest.strip_prefix(' ').unwrap_or(rest))
                .collect();
            if !data.is_empty() {
                return Some(data.join("\n"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_read_whole_and_only_the_answer_to_our_id_counts() {
        let mut events = SseEvents::default();
        events
            .buffer
            .extend_from_slice(b"event: message\ndata: {\"id\":\"x\"}\n\n: ping\n\ndata: {\"id\":");
        assert_eq!(events.next_data().as_deref(), Some("{\"id\":\"x\"}"));
        assert_eq!(events.next_data(), None);
        events
            .buffer
            .extend_from_slice(b"\"tg-list-1\",\"result\":{}}\n\n");
        let data = events.next_data().unwrap();
        assert!(answer_to(&data, "tg-list-1").is_some());
        assert!(answer_to(&data, "tg-list-2").is_none());
    }
}
