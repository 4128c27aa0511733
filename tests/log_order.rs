//! A log message an upstream writes before its answer reaches the client before that answer, from a stdio and from an HTTP upstream.
//!
//! For a 2026-07-28 client over HTTP this decides whether the log arrives at all: it has no
//! session, so only the stream of the call the log belongs to can carry it, and that stream
//! ends with the answer. toolgate relays the log through a task of rmcp's while the answer
//! comes back at once, so without care the answer won about half of the races.
#![allow(deprecated)] // logging: a 2025-era feature (SEP-2577) still relayed to every client

mod common;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use common::{HttpGateway, Workdir, example, listening_example, modern, server_toml, toml_string};
use rmcp::{
    ClientHandler, RoleClient,
    model::{
        CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation,
        LoggingMessageNotificationParam,
    },
    service::{NotificationContext, RunningService},
};
use serde_json::json;
use tokio::sync::Notify;

/// Records the data of every log message it is sent.
#[derive(Clone, Default)]
struct Logs {
    data: Arc<Mutex<Vec<String>>>,
    seen: Arc<Notify>,
}

impl Logs {
    fn data(&self) -> Vec<String> {
        self.data.lock().unwrap().clone()
    }

    /// Waits (10 s at most) until `count` messages arrived; what arrived.
    async fn wait_for(&self, count: usize) -> Vec<String> {
        let _ = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let seen = self.seen.notified();
                if self.data.lock().unwrap().len() >= count {
                    return;
                }
                seen.await;
            }
        })
        .await;
        self.data()
    }
}

impl ClientHandler for Logs {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("toolgate-log-order", "0"),
        )
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let data = params.data.as_str().unwrap_or_default().to_owned();
        self.data.lock().unwrap().push(data);
        self.seen.notify_waiters();
    }
}

async fn call(client: &RunningService<RoleClient, Logs>, tool: &str, args: serde_json::Value) {
    let mut params = CallToolRequestParams::new(tool.to_owned());
    params.arguments = args.as_object().cloned();
    let result = client.call_tool(params).await.expect("the call");
    assert_ne!(result.is_error, Some(true), "{result:?}");
}

/// notes-server over stdio logs once and answers at once: every call's log arrives (the raw
/// path to a stdio server).
#[tokio::test]
async fn from_a_stdio_upstream_every_log_reaches_a_2026_client_over_http() {
    let work = Workdir::new(&server_toml("notes", "notes_server", &[]));
    let gateway = HttpGateway::start(&work).await;
    let logs = Logs::default();
    let client = modern::over_http(logs.clone(), &gateway.url).await;
    const CALLS: usize = 60;
    for n in 0..CALLS {
        call(
            &client,
            "notes__log",
            json!({"message": format!("log {n}")}),
        )
        .await;
    }
    let expected: Vec<String> = (0..CALLS).map(|n| format!("log {n}")).collect();
    assert_eq!(logs.wait_for(CALLS).await, expected);
    client.cancel().await.ok();
}

/// The conformance fixture over HTTP logs three times, the last just before its answer, on
/// the call's own stream (rmcp's HTTP client in toolgate).
#[tokio::test]
async fn from_an_http_upstream_every_log_reaches_a_2026_client_over_http() {
    let (_fixture, url) = conformance_over_http().await;
    let work = Workdir::new(&format!(
        "[servers.conformance]\nurl = {}\n",
        toml_string(&url)
    ));
    let gateway = HttpGateway::start(&work).await;
    let logs = Logs::default();
    let client = modern::over_http(logs.clone(), &gateway.url).await;
    const CALLS: usize = 15;
    for _ in 0..CALLS {
        call(&client, "conformance__test_tool_with_logging", json!({})).await;
    }
    let one_call = [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ];
    let expected: Vec<String> = (0..CALLS)
        .flat_map(|_| one_call.map(str::to_owned))
        .collect();
    assert_eq!(logs.wait_for(expected.len()).await, expected);
    client.cancel().await.ok();
}

/// `examples/conformance_server` serving HTTP, and its URL.
async fn conformance_over_http() -> (tokio::process::Child, String) {
    let mut command = tokio::process::Command::new(example("conformance_server"));
    command.args(["--http", "127.0.0.1:0"]);
    listening_example(command, "conformance-server: listening on ").await
}
