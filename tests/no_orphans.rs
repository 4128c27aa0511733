//! When `toolgate serve` stops (its client closes stdin, or it gets SIGTERM) no upstream
//! process outlives it: not its children, nor their children in the same process group.
//!
//! The process tree is read from `/proc` (Linux only). Every pid is recorded with its start
//! time, so a recycled pid is never mistaken for the original process; a zombie counts as
//! gone, since it has exited and only waits for its new parent to reap it.
#![cfg(target_os = "linux")]

mod common;

use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, ChildStdin, Command, ExitStatus, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use common::*;
use serde_json::{Value, json};

/// How long anything in these tests may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// One process as `/proc/PID/stat` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Proc {
    pid: u32,
    ppid: u32,
    /// Clock ticks after boot: with `pid`, identifies the process even if the pid is reused.
    start: u64,
    state: String,
    comm: String,
}

impl Proc {
    fn read(pid: u32) -> Option<Self> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // `PID (COMM) STATE PPID ...`: COMM may hold spaces and parentheses.
        let open = stat.find('(')?;
        let close = stat.rfind(')')?;
        let comm = stat[open + 1..close].to_owned();
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        Some(Self {
            pid,
            state: rest.first()?.to_string(),
            ppid: rest.get(1)?.parse().ok()?,
            // Field 22 of the file; `rest` starts at field 3.
            start: rest.get(19)?.parse().ok()?,
            comm,
        })
    }

    /// Still running: the same process (same start time) exists and has not exited.
    fn running(&self) -> bool {
        Proc::read(self.pid)
            .is_some_and(|now| now.start == self.start && now.state != "Z" && now.state != "X")
    }
}

fn all_processes() -> Vec<Proc> {
    std::fs::read_dir("/proc")
        .expect("/proc is readable")
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(Proc::read)
        .collect()
}

/// Every live descendant of `root`, parents before children.
fn descendants(root: u32) -> Vec<Proc> {
    let processes = all_processes();
    let mut found: Vec<Proc> = Vec::new();
    let mut parents = vec![root];
    while let Some(parent) = parents.pop() {
        for p in processes.iter().filter(|p| p.ppid == parent) {
            if p.state != "Z" {
                parents.push(p.pid);
                found.push(p.clone());
            }
        }
    }
    found
}

/// SIGKILLs whatever it recorded that is still running when dropped, so that a failing test
/// does not leave processes behind.
#[derive(Default)]
struct Reaper(Vec<Proc>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for p in self.0.iter().filter(|p| p.running()) {
            let _ = Command::new("kill")
                .args(["-KILL", &p.pid.to_string()])
                .status();
        }
    }
}

/// A `toolgate serve` process on stdio, spoken to with raw JSON-RPC lines.
struct Gateway {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
}

impl Gateway {
    fn spawn(work: &Workdir) -> Self {
        let mut child = Command::new(toolgate())
            .arg("--config")
            .arg(work.config())
            .arg("serve")
            .env("RUST_LOG", "toolgate=info")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn toolgate serve");
        let stdout = lines(child.stdout.take().expect("stdout piped"), None);
        let stderr = lines(
            child.stderr.take().expect("stderr piped"),
            Some("[toolgate]"),
        );
        Self {
            stdin: child.stdin.take(),
            child,
            stdout,
            stderr,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        writeln!(stdin, "{message}").expect("write to toolgate");
        stdin.flush().expect("flush to toolgate");
    }

    fn receive(&self) -> Value {
        let line = self
            .stdout
            .recv_timeout(TIMEOUT)
            .expect("toolgate answers in time");
        serde_json::from_str(&line).expect("toolgate writes JSON-RPC lines")
    }

    /// `initialize`, `notifications/initialized`, then `tools/list`: the exposed names.
    fn handshake(&mut self) -> Vec<String> {
        self.send(json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "no-orphans", "version": "0"}
            }
        }));
        let initialized = self.receive();
        assert_eq!(initialized["id"], json!(1), "{initialized}");
        assert!(initialized.get("result").is_some(), "{initialized}");
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        self.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
        let listed = self.receive();
        assert_eq!(listed["id"], json!(2), "{listed}");
        listed["result"]["tools"]
            .as_array()
            .expect("a tool list")
            .iter()
            .map(|tool| tool["name"].as_str().expect("a name").to_owned())
            .collect()
    }

    /// Waits until stderr has had `count` lines containing `needle`.
    fn wait_for_log(&self, needle: &str, count: usize) {
        let deadline = Instant::now() + TIMEOUT;
        let mut seen = 0;
        while seen < count {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .stderr
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("toolgate never logged {needle:?} {count} times"));
            seen += usize::from(line.contains(needle));
        }
    }

    fn close_stdin(&mut self) {
        drop(self.stdin.take());
    }

    fn terminate(&self) {
        let sent = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success());
    }

    fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for toolgate") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "toolgate did not exit within {TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Forwards each line of `from` to the returned channel (and to the test's stderr if
/// `echo` names a tag), so the child never blocks on a full pipe.
fn lines(
    from: impl std::io::Read + Send + 'static,
    echo: Option<&'static str>,
) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            if let Some(tag) = echo {
                eprintln!("{tag} {line}");
            }
            // The receiver may be gone once the test has what it wanted; keep draining.
            let _ = tx.send(line);
        }
    });
    rx
}

