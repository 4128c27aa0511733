//! `bench`: measures what toolgate adds to MCP calls (latency, throughput, `tools/list`, startup, memory).
//!
//! Build the release binaries first, then run the benchmark from the same profile:
//! `cargo build --release --bin toolgate --examples && cargo run --release --example bench`.
//! It spawns `target/release/examples/echo_server` (directly, and as toolgate's upstream) and
//! `target/release/toolgate` with configurations written to a temporary directory, drives them
//! with an rmcp client over stdio and streamable HTTP, and prints Markdown tables on stdout.
//! `--quick` runs a few iterations of everything (a smoke test for CI; its numbers are noisy).
//! The load average is printed before and after: numbers taken on a busy machine are not
//! comparable.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use rmcp::{
    ClientCacheConfig, RoleClient, ServiceExt,
    model::{CallToolRequestParams, JsonObject},
    service::{Peer, RunningService},
    transport::{StreamableHttpClientTransport, TokioChildProcess},
};
use tokio::io::{AsyncBufReadExt, BufReader};

/// The text every `echo` call sends: 12 bytes.
const TEXT: &str = "hello world!";
/// Concurrent callers in the throughput runs.
const CALLERS: usize = 16;
/// Builtin tools of `echo_server`; `ECHO_EXTRA_TOOLS` adds to them.
const ECHO_BUILTIN_TOOLS: usize = 6;
/// Tools listed in the `tools/list` runs.
const LIST_TOOLS: usize = 1_000;
/// Upstream servers in the startup run.
const MANY_SERVERS: usize = 10;

/// How much of everything to do.
struct Plan {
    warmup: usize,
    /// Sequential calls per path, split into `blocks` interleaved blocks.
    calls: usize,
    /// Calls per path in the throughput runs, also split into `blocks`.
    concurrent_calls: usize,
    blocks: usize,
    list_warmup: usize,
    lists: usize,
    startup_runs: usize,
    /// How long a fresh gateway sits idle before its RSS is read.
    settle: Duration,
}

impl Plan {
    fn full() -> Self {
        Self {
            warmup: 200,
            calls: 5_000,
            concurrent_calls: 20_000,
            blocks: 5,
            list_warmup: 20,
            lists: 200,
            startup_runs: 5,
            settle: Duration::from_secs(1),
        }
    }

    fn quick() -> Self {
        Self {
            warmup: 20,
            calls: 300,
            concurrent_calls: 2_000,
            blocks: 2,
            list_warmup: 3,
            lists: 20,
            startup_runs: 2,
            settle: Duration::from_millis(200),
        }
    }
}

/// The binaries under test and a scratch directory for configurations and logs.
struct Env {
    toolgate: PathBuf,
    echo: PathBuf,
    other: PathBuf,
    dir: tempfile::TempDir,
}

impl Env {
    /// Finds the binaries next to this example (`target/<profile>/examples/bench`).
    fn locate() -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("cannot find the bench executable")?;
        let examples = exe.parent().context("bench has no directory")?.to_owned();
        let profile = examples.parent().context("examples has no parent")?;
        // `BENCH_TOOLGATE` swaps in another gateway binary, e.g. a script running it under a
        // profiler (`exec valgrind --tool=callgrind …/toolgate "$@"`).
        let toolgate = std::env::var_os("BENCH_TOOLGATE")
            .map(PathBuf::from)
            .unwrap_or_else(|| profile.join("toolgate"));
        let env = Self {
            toolgate,
            echo: examples.join("echo_server"),
            other: examples.join("other_server"),
            dir: tempfile::tempdir().context("cannot create a temporary directory")?,
        };
        for path in [&env.toolgate, &env.echo, &env.other] {
            if !path.exists() {
                bail!(
                    "{} is missing: run `cargo build --release --bin toolgate --examples` first",
                    path.display()
                );
            }
        }
        Ok(env)
    }

    /// Writes `servers.toml` text to `name` and returns its path.
    fn config(&self, name: &str, toml: &str) -> anyhow::Result<PathBuf> {
        let path = self.dir.path().join(name);
        std::fs::write(&path, toml).with_context(|| format!("cannot write {}", path.display()))?;
        Ok(path)
    }

    /// `[servers.NAME]` running `command` with `env`.
    fn server_toml(name: &str, command: &Path, env: &[(&str, String)]) -> String {
        let mut toml = format!(
            "[servers.{name}]\ncommand = {:?}\n",
            command.display().to_string()
        );
        if !env.is_empty() {
            let pairs: Vec<String> = env.iter().map(|(k, v)| format!("{k} = {v:?}")).collect();
            toml.push_str(&format!("env = {{ {} }}\n", pairs.join(", ")));
        }
        toml
    }

    /// A configuration of `count` echo servers `s0`… with `env`.
    fn echo_servers(
        &self,
        file: &str,
        count: usize,
        env: &[(&str, String)],
    ) -> anyhow::Result<PathBuf> {
        let mut toml = String::from("[gateway]\nprefix = \"always\"\n\n");
        for i in 0..count {
            toml.push_str(&Self::server_toml(&format!("s{i}"), &self.echo, env));
        }
        self.config(file, &toml)
    }
}

