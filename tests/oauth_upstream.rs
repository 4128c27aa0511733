//! toolgate as an OAuth client of an HTTP upstream (examples/oauth_server.rs, a real authorization server and MCP server): login, refresh before expiry and once on a 401, needs-login when refreshing fails, a second login with the same registered client, logout; a client_credentials token renewed before it expires and once on a 401.

mod common;

use std::{os::unix::fs::PermissionsExt, path::Path, process::Stdio, time::Duration};

use common::{Recorder, Workdir, call, code, example, text, toml_string, toolgate};
use rmcp::{ServiceExt, transport::TokioChildProcess};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

/// `examples/oauth_server` on a free port; killed on drop.
struct AuthServer {
    _child: tokio::process::Child,
    /// `http://ADDR` (the MCP endpoint is `/mcp`).
    base: String,
}

impl AuthServer {
    async fn start(expires_in: u64) -> Self {
        let mut child = tokio::process::Command::new(example("oauth_server"))
            .args(["--expires-in", &expires_in.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn oauth_server");
        let stderr = child.stderr.take().expect("stderr piped");
        let mut lines = BufReader::new(stderr).lines();
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("oauth_server starts within 30 s")
            .expect("read stderr")
            .expect("a listening line");
        // The rest of its stderr (refused requests) goes to the test's output.
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("{line}");
            }
        });
        let url = line
            .split("listening on ")
            .nth(1)
            .expect("listening line")
            .trim()
            .to_owned();
        Self {
            _child: child,
            base: url.trim_end_matches("/mcp").to_owned(),
        }
    }

    async fn stats(&self) -> Value {
        reqwest::get(format!("{}/admin/stats", self.base))
            .await
            .expect("stats")
            .json::<Value>()
            .await
            .expect("stats JSON")
    }

    async fn admin(&self, what: &str) {
        let status = reqwest::Client::new()
            .post(format!("{}/admin/{what}", self.base))
            .send()
            .await
            .expect("admin request")
            .status();
        assert!(status.is_success(), "admin/{what}: {status}");
    }
}

