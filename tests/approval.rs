//! `ask`: a pre hook (the `policy_hook` example as a command hook, `POLICY_ASK=echo__echo`)
//! asks for approval. A client that declared elicitation is asked through
//! `elicitation/create`: accept lets the call reach the upstream, decline (or cancel) denies
//! it. A client without elicitation cannot approve, so the call is denied.

mod common;

use std::{
    future::Future,
    path::{Path, PathBuf},
    process::Stdio,
    sync::{Arc, Mutex},
    time::Duration,
};

use common::*;
use rmcp::{
    ClientHandler, ErrorData, RoleClient, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig,
        ElicitRequestParams, ElicitResult, ElicitationAction, Implementation,
    },
    service::{RequestContext, RunningService},
    transport::{StreamableHttpClientTransport, TokioChildProcess},
};
use serde_json::{Value, json};

const LIMIT: Duration = Duration::from_secs(5);

async fn within<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, future)
        .await
        .unwrap_or_else(|_| panic!("did not finish within {LIMIT:?}"))
}

/// A client that declares elicitation and answers every request with `action`, recording
/// the messages it was asked.
#[derive(Clone)]
struct Approver {
    action: ElicitationAction,
    asked: Arc<Mutex<Vec<String>>>,
}

impl Approver {
    fn new(action: ElicitationAction) -> Self {
        Self {
            action,
            asked: Arc::default(),
        }
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

impl ClientHandler for Approver {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_elicitation().build(),
            Implementation::new("toolgate-approval-tests", "0"),
        )
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let message = match request {
            ElicitRequestParams::FormElicitationParams { message, .. } => message,
            other => format!("unexpected elicitation: {other:?}"),
        };
        self.asked.lock().unwrap().push(message);
        Ok(match self.action {
            ElicitationAction::Accept => {
                ElicitResult::new(ElicitationAction::Accept).with_content(json!({}))
            }
            _ => ElicitResult::new(self.action.clone()),
        })
    }
}

/// The echo server (logging calls to `calls.jsonl`) behind a command hook that asks for
/// `echo__echo` and allows everything else.
struct Setup {
    work: Workdir,
    call_log: PathBuf,
}

fn setup() -> Setup {
    let work = Workdir::new("");
    let call_log = work.path("calls.jsonl");
    let hook_log = work.path("hook.jsonl");
    let toml = format!(
        "{}[[hooks]]\nstage = \"pre\"\ncommand = [\"env\", \"POLICY_ASK=echo__echo\", {}, {}]\ntimeout_ms = 3000\n",
        server_toml(
            "echo",
            "echo_server",
            &[("ECHO_CALL_LOG", call_log.to_str().unwrap())]
        ),
        toml_string(&format!("POLICY_LOG={}", hook_log.display())),
        toml_string(&example("policy_hook").display().to_string()),
    );
    std::fs::write(work.config(), toml).expect("write config");
    Setup { work, call_log }
}

impl Setup {
    /// The hook's own log of the requests it answered.
    fn hook_requests(&self) -> Vec<Value> {
        read_json_lines(&self.work.path("hook.jsonl"))
    }
}

fn read_json_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON line"))
        .collect()
}