/// Like [`two_servers`], but `echo` starts through `sh`, which first leaves a `sleep` running
/// in the background: a grandchild of the gateway, in echo's process group, that never exits
/// on its own (its stdio is not the gateway's pipes).
fn two_servers_with_grandchild() -> Workdir {
    let script = format!(
        "sleep 300 </dev/null >/dev/null 2>&1 & exec '{}'",
        example("echo_server").display()
    );
    Workdir::new(&format!(
        "[servers.echo]\ncommand = \"sh\"\nargs = [\"-c\", {}]\n{}",
        toml_string(&script),
        server_toml("other", "other_server", &[])
    ))
}

/// Waits until the gateway has its two upstream children (and, if `grandchild`, the `sleep`
/// under one of them); returns every descendant.
fn wait_for_upstreams(gateway: &Gateway, grandchild: bool) -> Vec<Proc> {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let tree = descendants(gateway.pid());
        let children = tree.iter().filter(|p| p.ppid == gateway.pid()).count();
        let has_grandchild = tree
            .iter()
            .any(|p| p.ppid != gateway.pid() && p.comm == "sleep");
        if children == 2 && has_grandchild == grandchild {
            return tree;
        }
        assert!(
            Instant::now() < deadline,
            "the gateway's upstream processes never appeared: {tree:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Asserts that every process in `tree` has exited within a few seconds.
fn assert_all_gone(tree: &[Proc], gateway_exit: ExitStatus) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left: Vec<&Proc> = tree.iter().filter(|p| p.running()).collect();
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "still running after the gateway exited ({gateway_exit}): {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How the test stops the gateway.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    CloseStdin,
    Sigterm,
}

/// Starts the gateway on `work`, waits for its upstreams (after an MCP handshake if
/// `handshake`, else with no client ever speaking), stops it with `stop`, and checks that no
/// upstream process outlives it and that it exited by itself rather than died of the signal.
fn stops_without_orphans(work: &Workdir, grandchild: bool, handshake: bool, stop: Stop) {
    let mut gateway = Gateway::spawn(work);
    if handshake {
        let names = gateway.handshake();
        assert!(names.contains(&"echo__echo".to_owned()), "{names:?}");
        assert!(names.contains(&"other__echo".to_owned()), "{names:?}");
    } else {
        gateway.wait_for_log("server ready", 2);
    }
    let tree = wait_for_upstreams(&gateway, grandchild);
    let _reaper = Reaper(tree.clone());

    match stop {
        Stop::CloseStdin => gateway.close_stdin(),
        Stop::Sigterm => gateway.terminate(),
    }
    let status = gateway.wait_exit();
    assert_all_gone(&tree, status);
    assert!(
        status.code().is_some(),
        "toolgate died of a signal instead of stopping: {status}"
    );
    // After a session, or when asked to stop, stopping is a success. (A client that leaves
    // before `initialize` is an error the gateway may report in its exit code.)
    if handshake || stop == Stop::Sigterm {
        assert_eq!(
            status.code(),
            Some(0),
            "toolgate did not stop cleanly: {status}"
        );
    }
}

#[test]
fn closing_stdin_stops_the_gateway_and_its_upstreams() {
    stops_without_orphans(&two_servers(), false, true, Stop::CloseStdin);
}

#[test]
fn sigterm_stops_the_gateway_and_its_upstreams() {
    stops_without_orphans(&two_servers(), false, true, Stop::Sigterm);
}

#[test]
fn closing_stdin_also_ends_grandchildren_in_the_upstream_process_group() {
    stops_without_orphans(&two_servers_with_grandchild(), true, true, Stop::CloseStdin);
}

#[test]
fn sigterm_also_ends_grandchildren_in_the_upstream_process_group() {
    stops_without_orphans(&two_servers_with_grandchild(), true, true, Stop::Sigterm);
}

#[test]
fn closing_stdin_before_any_client_handshake_leaves_no_upstream_behind() {
    stops_without_orphans(
        &two_servers_with_grandchild(),
        true,
        false,
        Stop::CloseStdin,
    );
}

#[test]
fn sigterm_before_any_client_handshake_leaves_no_upstream_behind() {
    // The upstreams are up and the gateway waits for a client's `initialize` (one that never
    // came, or died first) when it is asked to stop.
    stops_without_orphans(&two_servers_with_grandchild(), true, false, Stop::Sigterm);
}

/// Every running process whose environment holds `entry` (`NAME=VALUE`).
fn marked(entry: &str) -> Vec<Proc> {
    all_processes()
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{}/environ", p.pid))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|e| e == entry.as_bytes()))
        })
        .filter(Proc::running)
        .collect()
}