type Client = RunningService<RoleClient, ()>;

/// A connected client and the pid of the process it talks to.
struct Session {
    client: Client,
    pid: u32,
    /// Only for a gateway served over HTTP: the process, killed at the end.
    http_child: Option<tokio::process::Child>,
}

impl Session {
    fn peer(&self) -> Peer<RoleClient> {
        self.client.peer().clone()
    }

    async fn close(self) {
        let _ = self.client.cancel().await;
        if let Some(mut child) = self.http_child {
            let _ = child.kill().await;
        }
    }
}

/// Connects over stdio to `command`, which must speak MCP on stdin/stdout; its stderr goes to
/// `log`.
async fn stdio_session(
    mut command: tokio::process::Command,
    log: &Path,
) -> anyhow::Result<Session> {
    let log_file = std::fs::File::create(log)?;
    command.env_remove("RUST_LOG");
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(log_file)
        .spawn()
        .context("cannot spawn the server")?;
    let pid = transport.id().context("child has no pid")?;
    let client = ().serve(transport).await.with_context(|| {
        format!(
            "MCP handshake failed; its stderr: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        )
    })?;
    no_cache(&client).await;
    Ok(Session {
        client,
        pid,
        http_child: None,
    })
}

/// The echo server, directly.
async fn direct(env: &Env, extra_tools: usize, tag: &str) -> anyhow::Result<Session> {
    let mut command = tokio::process::Command::new(&env.echo);
    if extra_tools > 0 {
        command.env("ECHO_EXTRA_TOOLS", extra_tools.to_string());
    }
    stdio_session(command, &env.dir.path().join(format!("{tag}.log"))).await
}

/// `toolgate --config CONFIG serve` on stdio.
async fn gateway_stdio(env: &Env, config: &Path, tag: &str) -> anyhow::Result<Session> {
    let mut command = tokio::process::Command::new(&env.toolgate);
    command.arg("--config").arg(config).arg("serve");
    stdio_session(command, &env.dir.path().join(format!("{tag}.log"))).await
}

/// `toolgate --config CONFIG serve --http 127.0.0.1:0`, and a client of it.
async fn gateway_http(env: &Env, config: &Path) -> anyhow::Result<Session> {
    let mut child = tokio::process::Command::new(&env.toolgate)
        .arg("--config")
        .arg(config)
        .args(["serve", "--http", "127.0.0.1:0"])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("cannot spawn toolgate --http")?;
    let pid = child.id().context("toolgate has no pid")?;
    let stderr = child.stderr.take().context("stderr is not piped")?;
    let mut lines = BufReader::new(stderr).lines();
    let url = tokio::time::timeout(Duration::from_secs(60), async {
        let mut seen = Vec::new();
        while let Some(line) = lines.next_line().await? {
            if let Some(url) = line.strip_prefix("toolgate: listening on ") {
                return Ok(url.to_owned());
            }
            seen.push(line);
        }
        bail!("toolgate exited before listening: {}", seen.join(" | "))
    })
    .await
    .context("toolgate did not listen within 60 s")??;
    // Keep draining stderr so the gateway never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let client =
        ().serve(StreamableHttpClientTransport::from_uri(url.as_str()))
            .await
            .context("MCP handshake with toolgate over HTTP failed")?;
    no_cache(&client).await;
    Ok(Session {
        client,
        pid,
        http_child: Some(child),
    })
}

/// Every `tools/list` must reach the server.
async fn no_cache(client: &Client) {
    client
        .peer()
        .set_response_cache_config(ClientCacheConfig::disabled())
        .await;
}

fn echo_params(name: &str) -> CallToolRequestParams {
    let mut arguments = JsonObject::new();
    arguments.insert("text".into(), TEXT.into());
    let mut params = CallToolRequestParams::new(name.to_owned());
    params.arguments = Some(arguments);
    params
}

async fn call(peer: &Peer<RoleClient>, params: &CallToolRequestParams) -> anyhow::Result<()> {
    let result = peer.call_tool(params.clone()).await?;
    if result.is_error == Some(true) {
        bail!("{} failed: {:?}", params.name, result.content);
    }
    Ok(())
}

/// Checks once that the tool really echoes.
async fn check_echo(peer: &Peer<RoleClient>, params: &CallToolRequestParams) -> anyhow::Result<()> {
    let result = peer.call_tool(params.clone()).await?;
    let text = result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.as_str());
    if text != Some(TEXT) {
        bail!(
            "{} answered {:?}, not {TEXT:?}",
            params.name,
            result.content
        );
    }
    Ok(())
}

