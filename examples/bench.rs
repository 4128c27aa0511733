//! `bench`: measures what toolgate adds to MCP calls (latency, throughput, `tools/list`, startup, memory).
//!
//! Build the release binaries first, then run the benchmark from the same profile:
//! `cargo build --release --bin toolgate --examples && cargo run --release --example bench`.
//! It spawns `target/release/examples/echo_server` (directly, over stdio and over its own
//! HTTP, behind `examples/forwarder.rs`, and as toolgate's upstream) and
//! `target/release/toolgate` with configurations written to a temporary directory, drives them
//! with an rmcp client over stdio and streamable HTTP (section 2b: with lean clients too,
//! `bench/lean.rs`), and prints Markdown tables on stdout.
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
    model::{CallToolRequestParams, JsonObject, ProtocolVersion},
    service::{ClientLifecycleMode, ClientServiceExt, Peer, RunningService},
    transport::{StreamableHttpClientTransport, TokioChildProcess},
};
use tokio::io::{AsyncBufReadExt, BufReader};

#[path = "bench/calls.rs"]
mod calls;
#[path = "bench/floor.rs"]
mod floor;
#[path = "bench/lean.rs"]
mod lean;
#[path = "bench/lists.rs"]
mod lists;
#[path = "bench/measure.rs"]
mod measure;

use calls::call_benchmarks;
use floor::floor_benchmark;
use lean::lean_benchmarks;
use lists::{list_benchmarks, startup_and_memory};
use measure::*;

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
    /// `examples/forwarder.rs`: a relay that does no work, in toolgate's place.
    forwarder: PathBuf,
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
            forwarder: examples.join("forwarder"),
            dir: tempfile::tempdir().context("cannot create a temporary directory")?,
        };
        for path in [&env.toolgate, &env.echo, &env.other, &env.forwarder] {
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
    /// The process, killed at the end, when the client's transport does not own it (over
    /// HTTP, and over socket pairs).
    child: Option<tokio::process::Child>,
}

impl Session {
    fn peer(&self) -> Peer<RoleClient> {
        self.client.peer().clone()
    }

