//! Checks made on client requests before rmcp dispatches them, over stdio and HTTP alike.
//!
//! - **One request per id.** JSON-RPC ids identify answers, and rmcp keeps one entry per id:
//!   a second request reusing the id of one still in flight would take over its answer (stdio:
//!   one of the two is never answered; HTTP: the first POST hangs). The duplicate is answered
//!   at once with `-32600` ("request id N is already in use") and the first completes normally.
//! - **`tools/call` params.** rmcp decodes a `tools/call` whose params do not fit
//!   `CallToolRequestParams` (`"arguments": 5`) as an unknown method and answers `-32601`.
//!   It is answered `-32602` (invalid params) instead, naming what is wrong. `arguments` may be
//!   absent, `null` (the same as absent, as rmcp decodes it) or an object.
//!
//! - **Bounded output.** rmcp spawns a task per outgoing notification and lets it wait for
//!   the transport; a client that stops reading (stdout, or an SSE stream) would let those
//!   tasks, and the messages they hold, pile up without end while upstreams keep sending
//!   progress and log messages. At most [`MAX_UNSENT_NOTIFICATIONS`] are waiting per session;
//!   beyond that a notification is dropped (with one warning per 10,000), which is all that
//!   a client that does not read would get of it anyway. Answers are never dropped: there is
//!   one per request the client sent.
//!
//! [`Guarded`] applies all of these to an rmcp transport (stdio, and each HTTP session's), and gives
//! rmcp ids of its own so that an answered or cancelled id can be reused safely. Over HTTP a
//! duplicate must be refused before rmcp's session worker routes it (it would steal the
//! first POST's answer), so the HTTP layer applies the same functions per session first.

