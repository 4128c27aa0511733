//! `bench_pipeline`: what the hook pipeline costs per call, and whether 100 profiles over 5,000 tools slow anything.
//!
//! Build and run from one profile: `cargo build --release --bin toolgate --examples &&
//! cargo run --release --example bench_pipeline` (`--quick` for a smoke run).
//! Part 1 runs the library in-process against a real `echo_server` child: plain dispatch
//! (`Upstream::call`), the full pipeline with no hooks, with one HTTP pre hook (a real axum
//! server on loopback answering `allow`) and with one command hook (`policy_hook`). Blocks of
//! calls alternate between variants so machine drift hits them alike.
//! Part 2 runs the `toolgate` binary over stdio with an `echo_server` exporting 5,000 tools,
//! once with no profiles and once with 100 profiles (each denying one tool, so every view
//! holds 4,999), and compares `tools/list` and `tools/call` latency.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context;
use rmcp::{
    ClientCacheConfig, ServiceExt,
    model::{CallToolRequestParams, JsonObject},
    transport::TokioChildProcess,
};
use tokio_util::sync::CancellationToken;
use toolgate::{
    config::{self, ProfileName, ServerId, ServerName},
    gateway::Gateway,
    pipeline::Call,
    upstream::CallContext,
};

struct Sizes {
    calls: usize,
    block: usize,
    lists: usize,
    list_calls: usize,
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index.min(samples.len() - 1)]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn echo_args() -> JsonObject {
    let mut args = JsonObject::new();
    args.insert("text".into(), "hello world!".into());
    args
}

fn toml_path(path: &Path) -> String {
    format!("{:?}", path.display().to_string())
}

/// Measures one in-process variant: a gateway started from `toml`, called via the pipeline
/// or (when `plain`) straight through the upstream client.
struct Variant {
    label: &'static str,
    gateway: Arc<Gateway>,
    plain: bool,
    samples: Vec<Duration>,
}

impl Variant {
    async fn new(label: &'static str, toml: &str, plain: bool) -> anyhow::Result<Self> {
        let config = config::from_toml_str(toml, label)?;
        let gateway = Gateway::start(config).await?;
        Ok(Self {
            label,
            gateway,
            plain,
            samples: Vec::new(),
        })
    }

    async fn run(&mut self, calls: usize) -> anyhow::Result<()> {
        let profile = ProfileName::default_profile();
        let view = self.gateway.view(&profile).context("default view")?;
        let server = ServerId::global(ServerName::parse("echo").map_err(anyhow::Error::msg)?);
        let upstream = self
            .gateway
            .upstreams
            .get(&server)
            .context("echo upstream")?
            .clone();
        for _ in 0..calls {
            let started = Instant::now();
            let ok = if self.plain {
                let context = CallContext {
                    cancel: CancellationToken::new(),
                    progress: None,
                    session: None,
                    remote: None,
                    rounds: None,
                };
                upstream
                    .call("echo", Some(echo_args()), context)
                    .await
                    .is_ok()
            } else {
                let call = Call {
                    profile: profile.clone(),
                    name: "echo__echo".into(),
                    arguments: Some(echo_args()),
                    cancel: CancellationToken::new(),
                    progress: None,
                    client: None,
                    sub_call_id: None,
                    trace: Default::default(),
                };
                matches!(self.gateway.pipeline.execute(&view, call).await, Ok(r) if r.is_error != Some(true))
            };
            anyhow::ensure!(ok, "{}: a call failed", self.label);
            self.samples.push(started.elapsed());
        }
        Ok(())
    }
}

/// A loopback HTTP hook answering `allow` to everything.
async fn http_hook() -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(|| async { axum::Json(serde_json::json!({"decision": "allow"})) }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(format!("http://{addr}/hook"))
}

