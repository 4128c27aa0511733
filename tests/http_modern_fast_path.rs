//! Over HTTP, a 2026-07-28 call taken by the modern fast path gets what rmcp's path gives: a log message before the answer, an upstream's input round and its retry, an approval round, and a cancel when the client goes away; `/metrics` counts the calls it took.
//!
//! Each test runs the same requests against two gateways whose configs differ only in
//! `[gateway] fast_path`, and compares what comes back: HTTP status, content type and every
//! message as bytes (a `requestState` aside, which is random). `tests/fast_path.rs` replays
//! the whole corpus the same way; these are the cases it cannot express.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

const LIMIT: Duration = Duration::from_secs(20);
const FAST_CALLS: &str = "toolgate_fast_path_calls_total";

/// The two gateways, typed path first, over the same servers.
async fn gateways(servers: &str) -> [(Workdir, HttpGateway); 2] {
    let mut both = Vec::new();
    for gateway in ["[gateway]\nfast_path = false\n", ""] {
        let work = Workdir::new("");
        let toml = format!(
            "{gateway}{}",
            servers.replace("@WORK@", &work.path("").display().to_string())
        );
        std::fs::write(work.config(), toml).expect("write config");
        let served = HttpGateway::start_with(&work, &["--metrics", "127.0.0.1:0"]).await;
        ready(&served).await;
        both.push((work, served));
    }
    let [typed, fast] = <[_; 2]>::try_from(both).unwrap_or_else(|_| unreachable!());
    [typed, fast]
}

/// Waits until every server is in (`/readyz` answers 200): a call sent before would find
/// its tool unlisted, which the fast path leaves to rmcp.
async fn ready(gateway: &HttpGateway) {
    let url = gateway.metrics_url.as_deref().expect("a metrics URL");
    let readyz = url.replace("/metrics", "/readyz");
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        if let Ok(response) = reqwest::get(&readyz).await
            && response.status() == 200
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not ready: {readyz}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `_meta` of a 2026-07-28 request; `elicitation` declares that capability.
fn meta(elicitation: bool) -> Value {
    let capabilities = if elicitation {
        json!({"elicitation": {}})
    } else {
        json!({})
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}
    })
}

fn call(id: u64, name: &str, arguments: Value, elicitation: bool, extra: Value) -> Value {
    let mut params = json!({"name": name, "arguments": arguments, "_meta": meta(elicitation)});
    if let (Some(params), Some(extra)) = (params.as_object_mut(), extra.as_object()) {
        params.extend(extra.clone());
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

/// What a POST got: status, content type, and each message (an SSE event's data, or the
/// JSON body).
#[derive(Debug, PartialEq)]
struct Got {
    status: u16,
    kind: String,
    messages: Vec<String>,
}

impl Got {
    fn last(&self) -> Value {
        let last = self.messages.last().expect("a message");
        serde_json::from_str(last).expect("JSON")
    }
}

/// POSTs `body` as a 2026-07-28 client does (the SEP-2243 headers from the body).
async fn post(url: &str, body: &Value) -> Got {
    let name = body["params"]["name"].as_str().unwrap_or_default();
    let headers = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", name),
    ];
    let bytes = serde_json::to_vec(body).expect("encode");
    let response = tokio::time::timeout(LIMIT, mcp_post_raw(url, None, &headers, bytes))
        .await
        .expect("a response in time");
    let status = response.status().as_u16();
    let kind = header_text(&response, "content-type");
    let text = tokio::time::timeout(LIMIT, response.text())
        .await
        .expect("the body in time")
        .expect("the body");
    let messages = if kind.starts_with("text/event-stream") {
        text.split("\n\n")
            .filter_map(|event| {
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|line| line.strip_prefix("data: "))
                    .collect();
                (!data.is_empty()).then(|| data.join("\n"))
            })
            .collect()
    } else {
        vec![text]
    };
    Got {
        status,
        kind,
        messages,
    }
}

async fn fast_calls(gateway: &HttpGateway) -> u64 {
    let url = gateway.metrics_url.as_deref().expect("a metrics URL");
    metric(url, FAST_CALLS).await.unwrap_or(0)
}

/// Asserts that the typed gateway took no call on a fast path and the fast one `taken`.
async fn counted(typed: &HttpGateway, fast: &HttpGateway, taken: u64) {
    assert_eq!(fast_calls(typed).await, 0, "fast_path = false is off");
    assert_eq!(
        fast_calls(fast).await,
        taken,
        "calls taken by the fast path"
    );
}

#[tokio::test]
async fn a_log_message_before_the_answer_opens_the_same_stream() {
    let [(_, typed), (_, fast)] = gateways(&server_toml("notes", "notes_server", &[])).await;
    let request = call(
        1,
        "notes__log",
        json!({"message": "from notes"}),
        false,
        json!({}),
    );
    let (want, got) = (
        post(&typed.url, &request).await,
        post(&fast.url, &request).await,
    );
    assert_eq!(want, got, "the typed path's response, then the fast path's");
    assert_eq!(got.status, 200);
    assert!(got.kind.starts_with("text/event-stream"), "{got:?}");
    assert_eq!(got.messages.len(), 2, "{got:?}");
    let log: Value = serde_json::from_str(&got.messages[0]).expect("JSON");
    assert_eq!(log["method"], "notifications/message", "{log}");
    // `{server}/{logger}`: notes_server names its own logger `notes`.
    assert_eq!(log["params"]["logger"], "notes/notes", "{log}");
    assert_eq!(got.last()["result"]["resultType"], "complete", "{got:?}");
    counted(&typed, &fast, 1).await;
}

