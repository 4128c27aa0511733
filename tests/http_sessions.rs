//! Live MCP sessions are capped per gateway (`max_sessions`, default 1000) and per profile
//! (`max_sessions_per_profile`): beyond the cap `initialize` gets 503 with a JSON-RPC error
//! and one warning is logged. Idle sessions expire after `session_idle_secs` and give their
//! place back, as do closed ones.

mod common;

use std::time::Duration;

use common::*;
use futures::{StreamExt, stream};
use serde_json::Value;

fn echo_with(gateway: &str) -> Workdir {
    Workdir::new(&format!(
        "{gateway}{}",
        server_toml("echo", "echo_server", &[])
    ))
}

/// `initialize` without a session: the response status and its JSON-RPC answer.
async fn try_initialize(url: &str) -> (u16, Value, Option<String>) {
    let response = mcp_post(url, None, &[], &initialize_request(1)).await;
    let status = response.status().as_u16();
    if status == 503 {
        let retry = response
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_owned());
        assert!(retry.is_some(), "a 503 says when to retry");
    }
    let session = response
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, jsonrpc_answer(response).await, session)
}

fn assert_full(answer: &Value, key: &str) {
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("too many MCP sessions"), "{answer}");
    assert!(message.contains(key), "{answer}");
    assert_eq!(answer["id"], 1, "{answer}");
}

async fn delete_session(url: &str, session: &str) {
    let response = reqwest::Client::new()
        .delete(url)
        .header("mcp-session-id", session)
        .send()
        .await
        .expect("DELETE reaches the gateway");
    assert!(response.status().is_success(), "{response:?}");
}

#[tokio::test]
async fn the_gateway_cap_refuses_with_503_and_one_warning() {
    let work = echo_with("[gateway.http]\nmax_sessions = 3\n");
    let gateway = HttpGateway::start(&work).await;
    let mut sessions = Vec::new();
    for _ in 0..3 {
        sessions.push(raw_session(&gateway.url, &[]).await);
    }
    for _ in 0..3 {
        let (status, answer, session) = try_initialize(&gateway.url).await;
        assert_eq!(status, 503, "{answer}");
        assert_eq!(session, None);
        assert_full(&answer, "gateway.http.max_sessions");
    }
    // The log is read from a pipe: give the line a moment to arrive.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while gateway.log_lines("refusing new MCP sessions").is_empty()
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let warnings = gateway.log_lines("refusing new MCP sessions");
    assert_eq!(
        warnings.len(),
        1,
        "one warning, not one per refusal: {warnings:#?}"
    );

    // A closed session gives its place back.
    delete_session(&gateway.url, &sessions[0]).await;
    let (status, answer, _) = try_initialize(&gateway.url).await;
    assert_eq!(status, 200, "{answer}");
}

#[tokio::test]
async fn a_profile_cap_leaves_other_profiles_their_sessions() {
    let work = echo_with("[gateway.http]\nmax_sessions_per_profile = 2\n[profiles.ops]\n");
    let gateway = HttpGateway::start(&work).await;
    let ops = format!("{}/ops", gateway.url);
    raw_session(&ops, &[]).await;
    raw_session(&ops, &[]).await;
    let (status, answer, _) = try_initialize(&ops).await;
    assert_eq!(status, 503, "{answer}");
    assert_full(&answer, "max_sessions_per_profile");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"ops\"")
    );
    raw_session(&gateway.url, &[]).await;
}

#[tokio::test]
async fn idle_sessions_expire_and_give_their_place_back() {
    let work = echo_with("[gateway.http]\nmax_sessions = 1\nsession_idle_secs = 1\n");
    let gateway = HttpGateway::start(&work).await;
    let session = raw_session(&gateway.url, &[]).await;
    assert_eq!(try_initialize(&gateway.url).await.0, 503);

    tokio::time::sleep(Duration::from_millis(2500)).await;
    let listing = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let expired = mcp_post(&gateway.url, Some(&session), &[], &listing).await;
    assert_eq!(expired.status(), 404, "the idle session is gone");
    let (status, answer, _) = try_initialize(&gateway.url).await;
    assert_eq!(status, 200, "{answer}");
}

/// Calls the HTTP fast path answers never reach rmcp's session worker, which expires a
/// session it has not heard from: they must count as activity all the same. And once the
/// session expires, its calls are refused as on rmcp's path (404).
#[tokio::test]
async fn fast_path_calls_keep_a_session_alive() {
    let work = echo_with("[gateway.http]\nsession_idle_secs = 1\n");
    let gateway = HttpGateway::start_with(&work, &["--metrics", "127.0.0.1:0"]).await;
    let session = raw_session(&gateway.url, &[]).await;
    let call = |id: u64| call_request(id, "echo__echo", serde_json::json!({"text": "alive"}));
    // Each call done, the next one 200 ms later: 3 s in all, three times the idle limit.
    for id in 1..=15 {
        let response = mcp_post(&gateway.url, Some(&session), &[], &call(id)).await;
        assert_eq!(response.status(), 200, "call {id}: {response:?}");
        let answer = jsonrpc_answer(response).await;
        assert_eq!(answer["result"]["content"][0]["text"], "alive", "{answer}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let metrics = gateway.metrics_url.clone().expect("a metrics URL");
    let body = reqwest::get(&metrics).await.unwrap().text().await.unwrap();
    assert!(
        body.lines()
            .any(|l| l == "toolgate_fast_path_calls_total 15"),
        "the calls took the fast path:\n{body}"
    );

    tokio::time::sleep(Duration::from_millis(2500)).await;
    let expired = mcp_post(&gateway.url, Some(&session), &[], &call(16)).await;
    assert_eq!(expired.status(), 404, "the idle session is gone");
}

/// The attack as reported: a flood of `initialize` calls, every one accepted. With the
/// default cap, the 1001st is refused.
#[tokio::test]
async fn the_default_cap_stops_an_initialize_flood() {
    let work = echo_with("");
    let gateway = HttpGateway::start(&work).await;
    let statuses: Vec<u16> = stream::iter(0..1001)
        .map(|_| async { try_initialize(&gateway.url).await.0 })
        .buffer_unordered(8)
        .collect()
        .await;
    let accepted = statuses.iter().filter(|s| **s == 200).count();
    let refused = statuses.iter().filter(|s| **s == 503).count();
    assert_eq!((accepted, refused), (1000, 1), "{statuses:?}");
}

#[tokio::test]
async fn closing_a_session_answers_200_and_ends_it() {
    // 200, as the SDK servers answer; the Python SDK's client warns on rmcp's 202.
    let work = echo_with("");
    let gateway = HttpGateway::start(&work).await;
    let session = raw_session(&gateway.url, &[]).await;
    let closed = reqwest::Client::new()
        .delete(&gateway.url)
        .header("mcp-session-id", &session)
        .send()
        .await
        .expect("DELETE reaches the gateway");
    assert_eq!(closed.status(), 200, "{closed:?}");
    let list = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let after = mcp_post(&gateway.url, Some(&session), &[], &list).await;
    assert_eq!(after.status(), 404, "the session is gone: {after:?}");
}
