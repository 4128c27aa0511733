//! `[[hooks]]` over HTTP, against a real hook server run by the test: the request body, the
//! stage order (pre → upstream → post), deny, fail-closed on timeout / garbage / HTTP errors
//! (and fail-open with `on_error = "allow"`), `tools` / `profiles` scoping. Post hooks'
//! `block` and `accept`: `tests/http_post_hooks.rs`.

mod common;

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use common::{hook_server::*, *};
use serde_json::json;

#[tokio::test]
async fn hook_requests_carry_the_call_and_run_pre_then_upstream_then_post() {
    let s = setup(
        |_, request| match request["stage"].as_str() {
            Some("pre") => Reply::Json(json!({"decision": "allow"})),
            _ => Reply::Json(json!({"decision": "accept"})),
        },
        |hook| {
            format!(
                "[[hooks]]\nstage = \"pre\"\nhttp = {}\n\
                 [[hooks]]\nstage = \"post\"\nhttp = {}\n",
                toml_string(&hook.url("pre")),
                toml_string(&hook.url("post")),
            )
        },
    )
    .await;
    let (client, _) = stdio_client(&s.work).await;

    let result = within(call(&client, "echo__echo", json!({"text": "hi"})))
        .await
        .unwrap();
    assert_eq!(text(&result), "hi", "accept without content keeps it");
    assert_ne!(result.is_error, Some(true));

    let seen = s.hook.seen();
    let paths: Vec<&str> = seen.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(paths, ["pre", "post"], "{seen:#?}");
    let (pre, post) = (&seen[0], &seen[1]);

    // Pre: the whole call, before the upstream saw anything.
    let call_id = pre.body["call_id"].as_str().expect("call_id is a string");
    assert!(!call_id.is_empty());
    assert_eq!(
        pre.body,
        json!({
            "stage": "pre",
            "call_id": call_id,
            "profile": "default",
            "tool": "echo__echo",
            "server": "echo",
            "upstream_tool": "echo",
            "arguments": {"text": "hi"},
        })
    );
    assert_eq!(pre.upstream_calls_before, 0, "pre ran before the upstream");

    // Post: the same call plus the upstream's result, after the upstream ran.
    assert_eq!(post.body["stage"], "post");
    assert_eq!(post.body["call_id"], call_id, "one call_id for both stages");
    for key in ["profile", "tool", "server", "upstream_tool", "arguments"] {
        assert_eq!(post.body[key], pre.body[key], "post `{key}`");
    }
    assert_eq!(post.body["result"]["content"][0]["type"], "text");
    assert_eq!(post.body["result"]["content"][0]["text"], "hi");
    assert_ne!(post.body["result"]["isError"], json!(true));
    assert_eq!(post.upstream_calls_before, 1, "post ran after the upstream");
    assert_eq!(
        upstream_calls(&s.call_log),
        [json!({"tool": "echo", "arguments": {"text": "hi"}})]
    );

    // A second call gets a call_id of its own.
    within(call(&client, "echo__echo", json!({"text": "again"})))
        .await
        .unwrap();
    let seen = s.hook.seen();
    assert_eq!(seen.len(), 4, "{seen:#?}");
    assert_ne!(seen[2].body["call_id"], call_id);
    assert_eq!(seen[2].body["call_id"], seen[3].body["call_id"]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_deny_skips_the_upstream_and_reaches_the_client_with_its_reason() {
    let s = setup(
        |_, request| match text_arg(request) {
            "forbidden" => Reply::Json(json!({"decision": "deny", "reason": "no echo today"})),
            "no-reason" => Reply::Json(json!({"decision": "deny"})),
            _ => Reply::Json(json!({"decision": "allow"})),
        },
        |hook| {
            format!(
                "[[hooks]]\nstage = \"pre\"\nhttp = {}\n",
                toml_string(&hook.url("hook"))
            )
        },
    )
    .await;
    let (client, _) = stdio_client(&s.work).await;

    let denied = within(call(&client, "echo__echo", json!({"text": "forbidden"})))
        .await
        .unwrap();
    assert_failed(&denied, "DENIED");
    assert_eq!(text(&denied), "Error: no echo today");
    assert_eq!(denied.content.len(), 1);

    let no_reason = within(call(&client, "echo__echo", json!({"text": "no-reason"})))
        .await
        .unwrap();
    assert_failed(&no_reason, "DENIED");
    assert_eq!(
        text(&no_reason),
        "Error: tool \"echo__echo\" was denied by policy"
    );

    // The same tool, allowed: the upstream works and logs calls, so the absence above is real.
    let allowed = within(call(&client, "echo__echo", json!({"text": "fine"})))
        .await
        .unwrap();
    assert_eq!(text(&allowed), "fine");
    assert_eq!(upstream_texts(&s.call_log), ["fine"]);
    assert_eq!(s.hook.seen().len(), 3, "the hook was asked every time");
    client.cancel().await.unwrap();
}

fn hanging_hook_toml(hook: &HookServer, on_error: &str) -> String {
    format!(
        "[[hooks]]\nstage = \"pre\"\nhttp = {}\ntimeout_ms = 200\non_error = \"{on_error}\"\n",
        toml_string(&hook.url("slow"))
    )
}

#[tokio::test]
async fn a_hook_slower_than_its_timeout_fails_closed() {
    let s = setup(|_, _| Reply::Hang, |hook| hanging_hook_toml(hook, "deny")).await;
    let (client, _) = stdio_client(&s.work).await;

    let started = Instant::now();
    let result = within(call(&client, "echo__echo", json!({"text": "hi"})))
        .await
        .unwrap();
    let elapsed = started.elapsed();
    assert_failed(&result, "HOOK_FAILED");
    let message = text(&result);
    assert!(
        message.starts_with("Error: ") && message.contains("200ms"),
        "names the timeout: {message}"
    );
    assert!(
        elapsed >= Duration::from_millis(200),
        "waited for the hook: {elapsed:?}"
    );
    assert!(
        elapsed < Duration::from_secs(3),
        "gave up at the hook's timeout, not later: {elapsed:?}"
    );
    assert_eq!(s.hook.seen().len(), 1, "the hook was asked");
    assert!(
        upstream_calls(&s.call_log).is_empty(),
        "the upstream was not called"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_hook_slower_than_its_timeout_is_skipped_with_on_error_allow() {
    let s = setup(|_, _| Reply::Hang, |hook| hanging_hook_toml(hook, "allow")).await;
    let (client, _) = stdio_client(&s.work).await;

    let started = Instant::now();
    let result = within(call(&client, "echo__echo", json!({"text": "through"})))
        .await
        .unwrap();
    let elapsed = started.elapsed();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(text(&result), "through");
    assert!(elapsed >= Duration::from_millis(200), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    assert_eq!(s.hook.seen().len(), 1, "the hook was asked");
    assert_eq!(upstream_texts(&s.call_log), ["through"]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn answers_that_are_not_a_pre_decision_fail_closed() {
    let s = setup(
        |_, request| match text_arg(request) {
            "not-json" => Reply::Raw(StatusCode::OK, "this is not json"),
            "empty" => Reply::Raw(StatusCode::OK, ""),
            "maybe" => Reply::Json(json!({"decision": "maybe"})),
            "no-decision" => Reply::Json(json!({"reason": "forgot the decision"})),
            "string" => Reply::Json(json!("allow")),
            // A post hook's answer is not a pre hook's.
            "post-answer" => Reply::Json(json!({"decision": "accept"})),
            _ => Reply::Json(json!({"decision": "allow"})),
        },
        |hook| {
            format!(
                "[[hooks]]\nstage = \"pre\"\nhttp = {}\n",
                toml_string(&hook.url("hook"))
            )
        },
    )
    .await;
    let (client, _) = stdio_client(&s.work).await;

    for garbage in [
        "not-json",
        "empty",
        "maybe",
        "no-decision",
        "string",
        "post-answer",
    ] {
        let result = within(call(&client, "echo__echo", json!({"text": garbage})))
            .await
            .unwrap();
        assert_failed(&result, "HOOK_FAILED");
        assert!(
            text(&result).starts_with("Error: "),
            "{garbage}: {result:?}"
        );
    }
    assert!(
        upstream_calls(&s.call_log).is_empty(),
        "no garbage answer let a call through: {:?}",
        upstream_calls(&s.call_log)
    );

    let allowed = within(call(&client, "echo__echo", json!({"text": "ok"})))
        .await
        .unwrap();
    assert_eq!(text(&allowed), "ok");
    assert_eq!(upstream_texts(&s.call_log), ["ok"]);
    assert_eq!(s.hook.seen().len(), 7);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_http_error_status_fails_closed_even_with_an_allow_body() {
    let s = setup(
        |_, request| match text_arg(request) {
            "500" => Reply::Raw(StatusCode::INTERNAL_SERVER_ERROR, r#"{"decision":"allow"}"#),
            "404" => Reply::Raw(StatusCode::NOT_FOUND, r#"{"decision":"allow"}"#),
            _ => Reply::Json(json!({"decision": "allow"})),
        },
        |hook| {
            format!(
                "[[hooks]]\nstage = \"pre\"\nhttp = {}\n",
                toml_string(&hook.url("hook"))
            )
        },
    )
    .await;
    let (client, _) = stdio_client(&s.work).await;

    for status in ["500", "404"] {
        let result = within(call(&client, "echo__echo", json!({"text": status})))
            .await
            .unwrap();
        assert_failed(&result, "HOOK_FAILED");
        assert!(
            text(&result).contains(status),
            "names the status: {result:?}"
        );
    }
    assert!(upstream_calls(&s.call_log).is_empty());
    let allowed = within(call(&client, "echo__echo", json!({"text": "200"})))
        .await
        .unwrap();
    assert_eq!(text(&allowed), "200");
    assert_eq!(upstream_texts(&s.call_log), ["200"]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_unreachable_hook_fails_closed() {
    // A port that was just free: nothing listens on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let s = setup(
        |_, _| Reply::Json(json!({"decision": "allow"})),
        |_| format!("[[hooks]]\nstage = \"pre\"\nhttp = \"http://127.0.0.1:{port}/hook\"\n"),
    )
    .await;
    let (client, _) = stdio_client(&s.work).await;
    let result = within(call(&client, "echo__echo", json!({"text": "hi"})))
        .await
        .unwrap();
    assert_failed(&result, "HOOK_FAILED");
    assert!(upstream_calls(&s.call_log).is_empty());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn hooks_scoped_to_other_tools_or_profiles_are_not_consulted() {
    let s = setup(
        |path, _| match path {
            "tools-scoped" => Reply::Json(json!({"decision": "deny", "reason": "add is off"})),
            "profile-scoped" => Reply::Json(json!({"decision": "deny", "reason": "not for ops"})),
            "post-scoped" => Reply::Json(json!({"decision": "block", "feedback": "hidden"})),
            _ => Reply::Raw(StatusCode::NOT_FOUND, "unknown hook"),
        },
        |hook| {
            format!(
                "[profiles.ops]\n\
                 [[hooks]]\nstage = \"pre\"\ntools = [\"echo__a*\"]\nhttp = {}\n\
                 [[hooks]]\nstage = \"pre\"\ntools = [\"echo__echo\"]\nprofiles = [\"ops\"]\nhttp = {}\n\
                 [[hooks]]\nstage = \"post\"\ntools = [\"echo__fail\"]\nprofiles = [\"default\"]\nhttp = {}\n",
                toml_string(&hook.url("tools-scoped")),
                toml_string(&hook.url("profile-scoped")),
                toml_string(&hook.url("post-scoped")),
            )
        },
    )
    .await;
    let gateway = within(HttpGateway::start(&s.work)).await;
    let (default, _) = within(http_client(&gateway.url)).await;
    let (ops, _) = within(http_client(&format!("{}/ops", gateway.url))).await;
    let consulted = |hook: &HookServer| -> Vec<(String, String, String)> {
        hook.seen()
            .iter()
            .map(|s| {
                (
                    s.path.clone(),
                    s.body["tool"].as_str().unwrap_or_default().to_owned(),
                    s.body["profile"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    };
    let entry = |path: &str, tool: &str, profile: &str| {
        (path.to_owned(), tool.to_owned(), profile.to_owned())
    };

    // No hook matches echo__echo in `default`: none is asked.
    let result = within(call(&default, "echo__echo", json!({"text": "free"})))
        .await
        .unwrap();
    assert_eq!(text(&result), "free");
    assert!(consulted(&s.hook).is_empty(), "no hook was in scope");

    // The tools glob matches echo__add: that hook alone is asked, and it denies.
    let result = within(call(&default, "echo__add", json!({"a": 1, "b": 2})))
        .await
        .unwrap();
    assert_failed(&result, "DENIED");
    assert_eq!(text(&result), "Error: add is off");
    assert_eq!(
        consulted(&s.hook),
        [entry("tools-scoped", "echo__add", "default")]
    );

    // echo__echo in `ops`: the profile-scoped hook alone is asked, and it denies.
    let result = within(call(&ops, "echo__echo", json!({"text": "ops"})))
        .await
        .unwrap();
    assert_failed(&result, "DENIED");
    assert_eq!(text(&result), "Error: not for ops");
    assert_eq!(
        consulted(&s.hook)[1..],
        [entry("profile-scoped", "echo__echo", "ops")]
    );

    // echo__fail in `ops`: the post hook is for `default` only, so the result is relayed.
    let result = within(call(&ops, "echo__fail", json!({"message": "own failure"})))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    assert_eq!(text(&result), "own failure");
    assert_eq!(code(&result), None, "the upstream's own error, untouched");
    assert_eq!(consulted(&s.hook).len(), 2, "no hook was in scope");

    // echo__fail in `default`: the post hook is asked, and blocks.
    let result = within(call(&default, "echo__fail", json!({"message": "x"})))
        .await
        .unwrap();
    assert_failed(&result, "BLOCKED");
    assert_eq!(
        consulted(&s.hook)[2..],
        [entry("post-scoped", "echo__fail", "default")]
    );

    let upstream: Vec<String> = upstream_calls(&s.call_log)
        .iter()
        .map(|c| c["tool"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(upstream, ["echo", "fail", "fail"]);
    default.cancel().await.unwrap();
    ops.cancel().await.unwrap();
}

/// A client's cancel ends a call waiting on an HTTP pre hook at once, not at the hook's
/// `timeout_ms`: audited `CANCELLED`, the hook's request dropped (its connection closed), and
/// nothing sent upstream.
#[tokio::test]
async fn a_client_cancel_abandons_the_http_hook_request() {
    let (s, audit, mut raw) = held_by_a_hanging_pre_hook("").await;
    raw.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": 2}}),
    )
    .await;
    let record = wait_for_file(&audit, "echo__echo", CALL_LIMIT).await;
    let record = first_json_line(&record);
    assert_eq!(record["outcome"], "CANCELLED", "{record}");
    assert_eq!(
        record["decision"], "none",
        "the hook never decided: {record}"
    );
    within(async {
        while s.hook.abandoned() == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let (rest, _) = raw.finish().await;
    assert!(
        rest.iter().all(|m| m["id"] != 2),
        "the cancelled call is not answered: {rest:?}"
    );
    assert!(
        upstream_calls(&s.call_log).is_empty(),
        "the upstream was not called"
    );
}

/// The drain's cut (SIGTERM with no grace) ends a call waiting on an HTTP pre hook the same
/// way: audited `SHUTTING_DOWN` with no decision, answered so, the hook's request dropped,
/// nothing sent upstream, and the gateway exits 0 long before the hook's `timeout_ms`.
#[tokio::test]
async fn the_cut_abandons_the_http_hook_request() {
    let (s, audit, mut raw) = held_by_a_hanging_pre_hook("[gateway]\ndrain_grace_ms = 0\n\n").await;
    let stopping = Instant::now();
    common::procs::signal(raw.child.id().expect("the gateway is running"), "TERM");
    let answer = within(raw.next_answer()).await;
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(
        answer["result"]["_meta"]["toolgate/error"]["code"], "SHUTTING_DOWN",
        "{answer}"
    );
    let (_, status) = raw.finish().await;
    assert_eq!(status.code(), Some(0), "{status}");
    assert!(
        stopping.elapsed() < Duration::from_secs(10),
        "exited {:?} after the signal",
        stopping.elapsed()
    );
    let record = std::fs::read_to_string(&audit).expect("the audit log");
    let record = first_json_line(&record);
    assert_eq!(record["outcome"], "SHUTTING_DOWN", "{record}");
    assert_eq!(
        record["decision"], "none",
        "the hook never decided: {record}"
    );
    assert!(
        record["duration_us"].as_u64().expect("a duration") < 2_000_000,
        "{record}"
    );
    within(async {
        while s.hook.abandoned() == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        upstream_calls(&s.call_log).is_empty(),
        "the upstream was not called"
    );
}

/// A stdio gateway (config `before` the echo server and an HTTP pre hook that never answers,
/// with an audit log) and a call (id 2) the hook holds: returns once the hook has it.
async fn held_by_a_hanging_pre_hook(before: &str) -> (Setup, std::path::PathBuf, RawStdio) {
    let s = setup(
        |_, _| Reply::Hang,
        |hook| {
            format!(
                "[[hooks]]\nstage = \"pre\"\nhttp = {}\ntimeout_ms = 30000\n",
                toml_string(&hook.url("slow"))
            )
        },
    )
    .await;
    let toml = std::fs::read_to_string(s.work.config()).expect("the config");
    std::fs::write(s.work.config(), format!("{before}{toml}")).expect("write config");
    let audit = s.work.path("audit.jsonl");
    let mut raw =
        RawStdio::start_with(&s.work, &["--audit-log", &audit.display().to_string()]).await;
    raw.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                     "params": {"name": "echo__echo", "arguments": {"text": "x"}}}))
        .await;
    within(async {
        while s.hook.seen().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    (s, audit, raw)
}
