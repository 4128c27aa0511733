//! `bench_sessions`: what an idle MCP session costs `toolgate serve --http` in memory, and
//! whether expiry gives it back.
//!
//! `cargo build --release --bin toolgate --examples && cargo run --release --example bench_sessions`
//! (`--sessions N`, default 1000; `--idle SECS`, the `session_idle_secs` used, default 5;
//! `--rounds N`, default 2; `--quick`: 100 sessions, 2 s). It starts `target/<profile>/toolgate` with the echo server
//! as its one upstream, then, in each round: opens N sessions the way a client does (`initialize`,
//! then `notifications/initialized`), leaves them idle until they expire and until their
//! list-change tasks have noticed (within 30 s), and reads VmRSS from `/proc/PID/status` at
//! each step. Later rounds show whether the memory of expired sessions is reused (RSS stays
//! flat) or leaks (RSS grows by the first round's amount again, every round). Prints a Markdown table on stdout.

use std::{
    process::Stdio,
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use futures::{StreamExt, stream};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

/// How long the gateway sits idle before its RSS is read.
const SETTLE: Duration = Duration::from_secs(1);
/// How long after a session closed its list-change task notices and drops what it holds
/// (`SESSION_REAP_INTERVAL` in `src/downstream.rs`), plus a margin.
const REAP: Duration = Duration::from_secs(31);
/// `initialize` calls in flight at once while opening sessions.
const OPENERS: usize = 8;

struct Options {
    sessions: usize,
    idle_secs: u64,
    rounds: usize,
}

impl Options {
    fn parse() -> anyhow::Result<Self> {
        let mut options = Self {
            sessions: 1000,
            idle_secs: 5,
            rounds: 2,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--quick" => {
                    options.sessions = 100;
                    options.idle_secs = 2;
                }
                "--sessions" => options.sessions = args.next().context("--sessions N")?.parse()?,
                "--idle" => options.idle_secs = args.next().context("--idle SECS")?.parse()?,
                "--rounds" => options.rounds = args.next().context("--rounds N")?.parse()?,
                other => bail!(
                    "unknown argument {other:?} (--sessions N, --idle SECS, --rounds N, --quick)"
                ),
            }
        }
        Ok(options)
    }
}

/// `VmRSS` of `pid`, in KiB.
fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .context("no VmRSS in /proc/PID/status")
}

async fn post(
    client: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: &Value,
) -> anyhow::Result<reqwest::Response> {
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(serde_json::to_vec(body)?);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    Ok(request.send().await?)
}

/// Opens one session as a client does; its id.
async fn open_session(client: &reqwest::Client, url: &str) -> anyhow::Result<String> {
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench_sessions", "version": "0"}
        }
    });
    let response = post(client, url, None, &initialize).await?;
    if response.status() != 200 {
        bail!("initialize: {}", response.status());
    }
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .context("no session id")?
        .to_owned();
    // Read the answer to its end, as a client does.
    response.bytes().await?;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = post(client, url, Some(&session), &initialized).await?;
    if response.status() != 202 {
        bail!("notifications/initialized: {}", response.status());
    }
    Ok(session)
}

async fn open_sessions(
    client: &reqwest::Client,
    url: &str,
    count: usize,
) -> anyhow::Result<Vec<String>> {
    stream::iter(0..count)
        .map(|_| open_session(client, url))
        .buffer_unordered(OPENERS)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect()
}

/// Waits until `session`, idle since now, is gone (404); how long that took.
async fn wait_expired(
    client: &reqwest::Client,
    url: &str,
    session: &str,
    idle: Duration,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    // Any message to a live session restarts its idle clock, so each probe waits a whole
    // idle time (and a margin) after the last.
    let probe = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    loop {
        tokio::time::sleep(idle + Duration::from_millis(500)).await;
        let status = post(client, url, Some(session), &probe).await?.status();
        if status == 404 {
            return Ok(started.elapsed());
        }
        if started.elapsed() > idle * 4 {
            bail!(
                "session still alive after {:?} ({status})",
                started.elapsed()
            );
        }
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let options = Options::parse()?;
    let dir = std::env::current_exe()?
        .parent()
        .context("examples directory")?
        .to_path_buf();
    let toolgate = dir.parent().context("target directory")?.join("toolgate");
    let echo = dir.join("echo_server");
    let work = tempfile::tempdir()?;
    let config = work.path().join("servers.toml");
    std::fs::write(
        &config,
        format!(
            "[gateway.http]\nmax_sessions = {}\nsession_idle_secs = {}\n[servers.echo]\ncommand = {:?}\n",
            options.sessions + 10,
            options.idle_secs,
            echo.display().to_string()
        ),
    )?;
    let mut gateway = tokio::process::Command::new(&toolgate)
        .arg("--config")
        .arg(&config)
        .args(["serve", "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("spawn {}", toolgate.display()))?;
    let pid = gateway.id().context("gateway pid")?;
    let mut lines = BufReader::new(gateway.stderr.take().context("stderr")?).lines();
    let url = loop {
        let line = lines
            .next_line()
            .await?
            .context("toolgate exited before listening")?;
        if let Some(url) = line.strip_prefix("toolgate: listening on ") {
            break url.to_owned();
        }
    };
    // Keep draining its log so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    let client = reqwest::Client::new();
    let idle = Duration::from_secs(options.idle_secs);
    // One session first, so that lazily built state (rmcp's, the allocator's) is counted in
    // the baseline rather than against the first session measured.
    let warm = open_session(&client, &url).await?;
    wait_expired(&client, &url, &warm, idle).await?;
    tokio::time::sleep(REAP).await;
    let baseline = rss_kib(pid)?;

    let n = options.sessions;
    println!(
        "`toolgate serve --http`, {n} idle sessions per round, session_idle_secs = {}\n",
        options.idle_secs
    );
    println!("| step | VmRSS MiB | vs baseline | per session |\n|---|---:|---:|---:|");
    let row = |step: &str, kib: u64, per_session: bool| {
        let delta = kib as i64 - baseline as i64;
        let each = if per_session {
            format!("{:.1} KiB", delta as f64 / n as f64)
        } else {
            String::new()
        };
        println!(
            "| {step} | {:.1} | {:+.1} MiB | {each} |",
            mib(kib),
            delta as f64 / 1024.0
        );
    };
    row(
        "baseline (one session opened, expired, reaped)",
        baseline,
        false,
    );
    for round in 1..=options.rounds {
        let started = Instant::now();
        let sessions = open_sessions(&client, &url, n).await?;
        let opened_in = started.elapsed();
        tokio::time::sleep(SETTLE).await;
        row(
            &format!("round {round}: {n} sessions open (opened in {opened_in:.1?})"),
            rss_kib(pid)?,
            true,
        );
        // The last one opened expires last.
        let last = sessions.last().context("no session")?;
        let expired_after = wait_expired(&client, &url, last, idle).await?;
        tokio::time::sleep(SETTLE).await;
        row(
            &format!("round {round}: all expired (last after {expired_after:.1?})"),
            rss_kib(pid)?,
            true,
        );
        tokio::time::sleep(REAP).await;
        row(
            &format!("round {round}: {} s later, all reaped", REAP.as_secs()),
            rss_kib(pid)?,
            true,
        );
    }
    Ok(())
}