    async fn close(self) {
        let _ = self.client.cancel().await;
        if let Some(mut child) = self.child {
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
    hello(transport, pid, None, log).await
}

/// Says hello over `transport` to the server `pid` (its stderr in `log`; `child` the process
/// when the transport does not own it).
async fn hello<T, E, A>(
    transport: T,
    pid: u32,
    child: Option<tokio::process::Child>,
    log: &Path,
) -> anyhow::Result<Session>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let client = ().serve(transport).await.with_context(|| {
        format!(
            "MCP handshake failed; its stderr: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        )
    })?;
    no_cache(&client).await;
    Ok(Session { client, pid, child })
}

/// Connects to `command` over a socket pair for each of its stdin and stdout, as Node's
/// `child_process` gives its children (so the TypeScript SDK's stdio client, and the desktop
/// clients and editors built on Node); its stderr goes to `log`.
async fn socket_session(
    mut command: tokio::process::Command,
    log: &Path,
) -> anyhow::Result<Session> {
    use std::os::{fd::OwnedFd, unix::net::UnixStream};
    let (to_child, child_in) = UnixStream::pair()?;
    let (from_child, child_out) = UnixStream::pair()?;
    command
        .env_remove("RUST_LOG")
        .stdin(OwnedFd::from(child_in))
        .stdout(OwnedFd::from(child_out))
        .stderr(std::fs::File::create(log)?)
        .kill_on_drop(true);
    let child = command.spawn().context("cannot spawn the server")?;
    // The child's ends leave this process with the command, so that the child's exit
    // reads as the end of its stdout here.
    drop(command);
    let pid = child.id().context("child has no pid")?;
    to_child.set_nonblocking(true)?;
    from_child.set_nonblocking(true)?;
    let transport = (
        tokio::net::UnixStream::from_std(from_child)?,
        tokio::net::UnixStream::from_std(to_child)?,
    );
    hello(transport, pid, Some(child), log).await
}

/// The echo server, directly.
async fn direct(env: &Env, extra_tools: usize, tag: &str) -> anyhow::Result<Session> {
    let mut command = tokio::process::Command::new(&env.echo);
    if extra_tools > 0 {
        command.env("ECHO_EXTRA_TOOLS", extra_tools.to_string());
    }
    stdio_session(command, &env.dir.path().join(format!("{tag}.log"))).await
}

/// The echo server behind `forwarder` (`--threads` with `threads`).
async fn forwarded(env: &Env, threads: bool, tag: &str) -> anyhow::Result<Session> {
    let mut command = tokio::process::Command::new(&env.forwarder);
    if threads {
        command.arg("--threads");
    }
    command.arg(&env.echo);
    stdio_session(command, &env.dir.path().join(format!("{tag}.log"))).await
}

/// `toolgate --config CONFIG serve` on stdio.
async fn gateway_stdio(env: &Env, config: &Path, tag: &str) -> anyhow::Result<Session> {
    let mut command = tokio::process::Command::new(&env.toolgate);
    command.arg("--config").arg(config).arg("serve");
    stdio_session(command, &env.dir.path().join(format!("{tag}.log"))).await
}

/// `toolgate --config CONFIG serve` on stdio, its stdin and stdout socket pairs as Node
/// spawns it.
async fn gateway_sockets(env: &Env, config: &Path, tag: &str) -> anyhow::Result<Session> {
    let mut command = tokio::process::Command::new(&env.toolgate);
    command.arg("--config").arg(config).arg("serve");
    socket_session(command, &env.dir.path().join(format!("{tag}.log"))).await
}

/// How an HTTP client speaks to its server.
#[derive(Clone, Copy)]
enum Era {
    /// `initialize`, then every request on the session it opened (MCP 2025-11-25 and before).
    Session,
    /// `server/discover`, then every request on its own, naming its version in `_meta` and
    /// the `MCP-Protocol-Version` header (MCP 2026-07-28: no session).
    Modern,
}

/// `toolgate --config CONFIG serve --http 127.0.0.1:0`, and a client of it.
async fn gateway_http(env: &Env, config: &Path, era: Era) -> anyhow::Result<Session> {
    http_session(gateway_command(env, config), "toolgate", era).await
}

/// `echo_server` serving streamable HTTP itself (rmcp's server), and a client of it.
async fn direct_http(env: &Env, era: Era) -> anyhow::Result<Session> {
    http_session(echo_http_command(env), "echo-server", era).await
}

/// `toolgate --config CONFIG serve --http 127.0.0.1:0`.
fn gateway_command(env: &Env, config: &Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(&env.toolgate);
    command
        .arg("--config")
        .arg(config)
        .args(["serve", "--http", "127.0.0.1:0"]);
    command
}

/// `echo_server` serving streamable HTTP itself.
fn echo_http_command(env: &Env) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(&env.echo);
    command.env("ECHO_HTTP_ADDR", "127.0.0.1:0");
    command
}

/// Spawns `command`, which prints `NAME: listening on URL` to stderr, and connects to URL.
async fn http_session(
    command: tokio::process::Command,
    name: &str,
    era: Era,
) -> anyhow::Result<Session> {
    let (child, pid, url) = spawn_listening(command, name).await?;
    // A pooled client, as Node's `fetch` and Python's `httpx` are by default: rmcp's default
    // opens a new TCP connection for every request (`pool_max_idle_per_host(0)`), whose
    // cost would then be measured instead of the gateway's. BENCH_HTTP_UNPOOLED=1 keeps it.
    let transport = if std::env::var_os("BENCH_HTTP_UNPOOLED").is_some() {
        StreamableHttpClientTransport::from_uri(url.as_str())
    } else {
        StreamableHttpClientTransport::with_client(
            reqwest::Client::new(),
            rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                url.as_str(),
            ),
        )
    };
    let client = match era {
        Era::Session => ().serve(transport).await,
        Era::Modern => {
            ().serve_with_lifecycle(
                transport,
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                },
            )
            .await
        }
    }
    .with_context(|| format!("MCP handshake with {name} over HTTP failed"))?;
    no_cache(&client).await;
    Ok(Session {
        client,
        pid,
        child: Some(child),
    })
}