/// Times `n` sequential calls, appending each to `samples`.
async fn sequential(
    peer: &Peer<RoleClient>,
    params: &CallToolRequestParams,
    n: usize,
    samples: &mut Vec<Duration>,
) -> anyhow::Result<()> {
    for _ in 0..n {
        let start = Instant::now();
        call(peer, params).await?;
        samples.push(start.elapsed());
    }
    Ok(())
}

/// Makes `n` calls from `CALLERS` tasks sharing `peer`; returns the wall time.
async fn concurrent(
    peer: &Peer<RoleClient>,
    params: &CallToolRequestParams,
    n: usize,
) -> anyhow::Result<Duration> {
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..CALLERS {
        let (peer, params, next) = (peer.clone(), params.clone(), next.clone());
        tasks.spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < n {
                call(&peer, &params).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined??;
    }
    Ok(start.elapsed())
}

/// Times `n` `tools/list` requests, checking the count each time.
async fn lists(peer: &Peer<RoleClient>, n: usize, expect: usize) -> anyhow::Result<Vec<Duration>> {
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        let listed = peer.list_tools(None).await?;
        samples.push(start.elapsed());
        if listed.tools.len() != expect || listed.next_cursor.is_some() {
            bail!(
                "listed {} tools, expected {expect} on one page",
                listed.tools.len()
            );
        }
    }
    Ok(samples)
}

/// Sorted samples, for percentiles.
struct Stats(Vec<Duration>);

impl Stats {
    fn new(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        Self(samples)
    }

    /// Nearest-rank percentile.
    fn pct(&self, p: f64) -> Duration {
        let rank = ((p / 100.0) * self.0.len() as f64).ceil() as usize;
        self.0[rank.clamp(1, self.0.len()) - 1]
    }

    fn mean(&self) -> Duration {
        self.0.iter().sum::<Duration>() / self.0.len().max(1) as u32
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

/// `VmRSS` of `pid`, in KiB.
fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS in /proc/PID/status")
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("model name"))
                .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "meets the goal"
    } else {
        "MISSES the goal"
    }
}

/// One path a call can take.
struct Route {
    label: &'static str,
    session: Session,
    params: CallToolRequestParams,
    cpu: CpuWatch,
}

impl Route {
    async fn direct(env: &Env) -> anyhow::Result<Self> {
        let session = direct(env, 0, "direct").await?;
        Ok(Self {
            label: "direct: client → echo_server (stdio)",
            cpu: CpuWatch {
                gateway: None,
                upstream: session.pid,
            },
            session,
            params: echo_params("echo"),
        })
    }

    fn through(label: &'static str, session: Session) -> anyhow::Result<Self> {
        let upstream = match children(session.pid)[..] {
            [upstream] => upstream,
            ref other => bail!("toolgate has children {other:?}, expected one echo_server"),
        };
        Ok(Self {
            label,
            cpu: CpuWatch {
                gateway: Some(session.pid),
                upstream,
            },
            session,
            params: echo_params("s0__echo"),
        })
    }
}

/// The processes that serve a route, for CPU time per call.
struct CpuWatch {
    gateway: Option<u32>,
    upstream: u32,
}

impl CpuWatch {
    /// (gateway, upstream) CPU time so far.
    fn now(&self) -> (Duration, Duration) {
        (
            self.gateway.map(cpu_time).unwrap_or_default(),
            cpu_time(self.upstream),
        )
    }

    /// Runs `work`, adding the CPU time it cost each process to `total`.
    async fn measure<T>(
        &self,
        total: &mut (Duration, Duration),
        work: impl Future<Output = T>,
    ) -> T {
        let before = self.now();
        let out = work.await;
        let after = self.now();
        total.0 += after.0.saturating_sub(before.0);
        total.1 += after.1.saturating_sub(before.1);
        out
    }
}

