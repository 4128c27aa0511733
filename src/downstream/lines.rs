//! The stdio transport: one JSON-RPC message per line, and an answer to every line that is
//! not one.
//!
//! rmcp's `AsyncRwTransport` drops a line that is not JSON, not UTF-8, nested too deep or
//! longer than its limit, and only logs it: a client whose request was garbled in transit
//! waits for its answer forever. [`Lines`] reads and writes the same way (a line at most
//! `[gateway] max_message_bytes` long, bounded while it is read) but answers such lines as JSON-RPC 2.0
//! asks (§5.1), without an id since none could be read ([`refusal`]; MCP 2026-07-28 omits the
//! id where JSON-RPC 2.0 wrote null, and earlier MCP versions allow no null ids):
//! - `-32700` (parse error): not one JSON value (broken, not UTF-8, nested deeper than 128),
//!   or longer than the limit (never buffered whole: it is skipped up to its newline, and the
//!   answer names its size and the limit, with its id when one is found near either end);
//! - `-32600` (invalid request): JSON that is not a message: a batch (MCP dropped JSON-RPC
//!   batches in 2025-06-18), a scalar, or an object that does not fit (with its id, when it
//!   has a readable one).
//!
//! A notification (a `method` without an `id`) that does not fit is dropped, as rmcp does:
//! notifications are never answered. The answers are themselves valid JSON-RPC errors, so a
//! peer that echoes them back sends a readable message and cannot start an error storm.
//!
//! The HTTP endpoint answers bodies that are not JSON or are batches with the same errors
//! ([`http`](super::http)).
//!
//! Lines are read by a task of their own ([`reader`]), where the fast path takes its lines
//! ([`Intercept`]); rmcp's service loop reads the others from it one at a time, in order.

use std::{future::Future, io, pin::Pin, sync::Arc};

use rmcp::{
    RoleServer,
    model::{ErrorData, JsonRpcMessage, RequestId},
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::Transport,
};
use serde::Deserialize;
use serde_json::Value;
use tokio::{
    io::{AsyncRead, AsyncWrite, AsyncWriteExt},
    sync::{Mutex, mpsc},
};
use tokio_util::task::AbortOnDropHandle;

use super::guard::json_kind;

mod reader;

use reader::{LineRead, LineReader, Oversized};

/// Longest line read unless [`Lines::with_max_line`] says otherwise (rmcp's own default,
/// 16 MiB, which is also `max_message_bytes`' default).
pub const MAX_LINE_BYTES: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// The answer to a message that cannot be handled: the id it goes to (`None`: none could be
/// read, and the answer has none) and the error; `None` for a notification, which is never answered. `decode_error` is why rmcp's
/// types refused it, when known, for the message of an object that does not fit.
pub fn refusal(
    bytes: &[u8],
    decode_error: Option<&serde_json::Error>,
) -> Option<(Option<RequestId>, ErrorData)> {
    let value = match serde_json::from_slice::<Value>(bytes) {
        Ok(value) => value,
        Err(error) => {
            return Some((
                None,
                ErrorData::parse_error(format!("parse error: not a JSON value: {error}"), None),
            ));
        }
    };
    let object = match value {
        Value::Object(object) => object,
        Value::Array(_) => {
            return Some((
                None,
                ErrorData::invalid_request(
                    "JSON-RPC batches are not supported (MCP removed them in 2025-06-18): send one message at a time",
                    None,
                ),
            ));
        }
        other => {
            return Some((
                None,
                ErrorData::invalid_request(
                    format!(
                        "expected a JSON-RPC message (an object), found {}",
                        json_kind(&other)
                    ),
                    None,
                ),
            ));
        }
    };
    let id = object.get("id");
    if id.is_none() && object.contains_key("method") {
        return None;
    }
    let id = id.and_then(|id| RequestId::deserialize(id).ok());
    let message = match decode_error {
        Some(error) => format!("not a valid JSON-RPC 2.0 message: {error}"),
        None => "not a valid JSON-RPC 2.0 message".to_owned(),
    };
    Some((id, ErrorData::invalid_request(message, None)))
}

