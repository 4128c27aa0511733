//! A reader between a stdio upstream's stdout and its rmcp client that turns an over-limit line into an error answer for the request it answered.
//!
//! rmcp drops a line over its limit and says nothing to the caller, so a call whose answer is
//! too large waited for its timeout. Here a line longer than `max_message_bytes` is never
//! buffered whole: its first and last bytes are kept to find its `id`, the rest is counted and
//! skipped, and in its place the client reads a JSON-RPC error for that id whose `data` says
//! how large the answer was. [`super::Upstream::call`] turns it into `MESSAGE_TOO_LARGE`.

use tokio::io::{AsyncRead, AsyncReadExt};

/// Marks the error answers this reader writes, in their `data`.
pub const TOO_LARGE_MARK: &str = "toolgate/too_large";
/// Bytes kept at each end of an over-limit line, to find its `id`.
const KEEP: usize = 512;
/// Bytes read from the child at a time.
const CHUNK: usize = 64 * 1024;

pub struct SizeGuard<R> {
    inner: R,
    limit: usize,
    /// The line being read, while it is within the limit.
    line: Vec<u8>,
    /// Set while skipping an over-limit line.
    over: Option<Oversized>,
    /// Bytes ready for rmcp, handed on whole.
    ready: Vec<u8>,
    chunk: Box<[u8]>,
    eof: bool,
    /// Answers to the raw path's requests are taken out here ([`super::raw`]).
    raw: Option<std::sync::Arc<super::raw::RawLink>>,
    /// Log messages are counted here before rmcp reads them ([`super::logs`]).
    logs: Option<std::sync::Arc<super::logs::LogRelays>>,
}

struct Oversized {
    head: Vec<u8>,
    tail: Vec<u8>,
    bytes: usize,
}

impl<R> SizeGuard<R> {
    pub fn new(inner: R, limit: usize) -> Self {
        Self {
            inner,
            limit,
            line: Vec::new(),
            over: None,
            ready: Vec::new(),
            chunk: vec![0; CHUNK].into_boxed_slice(),
            eof: false,
            raw: None,
            logs: None,
        }
    }

    /// Hands answers to `raw`'s requests to their calls instead of passing them on.
    pub fn with_raw(mut self, raw: std::sync::Arc<super::raw::RawLink>) -> Self {
        self.raw = Some(raw);
        self
    }

    /// Counts the log messages passed on in `logs`.
    pub fn with_logs(mut self, logs: std::sync::Arc<super::logs::LogRelays>) -> Self {
        self.logs = Some(logs);
        self
    }

    /// Sorts freshly read bytes into whole lines (ready) or the skipped line's counters.
    fn take_in(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            // memchr looks at many bytes a step; a byte loop paid a compare and a branch for each.
            let (piece, ends_line) = match memchr::memchr(b'\n', bytes) {
                Some(at) => (&bytes[..at], true),
                None => (bytes, false),
            };
            bytes = &bytes[piece.len() + usize::from(ends_line)..];
            if let Some(over) = &mut self.over {
                over.bytes += piece.len();
                over.tail.extend_from_slice(piece);
                if over.tail.len() > KEEP {
                    over.tail.drain(..over.tail.len() - KEEP);
                }
            } else {
                self.line.extend_from_slice(piece);
                if self.line.len() > self.limit {
                    let mut head = std::mem::take(&mut self.line);
                    let bytes = head.len();
                    let tail = head[bytes.saturating_sub(KEEP)..].to_vec();
                    head.truncate(KEEP);
                    self.over = Some(Oversized { head, tail, bytes });
                }
            }
            if ends_line {
                let line = match self.over.take() {
                    Some(over) => error_line(&over, self.limit),
                    // The buffer goes with the line only if a raw call takes it.
                    None if self.raw.is_some() => std::mem::take(&mut self.line),
                    None => {
                        if let Some(logs) = &self.logs {
                            logs.read(&self.line);
                        }
                        self.ready.append(&mut self.line);
                        self.ready.push(b'\n');
                        continue;
                    }
                };
                let line = match &self.raw {
                    Some(raw) if !line.is_empty() => raw.divert(line),
                    _ => Some(line),
                };
                if let Some(mut line) = line
                    && !line.is_empty()
                {
                    if let Some(logs) = &self.logs {
                        logs.read(&line);
                    }
                    if self.ready.is_empty() {
                        // Reuse the line's buffer for what rmcp reads.
                        std::mem::swap(&mut self.ready, &mut line);
                        self.line = line;
                        self.line.clear();
                    } else {
                        self.ready.extend_from_slice(&line);
                    }
                    self.ready.push(b'\n');
                }
            }
        }
    }
}