/// Spawns `command`, which prints `NAME: listening on URL` to stderr; returns the process,
/// its pid and URL (its stderr drained from then on).
async fn spawn_listening(
    mut command: tokio::process::Command,
    name: &str,
) -> anyhow::Result<(tokio::process::Child, u32, String)> {
    let mut child = command
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot spawn {name} over HTTP"))?;
    let pid = child.id().with_context(|| format!("{name} has no pid"))?;
    let stderr = child.stderr.take().context("stderr is not piped")?;
    let mut lines = BufReader::new(stderr).lines();
    let url = tokio::time::timeout(Duration::from_secs(60), async {
        let mut seen = Vec::new();
        while let Some(line) = lines.next_line().await? {
            if let Some(url) = line
                .strip_prefix(name)
                .and_then(|rest| rest.strip_prefix(": listening on "))
            {
                return Ok(url.to_owned());
            }
            seen.push(line);
        }
        bail!("{name} exited before listening: {}", seen.join(" | "))
    })
    .await
    .with_context(|| format!("{name} did not listen within 60 s"))??;
    // Keep draining stderr so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok((child, pid, url))
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

    /// echo_server serving HTTP itself: rmcp's HTTP client and server, no gateway.
    async fn direct_http(env: &Env, era: Era) -> anyhow::Result<Self> {
        let session = direct_http(env, era).await?;
        Ok(Self {
            label: match era {
                Era::Session => "direct: client → echo_server (HTTP, rmcp's server)",
                Era::Modern => "direct: client → echo_server (HTTP 2026-07-28, rmcp's server)",
            },
            cpu: CpuWatch {
                gateway: None,
                upstream: session.pid,
            },
            session,
            params: echo_params("echo"),
        })
    }

    fn through(label: &'static str, session: Session) -> anyhow::Result<Self> {
        Self::relayed(label, session, "s0__echo")
    }

    /// Through `forwarder`, which leaves the tool's name as the server gave it.
    async fn forwarder(env: &Env, threads: bool) -> anyhow::Result<Self> {
        let (label, tag) = match threads {
            false => (
                "client → forwarder (1 thread, epoll) → echo_server",
                "forwarder",
            ),
            true => (
                "client → forwarder (`--threads`, blocking) → echo_server",
                "forwarder-threads",
            ),
        };
        Self::relayed(label, forwarded(env, threads, tag).await?, "echo")
    }

    fn relayed(label: &'static str, session: Session, tool: &str) -> anyhow::Result<Self> {
        let upstream = match children(session.pid)[..] {
            [upstream] => upstream,
            ref other => bail!("{label}: children {other:?}, expected one echo_server"),
        };
        Ok(Self {
            label,
            cpu: CpuWatch {
                gateway: Some(session.pid),
                upstream,
            },
            session,
            params: echo_params(tool),
        })
    }
}

