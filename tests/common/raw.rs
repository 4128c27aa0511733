//! Driving toolgate by hand: JSON-RPC requests built as JSON, raw HTTP POSTs, and `serve` over stdio as JSON lines.

use std::{process::Stdio, time::Duration};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::{Sockets, Workdir, spawn_on_sockets, toolgate};

/// An `initialize` request as an MCP client sends it first.
pub fn initialize_request(id: u64) -> serde_json::Value {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "toolgate-tests", "version": "0"}
        }
    })
}

/// A `tools/call` request with `arguments` as given (any JSON).
pub fn call_request(id: u64, name: &str, arguments: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments}
    })
}

/// POSTs `body` to `url` as an MCP client does (JSON, accepting JSON and SSE), in
/// `session` when given, with `headers` added.
pub async fn mcp_post(
    url: &str,
    session: Option<&str>,
    headers: &[(&str, &str)],
    body: &serde_json::Value,
) -> reqwest::Response {
    mcp_post_raw(
        url,
        session,
        headers,
        serde_json::to_vec(body).expect("serialize"),
    )
    .await
}

/// Like [`mcp_post`], with a body of any bytes.
pub async fn mcp_post_raw(
    url: &str,
    session: Option<&str>,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> reqwest::Response {
    // One client for all: building one per request costs more than the request, in debug.
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    let mut request = CLIENT
        .get_or_init(reqwest::Client::new)
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("POST reaches the gateway")
}

/// The value of the unlabelled series `name` in a scrape of `url` (a `/metrics` URL); `None`
/// when the scrape has no such series.
pub async fn metric(url: &str, name: &str) -> Option<u64> {
    let body = reqwest::get(url)
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("the metrics body");
    body.lines().find_map(|line| {
        line.strip_prefix(name)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// A response header's value as text (empty when absent or not text).
pub fn header_text(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// The JSON-RPC answer in a response body, JSON or SSE (the first `data:` event that is an
/// answer).
pub async fn jsonrpc_answer(response: reqwest::Response) -> serde_json::Value {
    let text = response.text().await.expect("response body");
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) {
        return value;
    }
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<serde_json::Value>(data.trim()).ok())
        .find(|value| value.get("result").is_some() || value.get("error").is_some())
        .unwrap_or_else(|| panic!("no JSON-RPC answer in {text:?}"))
}

/// Opens an MCP session over raw HTTP (`initialize` + `notifications/initialized`); its id.
pub async fn raw_session(url: &str, headers: &[(&str, &str)]) -> String {
    let (session, answer) = open_session(url, headers, &initialize_request(0)).await;
    assert!(answer.get("result").is_some(), "{answer}");
    session
}

/// Opens an MCP session over raw HTTP with `initialize` (any protocol version), then sends
/// `notifications/initialized`; the session id and the answer to `initialize`.
pub async fn open_session(
    url: &str,
    headers: &[(&str, &str)],
    initialize: &Value,
) -> (String, Value) {
    let response = mcp_post(url, None, headers, initialize).await;
    assert_eq!(response.status(), 200, "initialize: {response:?}");
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("a session id")
        .to_owned();
    let answer = jsonrpc_answer(response).await;
    let initialized = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = mcp_post(url, Some(&session), headers, &initialized).await;
    assert_eq!(response.status(), 202, "notifications/initialized");
    (session, answer)
}

/// `toolgate serve` over stdio driven by hand: JSON lines in, JSON lines out.
pub struct RawStdio {
    pub child: tokio::process::Child,
    stdin: Box<dyn tokio::io::AsyncWrite + Send + Unpin>,
    lines: tokio::io::Lines<BufReader<Box<dyn tokio::io::AsyncRead + Send + Unpin>>>,
}

impl RawStdio {
    /// Starts `toolgate serve` with the config in `work` and completes the handshake.
    pub async fn start(work: &Workdir) -> Self {
        Self::start_with(work, &[]).await
    }

    /// [`start`](Self::start) with more arguments to `serve` (`--audit-log FILE`, say).
    pub async fn start_with(work: &Workdir, serve_args: &[&str]) -> Self {
        let mut raw = Self::spawn_with(work, serve_args);
        raw.handshake().await;
        raw
    }

    /// [`start`](Self::start) with stdin and stdout `sockets` instead of pipes.
    pub async fn start_on_sockets(work: &Workdir, sockets: Sockets) -> Self {
        let mut command = tokio::process::Command::new(toolgate());
        command.arg("--config").arg(work.config()).arg("serve");
        let (child, stdout, stdin) = spawn_on_sockets(command, sockets);
        let mut raw = Self {
            child,
            stdin: Box::new(stdin),
            lines: BufReader::new(Box::new(stdout) as Box<_>).lines(),
        };
        raw.handshake().await;
        raw
    }

    async fn handshake(&mut self) {
        self.send(&initialize_request(0)).await;
        let answer = self.next().await;
        assert!(answer.get("result").is_some(), "{answer}");
        self.send(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
    }

    /// Starts `toolgate serve` with the config in `work`, without a handshake (a 2026-07-28
    /// client sends none).
    pub fn spawn(work: &Workdir) -> Self {
        Self::spawn_with(work, &[])
    }

    /// [`spawn`](Self::spawn) with more arguments to `serve`.
    pub fn spawn_with(work: &Workdir, serve_args: &[&str]) -> Self {
        let mut child = tokio::process::Command::new(toolgate())
            .arg("--config")
            .arg(work.config())
            .arg("serve")
            .args(serve_args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn toolgate serve");
        let stdin = child.stdin.take().expect("stdin piped");
        let stdout = child.stdout.take().expect("stdout piped");
        Self {
            child,
            stdin: Box::new(stdin),
            lines: BufReader::new(Box::new(stdout) as Box<_>).lines(),
        }
    }

    pub async fn send(&mut self, message: &serde_json::Value) {
        let mut line = serde_json::to_vec(message).expect("serialize");
        line.push(b'\n');
        self.send_raw(&line).await;
    }

    /// Writes `bytes` as they are (add the newline yourself).
    pub async fn send_raw(&mut self, bytes: &[u8]) {
        use tokio::io::AsyncWriteExt;
        self.stdin
            .write_all(bytes)
            .await
            .expect("write to toolgate");
        self.stdin.flush().await.expect("flush");
    }

    /// Closes stdin and reads stdout to its end: what toolgate still wrote, each line
    /// checked to be JSON; then its exit status. A socket's writing side is shut down first,
    /// as Node's `end()` does (a pipe's shutdown does nothing).
    pub async fn finish(self) -> (Vec<serde_json::Value>, std::process::ExitStatus) {
        use tokio::io::AsyncWriteExt;
        let Self {
            mut child,
            mut stdin,
            mut lines,
        } = self;
        stdin.shutdown().await.expect("shut stdin down");
        drop(stdin);
        let mut rest = Vec::new();
        let read_all = async {
            while let Some(line) = lines.next_line().await.expect("read stdout") {
                let value =
                    serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line}"));
                rest.push(value);
            }
        };
        tokio::time::timeout(Duration::from_secs(10), read_all)
            .await
            .expect("toolgate closes stdout within 10s of its stdin closing");
        let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .expect("toolgate exits within 10s of its stdin closing")
            .expect("wait for toolgate");
        (rest, status)
    }

    /// The next message toolgate writes (within 10 s).
    pub async fn next(&mut self) -> serde_json::Value {
        let line = tokio::time::timeout(Duration::from_secs(10), self.lines.next_line())
            .await
            .expect("toolgate answers within 10s")
            .expect("read stdout")
            .expect("toolgate still running");
        serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line}"))
    }

    /// The next answer (result or error), skipping notifications.
    pub async fn next_answer(&mut self) -> serde_json::Value {
        loop {
            let message = self.next().await;
            if message.get("id").is_some() && message.get("method").is_none() {
                return message;
            }
        }
    }
}

/// Reads SSE `data:` messages from `response` (a POST's event stream) until one satisfies
/// `wanted`; `buffer` keeps what was read past it, for the next call.
pub async fn next_event(
    response: &mut reqwest::Response,
    buffer: &mut String,
    wanted: impl Fn(&Value) -> bool,
) -> Value {
    loop {
        while let Some(end) = buffer.find('\n') {
            let line: String = buffer.drain(..=end).collect();
            if let Some(data) = line.trim_end().strip_prefix("data:")
                && let Ok(message) = serde_json::from_str::<Value>(data.trim())
                && wanted(&message)
            {
                return message;
            }
        }
        let chunk = response
            .chunk()
            .await
            .expect("the POST stream stays readable")
            .expect("the POST stream ended before the wanted message");
        buffer.push_str(&String::from_utf8_lossy(&chunk));
    }
}

/// The `result` of a JSON-RPC answer; panics (naming the answer) if it is an error.
pub fn answer_result(answer: &Value) -> &Value {
    answer
        .get("result")
        .unwrap_or_else(|| panic!("expected a result: {answer}"))
}

/// The `error.code` of a JSON-RPC answer; panics (naming the answer) if it has none.
pub fn answer_error_code(answer: &Value) -> i64 {
    answer["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected an error: {answer}"))
}
