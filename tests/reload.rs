//! Reload without restart: `serve --watch` (over stdio) and SIGHUP (over HTTP) re-read the config; servers are added, removed, restarted or kept, a bad file is refused, calls in flight finish.

mod common;

use std::{
    path::Path,
    time::{Duration, Instant},
};

use common::*;
use serde_json::{Value, json};

/// Long enough for a debug gateway on a shared 2-core machine to start and import a server.
const LIMIT: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    /// `serve --watch` over stdio: the reload follows the file.
    Stdio,
    /// `serve --http` with a metrics listener (for `/readyz`): the reload follows SIGHUP.
    Http,
}

/// A serving gateway and one client session.
struct Running {
    work: Workdir,
    client: Client,
    recorder: Recorder,
    http: Option<HttpGateway>,
}

async fn start(via: Via, toml: &str) -> Running {
    let work = Workdir::new(toml);
    let (client, recorder, http) = match via {
        Via::Stdio => {
            let (client, recorder) = stdio_client_with(&work, &["--watch"]).await;
            (client, recorder, None)
        }
        Via::Http => {
            let http = HttpGateway::start_with(&work, &["--metrics", "127.0.0.1:0"]).await;
            let (client, recorder) = http.client().await;
            (client, recorder, Some(http))
        }
    };
    Running {
        work,
        client,
        recorder,
        http,
    }
}

impl Running {
    /// Writes `toml` over the config; over HTTP also sends SIGHUP (over stdio, `--watch`
    /// notices the file).
    fn reload(&self, toml: &str) {
        std::fs::write(self.work.config(), toml).expect("write config");
        if let Some(http) = &self.http {
            common::procs::signal(http.child.id().expect("the gateway runs"), "HUP");
        }
    }

