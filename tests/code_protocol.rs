//! The pool treats a worker that breaks the protocol or dies as a crash of that run only, and replaces it.
//! The "workers" here are small shell scripts standing in for a broken or hostile `toolgate worker`.

mod common;

use std::{os::unix::fs::PermissionsExt, path::Path, sync::Arc, time::Duration};

use common::code_pool::{TestHost, failure, limits, run_with};
use tokio_util::sync::CancellationToken;
use toolgate::code_mode::pool::{FailureKind, PoolConfig, WorkerPool};

/// A pool whose worker is a shell script that says ready, reads the run frame, then runs `then`.
fn scripted_pool(dir: &Path, then: &str) -> Arc<WorkerPool> {
    let script = dir.join("worker.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho '{{\"type\":\"ready\"}}'\nread run\n{then}\n"),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    WorkerPool::new(
        PoolConfig {
            size: 1,
            worker_exe: script,
            recycle_after_runs: 200,
        },
        CancellationToken::new(),
    )
}

async fn crash_of(then: &str) -> (FailureKind, String) {
    let dir = tempfile::tempdir().unwrap();
    let pool = scripted_pool(dir.path(), then);
    let outcome = run_with(
        &pool,
        &TestHost::new(),
        "return 1",
        limits(Duration::from_secs(5)),
    )
    .await;
    failure(&outcome)
}

#[tokio::test]
async fn a_bad_frame_is_a_crash() {
    let (kind, message) = crash_of("echo 'this is not json'; sleep 5").await;
    assert_eq!(kind, FailureKind::Crash);
    assert!(
        message.starts_with("the worker sent a bad frame"),
        "{message}"
    );
}

#[tokio::test]
async fn an_oversized_frame_is_a_crash() {
    // 8 MiB without a newline: over the bound for a 1 MiB output limit.
    let (kind, message) = crash_of("head -c 8388608 /dev/zero | tr '\\0' 'x'; sleep 5").await;
    assert_eq!(kind, FailureKind::Crash);
    assert!(
        message.starts_with("the worker sent a frame over"),
        "{message}"
    );
}

#[tokio::test]
async fn a_reused_request_id_is_a_crash() {
    let (kind, message) = crash_of(
        r#"echo '{"type":"search","n":1,"query":"a"}'; echo '{"type":"search","n":1,"query":"b"}'; sleep 5"#,
    )
    .await;
    assert_eq!(kind, FailureKind::Crash);
    assert_eq!(message, "the worker reused request id 1");
}

#[tokio::test]
async fn a_worker_that_exits_mid_run_is_a_crash_with_its_status_and_stderr() {
    let (kind, message) = crash_of("echo 'something broke' >&2; exit 3").await;
    assert_eq!(kind, FailureKind::Crash);
    assert_eq!(
        message,
        "the worker exited unexpectedly with status 3; stderr: something broke"
    );
}

#[tokio::test]
async fn sigxcpu_is_reported_as_the_cpu_limit() {
    let (kind, message) = crash_of("kill -XCPU $$").await;
    assert_eq!(kind, FailureKind::Limit);
    assert!(message.starts_with("CPU time limit exceeded"), "{message}");
}

#[tokio::test]
async fn a_worker_that_cannot_start_fails_the_run_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let pool = WorkerPool::new(
        PoolConfig {
            size: 1,
            worker_exe: dir.path().join("missing"),
            recycle_after_runs: 200,
        },
        CancellationToken::new(),
    );
    let outcome = run_with(
        &pool,
        &TestHost::new(),
        "return 1",
        limits(Duration::from_secs(5)),
    )
    .await;
    let (kind, message) = failure(&outcome);
    assert_eq!(kind, FailureKind::Crash);
    assert!(
        message.starts_with("cannot start a code worker"),
        "{message}"
    );
}
