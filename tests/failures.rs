//! Upstream failures: a server that exits at start, a command that does not exist, a server that
//! dies mid-session. The others keep serving; `check` names what failed and why.

mod common;

use std::{future::Future, time::Duration};

use common::*;
use serde_json::json;

/// Fails the test instead of hanging if `future` takes longer than `secs`.
async fn within<T>(secs: u64, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), future)
        .await
        .unwrap_or_else(|_| panic!("did not finish within {secs}s"))
}

/// The line `toolgate check` printed for `server` (`NAME\tSTATE`).
fn check_line<'a>(stdout: &'a str, server: &str) -> &'a str {
    let prefix = format!("{server}\t");
    stdout
        .lines()
        .find(|line| line.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no line for {server:?} in check output:\n{stdout}"))
}

/// `other` serves; `echo` prints `boom-marker` to stderr and exits with status 3 at start.
fn echo_exits_at_start() -> Workdir {
    Workdir::new(&format!(
        "{}{}",
        server_toml(
            "echo",
            "echo_server",
            &[
                ("ECHO_EXIT_AT_START", "3"),
                ("ECHO_STDERR_MSG", "boom-marker")
            ]
        ),
        server_toml("other", "other_server", &[])
    ))
}

/// `other` serves; `broken` names a program that does not exist.
fn missing_command() -> Workdir {
    Workdir::new(&format!(
        "[servers.broken]\ncommand = \"/nonexistent/x\"\n{}",
        server_toml("other", "other_server", &[])
    ))
}

/// The client sees exactly `other`'s tools, and they work.
async fn only_other_serves(work: &Workdir) {
    let (client, _) = stdio_client(work).await;
    assert_eq!(tool_names(&client).await, ["other__echo", "other__reverse"]);
    let echoed = call(&client, "other__echo", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "other: hi");
    assert_ne!(echoed.is_error, Some(true));
    let reversed = call(&client, "other__reverse", json!({"text": "abc"}))
        .await
        .unwrap();
    assert_eq!(text(&reversed), "cba");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn server_exiting_at_start_leaves_the_others_serving() {
    let work = echo_exits_at_start();
    within(30, only_other_serves(&work)).await;
}

#[test]
fn check_reports_a_server_that_exited_at_start_with_stderr_and_status() {
    let work = echo_exits_at_start();
    let config = work.config();
    let (code, stdout, stderr) = run_toolgate(&["--config", config.to_str().unwrap(), "check"]);
    assert_ne!(code, Some(0), "check must fail\n{stdout}\n{stderr}");
    assert_ne!(code, Some(64), "the configuration itself is fine\n{stderr}");
    assert!(code.is_some(), "check was killed by a signal\n{stderr}");
    let echo = check_line(&stdout, "echo");
    assert!(echo.starts_with("echo\tfailed: "), "{echo}");
    assert!(echo.contains("boom-marker"), "no stderr tail in {echo:?}");
    assert!(
        echo.contains("exit status: 3"),
        "no exit status in {echo:?}"
    );
    let other = check_line(&stdout, "other");
    assert_eq!(other, "other\tready (2 tools)");
}

#[tokio::test]
async fn missing_command_leaves_the_others_serving() {
    let work = missing_command();
    within(30, only_other_serves(&work)).await;
}

#[test]
fn check_names_the_server_whose_command_does_not_exist() {
    let work = missing_command();
    let config = work.config();
    let (code, stdout, stderr) = run_toolgate(&["--config", config.to_str().unwrap(), "check"]);
    assert_ne!(code, Some(0), "check must fail\n{stdout}\n{stderr}");
    assert_ne!(code, Some(64), "the configuration itself is fine\n{stderr}");
    let broken = check_line(&stdout, "broken");
    assert!(broken.starts_with("broken\tfailed: "), "{broken}");
    assert!(broken.contains("/nonexistent/x"), "{broken}");
    assert!(
        broken.contains("No such file or directory"),
        "the OS error is missing from {broken:?}"
    );
    assert_eq!(check_line(&stdout, "other"), "other\tready (2 tools)");
}

#[tokio::test]
async fn call_to_a_server_that_died_is_an_unavailable_error_naming_it() {
    within(30, async {
        // `echo` writes its pid (sh `exec`s into the server, so the pid is the server's) and
        // is killed by the test once the session is up.
        let work = Workdir::new("");
        let pid_file = work.path("echo.pid");
        // Without restarts, so the server stays down (tests/supervision.rs covers restarts).
        let toml = format!(
            "[gateway.supervise]\nrestart = false\n{}{}",
            echo_writing_pids("echo", &pid_file),
            server_toml("other", "other_server", &[])
        );
        std::fs::write(work.config(), toml).unwrap();

        let (client, _) = stdio_client(&work).await;
        let alive = call(&client, "echo__echo", json!({"text": "before"}))
            .await
            .unwrap();
        assert_eq!(text(&alive), "before");

        let pid = written_pids(&pid_file)[0];
        let killed = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        while common::procs::pid_running(pid) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        // Right after the death a call may race the supervisor noticing it; either way it is
        // the same failure. Keep calling until the gateway has recorded why the server is gone.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let message = loop {
            let result = call(&client, "echo__echo", json!({"text": "after"}))
                .await
                .expect("a dead upstream is a tool result with isError, not a JSON-RPC error");
            assert_eq!(result.is_error, Some(true), "{result:?}");
            let message = text(&result);
            assert!(
                message.starts_with("server \"echo\" is unavailable"),
                "{message:?}"
            );
            let code = result
                .meta
                .as_ref()
                .and_then(|meta| meta.get("toolgate/error"))
                .and_then(|error| error.get("code"))
                .cloned();
            assert_eq!(code, Some(json!("UPSTREAM_UNAVAILABLE")), "{result:?}");
            if message.contains("server exited") {
                break message;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the gateway never noticed that echo exited; last: {message:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(
            message.contains("SIGKILL") || message.contains("signal: 9"),
            "{message:?}"
        );

        // Its tools are withdrawn (calls still name the server), and the other server works.
        let names = tool_names(&client).await;
        assert!(!names.contains(&"echo__echo".to_owned()), "{names:?}");
        assert!(names.contains(&"other__echo".to_owned()), "{names:?}");
        let other = call(&client, "other__echo", json!({"text": "still"}))
            .await
            .unwrap();
        assert_eq!(text(&other), "other: still");
        client.cancel().await.unwrap();
    })
    .await;
}