/// A marker unique to this test: (value, `NO_ORPHANS_MARKER=value`). Put in the
/// environment of a child, it is inherited by what the child starts, so all of them can be
/// found however they are related to the gateway.
fn marker() -> (String, String) {
    let value = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let entry = format!("NO_ORPHANS_MARKER={value}");
    (value, entry)
}

/// Waits until processes carrying `entry` include one named after each of `names`; all of
/// those carrying it.
fn wait_for_marked(entry: &str, names: &[&str]) -> Vec<Proc> {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let found = marked(entry);
        if names
            .iter()
            .all(|name| found.iter().any(|p| p.comm == *name))
        {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "{names:?} never started: {found:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_while_an_upstream_is_still_starting_leaves_nothing_behind() {
    let (value, entry) = marker();
    // `slow` takes 30 s to become a server: the gateway is still starting when it is told
    // to stop.
    let script = format!("sleep 30; exec '{}'", example("echo_server").display());
    let work = Workdir::new(&format!(
        "[servers.slow]\ncommand = \"sh\"\nargs = [\"-c\", {}]\nenv = {{ NO_ORPHANS_MARKER = {} }}\n{}",
        toml_string(&script),
        toml_string(&value),
        server_toml("other", "other_server", &[("NO_ORPHANS_MARKER", &value)])
    ));
    let mut gateway = Gateway::spawn(&work);
    let started = wait_for_marked(&entry, &["sleep", "other_server"]);
    let _reaper = Reaper(started.clone());

    let asked = Instant::now();
    gateway.terminate();
    let status = gateway.wait_exit();
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "stopping waited for the slow start: {:?}",
        asked.elapsed()
    );
    assert_eq!(
        status.code(),
        Some(0),
        "toolgate did not stop cleanly: {status}"
    );
    assert_all_gone(&started, status);
    assert_eq!(marked(&entry), [], "nothing else was started meanwhile");
}

#[test]
fn sigterm_also_ends_a_command_hooks_process_group() {
    let (value, entry) = marker();
    // The hook leaves a `sleep` in its process group, as a hook run through a shell might.
    let script = format!(
        "sleep 300 </dev/null >/dev/null 2>&1 & exec '{}'",
        example("policy_hook").display()
    );
    let work = Workdir::new(&format!(
        "{}[[hooks]]\nstage = \"pre\"\ncommand = [\"sh\", \"-c\", {}]\nenv = {{ NO_ORPHANS_MARKER = {} }}\n",
        server_toml("echo", "echo_server", &[]),
        toml_string(&script),
        toml_string(&value)
    ));
    let mut gateway = Gateway::spawn(&work);
    gateway.handshake();
    // Hooks start on first use.
    gateway.send(json!({
        "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "echo__echo", "arguments": {"text": "through the hook"}}
    }));
    let answer = gateway.receive();
    assert_eq!(
        answer["result"]["content"][0]["text"], "through the hook",
        "{answer}"
    );
    let hook = wait_for_marked(&entry, &["sleep", "policy_hook"]);
    let _reaper = Reaper(hook.clone());

    gateway.terminate();
    let status = gateway.wait_exit();
    assert_eq!(status.code(), Some(0), "{status}");
    assert_all_gone(&hook, status);
}