/// The `-32700` answer to a line over the limit, for its id when one was found.
fn too_long(over: &Oversized, max: usize) -> Refused {
    let id = crate::upstream::find_id(&over.head)
        .or_else(|| crate::upstream::find_id(&over.tail))
        .and_then(|id| serde_json::from_value::<RequestId>(id).ok());
    let error = ErrorData::parse_error(
        format!(
            "parse error: the message is {} bytes, longer than max_message_bytes ({max}), and was skipped",
            over.bytes
        ),
        Some(serde_json::json!({"bytes": over.bytes, "limit": max})),
    );
    (id, error)
}

type Reply = Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;

/// Takes some lines before they are decoded for rmcp ([`super::fast`]).
pub trait Intercept: Send + Sync {
    /// `line` is one message (no newline, no byte order mark); `true`: it is handled.
    fn take(&self, line: &[u8]) -> bool;
}

/// Writes whole lines to the client, in turn with rmcp's messages.
pub trait WriteLine: Send + Sync {
    fn write_line(&self, line: Vec<u8>) -> Reply;
}

/// The client's side of the stream: lines go out whole and in the order they were given;
/// while one writer is writing, lines given meanwhile are queued and go out together with
/// its next `write` (under load, one system call for several answers).
pub struct LineWriter<W> {
    queue: std::sync::Mutex<Queued>,
    out: Mutex<Option<W>>,
}

#[derive(Default)]
struct Queued {
    bytes: Vec<u8>,
    /// A writer is writing and will take what is queued before it stops.
    writing: bool,
}

/// Clears `writing` if the writer stops without finishing (its future dropped), so that the
/// next line starts a writer again.
struct Writing<'a>(&'a std::sync::Mutex<Queued>);

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).writing = false;
    }
}

impl<W: AsyncWrite + Send + Unpin + 'static> LineWriter<W> {
    fn new(out: W) -> Self {
        Self {
            queue: std::sync::Mutex::new(Queued::default()),
            out: Mutex::new(Some(out)),
        }
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queued> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes what is queued until nothing is; the caller set `writing`.
    async fn write_queued(&self) -> io::Result<()> {
        let writing = Writing(&self.queue);
        let mut out = self.out.lock().await;
        loop {
            let batch = {
                let mut queued = self.queue();
                if queued.bytes.is_empty() {
                    // Under the lock: a line queued after this starts a writer of its own.
                    queued.writing = false;
                    std::mem::forget(writing);
                    return Ok(());
                }
                std::mem::take(&mut queued.bytes)
            };
            let Some(out) = out.as_mut() else {
                return Err(io::Error::new(
                    io::ErrorKind::NotConnected,
                    "the transport is closed",
                ));
            };
            out.write_all(&batch).await?;
            out.flush().await?;
        }
    }

    /// Closes the stream once what is queued is written.
    async fn close(&self) {
        drop(self.out.lock().await.take());
    }
}

impl<W: AsyncWrite + Send + Unpin + 'static> WriteLine for Arc<LineWriter<W>> {
    fn write_line(&self, line: Vec<u8>) -> Reply {
        {
            let mut queued = self.queue();
            if queued.bytes.is_empty() {
                queued.bytes = line;
            } else {
                queued.bytes.extend_from_slice(&line);
            }
            if queued.writing {
                // The writer at work takes it with its next write.
                return Box::pin(std::future::ready(Ok(())));
            }
            queued.writing = true;
        }
        let writer = self.clone();
        Box::pin(async move { writer.write_queued().await })
    }
}

/// A server transport over a byte stream pair (stdin/stdout): see the module doc.
///
/// Cancel-safe: rmcp polls `receive` inside a `select!`, so an answer being written lives in
/// `self` and is finished by the next `receive`; lines are read by a task of its own
/// ([`reader`]), started by the first `receive`.
pub struct Lines<R, W> {
    reader: Reading<R>,
    max_line: usize,
    write: Arc<LineWriter<W>>,
    reply: Option<Reply>,
    handshake: Option<HandshakePatch>,
}

