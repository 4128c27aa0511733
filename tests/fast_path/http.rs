//! Replaying the corpus over streamable HTTP: each line a POST on one MCP session (or, in the 2026-07-28 lifecycle, on its own), what comes back read as the client reads it.
//!
//! Without a session each POST carries what a 2026-07-28 client sends with it: the version
//! its `_meta` names as `MCP-Protocol-Version`, and the SEP-2243 `Mcp-Method` and
//! `Mcp-Name` taken from the body.
//!
//! Every POST runs in its own task and is read to its end: each SSE event's data (its
//! `data:` lines joined with newlines) or a JSON body is one line of the transcript, in the
//! order they arrive, so the stdio transcript checks and comparisons apply unchanged. The
//! HTTP status and content type of every POST are kept apart, to be compared too; SSE event
//! ids and the priming event are not compared (the fast path sends none, see
//! `src/downstream/http/fast.rs`).

use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::check::{Transcript, corpus_workdir, wait_log};
use crate::client::{is_answer_to, parse, shown};
use crate::common::{HttpGateway, initialize_request, jsonrpc_answer, mcp_post};
use crate::corpus::{Case, Era, Step};
use crate::{STEP_LIMIT, metric, scrape};

/// Cases whose lines mean something else as a POST body, left out over HTTP (both paths
/// answer them alike there, before any fast path: the front or rmcp refuses them).
pub(crate) const STDIO_ONLY: &[&str] = &[
    // A BOM is not JSON text in a body: refused -32700 without an id.
    "a byte order mark",
];

/// Cases that need a session, left out of the 2026-07-28 lifecycle over HTTP, where every
/// request stands alone.
pub(crate) const SESSION_ONLY: &[&str] = &[
    // A request is cancelled by closing its response; a cancel notification reaches no one.
    "client cancel of a call in flight",
    // Ids are checked against the calls in flight of a session.
    "duplicate id of a call in flight",
    // A lone answer is one JSON body, whose head comes with it: the replay sends the next
    // request once a response has begun, so nothing can overtake.
    "a quick call overtakes a slow one",
];

/// Cases the HTTP front answers otherwise than stdio does, before any fast path (so alike on
/// both paths): their answers are compared between the paths, not checked against the
/// corpus's stdio expectations.
pub(crate) const ANSWERED_OTHERWISE: &[&str] = &[
    // The front checks `tools/call` params first: -32602, where stdio's rmcp says -32600.
    "params: an array",
    // rmcp holds a request's `_meta` version to the `MCP-Protocol-Version` header: -32020.
    "a 2026-07-28 request",
    "an unsupported protocol version",
];

/// Cases rmcp answers otherwise for a request without a session (2026-07-28) than stdio
/// does, before any fast path.
pub(crate) const ANSWERED_OTHERWISE_ALONE: &[&str] = &[
    // The SEP-2243 headers come from the body as serde reads it (the last name), which
    // rmcp's own reading of the body does not match: -32601 for `tools/call`.
    "a duplicate name key",
];

/// `transcript` without the awaited answers of the [`ANSWERED_OTHERWISE`] cases (and, for
/// `era` without a session, [`ANSWERED_OTHERWISE_ALONE`]), for the corpus checks.
pub(crate) fn checkable(era: Era, cases: &[Case], transcript: &Transcript) -> Transcript {
    let alone = matches!(era, Era::Discover);
    Transcript {
        lines: transcript.lines.clone(),
        awaited: transcript
            .awaited
            .iter()
            .filter(|(case, _, _)| !ANSWERED_OTHERWISE.contains(&cases[*case].name))
            .filter(|(case, _, _)| !alone || !ANSWERED_OTHERWISE_ALONE.contains(&cases[*case].name))
            .cloned()
            .collect(),
        tail: transcript.tail.clone(),
    }
}

/// What a POST got besides its messages: (case, HTTP status, content type).
pub(crate) type Heads = Vec<(usize, u16, String)>;

/// One HTTP replay: whether results carry `resultType`, the transcript, the heads, and the
/// fast-path calls `/metrics` counted.
pub(crate) struct HttpRun {
    pub(crate) modern: bool,
    pub(crate) transcript: Transcript,
    pub(crate) heads: Heads,
    pub(crate) fast_calls: f64,
}

