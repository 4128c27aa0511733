//! Supervision: a server that dies or hangs is withdrawn, announced, restarted and announced again; slow starters delay no `initialize`; `/healthz` and `/readyz` show it.

mod common;

use std::{
    path::Path,
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use common::*;
use serde_json::{Value, json};

async fn within<T>(secs: u64, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), future)
        .await
        .expect("the test finishes in time")
}

/// Waits until `path` holds at least `count` pids, and returns them.
async fn wait_for_pids(path: &Path, count: usize) -> Vec<u32> {
    loop {
        let found = written_pids(path);
        if found.len() >= count {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal} {pid}");
}

/// Polls `tools/list` until `wanted` says yes about the names.
async fn wait_for_tools(client: &Client, wanted: impl Fn(&[String]) -> bool) -> Vec<String> {
    loop {
        let names = tool_names(client).await;
        if wanted(&names) {
            return names;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

const FAST_RESTARTS: &str =
    "[gateway.supervise]\nbackoff_initial_ms = 100\nbackoff_max_ms = 400\nping_interval_ms = 0\n";

#[tokio::test]
async fn a_killed_server_is_withdrawn_announced_restarted_and_announced_again() {
    within(60, async {
        let work = Workdir::new("");
        let pid_file = work.path("echo.pids");
        std::fs::write(
            work.config(),
            format!(
                "{FAST_RESTARTS}{}{}",
                echo_writing_pids("echo", &pid_file),
                server_toml("other", "other_server", &[])
            ),
        )
        .unwrap();
        let (client, recorder) = stdio_client(&work).await;
        assert!(tool_names(&client).await.contains(&"echo__echo".to_owned()));
        let first = wait_for_pids(&pid_file, 1).await[0];
        let announced = recorder.list_changed.load(Ordering::SeqCst);

        signal(first, "-KILL");
        // Withdrawn, with a list_changed; the other server's tools stay.
        let names = wait_for_tools(&client, |n| !n.contains(&"echo__echo".to_owned())).await;
        assert!(names.contains(&"other__echo".to_owned()), "{names:?}");
        // Back under a new process, announced again, and callable.
        let restarted = wait_for_pids(&pid_file, 2).await[1];
        assert_ne!(restarted, first);
        wait_for_tools(&client, |n| n.contains(&"echo__echo".to_owned())).await;
        let answer = loop {
            match call(&client, "echo__echo", json!({"text": "again"})).await {
                Ok(result) if result.is_error != Some(true) => break result,
                _ => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        assert_eq!(text(&answer), "again");
        while recorder.list_changed.load(Ordering::SeqCst) < announced + 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        client.cancel().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn a_hung_server_misses_its_pings_and_is_replaced() {
    within(60, async {
        let work = Workdir::new("");
        let pid_file = work.path("echo.pids");
        std::fs::write(
            work.config(),
            format!(
                "[gateway.supervise]\nbackoff_initial_ms = 100\nping_interval_ms = 200\nping_timeout_ms = 200\nping_failures = 2\n{}",
                echo_writing_pids("echo", &pid_file)
            ),
        )
        .unwrap();
        let gateway = HttpGateway::start_with(&work, &["--metrics", "127.0.0.1:0"]).await;
        let (client, _) = gateway.client().await;
        assert!(tool_names(&client).await.contains(&"echo__echo".to_owned()));
        let first = wait_for_pids(&pid_file, 1).await[0];

        // Alive but not answering: only pings can tell.
        signal(first, "-STOP");
        let replacement = wait_for_pids(&pid_file, 2).await[1];
        assert_ne!(replacement, first);
        // The hung process was killed, not left stopped.
        while common::procs::pid_running(first) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let readyz = gateway
            .metrics_url
            .as_deref()
            .expect("a metrics listener")
            .replace("/metrics", "/readyz");
        let echo = loop {
            let body: Value = reqwest::get(&readyz).await.unwrap().json().await.unwrap();
            let echo = body["servers"][0].clone();
            if echo["state"] == "ready" {
                break echo;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(echo["server"], "echo");
        assert!(echo["restarts"].as_u64().unwrap() >= 1, "{echo}");
        let last_error = echo["last_error"].as_str().unwrap_or_default();
        assert!(last_error.contains("missed pings"), "{echo}");
        let result = call(&client, "echo__echo", json!({"text": "fresh"}))
            .await
            .unwrap();
        assert_eq!(text(&result), "fresh");
        client.cancel().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn a_slow_server_delays_no_initialize_and_is_announced_when_it_arrives() {
    within(60, async {
        let work = Workdir::new(&format!(
            "[gateway.supervise]\nstart_grace_ms = 300\n{}{}",
            server_toml("echo", "echo_server", &[("ECHO_START_DELAY_MS", "4000")]),
            server_toml("other", "other_server", &[])
        ));
        let started = Instant::now();
        let (client, recorder) = stdio_client(&work).await;
        let handshake = started.elapsed();
        assert!(
            handshake < Duration::from_millis(3000),
            "initialize waited {handshake:?} for a server that takes 4 s"
        );
        // After the grace, the list has what is there.
        let names = tool_names(&client).await;
        assert!(names.contains(&"other__echo".to_owned()), "{names:?}");
        assert!(!names.contains(&"echo__echo".to_owned()), "{names:?}");
        // The late server is announced.
        while recorder.list_changed.load(Ordering::SeqCst) == 0 {
            recorder.list_changed_seen.notified().await;
        }
        let names = wait_for_tools(&client, |n| n.contains(&"echo__echo".to_owned())).await;
        assert!(names.contains(&"other__echo".to_owned()), "{names:?}");
        client.cancel().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn the_first_list_waits_the_grace_for_a_server_still_starting() {
    within(60, async {
        let work = Workdir::new(&format!(
            "[gateway.supervise]\nstart_grace_ms = 20000\n{}",
            server_toml("echo", "echo_server", &[("ECHO_START_DELAY_MS", "800")]),
        ));
        let (client, _) = stdio_client(&work).await;
        let names = tool_names(&client).await;
        assert!(names.contains(&"echo__echo".to_owned()), "{names:?}");
        client.cancel().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn healthz_and_readyz_show_the_gateway_and_each_server() {
    within(60, async {
        let work = Workdir::new(&format!(
            "[gateway.supervise]\nbackoff_initial_ms = 100\nbackoff_max_ms = 200\n{}{}",
            server_toml("broken", "echo_server", &[("ECHO_EXIT_AT_START", "3")]),
            server_toml("echo", "echo_server", &[])
        ));
        let gateway = HttpGateway::start_with(&work, &["--metrics", "127.0.0.1:0"]).await;
        let operator = gateway.metrics_url.as_deref().expect("a metrics listener");
        let live = reqwest::get(operator.replace("/metrics", "/healthz"))
            .await
            .unwrap();
        assert_eq!(live.status(), 200);

        let readyz = operator.replace("/metrics", "/readyz");
        let body = loop {
            let response = reqwest::get(&readyz).await.unwrap();
            let ready = response.status() == 200;
            let body: Value = response.json().await.unwrap();
            assert_eq!(body["ready"], ready, "{body}");
            if ready && body["servers"][0]["restarts"].as_u64() >= Some(2) {
                break body;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let broken = &body["servers"][0];
        assert_eq!(broken["server"], "broken", "{body}");
        assert!(
            broken["state"] == "down" || broken["state"] == "starting",
            "{body}"
        );
        assert!(
            broken["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("exit status: 3")),
            "{body}"
        );
        let echo = &body["servers"][1];
        assert_eq!(echo["state"], "ready", "{body}");
        assert_eq!(echo["tools"], 6, "{body}");
        assert_eq!(echo["restarts"], 0, "{body}");
        assert_eq!(echo["last_error"], Value::Null, "{body}");

        // The MCP listener answers both probes, without naming any server.
        let base = gateway.url.trim_end_matches("/mcp").to_owned();
        for probe in ["/healthz", "/readyz"] {
            let response = reqwest::get(format!("{base}{probe}")).await.unwrap();
            assert_eq!(response.status(), 200, "{probe}");
            let text = response.text().await.unwrap();
            assert!(!text.contains("broken"), "{probe}: {text}");
        }
    })
    .await;
}

#[tokio::test]
async fn an_http_upstream_that_comes_back_is_reconnected() {
    within(90, async {
        let inner = Workdir::new(&server_toml("echo", "echo_server", &[]));
        let first = HttpGateway::start(&inner).await;
        let address = first.authority();

        let outer = Workdir::new(&format!(
            "[gateway.supervise]\nbackoff_initial_ms = 100\nbackoff_max_ms = 300\nping_interval_ms = 200\nping_timeout_ms = 300\nping_failures = 1\n[servers.remote]\nurl = {}\n",
            toml_string(&first.url)
        ));
        let (client, _) = stdio_client(&outer).await;
        let hello = call(&client, "remote__echo__echo", json!({"text": "one"}))
            .await
            .unwrap();
        assert_eq!(text(&hello), "one");

        // The upstream goes away (its sessions with it) and comes back on the same address.
        drop(first);
        wait_for_tools(&client, |n| !n.contains(&"remote__echo__echo".to_owned())).await;
        let mut command = tokio::process::Command::new(toolgate());
        command
            .arg("--config")
            .arg(inner.config())
            .args(["serve", "--http", &address]);
        let _back = HttpGateway::launch(command).await;
        wait_for_tools(&client, |n| n.contains(&"remote__echo__echo".to_owned())).await;
        let again = call(&client, "remote__echo__echo", json!({"text": "two"}))
            .await
            .unwrap();
        assert_eq!(text(&again), "two");
        client.cancel().await.unwrap();
    })
    .await;
}
