//! A call's timeout fires even when the upstream is stopped and its stdin pipe is full.

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
        server_toml("echo", "echo_server", &[])
    ));
    let (client, _) = stdio_client(&work).await;
    let started = Instant::now();
    let big = "x".repeat(200_000);
    let result = call(&client, "echo__echo", json!({"text": big}))
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
        message.contains("server \"echo\"") && message.contains("over max_message_bytes (100000)"),
        "{message}"
    );
    // The connection is intact: the next call is answered normally.
    let small = call(&client, "echo__echo", json!({"text": "small"}))
        .await
        .unwrap();
    assert_eq!(text(&small), "small");
    client.cancel().await.unwrap();
}