/// Starts `serve --http` (`fast_path` as given), opens a session as `era` says (only
/// `initialize` eras: HTTP sessions) and replays `cases`.
pub(crate) async fn replay_http(
    label: &'static str,
    fast_path: bool,
    era: Era,
    cases: &[Case],
) -> HttpRun {
    let work = corpus_workdir(fast_path);
    let gateway = HttpGateway::start_with(&work, &["--metrics", "127.0.0.1:0"]).await;
    let url = gateway.url.clone();
    let (session, negotiated) = match era {
        Era::Initialize(version) => {
            let (session, negotiated) = open_session(label, &url, version).await;
            (Some(session), negotiated)
        }
        // The 2026-07-28 lifecycle over HTTP: no session, every request on its own.
        Era::Discover => (None, "2026-07-28".to_owned()),
    };
    let (lines_tx, mut lines_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let (heads_tx, mut heads_rx) = mpsc::unbounded_channel::<(usize, u16, String)>();
    let mut transcript = Transcript {
        lines: Vec::new(),
        awaited: Vec::new(),
        tail: Vec::new(),
    };
    let mut posts = Vec::new();
    for (case_index, case) in cases.iter().enumerate() {
        for (step_index, step) in case.steps.iter().enumerate() {
            match step {
                Step::Send(line) => {
                    let (url, session, negotiated) =
                        (url.clone(), session.clone(), negotiated.clone());
                    let (lines, heads) = (lines_tx.clone(), heads_tx.clone());
                    let body = line.clone();
                    let (headed, head) = tokio::sync::oneshot::channel();
                    posts.push(tokio::spawn(async move {
                        post(
                            &url,
                            session.as_deref(),
                            &negotiated,
                            body,
                            case_index,
                            (headed, lines, heads),
                        )
                        .await;
                    }));
                    // As lines on a pipe: the next request goes once this one is in (its
                    // response has begun).
                    tokio::time::timeout(STEP_LIMIT, head)
                        .await
                        .unwrap_or_else(|_| {
                            panic!(
                                "{label}: no response within {STEP_LIMIT:?} (case {:?})",
                                case.name
                            )
                        })
                        .expect("the posting task answers");
                }
                Step::Await { id, .. } => {
                    let start = transcript.lines.len();
                    let waiting_for = match id {
                        Some(id) => format!("the answer to id {id}"),
                        None => "an answer without an id".to_owned(),
                    };
                    loop {
                        let line = tokio::time::timeout(STEP_LIMIT, lines_rx.recv())
                            .await
                            .unwrap_or_else(|_| {
                                panic!("{label}: nothing within {STEP_LIMIT:?} while waiting for {waiting_for} (case {:?})", case.name)
                            })
                            .expect("the posting tasks hold a sender");
                        let done = is_answer_to(&parse(label, &line), id.as_ref());
                        transcript.lines.push((case_index, line));
                        if done {
                            break;
                        }
                    }
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
    // Every response read to its end: whatever came after the last awaited answer is the
    // tail (nothing, when every request was answered once).
    for post in posts {
        tokio::time::timeout(STEP_LIMIT, post)
            .await
            .unwrap_or_else(|_| panic!("{label}: a response did not end within {STEP_LIMIT:?}"))
            .expect("a posting task");
    }
    drop(lines_tx);
    drop(heads_tx);
    while let Some(line) = lines_rx.recv().await {
        transcript.tail.push(line);
    }
    let mut heads = Vec::new();
    while let Some(head) = heads_rx.recv().await {
        heads.push(head);
    }
    heads.sort();
    let metrics = gateway
        .metrics_url
        .clone()
        .unwrap_or_else(|| panic!("{label}: no metrics URL"));
    let fast_calls = metric(&scrape(&metrics).await, crate::FAST_CALLS).unwrap_or(0.0);
    HttpRun {
        modern: negotiated == "2026-07-28",
        transcript,
        heads,
        fast_calls,
    }
}

/// `initialize` asking for `version`, then `notifications/initialized`: the session id and
/// the version the gateway chose.
async fn open_session(label: &str, url: &str, version: &str) -> (String, String) {
    let mut request = initialize_request(0);
    request["params"]["protocolVersion"] = json!(version);
    let response = mcp_post(url, None, &[], &request).await;
    assert_eq!(response.status(), 200, "{label}: initialize: {response:?}");
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("{label}: no session id"))
        .to_owned();
    let answer = jsonrpc_answer(response).await;
    let negotiated = answer["result"]["protocolVersion"]
        .as_str()
        .unwrap_or_else(|| panic!("{label}: initialize failed: {answer}"))
        .to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let headers = [("mcp-protocol-version", negotiated.as_str())];
    let response = mcp_post(url, Some(&session), &headers, &initialized).await;
    assert_eq!(response.status(), 202, "{label}: notifications/initialized");
    // The handler registers the session for the fast path when it has handled that
    // notification, after the 202: a ping answered means it has.
    let ping = json!({"jsonrpc": "2.0", "id": "handshake-ping", "method": "ping"});
    let answer = jsonrpc_answer(mcp_post(url, Some(&session), &headers, &ping).await).await;
    assert_eq!(answer["result"], json!({}), "{label}: ping: {answer}");
    (session, negotiated)
}

/// Where a POST tells that its response began, and sends its messages and its head.
type Outlets = (
    tokio::sync::oneshot::Sender<()>,
    mpsc::UnboundedSender<Vec<u8>>,
    mpsc::UnboundedSender<(usize, u16, String)>,
);

/// POSTs one line and sends on every message of the response, in order. Without a session
/// (2026-07-28), with the SEP-2243 headers a client of that version sends.
async fn post(
    url: &str,
    session: Option<&str>,
    version: &str,
    body: Vec<u8>,
    case: usize,
    (headed, lines, heads): Outlets,
) {
    let mut headers = vec![("mcp-protocol-version", version.to_owned())];
    if session.is_none() {
        // A request alone names its version in `_meta` and in the header alike.
        if let Some(named) = meta_version(&body) {
            headers[0].1 = named;
        }
        headers.extend(standard_headers(&body));
    }
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let mut response = crate::common::mcp_post_raw(url, session, &headers, body).await;
    let status = response.status().as_u16();
    let kind = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let _ = heads.send((case, status, kind.clone()));
    let _ = headed.send(());
    if kind.starts_with("text/event-stream") {
        let mut buffer: Vec<u8> = Vec::new();
        while let Some(chunk) = response.chunk().await.expect("read the SSE stream") {
            buffer.extend_from_slice(&chunk);
            while let Some(end) = find(&buffer, b"\n\n") {
                let event: Vec<u8> = buffer.drain(..end + 2).collect();
                if let Some(data) = sse_data(&event) {
                    let _ = lines.send(data);
                }
            }
        }
    } else {
        let bytes = response.bytes().await.expect("read the body");
        if !bytes.is_empty() {
            assert!(
                serde_json::from_slice::<Value>(&bytes).is_ok(),
                "a {status} body that is not JSON: {}",
                shown(&bytes)
            );
            let _ = lines.send(bytes.to_vec());
        }
    }
}

/// The protocol version a request's `_meta` names.
fn meta_version(body: &[u8]) -> Option<String> {
    let message: Value = serde_json::from_slice(body).ok()?;
    let version = message.get("params")?.get("_meta")?;
    Some(
        version
            .get("io.modelcontextprotocol/protocolVersion")?
            .as_str()?
            .to_owned(),
    )
}

/// `Mcp-Method`, and `Mcp-Name` for a call, as rmcp's client writes them for `body` (a name
/// that is not plain visible ASCII in SEP-2243's Base64 form); none for a body that is not
/// a JSON object with a method.
fn standard_headers(body: &[u8]) -> Vec<(&'static str, String)> {
    use base64::Engine;
    let Ok(Value::Object(message)) = serde_json::from_slice::<Value>(body) else {
        return Vec::new();
    };
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        return Vec::new();
    };
    let mut headers = vec![("mcp-method", method.to_owned())];
    if method == "tools/call"
        && let Some(name) = message
            .get("params")
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
    {
        let plain = !name.is_empty()
            && name.bytes().all(|b| (0x20..0x7f).contains(&b))
            && !name.starts_with(' ')
            && !name.ends_with(' ');
        let value = if plain {
            name.to_owned()
        } else {
            let encoded = base64::engine::general_purpose::STANDARD.encode(name);
            format!("=?base64?{encoded}?=")
        };
        headers.push(("mcp-name", value));
    }
    headers
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The data of one SSE event (its `data:` lines joined with `\n`); `None` for an event with
/// no data or empty data (the priming event, keep-alive comments).
fn sse_data(event: &[u8]) -> Option<Vec<u8>> {
    let mut data: Option<Vec<u8>> = None;
    for line in event.split(|b| *b == b'\n') {
        let Some(rest) = line.strip_prefix(b"data:") else {
            continue;
        };
        let rest = rest.strip_prefix(b" ").unwrap_or(rest);
        match &mut data {
            Some(data) => {
                data.push(b'\n');
                data.extend_from_slice(rest);
            }
            None => data = Some(rest.to_vec()),
        }
    }
    data.filter(|d| !d.is_empty())
}

/// Asserts that every POST got the same status and content type on both paths.
pub(crate) fn assert_same_heads(era: Era, cases: &[Case], typed: &Heads, fast: &Heads) {
    assert_eq!(typed.len(), fast.len(), "{era:?}: as many responses");
    for (want, got) in typed.iter().zip(fast) {
        assert_eq!(
            want, got,
            "{era:?}, case {:?}: (case, status, content type) differ",
            cases[want.0].name
        );
    }
}
