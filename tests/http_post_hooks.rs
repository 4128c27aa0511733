//! Post hooks over HTTP, against a real hook server run by the test: `block` turns the result into an error carrying the feedback, `accept` with content replaces it.

mod common;

use axum::http::StatusCode;
use common::{hook_server::*, *};
use serde_json::{Value, json};

fn post_hook_setup_toml(hook: &HookServer) -> String {
    format!(
        "[[hooks]]\nstage = \"post\"\nhttp = {}\n",
        toml_string(&hook.url("post"))
    )
}

fn post_rule(_: &str, request: &Value) -> Reply {
    match text_arg(request) {
        "secret" => Reply::Json(json!({
            "decision": "block",
            "feedback": "the result was withheld: it contains a secret",
        })),
        "redact" => Reply::Json(json!({
            "decision": "accept",
            "content": [
                {"type": "text", "text": "[redacted]"},
                {"type": "text", "text": "(by the post hook)"},
            ],
        })),
        "garbage" => Reply::Json(json!({"decision": "allow"})),
        "500" => Reply::Raw(StatusCode::INTERNAL_SERVER_ERROR, "oops"),
        _ => Reply::Json(json!({"decision": "accept"})),
    }
}

#[tokio::test]
async fn a_post_block_turns_the_result_into_an_error_carrying_the_feedback() {
    let s = setup(post_rule, post_hook_setup_toml).await;
    let (client, _) = stdio_client(&s.work).await;

    let blocked = within(call(&client, "echo__echo", json!({"text": "secret"})))
        .await
        .unwrap();
    assert_failed(&blocked, "BLOCKED");
    assert_eq!(
        text(&blocked),
        "the result was withheld: it contains a secret"
    );
    assert_eq!(blocked.content.len(), 1, "the upstream's content is gone");
    assert_eq!(
        upstream_texts(&s.call_log),
        ["secret"],
        "a post hook runs after the upstream"
    );
    let seen = s.hook.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].body["result"]["content"][0]["text"], "secret");

    // A post hook that fails fails closed too.
    for failing in ["garbage", "500"] {
        let result = within(call(&client, "echo__echo", json!({"text": failing})))
            .await
            .unwrap();
        assert_failed(&result, "HOOK_FAILED");
        assert_ne!(text(&result), failing, "the result is withheld");
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_post_accept_with_content_replaces_the_result_content() {
    let s = setup(post_rule, post_hook_setup_toml).await;
    let (client, _) = stdio_client(&s.work).await;

    let redacted = within(call(&client, "echo__echo", json!({"text": "redact"})))
        .await
        .unwrap();
    assert_ne!(redacted.is_error, Some(true), "{redacted:?}");
    assert_eq!(code(&redacted), None);
    let texts: Vec<&str> = redacted
        .content
        .iter()
        .map(|c| c.as_text().expect("text content").text.as_str())
        .collect();
    assert_eq!(texts, ["[redacted]", "(by the post hook)"]);

    // Accept without content leaves the result alone.
    let kept = within(call(&client, "echo__echo", json!({"text": "plain"})))
        .await
        .unwrap();
    assert_eq!(text(&kept), "plain");
    assert_eq!(kept.content.len(), 1);
    assert_eq!(upstream_texts(&s.call_log), ["redact", "plain"]);
    client.cancel().await.unwrap();
}