/// CPU time used so far by the live threads of `pid` (`/proc/PID/task/*/schedstat`, in ns).
fn cpu_time(pid: u32) -> Duration {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Duration::ZERO;
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .map(Duration::from_nanos)
        .sum()
}

/// Pids whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&child| {
            std::fs::read_to_string(format!("/proc/{child}/stat"))
                .ok()
                .and_then(|stat| {
                    // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
                    let rest = &stat[stat.rfind(')')? + 1..];
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

/// "toolgate / upstream" CPU µs per call.
fn cpu_cells(cpu: (Duration, Duration), calls: usize, through: bool) -> (String, String) {
    let per = |d: Duration| format!("{:.1}", us(d) / calls as f64);
    (if through { per(cpu.0) } else { "–".into() }, per(cpu.1))
}

/// A `tools/call` line much like the one the benchmark's client sends.
const RAW_LINE: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello world!"}}}
"#;

/// Round trips of `RAW_LINE` through a ring of `hops` chained `cat` processes, timed on a
/// plain blocking thread: the cost of waking processes through pipes, with no MCP at all.
fn raw_round_trips(hops: usize, warmup: usize, n: usize) -> anyhow::Result<Vec<Duration>> {
    use std::io::{Read, Write};
    let mut children = Vec::new();
    let mut first_stdin = None;
    let mut last_stdout: Option<std::process::ChildStdout> = None;
    for _ in 0..hops {
        let stdin = match last_stdout.take() {
            Some(previous) => Stdio::from(previous),
            None => Stdio::piped(),
        };
        let mut child = std::process::Command::new("cat")
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot run `cat` for the raw pipe floor")?;
        first_stdin = first_stdin.or(child.stdin.take());
        last_stdout = child.stdout.take();
        children.push(child);
    }
    let (Some(mut to_ring), Some(mut from_ring)) = (first_stdin, last_stdout) else {
        bail!("the cat ring has no pipes");
    };
    let mut echoed = vec![0; RAW_LINE.len()];
    let mut samples = Vec::with_capacity(n);
    for i in 0..warmup + n {
        let start = Instant::now();
        to_ring.write_all(RAW_LINE)?;
        from_ring.read_exact(&mut echoed)?;
        if i >= warmup {
            samples.push(start.elapsed());
        }
    }
    drop(to_ring);
    for mut child in children {
        child.wait()?;
    }
    Ok(samples)
}

/// The floor: what any forwarder process costs on this machine before doing any work. Where
/// the scheduler puts the processes matters (a wake-up on the same CPU is far cheaper than one
/// across CPUs), so each ring is set up `blocks` times afresh and the spread is shown.
async fn floor_benchmark(plan: &Plan) -> anyhow::Result<f64> {
    let (warmup, per_run, runs) = (plan.warmup, plan.calls / plan.blocks, plan.blocks);
    let rings = tokio::task::spawn_blocking(move || {
        let mut rings = Vec::new();
        for hops in [1, 3] {
            let (mut all, mut medians) = (Vec::new(), Vec::new());
            for _ in 0..runs {
                let samples = Stats::new(raw_round_trips(hops, warmup, per_run)?);
                medians.push(samples.pct(50.0));
                all.extend(samples.0);
            }
            medians.sort_unstable();
            rings.push((Stats::new(all), medians));
        }
        anyhow::Ok(rings)
    })
    .await??;
    println!(
        "\n## 0. Floor: raw {}-byte line round trips through pipes (`cat`), no MCP: \
         {runs} fresh rings × {per_run} round trips\n",
        RAW_LINE.len()
    );
    println!("| path | p50 µs | p99 µs | p50 of each ring µs |");
    println!("|---|---:|---:|---|");
    let labels = [
        "client → cat → client (2 processes: wake-ups as in a direct call)",
        "client → cat → cat → cat → client (4 wake-ups, as with a forwarder in the middle)",
    ];
    for (label, (stats, medians)) in labels.iter().zip(&rings) {
        let each: Vec<String> = medians.iter().map(|m| format!("{:.0}", us(*m))).collect();
        println!(
            "| {label} | {:.1} | {:.1} | {} |",
            us(stats.pct(50.0)),
            us(stats.pct(99.0)),
            each.join(", ")
        );
    }
    let added = us(rings[1].0.pct(50.0)) - us(rings[0].0.pct(50.0));
    println!(
        "\nA forwarder that does no work at all would add about {added:.0} µs to the p50 here \
         (a same-CPU wake-up costs a few µs, a cross-CPU one tens of µs on this VM)."
    );
    Ok(added)
}

async fn call_benchmarks(env: &Env, plan: &Plan, floor: f64) -> anyhow::Result<()> {
    let one = env.echo_servers("one.toml", 1, &[])?;
    // The same gateway with the stdio fast path switched off: every message through rmcp's
    // typed path, as before the fast path existed.
    let typed = env.config(
        "typed.toml",
        &std::fs::read_to_string(&one)?.replacen(
            "[gateway]\n",
            "[gateway]\nfast_path = false\n",
            1,
        ),
    )?;
    let paths = [
        Route::direct(env).await?,
        Route::through(
            "client → toolgate (stdio) → echo_server",
            gateway_stdio(env, &one, "gateway-stdio").await?,
        )?,
        Route::through(
            "client → toolgate (HTTP) → echo_server",
            gateway_http(env, &one).await?,
        )?,
        Route::through(
            "client → toolgate (stdio, `fast_path = false`) → echo_server",
            gateway_stdio(env, &typed, "gateway-typed").await?,
        )?,
        Route::through(
            "client → toolgate (HTTP, `fast_path = false`) → echo_server",
            gateway_http(env, &typed).await?,
        )?,
    ];

    // Latency: warm up each path, then interleave blocks so that drift in background load
    // hits every path alike.
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(plan.calls); paths.len()];
    let mut cpu = vec![(Duration::ZERO, Duration::ZERO); paths.len()];
    for path in &paths {
        let peer = path.session.peer();
        check_echo(&peer, &path.params).await?;
        let mut discard = Vec::new();
        sequential(&peer, &path.params, plan.warmup, &mut discard).await?;
    }
    let block = plan.calls / plan.blocks;
    for _ in 0..plan.blocks {
        for ((path, samples), cpu) in paths.iter().zip(samples.iter_mut()).zip(cpu.iter_mut()) {
            let peer = path.session.peer();
            path.cpu
                .measure(cpu, sequential(&peer, &path.params, block, samples))
                .await?;
        }
    }
    let calls = block * plan.blocks;
    let stats: Vec<Stats> = samples.into_iter().map(Stats::new).collect();
    let direct_p50 = stats[0].pct(50.0);
    let direct_p99 = stats[0].pct(99.0);
    println!(
        "\n## 1. `tools/call` latency: `echo`, 12-byte text, {calls} sequential calls per path \
         (after {} warm-up), in {} interleaved blocks\n",
        plan.warmup, plan.blocks
    );
    println!(
        "| path | p50 µs | p90 µs | p99 µs | mean µs | added p50 µs | added p99 µs \
         | toolgate CPU µs/call | echo_server CPU µs/call |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (i, ((path, s), cpu)) in paths.iter().zip(&stats).zip(&cpu).enumerate() {
        let (p50, p99) = (s.pct(50.0), s.pct(99.0));
        let (added50, added99) = if i == 0 {
            ("–".to_owned(), "–".to_owned())
        } else {
            (
                format!("{:+.0}", us(p50) - us(direct_p50)),
                format!("{:+.0}", us(p99) - us(direct_p99)),
            )
        };
        let (gw_cpu, up_cpu) = cpu_cells(*cpu, calls, i > 0);
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {added50} | {added99} | {gw_cpu} | {up_cpu} |",
            path.label,
            us(p50),
            us(s.pct(90.0)),
            us(p99),
            us(s.mean()),
        );
    }
    let added_stdio = us(stats[1].pct(50.0)) - us(direct_p50);

    // Throughput: the same interleaving, CALLERS tasks per path.
    let warm = (plan.concurrent_calls / 10).max(CALLERS);
    for path in &paths {
        concurrent(&path.session.peer(), &path.params, warm).await?;
    }
    let per_block = plan.concurrent_calls / plan.blocks;
    let mut elapsed = vec![Duration::ZERO; paths.len()];
    let mut cpu = vec![(Duration::ZERO, Duration::ZERO); paths.len()];
    for _ in 0..plan.blocks {
        for ((path, total), cpu) in paths.iter().zip(elapsed.iter_mut()).zip(cpu.iter_mut()) {
            let peer = path.session.peer();
            *total += path
                .cpu
                .measure(cpu, concurrent(&peer, &path.params, per_block))
                .await?;
        }
    }
    let calls = per_block * plan.blocks;
    let rates: Vec<f64> = elapsed
        .iter()
        .map(|e| calls as f64 / e.as_secs_f64())
        .collect();
    println!(
        "\n## 2. Throughput: {CALLERS} concurrent callers sharing one client, {calls} calls per path\n"
    );
    println!("| path | calls/s | × direct | toolgate CPU µs/call | echo_server CPU µs/call |");
    println!("|---|---:|---:|---:|---:|");
    for (i, ((path, rate), cpu)) in paths.iter().zip(&rates).zip(&cpu).enumerate() {
        let (gw_cpu, up_cpu) = cpu_cells(*cpu, calls, i > 0);
        println!(
            "| {} | {rate:.0} | {:.2} | {gw_cpu} | {up_cpu} |",
            path.label,
            rate / rates[0]
        );
    }
    let ratio_stdio = rates[1] / rates[0];
    let ratio_http = rates[2] / rates[0];
    let cpu_per_call = |i: usize| us(cpu[i].0) / calls as f64;
    let added_http = us(stats[2].pct(50.0)) - us(direct_p50);

    println!("\n## Goals (issue 10)\n");
    println!(
        "- stdio, added p50: {added_stdio:.0} µs; goal ≤ the pipe floor of section 0 ({floor:.0} µs) + 20 µs = {:.0} µs: {}",
        floor + 20.0,
        verdict(added_stdio <= floor + 20.0)
    );
    println!(
        "- of which toolgate's own share (added − floor) is about {:.0} µs",
        added_stdio - floor
    );
    println!(
        "- stdio throughput with {CALLERS} callers: {ratio_stdio:.2}× direct (goal ≥ 0.8): {}",
        verdict(ratio_stdio >= 0.8)
    );
    println!(
        "- toolgate CPU per forwarded call with {CALLERS} in flight (stdio): {:.1} µs (goal ≤ 10 µs): {}",
        cpu_per_call(1),
        verdict(cpu_per_call(1) <= 10.0)
    );
    println!(
        "- HTTP: throughput {ratio_http:.2}× direct stdio (goal ≥ 0.5): {}; CPU {:.1} µs/call (goal ≤ 40): {}; added p50 {added_http:.0} µs (goal ≤ 150): {}",
        verdict(ratio_http >= 0.5),
        cpu_per_call(2),
        verdict(cpu_per_call(2) <= 40.0),
        verdict(added_http <= 150.0)
    );
    println!(
        "- the typed path (`fast_path = false`) in the same run: added p50 {:.0} µs, {:.2}× direct throughput, {:.1} µs CPU/call",
        us(stats[3].pct(50.0)) - us(direct_p50),
        rates[3] / rates[0],
        cpu_per_call(3)
    );
    println!(
        "- HTTP's typed path (`fast_path = false`) in the same run: added p50 {:.0} µs, {:.2}× direct throughput, {:.1} µs CPU/call",
        us(stats[4].pct(50.0)) - us(direct_p50),
        rates[4] / rates[0],
        cpu_per_call(4)
    );

    for path in paths {
        path.session.close().await;
    }
    Ok(())
}

