//! DNS-rebinding and cross-site defences: a browser `Origin` must be in
//! `gateway.http.allowed_origins` or loopback, unless `allow_loopback_origins = false` (403
//! otherwise, no session), and `Host` must be present, non-empty and name this server.

mod common;

use std::time::Duration;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn echo_only(gateway: &str) -> Workdir {
    Workdir::new(&format!(
        "{gateway}{}",
        server_toml("echo", "echo_server", &[])
    ))
}

async fn initialize_from(url: &str, origin: &str) -> reqwest::Response {
    mcp_post(url, None, &[("origin", origin)], &initialize_request(1)).await
}

fn assert_refused(response: &reqwest::Response, origin: &str) {
    assert_eq!(response.status(), 403, "{origin}: {response:?}");
    assert!(
        response.headers().get("mcp-session-id").is_none(),
        "{origin}: no session"
    );
}

#[tokio::test]
async fn foreign_origins_are_refused_and_loopback_ones_served() {
    let work = echo_only("");
    let gateway = HttpGateway::start(&work).await;
    let port = gateway.authority().rsplit_once(':').unwrap().1.to_owned();

    for origin in [
        "http://evil.example",
        "https://evil.example:443",
        "null",
        "http://127.0.0.1.evil.example",
    ] {
        assert_refused(&initialize_from(&gateway.url, origin).await, origin);
    }
    for origin in [
        format!("http://localhost:{port}"),
        format!("http://127.0.0.1:{port}"),
        "http://[::1]:3000".to_owned(),
    ] {
        let response = initialize_from(&gateway.url, &origin).await;
        assert_eq!(response.status(), 200, "{origin}");
        assert!(response.headers().get("mcp-session-id").is_some());
    }
    // Non-browser clients send no Origin and are unaffected.
    let (client, _) = gateway.client().await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn configured_origins_match_scheme_host_and_port() {
    let work = echo_only(
        "[gateway.http]\nallowed_origins = [\"https://app.example\", \"http://tools.example:*\"]\n",
    );
    let gateway = HttpGateway::start(&work).await;
    // Listing origins adds them: loopback ones stay allowed.
    for origin in [
        "https://app.example",
        "http://tools.example:8080",
        "http://localhost:3000",
    ] {
        assert_eq!(
            initialize_from(&gateway.url, origin).await.status(),
            200,
            "{origin}"
        );
    }
    for origin in [
        "http://app.example",
        "https://app.example:8443",
        "https://tools.example",
    ] {
        assert_refused(&initialize_from(&gateway.url, origin).await, origin);
    }
}

#[tokio::test]
async fn loopback_origins_can_be_turned_off_leaving_only_the_listed_ones() {
    let work = echo_only(
        "[gateway.http]\nallow_loopback_origins = false\nallowed_origins = [\"http://localhost:6274\"]\n",
    );
    let gateway = HttpGateway::start(&work).await;
    let port = gateway.authority().rsplit_once(':').unwrap().1.to_owned();
    let response = initialize_from(&gateway.url, "http://localhost:6274").await;
    assert_eq!(response.status(), 200, "the listed loopback origin");
    for origin in [
        format!("http://localhost:{port}"),
        format!("http://127.0.0.1:{port}"),
        "http://localhost:3000".to_owned(),
        "https://[::1]".to_owned(),
        "http://evil.example".to_owned(),
    ] {
        assert_refused(&initialize_from(&gateway.url, &origin).await, &origin);
    }
    // Non-browser clients send no Origin and are unaffected.
    let (client, _) = gateway.client().await;
    client.cancel().await.unwrap();
}

/// Sends `head` (request line and headers, no body) on a raw socket; the status line.
async fn raw_status(authority: &str, head: &str) -> String {
    let mut socket = tokio::net::TcpStream::connect(authority)
        .await
        .expect("connect");
    socket.write_all(head.as_bytes()).await.expect("send");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), socket.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    answer.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn host_must_be_present_non_empty_and_ours() {
    let work = echo_only("");
    let gateway = HttpGateway::start(&work).await;
    let authority = gateway.authority();
    let body = serde_json::to_string(&initialize_request(1)).unwrap();
    let request = |host_line: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\n{host_line}content-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    for (host_line, expected) in [
        ("host:\r\n", "400"),
        ("host: \r\n", "400"),
        ("", "400"),
        ("host: evil.example\r\n", "403"),
        ("host: evil.example:80\r\n", "403"),
    ] {
        let status = raw_status(&authority, &request(host_line)).await;
        assert!(
            status.starts_with(&format!("HTTP/1.1 {expected}")),
            "{host_line:?}: {status}"
        );
    }
    let status = raw_status(&authority, &request(&format!("host: {authority}\r\n"))).await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
}
