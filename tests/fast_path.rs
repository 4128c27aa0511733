//! The stdio fast path for `tools/call` writes byte for byte what rmcp's typed path writes, and `/metrics` counts it.
//!
//! With `[gateway] fast_path = true` (the default) a stdio `toolgate serve` answers
//! `tools/call` itself from the raw JSON line; with `false` every message goes through rmcp's
//! typed decoding as before. The differential test starts two gateways whose configs differ
//! only in that key, replays one corpus of raw lines through both, and compares every line
//! they write to stdout as bytes (never re-serialized): success, `isError`, schema
//! violations, unknown tools, large and oversized results, unicode, progress, cancels,
//! timeouts, an upstream's own JSON-RPC error, malformed params and ids, lines that are not
//! JSON, and the per-request protocol version of the 2026-07-28 lifecycle. It does so for a
//! 2025-11-25 session, a session that asked `initialize` for 2026-07-28 (negotiated down),
//! and a 2026-07-28 `server/discover` session, whose results carry `resultType`.
//!
//! Calls go one at a time, each answer awaited before the next line is sent, so the order of
//! the lines is fixed; the few cases that overlap calls (a duplicate id, an answer that
//! overtakes a slow one, a cancel) leave seconds between the events they order. Each run's
//! transcript is also checked for what the typed path is known to answer (the right kind of
//! answer, the progress, no answer to a cancelled request), so the corpus itself cannot rot
//! into comparing two identical wrong answers.
//!
//! Nothing is normalised: no answer in the corpus holds a time, a duration measured at run
//! time, or an id the gateway makes up (the timeout message names the configured limit).
//! Only the handshake answers are left out of the comparison: the capabilities they declare
//! depend on whether the upstreams are in yet (`server/discover` does not wait for them), a
//! matter of timing, and neither is a `tools/call`.

mod common;

use std::{
    ops::Range,
    path::Path,
    process::Stdio,
    time::{Duration, Instant},
};

use common::*;
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    process::{Child, ChildStdin, ChildStdout},
    sync::oneshot,
};

/// Longest wait for one answer, one log line or one scrape (debug builds, a shared machine).
const STEP_LIMIT: Duration = Duration::from_secs(30);
/// Longest wait for a gateway to start and finish its handshake.
const START_LIMIT: Duration = Duration::from_secs(60);
/// `max_result_bytes` of the corpus gateways: the large result fits, the oversized one not.
const MAX_RESULT_BYTES: usize = 300_000;
/// `timeout_ms` of the `slow` server.
const SLOW_TIMEOUT_MS: u64 = 500;

// ---- A raw line client ----

/// `toolgate serve` over stdio, driven with raw lines; what it writes is kept as bytes.
struct LineClient {
    label: &'static str,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    metrics: Option<oneshot::Receiver<String>>,
}