/// `--soak SECS`: calls through toolgate (stdio, or HTTP with `--http`) from `CALLERS` tasks for SECS seconds, after
/// printing the pids to stderr and waiting two seconds, so a profiler can attach:
/// `perf record -g -p PID`.
async fn soak(env: &Env, seconds: u64, callers: usize, http: bool) -> anyhow::Result<()> {
    let one = env.echo_servers("one.toml", 1, &[])?;
    let session = if http {
        gateway_http(env, &one).await?
    } else {
        gateway_stdio(env, &one, "soak").await?
    };
    let route = Route::through("soak", session)?;
    eprintln!(
        "toolgate pid {} upstream pid {}",
        route.session.pid, route.cpu.upstream
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let done = Arc::new(AtomicUsize::new(0));
    let mut cpu = (Duration::ZERO, Duration::ZERO);
    let start = Instant::now();
    let work = async {
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..callers {
            let (peer, params, done) = (route.session.peer(), route.params.clone(), done.clone());
            tasks.spawn(async move {
                while Instant::now() < deadline {
                    call(&peer, &params).await?;
                    done.fetch_add(1, Ordering::Relaxed);
                }
                anyhow::Ok(())
            });
        }
        while let Some(joined) = tasks.join_next().await {
            joined??;
        }
        anyhow::Ok(())
    };
    route.cpu.measure(&mut cpu, work).await?;
    let calls = done.load(Ordering::Relaxed);
    let (gw_cpu, up_cpu) = cpu_cells(cpu, calls, true);
    println!(
        "soak: {calls} calls from {callers} callers in {:.1} s = {:.0} calls/s; \
         toolgate {gw_cpu} µs CPU/call, echo_server {up_cpu} µs CPU/call",
        start.elapsed().as_secs_f64(),
        calls as f64 / start.elapsed().as_secs_f64()
    );
    route.session.close().await;
    Ok(())
}

async fn list_benchmarks(env: &Env, plan: &Plan) -> anyhow::Result<()> {
    let extra = LIST_TOOLS - ECHO_BUILTIN_TOOLS;
    let config = env.echo_servers("list.toml", 1, &[("ECHO_EXTRA_TOOLS", extra.to_string())])?;
    let sessions = [
        (
            "direct: client → echo_server (stdio)",
            direct(env, extra, "list-direct").await?,
        ),
        (
            "client → toolgate (stdio) → echo_server",
            gateway_stdio(env, &config, "list-gateway").await?,
        ),
        (
            "client → toolgate (HTTP) → echo_server",
            gateway_http(env, &config).await?,
        ),
    ];
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); sessions.len()];
    for (_, session) in &sessions {
        lists(&session.peer(), plan.list_warmup, LIST_TOOLS).await?;
    }
    let block = (plan.lists / plan.blocks).max(1);
    for _ in 0..plan.blocks {
        for ((_, session), samples) in sessions.iter().zip(samples.iter_mut()) {
            samples.extend(lists(&session.peer(), block, LIST_TOOLS).await?);
        }
    }
    println!(
        "\n## 3. `tools/list` with {LIST_TOOLS} tools: {} lists per path (after {} warm-up)\n",
        block * plan.blocks,
        plan.list_warmup
    );
    println!("| path | p50 ms | p99 ms | mean ms | process RSS after MiB |");
    println!("|---|---:|---:|---:|---:|");
    for ((label, session), samples) in sessions.iter().zip(samples) {
        let s = Stats::new(samples);
        println!(
            "| {label} | {:.2} | {:.2} | {:.2} | {:.1} |",
            ms(s.pct(50.0)),
            ms(s.pct(99.0)),
            ms(s.mean()),
            mib(rss_kib(session.pid)?)
        );
    }
    for (_, session) in sessions {
        session.close().await;
    }
    Ok(())
}

