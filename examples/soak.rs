//! `soak`: many calls through `toolgate serve` while its upstreams are killed and hung at random; every call must be answered and nothing may leak.
//!
//! `cargo build --release --bin toolgate --examples && ./target/release/examples/soak`
//! (`--calls N`, default 100,000; `--quick` is 3,000 calls for CI). It starts toolgate over
//! stdio with 4 `echo_server` upstreams (each behind `sh`, which writes its pid), drives 16
//! concurrent callers, and every `--chaos-ms` (default 300) SIGKILLs or SIGSTOPs a random
//! upstream (a stopped one is found by pings and replaced). Each call must end with the echoed
//! text or an `isError` result with a stable code, within 20 s. After the calls, chaos stops,
//! every server is back, and the gateway's RSS, open fds and child processes are compared
//! with what they were after warm-up. Exits non-zero if a call went unanswered or something
//! leaked (RSS more than 10% above the settled value, more fds, more processes).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use rmcp::{
    ServiceExt,
    model::{CallToolRequestParams, JsonObject},
    transport::TokioChildProcess,
};

const UPSTREAMS: usize = 4;
const CALLERS: usize = 16;
const CALL_LIMIT: Duration = Duration::from_secs(20);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    let quick = args.iter().any(|a| a == "--quick");
    let calls = arg("--calls").unwrap_or(if quick { 3_000 } else { 100_000 }) as usize;
    let chaos_every = Duration::from_millis(arg("--chaos-ms").unwrap_or(300));

    let exe = std::env::current_exe().context("cannot find the soak executable")?;
    let examples = exe.parent().context("soak has no directory")?.to_owned();
    let toolgate = examples
        .parent()
        .context("no profile directory")?
        .join("toolgate");
    let dir = tempfile::tempdir()?;
    let mut toml = String::from(
        "[gateway]\ncall_timeout_ms = 3000\n[gateway.supervise]\nbackoff_initial_ms = 50\nbackoff_max_ms = 500\nping_interval_ms = 300\nping_timeout_ms = 300\nping_failures = 2\n",
    );
    for i in 0..UPSTREAMS {
        let pid_file = dir.path().join(format!("s{i}.pid"));
        // `$$$$`: toolgate expands `$$` to `$`, so sh sees `$$`.
        let script = format!(
            "echo $$$$ > '{}'; exec '{}'",
            pid_file.display(),
            examples.join("echo_server").display()
        );
        toml.push_str(&format!(
            "[servers.s{i}]\ncommand = \"sh\"\nargs = [\"-c\", {}]\n",
            serde_json::to_string(&script)?
        ));
    }
    let config = dir.path().join("servers.toml");
    std::fs::write(&config, toml)?;

    let mut command = tokio::process::Command::new(&toolgate);
    command.arg("--config").arg(&config).arg("serve");
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .with_context(|| format!("cannot start {}", toolgate.display()))?;
    let gateway_pid = transport.id().context("toolgate has no pid")?;
    let client = Arc::new(().serve(transport).await?);
    wait_all_listed(&client).await?;

    // Warm up, then read where the gateway settles.
    run_calls(&client, 2_000, &Outcomes::default()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let settled = Resources::of(gateway_pid)?;

    let chaos_on = Arc::new(AtomicBool::new(true));
    let chaos = tokio::spawn(chaos_loop(
        dir.path().to_owned(),
        chaos_every,
        chaos_on.clone(),
    ));
    let outcomes = Outcomes::default();
    let started = Instant::now();
    run_calls(&client, calls, &outcomes).await;
    let took = started.elapsed();
    chaos_on.store(false, Ordering::SeqCst);
    let chaos_actions = chaos.await?;

    // Let the supervisor bring every server back, then measure again.
    continue_stopped(dir.path());
    wait_all_listed(&client).await?;
    run_calls(&client, 2_000, &Outcomes::default()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let end = Resources::of(gateway_pid)?;

    let unanswered = outcomes.unanswered.load(Ordering::SeqCst);
    let wrong = outcomes.wrong.load(Ordering::SeqCst);
    println!(
        "soak: {calls} calls in {:.1} s ({:.0}/s), 16 callers, {UPSTREAMS} upstreams, {} kills and {} hangs",
        took.as_secs_f64(),
        calls as f64 / took.as_secs_f64(),
        chaos_actions.0,
        chaos_actions.1
    );
    println!(
        "outcomes: {:?}",
        outcomes
            .by_code
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
    );
    println!("unanswered: {unanswered}, wrong answers: {wrong}");
    println!(
        "gateway RSS {} → {} KiB, fds {} → {}, child processes {} → {}",
        settled.rss_kib, end.rss_kib, settled.fds, end.fds, settled.children, end.children
    );
    if let Ok(client) = Arc::try_unwrap(client) {
        let _ = client.cancel().await;
    }
    if unanswered > 0 || wrong > 0 {
        bail!("{unanswered} calls went unanswered and {wrong} got a wrong answer");
    }
    if end.rss_kib as f64 > settled.rss_kib as f64 * 1.10 {
        bail!(
            "RSS grew more than 10%: {} → {} KiB",
            settled.rss_kib,
            end.rss_kib
        );
    }
    if end.fds > settled.fds || end.children > settled.children {
        bail!(
            "leak: fds {} → {}, children {} → {}",
            settled.fds,
            end.fds,
            settled.children,
            end.children
        );
    }
    println!("soak: ok");
    Ok(())
}

#[derive(Default)]
struct Outcomes {
    by_code: Mutex<BTreeMap<String, usize>>,
    unanswered: AtomicUsize,
    wrong: AtomicUsize,
}

impl Outcomes {
    fn count(&self, code: &str) {
        if let Ok(mut map) = self.by_code.lock() {
            *map.entry(code.to_owned()).or_default() += 1;
        }
    }
}

/// `calls` calls from [`CALLERS`] concurrent callers, each to a random server.
async fn run_calls(
    client: &Arc<rmcp::service::RunningService<rmcp::RoleClient, ()>>,
    calls: usize,
    outcomes: &Outcomes,
) {
    let next = AtomicUsize::new(0);
    let callers = (0..CALLERS).map(|_| async {
        while next.fetch_add(1, Ordering::Relaxed) < calls {
            let server = fastrand::usize(..UPSTREAMS);
            let text = format!("t{}", fastrand::u64(..));
            let mut arguments = JsonObject::new();
            arguments.insert("text".into(), text.clone().into());
            let params =
                CallToolRequestParams::new(format!("s{server}__echo")).with_arguments(arguments);
            match tokio::time::timeout(CALL_LIMIT, client.call_tool(params)).await {
                Err(_) => {
                    outcomes.unanswered.fetch_add(1, Ordering::SeqCst);
                }
                Ok(Err(error)) => outcomes.count(&format!("jsonrpc: {error}")),
                Ok(Ok(result)) if result.is_error == Some(true) => {
                    let code = result
                        .meta
                        .as_ref()
                        .and_then(|m| m.get("toolgate/error"))
                        .and_then(|e| e.get("code"))
                        .and_then(|c| c.as_str())
                        .unwrap_or("(no code)")
                        .to_owned();
                    outcomes.count(&code);
                }
                Ok(Ok(result)) => {
                    let echoed = result
                        .content
                        .first()
                        .and_then(|c| c.as_text())
                        .map(|t| t.text.as_str());
                    if echoed == Some(text.as_str()) {
                        outcomes.count("ok");
                    } else {
                        outcomes.wrong.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        }
    });
    futures::future::join_all(callers).await;
}

/// Kills or stops a random upstream every `every`; returns (kills, hangs).
async fn chaos_loop(dir: PathBuf, every: Duration, on: Arc<AtomicBool>) -> (usize, usize) {
    let (mut kills, mut hangs) = (0, 0);
    while on.load(Ordering::SeqCst) {
        tokio::time::sleep(every).await;
        let server = fastrand::usize(..UPSTREAMS);
        let Some(pid) = read_pid(&dir, server) else {
            continue;
        };
        let signal = if fastrand::bool() {
            kills += 1;
            "-KILL"
        } else {
            hangs += 1;
            "-STOP"
        };
        let _ = std::process::Command::new("kill")
            .args([signal, &pid.to_string()])
            // A pid that already exited is expected: the supervisor may have replaced it.
            .stderr(std::process::Stdio::null())
            .status();
    }
    (kills, hangs)
}

/// Resumes any upstream still stopped (one the supervisor has not replaced yet).
fn continue_stopped(dir: &Path) {
    for server in 0..UPSTREAMS {
        if let Some(pid) = read_pid(dir, server) {
            let _ = std::process::Command::new("kill")
                .args(["-CONT", &pid.to_string()])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

fn read_pid(dir: &Path, server: usize) -> Option<u32> {
    std::fs::read_to_string(dir.join(format!("s{server}.pid")))
        .ok()?
        .trim()
        .parse()
        .ok()
}

async fn wait_all_listed(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let tools = client.list_all_tools().await?;
        let servers = (0..UPSTREAMS)
            .filter(|i| tools.iter().any(|t| t.name == format!("s{i}__echo")))
            .count();
        if servers == UPSTREAMS {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("only {servers} of {UPSTREAMS} servers came back within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What the gateway process holds.
struct Resources {
    rss_kib: u64,
    fds: usize,
    /// Its live child processes.
    children: usize,
}

impl Resources {
    fn of(pid: u32) -> anyhow::Result<Self> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let rss_kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .context("no VmRSS")?;
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))?.count();
        let mut children = 0;
        for entry in std::fs::read_dir("/proc")?.flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            let Some((_, rest)) = stat.rsplit_once(')') else {
                continue;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            // state, ppid
            if fields.get(1) == Some(&pid.to_string().as_str()) && fields.first() != Some(&"Z") {
                children += 1;
            }
        }
        Ok(Self {
            rss_kib,
            fds,
            children,
        })
    }
}