/// The one input request of an `InputRequiredResult`: its key and the `requestState`.
fn asked(got: &Got) -> (String, String) {
    let answer = got.last();
    let result = &answer["result"];
    assert_eq!(result["resultType"], "input_required", "{answer}");
    let key = result["inputRequests"]
        .as_object()
        .and_then(|r| r.keys().next().cloned())
        .unwrap_or_else(|| panic!("an input request: {answer}"));
    let state = result["requestState"].as_str().expect("requestState");
    (key, state.to_owned())
}

/// The response with its `requestState` blanked, to compare.
fn without_state(got: &Got) -> Got {
    let mut answer = got.last();
    answer["result"]["requestState"] = json!("…");
    Got {
        status: got.status,
        kind: got.kind.clone(),
        messages: vec![answer.to_string()],
    }
}

/// Asks, then retries with `response`; returns both answers.
async fn round(url: &str, name: &str, arguments: &Value, response: &Value) -> (Got, Got) {
    let first = post(url, &call(1, name, arguments.clone(), true, json!({}))).await;
    let (key, state) = asked(&first);
    let extra = json!({"requestState": state, "inputResponses": {key: response}});
    let retry = post(url, &call(2, name, arguments.clone(), true, extra)).await;
    (first, retry)
}

#[tokio::test]
async fn an_upstream_elicitation_is_a_round_and_its_retry_ends_the_call() {
    let [(_, typed), (_, fast)] = gateways(&server_toml("notes", "notes_server", &[])).await;
    let ask = json!({"question": "ok?"});
    let accept = json!({"action": "accept", "content": {"answer": "yes"}});
    let (want_first, want_retry) = round(&typed.url, "notes__ask_user", &ask, &accept).await;
    let (got_first, got_retry) = round(&fast.url, "notes__ask_user", &ask, &accept).await;
    assert_eq!(without_state(&want_first), without_state(&got_first));
    assert_eq!(got_first.kind, "application/json");
    assert_eq!(want_retry, got_retry);
    assert_eq!(
        got_retry.last()["result"]["content"][0]["text"],
        "user Accept: {\"answer\":\"yes\"}",
        "{got_retry:?}"
    );
    // The first request was taken; its retry (a `requestState`) went to rmcp, which
    // continued the exchange the fast path had parked.
    counted(&typed, &fast, 1).await;
}

#[tokio::test]
async fn an_approval_is_a_round_too() {
    let hook = toml_string(&example("policy_hook").display().to_string());
    let servers = format!(
        "{}[[hooks]]\nstage = \"pre\"\ncommand = [\"env\", \"POLICY_ASK=echo__echo\", {hook}]\ntimeout_ms = 3000\n",
        server_toml("echo", "echo_server", &[])
    );
    let [(_, typed), (_, fast)] = gateways(&servers).await;
    let text = json!({"text": "approved"});
    let accept = json!({"action": "accept", "content": {}});
    let (want_first, want_retry) = round(&typed.url, "echo__echo", &text, &accept).await;
    let (got_first, got_retry) = round(&fast.url, "echo__echo", &text, &accept).await;
    assert_eq!(without_state(&want_first), without_state(&got_first));
    assert_eq!(want_retry, got_retry);
    assert_eq!(
        got_retry.last()["result"]["content"][0]["text"],
        "approved",
        "{got_retry:?}"
    );
    // Without elicitation declared there is no round: the call is denied, on both paths.
    let bare = call(3, "echo__echo", text.clone(), false, json!({}));
    let (want, got) = (post(&typed.url, &bare).await, post(&fast.url, &bare).await);
    assert_eq!(want, got);
    assert_eq!(got.last()["result"]["isError"], true, "{got:?}");
    counted(&typed, &fast, 2).await;
}

#[tokio::test]
async fn a_client_that_goes_away_cancels_the_call_upstream() {
    let servers = server_toml(
        "echo",
        "echo_server",
        &[
            ("ECHO_CANCEL_LOG", "@WORK@/cancel.log"),
            ("ECHO_CALL_LOG", "@WORK@/calls.log"),
        ],
    );
    let [(typed_work, typed), (fast_work, fast)] = gateways(&servers).await;
    for (work, gateway) in [(&typed_work, &typed), (&fast_work, &fast)] {
        let request = call(1, "echo__sleep", json!({"ms": 30_000}), false, json!({}));
        let url = gateway.url.clone();
        let posting = tokio::spawn(async move { post(&url, &request).await });
        wait_for_file(&work.path("calls.log"), "\"ms\":30000", LIMIT).await;
        // The client gives up: its connection closes with the request unanswered.
        posting.abort();
        wait_for_file(&work.path("cancel.log"), "cancelled sleep", LIMIT).await;
        // The request's session is forgotten once nothing can reach it.
        let url = gateway.metrics_url.as_deref().expect("a metrics URL");
        let deadline = tokio::time::Instant::now() + LIMIT;
        while metric(url, "toolgate_client_sessions").await != Some(0) {
            assert!(tokio::time::Instant::now() < deadline, "sessions left");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // A call whose client went away is not answered, so not counted (as on the other fast
    // paths); the same request answered is.
    counted(&typed, &fast, 0).await;
    let short = call(2, "echo__sleep", json!({"ms": 10}), false, json!({}));
    let (want, got) = (
        post(&typed.url, &short).await,
        post(&fast.url, &short).await,
    );
    assert_eq!(want, got);
    counted(&typed, &fast, 1).await;
}