impl LineClient {
    /// Starts `toolgate --config CONFIG serve EXTRA...`; its stderr is echoed, tagged `label`.
    fn spawn(label: &'static str, config: &Path, extra: &[&str]) -> Self {
        let mut child = tokio::process::Command::new(toolgate())
            .arg("--config")
            .arg(config)
            .arg("serve")
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn toolgate serve");
        let stdin = child.stdin.take().expect("stdin piped");
        let stdout = BufReader::new(child.stdout.take().expect("stdout piped"));
        let stderr = child.stderr.take().expect("stderr piped");
        let (found, metrics) = oneshot::channel();
        // Drained to the end, so the gateway never blocks on a full pipe.
        tokio::spawn(async move {
            let mut found = Some(found);
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(url) = line.strip_prefix("toolgate: metrics on ")
                    && let Some(found) = found.take()
                {
                    let _ = found.send(url.to_owned());
                }
                eprintln!("[{label}] {line}");
            }
        });
        Self {
            label,
            child,
            stdin: Some(stdin),
            stdout,
            metrics: Some(metrics),
        }
    }

    /// The `/metrics` URL printed on stderr (`serve --metrics ADDR`).
    async fn metrics_url(&mut self) -> String {
        let found = self.metrics.take().expect("asked once");
        tokio::time::timeout(START_LIMIT, found)
            .await
            .unwrap_or_else(|_| panic!("{}: no metrics line within {START_LIMIT:?}", self.label))
            .unwrap_or_else(|_| panic!("{}: exited before serving metrics", self.label))
    }

    /// Writes `line` and a newline.
    async fn send(&mut self, line: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        let mut bytes = line.to_vec();
        bytes.push(b'\n');
        stdin.write_all(&bytes).await.expect("write to toolgate");
        stdin.flush().await.expect("flush to toolgate");
    }

    /// The next line toolgate writes, without its newline, within `limit`.
    async fn line(&mut self, limit: Duration, waiting_for: &str) -> Vec<u8> {
        let mut line = Vec::new();
        let read = tokio::time::timeout(limit, self.stdout.read_until(b'\n', &mut line))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{}: nothing more on stdout within {limit:?} while waiting for {waiting_for}",
                    self.label
                )
            })
            .expect("read toolgate's stdout");
        assert!(
            read > 0,
            "{}: stdout closed while waiting for {waiting_for}",
            self.label
        );
        assert_eq!(
            line.pop(),
            Some(b'\n'),
            "{}: a line ends with \\n",
            self.label
        );
        line
    }

    /// Reads lines until the answer to `id` (`None`: an answer without an id).
    async fn until_answer(&mut self, id: Option<&Value>, lines: &mut Vec<Vec<u8>>) {
        let waiting_for = match id {
            Some(id) => format!("the answer to id {id}"),
            None => "an answer without an id".to_owned(),
        };
        loop {
            let line = self.line(STEP_LIMIT, &waiting_for).await;
            let done = is_answer_to(&parse(self.label, &line), id);
            lines.push(line);
            if done {
                return;
            }
        }
    }

    /// Opens the session as `era` says, and tells whether results carry `resultType`.
    async fn handshake(&mut self, era: Era) -> bool {
        match era {
            Era::Initialize(version) => {
                let mut request = initialize_request(0);
                request["params"]["protocolVersion"] = json!(version);
                self.send(&to_line(&request)).await;
                let answer = parse(self.label, &self.line(START_LIMIT, "initialize").await);
                let negotiated = answer["result"]["protocolVersion"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{}: initialize failed: {answer}", self.label))
                    .to_owned();
                self.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
                    .await;
                negotiated == "2026-07-28"
            }
            Era::Discover => {
                let request = json!({
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "server/discover",
                    "params": {"_meta": modern_meta()}
                });
                self.send(&to_line(&request)).await;
                let answer = parse(self.label, &self.line(START_LIMIT, "server/discover").await);
                let versions = &answer["result"]["supportedVersions"];
                assert!(
                    versions
                        .as_array()
                        .is_some_and(|v| v.contains(&json!("2026-07-28"))),
                    "{}: server/discover failed: {answer}",
                    self.label
                );
                true
            }
        }
    }

    /// Closes stdin: the lines toolgate still writes before it exits (which it must, cleanly).
    async fn finish(mut self) -> Vec<Vec<u8>> {
        drop(self.stdin.take());
        let mut rest = Vec::new();
        let label = self.label;
        tokio::time::timeout(STEP_LIMIT, async {
            loop {
                let mut line = Vec::new();
                let read = self
                    .stdout
                    .read_until(b'\n', &mut line)
                    .await
                    .expect("read toolgate's stdout");
                if read == 0 {
                    return;
                }
                if line.last() == Some(&b'\n') {
                    line.pop();
                }
                rest.push(line);
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{label}: stdout not closed within {STEP_LIMIT:?} of stdin"));
        let status = tokio::time::timeout(STEP_LIMIT, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("{label}: no exit within {STEP_LIMIT:?} of stdin closing"))
            .expect("wait for toolgate");
        assert!(status.success(), "{label}: exited with {status}");
        rest
    }
}

fn parse(label: &str, line: &[u8]) -> Value {
    serde_json::from_slice(line)
        .unwrap_or_else(|e| panic!("{label}: not a JSON line ({e}): {}", shown(line)))
}

fn to_line(message: &Value) -> Vec<u8> {
    serde_json::to_vec(message).expect("serialize")
}

/// Whether `message` is a response (no `method`) to `id`; `None`: a response without an id
/// (JSON-RPC's `null` id counts as none).
fn is_answer_to(message: &Value, id: Option<&Value>) -> bool {
    if message.get("method").is_some() {
        return false;
    }
    match (message.get("id").filter(|v| !v.is_null()), id) {
        (Some(got), Some(id)) => got == id,
        (None, None) => true,
        _ => false,
    }
}

/// A line for a failure message: lossy UTF-8, long lines cut in the middle.
fn shown(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= 600 {
        return text.into_owned();
    }
    let head: String = chars[..300].iter().collect();
    let tail: String = chars[chars.len() - 200..].iter().collect();
    format!("{head} …[{} chars]… {tail}", chars.len() - 500)
}

// ---- The corpus ----

/// How a session is opened.
#[derive(Clone, Copy, Debug)]
enum Era {
    /// `initialize` asking for this protocol version, then `notifications/initialized`.
    Initialize(&'static str),
    /// The 2026-07-28 lifecycle: `server/discover`, then the protocol keys in every
    /// request's `_meta`.
    Discover,
}

/// The `_meta` keys a 2026-07-28 request carries.
fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "toolgate-tests", "version": "0"}
    })
}

/// What an awaited answer must be (checked on each run's transcript).
#[derive(Debug, Clone)]
enum Expect {
    /// A result, not `isError`, whose first content block is this text.
    Text(String),
    /// A result with `isError: true` and this text, from the tool itself (no toolgate code).
    ToolError(String),
    /// A result with `isError: true` and `_meta["toolgate/error"].code`.
    Code(&'static str),
    /// A JSON-RPC error with this code.
    Rpc(i64),
    /// An empty result (`ping`).
    Empty,
}

/// Whether a result must carry `resultType`.
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// As the session's protocol version says.
    Session,
    /// No `resultType` (a 2025-era request).
    Legacy,
    /// `resultType: "complete"` (a 2026-07-28 request).
    Modern,
}

#[derive(Debug)]
enum Step {
    /// Write this line (the newline is added).
    Send(Vec<u8>),
    /// Read lines up to the answer to `id` (`None`: one without an id), then check them.
    Await {
        id: Option<Value>,
        expect: Expect,
        /// `notifications/progress` expected before the answer: the token and the steps.
        progress: Option<(Value, u64)>,
        shape: Shape,
    },
    /// Wait until the upstream log `file` (in the gateway's work directory) holds `needle`
    /// at least `count` times.
    WaitLog {
        file: &'static str,
        needle: String,
        count: usize,
    },
}

#[derive(Debug)]
struct Case {
    name: &'static str,
    steps: Vec<Step>,
    /// Request ids that must never be answered (cancelled calls).
    silent: Vec<Value>,
}

/// Builds the corpus for one era.
struct Corpus {
    discover: bool,
    next_id: u64,
    cancels: usize,
    cases: Vec<Case>,
}

impl Corpus {
    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// A `tools/call` line; in a `server/discover` session `_meta` carries the protocol keys
    /// too, besides `meta`.
    fn call(&self, id: impl Into<Value>, name: &str, arguments: Value, meta: Value) -> Vec<u8> {
        let mut meta = meta.as_object().cloned().unwrap_or_default();
        if self.discover {
            meta.extend(modern_meta().as_object().cloned().unwrap_or_default());
        }
        let mut params = json!({"name": name, "arguments": arguments});
        if !meta.is_empty() {
            params["_meta"] = Value::Object(meta);
        }
        to_line(
            &json!({"jsonrpc": "2.0", "id": id.into(), "method": "tools/call", "params": params}),
        )
    }

