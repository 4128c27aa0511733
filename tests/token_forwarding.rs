//! A client's `Authorization: Bearer <profile token>` selects its profile and goes no
//! further: neither an HTTP upstream nor an HTTP hook ever sees it, in a header or a body,
//! and neither the log (at trace level, every crate) nor the audit log holds it.
//!
//! The upstream is a real toolgate serving the echo server over HTTP, behind a recording
//! proxy run by the test; the hooks are a recording endpoint run by the test too.

mod common;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    body::Bytes,
    extract::{Request, State},
    http::{HeaderMap, Method, StatusCode, header},
    response::{IntoResponse, Response},
};
use common::*;
use serde_json::json;

const TOKEN: &str = "ops-token-that-must-stay-here";

/// One request as a test endpoint received it.
#[derive(Debug, Clone)]
struct Seen {
    headers: HeaderMap,
    body: String,
}

impl Seen {
    /// Where the token shows, if anywhere: a header name or value, or the body.
    fn leaks(&self) -> Option<String> {
        for (name, value) in &self.headers {
            let value = String::from_utf8_lossy(value.as_bytes());
            if name.as_str().contains(TOKEN) || value.contains(TOKEN) {
                return Some(format!("header {name}: {value}"));
            }
        }
        self.body
            .contains(TOKEN)
            .then(|| format!("body {}", self.body))
    }
}

type Log = Arc<Mutex<Vec<Seen>>>;

#[derive(Clone)]
struct Proxy {
    upstream: String,
    seen: Log,
}

/// Records the request, then forwards it to the upstream and relays the whole answer. A
/// GET (the optional standalone SSE stream) is refused with 405, as the spec allows, so
/// every exchange ends and can be relayed in one piece.
async fn forward(State(proxy): State<Proxy>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    proxy.seen.lock().unwrap().push(Seen {
        headers: parts.headers.clone(),
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    if parts.method == Method::GET {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let mut headers = parts.headers.clone();
    headers.remove(header::HOST);
    headers.remove(header::CONTENT_LENGTH);
    let answer = reqwest::Client::new()
        .request(parts.method, &proxy.upstream)
        .headers(headers)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = answer.status();
    let mut relayed = HeaderMap::new();
    for name in [header::CONTENT_TYPE, "mcp-session-id".parse().unwrap()] {
        if let Some(value) = answer.headers().get(&name) {
            relayed.insert(name, value.clone());
        }
    }
    let bytes = answer.bytes().await.unwrap();
    (status, relayed, bytes).into_response()
}

/// Records the hook request and allows (pre) or accepts (post) the call.
async fn hook(State(seen): State<Log>, headers: HeaderMap, body: Bytes) -> Response {
    let body = String::from_utf8_lossy(&body).into_owned();
    let stage: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    let decision = if stage["stage"] == "pre" {
        "allow"
    } else {
        "accept"
    };
    seen.lock().unwrap().push(Seen { headers, body });
    axum::Json(json!({"decision": decision})).into_response()
}

/// Serves `app` on 127.0.0.1; its base URL. The server lives as long as the test's runtime.
async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

#[tokio::test]
async fn the_profile_token_reaches_no_upstream_and_no_hook() {
    let inner = Workdir::new(&server_toml("echo", "echo_server", &[]));
    let upstream = HttpGateway::start(&inner).await;

    let proxied: Log = Arc::default();
    let proxy = serve(
        axum::Router::new()
            .route("/mcp", axum::routing::any(forward))
            .with_state(Proxy {
                upstream: upstream.url.clone(),
                seen: proxied.clone(),
            }),
    )
    .await;
    let hooked: Log = Arc::default();
    let hooks = serve(
        axum::Router::new()
            .route("/hook", axum::routing::post(hook))
            .with_state(hooked.clone()),
    )
    .await;

    let outer = Workdir::new(&format!(
        "[servers.remote]\nurl = \"{proxy}/mcp\"\n\
         [profiles.ops]\ntokens = [{}]\n\
         [[hooks]]\nstage = \"pre\"\nhttp = \"{hooks}/hook\"\n\
         [[hooks]]\nstage = \"post\"\nhttp = \"{hooks}/hook\"\n",
        toml_string(TOKEN)
    ));
    let audit = outer.path("audit.jsonl");
    let mut command = tokio::process::Command::new(toolgate());
    command
        .arg("--config")
        .arg(outer.config())
        .args(["serve", "--http", "127.0.0.1:0", "--audit-log"])
        .arg(&audit)
        .env("RUST_LOG", "trace");
    let gateway = HttpGateway::launch(command).await;
    let (client, _) = try_http_client(&gateway.url, Some(TOKEN))
        .await
        .expect("the token opens the ops profile");
    let result = call(&client, "remote__echo__echo", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "hi", "{result:?}");
    client.cancel().await.unwrap();

    let proxied = proxied.lock().unwrap().clone();
    assert!(
        proxied.iter().any(|s| s.body.contains("tools/call")),
        "the call went through the recording proxy: {proxied:#?}"
    );
    let hooked = hooked.lock().unwrap().clone();
    assert_eq!(
        hooked.len(),
        2,
        "a pre and a post hook request: {hooked:#?}"
    );
    assert!(
        hooked.iter().all(|s| s.body.contains(r#""profile":"ops""#)),
        "the hooks saw the call of the token's profile: {hooked:#?}"
    );
    let audited = wait_for_file(&audit, "remote__echo__echo", Duration::from_secs(5)).await;
    assert!(!audited.contains(TOKEN), "the audit log holds the token");
    let logged = gateway.log.lock().unwrap().clone();
    assert!(
        logged.contains("CallToolRequest"),
        "the debug log shows the request as received: {logged:.2000}"
    );
    assert!(!logged.contains(TOKEN), "the log holds the token");
    for seen in proxied.iter().chain(&hooked) {
        assert_eq!(seen.leaks(), None, "the token leaked: {seen:#?}");
        assert!(
            seen.headers.get(header::AUTHORIZATION).is_none(),
            "no Authorization header was configured, so none may be sent: {seen:#?}"
        );
    }
}