fn count(stats: &Value, key: &str) -> u64 {
    stats.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// How much counter `key` grew from `before` to `after`.
fn grew(before: &Value, after: &Value, key: &str) -> u64 {
    count(after, key) - count(before, key)
}

/// Has `server` refuse every access token issued so far, then `remote__whoami` (which must
/// answer `ok`); the server's stats before and after that call.
async fn whoami_after_expiring_access(
    server: &AuthServer,
    client: &common::Client,
) -> (Value, Value) {
    server.admin("expire-access").await;
    let before = server.stats().await;
    whoami_ok(client).await;
    (before, server.stats().await)
}

/// `remote__whoami` through `client` answers `ok`.
async fn whoami_ok(client: &common::Client) {
    let result = call(client, "remote__whoami", json!({}))
        .await
        .expect("call");
    assert_eq!(text(&result), "ok", "{result:?}");
}

/// A config with server `remote` at `server` (type = "oauth"), and its token directory.
fn workdir(server: &AuthServer) -> Workdir {
    Workdir::new(&format!(
        "[servers.remote]\nurl = {}\n[servers.remote.auth]\ntype = \"oauth\"\n",
        toml_string(&format!("{}/mcp", server.base))
    ))
}

fn toolgate_command(work: &Workdir, args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(toolgate());
    command
        .arg("--config")
        .arg(work.config())
        .args(args)
        .env("TOOLGATE_GATEWAY__TOKEN_DIR", work.path("tokens"))
        .kill_on_drop(true);
    command
}

/// `toolgate login remote --no-browser`, approving each printed URL the way a browser would
/// (following the authorization server's redirect to toolgate's listener); its stdout.
async fn login(work: &Workdir) -> (bool, String) {
    let mut child = toolgate_command(
        work,
        &["login", "remote", "--no-browser", "--timeout", "20"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit())
    .spawn()
    .expect("spawn toolgate login");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout piped")).lines();
    let mut out = String::new();
    let reading = async {
        while let Ok(Some(line)) = lines.next_line().await {
            out.push_str(&line);
            out.push('\n');
            let trimmed = line.trim();
            if line.starts_with("  http") && !trimmed.contains(' ') {
                let response = reqwest::get(trimmed)
                    .await
                    .expect("follow the authorization URL");
                assert!(
                    response.status().is_success(),
                    "redirect: {}",
                    response.status()
                );
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), reading)
        .await
        .expect("login finishes within 60 s");
    let status = child.wait().await.expect("wait for login");
    (status.success(), out)
}

async fn serve(work: &Workdir) -> common::Client {
    let mut command = toolgate_command(work, &["serve"]);
    command.env("RUST_LOG", "toolgate=debug");
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn toolgate serve");
    Recorder::default()
        .serve(transport)
        .await
        .expect("MCP handshake with toolgate")
}

fn token_files(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn login_stores_private_tokens_and_a_401_refreshes_once_then_a_failed_refresh_needs_login() {
    let server = AuthServer::start(3600).await;
    let work = workdir(&server);

    // Before any login the server needs one, and `check` says how.
    let output = toolgate_command(&work, &["check"])
        .output()
        .await
        .expect("check");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "{stdout}");
    assert!(stdout.contains("remote\tneeds login"), "{stdout}");
    assert!(stdout.contains("toolgate login remote"), "{stdout}");

    let (ok, out) = login(&work).await;
    assert!(ok, "login failed: {out}");
    assert!(out.contains("Signed in to \"remote\" (1 tools"), "{out}");
    assert!(
        !out.contains("access-") && !out.contains("refresh-"),
        "a token was printed: {out}"
    );
    let files = token_files(&work.path("tokens"));
    assert_eq!(files.len(), 1, "{files:?}");
    let mode = std::fs::metadata(&files[0]).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    assert_eq!(stored["server_url"], json!(format!("{}/mcp", server.base)));
    assert_eq!(stored["client_id"], json!("client-1"));
    let first_access = stored["credentials"]["token_response"]["access_token"].clone();
    assert_eq!(count(&server.stats().await, "authorization_code"), 1);

    let client = serve(&work).await;
    whoami_ok(&client).await;

    // The server stops honouring the access token: one 401, one refresh, the call succeeds,
    // and the new token is written back.
    let (before, after) = whoami_after_expiring_access(&server, &client).await;
    assert_eq!(grew(&before, &after, "refresh_token"), 1, "{after}");
    assert_eq!(grew(&before, &after, "refused"), 1, "{after}");
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    assert_ne!(
        stored["credentials"]["token_response"]["access_token"],
        first_access
    );

    // Refresh tokens revoked too: the call fails with UPSTREAM_AUTH_REQUIRED naming the server
    // and the command, after exactly one refresh attempt.
    server.admin("revoke").await;
    let before = server.stats().await;
    let result = call(&client, "remote__whoami", json!({}))
        .await
        .expect("call");
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert_eq!(
        code(&result).as_deref(),
        Some("UPSTREAM_AUTH_REQUIRED"),
        "{result:?}"
    );
    let message = text(&result);
    assert!(
        message.contains("\"remote\"") && message.contains("toolgate login remote"),
        "{message}"
    );
    let after = server.stats().await;
    assert_eq!(grew(&before, &after, "refused_refresh"), 1, "{after}");
    client.cancel().await.expect("close");

    // Signing in again uses the client registered the first time (same authorization server,
    // same redirect URI): no second registration.
    let (ok, out) = login(&work).await;
    assert!(ok, "second login failed: {out}");
    let stats = server.stats().await;
    assert_eq!(count(&stats, "registrations"), 1, "{stats}");
    assert_eq!(count(&stats, "authorization_code"), 2, "{stats}");
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    assert_eq!(stored["client_id"], json!("client-1"));

    // Logout deletes the file; the server needs a login again.
    let output = toolgate_command(&work, &["logout", "remote"])
        .output()
        .await
        .expect("logout");
    assert!(output.status.success());
    assert!(token_files(&work.path("tokens")).is_empty());
}

#[tokio::test]
async fn a_token_near_its_expiry_is_refreshed_before_it_is_sent() {
    // Expires in 10 s. rmcp counts whole seconds and refreshes once fewer than half remain
    // (`remaining < expires_in / 2`): from 6 s after the token was received, at the latest,
    // while the server still takes the old token until 10 s. The token was received inside
    // `login`, so 6.2 s after it returns is inside that window on any machine that gets the
    // call out within 3.8 s.
    let server = AuthServer::start(10).await;
    let work = workdir(&server);
    let (ok, out) = login(&work).await;
    let received = tokio::time::Instant::now();
    assert!(ok, "login failed: {out}");
    let before = server.stats().await;
    let client = serve(&work).await;
    tokio::time::sleep_until(received + Duration::from_millis(6200)).await;
    whoami_ok(&client).await;
    let after = server.stats().await;
    assert!(
        count(&after, "refresh_token") > count(&before, "refresh_token"),
        "{after}"
    );
    // No token was refused: the refresh came before the expiring token was sent.
    assert_eq!(
        count(&after, "refused_token"),
        count(&before, "refused_token"),
        "{after}"
    );
    client.cancel().await.expect("close");
}

/// A config with server `remote` at `server`, signed in with `client_credentials`.
fn client_credentials_workdir(server: &AuthServer) -> Workdir {
    Workdir::new(&format!(
        "[servers.remote]\nurl = {}\n[servers.remote.auth]\ntype = \"client_credentials\"\nclient_id = \"cc-client\"\nclient_secret = \"cc-secret\"\n",
        toml_string(&format!("{}/mcp", server.base))
    ))
}

#[tokio::test]
async fn a_client_credentials_token_is_renewed_before_it_expires() {
    // Tokens live 4 s; rmcp stops sending one 2 s before that, toolgate renews it at 1.5 s.
    let server = AuthServer::start(4).await;
    let work = client_credentials_workdir(&server);
    let client = serve(&work).await;
    whoami_ok(&client).await;
    let first = server.stats().await;
    assert_eq!(count(&first, "client_credentials"), 1, "{first}");

    // Past the first token's expiry: calls go on working, with tokens renewed ahead of time
    // (no request was refused for an old token).
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(2500)).await;
        whoami_ok(&client).await;
    }
    let renewed = server.stats().await;
    assert!(
        count(&renewed, "client_credentials") >= 4,
        "a token per 1.5 s over 7.5 s: {renewed}"
    );
    assert_eq!(count(&renewed, "refused_token"), 0, "{renewed}");
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn a_refused_client_credentials_token_is_renewed_once_and_the_call_sent_again() {
    let server = AuthServer::start(3600).await;
    let work = client_credentials_workdir(&server);
    let client = serve(&work).await;
    whoami_ok(&client).await;

    // The server stops honouring the current token: the call is refused once, one new token
    // is asked for at once, and the same call goes through with it.
    let (before, after) = whoami_after_expiring_access(&server, &client).await;
    assert_eq!(grew(&before, &after, "refused_token"), 1, "{after}");
    assert_eq!(grew(&before, &after, "client_credentials"), 1, "{after}");
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn readyz_shows_a_server_that_needs_login_until_a_login_while_serving() {
    let server = AuthServer::start(3600).await;
    let work = workdir(&server);
    let tokens = work.path("tokens");
    // The token directory in the file as well as in the environment of `toolgate_command`:
    // the HTTP gateway below is started without that environment.
    let config = std::fs::read_to_string(work.config()).unwrap();
    std::fs::write(
        work.config(),
        format!(
            "[gateway]\ntoken_dir = {}\n[gateway.supervise]\nbackoff_initial_ms = 100\nbackoff_max_ms = 400\n{config}",
            toml_string(&tokens.to_string_lossy())
        ),
    )
    .unwrap();
    let gateway = common::HttpGateway::start_with(&work, &["--metrics", "127.0.0.1:0"]).await;
    let readyz = gateway
        .metrics_url
        .as_deref()
        .expect("a metrics listener")
        .replace("/metrics", "/readyz");
    let state_of_remote = || async {
        let body: Value = reqwest::get(&readyz).await.unwrap().json().await.unwrap();
        body["servers"][0].clone()
    };
    let wait_for = |wanted: &'static str| async move {
        tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                let remote = state_of_remote().await;
                if remote["state"] == wanted {
                    return remote;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("remote reaches state {wanted} within 30 s"))
    };

    let remote = wait_for("needs_login").await;
    assert_eq!(remote["server"], "remote", "{remote}");
    let reason = remote["needs_login"].as_str().unwrap_or_default();
    assert!(reason.contains("toolgate login remote"), "{remote}");

    // A login while the gateway runs: its supervisor picks the tokens up.
    let (ok, out) = login(&work).await;
    assert!(ok, "login failed: {out}");
    let remote = wait_for("ready").await;
    assert_eq!(remote["tools"], 1, "{remote}");
    assert!(remote["needs_login"].is_null(), "{remote}");
}

#[tokio::test]
async fn login_opens_the_desktop_browser_which_completes_the_sign_in() {
    let server = AuthServer::start(3600).await;
    let work = workdir(&server);
    // A desktop's opener, as `xdg-open` is: it hands the URL to a browser and returns at
    // once. This browser follows the authorization server's redirect to toolgate's listener.
    let bin = work.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let opener = bin.join("xdg-open");
    std::fs::write(
        &opener,
        "#!/bin/sh\necho \"$1\" > \"$(dirname \"$0\")/opened\"\n(curl -sSfL \"$1\" > /dev/null &)\n",
    )
    .unwrap();
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        toolgate_command(&work, &["login", "remote", "--timeout", "20"])
            .env("DISPLAY", ":0")
            .env("PATH", path)
            .output(),
    )
    .await
    .expect("login finishes within 60 s")
    .expect("run toolgate login");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("Signed in to \"remote\""), "{stdout}");
    let opened = std::fs::read_to_string(bin.join("opened")).expect("the opener ran");
    assert!(
        opened.starts_with(&format!("{}/authorize?", server.base)),
        "{opened}"
    );
    assert_eq!(token_files(&work.path("tokens")).len(), 1);
}