/// Spawn to first successful `tools/list`, for `config` listing `tools` tools.
async fn startup_once(
    env: &Env,
    config: Option<&Path>,
    tools: usize,
    tag: &str,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let session = match config {
        Some(config) => gateway_stdio(env, config, tag).await?,
        None => direct(env, 0, tag).await?,
    };
    let listed = session.client.list_tools(None).await?;
    let elapsed = start.elapsed();
    if listed.tools.len() != tools {
        bail!(
            "{tag}: listed {} tools, expected {tools}",
            listed.tools.len()
        );
    }
    session.close().await;
    Ok(elapsed)
}

async fn startup_and_memory(env: &Env, plan: &Plan) -> anyhow::Result<()> {
    let many = env.echo_servers("many.toml", MANY_SERVERS, &[])?;
    let default_two = env.config(
        "default.toml",
        &format!(
            "[gateway]\nprefix = \"always\"\n\n{}{}",
            Env::server_toml("echo", &env.echo, &[]),
            Env::server_toml("other", &env.other, &[])
        ),
    )?;
    let (mut solo, mut gateway) = (Vec::new(), Vec::new());
    for run in 0..plan.startup_runs {
        solo.push(
            startup_once(
                env,
                None,
                ECHO_BUILTIN_TOOLS,
                &format!("start-direct-{run}"),
            )
            .await?,
        );
        gateway.push(
            startup_once(
                env,
                Some(&many),
                MANY_SERVERS * ECHO_BUILTIN_TOOLS,
                &format!("start-many-{run}"),
            )
            .await?,
        );
    }
    println!(
        "\n## 4. Startup: spawn → first successful `tools/list` answer (median of {} runs)\n",
        plan.startup_runs
    );
    println!("| what | median ms | min ms | max ms |");
    println!("|---|---:|---:|---:|");
    for (label, runs) in [
        ("one echo_server, direct (baseline)", solo),
        (
            "`toolgate serve` (stdio) with 10 echo_server upstreams",
            gateway,
        ),
    ] {
        let (min, max) = (
            runs.iter().min().copied().unwrap_or_default(),
            runs.iter().max().copied().unwrap_or_default(),
        );
        println!(
            "| {label} | {:.1} | {:.1} | {:.1} |",
            ms(median(runs)),
            ms(min),
            ms(max)
        );
    }

    println!(
        "\n## 5. Idle RSS (VmRSS), {:.1} s after the first `tools/list`\n",
        plan.settle.as_secs_f64()
    );
    println!("| process | VmRSS MiB |");
    println!("|---|---:|");
    let cases: [(&str, Option<&Path>, usize); 3] = [
        ("echo_server alone (reference)", None, ECHO_BUILTIN_TOOLS),
        (
            "toolgate, default 2 servers (echo_server + other_server)",
            Some(&default_two),
            0,
        ),
        (
            "toolgate, 10 echo_server upstreams",
            Some(&many),
            MANY_SERVERS * ECHO_BUILTIN_TOOLS,
        ),
    ];
    for (label, config, tools) in cases {
        let session = match config {
            Some(config) => gateway_stdio(env, config, "rss").await?,
            None => direct(env, 0, "rss").await?,
        };
        let listed = session.client.list_tools(None).await?;
        if tools > 0 && listed.tools.len() != tools {
            bail!(
                "{label}: listed {} tools, expected {tools}",
                listed.tools.len()
            );
        }
        tokio::time::sleep(plan.settle).await;
        println!("| {label} | {:.1} |", mib(rss_kib(session.pid)?));
        session.close().await;
    }
    Ok(())
}

