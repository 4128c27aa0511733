//! `toolgate serve`, over HTTP or stdio, raises its soft open-file limit to the hard one
//! (client connections, upstream pipes and hooks all hold descriptors), and its children get
//! back the soft limit it was started with.
//!
//! Limits are read from `/proc/PID/limits` (Linux only).
#![cfg(target_os = "linux")]

mod common;

use std::{
    process::Stdio,
    time::{Duration, Instant},
};

use common::*;

/// The soft limit the gateway is started under.
const STARTING_SOFT: u64 = 256;

/// (soft, hard) open-file limits of `pid`.
fn nofile(pid: &str) -> (u64, u64) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap_or_else(|| panic!("no open-file limit in {limits}"));
    let numbers: Vec<u64> = line
        .split_whitespace()
        .filter_map(|word| word.parse().ok())
        .collect();
    (numbers[0], numbers[1])
}

/// Whether the hard limit leaves room to see a raise; says why not when it does not.
fn raisable() -> bool {
    let (_, hard) = nofile("self");
    if hard <= STARTING_SOFT {
        eprintln!(
            "SKIPPED: the hard open-file limit is {hard}, not above {STARTING_SOFT}: nothing to raise"
        );
        return false;
    }
    true
}

/// The pid of `parent`'s child named `comm`, once it runs (within 30 s).
fn child_named(parent: u32, comm: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let pid = entry.file_name().to_string_lossy().into_owned();
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // `PID (COMM) STATE PPID ...`
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
                continue;
            };
            let ppid = stat[close + 1..].split_whitespace().nth(1);
            if &stat[open + 1..close] == comm && ppid == Some(&parent.to_string()) {
                return pid;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{comm} never started under {parent}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `toolgate ARGS...` run under `ulimit -Sn 256`.
fn under_low_soft_limit(args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(format!("ulimit -Sn {STARTING_SOFT} && exec \"$0\" \"$@\""))
        .arg(toolgate())
        .args(args);
    command
}

fn assert_raised_for_it_and_restored_for_its_child(gateway: u32) {
    // The limit is raised before any upstream starts: once one runs, it has been.
    let child = child_named(gateway, "echo_server");
    let (soft, hard) = nofile(&gateway.to_string());
    assert_eq!(soft, hard, "the soft limit is raised to the hard one");
    assert!(soft > STARTING_SOFT, "{soft}");
    assert_eq!(
        nofile(&child),
        (STARTING_SOFT, hard),
        "the upstream gets the starting soft limit back"
    );
}

#[tokio::test]
async fn serving_http_raises_the_soft_open_file_limit() {
    if !raisable() {
        return;
    }
    let work = Workdir::new(&server_toml("echo", "echo_server", &[]));
    let config = work.config().display().to_string();
    let command = under_low_soft_limit(&["--config", &config, "serve", "--http", "127.0.0.1:0"]);
    let gateway = HttpGateway::launch(command).await;
    assert_raised_for_it_and_restored_for_its_child(gateway.child.id().unwrap());
}

#[tokio::test]
async fn serving_stdio_raises_it_too() {
    if !raisable() {
        return;
    }
    let work = Workdir::new(&server_toml("echo", "echo_server", &[]));
    let config = work.config().display().to_string();
    // stdin stays open (and silent) so that the gateway keeps serving while it is looked at.
    let gateway = under_low_soft_limit(&["--config", &config, "serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    assert_raised_for_it_and_restored_for_its_child(gateway.id().unwrap());
}
