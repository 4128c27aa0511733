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
//! Over HTTP the corpus is replayed on a 2025-11-25 session, on a session that asked
//! `initialize` for 2026-07-28, and without a session in the 2026-07-28 lifecycle, whose
//! calls HTTP's modern fast path takes (`src/downstream/http/modern.rs`); the cases a
//! session-less request cannot express are left out there (`http::SESSION_ONLY`).
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

#[path = "fast_path/cases.rs"]
mod cases;
#[path = "fast_path/check.rs"]
mod check;
#[path = "fast_path/client.rs"]
mod client;
#[path = "fast_path/corpus.rs"]
mod corpus;
#[path = "fast_path/http.rs"]
mod http;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

use cases::corpus;
use check::{assert_same_bytes, check, replay};
use client::{LineClient, parse, shown, to_line};
use corpus::Era;

/// Longest wait for one answer, one log line or one scrape (debug builds, a shared machine).
const STEP_LIMIT: Duration = Duration::from_secs(30);
/// Longest wait for a gateway to start and finish its handshake.
const START_LIMIT: Duration = Duration::from_secs(60);
/// `max_result_bytes` of the corpus gateways: the large result fits, the oversized one not.
const MAX_RESULT_BYTES: usize = 300_000;
/// `timeout_ms` of the `slow` server.
const SLOW_TIMEOUT_MS: u64 = 500;

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

/// The same over streamable HTTP: each line a POST on one session, every message the
/// client reads compared (SSE event data or JSON body), and every POST's status and content
/// type; the fast path must really have answered the calls (`/metrics`).
#[tokio::test]
async fn over_http_the_fast_path_and_the_typed_path_answer_alike() {
    for era in [
        Era::Initialize("2025-11-25"),
        Era::Initialize("2026-07-28"),
        Era::Discover,
    ] {
        let mut cases = corpus(era);
        cases.retain(|case| !http::STDIO_ONLY.contains(&case.name));
        if matches!(era, Era::Discover) {
            cases.retain(|case| !http::SESSION_ONLY.contains(&case.name));
        }
        let (typed, fast) = tokio::join!(
            http::replay_http("typed path, HTTP", false, era, &cases),
            http::replay_http("fast path, HTTP", true, era, &cases),
        );
        assert_eq!(
            typed.modern, fast.modern,
            "{era:?}: the handshakes disagree"
        );
        let checkable = |run: &http::HttpRun| http::checkable(era, &cases, &run.transcript);
        check(
            "typed path, HTTP",
            era,
            typed.modern,
            &cases,
            &checkable(&typed),
        );
        assert_same_bytes(era, &cases, &typed.transcript, &fast.transcript);
        http::assert_same_heads(era, &cases, &typed.heads, &fast.heads);
        check(
            "fast path, HTTP",
            era,
            fast.modern,
            &cases,
            &checkable(&fast),
        );
        eprintln!("{era:?}: fast path calls {}", fast.fast_calls);
        assert_eq!(typed.fast_calls, 0.0, "{era:?}: fast_path = false is off");
        assert!(
            fast.fast_calls >= 20.0,
            "{era:?}: the fast path answered only {} calls",
            fast.fast_calls
        );
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
