//! toolgate as an OAuth client of an HTTP upstream (examples/oauth_server.rs, a real authorization server and MCP server): login, refresh before expiry and once on a 401, needs-login when refreshing fails, logout.

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
    let result = call(&client, "remote__whoami", json!({}))
        .await
        .expect("call");
    assert_eq!(text(&result), "ok", "{result:?}");

    // The server stops honouring the access token: one 401, one refresh, the call succeeds,
    // and the new token is written back.
    server.admin("expire-access").await;
    let before = server.stats().await;
    let result = call(&client, "remote__whoami", json!({}))
        .await
        .expect("call");
    assert_eq!(text(&result), "ok", "{result:?}");
    let after = server.stats().await;
    assert_eq!(
        count(&after, "refresh_token") - count(&before, "refresh_token"),
        1,
        "{after}"
    );
    assert_eq!(
        count(&after, "refused") - count(&before, "refused"),
        1,
        "{after}"
    );
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
    assert_eq!(
        count(&after, "refused_refresh") - count(&before, "refused_refresh"),
        1,
        "{after}"
    );
    client.cancel().await.expect("close");

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
    let result = call(&client, "remote__whoami", json!({}))
        .await
        .expect("call");
    assert_eq!(text(&result), "ok", "{result:?}");
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