const USAGE: &str = "usage: bench [--quick] [--client-workers N] [--soak SECS [--callers N] [--http]]\n\
    Run after `cargo build --release --bin toolgate --examples`, as\n\
    `cargo run --release --example bench [-- --quick]`.\n\
    --quick        a few iterations of everything (CI smoke run; noisy numbers)\n\
    --client-workers N  run the benchmark's client on N tokio workers (default 0: a\n\
    \x20              current-thread runtime, which leaves the 2 cores to the servers)\n\
    --soak SECS    only call through toolgate (stdio) for SECS seconds, for profiling;\n\
    \x20              prints the pids first (default 16 callers; --callers 1 = sequential;\n\
    \x20              --http: through `serve --http` instead)\n\
    BENCH_TOOLGATE=PATH runs that gateway binary (or wrapper script) instead of\n\
    \x20              target/<profile>/toolgate";

/// What the command line asked for.
struct Args {
    plan: Plan,
    quick: bool,
    client_workers: usize,
    soak_for: Option<u64>,
    callers: usize,
    /// `--soak` over streamable HTTP instead of stdio.
    http: bool,
}

/// `Ok(None)` when only the usage was asked for.
fn parse_args() -> anyhow::Result<Option<Args>> {
    let mut parsed = Args {
        plan: Plan::full(),
        quick: false,
        client_workers: 0,
        soak_for: None,
        callers: CALLERS,
        http: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = |what: &str| -> anyhow::Result<u64> {
            args.next()
                .and_then(|n| n.parse().ok())
                .with_context(|| format!("{what} needs a number\n{USAGE}"))
        };
        match arg.as_str() {
            "--quick" => {
                parsed.plan = Plan::quick();
                parsed.quick = true;
            }
            "--client-workers" => parsed.client_workers = number(&arg)? as usize,
            "--soak" => parsed.soak_for = Some(number(&arg)?),
            "--callers" => parsed.callers = number(&arg)?.max(1) as usize,
            "--http" => parsed.http = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(None);
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    Ok(Some(parsed))
}

fn main() -> anyhow::Result<()> {
    let Some(args) = parse_args()? else {
        return Ok(());
    };
    let runtime = match args.client_workers {
        0 => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
        n => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n)
            .enable_all()
            .build()?,
    };
    runtime.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let env = Env::locate()?;
    if let Some(seconds) = args.soak_for {
        return soak(&env, seconds, args.callers, args.http).await;
    }
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "# toolgate benchmark{}\n",
        if args.quick {
            " (--quick: smoke run, noisy)"
        } else {
            ""
        }
    );
    println!("- machine: {cores} cores, {}", cpu_model());
    println!("- toolgate: {}", env.toolgate.display());
    println!("- upstream: {}", env.echo.display());
    println!(
        "- client: rmcp on {}",
        match args.client_workers {
            0 => "a current-thread tokio runtime".to_owned(),
            n => format!("a {n}-worker tokio runtime"),
        }
    );
    if cfg!(debug_assertions) {
        println!("- WARNING: this is a debug build of the benchmark; use --release");
    }
    println!("- load average before: {}", load_average());
    let started = Instant::now();

    let floor = floor_benchmark(&args.plan).await?;
    call_benchmarks(&env, &args.plan, floor).await?;
    list_benchmarks(&env, &args.plan).await?;
    startup_and_memory(&env, &args.plan).await?;

    println!(
        "\n- load average after: {} ({:.0} s; the benchmark itself keeps about 2 threads busy)",
        load_average(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