async fn pipeline_overhead(dir: &Path, sizes: &Sizes) -> anyhow::Result<()> {
    let echo = format!(
        "[servers.echo]\ncommand = {}\n",
        toml_path(&dir.join("echo_server"))
    );
    let hook_url = http_hook().await?;
    let mut variants = vec![
        Variant::new("plain dispatch (Upstream::call)", &echo, true).await?,
        Variant::new("pipeline, no hooks", &echo, false).await?,
        Variant::new(
            "pipeline, one HTTP pre hook",
            &format!("{echo}[[hooks]]\nstage = \"pre\"\nhttp = \"{hook_url}\"\n"),
            false,
        )
        .await?,
        Variant::new(
            "pipeline, one command pre hook",
            &format!(
                "{echo}[[hooks]]\nstage = \"pre\"\ncommand = [{}]\n",
                toml_path(&dir.join("policy_hook"))
            ),
            false,
        )
        .await?,
    ];
    // Warm up every variant, then alternate blocks.
    for variant in &mut variants {
        variant.run(200).await?;
        variant.samples.clear();
    }
    let mut done = 0;
    while done < sizes.calls {
        for variant in &mut variants {
            variant.run(sizes.block).await?;
        }
        done += sizes.block;
    }
    println!(
        "\n### Pipeline overhead, in process ({} sequential `echo` calls per variant)\n",
        sizes.calls
    );
    println!("| variant | p50 µs | p99 µs | p50 added over plain dispatch µs |");
    println!("|---|---|---|---|");
    let base = percentile(&mut variants[0].samples.clone(), 0.5);
    for variant in &mut variants {
        let p50 = percentile(&mut variant.samples, 0.5);
        let p99 = percentile(&mut variant.samples, 0.99);
        println!(
            "| {} | {:.1} | {:.1} | {:+.1} |",
            variant.label,
            us(p50),
            us(p99),
            us(p50) - us(base)
        );
    }
    for variant in &variants {
        variant.gateway.shutdown().await;
    }
    Ok(())
}

async fn profile_latency(
    dir: &Path,
    sizes: &Sizes,
    profiles: usize,
) -> anyhow::Result<(f64, f64, f64, usize)> {
    let work = tempfile::tempdir()?;
    let mut toml = format!(
        "[servers.echo]\ncommand = {}\nenv = {{ ECHO_EXTRA_TOOLS = \"4994\" }}\n",
        toml_path(&dir.join("echo_server"))
    );
    for i in 0..profiles {
        toml.push_str(&format!(
            "[profiles.p{i}]\ndeny = [\"echo__tool_{i:04}\"]\n"
        ));
    }
    let path = work.path().join("servers.toml");
    std::fs::write(&path, toml)?;
    let mut command = tokio::process::Command::new(dir.join("../toolgate"));
    command.arg("--config").arg(&path).arg("serve");
    if profiles > 0 {
        command.args(["--profile", &format!("p{}", profiles / 2)]);
    }
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()?;
    let client = ().serve(transport).await?;
    client
        .peer()
        .set_response_cache_config(ClientCacheConfig::disabled())
        .await;
    let mut lists = Vec::new();
    let mut listed = 0;
    for i in 0..sizes.lists + 5 {
        let started = Instant::now();
        listed = client.list_all_tools().await?.len();
        if i >= 5 {
            lists.push(started.elapsed());
        }
    }
    let mut calls = Vec::new();
    for i in 0..sizes.list_calls + 200 {
        let mut params = CallToolRequestParams::new("echo__echo");
        params.arguments = Some(echo_args());
        let started = Instant::now();
        client.call_tool(params).await?;
        if i >= 200 {
            calls.push(started.elapsed());
        }
    }
    client.cancel().await?;
    Ok((
        us(percentile(&mut lists, 0.5)),
        us(percentile(&mut calls, 0.5)),
        us(percentile(&mut calls, 0.99)),
        listed,
    ))
}

fn binaries_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .context("the example has a directory")?
        .to_owned();
    for needed in ["echo_server", "policy_hook", "../toolgate"] {
        anyhow::ensure!(
            dir.join(needed).exists(),
            "{} is missing: run `cargo build --release --bin toolgate --examples` first",
            dir.join(needed).display()
        );
    }
    Ok(dir)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let sizes = if quick {
        Sizes {
            calls: 200,
            block: 100,
            lists: 5,
            list_calls: 100,
        }
    } else {
        Sizes {
            calls: 10_000,
            block: 500,
            lists: 50,
            list_calls: 3_000,
        }
    };
    let dir = binaries_dir()?;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average before: {}", load.trim());
    pipeline_overhead(&dir, &sizes).await?;

    println!("\n### 5,000 upstream tools: one profile vs 100 profiles (toolgate over stdio)\n");
    println!("| setup | tools listed | tools/list p50 µs | call p50 µs | call p99 µs |");
    println!("|---|---|---|---|---|");
    let mut results = Vec::new();
    for profiles in [0, 100] {
        let (list, call_p50, call_p99, listed) = profile_latency(&dir, &sizes, profiles).await?;
        let label = if profiles == 0 {
            "default profile only".to_owned()
        } else {
            format!("{profiles} profiles (client on p{})", profiles / 2)
        };
        println!("| {label} | {listed} | {list:.0} | {call_p50:.1} | {call_p99:.1} |");
        results.push((list, call_p50));
    }
    println!(
        "\n100 profiles vs one: tools/list {:+.1}%, call p50 {:+.1}%",
        (results[1].0 / results[0].0 - 1.0) * 100.0,
        (results[1].1 / results[0].1 - 1.0) * 100.0
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average after: {}", load.trim());
    Ok(())
}
