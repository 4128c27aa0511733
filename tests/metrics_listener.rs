//! `/metrics` lives on its own listener (`serve --metrics ADDR` or
//! `gateway.http.metrics_addr`), never on the MCP one: loopback unless a `metrics_token` is
//! set, which every scrape must then present; the Host is checked there too.

mod common;

use std::{process::Stdio, time::Duration};

use common::*;
use rmcp::{ServiceExt, transport::TokioChildProcess};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

const METRICS_TOKEN: &str = "scrape-secret";
const OPS_TOKEN: &str = "ops-secret";

fn echo_only(gateway: &str) -> Workdir {
    Workdir::new(&format!(
        "{gateway}{}",
        server_toml("echo", "echo_server", &[])
    ))
}

async fn get(url: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut request = reqwest::Client::new().get(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    tokio::time::timeout(Duration::from_secs(5), request.send())
        .await
        .expect("answered within 5s")
        .expect("GET reaches the gateway")
}

#[tokio::test]
async fn the_mcp_listener_serves_no_metrics() {
    let work = echo_only("");
    let gateway = HttpGateway::start(&work).await;
    let base = gateway.url.strip_suffix("/mcp").unwrap();
    let response = get(&format!("{base}/metrics"), &[]).await;
    assert_eq!(response.status(), 404, "{response:?}");
    let body = response.text().await.unwrap();
    assert!(!body.contains("toolgate_calls_total"), "{body}");
}

#[tokio::test]
async fn the_metrics_listener_serves_loopback_callers_for_its_own_host() {
    let work = echo_only("");
    let gateway = HttpGateway::start_with(&work, &["--metrics", "127.0.0.1:0"]).await;
    let url = gateway.metrics_url.clone().expect("the metrics line");
    let (client, _) = gateway.client().await;
    call(&client, "echo__echo", json!({"text": "hi"}))
        .await
        .unwrap();

    let response = get(&url, &[]).await;
    assert_eq!(response.status(), 200);
    let body = response.text().await.unwrap();
    assert!(
        body.contains("toolgate_calls_total{tool=\"echo__echo\"} 1"),
        "{body}"
    );

    for host in ["evil.example", "evil.example:9464", ""] {
        let response = get(&url, &[("host", host)]).await;
        assert!(
            [400, 403].contains(&response.status().as_u16()),
            "Host {host:?}: {response:?}"
        );
    }
    let response = get(&url, &[("origin", "http://evil.example")]).await;
    assert_eq!(response.status(), 403);
    let elsewhere = url.replace("/metrics", "/mcp");
    assert_eq!(
        get(&elsewhere, &[]).await.status(),
        404,
        "only /metrics here"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_non_loopback_metrics_address_needs_a_token() {
    let work = echo_only("");
    let config = work.config();
    let config = config.to_str().unwrap();
    let (code, _, stderr) = run_toolgate(&[
        "--config",
        config,
        "serve",
        "--http",
        "127.0.0.1:0",
        "--metrics",
        "0.0.0.0:0",
    ]);
    assert_eq!(code, Some(64), "{stderr}");
    assert!(stderr.contains("metrics_token"), "{stderr}");

    let work = echo_only("[gateway.http]\nmetrics_addr = \"0.0.0.0:9464\"\n");
    let config = work.config();
    let (code, _, stderr) = run_toolgate(&["--config", config.to_str().unwrap(), "check"]);
    assert_eq!(code, Some(64), "{stderr}");
    assert!(stderr.contains("gateway.http.metrics_addr"), "{stderr}");
}

#[tokio::test]
async fn a_metrics_token_must_be_presented() {
    let work = echo_only(&format!(
        "[gateway.http]\nmetrics_token = {}\n[profiles.ops]\ntokens = [{}]\n",
        toml_string(METRICS_TOKEN),
        toml_string(OPS_TOKEN)
    ));
    let gateway = HttpGateway::start_with(&work, &["--metrics", "127.0.0.1:0"]).await;
    let url = gateway.metrics_url.clone().expect("the metrics line");

    let anonymous = get(&url, &[]).await;
    assert_eq!(anonymous.status(), 401);
    let challenge = anonymous.headers().get("www-authenticate").unwrap();
    assert!(challenge.to_str().unwrap().starts_with("Bearer"));
    for wrong in [
        format!("Bearer {OPS_TOKEN}"),
        "Bearer nope".to_owned(),
        METRICS_TOKEN.to_owned(),
    ] {
        let response = get(&url, &[("authorization", &wrong)]).await;
        assert_eq!(response.status(), 401, "{wrong}");
    }
    let response = get(
        &url,
        &[("authorization", &format!("Bearer {METRICS_TOKEN}"))],
    )
    .await;
    assert_eq!(response.status(), 200);
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("# TYPE toolgate_calls_total counter")
    );
}

#[tokio::test]
async fn stdio_serving_can_have_a_metrics_listener_too() {
    let work = echo_only("");
    let mut command = tokio::process::Command::new(toolgate());
    command
        .arg("--config")
        .arg(work.config())
        .args(["serve", "--metrics", "127.0.0.1:0"]);
    let (transport, stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn toolgate");
    let mut lines = BufReader::new(stderr.expect("stderr piped")).lines();
    let url = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.expect("stderr") {
            if let Some(url) = line.strip_prefix("toolgate: metrics on ") {
                return url.to_owned();
            }
        }
        panic!("toolgate exited before serving metrics");
    })
    .await
    .expect("the metrics line within 30s");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    let client = Recorder::default()
        .serve(transport)
        .await
        .expect("handshake");
    call(&client, "echo__echo", json!({"text": "hi"}))
        .await
        .unwrap();
    let body = get(&url, &[]).await.text().await.unwrap();
    assert!(
        body.contains("toolgate_calls_total{tool=\"echo__echo\"} 1"),
        "{body}"
    );
    client.cancel().await.unwrap();
}
