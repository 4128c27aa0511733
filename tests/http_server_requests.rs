//! Over HTTP, a request the gateway makes of the client during a call (here the approval
//! elicitation) rides that call's own POST stream, so a client with no standalone GET stream
//! still gets it. The gateway gives rmcp request ids of its own; this checks that the
//! association with the client's request survives that.

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;

/// The echo server behind a command hook that asks before `echo__echo`.
fn asking() -> Workdir {
    let work = Workdir::new("");
    let toml = format!(
        "{}[[hooks]]\nstage = \"pre\"\ncommand = [\"env\", \"POLICY_ASK=echo__echo\", {}]\ntimeout_ms = 3000\n",
        server_toml("echo", "echo_server", &[]),
        toml_string(&example("policy_hook").display().to_string()),
    );
    std::fs::write(work.config(), toml).expect("write config");
    work
}

#[tokio::test]
async fn an_elicitation_during_a_call_rides_the_calls_post_stream() {
    let work = asking();
    let gateway = HttpGateway::start(&work).await;
    let mut initialize = initialize_request(0);
    initialize["params"]["capabilities"] = json!({"elicitation": {}});
    let response = mcp_post(&gateway.url, None, &[], &initialize).await;
    let session = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    jsonrpc_answer(response).await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    mcp_post(&gateway.url, Some(&session), &[], &initialized).await;

    let call = call_request(41, "echo__echo", json!({"text": "approved"}));
    let mut stream = mcp_post(&gateway.url, Some(&session), &[], &call).await;
    let mut buffer = String::new();
    let asked = tokio::time::timeout(
        Duration::from_secs(5),
        next_event(&mut stream, &mut buffer, |m| {
            m["method"] == "elicitation/create"
        }),
    )
    .await
    .expect("the elicitation arrives on the call's own stream");
    let accept =
        json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {}}});
    let accepted = mcp_post(&gateway.url, Some(&session), &[], &accept).await;
    assert_eq!(accepted.status(), 202);

    let answer = tokio::time::timeout(
        Duration::from_secs(5),
        next_event(&mut stream, &mut buffer, |m| m["id"] == 41),
    )
    .await
    .expect("the call is answered on its stream");
    assert_eq!(
        answer["result"]["content"][0]["text"], "approved",
        "{answer}"
    );
}