    fn echo(&self, id: impl Into<Value>, text: &str) -> Vec<u8> {
        self.call(id, "echo__echo", json!({"text": text}), json!({}))
    }

    /// A line written by hand: `@ID@` is `id`; `@M@`, right after a `{` that opens params,
    /// is `"_meta":{…},` in a `server/discover` session and nothing otherwise.
    fn raw(&self, id: u64, template: &str) -> Vec<u8> {
        let meta = if self.discover {
            format!("\"_meta\":{},", modern_meta())
        } else {
            String::new()
        };
        template
            .replace("@ID@", &id.to_string())
            .replace("@M@", &meta)
            .into_bytes()
    }

    fn case(&mut self, name: &'static str, steps: Vec<Step>) {
        self.cases.push(Case {
            name,
            steps,
            silent: Vec::new(),
        });
    }

    /// One request line and its answer.
    fn single(&mut self, name: &'static str, line: Vec<u8>, id: impl Into<Value>, expect: Expect) {
        self.case(name, vec![Step::Send(line), answer(id, expect)]);
    }
}

fn answer(id: impl Into<Value>, expect: Expect) -> Step {
    Step::Await {
        id: Some(id.into()),
        expect,
        progress: None,
        shape: Shape::Session,
    }
}

fn anonymous(code: i64) -> Step {
    Step::Await {
        id: None,
        expect: Expect::Rpc(code),
        progress: None,
        shape: Shape::Session,
    }
}

fn text(s: &str) -> Expect {
    Expect::Text(s.to_owned())
}

/// The text of the unicode cases: emoji (with ZWJ sequences and flags), CJK, right-to-left
/// scripts and overrides, zero-width characters, every kind of escaped control character,
/// quotes, backslashes, U+2028/U+2029 and astral characters.
const UNICODE: &str = "emoji 😀👩‍👩‍👧‍👦🏳️‍🌈🇯🇵 · CJK 中文漢字日本語한국어 · RTL עברית العربية \
    \u{202E}reversed\u{202C} \u{200F}mark · zero-width [\u{200B}\u{200D}\u{FEFF}] · controls \
    [\u{0}\u{1}\u{8}\u{b}\u{c}\u{1f}\u{7f}\t\n\r] · quotes \" ' · backslash \\ · slash / · \
    separators [\u{2028}\u{2029}] · astral 𝄞𐍈\u{10FFFF} · accents e\u{301} é";

/// `s` as a JSON string with everything but printable ASCII written as `\uXXXX` escapes
/// (UTF-16 surrogate pairs for astral characters), and `/` as `\/`.
fn escaped_json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' => out.push_str("\\/"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
    out
}