    /// Waits until `tools/list` satisfies `check`; returns the names.
    async fn tools_until(&self, what: &str, check: impl Fn(&[String]) -> bool) -> Vec<String> {
        let deadline = Instant::now() + LIMIT;
        loop {
            let names = tool_names(&self.client).await;
            if check(&names) {
                return names;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not within {LIMIT:?}; tools: {names:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn list_changed(&self) -> usize {
        self.recorder
            .list_changed
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The operator listener's `/readyz` body (HTTP only).
    async fn readyz(&self) -> Value {
        let metrics = self
            .http
            .as_ref()
            .and_then(|h| h.metrics_url.as_deref())
            .expect("a metrics listener");
        reqwest::get(metrics.replace("/metrics", "/readyz"))
            .await
            .expect("GET /readyz")
            .json()
            .await
            .expect("a JSON body")
    }
}

/// `echo_server` as `name`, writing its pid to `pid_file` at each start; `mark` goes into its
/// environment (changing it changes the server's config).
fn echo(name: &str, pid_file: &Path, mark: &str) -> String {
    format!(
        "{}env = {{ RELOAD_MARK = {} }}\n",
        echo_writing_pids(name, pid_file),
        toml_string(mark)
    )
}

async fn wait_for_pids(path: &Path, count: usize) -> Vec<u32> {
    let deadline = Instant::now() + LIMIT;
    loop {
        let found = written_pids(path);
        if found.len() >= count {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "{count} pids in {path:?} within {LIMIT:?}; found {found:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_exited(pid: u32) {
    let deadline = Instant::now() + LIMIT;
    while common::procs::pid_running(pid) {
        assert!(
            Instant::now() < deadline,
            "pid {pid} still runs after {LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn has(names: &[String], name: &str) -> bool {
    names.iter().any(|n| n == name)
}

async fn echo_text(client: &Client, tool: &str, text: &str) -> String {
    let result = call(client, tool, json!({ "text": text }))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    assert_ne!(result.is_error, Some(true), "{tool}: {result:?}");
    common::text(&result)
}

// ---- Added: its tools appear, the session hears of it, the others keep running. ----

async fn adding_a_server(via: Via) {
    let dir = tempfile::tempdir().unwrap();
    let (kept_pids, added_pids) = (dir.path().join("kept"), dir.path().join("added"));
    let before = echo("kept", &kept_pids, "1");
    let running = start(via, &before).await;
    let kept = wait_for_pids(&kept_pids, 1).await[0];
    assert!(!has(&tool_names(&running.client).await, "added__echo"));
    let heard = running.list_changed();

    running.reload(&format!("{before}{}", echo("added", &added_pids, "1")));
    let names = running
        .tools_until("the added server's tools", |n| has(n, "added__echo"))
        .await;
    assert!(has(&names, "kept__echo"), "{names:?}");
    wait_tools_changed(&running.recorder, heard + 1, LIMIT).await;
    assert_eq!(
        echo_text(&running.client, "added__echo", "hi").await,
        "hi",
        "the added server answers"
    );
    // The unchanged server was not touched: the same child, never restarted.
    assert_eq!(written_pids(&kept_pids), [kept]);
    assert!(common::procs::pid_running(kept));
    assert_eq!(
        echo_text(&running.client, "kept__echo", "still").await,
        "still"
    );
    running.client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_added_server_starts_and_is_announced_over_stdio() {
    adding_a_server(Via::Stdio).await;
}

#[tokio::test]
async fn an_added_server_starts_and_is_announced_over_http() {
    adding_a_server(Via::Http).await;
}

// ---- Removed: its tools go, its child exits. ----

async fn removing_a_server(via: Via) {
    let dir = tempfile::tempdir().unwrap();
    let (kept_pids, gone_pids) = (dir.path().join("kept"), dir.path().join("gone"));
    let kept_toml = echo("kept", &kept_pids, "1");
    let running = start(
        via,
        &format!("{kept_toml}{}", echo("gone", &gone_pids, "1")),
    )
    .await;
    let kept = wait_for_pids(&kept_pids, 1).await[0];
    let gone = wait_for_pids(&gone_pids, 1).await[0];
    running
        .tools_until("both servers", |n| {
            has(n, "gone__echo") && has(n, "kept__echo")
        })
        .await;
    let heard = running.list_changed();

    running.reload(&kept_toml);
    wait_tools_changed(&running.recorder, heard + 1, LIMIT).await;
    let names = running
        .tools_until("the removed server's tools gone", |n| !has(n, "gone__echo"))
        .await;
    assert!(has(&names, "kept__echo"), "{names:?}");
    wait_exited(gone).await;
    let result = call(&running.client, "gone__echo", json!({"text": "x"})).await;
    let refused = match result {
        Err(error) => error.to_string(),
        Ok(result) => format!("{result:?}"),
    };
    assert!(refused.contains("unknown tool"), "{refused}");
    assert_eq!(written_pids(&kept_pids), [kept]);
    assert!(common::procs::pid_running(kept));
    running.client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_removed_server_is_withdrawn_and_its_child_exits_over_stdio() {
    removing_a_server(Via::Stdio).await;
}

#[tokio::test]
async fn a_removed_server_is_withdrawn_and_its_child_exits_over_http() {
    removing_a_server(Via::Http).await;
}

// ---- Changed: restarted with the new config; the rest kept. ----

async fn changing_a_server(via: Via) {
    let dir = tempfile::tempdir().unwrap();
    let (kept_pids, changed_pids) = (dir.path().join("kept"), dir.path().join("changed"));
    let kept_toml = echo("kept", &kept_pids, "1");
    let running = start(
        via,
        &format!("{kept_toml}{}", echo("changed", &changed_pids, "1")),
    )
    .await;
    let kept = wait_for_pids(&kept_pids, 1).await[0];
    let old = wait_for_pids(&changed_pids, 1).await[0];
    running
        .tools_until("both servers", |n| has(n, "changed__echo"))
        .await;
    let heard = running.list_changed();

    running.reload(&format!(
        "{kept_toml}{}",
        echo("changed", &changed_pids, "2")
    ));
    let new = wait_for_pids(&changed_pids, 2).await[1];
    assert_ne!(new, old);
    wait_exited(old).await;
    // The pid is written by `sh` just before its `exec`: a read of `environ` while the exec
    // replaces the process can come back empty, so look again until it answers.
    let deadline = Instant::now() + LIMIT;
    loop {
        let environ = std::fs::read(format!("/proc/{new}/environ")).unwrap_or_default();
        if environ
            .split(|&b| b == 0)
            .any(|var| var == b"RELOAD_MARK=2")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the restarted child has the new environment: {:?}",
            String::from_utf8_lossy(&environ)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Withdrawn while it restarted, then back: announced.
    wait_tools_changed(&running.recorder, heard + 1, LIMIT).await;
    running
        .tools_until("the restarted server's tools", |n| has(n, "changed__echo"))
        .await;
    assert_eq!(
        echo_text(&running.client, "changed__echo", "new").await,
        "new"
    );
    assert_eq!(written_pids(&kept_pids), [kept]);
    assert!(common::procs::pid_running(kept));
    running.client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_changed_server_is_restarted_over_stdio() {
    changing_a_server(Via::Stdio).await;
}

#[tokio::test]
async fn a_changed_server_is_restarted_over_http() {
    changing_a_server(Via::Http).await;
}

// ---- A bad file: refused with `check`'s error, the running config keeps serving. ----

/// A file that parses but does not validate: a server with neither `command` nor `url`.
const BAD: &str = "[servers.broken]\nargs = [\"x\"]\n";

async fn a_bad_file(via: Via) {
    let dir = tempfile::tempdir().unwrap();
    let (kept_pids, added_pids) = (dir.path().join("kept"), dir.path().join("added"));
    let good = echo("kept", &kept_pids, "1");
    let running = start(via, &good).await;
    let kept = wait_for_pids(&kept_pids, 1).await[0];
    let before = tool_names(&running.client).await;

    // What `toolgate check` says of the same file.
    let checked = Workdir::new(BAD);
    let (status, _, stderr) =
        run_toolgate(&["--config", checked.config().to_str().unwrap(), "check"]);
    assert_eq!(status, Some(64), "{stderr}");
    let expected = stderr
        .trim()
        .strip_prefix("toolgate: ")
        .expect("check's error line")
        .replace(
            &checked.config().display().to_string(),
            &running.work.config().display().to_string(),
        );
    assert!(expected.contains("servers.broken"), "{expected}");

    running.reload(BAD);
    if via == Via::Http {
        let deadline = Instant::now() + LIMIT;
        let body = loop {
            let body = running.readyz().await;
            if !body["last_reload_error"].is_null() {
                break body;
            }
            assert!(Instant::now() < deadline, "no reload error in {body}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(body["last_reload_error"], expected.as_str(), "{body}");
        assert_eq!(body["ready"], true, "{body}");
        let log = running
            .http
            .as_ref()
            .unwrap()
            .wait_log_line(&["reload refused", &expected], LIMIT)
            .await;
        assert!(log.contains("CONFIG_INVALID"), "{log}");
    } else {
        // Over stdio nothing is announced; give the watcher time to have read the file.
        tokio::time::sleep(triggers_settle()).await;
    }
    // Still serving the running config.
    assert_eq!(tool_names(&running.client).await, before);
    assert_eq!(echo_text(&running.client, "kept__echo", "on").await, "on");
    assert_eq!(written_pids(&kept_pids), [kept]);

    // A good file afterwards is applied, and clears the error.
    running.reload(&format!("{good}{}", echo("added", &added_pids, "1")));
    running
        .tools_until("the good file's server", |n| has(n, "added__echo"))
        .await;
    if via == Via::Http {
        let body = running.readyz().await;
        assert!(body["last_reload_error"].is_null(), "{body}");
    }
    assert_eq!(written_pids(&kept_pids), [kept]);
    running.client.cancel().await.unwrap();
}

/// Two polls of `--watch`, and some slack for a loaded machine.
fn triggers_settle() -> Duration {
    toolgate::gateway::triggers::POLL * 4
}

#[tokio::test]
async fn a_bad_file_is_refused_and_the_running_config_serves_over_stdio() {
    a_bad_file(Via::Stdio).await;
}

#[tokio::test]
async fn a_bad_file_is_refused_and_readyz_shows_it_over_http() {
    a_bad_file(Via::Http).await;
}

// ---- A reload during a call: the call finishes on the old config; the next one does not. ----

async fn a_reload_during_a_call(via: Via) {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("echo");
    let config = |timeout_ms: u64, mark: &str| {
        format!(
            "[gateway]\ncall_timeout_ms = {timeout_ms}\n\n{}",
            echo("echo", &pids, mark)
        )
    };
    let running = start(via, &config(60_000, "1")).await;
    let old = wait_for_pids(&pids, 1).await[0];

    // A 3 s call; while it runs, the server is changed (so restarted) and every call's
    // timeout drops to 1 s.
    let slow = async {
        let result = call(&running.client, "echo__sleep", json!({"ms": 3000})).await;
        (result, Instant::now())
    };
    let reload = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        running.reload(&config(1_000, "2"));
        wait_for_pids(&pids, 2).await;
        Instant::now()
    };
    let ((result, answered), restarted) = tokio::join!(slow, reload);
    let result = result.expect("the call in flight is answered");
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert!(
        restarted < answered,
        "the new server started while the call was still running"
    );
    // The old child lived until its call was over, and is gone after.
    wait_exited(old).await;

    running
        .tools_until("the restarted server", |n| has(n, "echo__sleep"))
        .await;
    let late = call(&running.client, "echo__sleep", json!({"ms": 3000}))
        .await
        .expect("a tool result");
    assert_eq!(code(&late).as_deref(), Some("TOOL_TIMEOUT"), "{late:?}");
    running.client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_call_in_flight_finishes_on_the_old_config_over_stdio() {
    a_reload_during_a_call(Via::Stdio).await;
}

#[tokio::test]
async fn a_call_in_flight_finishes_on_the_old_config_over_http() {
    a_reload_during_a_call(Via::Http).await;
}

// ---- Profiles, hooks and modes take effect for the next call. ----

async fn profiles_hooks_and_modes(via: Via) {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("echo");
    let servers = echo("echo", &pids, "1");
    let running = start(via, &servers).await;
    let pid = wait_for_pids(&pids, 1).await[0];
    let names = tool_names(&running.client).await;
    assert!(
        has(&names, "echo__fail") && has(&names, "echo__add"),
        "{names:?}"
    );
    let heard = running.list_changed();

    // A profile restriction and a pre hook that denies `echo__add`.
    let marker = common::procs::unique_marker("reload-hook");
    let hook = format!(
        "[[hooks]]\nstage = \"pre\"\ncommand = [{}]\nenv = {{ POLICY_DENY = \"echo__add\", RELOAD_HOOK = {} }}\n",
        toml_string(&example("policy_hook").display().to_string()),
        toml_string(&marker)
    );
    let narrow = "[profiles.narrow]\nallow = [\"echo__echo\"]\n";
    running.reload(&format!(
        "[profiles.default]\ndeny = [\"echo__fail\"]\n\n{narrow}\n{hook}\n{servers}"
    ));
    wait_tools_changed(&running.recorder, heard + 1, LIMIT).await;
    let names = running
        .tools_until("the profile's deny", |n| !has(n, "echo__fail"))
        .await;
    assert!(has(&names, "echo__add"), "{names:?}");
    let denied = call(&running.client, "echo__add", json!({"a": 1, "b": 2}))
        .await
        .expect("a tool result");
    assert_eq!(code(&denied).as_deref(), Some("DENIED"), "{denied:?}");
    let hook_process = common::procs::marked(&marker);
    assert_eq!(hook_process.len(), 1, "{hook_process:?}");
    assert_eq!(echo_text(&running.client, "echo__echo", "ok").await, "ok");
    if let Some(http) = &running.http {
        // A profile the reload added is reachable at its own path.
        let (narrow, _) = http_client(&format!("{}/narrow", http.url)).await;
        assert_eq!(tool_names(&narrow).await, ["echo__echo"]);
        narrow.cancel().await.unwrap();
    }

    // Code mode: only `run_code` is listed, and programs run.
    let heard = running.list_changed();
    running.reload(&format!("[gateway]\nmode = \"code\"\n\n{servers}"));
    wait_tools_changed(&running.recorder, heard + 1, LIMIT).await;
    let names = running
        .tools_until("code mode", |n| n == ["run_code"])
        .await;
    assert_eq!(names, ["run_code"]);
    let ran = tokio::time::timeout(
        LIMIT,
        call(
            &running.client,
            "run_code",
            json!({"code": "return (await tools.echo__add({a: 2, b: 3})).sum;"}),
        ),
    )
    .await
    .expect("run_code answers in time")
    .expect("a tool result");
    assert_ne!(ran.is_error, Some(true), "{ran:?}");
    assert!(common::text(&ran).contains('5'), "{ran:?}");
    // The hook this reload dropped was stopped.
    let left = common::procs::still_running_after(&hook_process, LIMIT).await;
    assert!(left.is_empty(), "{left:?}");
    // None of this restarted the server.
    assert_eq!(written_pids(&pids), [pid]);
    running.client.cancel().await.unwrap();
}

#[tokio::test]
async fn profiles_hooks_and_modes_apply_to_the_next_call_over_stdio() {
    profiles_hooks_and_modes(Via::Stdio).await;
}

#[tokio::test]
async fn profiles_hooks_and_modes_apply_to_the_next_call_over_http() {
    profiles_hooks_and_modes(Via::Http).await;
}

// ---- `TOOLGATE_*` overrides apply to a reloaded file as to the first. ----

#[tokio::test]
async fn environment_overrides_still_apply_after_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    let (echo_pids, added_pids) = (dir.path().join("echo"), dir.path().join("added"));
    let file = |extra: &str| {
        format!(
            "[gateway]\ncall_timeout_ms = 60000\n\n{}{extra}",
            echo("echo", &echo_pids, "1")
        )
    };
    let work = Workdir::new(&file(""));
    let mut command = tokio::process::Command::new(toolgate());
    command
        .arg("--config")
        .arg(work.config())
        .args(["serve", "--http", "127.0.0.1:0"])
        .env("TOOLGATE_GATEWAY__CALL_TIMEOUT_MS", "1000");
    let http = HttpGateway::launch(command).await;
    let (client, recorder) = http.client().await;
    let running = Running {
        work,
        client,
        recorder,
        http: Some(http),
    };

    running.reload(&file(&echo("added", &added_pids, "1")));
    running
        .tools_until("the reloaded file's server", |n| has(n, "added__sleep"))
        .await;
    // The file says 60 s; the environment, read again with it, says 1 s.
    let late = call(&running.client, "added__sleep", json!({"ms": 3000}))
        .await
        .expect("a tool result");
    assert_eq!(code(&late).as_deref(), Some("TOOL_TIMEOUT"), "{late:?}");
    running.client.cancel().await.unwrap();
}
