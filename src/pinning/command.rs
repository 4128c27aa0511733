//! `toolgate pin [--check]`: start every server, hash its tools, write the lock or compare with it.
//!
//! Exit codes: 0 written, or (`--check`) no drift; 1 (`--check`) drift: a changed, new or
//! missing tool, a server that could not be checked, or no lock at all; 3 written, but
//! some servers did not start (their previous pins are kept); 64 the existing lock is not
//! valid (`--check`); 73 the lock cannot be written.

use std::{collections::BTreeMap, fmt, process::ExitCode, sync::Arc};

use rmcp::model::Tool;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::{
    diff::{self, Diff},
    lock::Lock,
};
use crate::{
    config::Config,
    registry::Views,
    relay::Relay,
    upstream::{ServerState, UpstreamEvent, Upstreams},
};

/// `--check` found a difference.
pub const EXIT_DRIFT: u8 = 1;
/// Written, but some servers did not start.
pub const EXIT_PARTIAL: u8 = 3;
/// The existing lock is not valid.
pub const EXIT_BAD_LOCK: u8 = 64;
/// The lock cannot be written.
pub const EXIT_CANT_CREATE: u8 = 73;

/// One way the servers differ from the lock.
#[derive(Debug, Clone, PartialEq)]
pub enum Finding {
    Changed {
        server: String,
        tool: String,
        diff: Diff,
    },
    /// Offered, not pinned.
    New { server: String, tool: String },
    /// Pinned, no longer offered.
    Missing { server: String, tool: String },
    /// The server did not start, so its tools could not be compared.
    NotChecked { server: String, reason: String },
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::Changed { server, tool, diff } => {
                write!(f, "changed: server {server:?} tool {tool:?}: {diff}")
            }
            Finding::New { server, tool } => {
                write!(f, "new: server {server:?} tool {tool:?} is not pinned")
            }
            Finding::Missing { server, tool } => {
                write!(
                    f,
                    "missing: server {server:?} tool {tool:?} is pinned but no longer offered"
                )
            }
            Finding::NotChecked { server, reason } => {
                write!(f, "unchecked: server {server:?} did not start: {reason}")
            }
        }
    }
}

/// What the servers offer now, and those that did not start (server → reason).
#[derive(Debug, Default)]
pub struct Collected {
    pub tools: BTreeMap<String, Vec<Tool>>,
    pub failed: BTreeMap<String, String>,
}

/// Every difference between the `pinned` lock and the `current` one (made from the servers
/// that started); a `failed` server is reported as unchecked rather than as missing tools.
pub fn compare(pinned: &Lock, current: &Lock, failed: &BTreeMap<String, String>) -> Vec<Finding> {
    let mut servers: Vec<&String> = pinned
        .servers
        .keys()
        .chain(current.servers.keys())
        .chain(failed.keys())
        .collect();
    servers.sort();
    servers.dedup();
    let mut findings = Vec::new();
    for server in servers {
        if let Some(reason) = failed.get(server) {
            findings.push(Finding::NotChecked {
                server: server.clone(),
                reason: reason.clone(),
            });
            continue;
        }
        let empty = BTreeMap::new();
        let old = pinned.servers.get(server).unwrap_or(&empty);
        let new = current.servers.get(server).unwrap_or(&empty);
        let mut names: Vec<&String> = old.keys().chain(new.keys()).collect();
        names.sort();
        names.dedup();
        for name in names {
            let (server, tool) = (server.clone(), name.clone());
            match (old.get(name), new.get(name)) {
                (Some(old), Some(new)) if old.hash != new.hash => {
                    findings.push(Finding::Changed {
                        server,
                        tool,
                        diff: diff::diff(&old.tool, &new.tool),
                    });
                }
                (Some(_), None) => findings.push(Finding::Missing { server, tool }),
                (None, Some(_)) => findings.push(Finding::New { server, tool }),
                _ => {}
            }
        }
    }
    findings
}

/// `current` plus, for each server that did not start, what `previous` pinned for it: a
/// server that is down for a moment must not lose its pins.
pub fn keep_failed(
    mut current: Lock,
    previous: Option<&Lock>,
    failed: &BTreeMap<String, String>,
) -> Lock {
    if let Some(previous) = previous {
        for server in failed.keys() {
            if let Some(pins) = previous.servers.get(server) {
                current.servers.insert(server.clone(), pins.clone());
            }
        }
    }
    current
}

/// Starts every configured server (global and profile-owned), takes its tool list as
/// imported, and stops them all again.
pub async fn collect(config: &Config) -> Collected {
    let (events_tx, mut events) = mpsc::unbounded_channel();
    // No client sessions: the relay only has to exist.
    let (_views_tx, views) = watch::channel(Arc::new(Views::default()));
    let relay = Arc::new(Relay::new(views));
    // One start each: a server that fails is reported, not restarted.
    let settings = crate::config::SuperviseSettings {
        restart: false,
        ..config.supervise.clone()
    };
    let upstreams = Upstreams::start(
        &config.servers,
        &settings,
        events_tx,
        relay,
        CancellationToken::new(),
    );
    let mut collected = Collected::default();
    // Every server reports `Started` once its first start is over; its tools come before.
    let mut pending = config.servers.len();
    while pending > 0 {
        match events.recv().await {
            Some(UpstreamEvent::Tools { server, tools, .. }) => {
                collected.tools.insert(server.to_string(), tools);
            }
            Some(UpstreamEvent::Started { .. }) => pending -= 1,
            Some(_) => {}
            None => break,
        }
    }
    for upstream in upstreams.all() {
        let server = upstream.name().to_string();
        match upstream.state() {
            ServerState::Ready { .. } => {}
            ServerState::Failed(reason) => {
                collected.tools.remove(&server);
                collected.failed.insert(server, reason);
            }
            ServerState::Starting => {
                collected.tools.remove(&server);
                collected
                    .failed
                    .insert(server, "did not finish starting".into());
            }
        }
    }
    upstreams.shutdown().await;
    collected
}