/// The corpus, in order. Ids are unique, except where a case reuses one on purpose.
fn corpus(era: Era) -> Vec<Case> {
    let mut c = Corpus {
        discover: matches!(era, Era::Discover),
        next_id: 100,
        cancels: 0,
        cases: Vec::new(),
    };

    // Plain outcomes.
    let id = c.id();
    c.single("success: echo", c.echo(id, "hello"), id, text("hello"));
    let id = c.id();
    let line = c.call(id, "echo__add", json!({"a": 2, "b": 3}), json!({}));
    c.single(
        "success: structured content (add)",
        line,
        id,
        text("{\"sum\":5}"),
    );
    let id = c.id();
    let line = c.call(
        id,
        "echo__add",
        json!({"a": 12_345_678_901_234_567_890_u64, "b": 0.1}),
        json!({}),
    );
    // echo_server adds them as doubles (the 0.1 is lost) and serializes with serde_json.
    let sum = json!({"sum": 12_345_678_901_234_567_890_u64 as f64 + 0.1}).to_string();
    c.single(
        "success: numbers beyond i64 and floats",
        line,
        id,
        text(&sum),
    );
    let id = c.id();
    let line = c.call(id, "echo__fail", json!({"message": "it broke"}), json!({}));
    c.single(
        "tool error: isError result (fail)",
        line,
        id,
        Expect::ToolError("it broke".into()),
    );
    let id = c.id();
    let line = c.raw(
        id,
        r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{@M@"name":"echo__fail"}}"#,
    );
    c.single(
        "tool error: no arguments at all",
        line,
        id,
        Expect::ToolError("failed on purpose".into()),
    );
    let id = c.id();
    let line = c.raw(
        id,
        r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{@M@"name":"echo__fail","arguments":null}}"#,
    );
    c.single(
        "tool error: arguments null",
        line,
        id,
        Expect::ToolError("failed on purpose".into()),
    );

    // Refused by toolgate before any upstream.
    let id = c.id();
    let line = c.call(id, "echo__echo", json!({"text": 5}), json!({}));
    c.single(
        "invalid arguments: wrong type",
        line,
        id,
        Expect::Code("INVALID_ARGS"),
    );
    let id = c.id();
    let line = c.call(
        id,
        "echo__echo",
        json!({"txt": "x", "extra": [1]}),
        json!({}),
    );
    c.single(
        "invalid arguments: missing and unexpected",
        line,
        id,
        Expect::Code("INVALID_ARGS"),
    );
    let id = c.id();
    let line = c.call(id, "no_such_tool", json!({}), json!({}));
    c.single("unknown tool", line, id, Expect::Rpc(-32602));
    let id = c.id();
    let line = c.call(id, "nöpe😀\u{7}\u{202E}", json!({}), json!({}));
    c.single(
        "unknown tool with a unicode name",
        line,
        id,
        Expect::Rpc(-32602),
    );
    let id = c.id();
    let line = c.call(id, "echo__", json!({}), json!({}));
    c.single(
        "unknown tool: the bare server prefix",
        line,
        id,
        Expect::Rpc(-32602),
    );

    // Sizes and text.
    let large = "ab😀中\n".repeat(20_000); // 200 KB, about 220 KB once escaped
    let id = c.id();
    let line = c.echo(id, &large);
    c.single("large result (~200 KB)", line, id, Expect::Text(large));
    let id = c.id();
    let line = c.echo(id, &"x".repeat(MAX_RESULT_BYTES + 10_000));
    c.single(
        "result over max_result_bytes",
        line,
        id,
        Expect::Code("RESULT_TOO_LARGE"),
    );
    let id = c.id();
    let line = c.echo(id, UNICODE);
    c.single("unicode text", line, id, text(UNICODE));
    let id = c.id();
    let line = c.raw(
        id,
        &format!(
            r#"{{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{{@M@"name":"echo__echo","arguments":{{"text":{}}}}}}}"#,
            escaped_json_string(UNICODE)
        ),
    );
    c.single(
        "unicode text written as \\u escapes",
        line,
        id,
        text(UNICODE),
    );

    // Progress: echo_server's `sleep` reports after each of its `steps`.
    for (name, token, steps) in [
        ("progress: a string token", json!("p-α"), 3),
        ("progress: a numeric token", json!(7), 2),
    ] {
        let id = c.id();
        let line = c.call(
            id,
            "echo__sleep",
            json!({"ms": 300, "steps": steps}),
            json!({"progressToken": token}),
        );
        c.case(
            name,
            vec![
                Step::Send(line),
                Step::Await {
                    id: Some(json!(id)),
                    expect: text("slept 300ms"),
                    progress: Some((token, steps)),
                    shape: Shape::Session,
                },
            ],
        );
    }

    // A client cancel: the call reached the upstream, which sees the cancel and answers
    // "cancelled"; neither path may pass that on. An echo and a ping show the next lines.
    let id = c.id();
    let ms = 30_000 + id;
    c.cancels += 1;
    let cancel = json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": "changed my mind"}
    });
    let mut cancel_line = cancel.clone();
    if c.discover {
        cancel_line["params"]["_meta"] = modern_meta();
    }
    let after = c.id();
    let ping = c.id();
    let ping_line = c.raw(
        ping,
        if c.discover {
            r#"{"jsonrpc":"2.0","id":@ID@,"method":"ping","params":{@M@"x":1}}"#
        } else {
            r#"{"jsonrpc":"2.0","id":@ID@,"method":"ping"}"#
        },
    );
    c.cases.push(Case {
        name: "client cancel of a call in flight",
        steps: vec![
            Step::Send(c.call(id, "echo__sleep", json!({"ms": ms}), json!({}))),
            Step::WaitLog {
                file: "calls.log",
                needle: format!("\"ms\":{ms}"),
                count: 1,
            },
            Step::Send(to_line(&cancel_line)),
            Step::WaitLog {
                file: "cancel.log",
                needle: "cancelled sleep".into(),
                count: c.cancels,
            },
            Step::Send(c.echo(after, "after the cancel")),
            answer(after, text("after the cancel")),
            Step::Send(ping_line),
            // `ping` is gone from the 2026-07-28 protocol.
            answer(
                ping,
                if c.discover {
                    Expect::Rpc(-32601)
                } else {
                    Expect::Empty
                },
            ),
        ],
        silent: vec![json!(id)],
    });
    let after = c.id();
    let stray = json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 999_999, "reason": "nothing to cancel"}
    });
    c.case(
        "cancel of an id not in flight",
        vec![
            Step::Send(to_line(&stray)),
            Step::Send(c.echo(after, "still here")),
            answer(after, text("still here")),
        ],
    );

    // A timeout: the `slow` server's `timeout_ms` ends a long sleep.
    let id = c.id();
    let line = c.call(id, "slow__sleep", json!({"ms": 5_000}), json!({}));
    c.single(
        "timeout (per-server timeout_ms)",
        line,
        id,
        Expect::Code("TOOL_TIMEOUT"),
    );

    // The upstream answers with its own JSON-RPC error: notes_server's `roots` asks the client
    // for its roots, toolgate refuses for this client (no `roots` capability) with -32601,
    // and notes_server fails the call with that error, which toolgate relays unchanged.
    let id = c.id();
    let line = c.call(id, "notes__roots", json!({}), json!({}));
    c.single(
        "upstream JSON-RPC error (notes roots)",
        line,
        id,
        Expect::Rpc(-32601),
    );

    // Overlapping calls.
    let id = c.id();
    c.case(
        "duplicate id of a call in flight",
        vec![
            Step::Send(c.call(id, "echo__sleep", json!({"ms": 2_000}), json!({}))),
            Step::Send(c.echo(id, "second")),
            answer(id, Expect::Rpc(-32600)),
            answer(id, text("slept 2000ms")),
        ],
    );
    let slow = c.id();
    let quick = c.id();
    c.case(
        "a quick call overtakes a slow one",
        vec![
            Step::Send(c.call(slow, "echo__sleep", json!({"ms": 1_500}), json!({}))),
            Step::Send(c.echo(quick, "overtakes")),
            answer(quick, text("overtakes")),
            answer(slow, text("slept 1500ms")),
        ],
    );

    // Ids.
    let string_id = "req-α \"1\"";
    c.single(
        "string id",
        c.echo(string_id, "string id"),
        string_id,
        text("string id"),
    );
    c.single("negative id", c.echo(-1, "negative"), -1, text("negative"));
    let big = 9_007_199_254_740_993_u64; // 2^53 + 1: not exact as a double
    c.single("id beyond 2^53", c.echo(big, "big id"), big, text("big id"));
    for (name, id) in [
        ("id: a float", "1.5"),
        ("id: null", "null"),
        ("id: a boolean", "true"),
        ("id: beyond i64", "18446744073709551615"),
    ] {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{@M@"name":"echo__echo","arguments":{{"text":"bad id"}}}}}}"#
        );
        c.case(name, vec![Step::Send(c.raw(0, &line)), anonymous(-32600)]);
    }

    // Line forms rmcp's decoder accepts: every one must reach the same answer.
    let id = c.id();
    let line = c.raw(
        id,
        r#"{"params":{@M@"arguments":{"text":"order"},"name":"echo__echo"},"method":"tools/call","id":@ID@,"jsonrpc":"2.0"}"#,
    );
    c.single("keys in reverse order", line, id, text("order"));
    let id = c.id();
    let line = c.raw(
        id,
        "  { \"jsonrpc\" : \"2.0\" ,\t\"id\" : @ID@ , \"method\" : \"tools/call\" , \"params\" : { @M@ \"name\" : \"echo__echo\" , \"arguments\" : { \"text\" : \"spaced\" } } }  ",
    );
    c.single("whitespace between tokens", line, id, text("spaced"));
    let id = c.id();
    let line = c.raw(
        id,
        r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools\/call","params":{@M@"name":"echo\u005f_echo","arguments":{"text":"esc\/aped"}}}"#,
    );
    c.single(
        "escapes in method and tool name",
        line,
        id,
        text("esc/aped"),
    );
    let id = c.id();
    let mut line = b"\xEF\xBB\xBF".to_vec();
    line.extend(c.echo(id, "after a BOM"));
    c.single("a byte order mark", line, id, text("after a BOM"));
    let id = c.id();
    let mut line = c.echo(id, "crlf");
    line.push(b'\r');
    c.single("a CRLF line end", line, id, text("crlf"));
    let id = c.id();
    let line = c.raw(
        id,
        r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{@M@"name":"echo__echo","arguments":{"text":"extra"},"extra":1,"task":{"ttl":1000}},"extra":2}"#,
    );
    c.single(
        "unknown fields (and a task request)",
        line,
        id,
        text("extra"),
    );
    let id = c.id();
    let line = c.call(
        id,
        "echo__echo",
        json!({"text": "token"}),
        json!({"progressToken": {"not": "a token"}}),
    );
    c.single("a progressToken that is an object", line, id, text("token"));

    // Lines that do not fit.
    let id = c.id();
    let line = c.raw(
        id,
        r#"{"jsonrpc":"2.0","id":@ID@,"id":999,"method":"tools/call","params":{@M@"name":"echo__echo","arguments":{"text":"dup"}}}"#,
    );
    c.case(
        "a duplicate id key",
        vec![Step::Send(line), answer(999, Expect::Rpc(-32600))],
    );
    let id = c.id();
    let line = c.raw(
        id,
        r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{@M@"name":"echo__echo","name":"echo__fail","arguments":{"text":"dup"}}}"#,
    );
    c.single("a duplicate name key", line, id, Expect::Rpc(-32602));
    for (name, params) in [
        (
            "params: arguments a number",
            r#"{@M@"name":"echo__echo","arguments":5}"#,
        ),
        (
            "params: arguments an array",
            r#"{@M@"name":"echo__echo","arguments":["text"]}"#,
        ),
        ("params: name missing", r#"{@M@"arguments":{}}"#),
        ("params: name a number", r#"{@M@"name":7}"#),
    ] {
        let id = c.id();
        let line = c.raw(
            id,
            &format!(r#"{{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{params}}}"#),
        );
        c.single(name, line, id, Expect::Rpc(-32602));
    }
    let id = c.id();
    let line = c.raw(id, r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools/call"}"#);
    c.single("params: none", line, id, Expect::Rpc(-32602));
    // Params that are not an object make no JSON-RPC request at all.
    let id = c.id();
    let line = c.raw(
        id,
        r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":["echo__echo"]}"#,
    );
    c.single("params: an array", line, id, Expect::Rpc(-32600));
    let id = c.id();
    let line = c.raw(
        id,
        r#"{"id":@ID@,"method":"tools/call","params":{@M@"name":"echo__echo","arguments":{"text":"v"}}}"#,
    );
    c.single("no jsonrpc member", line, id, Expect::Rpc(-32600));
    let id = c.id();
    let line = c.raw(
        id,
        r#"{"jsonrpc":"1.0","id":@ID@,"method":"tools/call","params":{@M@"name":"echo__echo","arguments":{"text":"v"}}}"#,
    );
    c.single("jsonrpc 1.0", line, id, Expect::Rpc(-32600));
    for (name, template) in [
        (
            "not JSON: cut short",
            r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{@M@"name":"echo__echo","arguments":{"text":"cut"}}"#,
        ),
        (
            "not JSON: a number out of range",
            r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{@M@"name":"echo__add","arguments":{"a":1e400,"b":1}}}"#,
        ),
        (
            "not JSON: a lone surrogate",
            r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{@M@"name":"echo__echo","arguments":{"text":"lone \ud800 x"}}}"#,
        ),
    ] {
        let id = c.id();
        c.case(
            name,
            vec![Step::Send(c.raw(id, template)), anonymous(-32700)],
        );
    }
    let id = c.id();
    let mut line = c.raw(
        id,
        r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{@M@"name":"echo__echo","arguments":{"text":"bad "#,
    );
    line.extend(b"\xFF\xFE\"}}}");
    c.case(
        "not JSON: invalid UTF-8",
        vec![Step::Send(line), anonymous(-32700)],
    );
    let sync = c.id();
    let notification = c.raw(
        0,
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{@M@"name":"echo__echo","arguments":{"text":"unanswered"}}}"#,
    );
    c.case(
        "tools/call without an id (a notification: no answer)",
        vec![
            Step::Send(notification),
            Step::Send(c.echo(sync, "next")),
            answer(sync, text("next")),
        ],
    );

    // The protocol version of each request (2026-07-28 `_meta`), whatever the session's.
    let with_meta = |id: u64, meta: Value| {
        to_line(&json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "tools/call",
            "params": {"name": "echo__echo", "arguments": {"text": "v"}, "_meta": meta}
        }))
    };
    let id = c.id();
    let line = with_meta(
        id,
        json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        }),
    );
    c.case(
        "a 2026-07-28 request",
        vec![
            Step::Send(line),
            Step::Await {
                id: Some(json!(id)),
                expect: text("v"),
                progress: None,
                shape: Shape::Modern,
            },
        ],
    );
    let id = c.id();
    let line = with_meta(
        id,
        json!({
            "io.modelcontextprotocol/protocolVersion": "2025-11-25",
            "io.modelcontextprotocol/clientCapabilities": {}
        }),
    );
    c.case(
        "a 2025-11-25 request",
        vec![
            Step::Send(line),
            Step::Await {
                id: Some(json!(id)),
                expect: text("v"),
                progress: None,
                shape: if c.discover {
                    Shape::Legacy
                } else {
                    Shape::Session
                },
            },
        ],
    );
    let id = c.id();
    let line = with_meta(
        id,
        json!({
            "io.modelcontextprotocol/protocolVersion": "2099-01-01",
            "io.modelcontextprotocol/clientCapabilities": {}
        }),
    );
    c.single(
        "an unsupported protocol version",
        line,
        id,
        Expect::Rpc(-32022),
    );
    if c.discover {
        let id = c.id();
        let line = c.raw(
            id,
            r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{"name":"echo__echo","arguments":{"text":"v"}}}"#,
        );
        c.single(
            "a 2026-07-28 session: a request without _meta",
            line,
            id,
            Expect::Rpc(-32602),
        );
        let id = c.id();
        let line = with_meta(
            id,
            json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": 5
            }),
        );
        c.single(
            "a 2026-07-28 session: malformed capabilities",
            line,
            id,
            Expect::Rpc(-32602),
        );
    }

    // Last, a plain call: the gateway still serves after all of the above.
    let id = c.id();
    c.single(
        "success after everything",
        c.echo(id, "bye"),
        id,
        text("bye"),
    );
    c.cases
}

