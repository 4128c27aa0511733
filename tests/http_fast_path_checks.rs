//! The HTTP fast path answers a `tools/call` only after every check the front makes (token and profile, Origin), and only when rmcp would take the request as it is; `/metrics` tells which path answered.

mod common;

use common::*;
use serde_json::json;

const OPS_TOKEN: &str = "ops-secret-token";
const FAST_CALLS: &str = "toolgate_fast_path_calls_total";

/// The echo server, and `ops`, guarded by its token.
fn guarded() -> Workdir {
    Workdir::new(&format!(
        "{}[profiles.ops]\ntokens = [{}]\nallow = [\"echo__echo\"]\n",
        server_toml("echo", "echo_server", &[]),
        toml_string(OPS_TOKEN),
    ))
}

async fn fast_calls(metrics: &str) -> u64 {
    metric(metrics, FAST_CALLS).await.unwrap_or(0)
}

fn echo(id: u64, text: &str) -> serde_json::Value {
    call_request(id, "echo__echo", json!({"text": text}))
}

#[tokio::test]
async fn a_live_sessions_calls_still_pass_the_front_checks() {
    let work = guarded();
    let gateway = HttpGateway::start_with(&work, &["--metrics", "127.0.0.1:0"]).await;
    let metrics = gateway.metrics_url.clone().expect("a metrics URL");
    let ops = format!("{}/ops", gateway.url);
    let bearer = format!("Bearer {OPS_TOKEN}");
    let token = [("authorization", bearer.as_str())];
    let session = raw_session(&ops, &token).await;

    // With its token: answered by the fast path.
    let answer =
        jsonrpc_answer(mcp_post(&ops, Some(&session), &token, &echo(1, "one")).await).await;
    assert_eq!(answer["result"]["content"][0]["text"], "one", "{answer}");
    assert_eq!(fast_calls(&metrics).await, 1);

    // The session id is no credential: no token, a wrong one, or a foreign Origin are
    // refused before any call is made.
    let refused = mcp_post(&ops, Some(&session), &[], &echo(2, "no token")).await;
    assert_eq!(refused.status(), 401, "{refused:?}");
    let wrong = format!("Bearer {OPS_TOKEN}-not");
    let refused = mcp_post(
        &ops,
        Some(&session),
        &[("authorization", &wrong)],
        &echo(3, "x"),
    )
    .await;
    assert_eq!(refused.status(), 401, "{refused:?}");
    let foreign = [
        ("authorization", bearer.as_str()),
        ("origin", "https://evil.example"),
    ];
    let refused = mcp_post(&ops, Some(&session), &foreign, &echo(4, "x")).await;
    assert_eq!(refused.status(), 403, "{refused:?}");
    // Another profile's path does not reach this session, with this token or none.
    let default = format!("{}/default", gateway.url);
    let refused = mcp_post(&default, Some(&session), &token, &echo(5, "x")).await;
    assert_eq!(refused.status(), 403, "{refused:?}");
    assert_eq!(fast_calls(&metrics).await, 1, "none of those was answered");

    // What rmcp would refuse or judge is left to it: an `Accept` without SSE (406), a
    // 2026-07-28 `MCP-Protocol-Version` on a session.
    let json_only = reqwest::Client::new()
        .post(&ops)
        .header("authorization", &bearer)
        .header("mcp-session-id", &session)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(serde_json::to_vec(&echo(6, "x")).unwrap())
        .send()
        .await
        .expect("POST reaches the gateway");
    assert_eq!(json_only.status(), 406, "{json_only:?}");
    let modern = [
        ("authorization", bearer.as_str()),
        ("mcp-protocol-version", "2026-07-28"),
    ];
    let judged = mcp_post(&ops, Some(&session), &modern, &echo(7, "x")).await;
    let status = judged.status();
    let answer = jsonrpc_answer(judged).await;
    assert!(
        status != 200 || answer.get("error").is_some(),
        "rmcp asks a 2026-07-28 request for its _meta: {status} {answer}"
    );
    assert_eq!(fast_calls(&metrics).await, 1, "rmcp answered those");

    // And the session still works on the fast path.
    let answer =
        jsonrpc_answer(mcp_post(&ops, Some(&session), &token, &echo(8, "two")).await).await;
    assert_eq!(answer["result"]["content"][0]["text"], "two", "{answer}");
    assert_eq!(fast_calls(&metrics).await, 2);
}
