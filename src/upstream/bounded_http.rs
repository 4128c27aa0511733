//! The HTTP client of a streamable-HTTP upstream, with every answer bounded by `max_message_bytes`.
//!
//! rmcp's reqwest client already refuses a JSON body or an SSE event over its limits while
//! reading it (never buffering more), but the call whose answer was refused learns it only as
//! a transport error (JSON), or not at all (an SSE stream that ends: the call waits for its
//! timeout). [`BoundedHttp`] gives rmcp's client `max_message_bytes` as both limits and turns
//! either refusal into a JSON-RPC error answer to the request it was for, marked like the
//! stdio side's ([`super::size_guard::TOO_LARGE_MARK`]), so the call fails at once with
//! `MESSAGE_TOO_LARGE` and the session goes on. The size is not known (rmcp stops reading at
//! the limit), so only the limit is named. A request whose `_meta` carries a `traceparent`
//! also gets it as the W3C header.
//!
//! It also notes what each request carried (session, token, headers) for the list reader
//! beside it ([`super::http_lists`]), tells the server's [`AuthWatch`] of each auth
//! challenge and success, and sends a request once more with a renewed token when a
//! `client_credentials` server refused it ([`super::oauth::renew`]).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use futures::{StreamExt, stream::BoxStream};
use http::{HeaderName, HeaderValue};
use rmcp::{
    model::{
        ClientJsonRpcMessage, ErrorData, GetMeta, JsonRpcMessage, RequestId, ServerJsonRpcMessage,
    },
    transport::streamable_http_client::{
        SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
        StreamableHttpResponseLimits,
    },
};
use sse_stream::Sse;

use super::{logs::LogRelays, oauth::AuthWatch, size_guard::TOO_LARGE_MARK};

/// Redirects followed for one request (rmcp's number).
const MAX_REDIRECTS: usize = 10;
/// How rmcp's SSE reader says an event went over its limit (its error type is private).
const EVENT_TOO_LARGE: &str = "SSE event exceeded the maximum size";

/// What the last request rmcp sent carried: what a request beside it needs.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    pub uri: Arc<str>,
    pub session: Option<Arc<str>>,
    pub auth: Option<String>,
    pub headers: HashMap<HeaderName, HeaderValue>,
}

/// One POST's parts, kept whole so that a refused one can be sent again.
#[derive(Clone)]
struct Post {
    uri: Arc<str>,
    message: ClientJsonRpcMessage,
    session_id: Option<Arc<str>>,
    headers: HashMap<HeaderName, HeaderValue>,
    limits: StreamableHttpResponseLimits,
}

/// rmcp's reqwest client, bounded by `limit` bytes per JSON body and per SSE event.
#[derive(Clone)]
pub struct BoundedHttp {
    inner: reqwest::Client,
    limit: usize,
    /// The last request's session, token and headers.
    seen: Arc<Mutex<Option<Seen>>>,
    /// Told of each 401/403 challenge and each success (servers with `auth` only).
    watch: Option<Arc<AuthWatch>>,
    /// Counts the log messages of its event streams before rmcp reads them ([`super::logs`]).
    logs: Option<Arc<LogRelays>>,
}

impl BoundedHttp {
    /// The client rmcp would build (no idle pooling, same-origin 307/308 redirects only),
    /// bounded by `limit`.
    pub fn new(limit: usize, watch: Option<Arc<AuthWatch>>) -> Result<Self, String> {
        let inner = reqwest::Client::builder()
            // rmcp's choice: reusing a connection whose last body was not read to its end
            // stalls ~40 ms on delayed ACKs.
            .pool_max_idle_per_host(0)
            .redirect(same_origin_redirects())
            .build()
            .map_err(|e| format!("could not set up the HTTP client: {e}"))?;
        Ok(Self {
            inner,
            limit,
            seen: Arc::default(),
            watch,
            logs: None,
        })
    }

    /// Counts the log messages of its event streams in `logs`.
    pub fn with_logs(mut self, logs: Arc<LogRelays>) -> Self {
        self.logs = Some(logs);
        self
    }

    /// The reqwest client underneath, for requests beside rmcp's on the same connection
    /// settings ([`super::http_lists`]).
    pub fn reqwest(&self) -> &reqwest::Client {
        &self.inner
    }

    /// Where the last request's session, token and headers are kept.
    pub(super) fn seen(&self) -> Arc<Mutex<Option<Seen>>> {
        self.seen.clone()
    }

    fn note(
        &self,
        uri: &Arc<str>,
        session: &Option<Arc<str>>,
        auth: &Option<String>,
        headers: &HashMap<HeaderName, HeaderValue>,
    ) {
        *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(Seen {
            uri: uri.clone(),
            session: session.clone(),
            auth: auth.clone(),
            headers: headers.clone(),
        });
    }

    /// One POST with every answer bounded; noted for the list reader.
    async fn post_bounded(
        &self,
        post: Post,
        auth_header: Option<String>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>> {
        let Post {
            uri,
            message,
            session_id,
            headers: custom_headers,
            limits,
        } = post;
        self.note(&uri, &session_id, &auth_header, &custom_headers);
        let custom_headers = with_traceparent(&message, custom_headers);
        let id = match &message {
            ClientJsonRpcMessage::Request(request) => Some(request.id.clone()),
            _ => None,
        };
        let response = self
            .inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                self.limits(limits),
            )
            .await;
        match (response, id) {
            (Err(StreamableHttpError::ResponseBodyTooLarge { .. }), Some(id)) => Ok(
                StreamableHttpPostResponse::Json(too_large(id, self.limit), None),
            ),
            (Ok(StreamableHttpPostResponse::Sse(stream, session)), Some(id)) => {
                Ok(StreamableHttpPostResponse::Sse(
                    bounded_answers(stream, id, self.limit, self.logs.clone()),
                    session,
                ))
            }
            (response, _) => response,
        }
    }