/// `toolgate pin` (`check = false`) or `toolgate pin --check`.
pub async fn run(config: &Config, check: bool) -> ExitCode {
    let path = &config.pinning.lock;
    let previous = Lock::read(path);
    // A lock that cannot be read is an error to a check, and replaced by a new pin.
    let previous = match (previous, check) {
        (Ok(previous), _) => previous,
        (Err(error), true) => {
            eprintln!("toolgate: {error}");
            return ExitCode::from(EXIT_BAD_LOCK);
        }
        (Err(error), false) => {
            eprintln!("toolgate: {error}; writing a new lock");
            None
        }
    };
    let checked = match (&previous, check) {
        (Some(previous), true) => Some(previous),
        (None, true) => {
            // Nothing to compare with: no need to start the servers.
            println!(
                "{}: no lock file; run `toolgate pin` to create it",
                path.display()
            );
            return ExitCode::from(EXIT_DRIFT);
        }
        (_, false) => None,
    };
    let collected = collect(config).await;
    let current = Lock::of(
        collected
            .tools
            .iter()
            .map(|(server, tools)| (server.clone(), tools.as_slice())),
    );
    if let Some(previous) = checked {
        return report_check(path, previous, &current, &collected.failed);
    }
    for finding in compare(
        previous.as_ref().unwrap_or(&Lock::default()),
        &current,
        &collected.failed,
    ) {
        // The first pin lists every tool as new: that is noise, not news.
        if previous.is_some() || !matches!(finding, Finding::New { .. }) {
            println!("{finding}");
        }
    }
    let lock = keep_failed(current, previous.as_ref(), &collected.failed);
    if let Err(error) = lock.write(path) {
        eprintln!("toolgate: {error}");
        return ExitCode::from(EXIT_CANT_CREATE);
    }
    println!(
        "wrote {}: {} tools of {} servers",
        path.display(),
        lock.tool_count(),
        lock.servers.len()
    );
    if collected.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "toolgate: {} server(s) did not start ({}); their previous pins, if any, are kept",
            collected.failed.len(),
            collected
                .failed
                .keys()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        );
        ExitCode::from(EXIT_PARTIAL)
    }
}

fn report_check(
    path: &std::path::Path,
    previous: &Lock,
    current: &Lock,
    failed: &BTreeMap<String, String>,
) -> ExitCode {
    let findings = compare(previous, current, failed);
    for finding in &findings {
        println!("{finding}");
    }
    if findings.is_empty() {
        println!(
            "{} matches: {} tools of {} servers",
            path.display(),
            previous.tool_count(),
            previous.servers.len()
        );
        ExitCode::SUCCESS
    } else {
        println!(
            "{}: {} difference(s); run `toolgate pin` to accept them",
            path.display(),
            findings.len()
        );
        ExitCode::from(EXIT_DRIFT)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rmcp::model::{JsonObject, Tool};

    use super::*;

    fn tool(name: &'static str, description: &'static str) -> Tool {
        Tool::new(name, description, Arc::new(JsonObject::new()))
    }

    fn lock(servers: &[(&str, &[Tool])]) -> Lock {
        Lock::of(servers.iter().map(|(s, t)| ((*s).to_owned(), *t)))
    }

    #[test]
    fn compare_names_changed_new_missing_and_unchecked() {
        let pinned = lock(&[
            ("echo", &[tool("echo", "Echo"), tool("gone", "Gone")]),
            ("down", &[tool("x", "X")]),
        ]);
        let current = lock(&[("echo", &[tool("echo", "Pulled"), tool("fresh", "Fresh")])]);
        let failed = BTreeMap::from([("down".to_owned(), "exit 1".to_owned())]);
        let findings = compare(&pinned, &current, &failed);
        let lines: Vec<String> = findings.iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "unchecked: server \"down\" did not start: exit 1",
                "changed: server \"echo\" tool \"echo\": description: \"Echo\" -> \"Pulled\"",
                "new: server \"echo\" tool \"fresh\" is not pinned",
                "missing: server \"echo\" tool \"gone\" is pinned but no longer offered",
            ]
        );
        assert!(compare(&current, &current, &BTreeMap::new()).is_empty());
    }

    #[test]
    fn a_failed_server_keeps_its_previous_pins() {
        let previous = lock(&[
            ("echo", &[tool("echo", "Echo")]),
            ("down", &[tool("x", "X")]),
        ]);
        let current = lock(&[("echo", &[tool("echo", "Echo 2")])]);
        let failed = BTreeMap::from([("down".to_owned(), "exit 1".to_owned())]);
        let kept = keep_failed(current, Some(&previous), &failed);
        assert_eq!(kept.servers["down"], previous.servers["down"]);
        assert_ne!(kept.servers["echo"], previous.servers["echo"]);
    }
}