/// `--soak SECS`: calls through toolgate (stdio, or HTTP with `--http`; or `forwarder` with `--forwarder`) from `CALLERS` tasks for SECS seconds, after
/// printing the pids to stderr and waiting two seconds, so a profiler can attach:
/// `perf record -g -p PID`.
async fn soak(env: &Env, seconds: u64, callers: usize, via: Via) -> anyhow::Result<()> {
    let one = env.echo_servers("one.toml", 1, &[])?;
    let route = match via {
        Via::Stdio => Route::through("soak", gateway_stdio(env, &one, "soak").await?)?,
        Via::Sockets => Route::through("soak", gateway_sockets(env, &one, "soak").await?)?,
        Via::Http(era) => Route::through("soak", gateway_http(env, &one, era).await?)?,
        Via::Forwarder => Route::forwarder(env, false).await?,
        Via::Direct => Route::direct(env).await?,
    };
    let middle = match via {
        Via::Forwarder => "forwarder",
        Via::Direct => "direct (no gateway)",
        Via::Stdio | Via::Sockets | Via::Http(_) => "toolgate",
    };
    eprintln!(
        "{middle} pid {} upstream pid {}",
        route.session.pid, route.cpu.upstream
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut cpu = (Duration::ZERO, Duration::ZERO);
    let start = Instant::now();
    // Each call's own time, so a soak also gives percentiles: the full run's sections take
    // a few thousand samples each, and a sequential soak's p50 over thousands to tens of
    // thousands of calls, builds alternating, is steadier for comparing two builds.
    let mut times = Vec::new();
    let work = async {
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..callers {
            let (peer, params) = (route.session.peer(), route.params.clone());
            tasks.spawn(async move {
                let mut times = Vec::with_capacity(1 << 16);
                while Instant::now() < deadline {
                    let began = Instant::now();
                    call(&peer, &params).await?;
                    times.push(began.elapsed());
                }
                anyhow::Ok(times)
            });
        }
        while let Some(joined) = tasks.join_next().await {
            times.extend(joined??);
        }
        anyhow::Ok(())
    };
    route.cpu.measure(&mut cpu, work).await?;
    let calls = times.len();
    anyhow::ensure!(calls > 0, "soak: no call finished in {seconds} s");
    let (gw_cpu, up_cpu) = cpu_cells(cpu, calls, route.cpu.gateway.is_some());
    let peak = peak_rss_kib(route.session.pid)?;
    let times = Stats::new(times);
    println!(
        "soak: {calls} calls from {callers} callers in {:.1} s = {:.0} calls/s; \
         {middle} {gw_cpu} µs CPU/call, echo_server {up_cpu} µs CPU/call; \
         {middle} peak RSS {:.1} MiB; call time p50 {:.1} p90 {:.1} p99 {:.1} mean {:.1} µs",
        start.elapsed().as_secs_f64(),
        calls as f64 / start.elapsed().as_secs_f64(),
        mib(peak),
        us(times.pct(50.0)),
        us(times.pct(90.0)),
        us(times.pct(99.0)),
        us(times.mean()),
    );
    route.session.close().await;
    Ok(())
}

const USAGE: &str = "usage: bench [--quick] [--memory] [--client-workers N] [--soak SECS [--callers N] [--sockets | --http | --http-modern | --forwarder | --direct]]\n\
    Run after `cargo build --release --bin toolgate --examples`, as\n\
    `cargo run --release --example bench [-- --quick]`.\n\
    --quick        a few iterations of everything (CI smoke run; noisy numbers)\n\
    --memory       only startup and idle RSS (sections 4 and 5; with --quick, fewer starts)\n\
    --client-workers N  run the benchmark's client on N tokio workers (default 0: a\n\
    \x20              current-thread runtime, which leaves the 2 cores to the servers)\n\
    --soak SECS    only call through toolgate (stdio) for SECS seconds, for profiling;\n\
    \x20              prints the pids first, then the rate, CPU and call-time percentiles\n\
    \x20              (default 16 callers; --callers 1 = sequential;\n\
    \x20              --sockets: its stdin and stdout socket pairs, as Node spawns it;\n\
    \x20              --http: through `serve --http` instead; --http-modern: the same,\n\
    \x20              its client speaking 2026-07-28 (no session); --forwarder: through\n\
    \x20              `examples/forwarder.rs`, which reads nothing; --direct: to\n\
    \x20              echo_server itself, no gateway)\n\
    BENCH_TOOLGATE=PATH runs that gateway binary (or wrapper script) instead of\n\
    \x20              target/<profile>/toolgate\n\
    BENCH_HTTP_UNPOOLED=1 rmcp's default HTTP client (a new TCP connection per\n\
    \x20              request) instead of a pooled one";

/// What `--soak` calls through.
#[derive(Clone, Copy)]
enum Via {
    /// `toolgate serve` on stdio.
    Stdio,
    /// `toolgate serve` on stdio, its stdin and stdout socket pairs (as Node spawns it).
    Sockets,
    /// `toolgate serve --http`, its client of that era.
    Http(Era),
    /// `examples/forwarder.rs` (1 thread, epoll).
    Forwarder,
    /// No gateway: the client talks to echo_server over stdio.
    Direct,
}

/// What the command line asked for.
struct Args {
    plan: Plan,
    quick: bool,
    client_workers: usize,
    soak_for: Option<u64>,
    callers: usize,
    /// What `--soak` calls through.
    via: Via,
    /// `--memory`: only startup and idle RSS (sections 4 and 5).
    memory_only: bool,
}

/// `Ok(None)` when only the usage was asked for.
fn parse_args() -> anyhow::Result<Option<Args>> {
    let mut parsed = Args {
        plan: Plan::full(),
        quick: false,
        client_workers: 0,
        soak_for: None,
        callers: CALLERS,
        via: Via::Stdio,
        memory_only: false,
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
            "--sockets" => parsed.via = Via::Sockets,
            "--http" => parsed.via = Via::Http(Era::Session),
            "--http-modern" => parsed.via = Via::Http(Era::Modern),
            "--forwarder" => parsed.via = Via::Forwarder,
            "--direct" => parsed.via = Via::Direct,
            "--memory" => parsed.memory_only = true,
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
        return soak(&env, seconds, args.callers, args.via).await;
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

    if args.memory_only {
        return startup_and_memory(&env, &args.plan).await;
    }
    let floor = floor_benchmark(&args.plan).await?;
    call_benchmarks(&env, &args.plan, floor).await?;
    lean_benchmarks(&env, &args.plan).await?;
    list_benchmarks(&env, &args.plan).await?;
    startup_and_memory(&env, &args.plan).await?;

    println!(
        "\n- load average after: {} ({:.0} s; the benchmark itself keeps about 2 threads busy)",
        load_average(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