/// The error answer standing in for an over-limit line (without its newline), or nothing if
/// it has no `id` (a notification: nobody waits for it).
fn error_line(over: &Oversized, limit: usize) -> Vec<u8> {
    let id = find_id(&over.head).or_else(|| find_id(&over.tail));
    tracing::warn!(
        bytes = over.bytes,
        limit,
        id = ?id,
        "an upstream message over max_message_bytes was dropped"
    );
    let Some(id) = id else {
        return Vec::new();
    };
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": -32603,
            "message": format!("the server's answer is {} bytes, over max_message_bytes ({limit})", over.bytes),
            "data": { TOO_LARGE_MARK: { "bytes": over.bytes, "limit": limit } },
        },
    });
    answer.to_string().into_bytes()
}

/// The value of the top-level `"id"` key in a fragment of a JSON-RPC message: a number or a
/// string, as JSON-RPC allows.
pub(crate) fn find_id(fragment: &[u8]) -> Option<serde_json::Value> {
    let text = String::from_utf8_lossy(fragment);
    let mut rest = text.as_ref();
    while let Some(at) = rest.find("\"id\"") {
        let after = rest[at + 4..].trim_start();
        rest = &rest[at + 4..];
        let Some(value) = after.strip_prefix(':') else {
            continue;
        };
        let value = value.trim_start();
        let mut stream = serde_json::Deserializer::from_str(value).into_iter::<serde_json::Value>();
        if let Some(Ok(id)) = stream.next()
            && (id.is_number() || id.is_string())
        {
            return Some(id);
        }
    }
    None
}

impl<R: AsyncRead + Unpin> SizeGuard<R> {
    /// The bytes ready for rmcp (whole lines, but for a last one without its newline), taken
    /// as they are; `None` once the server's stdout has ended and everything was handed on.
    pub async fn next_ready(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        loop {
            if !self.ready.is_empty() {
                return Ok(Some(std::mem::take(&mut self.ready)));
            }
            if self.eof {
                // A last line without `\\n` goes through as it is; rmcp decides what it is.
                if !self.line.is_empty() {
                    return Ok(Some(std::mem::take(&mut self.line)));
                }
                return Ok(None);
            }
            let filled = self.inner.read(&mut self.chunk).await?;
            if filled == 0 {
                self.eof = true;
                // Nothing more will answer the raw calls waiting.
                if let Some(raw) = &self.raw {
                    raw.close();
                }
                continue;
            }
            // Taken out for the call, not copied: `take_in` borrows the guard.
            let chunk = std::mem::take(&mut self.chunk);
            self.take_in(&chunk[..filled]);
            self.chunk = chunk;
        }
    }
}

impl<R> Drop for SizeGuard<R> {
    fn drop(&mut self) {
        if let Some(raw) = &self.raw {
            raw.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Everything `guard` hands on, in order.
    async fn read_all<R: AsyncRead + Unpin>(mut guard: SizeGuard<R>) -> String {
        let mut out = Vec::new();
        while let Some(ready) = guard.next_ready().await.unwrap() {
            out.extend_from_slice(&ready);
        }
        String::from_utf8(out).unwrap()
    }

    async fn through(input: &[u8], limit: usize) -> String {
        read_all(SizeGuard::new(input, limit)).await
    }

    #[tokio::test]
    async fn lines_within_the_limit_pass_unchanged() {
        let input = b"{\"id\":1}\n{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\nlast";
        assert_eq!(through(input, 100).await, String::from_utf8_lossy(input));
    }

    #[tokio::test]
    async fn an_over_limit_answer_becomes_an_error_for_its_id_wherever_the_id_is() {
        let big = "x".repeat(10_000);
        let input = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":\"{big}\"}}\n{{\"result\":\"{big}\",\"jsonrpc\":\"2.0\",\"id\":\"s-8\"}}\n{{\"id\":9}}\n"
        );
        let out = through(input.as_bytes(), 1000).await;
        let lines: Vec<serde_json::Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "{out}");
        assert_eq!(lines[0]["id"], 7);
        let first_line = input.lines().next().unwrap().len();
        assert_eq!(
            lines[0]["error"]["data"][TOO_LARGE_MARK]["bytes"],
            first_line
        );
        assert_eq!(lines[1]["id"], "s-8");
        assert_eq!(lines[1]["error"]["data"][TOO_LARGE_MARK]["limit"], 1000);
        assert_eq!(lines[2], serde_json::json!({"id": 9}));
    }

    #[tokio::test]
    async fn an_over_limit_notification_is_dropped() {
        let input = format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":\"{}\"}}\n{{\"id\":1}}\n",
            "y".repeat(5000)
        );
        assert_eq!(through(input.as_bytes(), 1000).await, "{\"id\":1}\n");
    }

    #[test]
    fn ids_are_found_only_as_keys() {
        assert_eq!(
            find_id(br#"{"x":"\"id\"","id":3"#),
            Some(serde_json::json!(3))
        );
        assert_eq!(find_id(br#"{"id":{"a":1}}"#), None);
        assert_eq!(find_id(br#"{"jsonrpc":"2.0","re"#), None);
    }
}