// ---- Running and checking ----

/// Everything one gateway wrote after its handshake, line by line, with the case it belongs
/// to; the lines of each awaited answer; and what it wrote after its stdin closed.
struct Transcript {
    lines: Vec<(usize, Vec<u8>)>,
    /// (case, step, the lines read for that step).
    awaited: Vec<(usize, usize, Range<usize>)>,
    tail: Vec<Vec<u8>>,
}

/// The `[gateway]` table and servers of the corpus gateways, logging into `dir`.
fn corpus_config(dir: &Path, fast_path: bool) -> String {
    let calls = dir.join("calls.log").display().to_string();
    let cancels = dir.join("cancel.log").display().to_string();
    format!(
        "[gateway]\nfast_path = {fast_path}\nmax_result_bytes = {MAX_RESULT_BYTES}\n{}{}timeout_ms = {SLOW_TIMEOUT_MS}\n{}",
        server_toml(
            "echo",
            "echo_server",
            &[("ECHO_CALL_LOG", &calls), ("ECHO_CANCEL_LOG", &cancels)]
        ),
        server_toml("slow", "echo_server", &[]),
        server_toml("notes", "notes_server", &[]),
    )
}

fn corpus_workdir(fast_path: bool) -> Workdir {
    let dir = tempfile::tempdir().expect("temp dir");
    let toml = corpus_config(dir.path(), fast_path);
    std::fs::write(dir.path().join("servers.toml"), toml).expect("write config");
    Workdir { dir }
}