/// The `text` argument of each call that reached the upstream.
fn upstream_texts(call_log: &Path) -> Vec<String> {
    read_json_lines(call_log)
        .iter()
        .map(|c| c["arguments"]["text"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// `toolgate serve` over stdio with `handler` as the client.
async fn stdio_client_as(
    work: &Workdir,
    handler: Approver,
) -> RunningService<RoleClient, Approver> {
    let mut command = tokio::process::Command::new(toolgate());
    command
        .arg("--config")
        .arg(work.config())
        .arg("serve")
        .env("RUST_LOG", "toolgate=debug");
    let (transport, _stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn toolgate");
    tokio::time::timeout(Duration::from_secs(60), handler.serve(transport))
        .await
        .expect("handshake within 60s")
        .expect("MCP handshake with toolgate over stdio")
}

async fn call_as(
    client: &RunningService<RoleClient, Approver>,
    name: &str,
    args: Value,
) -> CallToolResult {
    let mut params = CallToolRequestParams::new(name.to_owned());
    params.arguments = args.as_object().cloned();
    within(client.call_tool(params))
        .await
        .expect("tools/call answered")
}

const ASKED: &str = "Allow tool \"echo__echo\"? echo__echo needs a human";

#[tokio::test]
async fn an_accepted_approval_lets_the_call_reach_the_upstream() {
    let s = setup();
    let approver = Approver::new(ElicitationAction::Accept);
    let client = stdio_client_as(&s.work, approver.clone()).await;

    let result = call_as(&client, "echo__echo", json!({"text": "approved"})).await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(text(&result), "approved");
    assert_eq!(approver.asked(), [ASKED], "the client was asked once");
    assert_eq!(upstream_texts(&s.call_log), ["approved"]);

    // A tool the hook allows is not elicited.
    let sum = call_as(&client, "echo__add", json!({"a": 1, "b": 2})).await;
    assert_ne!(sum.is_error, Some(true), "{sum:?}");
    assert_eq!(approver.asked().len(), 1, "no question for an allowed tool");
    let hook_tools: Vec<Value> = s
        .hook_requests()
        .iter()
        .map(|r| r["tool"].clone())
        .collect();
    assert_eq!(hook_tools, [json!("echo__echo"), json!("echo__add")]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_declined_approval_denies_the_call_without_reaching_the_upstream() {
    let s = setup();
    let approver = Approver::new(ElicitationAction::Decline);
    let client = stdio_client_as(&s.work, approver.clone()).await;

    let result = call_as(&client, "echo__echo", json!({"text": "declined"})).await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert_eq!(
        text(&result),
        "Error: the user rejected tool \"echo__echo\""
    );
    assert_eq!(code(&result).as_deref(), Some("DENIED"));
    assert_eq!(approver.asked(), [ASKED]);
    assert_eq!(s.hook_requests().len(), 1, "the hook was asked");
    assert!(
        upstream_texts(&s.call_log).is_empty(),
        "the upstream was not called"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_cancelled_approval_denies_the_call() {
    let s = setup();
    let approver = Approver::new(ElicitationAction::Cancel);
    let client = stdio_client_as(&s.work, approver.clone()).await;

    let result = call_as(&client, "echo__echo", json!({"text": "cancelled"})).await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert_eq!(
        text(&result),
        "Error: approval for tool \"echo__echo\" was cancelled"
    );
    assert_eq!(code(&result).as_deref(), Some("DENIED"));
    assert_eq!(approver.asked(), [ASKED]);
    assert!(upstream_texts(&s.call_log).is_empty());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_client_without_elicitation_cannot_approve() {
    let s = setup();
    // The shared fixture's client declares no capabilities.
    let (client, _) = within(stdio_client(&s.work)).await;

    let result = within(call(&client, "echo__echo", json!({"text": "nobody asked"})))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert_eq!(
        text(&result),
        "Error: tool \"echo__echo\" requires approval, but no approval channel is available"
    );
    assert_eq!(code(&result).as_deref(), Some("DENIED"));
    assert_eq!(s.hook_requests().len(), 1, "the hook was asked");
    assert!(upstream_texts(&s.call_log).is_empty());

    // Tools that need no approval still work for this client.
    let sum = within(call(&client, "echo__add", json!({"a": 2, "b": 3})))
        .await
        .unwrap();
    assert_ne!(sum.is_error, Some(true), "{sum:?}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn approval_is_elicited_over_streamable_http_too() {
    let s = setup();
    let gateway = within(HttpGateway::start(&s.work)).await;

    let approver = Approver::new(ElicitationAction::Accept);
    let transport = StreamableHttpClientTransport::from_uri(gateway.url.as_str());
    let client = within(approver.clone().serve(transport))
        .await
        .expect("MCP handshake over HTTP");
    let result = call_as(&client, "echo__echo", json!({"text": "over http"})).await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(text(&result), "over http");
    assert_eq!(approver.asked(), [ASKED]);

    let decliner = Approver::new(ElicitationAction::Decline);
    let transport = StreamableHttpClientTransport::from_uri(gateway.url.as_str());
    let declining = within(decliner.clone().serve(transport))
        .await
        .expect("MCP handshake over HTTP");
    let result = call_as(&declining, "echo__echo", json!({"text": "refused"})).await;
    assert_eq!(code(&result).as_deref(), Some("DENIED"), "{result:?}");
    assert_eq!(decliner.asked(), [ASKED]);

    assert_eq!(upstream_texts(&s.call_log), ["over http"]);
    client.cancel().await.unwrap();
    declining.cancel().await.unwrap();
}
