//! `serve` runs on one thread, over stdio (pipes, or socket pairs as Node gives) and over
//! HTTP: after calls, the process has no thread but its main one. `TOKIO_WORKER_THREADS=N`
//! gives it tokio's pool of N workers; `--audit-log` adds its writer, `--watch` a blocking
//! thread for its polls.
//!
//! Threads are read from `/proc/PID/task` (Linux only). tokio names its workers and its
//! blocking threads alike (`tokio-rt-worker`), so a blocking thread started by a stat, a DNS
//! lookup or a file read on the serving path would show here as one thread too many.
#![cfg(target_os = "linux")]

mod common;

use std::{process::Stdio, time::Duration};

use common::*;
use rmcp::{ServiceExt, transport::TokioChildProcess};
use serde_json::json;

/// Environment the gateway would inherit from the test's that gives it threads of its own:
/// tokio's pool, or OTLP export's.
const THREAD_VARS: [&str; 3] = [
    "TOKIO_WORKER_THREADS",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
];

/// `toolgate serve` with `args` and none of [`THREAD_VARS`].
fn serve(work: &Workdir, args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(toolgate());
    command
        .arg("--config")
        .arg(work.config())
        .arg("serve")
        .args(args);
    for var in THREAD_VARS {
        command.env_remove(var);
    }
    command
}

/// The main thread's name: the binary's file name, cut to 15 bytes by Linux (not always
/// `toolgate`: `TEST_TOOLGATE_BIN` may name another build).
fn main_thread() -> String {
    let path = toolgate();
    let name = path.file_name().expect("a file name").to_string_lossy();
    name.bytes().take(15).map(char::from).collect()
}

/// The name of each thread of process `pid`.
fn thread_names(pid: u32) -> Vec<String> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the gateway's threads");
    let mut names: Vec<String> = tasks
        .map(|task| {
            let comm = task.expect("a thread").path().join("comm");
            // A thread that ended since the listing has no `comm` left.
            std::fs::read_to_string(comm)
                .map(|name| name.trim_end().to_owned())
                .unwrap_or_default()
        })
        .filter(|name| !name.is_empty())
        .collect();
    names.sort();
    names
}

/// A few calls through `client`, so that every part of a call has run at least once.
async fn calls(client: &Client) {
    for n in 0..5 {
        let text = format!("call {n}");
        let result = call(client, "echo__echo", json!({ "text": text }))
            .await
            .expect("tools/call answered");
        assert_eq!(common::text(&result), text);
    }
}

/// `toolgate serve` over stdio with `args`, after [`calls`]: the client (to keep the
/// gateway running) and the gateway's pid.
async fn stdio_after_calls(work: &Workdir, args: &[&str]) -> (Client, u32) {
    let (transport, _stderr) = TokioChildProcess::builder(serve(work, args))
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn toolgate");
    let pid = transport.id().expect("the gateway's pid");
    let client = Recorder::default()
        .serve(transport)
        .await
        .expect("MCP handshake with toolgate over stdio");
    calls(&client).await;
    (client, pid)
}

#[tokio::test]
async fn serve_over_stdio_runs_on_its_main_thread_alone() {
    let work = two_servers();
    let (_client, pid) = stdio_after_calls(&work, &[]).await;
    assert_eq!(thread_names(pid), [main_thread()]);
}

/// Node's clients give stdin and stdout as socket pairs, not pipes: read and written on the
/// main thread too.
#[tokio::test]
async fn serve_over_socket_pairs_runs_on_its_main_thread_alone() {
    let work = two_servers();
    let gateway = SocketGateway::launch(serve(&work, &[]), Sockets::Pairs).await;
    calls(&gateway.client).await;
    assert_eq!(thread_names(gateway.pid()), [main_thread()]);
}

/// README names the threads options bring: `--audit-log` its writer, `--watch` one of
/// tokio's blocking threads for its polls of the config file.
#[tokio::test]
async fn audit_log_and_watch_bring_their_own_threads() {
    let work = two_servers();
    let audit = work.path("audit.jsonl").display().to_string();
    let (_client, pid) = stdio_after_calls(&work, &["--audit-log", &audit]).await;
    threads_become(pid, &[&main_thread(), "toolgate-audit"]).await;

    // The first stat is taken at start, and the thread stays while polls come every 500 ms.
    let (_client, pid) = stdio_after_calls(&work, &["--watch"]).await;
    threads_become(pid, &[&main_thread(), WORKER]).await;
}

#[tokio::test]
async fn serve_over_http_runs_on_its_main_thread_alone() {
    let work = two_servers();
    let gateway = HttpGateway::launch(serve(&work, &["--http", "127.0.0.1:0"])).await;
    let (client, _) = gateway.client().await;
    calls(&client).await;
    let pid = gateway.child.id().expect("the gateway's pid");
    assert_eq!(thread_names(pid), [main_thread()]);
}

#[tokio::test]
async fn tokio_worker_threads_gives_serve_a_pool() {
    let work = two_servers();
    let mut command = serve(&work, &["--http", "127.0.0.1:0"]);
    command.env("TOKIO_WORKER_THREADS", "3");
    let gateway = HttpGateway::launch(command).await;
    let (client, _) = gateway.client().await;
    calls(&client).await;
    let pid = gateway.child.id().expect("the gateway's pid");
    threads_become(pid, &[&main_thread(), WORKER, WORKER, WORKER]).await;
}

/// What tokio names its workers and its blocking threads.
const WORKER: &str = "tokio-rt-worker";

/// Waits (at most 5 s) until process `pid`'s threads are named `expected`, in any order: a
/// thread started by a task the runtime has yet to poll may take a moment on a slow machine.
async fn threads_become(pid: u32, expected: &[&str]) {
    let mut expected: Vec<String> = expected.iter().map(|n| n.to_string()).collect();
    expected.sort();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let names = thread_names(pid);
        if names == expected || tokio::time::Instant::now() >= deadline {
            assert_eq!(names, expected);
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
