//! Processes as `/proc` shows them (Linux): who is whose child, which carry a marker, and
//! whether they still run. For tests about what outlives the gateway.
//!
//! A process is identified by its pid and start time, so a recycled pid is never mistaken for
//! the original; a zombie counts as gone (it has exited and only waits to be reaped, which
//! some containers' init never does).

use std::time::{Duration, Instant};

/// One process as `/proc/PID/stat` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proc {
    pub pid: u32,
    pub ppid: u32,
    pub pgrp: u32,
    /// Clock ticks after boot: with `pid`, identifies the process even if the pid is reused.
    pub start: u64,
    pub state: String,
    pub comm: String,
}

impl Proc {
    pub fn read(pid: u32) -> Option<Self> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // `PID (COMM) STATE PPID PGRP ...`: COMM may hold spaces and parentheses.
        let open = stat.find('(')?;
        let close = stat.rfind(')')?;
        let comm = stat[open + 1..close].to_owned();
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        Some(Self {
            pid,
            state: rest.first()?.to_string(),
            ppid: rest.get(1)?.parse().ok()?,
            pgrp: rest.get(2)?.parse().ok()?,
            // Field 22 of the file; `rest` starts at field 3.
            start: rest.get(19)?.parse().ok()?,
            comm,
        })
    }

    /// Still running: the same process (same start time) exists and has not exited.
    pub fn running(&self) -> bool {
        Proc::read(self.pid).is_some_and(|now| now.start == self.start && now.is_live())
    }

    fn is_live(&self) -> bool {
        self.state != "Z" && self.state != "X"
    }

    /// Whether its environment (readable for our own user's processes) has `marker` in it.
    pub fn has_in_environment(&self, marker: &str) -> bool {
        std::fs::read(format!("/proc/{}/environ", self.pid)).is_ok_and(|env| {
            env.split(|&b| b == 0)
                .any(|var| contains(var, marker.as_bytes()))
        })
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// Every live process.
pub fn all() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(Proc::read)
        .filter(Proc::is_live)
        .collect()
}

/// The live children of `parent`.
pub fn children(parent: u32) -> Vec<Proc> {
    all().into_iter().filter(|p| p.ppid == parent).collect()
}

/// The live processes whose environment holds `marker`.
pub fn marked(marker: &str) -> Vec<Proc> {
    all()
        .into_iter()
        .filter(|p| p.has_in_environment(marker))
        .collect()
}

/// A string no other test run uses, to put into a child's environment and find it by.
pub fn unique_marker(what: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("toolgate-test-{what}-{}-{n}-{nanos}", std::process::id())
}

/// Polls `find` until it returns something that satisfies `enough`, or panics after `within`.
pub async fn wait_for(
    what: &str,
    within: Duration,
    mut find: impl FnMut() -> Vec<Proc>,
    enough: impl Fn(&[Proc]) -> bool,
) -> Vec<Proc> {
    let deadline = Instant::now() + within;
    loop {
        let found = find();
        if enough(&found) {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "{what} never appeared within {within:?}; found {found:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits up to `within` for every process of `procs` to be gone; those still running then.
pub async fn still_running_after(procs: &[Proc], within: Duration) -> Vec<Proc> {
    let deadline = Instant::now() + within;
    loop {
        let left: Vec<Proc> = procs.iter().filter(|p| p.running()).cloned().collect();
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Sends `signal` (a `kill -s` name: `TERM`, `KILL`) to `pid`.
pub fn signal(pid: u32, signal: &str) {
    let sent = std::process::Command::new("kill")
        .args(["-s", signal, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success(), "kill -s {signal} {pid} failed");
}

/// SIGKILLs whatever it holds that is still running when dropped, so that a failing test
/// leaves nothing behind.
#[derive(Default)]
pub struct Reaper(pub Vec<Proc>);

impl Reaper {
    pub fn add(&mut self, procs: &[Proc]) {
        self.0.extend(procs.iter().cloned());
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        for p in self.0.iter().filter(|p| p.running()) {
            let _ = std::process::Command::new("kill")
                .args(["-s", "KILL", &p.pid.to_string()])
                .status();
        }
    }
}

/// Whether `pid` is a live process (not gone, not a zombie).
pub fn pid_running(pid: u32) -> bool {
    Proc::read(pid).is_some_and(|p| p.is_live())
}
