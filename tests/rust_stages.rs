//! Gates, wrappers and post hooks written in Rust, through the library API, around a real upstream.

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use toolgate::{
    config::{self, ProfileName},
    gateway::{Gateway, StartOptions},
    pipeline::{
        Answer, Around, BoxFuture, Call, CallError, GateDecision, Next, PostDecision, PostHook,
        PreGate, Stages, ToolCall,
    },
};

/// What each stage saw: its name and how many calls the upstream had received by then.
type Trace = Arc<Mutex<Vec<(&'static str, usize)>>>;

fn upstream_calls(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

struct Gate(Trace, std::path::PathBuf);
impl PreGate for Gate {
    fn check<'a>(&'a self, call: &'a ToolCall) -> BoxFuture<'a, GateDecision> {
        Box::pin(async move {
            self.0
                .lock()
                .unwrap()
                .push(("pre", upstream_calls(&self.1)));
            if call.entry.upstream_name == "fail" {
                GateDecision::Deny {
                    reason: "no failing today".into(),
                    code: "DENIED",
                }
            } else {
                GateDecision::Allow
            }
        })
    }
}

/// Answers `sleep` itself, without calling `next`; wraps everything else.
struct Wrapper(Trace, std::path::PathBuf);
impl Around for Wrapper {
    fn around<'a>(
        &'a self,
        call: &'a ToolCall,
        cancel: CancellationToken,
        next: Next<'a>,
    ) -> BoxFuture<'a, Result<Answer, CallError>> {
        Box::pin(async move {
            self.0
                .lock()
                .unwrap()
                .push(("around", upstream_calls(&self.1)));
            if call.entry.upstream_name == "sleep" {
                return Ok(Answer::Decoded(CallToolResult::success(vec![
                    ContentBlock::text("answered by the wrapper"),
                ])));
            }
            next.run(call, cancel).await
        })
    }
}

struct Post(Trace, std::path::PathBuf);
impl PostHook for Post {
    fn after<'a>(
        &'a self,
        _call: &'a ToolCall,
        _result: &'a CallToolResult,
    ) -> BoxFuture<'a, PostDecision> {
        Box::pin(async move {
            self.0
                .lock()
                .unwrap()
                .push(("post", upstream_calls(&self.1)));
            PostDecision::KEEP
        })
    }
}

async fn start(trace: &Trace, work: &Workdir) -> Arc<Gateway> {
    let log = work.path("calls.log");
    let toml = server_toml(
        "echo",
        "echo_server",
        &[("ECHO_CALL_LOG", &log.display().to_string())],
    );
    let config = config::from_toml_str(&toml, "test.toml").unwrap();
    let stages = Stages {
        gates: vec![Arc::new(Gate(trace.clone(), log.clone()))],
        wrappers: vec![Arc::new(Wrapper(trace.clone(), log.clone()))],
        posts: vec![Arc::new(Post(trace.clone(), log))],
        ..Stages::default()
    };
    Gateway::start_with(
        config,
        StartOptions {
            stages,
            ..StartOptions::default()
        },
    )
    .await
    .unwrap()
}

async fn run(
    gateway: &Gateway,
    name: &str,
    args: serde_json::Value,
) -> Result<CallToolResult, CallError> {
    let view = gateway.view(&ProfileName::default_profile()).unwrap();
    let call = Call {
        profile: ProfileName::default_profile(),
        name: name.to_owned(),
        arguments: args.as_object().cloned(),
        cancel: CancellationToken::new(),
        progress: None,
        client: None,
        sub_call_id: None,
        trace: Default::default(),
    };
    gateway.pipeline.execute(&view, call).await
}

#[tokio::test]
async fn stages_run_pre_then_around_then_upstream_then_post() {
    let work = Workdir::new("");
    let trace = Trace::default();
    let gateway = start(&trace, &work).await;
    let result = run(&gateway, "echo__echo", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "hi");
    assert_eq!(
        *trace.lock().unwrap(),
        [("pre", 0), ("around", 0), ("post", 1)]
    );
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_wrapper_that_does_not_call_next_prevents_the_upstream_call() {
    let work = Workdir::new("");
    let trace = Trace::default();
    let gateway = start(&trace, &work).await;
    let result = run(&gateway, "echo__sleep", json!({"ms": 5000}))
        .await
        .unwrap();
    assert_eq!(text(&result), "answered by the wrapper");
    assert_eq!(upstream_calls(&work.path("calls.log")), 0);
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_deny_skips_the_wrappers_and_the_upstream() {
    let work = Workdir::new("");
    let trace = Trace::default();
    let gateway = start(&trace, &work).await;
    let error = run(&gateway, "echo__fail", json!({})).await.unwrap_err();
    assert_eq!(error.code(), "DENIED");
    assert_eq!(error.to_string(), "Error: no failing today");
    assert_eq!(*trace.lock().unwrap(), [("pre", 0)]);
    assert_eq!(upstream_calls(&work.path("calls.log")), 0);
    gateway.shutdown().await;
}

/// Answers a timed-out call itself, and notes whether the token it passed on was cancelled.
struct Fallback(Arc<Mutex<Vec<bool>>>);
impl Around for Fallback {
    fn around<'a>(
        &'a self,
        call: &'a ToolCall,
        cancel: CancellationToken,
        next: Next<'a>,
    ) -> BoxFuture<'a, Result<Answer, CallError>> {
        Box::pin(async move {
            match next.run(call, cancel.clone()).await {
                Err(error) if error.code() == "TOOL_TIMEOUT" => {
                    self.0.lock().unwrap().push(cancel.is_cancelled());
                    Ok(Answer::Decoded(CallToolResult::success(vec![
                        ContentBlock::text("fallback"),
                    ])))
                }
                outcome => outcome,
            }
        })
    }
}

#[tokio::test]
async fn a_timeout_inside_a_wrapper_leaves_the_wrappers_token_alone() {
    // The timeout cancels its own attempt (upstream too); the token a wrapper outside it
    // passed on stays usable, for a fallback or another try.
    let work = Workdir::new("");
    let toml = format!(
        "{}[servers.echo.tools.sleep]\ntimeout_ms = 200\n",
        server_toml(
            "echo",
            "echo_server",
            &[(
                "ECHO_CANCEL_LOG",
                &work.path("cancel.log").display().to_string()
            )],
        )
    );
    let config = config::from_toml_str(&toml, "test.toml").unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let stages = Stages {
        wrappers: vec![Arc::new(Fallback(seen.clone()))],
        ..Stages::default()
    };
    let options = StartOptions {
        stages,
        ..StartOptions::default()
    };
    let gateway = Gateway::start_with(config, options).await.unwrap();
    let result = run(&gateway, "echo__sleep", json!({"ms": 30000}))
        .await
        .unwrap();
    assert_eq!(text(&result), "fallback");
    assert_eq!(*seen.lock().unwrap(), [false]);
    wait_for_file(
        &work.path("cancel.log"),
        "cancelled sleep",
        std::time::Duration::from_secs(10),
    )
    .await;
    gateway.shutdown().await;
}