/// The reader before its task is started, then what it hands on.
enum Reading<R> {
    Ready(Box<LineReader<R>>),
    Started {
        lines: mpsc::Receiver<LineRead>,
        _task: AbortOnDropHandle<()>,
    },
    /// The input has ended (or the task with it).
    Done,
}

/// Rewrites the answer to `initialize` (as JSON) before it is written:
/// for what rmcp's typed capabilities cannot hold ([`super::tasks`]).
pub type HandshakePatch = Arc<dyn Fn(&mut Value) + Send + Sync>;

impl<R, W> Lines<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    pub fn new(read: R, write: W) -> Self {
        Self {
            reader: Reading::Ready(Box::new(LineReader::new(read))),
            max_line: MAX_LINE_BYTES,
            write: Arc::new(LineWriter::new(write)),
            reply: None,
            handshake: None,
        }
    }

    /// Lets `patch` rewrite the handshake's answer.
    pub fn with_handshake_patch(mut self, patch: HandshakePatch) -> Self {
        self.handshake = Some(patch);
        self
    }

    /// Lets `intercept` take lines before rmcp sees them.
    pub fn with_intercept(mut self, intercept: Arc<dyn Intercept>) -> Self {
        if let Reading::Ready(reader) = &mut self.reader {
            reader.set_intercept(intercept);
        }
        self
    }

    /// Where other writers put whole lines between rmcp's.
    pub fn writer(&self) -> Arc<dyn WriteLine> {
        Arc::new(self.write.clone())
    }

    /// With another line limit (`max_message_bytes`).
    pub fn with_max_line(mut self, max_line: usize) -> Self {
        self.max_line = max_line;
        if let Reading::Ready(reader) = &mut self.reader {
            reader.set_max_line(max_line);
        }
        self
    }

    /// The next line for rmcp, from the reader's task (started here the first time).
    async fn next_line(&mut self) -> LineRead {
        loop {
            match &mut self.reader {
                Reading::Started { lines, .. } => {
                    let read = lines.recv().await.unwrap_or(LineRead::Eof);
                    if matches!(read, LineRead::Eof | LineRead::Io(_)) {
                        self.reader = Reading::Done;
                    }
                    return read;
                }
                Reading::Done => return LineRead::Eof,
                Reading::Ready(_) => {
                    let Reading::Ready(reader) = std::mem::replace(&mut self.reader, Reading::Done)
                    else {
                        continue;
                    };
                    let (lines, task) = reader.spawn();
                    self.reader = Reading::Started { lines, _task: task };
                }
            }
        }
    }
}

/// Decodes a line for rmcp: a message, or the answer to send (`Err(None)`: none).
fn decode_line(line: &[u8]) -> Result<RxJsonRpcMessage<RoleServer>, Option<Refused>> {
    serde_json::from_slice(line)
        .map(|message| super::faithful::reread(message, line))
        .map_err(|error| {
            let refused = refusal(line, Some(&error));
            if refused.is_none() {
                tracing::debug!(%error, "dropped a notification that is not a valid MCP notification");
            }
            refused
        })
}

type Refused = (Option<RequestId>, ErrorData);

