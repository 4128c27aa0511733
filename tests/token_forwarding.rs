//! A client's `Authorization: Bearer <token>` (a static profile token, or an IdP's JWT under
//! `[gateway.auth]`) selects its profile and goes no further: neither an HTTP upstream nor an
//! HTTP hook ever sees it, in a header or a body, and neither the log (at trace level, every
//! crate) nor the audit log holds it. An IdP token's subject does go on, to both.
//!
//! The upstream is a real toolgate serving the echo server over HTTP, behind a recording
//! proxy run by the test; the hooks are a recording endpoint run by the test too; the IdP is
//! the test's own ([`common::idp`]).

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
    /// Where `token` shows, if anywhere: a header name or value, or the body.
    fn leaks(&self, token: &str) -> Option<String> {
        for (name, value) in &self.headers {
            let value = String::from_utf8_lossy(value.as_bytes());
            if name.as_str().contains(token) || value.contains(token) {
                return Some(format!("header {name}: {value}"));
            }
        }
        self.body
            .contains(token)
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

/// What the upstream, the hooks, the audit log and the log got from one call.
struct Observed {
    proxied: Vec<Seen>,
    hooked: Vec<Seen>,
    audited: String,
    logged: String,
}

/// Serves `config_tail` (profiles, `[gateway.auth]`) in front of the recording proxy and
/// hooks, calls `remote__echo__echo` with `token`, and collects what everyone saw.
async fn one_call(config_tail: &str, token: &str) -> Observed {
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
         [[hooks]]\nstage = \"pre\"\nhttp = \"{hooks}/hook\"\n\
         [[hooks]]\nstage = \"post\"\nhttp = \"{hooks}/hook\"\n{config_tail}"
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
    let (client, _) = try_http_client(&gateway.url, Some(token))
        .await
        .expect("the token opens the ops profile");
    let result = call(&client, "remote__echo__echo", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "hi", "{result:?}");
    client.cancel().await.unwrap();

    let audited = wait_for_file(&audit, "remote__echo__echo", Duration::from_secs(5)).await;
    let logged = gateway.log.lock().unwrap().clone();
    let proxied = proxied.lock().unwrap().clone();
    let hooked = hooked.lock().unwrap().clone();
    Observed {
        proxied,
        hooked,
        audited,
        logged,
    }
}

/// Nobody downstream of the gateway saw `token`, and the call did go through all of them.
fn assert_kept(observed: &Observed, token: &str) {
    let Observed {
        proxied,
        hooked,
        audited,
        logged,
    } = observed;
    assert!(
        proxied.iter().any(|s| s.body.contains("tools/call")),
        "the call went through the recording proxy: {proxied:#?}"
    );
    assert_eq!(
        hooked.len(),
        2,
        "a pre and a post hook request: {hooked:#?}"
    );
    assert!(
        hooked.iter().all(|s| s.body.contains(r#""profile":"ops""#)),
        "the hooks saw the call of the token's profile: {hooked:#?}"
    );
    assert!(!audited.contains(token), "the audit log holds the token");
    assert!(
        logged.contains("CallToolRequest"),
        "the debug log shows the request as received: {logged:.2000}"
    );
    assert!(!logged.contains(token), "the log holds the token");
    for seen in proxied.iter().chain(hooked) {
        assert_eq!(seen.leaks(token), None, "the token leaked: {seen:#?}");
        assert!(
            seen.headers.get(header::AUTHORIZATION).is_none(),
            "no Authorization header was configured, so none may be sent: {seen:#?}"
        );
    }
}

#[tokio::test]
async fn the_profile_token_reaches_no_upstream_and_no_hook() {
    let observed = one_call(
        &format!("[profiles.ops]\ntokens = [{}]\n", toml_string(TOKEN)),
        TOKEN,
    )
    .await;
    assert_kept(&observed, TOKEN);
    assert!(
        !observed.audited.contains("subject"),
        "a static token has no subject: {}",
        observed.audited
    );
}

#[tokio::test]
async fn the_idp_token_reaches_no_upstream_and_no_hook_but_its_subject_does() {
    let key = idp::SigningKey::rsa("rsa-1");
    let idp = idp::Idp::start(&[&key]).await;
    let audience = "https://toolgate.test/mcp";
    let jwt = key.sign(&idp.claims(
        audience,
        "alice@example.test",
        json!({"scope": "openid tools:ops"}),
    ));
    let observed = one_call(
        &format!(
            "[profiles.ops]\n\
             [gateway.auth]\nissuer = \"{}\"\naudience = \"{audience}\"\n\
             [[gateway.auth.map]]\nvalue = \"tools:ops\"\nprofile = \"ops\"\n",
            idp.issuer
        ),
        &jwt,
    )
    .await;
    assert_kept(&observed, &jwt);
    // Nor any part of it (a proxy could forward the payload alone).
    let payload = jwt.split('.').nth(1).unwrap();
    for seen in observed.proxied.iter().chain(&observed.hooked) {
        assert_eq!(seen.leaks(payload), None, "the token's payload leaked");
    }
    assert!(!observed.logged.contains(payload));
    assert!(
        observed
            .hooked
            .iter()
            .all(|s| s.body.contains(r#""subject":"alice@example.test""#)),
        "each hook request names the subject: {:#?}",
        observed.hooked
    );
    assert!(
        observed
            .audited
            .contains(r#""subject":"alice@example.test""#),
        "the audit line names the subject: {}",
        observed.audited
    );
}