use std::{
    collections::HashMap,
    future::Future,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use futures::future::Either;

use rmcp::{
    RoleServer,
    model::{
        CallToolRequestParams, ClientNotification, ClientRequest, ErrorData, GetExtensions,
        GetMeta, JsonRpcMessage, RequestId, ServerResult,
    },
    service::{OriginatingRequestId, RxJsonRpcMessage, TxJsonRpcMessage},
    transport::Transport,
};
use serde::Deserialize;
use serde_json::Value;

/// The method whose params are checked.
pub const TOOLS_CALL: &str = "tools/call";

/// Notifications one session may have waiting for its transport before new ones are dropped.
/// A client that reads keeps this near zero; progress bursts of fast tools stay well below.
pub const MAX_UNSENT_NOTIFICATIONS: usize = 256;
/// A warning about dropped notifications is logged at the first and at every this many.
const DROPPED_WARN_EVERY: u64 = 10_000;

/// The `-32600` answer to a request whose id is already in flight.
pub fn duplicate_id(id: &RequestId) -> ErrorData {
    ErrorData::invalid_request(
        format!(
            "request id {} is already in use by a request in flight",
            id_text(id)
        ),
        None,
    )
}

/// `7` or `"seven"`, as the client wrote it.
fn id_text(id: &RequestId) -> String {
    serde_json::to_string(id).unwrap_or_else(|_| id.to_string())
}

/// What is wrong with the params of a `tools/call`, as the `-32602` message; `None` when
/// rmcp can decode them.
pub fn call_params_problem(params: Option<&Value>) -> Option<String> {
    let Some(params) = params else {
        return Some(
            "invalid params for tools/call: expected an object with a tool `name`, found no params"
                .into(),
        );
    };
    let Some(object) = params.as_object() else {
        return Some(format!(
            "invalid params for tools/call: expected an object, found {}",
            json_kind(params)
        ));
    };
    match object.get("name") {
        Some(Value::String(_)) => {}
        Some(other) => {
            return Some(format!(
                "invalid params for tools/call: `name` must be a string, found {}",
                json_kind(other)
            ));
        }
        None => return Some("invalid params for tools/call: `name` is missing".into()),
    }
    match object.get("arguments") {
        None | Some(Value::Null | Value::Object(_)) => {}
        Some(other) => {
            return Some(format!(
                "invalid params for tools/call: `arguments` must be an object, found {}",
                json_kind(other)
            ));
        }
    }
    CallToolRequestParams::deserialize(params)
        .err()
        .map(|error| format!("invalid params for tools/call: {error}"))
}

/// What kind of JSON value this is, with an article: for messages about a wrong type.
pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// What to do with one incoming message.
// Lives on the stack for one `match`: boxing the common case would allocate per message.
#[allow(clippy::large_enum_variant)]
enum Verdict {
    /// Hand it to rmcp.
    Pass(RxJsonRpcMessage<RoleServer>),
    /// Answer it here with this error; rmcp never sees it.
    Refuse(RequestId, ErrorData),
    /// Nothing to do (the cancellation of a request no longer in flight).
    Drop,
}

type Reply<E> = Pin<Box<dyn Future<Output = Result<(), E>> + Send>>;

/// An rmcp server transport that answers duplicate ids and malformed `tools/call` params
/// itself (see the module doc), and gives rmcp ids of its own.
///
/// Each request reaches rmcp under a fresh number, mapped back on its answer. A client may
/// reuse an id once it is answered or cancelled; rmcp, which never answers a cancelled
/// request but may still be running it, would otherwise let the old handler's end cancel
/// the new request and take its answer.
///
/// Cancel-safe: rmcp polls `receive` inside a `select!`, so a refusal being written lives
/// in `self` and is finished by the next `receive`.
pub struct Guarded<T: Transport<RoleServer>> {
    inner: T,
    /// Requests in flight: the client's id → the id rmcp knows.
    by_client: HashMap<RequestId, i64>,
    /// The other way round.
    by_internal: HashMap<i64, RequestId>,
    next_internal: i64,
    reply: Option<Reply<T::Error>>,
    /// Notifications handed to `inner` and not yet written.
    unsent: Arc<AtomicUsize>,
    /// Notifications dropped because `unsent` was at the cap.
    dropped: u64,
    /// Over stdio, the ids the fast path holds too: one id, one request, across both.
    shared: Option<Arc<super::fast::IdsInFlight>>,
}

/// One notification waiting for the transport; counted in `unsent` until dropped.
struct Unsent(Arc<AtomicUsize>);

impl Drop for Unsent {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<T: Transport<RoleServer>> Guarded<T> {
    pub fn new(inner: T) -> Self {
        Self {
            inner,
            by_client: HashMap::new(),
            by_internal: HashMap::new(),
            next_internal: 1,
            reply: None,
            unsent: Arc::default(),
            dropped: 0,
            shared: None,
        }
    }

    /// Shares the ids in flight with the stdio fast path.
    pub fn with_shared_ids(mut self, ids: Arc<super::fast::IdsInFlight>) -> Self {
        self.shared = Some(ids);
        self
    }

    /// Whether a notification may go out now; counts it as dropped if not.
    fn room_for_notification(&mut self) -> bool {
        if self.unsent.load(Ordering::Relaxed) < MAX_UNSENT_NOTIFICATIONS {
            return true;
        }
        self.dropped += 1;
        if self.dropped % DROPPED_WARN_EVERY == 1 {
            tracing::warn!(
                dropped = self.dropped,
                "a client is not reading: {MAX_UNSENT_NOTIFICATIONS} notifications wait for it, further ones are dropped"
            );
        }
        false
    }

    fn judge(&mut self, mut message: RxJsonRpcMessage<RoleServer>) -> Verdict {
        match &mut message {
            JsonRpcMessage::Request(request) => {
                if let ClientRequest::CustomRequest(custom) = &request.request
                    && custom.method == TOOLS_CALL
                {
                    // rmcp could not decode it as a `tools/call`: say why, as invalid params.
                    let problem = call_params_problem(custom.params.as_ref())
                        .unwrap_or_else(|| "invalid params for tools/call".to_owned());
                    return Verdict::Refuse(
                        request.id.clone(),
                        ErrorData::invalid_params(problem, None),
                    );
                }
                if self.by_client.contains_key(&request.id)
                    || self.shared.as_ref().is_some_and(|s| !s.claim(&request.id))
                {
                    return Verdict::Refuse(request.id.clone(), duplicate_id(&request.id));
                }
                let internal = self.next_internal;
                self.next_internal += 1;
                let client = std::mem::replace(&mut request.id, RequestId::Number(internal));
                self.by_client.insert(client.clone(), internal);
                self.by_internal.insert(internal, client);
            }
            JsonRpcMessage::Notification(notification) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &mut notification.notification
                    && let Some(id) = &mut cancelled.params.request_id
                {
                    // rmcp sends no answer for a cancelled request: its id is free now.
                    let Some(internal) = self.by_client.remove(id) else {
                        return Verdict::Drop;
                    };
                    if let Some(shared) = &self.shared {
                        shared.release(id);
                    }
                    self.by_internal.remove(&internal);
                    *id = RequestId::Number(internal);
                }
            }
            JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) => {}
        }
        Verdict::Pass(message)
    }

    /// The client's id for rmcp's answer to `internal`, freeing both.
    fn answered(&mut self, internal: &RequestId) -> Option<RequestId> {
        let RequestId::Number(internal) = internal else {
            return None;
        };
        let client = self.by_internal.remove(internal)?;
        self.by_client.remove(&client);
        if let Some(shared) = &self.shared {
            shared.release(&client);
        }
        Some(client)
    }

    /// The client's id of a request in flight that rmcp knows as `internal`.
    fn client_id(&self, internal: &RequestId) -> Option<RequestId> {
        let RequestId::Number(internal) = internal else {
            return None;
        };
        self.by_internal.get(internal).cloned()
    }

    /// Puts the client's ids back wherever rmcp wrote its own: an answer's id (freeing it),
    /// a listen stream's subscription id (its request id, in `_meta`), and the originating
    /// request of a server request (which the HTTP session worker routes by). `None` for an
    /// answer to a request no longer in flight.
    fn restore_client_ids(&mut self, item: &mut TxJsonRpcMessage<RoleServer>) -> Option<()> {
        match item {
            JsonRpcMessage::Response(response) => {
                let client = self.answered(&response.id)?;
                if let ServerResult::SubscriptionsListenResult(listen) = &mut response.result {
                    listen.meta.set_subscription_id(client.clone());
                }
                response.id = client;
            }
            JsonRpcMessage::Error(error) => {
                if let Some(id) = &mut error.id {
                    *id = self.answered(id)?;
                }
            }
            JsonRpcMessage::Notification(notification) => {
                // Read first: `get_meta_mut` would add an empty `_meta` to every notification.
                if let Some(internal) = notification.notification.get_meta().subscription_id()
                    && let Some(client) = self.client_id(&internal)
                {
                    notification
                        .notification
                        .get_meta_mut()
                        .set_subscription_id(client);
                }
            }
            JsonRpcMessage::Request(request) => {
                let internal = request
                    .request
                    .extensions()
                    .get::<OriginatingRequestId>()
                    .map(|origin| origin.0.clone());
                if let Some(client) = internal.and_then(|id| self.client_id(&id)) {
                    request
                        .request
                        .extensions_mut()
                        .insert(OriginatingRequestId(client));
                }
            }
        }
        Some(())
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Guarded<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if self.restore_client_ids(&mut item).is_none() {
            // The answer to a request cancelled meanwhile: the client no longer waits for
            // it, and its id may already name a new request.
            tracing::debug!("dropping the answer to a cancelled request");
            return Either::Right(std::future::ready(Ok(())));
        }
        if !matches!(item, JsonRpcMessage::Notification(_)) {
            return Either::Left(Either::Left(self.inner.send(item)));
        }
        if !self.room_for_notification() {
            return Either::Right(std::future::ready(Ok(())));
        }
        self.unsent.fetch_add(1, Ordering::Relaxed);
        let unsent = Unsent(self.unsent.clone());
        let send = self.inner.send(item);
        Either::Left(Either::Right(async move {
            let _unsent = unsent;
            send.await
        }))
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if let Some(reply) = self.reply.as_mut() {
                let written = reply.await;
                self.reply = None;
                if let Err(error) = written {
                    tracing::debug!(%error, "could not answer a refused request");
                    return None;
                }
            }
            let message = self.inner.receive().await?;
            match self.judge(message) {
                Verdict::Pass(message) => return Some(message),
                Verdict::Drop => {}
                Verdict::Refuse(id, error) => {
                    tracing::debug!(%id, code = error.code.0, message = %error.message, "refused a request before dispatch");
                    self.reply = Some(Box::pin(
                        self.inner.send(JsonRpcMessage::error(error, Some(id))),
                    ));
                }
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use rmcp::{
        model::{CallToolResult, ServerResult},
        transport::async_rw::AsyncRwTransport,
    };
    use serde_json::json;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};

    use super::*;

    type Piped = Guarded<AsyncRwTransport<RoleServer, DuplexStream, DuplexStream>>;
    type ClientLines = tokio::io::Lines<BufReader<DuplexStream>>;

    /// A guarded transport over in-memory pipes: (transport, client's writer, client's lines).
    fn pipes() -> (Piped, DuplexStream, ClientLines) {
        let (client_out, server_in) = tokio::io::duplex(64 * 1024);
        let (server_out, client_in) = tokio::io::duplex(64 * 1024);
        let transport = Guarded::new(AsyncRwTransport::new_server(server_in, server_out));
        (transport, client_out, BufReader::new(client_in).lines())
    }

    async fn write(to: &mut DuplexStream, message: Value) {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        to.write_all(&line).await.unwrap();
    }

    fn call(id: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "t"}})
    }

    fn answer(id: RequestId) -> TxJsonRpcMessage<RoleServer> {
        JsonRpcMessage::response(
            ServerResult::CallToolResult(CallToolResult::success(vec![])),
            id,
        )
    }

    async fn next_line(lines: &mut ClientLines) -> Value {
        serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap()
    }

    #[tokio::test]
    async fn rmcp_sees_fresh_ids_and_the_client_gets_its_own_back() {
        let (mut transport, mut to_server, mut from_server) = pipes();
        write(&mut to_server, call(json!("a"))).await;
        write(&mut to_server, call(json!(7))).await;
        let JsonRpcMessage::Request(first) = transport.receive().await.unwrap() else {
            panic!()
        };
        let JsonRpcMessage::Request(second) = transport.receive().await.unwrap() else {
            panic!()
        };
        assert_ne!(first.id, second.id);
        transport.send(answer(second.id)).await.unwrap();
        transport.send(answer(first.id)).await.unwrap();
        assert_eq!(next_line(&mut from_server).await["id"], 7);
        assert_eq!(next_line(&mut from_server).await["id"], "a");
        assert!(transport.by_client.is_empty() && transport.by_internal.is_empty());
    }

    #[tokio::test]
    async fn duplicates_are_refused_and_cancelled_ids_freed() {
        let (mut transport, mut to_server, mut from_server) = pipes();
        write(&mut to_server, call(json!(1))).await;
        write(&mut to_server, call(json!(1))).await;
        write(&mut to_server, json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})).await;
        // A cancellation of nothing in flight must not reach rmcp, whose ids it may name.
        write(&mut to_server, json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})).await;
        write(&mut to_server, call(json!(1))).await;

        let JsonRpcMessage::Request(first) = transport.receive().await.unwrap() else {
            panic!()
        };
        let JsonRpcMessage::Notification(cancel) = transport.receive().await.unwrap() else {
            panic!()
        };
        let ClientNotification::CancelledNotification(cancel) = cancel.notification else {
            panic!()
        };
        assert_eq!(
            cancel.params.request_id,
            Some(first.id.clone()),
            "mapped to rmcp's id"
        );
        let JsonRpcMessage::Request(reused) = transport.receive().await.unwrap() else {
            panic!()
        };
        assert_ne!(reused.id, first.id);
        let refusal = next_line(&mut from_server).await;
        assert_eq!(
            (refusal["id"].clone(), refusal["error"]["code"].clone()),
            (json!(1), json!(-32600))
        );

        // The cancelled request's late answer is dropped; the new one's goes out as id 1.
        transport.send(answer(first.id)).await.unwrap();
        transport.send(answer(reused.id)).await.unwrap();
        let out = next_line(&mut from_server).await;
        assert_eq!(out["id"], 1);
        assert!(out.get("result").is_some(), "{out}");
    }

    /// A transport whose client never reads: every send waits forever.
    struct Stalled;

    impl Transport<RoleServer> for Stalled {
        type Error = std::io::Error;

        fn send(
            &mut self,
            _item: TxJsonRpcMessage<RoleServer>,
        ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
            std::future::pending()
        }

        async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
            std::future::pending().await
        }

        async fn close(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    #[test]
    fn notifications_for_a_client_that_does_not_read_are_capped_answers_never() {
        use futures::FutureExt;
        use rmcp::model::ServerNotification;

        let mut transport = Guarded::new(Stalled);
        let note = || {
            JsonRpcMessage::notification(ServerNotification::ToolListChangedNotification(
                Default::default(),
            ))
        };
        let mut waiting: Vec<_> = (0..MAX_UNSENT_NOTIFICATIONS)
            .map(|_| transport.send(note()).boxed())
            .collect();
        assert!(
            waiting
                .iter_mut()
                .all(|s| s.as_mut().now_or_never().is_none())
        );
        for _ in 0..1000 {
            let dropped = transport.send(note()).now_or_never();
            assert!(matches!(dropped, Some(Ok(()))), "dropped at once");
        }
        assert_eq!(transport.dropped, 1000);
        // An answer still goes to the transport (and waits there).
        let Verdict::Pass(JsonRpcMessage::Request(request)) =
            transport.judge(serde_json::from_value(call(json!(1))).unwrap())
        else {
            panic!("a call passes")
        };
        let mut answering = transport.send(answer(request.id)).boxed();
        assert!(answering.as_mut().now_or_never().is_none());
        // Room again once some are written (or given up).
        waiting.truncate(10);
        assert!(transport.send(note()).now_or_never().is_none());
    }

    #[test]
    fn call_params_accept_objects_null_and_absent_arguments() {
        for params in [
            json!({"name": "t"}),
            json!({"name": "t", "arguments": null}),
            json!({"name": "t", "arguments": {"a": 1}}),
        ] {
            assert_eq!(call_params_problem(Some(&params)), None, "{params}");
        }
    }

    #[test]
    fn call_params_name_what_is_wrong() {
        let cases = [
            (
                json!({"name": "t", "arguments": 5}),
                "`arguments` must be an object, found a number",
            ),
            (
                json!({"name": "t", "arguments": [1]}),
                "`arguments` must be an object, found an array",
            ),
            (
                json!({"name": "t", "arguments": "x"}),
                "`arguments` must be an object, found a string",
            ),
            (json!({"arguments": {}}), "`name` is missing"),
            (
                json!({"name": 3}),
                "`name` must be a string, found a number",
            ),
            (json!([1]), "expected an object, found an array"),
        ];
        for (params, expected) in cases {
            let problem = call_params_problem(Some(&params)).unwrap_or_default();
            assert!(problem.contains(expected), "{params}: {problem}");
        }
        assert!(call_params_problem(None).is_some());
    }

    #[test]
    fn duplicate_ids_are_named_as_written() {
        let number = duplicate_id(&RequestId::Number(7));
        assert_eq!(number.code.0, -32600);
        assert!(
            number.message.contains("request id 7 is already in use"),
            "{}",
            number.message
        );
        let text = duplicate_id(&RequestId::String("seven".into()));
        assert!(
            text.message.contains("request id \"seven\""),
            "{}",
            text.message
        );
    }
}