impl<R, W> Transport<RoleServer> for Lines<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        use rmcp::model::ServerResult as S;
        let handshake = matches!(&item, JsonRpcMessage::Response(r)
            if matches!(r.result, S::InitializeResult(_)));
        let line = match self.handshake.as_ref().filter(|_| handshake) {
            Some(patch) => serde_json::to_value(&item).and_then(|mut value| {
                patch(&mut value);
                serde_json::to_vec(&value)
            }),
            None => serde_json::to_vec(&item),
        };
        let line = line.map(|mut line| {
            line.push(b'\n');
            line
        });
        let write = self.write.clone();
        async move {
            let line = line.map_err(io::Error::other)?;
            write.write_line(line).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if let Some(reply) = self.reply.as_mut() {
                let written = reply.await;
                self.reply = None;
                if let Err(error) = written {
                    tracing::debug!(%error, "could not answer an unreadable message");
                    return None;
                }
            }
            let (id, error) = match self.next_line().await {
                LineRead::Line(line) => match decode_line(&line) {
                    Ok(message) => return Some(message),
                    Err(None) => continue,
                    Err(Some(refused)) => refused,
                },
                LineRead::TooLong(over) => too_long(&over, self.max_line),
                // Bytes after the last newline are an unfinished message: nothing to answer.
                LineRead::Eof => return None,
                LineRead::Io(error) => {
                    tracing::error!(%error, "could not read from the client");
                    return None;
                }
            };
            tracing::debug!(code = error.code.0, message = %error.message, "answered an unreadable message");
            self.reply = Some(Box::pin(self.send(JsonRpcMessage::error(error, id))));
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.write.close().await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tokio::io::{AsyncBufReadExt, BufReader, DuplexStream};

    use super::*;

    type Piped = Lines<DuplexStream, DuplexStream>;
    type ClientLines = tokio::io::Lines<BufReader<DuplexStream>>;

    fn pipes(max_line: usize) -> (Piped, DuplexStream, ClientLines) {
        let (client_out, server_in) = tokio::io::duplex(64 * 1024);
        let (server_out, client_in) = tokio::io::duplex(64 * 1024);
        let transport = Lines::new(server_in, server_out).with_max_line(max_line);
        (transport, client_out, BufReader::new(client_in).lines())
    }

    async fn next_line(lines: &mut ClientLines) -> Value {
        serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap()
    }

    fn ping(id: u64) -> Vec<u8> {
        let mut line =
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": "ping"})).unwrap();
        line.push(b'\n');
        line
    }

    #[tokio::test]
    async fn every_unreadable_line_is_answered_and_the_next_message_still_read() {
        let (mut transport, mut to_server, mut from_server) = pipes(1024);
        let mut input = Vec::new();
        input.extend_from_slice(b"{not json\n");
        input.extend_from_slice(b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]\n");
        input.extend_from_slice(b"\"\xff\xfe\"\n");
        input.extend_from_slice(&[b'['; 200]);
        input.push(b'\n');
        input.extend_from_slice(&vec![b' '; 3000]);
        input.extend_from_slice(b"{}\n");
        input.extend_from_slice(b"7\n");
        input.extend_from_slice(
            b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"initialize\",\"params\":3}\n",
        );
        // Unanswered: a blank line and a notification that does not fit.
        input.extend_from_slice(b"\r\n");
        input.extend_from_slice(
            b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":1}\n",
        );
        input.extend_from_slice(&ping(9));
        to_server.write_all(&input).await.unwrap();

        let message = transport.receive().await.unwrap();
        let JsonRpcMessage::Request(request) = message else {
            panic!("{message:?}")
        };
        assert_eq!(request.id, RequestId::Number(9));
        let expected = [
            (None, -32700, "not a JSON value"),
            (None, -32600, "batches are not supported"),
            (None, -32700, "not a JSON value"),
            (None, -32700, "not a JSON value"),
            (
                None,
                -32700,
                "3002 bytes, longer than max_message_bytes (1024)",
            ),
            (None, -32600, "found a number"),
            (Some(json!(5)), -32600, "not a valid JSON-RPC 2.0 message"),
        ];
        for (id, code, text) in expected {
            let answer = next_line(&mut from_server).await;
            assert_eq!(answer.get("id"), id.as_ref(), "{answer}");
            assert_eq!(answer["error"]["code"], code, "{answer}");
            let message = answer["error"]["message"].as_str().unwrap();
            assert!(message.contains(text), "{answer}");
        }
    }

    #[tokio::test]
    async fn a_byte_order_mark_and_crlf_are_accepted() {
        let (mut transport, mut to_server, _from_server) = pipes(1024);
        let mut line = reader::UTF8_BOM.to_vec();
        line.extend_from_slice(&ping(3));
        line.insert(line.len() - 1, b'\r');
        to_server.write_all(&line).await.unwrap();
        assert!(matches!(
            transport.receive().await,
            Some(JsonRpcMessage::Request(_))
        ));
    }

    #[tokio::test]
    async fn a_long_line_is_refused_once_with_its_id_and_size_and_its_tail_skipped_across_reads() {
        let (mut transport, mut to_server, mut from_server) = pipes(100);
        let head = br#"{"jsonrpc":"2.0","id":12,"method":"ping","params":{"x":""#;
        let end = br#""}}"#;
        let writer = tokio::spawn(async move {
            // Written in pieces, so the skipping spans several reads.
            to_server.write_all(head).await.unwrap();
            for _ in 0..10 {
                to_server.write_all(&[b'x'; 50]).await.unwrap();
            }
            to_server.write_all(end).await.unwrap();
            to_server.write_all(b"\n").await.unwrap();
            to_server.write_all(&ping(4)).await.unwrap();
            to_server
        });
        let message = transport.receive().await.unwrap();
        assert!(matches!(message, JsonRpcMessage::Request(r) if r.id == RequestId::Number(4)));
        let answer = next_line(&mut from_server).await;
        assert_eq!(answer["error"]["code"], -32700, "{answer}");
        assert_eq!(answer["id"], 12, "{answer}");
        let bytes = head.len() + 500 + end.len();
        assert_eq!(
            answer["error"]["data"],
            json!({"bytes": bytes, "limit": 100})
        );
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!(
                "{bytes} bytes, longer than max_message_bytes (100)"
            )),
            "{message}"
        );
        drop(writer.await.unwrap());
        assert!(transport.receive().await.is_none(), "EOF ends the stream");
    }

    /// Takes the lines with `"fast"` in them, counting what it was shown.
    #[derive(Default)]
    struct TakeFast(std::sync::Mutex<Vec<String>>);

    impl Intercept for TakeFast {
        fn take(&self, line: &[u8]) -> bool {
            let line = String::from_utf8_lossy(line).into_owned();
            let fast = line.contains("fast");
            self.0.lock().unwrap().push(line);
            fast
        }
    }

    /// Lines are read by a task of their own, but in rmcp's order: after a line for rmcp,
    /// the next is not even shown to the intercept until rmcp has taken that one; the lines
    /// it takes never reach rmcp.
    #[tokio::test]
    async fn a_line_for_rmcp_is_taken_before_the_next_is_read() {
        let (transport, mut to_server, _from_server) = pipes(1024);
        let fast = Arc::new(TakeFast::default());
        let mut transport = transport.with_intercept(fast.clone());
        let mut input = ping(1);
        input.extend_from_slice(b"{\"fast\":1}\n");
        input.extend_from_slice(&ping(2));
        input.extend_from_slice(b"{\"fast\":2}\n");
        input.extend_from_slice(&ping(3));
        to_server.write_all(&input).await.unwrap();
        let shown = |fast: &TakeFast| fast.0.lock().unwrap().clone();
        for id in 1..=3 {
            let message = transport.receive().await.unwrap();
            assert!(
                matches!(&message, JsonRpcMessage::Request(r) if r.id == RequestId::Number(id)),
                "{message:?}"
            );
            // The reader has every chance to run on: it stops at the next line for rmcp.
            for _ in 0..50 {
                tokio::task::yield_now().await;
            }
            let read = shown(&fast);
            assert_eq!(read.len(), (2 * id + 1).min(5) as usize, "{read:?}");
        }
        assert_eq!(shown(&fast)[1], "{\"fast\":1}");
        assert_eq!(shown(&fast)[3], "{\"fast\":2}");
        drop(to_server);
        assert!(transport.receive().await.is_none(), "EOF ends the stream");
    }

    #[test]
    fn refusals_carry_a_readable_id_and_skip_notifications() {
        let (id, error) = refusal(br#"{"jsonrpc":"2.0","id":"a","method":5}"#, None).unwrap();
        assert_eq!(id, Some(RequestId::String("a".into())));
        assert_eq!(error.code.0, -32600);
        let (id, _) = refusal(br#"{"jsonrpc":"2.0","id":{},"method":"x"}"#, None).unwrap();
        assert_eq!(id, None, "an id that is no id is null");
        assert!(refusal(br#"{"jsonrpc":"2.0","method":"x","params":1}"#, None).is_none());
    }
}
