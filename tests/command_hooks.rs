//! Command hooks (examples/policy_hook): deny, post block/redact, and every way a hook can fail.

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;

/// echo_server (calls logged to `calls.log`) plus policy_hook hooks: `stages` is a list of
/// (stage, extra TOML keys), and the hook process gets `env`.
fn config(work: &Workdir, stages: &[(&str, &str)], env: &[(&str, &str)]) {
    let log = work.path("calls.log").display().to_string();
    let mut toml = server_toml("echo", "echo_server", &[("ECHO_CALL_LOG", &log)]);
    // The hook's environment goes through `env` on a wrapper: hooks take a plain command.
    let env: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    for (stage, extra) in stages {
        let mut command = vec!["env".to_owned()];
        command.extend(env.iter().cloned());
        command.push(example("policy_hook").display().to_string());
        toml.push_str(&format!(
            "[[hooks]]\nstage = \"{stage}\"\ncommand = {command:?}\n{extra}\n"
        ));
    }
    std::fs::write(work.config(), toml).unwrap();
}

fn upstream_calls(work: &Workdir) -> usize {
    std::fs::read_to_string(work.path("calls.log")).map_or(0, |t| t.lines().count())
}

#[tokio::test]
async fn a_deny_skips_dispatch_and_names_the_reason() {
    let work = Workdir::new("");
    config(&work, &[("pre", "")], &[("POLICY_DENY", "echo__echo")]);
    let (client, _) = stdio_client(&work).await;
    let denied = call(&client, "echo__echo", json!({"text": "x"}))
        .await
        .unwrap();
    assert_eq!(denied.is_error, Some(true));
    assert_eq!(code(&denied).as_deref(), Some("DENIED"));
    assert_eq!(text(&denied), "Error: echo__echo is denied by policy_hook");
    assert_eq!(upstream_calls(&work), 0);
    let allowed = call(&client, "echo__add", json!({"a": 1, "b": 1}))
        .await
        .unwrap();
    assert_ne!(allowed.is_error, Some(true));
    assert_eq!(upstream_calls(&work), 1);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn post_hooks_block_or_replace_results() {
    let work = Workdir::new("");
    config(
        &work,
        &[("post", "")],
        &[
            ("POLICY_BLOCK", "echo__fail,echo__add"),
            ("POLICY_REDACT", "echo__echo"),
        ],
    );
    let (client, _) = stdio_client(&work).await;
    let blocked = call(&client, "echo__add", json!({"a": 1, "b": 1}))
        .await
        .unwrap();
    assert_eq!(code(&blocked).as_deref(), Some("BLOCKED"));
    assert_eq!(
        text(&blocked),
        "the result of echo__add was blocked by policy_hook"
    );
    assert_eq!(
        upstream_calls(&work),
        1,
        "post hooks run after the upstream"
    );
    let redacted = call(&client, "echo__echo", json!({"text": "secret"}))
        .await
        .unwrap();
    assert_eq!(text(&redacted), "[redacted]");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_hanging_hook_times_out_and_fails_closed() {
    let work = Workdir::new("");
    config(
        &work,
        &[("pre", "timeout_ms = 200")],
        &[("POLICY_MISBEHAVE", "hang")],
    );
    let (client, _) = stdio_client(&work).await;
    let started = std::time::Instant::now();
    let result = call(&client, "echo__echo", json!({"text": "x"}))
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(code(&result).as_deref(), Some("HOOK_FAILED"));
    assert_eq!(
        text(&result),
        "Error: hook hooks[0] failed: did not answer within 200ms"
    );
    assert_eq!(upstream_calls(&work), 0);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_failing_hook_with_on_error_allow_lets_the_call_through() {
    let work = Workdir::new("");
    config(
        &work,
        &[("pre", "timeout_ms = 200\non_error = \"allow\"")],
        &[("POLICY_MISBEHAVE", "hang")],
    );
    let (client, _) = stdio_client(&work).await;
    let result = call(&client, "echo__echo", json!({"text": "through"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "through");
    assert_eq!(upstream_calls(&work), 1);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn garbage_and_unknown_decisions_are_hook_errors() {
    for (misbehave, expected) in [
        ("bad-decision", "answered something that is not a decision"),
        ("garbage", "did not answer within 300ms"),
    ] {
        let work = Workdir::new("");
        config(
            &work,
            &[("pre", "timeout_ms = 300")],
            &[("POLICY_MISBEHAVE", misbehave)],
        );
        let (client, _) = stdio_client(&work).await;
        let result = call(&client, "echo__echo", json!({"text": "x"}))
            .await
            .unwrap();
        assert_eq!(code(&result).as_deref(), Some("HOOK_FAILED"), "{misbehave}");
        assert!(
            text(&result).contains(expected),
            "{misbehave}: {}",
            text(&result)
        );
        assert_eq!(upstream_calls(&work), 0);
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn a_hook_that_crashes_mid_call_fails_closed_and_is_restarted() {
    let work = Workdir::new("");
    let marker = work.path("crashed.marker").display().to_string();
    config(
        &work,
        &[("pre", "timeout_ms = 5000")],
        &[("POLICY_MISBEHAVE", &format!("crash-once:{marker}"))],
    );
    let (client, _) = stdio_client(&work).await;
    let started = std::time::Instant::now();
    let crashed = call(&client, "echo__echo", json!({"text": "x"}))
        .await
        .unwrap();
    assert_eq!(code(&crashed).as_deref(), Some("HOOK_FAILED"));
    assert!(
        text(&crashed).contains("exited before answering"),
        "{}",
        text(&crashed)
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "a crash is noticed at once, not at the timeout"
    );
    // The next call gets a fresh hook process, which allows it.
    let result = call(&client, "echo__echo", json!({"text": "again"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "again");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn concurrent_calls_are_answered_by_call_id() {
    let work = Workdir::new("");
    let requests = work.path("requests.log").display().to_string();
    let answers = work.path("answers.log").display().to_string();
    // The hook answers each batch of 4 last first: matching answers by position would mix
    // allows and denies up.
    config(
        &work,
        &[("pre", "")],
        &[
            ("POLICY_DENY", "echo__fail"),
            ("POLICY_BATCH", "4"),
            ("POLICY_LOG", &requests),
            ("POLICY_ANSWER_LOG", &answers),
        ],
    );
    let (client, _) = stdio_client(&work).await;
    let calls = (0..20).map(|i| {
        let client = &client;
        async move {
            let (tool, args) = if i % 2 == 0 {
                ("echo__echo", json!({"text": format!("n{i}")}))
            } else {
                ("echo__fail", json!({}))
            };
            (i, call(client, tool, args).await.unwrap())
        }
    });
    for (i, result) in futures::future::join_all(calls).await {
        if i % 2 == 0 {
            assert_eq!(text(&result), format!("n{i}"));
        } else {
            assert_eq!(code(&result).as_deref(), Some("DENIED"));
        }
    }
    let asked: Vec<String> = std::fs::read_to_string(&requests)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["call_id"].to_string())
        .collect();
    let answered: Vec<String> = std::fs::read_to_string(&answers)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(asked.len(), 20);
    assert_ne!(asked, answered, "the hook really answered out of order");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_redaction_replaces_the_whole_result() {
    // Content alone cannot redact a tool that promises structured content: refused, and the
    // upstream's `{"sum": 3}` never reaches the client.
    let work = Workdir::new("");
    config(&work, &[("post", "")], &[("POLICY_REDACT", "echo__add")]);
    let (client, _) = stdio_client(&work).await;
    let refused = call(&client, "echo__add", json!({"a": 1, "b": 2}))
        .await
        .unwrap();
    assert_eq!(code(&refused).as_deref(), Some("INVALID_TOOL_OUTPUT"));
    assert_eq!(refused.structured_content, None);
    let shown = serde_json::to_string(&refused).unwrap();
    assert!(!shown.contains("\"sum\""), "{shown}");
    client.cancel().await.unwrap();

    // With a new structuredContent the replacement is whole, and checked against the schema.
    let work = Workdir::new("");
    config(
        &work,
        &[("post", "")],
        &[
            ("POLICY_REDACT", "echo__add"),
            ("POLICY_STRUCTURED", r#"{"sum": -1}"#),
        ],
    );
    let (client, _) = stdio_client(&work).await;
    let replaced = call(&client, "echo__add", json!({"a": 1, "b": 2}))
        .await
        .unwrap();
    assert_eq!(code(&replaced), None, "{replaced:?}");
    assert_eq!(replaced.structured_content, Some(json!({"sum": -1})));
    assert_eq!(text(&replaced), "[redacted]");
    client.cancel().await.unwrap();

    let work = Workdir::new("");
    config(
        &work,
        &[("post", "")],
        &[
            ("POLICY_REDACT", "echo__add"),
            ("POLICY_STRUCTURED", r#"{"sum": "three"}"#),
        ],
    );
    let (client, _) = stdio_client(&work).await;
    let invalid = call(&client, "echo__add", json!({"a": 1, "b": 2}))
        .await
        .unwrap();
    assert_eq!(code(&invalid).as_deref(), Some("INVALID_TOOL_OUTPUT"));
    assert!(text(&invalid).contains("/sum"), "{}", text(&invalid));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_size_cap_applies_after_post_hooks() {
    let work = Workdir::new("");
    let big = "x".repeat(2000);
    config(
        &work,
        &[("post", "")],
        &[
            ("POLICY_REDACT", "echo__echo"),
            ("POLICY_REDACT_TEXT", &big),
        ],
    );
    let toml = std::fs::read_to_string(work.config()).unwrap();
    std::fs::write(
        work.config(),
        format!("[gateway]\nmax_result_bytes = 1000\n\n{toml}"),
    )
    .unwrap();
    let (client, _) = stdio_client(&work).await;
    // The upstream's own answer is small; the hook's replacement is not.
    let capped = call(&client, "echo__echo", json!({"text": "small"}))
        .await
        .unwrap();
    assert_eq!(code(&capped).as_deref(), Some("RESULT_TOO_LARGE"));
    assert!(!text(&capped).contains("xxxx"), "{}", text(&capped));
    client.cancel().await.unwrap();
}

/// Calls `echo__echo` (id 2) through a `stage` hook that takes `HOOK_DELAY_MS` per request,
/// on the fast path or rmcp's typed one (`fast_path`), cancels it once the hook has it, and
/// checks that the call ended then: audited `CANCELLED` long before the hook could answer.
/// Returns how many calls the upstream got, read after the hook's late answer was written and
/// a second call (id 3) passed the same hook.
async fn cancelled_while_the_hook_thinks(stage: &str, fast_path: bool) -> usize {
    let work = Workdir::new("");
    let (hook_log, answers) = (work.path("hook.log"), work.path("answers.log"));
    let answers_env = answers.display().to_string();
    slow_hook_config(
        &work,
        stage,
        fast_path,
        &[("POLICY_ANSWER_LOG", &answers_env)],
    );
    let audit = work.path("audit.jsonl");
    let mut raw = RawStdio::start_with(&work, &["--audit-log", &audit.display().to_string()]).await;
    let call = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "echo__echo", "arguments": {"text": "x"}}})
    };
    raw.send(&call(2)).await;
    wait_for_file(&hook_log, &format!("\"stage\":\"{stage}\""), STARTUP).await;
    raw.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": 2, "reason": "the user changed their mind"}}),
    )
    .await;
    audited_cancelled_at_once(&audit, stage).await;

    // The hook answers the abandoned call late; the answer goes nowhere, and the hook and
    // the gateway still serve the next call.
    wait_for_file(
        &answers,
        "\n",
        Duration::from_millis(HOOK_DELAY_MS) + STARTUP,
    )
    .await;
    raw.send(&call(3)).await;
    let answer = raw.next_answer().await;
    assert_eq!(
        answer["id"], 3,
        "the cancelled call is not answered: {answer}"
    );
    assert_eq!(answer["result"]["content"][0]["text"], "x", "{answer}");
    let (rest, _) = raw.finish().await;
    assert!(
        rest.iter().all(|m| m["id"] != 2),
        "the cancelled call is not answered: {rest:?}"
    );
    upstream_calls(&work)
}

/// A policy_hook at `stage` that takes [`HOOK_DELAY_MS`] per request and logs each to
/// `hook.log` (`env` more for it), with `fast_path` as given.
fn slow_hook_config(work: &Workdir, stage: &str, fast_path: bool, env: &[(&str, &str)]) {
    let delay = HOOK_DELAY_MS.to_string();
    let log = work.path("hook.log").display().to_string();
    let mut env = env.to_vec();
    env.extend([
        ("POLICY_DELAY_MS", delay.as_str()),
        ("POLICY_LOG", log.as_str()),
    ]);
    config(work, &[(stage, "timeout_ms = 20000")], &env);
    if !fast_path {
        let toml = std::fs::read_to_string(work.config()).unwrap();
        std::fs::write(
            work.config(),
            format!("[gateway]\nfast_path = false\n{toml}"),
        )
        .unwrap();
    }
}

/// How long the slow hook of [`cancelled_while_the_hook_thinks`] takes per request.
const HOOK_DELAY_MS: u64 = 4000;

/// For a gateway (and its hook) to start on a loaded machine.
const STARTUP: Duration = Duration::from_secs(30);

/// A client's cancel ends a call waiting on a slow pre hook at once, not at the hook's answer
/// or its `timeout_ms`: audited `CANCELLED`, and its late `allow` sends nothing upstream. The
/// same on the fast path and on rmcp's typed path.
#[tokio::test]
async fn a_client_cancel_ends_a_call_waiting_on_a_pre_hook() {
    let (fast, typed) = tokio::join!(
        cancelled_while_the_hook_thinks("pre", true),
        cancelled_while_the_hook_thinks("pre", false)
    );
    assert_eq!(
        fast, 1,
        "fast path: only the second call reaches the upstream"
    );
    assert_eq!(
        typed, 1,
        "typed path: only the second call reaches the upstream"
    );
}

/// The same for a post hook: the upstream answered, the hook still reads the result, and the
/// client's cancel ends the call.
#[tokio::test]
async fn a_client_cancel_ends_a_call_waiting_on_a_post_hook() {
    let (fast, typed) = tokio::join!(
        cancelled_while_the_hook_thinks("post", true),
        cancelled_while_the_hook_thinks("post", false)
    );
    assert_eq!(fast, 2, "fast path: both calls reached the upstream");
    assert_eq!(typed, 2, "typed path: both calls reached the upstream");
}

/// A client's cancel sent over streamable HTTP (`notifications/cancelled` in a POST) ends a
/// call waiting on a slow hook as over stdio, with `fast_path` on or off, at either stage.
async fn cancelled_over_http_while_the_hook_thinks(stage: &str, fast_path: bool) {
    let work = Workdir::new("");
    let hook_log = work.path("hook.log");
    slow_hook_config(&work, stage, fast_path, &[]);
    let audit = work.path("audit.jsonl");
    let gateway =
        HttpGateway::start_with(&work, &["--audit-log", &audit.display().to_string()]).await;
    let (client, _) = gateway.client().await;
    let handle = start_call(&client, "echo__echo", json!({"text": "x"})).await;
    wait_for_file(&hook_log, &format!("\"stage\":\"{stage}\""), STARTUP).await;
    handle
        .cancel(Some("the user changed their mind".into()))
        .await
        .expect("send notifications/cancelled");
    audited_cancelled_at_once(&audit, stage).await;
    client.cancel().await.unwrap();
}

/// [`cancelled_over_http_while_the_hook_thinks`] for both stages and both `fast_path`
/// settings at once.
#[tokio::test]
async fn a_client_cancel_over_http_ends_a_call_waiting_on_a_hook() {
    tokio::join!(
        cancelled_over_http_while_the_hook_thinks("pre", true),
        cancelled_over_http_while_the_hook_thinks("pre", false),
        cancelled_over_http_while_the_hook_thinks("post", true),
        cancelled_over_http_while_the_hook_thinks("post", false),
    );
}

/// Checks the audit line of a call cancelled while a [`slow_hook_config`] hook at `stage`
/// held it: written within half the hook's delay (a call that waited for the hook's answer
/// is not done yet), `CANCELLED` after under half the delay, and with no decision when a pre
/// hook held it (a post hook runs after the pre gates let the call through).
async fn audited_cancelled_at_once(audit: &std::path::Path, stage: &str) {
    let record = wait_for_file(
        audit,
        "echo__echo",
        Duration::from_millis(HOOK_DELAY_MS / 2),
    )
    .await;
    let record = first_json_line(&record);
    assert_eq!(record["outcome"], "CANCELLED", "{stage}: {record}");
    let decision = if stage == "pre" { "none" } else { "allow" };
    assert_eq!(record["decision"], decision, "{stage}: {record}");
    assert!(
        record["duration_us"].as_u64().expect("a duration") < HOOK_DELAY_MS * 1000 / 2,
        "{stage}: {record}"
    );
}