    fn limits(&self, asked: StreamableHttpResponseLimits) -> StreamableHttpResponseLimits {
        let mut limits = asked;
        limits.max_json_response_size = self.limit;
        limits.max_sse_event_size = self.limit;
        limits
    }
}

/// rmcp's redirect policy: only 307 and 308 keep the method and body, and only within the
/// origin may the session id and custom headers follow; at most [`MAX_REDIRECTS`] hops.
pub(super) fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let keeps_body = matches!(
            attempt.status(),
            reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
        );
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|original| original.origin() == attempt.url().origin());
        if !keeps_body || !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("exceeded {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    })
}

/// `headers` plus the message's `_meta.traceparent` (SEP-414, which
/// [`super::Upstream::call`] sets) as the W3C `traceparent` header that HTTP servers and
/// proxies read.
fn with_traceparent(
    message: &ClientJsonRpcMessage,
    mut headers: HashMap<HeaderName, HeaderValue>,
) -> HashMap<HeaderName, HeaderValue> {
    if let JsonRpcMessage::Request(request) = message
        && let Some(traceparent) = request.request.get_meta().get_traceparent()
        && let Ok(value) = HeaderValue::from_str(traceparent)
    {
        headers.insert(HeaderName::from_static("traceparent"), value);
    }
    headers
}

/// The error answer standing in for `id`'s answer over `limit`.
fn too_large(id: RequestId, limit: usize) -> ServerJsonRpcMessage {
    tracing::warn!(
        limit,
        id = %id,
        "an upstream answer over max_message_bytes was dropped"
    );
    let error = ErrorData::internal_error(
        format!("the server's answer is over max_message_bytes ({limit})"),
        Some(serde_json::json!({ TOO_LARGE_MARK: { "bytes": null, "limit": limit } })),
    );
    ServerJsonRpcMessage::error(error, Some(id))
}

fn is_event_too_large(error: &SseError) -> bool {
    matches!(error, SseError::Body(inner) if inner.to_string().starts_with(EVENT_TOO_LARGE))
}

/// Counts `item` in `logs` if it is a log message ([`super::logs`]).
fn count_log(logs: Option<&LogRelays>, item: &Result<Sse, SseError>) {
    if let (
        Some(logs),
        Ok(Sse {
            data: Some(data), ..
        }),
    ) = (logs, item)
    {
        logs.read(data.as_bytes());
    }
}

/// `stream` (the answer stream of request `id`), where an event over `limit` ends the stream
/// with an error answer to `id` in its place, and each log message is counted in `logs`.
fn bounded_answers(
    stream: BoxStream<'static, Result<Sse, SseError>>,
    id: RequestId,
    limit: usize,
    logs: Option<Arc<LogRelays>>,
) -> BoxStream<'static, Result<Sse, SseError>> {
    let mut id = Some(id);
    stream
        .scan(false, move |ended, item| {
            if *ended {
                return std::future::ready(None);
            }
            count_log(logs.as_deref(), &item);
            let item = match item {
                Err(error) if is_event_too_large(&error) => {
                    *ended = true;
                    match id
                        .take()
                        .map(|id| serde_json::to_string(&too_large(id, limit)))
                    {
                        Some(Ok(data)) => Ok(Sse {
                            data: Some(data),
                            ..Sse::default()
                        }),
                        _ => Err(error),
                    }
                }
                other => other,
            };
            std::future::ready(Some(item))
        })
        .boxed()
}

impl StreamableHttpClient for BoundedHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        _max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post_message(uri, message, session_id, auth_header, custom_headers)
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let post = Post {
            uri,
            message,
            session_id,
            headers: custom_headers,
            limits,
        };
        // Only a client_credentials server's request may be sent twice: kept for that.
        let renewer = self.watch.as_ref().and_then(|w| w.renewer());
        let again = renewer.as_ref().map(|_| post.clone());
        let sent = auth_header.clone();
        let result = self.post_bounded(post, auth_header).await;
        if matches!(result, Err(StreamableHttpError::AuthRequired(_)))
            && let (Some(renewer), Some(watch), Some(post)) = (renewer, &self.watch, again)
            && let Some(fresh) = renewer.after_refusal(sent.as_deref(), watch).await
        {
            let retried = self.post_bounded(post, Some(fresh)).await;
            super::oauth::observe(self.watch.as_ref(), &retried);
            return retried;
        }
        super::oauth::observe(self.watch.as_ref(), &result);
        result
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        // The server's own stream (notifications, its requests): an event over the limit
        // ends it, as rmcp does; nobody's call waits on it. Its log messages are counted too,
        // so that every log the handler counts off was counted in.
        let stream = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                self.limit,
            )
            .await?;
        let logs = self.logs.clone();
        Ok(stream
            .inspect(move |item| count_log(logs.as_deref(), item))
            .boxed())
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        _max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }
}
