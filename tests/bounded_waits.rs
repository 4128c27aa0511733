//! A call's timeout fires even when the upstream is stopped and its stdin pipe is full, and an
//! answer over `max_message_bytes` (from a stdio or an HTTP upstream) fails its call at once.

mod common;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use common::*;
use serde_json::json;

#[tokio::test]
async fn timeouts_fire_when_a_stopped_upstreams_pipe_is_full() {
    let work = Workdir::new("");
    let pid_file = work.path("echo.pid");
    std::fs::write(
        work.config(),
        format!(
            "[gateway]\ncall_timeout_ms = 1500\n[gateway.supervise]\nping_interval_ms = 0\n{}",
            echo_writing_pids("echo", &pid_file)
        ),
    )
    .unwrap();
    let (client, _) = stdio_client(&work).await;
    let client = Arc::new(client);
    let hello = call(&client, "echo__echo", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(text(&hello), "hi");
    let pid = written_pids(&pid_file)[0].to_string();
    let stop = |signal: &str| {
        let status = std::process::Command::new("kill")
            .args([signal, &pid])
            .status()
            .unwrap();
        assert!(status.success(), "kill {signal} {pid}");
    };
    stop("-STOP");

    // 20 × 64 KiB is far more than a pipe holds (64 KiB on Linux): writes to it block.
    let big = "x".repeat(64 * 1024);
    let mut calls = Vec::new();
    for _ in 0..20 {
        let client = client.clone();
        let big = big.clone();
        calls.push(tokio::spawn(async move {
            let started = Instant::now();
            let result = call(&client, "echo__echo", json!({"text": big})).await;
            (result, started.elapsed())
        }));
    }
    // One more once the pipe is surely full.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let late_started = Instant::now();
    let late = tokio::time::timeout(
        Duration::from_secs(20),
        call(&client, "echo__echo", json!({"text": "late"})),
    )
    .await
    .expect("a call to a stopped upstream is answered, not left hanging")
    .unwrap();
    let late_took = late_started.elapsed();
    assert_eq!(code(&late).as_deref(), Some("TOOL_TIMEOUT"), "{late:?}");
    // 1.5 s timeout plus a short grace for the cancel; generous for a loaded machine.
    assert!(
        late_took < Duration::from_secs(6),
        "answered after {late_took:?}"
    );

    for each in calls {
        let (result, took) = tokio::time::timeout(Duration::from_secs(20), each)
            .await
            .expect("every call is answered")
            .unwrap();
        let result = result.unwrap();
        assert_eq!(code(&result).as_deref(), Some("TOOL_TIMEOUT"), "{result:?}");
        assert!(took < Duration::from_secs(6), "answered after {took:?}");
    }
    stop("-CONT");
    let client = Arc::into_inner(client).expect("no other owner");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_answer_over_max_message_bytes_fails_its_call_at_once_and_the_server_lives_on() {
    let work = Workdir::new(&format!(
        "[gateway]\ncall_timeout_ms = 30000\nmax_message_bytes = 100000\n{}",
        server_toml("echo", "echo_server", &[("ECHO_BIG_TOOL", "1")])
    ));
    let (client, _) = stdio_client(&work).await;
    let started = Instant::now();
    // A small request, a 200 KB answer.
    let result = call(&client, "echo__big", json!({"bytes": 200_000}))
        .await
        .expect("an isError result, not a JSON-RPC error");
    // Answered when the line was read, not at the 30 s timeout.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert_eq!(
        code(&result).as_deref(),
        Some("MESSAGE_TOO_LARGE"),
        "{result:?}"
    );
    let message = text(&result);
    assert!(
        message.contains("server \"echo\"")
            && message.contains("over max_message_bytes (100000)")
            && message.contains("answer of 2000"),
        "{message}"
    );
    // The connection is intact: the next call is answered normally.
    let small = call(&client, "echo__echo", json!({"text": "small"}))
        .await
        .unwrap();
    assert_eq!(text(&small), "small");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_answer_from_an_http_upstream_over_max_message_bytes_fails_its_call_at_once() {
    // The upstream: a toolgate serving HTTP (its answers are SSE events), in front of echo.
    let inner = Workdir::new(&server_toml(
        "echo",
        "echo_server",
        &[("ECHO_BIG_TOOL", "1")],
    ));
    let http = HttpGateway::start(&inner).await;
    let outer = Workdir::new(&format!(
        "[gateway]\ncall_timeout_ms = 30000\nmax_message_bytes = 100000\n[servers.remote]\nurl = {}\n",
        toml_string(&http.url)
    ));
    let (client, _) = stdio_client(&outer).await;
    // Under the limit: answered whole.
    let fits = call(&client, "remote__echo__big", json!({"bytes": 90_000}))
        .await
        .unwrap();
    assert_eq!(text(&fits).len(), 90_000, "{:?}", fits.is_error);
    let started = Instant::now();
    let result = call(&client, "remote__echo__big", json!({"bytes": 200_000}))
        .await
        .expect("an isError result, not a JSON-RPC error");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "answered after {:?}, not at once",
        started.elapsed()
    );
    assert_eq!(
        code(&result).as_deref(),
        Some("MESSAGE_TOO_LARGE"),
        "{result:?}"
    );
    let message = text(&result);
    assert!(
        message.contains("server \"remote\"")
            && message.contains("over max_message_bytes (100000)"),
        "{message}"
    );
    // The session with the upstream goes on.
    for i in 0..3 {
        let small = call(
            &client,
            "remote__echo__echo",
            json!({"text": format!("small {i}")}),
        )
        .await
        .unwrap();
        assert_eq!(text(&small), format!("small {i}"));
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn calls_that_time_out_before_they_are_written_are_never_run() {
    let work = Workdir::new("");
    let pid_file = work.path("echo.pid");
    let call_log = work.path("calls.log");
    // The queue to the server's stdin holds at most 200,000 bytes: three of these calls.
    std::fs::write(
        work.config(),
        format!(
            "[gateway]\ncall_timeout_ms = 1500\nmax_message_bytes = 200000\n[gateway.supervise]\nping_interval_ms = 0\n{}env = {{ ECHO_CALL_LOG = {} }}\n",
            echo_writing_pids("echo", &pid_file),
            toml_string(&call_log.display().to_string())
        ),
    )
    .unwrap();
    let (client, _) = stdio_client(&work).await;
    let client = Arc::new(client);
    let hello = call(&client, "echo__echo", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(text(&hello), "hi");
    let pid = written_pids(&pid_file)[0].to_string();
    let signal = |signal: &str| {
        let status = std::process::Command::new("kill")
            .args([signal, &pid])
            .status()
            .unwrap();
        assert!(status.success(), "kill {signal} {pid}");
    };
    signal("-STOP");

    // The first fills the pipe (64 KiB) and is written in part; two more fit in the queue;
    // the rest wait for room. All of them time out.
    let big = "x".repeat(64 * 1024);
    let mut calls = Vec::new();
    for i in 0..10 {
        let client = client.clone();
        let text = format!("{i}{big}");
        calls.push(tokio::spawn(async move {
            let started = Instant::now();
            let result = call(&client, "echo__echo", json!({"text": text})).await;
            (result, started.elapsed())
        }));
    }
    for each in calls {
        let (result, took) = tokio::time::timeout(Duration::from_secs(20), each)
            .await
            .expect("every call is answered")
            .unwrap();
        let result = result.unwrap();
        assert_eq!(code(&result).as_deref(), Some("TOOL_TIMEOUT"), "{result:?}");
        assert!(took < Duration::from_secs(6), "answered after {took:?}");
    }
    signal("-CONT");

    // Once the server reads again, it gets the rest of the request it was reading and the
    // next call, but none of the requests that were still queued when their calls ended.
    let after = call(&client, "echo__echo", json!({"text": "after"}))
        .await
        .unwrap();
    assert_eq!(text(&after), "after");
    wait_for_file(&call_log, "\"after\"", Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = std::fs::read_to_string(&call_log).unwrap();
    let run_big = log.lines().filter(|line| line.len() > 60_000).count();
    assert_eq!(run_big, 1, "big calls the server ran: {run_big}");
    let client = Arc::into_inner(client).expect("no other owner");
    client.cancel().await.unwrap();
}
