//! A request reusing the id of one still in flight is answered at once with `-32600`, and
//! the first still gets its own answer: over stdio and over HTTP, nothing hangs.

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};

fn echo_only() -> Workdir {
    Workdir::new(&server_toml("echo", "echo_server", &[]))
}

fn assert_duplicate_refusal(answer: &Value, id: u64) {
    assert_eq!(answer["id"], id, "{answer}");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("request id {id} is already in use")),
        "{answer}"
    );
}

fn assert_slept(answer: &Value, id: u64) {
    assert_eq!(answer["id"], id, "{answer}");
    assert!(answer.get("error").is_none(), "{answer}");
    assert_ne!(answer["result"]["isError"], true, "{answer}");
}

#[tokio::test]
async fn over_stdio_the_duplicate_is_refused_and_the_first_answered() {
    let work = echo_only();
    let mut gateway = RawStdio::start(&work).await;
    let started = Instant::now();
    gateway
        .send(&call_request(5, "echo__sleep", json!({"ms": 2000})))
        .await;
    gateway
        .send(&call_request(5, "echo__echo", json!({"text": "second"})))
        .await;

    let first = gateway.next_answer().await;
    assert_duplicate_refusal(&first, 5);
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "refused at once, not after the sleep: {:?}",
        started.elapsed()
    );
    let second = gateway.next_answer().await;
    assert_slept(&second, 5);

    // Answered, the id is free again.
    gateway
        .send(&call_request(5, "echo__echo", json!({"text": "again"})))
        .await;
    let again = gateway.next_answer().await;
    assert_eq!(again["result"]["content"][0]["text"], "again", "{again}");
}

#[tokio::test]
async fn over_stdio_a_cancelled_requests_id_is_free_again() {
    let work = echo_only();
    let mut gateway = RawStdio::start(&work).await;
    gateway
        .send(&call_request(9, "echo__sleep", json!({"ms": 5000})))
        .await;
    gateway
        .send(&json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 9, "reason": "changed my mind"}
        }))
        .await;
    // rmcp sends no answer for a cancelled request; the id must not stay taken.
    gateway
        .send(&call_request(9, "echo__echo", json!({"text": "reused"})))
        .await;
    let answer = gateway.next_answer().await;
    assert_eq!(answer["result"]["content"][0]["text"], "reused", "{answer}");
}

#[tokio::test]
async fn over_http_the_duplicate_is_refused_and_the_first_answered() {
    let work = echo_only();
    let gateway = HttpGateway::start(&work).await;
    let session = raw_session(&gateway.url, &[]).await;

    let url = gateway.url.clone();
    let first_session = session.clone();
    let first = tokio::spawn(async move {
        let response = mcp_post(
            &url,
            Some(&first_session),
            &[],
            &call_request(7, "echo__sleep", json!({"ms": 2000})),
        )
        .await;
        jsonrpc_answer(response).await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;

    let started = Instant::now();
    let response = tokio::time::timeout(
        Duration::from_secs(5),
        mcp_post(
            &gateway.url,
            Some(&session),
            &[],
            &call_request(7, "echo__echo", json!({"text": "second"})),
        ),
    )
    .await
    .expect("the duplicate is answered");
    assert_eq!(response.status(), 200);
    let second = jsonrpc_answer(response).await;
    assert_duplicate_refusal(&second, 7);
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );

    let first = tokio::time::timeout(Duration::from_secs(5), first)
        .await
        .expect("the first POST is answered, not left hanging")
        .expect("task");
    assert_slept(&first, 7);

    // The same id in another session, and again in this one once answered, is fine.
    let other = raw_session(&gateway.url, &[]).await;
    for session in [&other, &session] {
        let response = mcp_post(
            &gateway.url,
            Some(session),
            &[],
            &call_request(7, "echo__echo", json!({"text": "again"})),
        )
        .await;
        let answer = jsonrpc_answer(response).await;
        assert_eq!(answer["result"]["content"][0]["text"], "again", "{answer}");
    }
}