/// Waits until `path` holds `needle` at least `count` times.
async fn wait_log(label: &str, path: &Path, needle: &str, count: usize) {
    let deadline = Instant::now() + STEP_LIMIT;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.matches(needle).count() >= count {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{label}: {} never held {needle:?} {count} times; it has {text:?}",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts a gateway (`fast_path` as given), opens a session as `era` says and replays
/// `cases`; returns whether results carry `resultType`, and the transcript.
async fn replay(
    label: &'static str,
    fast_path: bool,
    era: Era,
    cases: &[Case],
) -> (bool, Transcript) {
    let work = corpus_workdir(fast_path);
    let mut client = LineClient::spawn(label, &work.config(), &[]);
    let modern = client.handshake(era).await;
    let mut transcript = Transcript {
        lines: Vec::new(),
        awaited: Vec::new(),
        tail: Vec::new(),
    };
    for (case_index, case) in cases.iter().enumerate() {
        for (step_index, step) in case.steps.iter().enumerate() {
            match step {
                Step::Send(line) => client.send(line).await,
                Step::Await { id, .. } => {
                    let mut lines = Vec::new();
                    client.until_answer(id.as_ref(), &mut lines).await;
                    let start = transcript.lines.len();
                    transcript
                        .lines
                        .extend(lines.into_iter().map(|line| (case_index, line)));
                    transcript.awaited.push((
                        case_index,
                        step_index,
                        start..transcript.lines.len(),
                    ));
                }
                Step::WaitLog {
                    file,
                    needle,
                    count,
                } => wait_log(label, &work.path(file), needle, *count).await,
            }
        }
    }
    transcript.tail = client.finish().await;
    (modern, transcript)
}

/// Checks one transcript against what the corpus expects.
fn check(label: &str, era: Era, modern: bool, cases: &[Case], transcript: &Transcript) {
    for (case_index, step_index, range) in &transcript.awaited {
        let case = &cases[*case_index];
        let Step::Await {
            id,
            expect,
            progress,
            shape,
        } = &case.steps[*step_index]
        else {
            unreachable!("only awaits are recorded")
        };
        let lines: Vec<Value> = transcript.lines[range.clone()]
            .iter()
            .map(|(_, line)| parse(label, line))
            .collect();
        let whole = || {
            lines
                .iter()
                .map(|l| shown(l.to_string().as_bytes()))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let context = format!("{label}, {era:?}, case {:?}", case.name);
        let (answer, before) = lines.split_last().expect("an awaited answer");
        // Only progress may come before an answer, and only when asked for.
        let (token, steps) = progress.clone().unwrap_or((Value::Null, 0));
        assert_eq!(
            before.len() as u64,
            steps,
            "{context}: expected {steps} progress notifications before the answer, got:\n{}",
            whole()
        );
        for (step, notice) in before.iter().enumerate() {
            assert_eq!(
                notice["method"], "notifications/progress",
                "{context}: {notice}"
            );
            assert_eq!(
                notice["params"]["progressToken"], token,
                "{context}: {notice}"
            );
            assert_eq!(
                notice["params"]["progress"].as_f64(),
                Some((step + 1) as f64),
                "{context}: {notice}"
            );
            assert_eq!(
                notice["params"]["total"].as_f64(),
                Some(steps as f64),
                "{context}: {notice}"
            );
        }
        match id {
            Some(id) => assert_eq!(&answer["id"], id, "{context}: {answer}"),
            None => assert!(
                answer.get("id").is_none_or(Value::is_null),
                "{context}: {answer}"
            ),
        }
        let result = &answer["result"];
        let is_result = !matches!(expect, Expect::Rpc(_) | Expect::Empty);
        if is_result {
            assert!(result.is_object(), "{context}: expected a result: {answer}");
            let wants_type = match shape {
                Shape::Session => modern,
                Shape::Legacy => false,
                Shape::Modern => true,
            };
            if wants_type {
                assert_eq!(result["resultType"], "complete", "{context}: {answer}");
            } else {
                assert!(result.get("resultType").is_none(), "{context}: {answer}");
            }
        }
        let first_text = result["content"][0]["text"].as_str();
        let toolgate_code = result["_meta"]["toolgate/error"]["code"].as_str();
        match expect {
            Expect::Text(expected) => {
                assert_eq!(result["isError"], false, "{context}: {}", whole());
                assert!(
                    first_text == Some(expected.as_str()),
                    "{context}: expected the text {}, got {}",
                    shown(expected.as_bytes()),
                    whole()
                );
            }
            Expect::ToolError(expected) => {
                assert_eq!(result["isError"], true, "{context}: {answer}");
                assert_eq!(first_text, Some(expected.as_str()), "{context}: {answer}");
                assert_eq!(toolgate_code, None, "{context}: {answer}");
            }
            Expect::Code(code) => {
                assert_eq!(result["isError"], true, "{context}: {answer}");
                assert_eq!(toolgate_code, Some(*code), "{context}: {answer}");
            }
            Expect::Rpc(code) => {
                assert_eq!(answer["error"]["code"], *code, "{context}: {answer}");
                assert!(answer.get("result").is_none(), "{context}: {answer}");
            }
            Expect::Empty => assert_eq!(answer["result"], json!({}), "{context}: {answer}"),
        }
    }
    for case in cases {
        for id in &case.silent {
            let answered = transcript
                .lines
                .iter()
                .map(|(_, line)| line)
                .chain(&transcript.tail)
                .find(|line| is_answer_to(&parse(label, line), Some(id)));
            assert!(
                answered.is_none(),
                "{label}, {era:?}, case {:?}: the cancelled request {id} was answered: {}",
                case.name,
                shown(answered.unwrap())
            );
        }
    }
    assert!(
        transcript.tail.is_empty(),
        "{label}, {era:?}: lines after stdin closed: {:?}",
        transcript.tail.iter().map(|l| shown(l)).collect::<Vec<_>>()
    );
}

/// Asserts that the two transcripts are the same bytes; shows the first difference.
fn assert_same_bytes(era: Era, cases: &[Case], typed: &Transcript, fast: &Transcript) {
    let all = |t: &Transcript| -> Vec<(String, Vec<u8>)> {
        t.lines
            .iter()
            .map(|(case, line)| (cases[*case].name.to_owned(), line.clone()))
            .chain(
                t.tail
                    .iter()
                    .map(|line| ("(after stdin closed)".to_owned(), line.clone())),
            )
            .collect()
    };
    let (typed, fast) = (all(typed), all(fast));
    for (index, ((case, want), (_, got))) in typed.iter().zip(&fast).enumerate() {
        if want == got {
            continue;
        }
        let at = want.iter().zip(got).take_while(|(a, b)| a == b).count();
        let from = at.saturating_sub(120);
        panic!(
            "{era:?}: line {index} (case {case:?}) differs from byte {at} on \
             ({} and {} bytes long)\n typed path: …{}\n fast path:  …{}",
            want.len(),
            got.len(),
            shown(&want[from..(at + 240).min(want.len())]),
            shown(&got[from.min(got.len())..(at + 240).min(got.len())]),
        );
    }
    let extra = |lines: &[(String, Vec<u8>)]| {
        lines
            .iter()
            .map(|(case, line)| format!("  [{case}] {}", shown(line)))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        typed.len() == fast.len(),
        "{era:?}: the typed path wrote {} lines, the fast path {}; the extra ones:\n{}",
        typed.len(),
        fast.len(),
        if typed.len() > fast.len() {
            extra(&typed[fast.len()..])
        } else {
            extra(&fast[typed.len()..])
        }
    );
}

#[tokio::test]
async fn the_fast_path_and_the_typed_path_answer_byte_for_byte_alike() {
    for era in [
        Era::Initialize("2025-11-25"),
        Era::Initialize("2026-07-28"),
        Era::Discover,
    ] {
        let cases = corpus(era);
        let ((typed_modern, typed), (fast_modern, fast)) = tokio::join!(
            replay("typed path", false, era, &cases),
            replay("fast path", true, era, &cases),
        );
        assert_eq!(
            typed_modern, fast_modern,
            "{era:?}: the handshakes disagree"
        );
        // The corpus is right about the typed path (so it tests something) …
        check("typed path", era, typed_modern, &cases, &typed);
        // … and the fast path writes the same bytes.
        assert_same_bytes(era, &cases, &typed, &fast);
        check("fast path", era, fast_modern, &cases, &fast);
    }
}

// ---- Metrics ----

/// The value of `series` in a Prometheus text body: the sum of all its label sets when it
/// names a metric alone (`toolgate_fast_path_calls_total`), else that one series
/// (`toolgate_calls_total{tool="echo__echo"}`); `None` when the body has none.
fn metric(body: &str, series: &str) -> Option<f64> {
    let values: Vec<f64> = body
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (name, value) = line.trim().rsplit_once(' ')?;
            let matches = if series.contains('{') {
                name == series
            } else {
                name.split('{').next() == Some(series)
            };
            matches.then(|| value.trim().parse::<f64>().ok())?
        })
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

async fn scrape(url: &str) -> String {
    let response = tokio::time::timeout(STEP_LIMIT, reqwest::Client::new().get(url).send())
        .await
        .expect("/metrics answers in time")
        .expect("GET /metrics");
    assert_eq!(response.status(), 200, "{response:?}");
    response.text().await.expect("the metrics body")
}

/// Scrapes until `done` holds for the body (within 10 s), and returns that body.
async fn scrape_until(url: &str, what: &str, done: impl Fn(&str) -> bool) -> String {
    const LIMIT: Duration = Duration::from_secs(10);
    let deadline = Instant::now() + LIMIT;
    loop {
        let body = scrape(url).await;
        if done(&body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "/metrics never showed {what} within {LIMIT:?}:\n{body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const FAST_CALLS: &str = "toolgate_fast_path_calls_total";
const RAW_UPSTREAM_CALLS: &str = "toolgate_raw_upstream_calls_total";
const ECHO_CALLS: &str = "toolgate_calls_total{tool=\"echo__echo\"}";

#[tokio::test]
async fn tools_calls_take_the_fast_path_and_count_in_metrics() {
    const CALLS: u64 = 5;
    // `fast_path` left out is the default: on.
    for (gateway, fast_path) in [("[gateway]\nfast_path = false\n", false), ("", true)] {
        let label = if fast_path { "fast path" } else { "typed path" };
        let work = Workdir::new(&format!(
            "{gateway}{}",
            server_toml("echo", "echo_server", &[])
        ));
        let mut client = LineClient::spawn(label, &work.config(), &["--metrics", "127.0.0.1:0"]);
        let url = client.metrics_url().await;
        client.handshake(Era::Initialize("2025-11-25")).await;

        let before = scrape(&url).await;
        let fast_before = metric(&before, FAST_CALLS).unwrap_or(0.0);
        let raw_before = metric(&before, RAW_UPSTREAM_CALLS).unwrap_or(0.0);
        assert_eq!(fast_before, 0.0, "{label}: no call yet:\n{before}");
        assert_eq!(raw_before, 0.0, "{label}: no call yet:\n{before}");

        for n in 0..CALLS {
            let id = 10 + n;
            let text = format!("call {n}");
            let line = to_line(&call_request(id, "echo__echo", json!({"text": text})));
            client.send(&line).await;
            let mut lines = Vec::new();
            client.until_answer(Some(&json!(id)), &mut lines).await;
            let answer = parse(label, lines.last().expect("an answer"));
            assert_eq!(
                answer["result"]["content"][0]["text"], text,
                "{label}: {answer}"
            );
        }

        let calls = CALLS as f64;
        // Every call is counted as a call, whichever path answered it.
        let wanted = if fast_path {
            format!("{ECHO_CALLS}, {FAST_CALLS} and {RAW_UPSTREAM_CALLS} at {CALLS} or more")
        } else {
            format!("{ECHO_CALLS} at {CALLS}")
        };
        let body = scrape_until(&url, &wanted, |body| {
            metric(body, ECHO_CALLS) == Some(calls)
                && (!fast_path
                    || (metric(body, FAST_CALLS) >= Some(calls)
                        && metric(body, RAW_UPSTREAM_CALLS) >= Some(calls)))
        })
        .await;
        let fast = metric(&body, FAST_CALLS).unwrap_or(0.0);
        let raw = metric(&body, RAW_UPSTREAM_CALLS).unwrap_or(0.0);
        if fast_path {
            assert!(
                body.contains(&format!("# TYPE {FAST_CALLS} counter")),
                "{label}: {FAST_CALLS} is a counter:\n{body}"
            );
            assert!(
                body.contains(&format!("# TYPE {RAW_UPSTREAM_CALLS} counter")),
                "{label}: {RAW_UPSTREAM_CALLS} is a counter:\n{body}"
            );
            assert_eq!(fast - fast_before, calls, "{label}: {FAST_CALLS}:\n{body}");
            assert_eq!(
                raw - raw_before,
                calls,
                "{label}: {RAW_UPSTREAM_CALLS}:\n{body}"
            );
        } else {
            // Off means off: absent or 0, never counted.
            assert_eq!(
                fast, 0.0,
                "{label}: {FAST_CALLS} with fast_path = false:\n{body}"
            );
            assert_eq!(
                raw, 0.0,
                "{label}: {RAW_UPSTREAM_CALLS} with fast_path = false:\n{body}"
            );
        }
        let rest = client.finish().await;
        assert!(
            rest.is_empty(),
            "{label}: {:?}",
            rest.iter().map(|l| shown(l)).collect::<Vec<_>>()
        );
    }
}
