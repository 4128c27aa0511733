//! `[[hooks]]` over HTTP, against a real hook server run by the test: the request body, the
//! stage order (pre → upstream → post), deny, fail-closed on timeout / garbage / HTTP errors
//! (and fail-open with `on_error = "allow"`), `tools` / `profiles` scoping, post `block` and
//! post `accept` with replaced content.

mod common;

use std::{
    future::Future,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{
    body::Bytes,
    extract::{Path as UrlPath, State},
    http::{StatusCode, header::CONTENT_TYPE},
    response::{IntoResponse, Response},
};
use common::*;
use rmcp::model::CallToolResult;
use serde_json::{Value, json};

/// Each call must be answered within this; a hanging hook or gateway fails the test instead.
const CALL_LIMIT: Duration = Duration::from_secs(5);

async fn within<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(CALL_LIMIT, future)
        .await
        .unwrap_or_else(|_| panic!("did not finish within {CALL_LIMIT:?}"))
}

/// What the hook server answers to one request.
enum Reply {
    /// 200 with this JSON body.
    Json(Value),
    /// This status and raw body.
    Raw(StatusCode, &'static str),
    /// Never answers (well, after a minute: longer than any test).
    Hang,
}

type Rule = dyn Fn(&str, &Value) -> Reply + Send + Sync;

/// One request the hook server received.
#[derive(Debug, Clone)]
struct Seen {
    /// The last URL path segment: which configured hook sent it.
    path: String,
    body: Value,
    /// How many calls had reached the upstream when this request arrived.
    upstream_calls_before: usize,
}

#[derive(Clone)]
struct HookState {
    seen: Arc<Mutex<Vec<Seen>>>,
    rule: Arc<Rule>,
    call_log: PathBuf,
}

/// A real HTTP hook endpoint on 127.0.0.1: records every request, answers per `rule`.
struct HookServer {
    base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HookServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HookServer {
    /// `rule` gets the path segment and the request body.
    async fn start(
        call_log: &Path,
        rule: impl Fn(&str, &Value) -> Reply + Send + Sync + 'static,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the hook server");
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let state = HookState {
            seen: seen.clone(),
            rule: Arc::new(rule),
            call_log: call_log.to_owned(),
        };
        let app = axum::Router::new()
            .route("/{name}", axum::routing::post(answer))
            .with_state(state);
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("hook server runs");
        });
        Self { base, seen, task }
    }

    fn url(&self, name: &str) -> String {
        format!("{}/{name}", self.base)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn answer(
    State(state): State<HookState>,
    UrlPath(name): UrlPath<String>,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body)
        .unwrap_or_else(|_| json!({"not json": String::from_utf8_lossy(&body)}));
    let reply = (state.rule)(&name, &body);
    state.seen.lock().unwrap().push(Seen {
        path: name,
        body,
        upstream_calls_before: upstream_calls(&state.call_log).len(),
    });
    match reply {
        Reply::Json(value) => {
            ([(CONTENT_TYPE, "application/json")], value.to_string()).into_response()
        }
        Reply::Raw(status, body) => (status, body).into_response(),
        Reply::Hang => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            (
                [(CONTENT_TYPE, "application/json")],
                r#"{"decision":"allow"}"#,
            )
                .into_response()
        }
    }
}

/// Every call that reached the echo server (its `ECHO_CALL_LOG`), in order.
fn upstream_calls(call_log: &Path) -> Vec<Value> {
    std::fs::read_to_string(call_log)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).expect("call log lines are JSON"))
        .collect()
}

/// The `text` argument of each call that reached the upstream.
fn upstream_texts(call_log: &Path) -> Vec<String> {
    upstream_calls(call_log)
        .iter()
        .map(|c| c["arguments"]["text"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn assert_failed(result: &CallToolResult, expected_code: &str) {
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert_eq!(code(result).as_deref(), Some(expected_code), "{result:?}");
}

/// A hook server plus a gateway configured with the echo server and `hooks` (TOML, built from
/// the hook server's URLs).
struct Setup {
    work: Workdir,
    call_log: PathBuf,
    hook: HookServer,
}

async fn setup(
    rule: impl Fn(&str, &Value) -> Reply + Send + Sync + 'static,
    hooks: impl FnOnce(&HookServer) -> String,
) -> Setup {
    let work = Workdir::new("");
    let call_log = work.path("calls.jsonl");
    let hook = HookServer::start(&call_log, rule).await;
    let toml = format!(
        "{}{}",
        server_toml(
            "echo",
            "echo_server",
            &[("ECHO_CALL_LOG", call_log.to_str().unwrap())]
        ),
        hooks(&hook)
    );
    std::fs::write(work.config(), toml).expect("write config");
    Setup {
        work,
        call_log,
        hook,
    }
}

fn text_arg(request: &Value) -> &str {
    request["arguments"]["text"].as_str().unwrap_or_default()
}

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
