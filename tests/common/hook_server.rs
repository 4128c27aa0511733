//! A real HTTP hook endpoint for `[[hooks]]` tests, and a gateway set up in front of the echo server with it.

use std::{
    future::Future,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{
    body::Bytes,
    extract::{Path as UrlPath, State},
    http::{StatusCode, header::CONTENT_TYPE},
    response::{IntoResponse, Response},
};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use super::{Workdir, code, server_toml};

/// Each call must be answered within this; a hanging hook or gateway fails the test instead.
pub const CALL_LIMIT: Duration = Duration::from_secs(5);

pub async fn within<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(CALL_LIMIT, future)
        .await
        .unwrap_or_else(|_| panic!("did not finish within {CALL_LIMIT:?}"))
}

/// What the hook server answers to one request.
pub enum Reply {
    /// 200 with this JSON body.
    Json(Value),
    /// This status and raw body.
    Raw(StatusCode, &'static str),
    /// Never answers (well, after a minute: longer than any test). A request whose caller
    /// goes away meanwhile counts as abandoned ([`HookServer::abandoned`]).
    Hang,
}

pub type Rule = dyn Fn(&str, &Value) -> Reply + Send + Sync;

/// One request the hook server received.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The last URL path segment: which configured hook sent it.
    pub path: String,
    pub body: Value,
    /// How many calls had reached the upstream when this request arrived.
    pub upstream_calls_before: usize,
}

#[derive(Clone)]
struct HookState {
    seen: Arc<Mutex<Vec<Seen>>>,
    abandoned: Arc<AtomicUsize>,
    rule: Arc<Rule>,
    call_log: PathBuf,
}

/// A real HTTP hook endpoint on 127.0.0.1: records every request, answers per `rule`.
pub struct HookServer {
    base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    abandoned: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HookServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HookServer {
    /// `rule` gets the path segment and the request body.
    pub async fn start(
        call_log: &Path,
        rule: impl Fn(&str, &Value) -> Reply + Send + Sync + 'static,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the hook server");
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let abandoned = Arc::new(AtomicUsize::new(0));
        let state = HookState {
            seen: seen.clone(),
            abandoned: abandoned.clone(),
            rule: Arc::new(rule),
            call_log: call_log.to_owned(),
        };
        let app = axum::Router::new()
            .route("/{name}", axum::routing::post(answer))
            .with_state(state);
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("hook server runs");
        });
        Self {
            base,
            seen,
            abandoned,
            task,
        }
    }

    pub fn url(&self, name: &str) -> String {
        format!("{}/{name}", self.base)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// How many `Hang` requests their caller gave up (the connection closed, so the server
    /// dropped the request's handler).
    pub fn abandoned(&self) -> usize {
        self.abandoned.load(Ordering::SeqCst)
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
            // Dropped with the handler when the caller goes away, disarmed if it ever answers.
            struct Abandoned(Option<Arc<AtomicUsize>>);
            impl Drop for Abandoned {
                fn drop(&mut self) {
                    if let Some(count) = &self.0 {
                        count.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
            let mut abandoned = Abandoned(Some(state.abandoned.clone()));
            tokio::time::sleep(Duration::from_secs(60)).await;
            abandoned.0 = None;
            (
                [(CONTENT_TYPE, "application/json")],
                r#"{"decision":"allow"}"#,
            )
                .into_response()
        }
    }
}

/// Every call that reached the echo server (its `ECHO_CALL_LOG`), in order.
pub fn upstream_calls(call_log: &Path) -> Vec<Value> {
    std::fs::read_to_string(call_log)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).expect("call log lines are JSON"))
        .collect()
}

/// The `text` argument of each call that reached the upstream.
pub fn upstream_texts(call_log: &Path) -> Vec<String> {
    upstream_calls(call_log)
        .iter()
        .map(|c| c["arguments"]["text"].as_str().unwrap_or("").to_owned())
        .collect()
}

pub fn assert_failed(result: &CallToolResult, expected_code: &str) {
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert_eq!(code(result).as_deref(), Some(expected_code), "{result:?}");
}

/// A hook server plus a gateway configured with the echo server and `hooks` (TOML, built from
/// the hook server's URLs).
pub struct Setup {
    pub work: Workdir,
    pub call_log: PathBuf,
    pub hook: HookServer,
}

pub async fn setup(
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

pub fn text_arg(request: &Value) -> &str {
    request["arguments"]["text"].as_str().unwrap_or_default()
}
