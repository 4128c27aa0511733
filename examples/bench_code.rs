//! `bench_code`: what a `run_code` run costs on a warm worker pool, and what killing workers does to throughput.
//!
//! Build and run from one profile: `cargo build --release --bin toolgate --examples &&
//! cargo run --release --example bench_code` (`--quick` for a smoke run; `--exe PATH` for another worker binary;
//! `--recycle N` to replace workers after N runs instead of 200).
//! The pool runs the real `toolgate worker` processes (sandbox on); the host is in-process with one read-only
//! `echo` tool that answers at once, so the numbers are the pool + worker + engine cost only.

use std::{
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate::code_mode::pool::{
    BoxFuture, Limits, PoolConfig, RunHost, RunOutcome, RunRequest, ToolFailure, ToolInfo,
    WorkerPool,
};

struct Echo;

impl RunHost for Echo {
    fn call_tool(
        &self,
        _n: u64,
        _name: String,
        arguments: Value,
        _cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<Value, ToolFailure>> {
        Box::pin(async move { Ok(arguments) })
    }
    fn search(&self, _query: String, _limit: Option<usize>) -> Value {
        json!([])
    }
    fn describe(&self, _name: String) -> Option<String> {
        None
    }
}

const EMPTY: &str = "";
const ONE_CALL: &str = "return await tools.echo({text: 'hello world!'})";
const TEN_PARALLEL: &str =
    "return await Promise.all(Array.from({length: 10}, (_, i) => tools.echo({i})))";
const SPIN: &str = "while (true) {}";

fn request(code: &str, limits: &Limits) -> RunRequest {
    RunRequest {
        code: code.to_owned(),
        tools: vec![ToolInfo {
            name: "echo".to_owned(),
            read_only: true,
        }],
        limits: limits.clone(),
    }
}

async fn run(
    pool: &WorkerPool,
    host: &Arc<dyn RunHost>,
    code: &str,
    limits: &Limits,
) -> RunOutcome {
    pool.run(
        request(code, limits),
        host.clone(),
        CancellationToken::new(),
    )
    .await
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index.min(samples.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

async fn latency(
    pool: &WorkerPool,
    host: &Arc<dyn RunHost>,
    name: &str,
    code: &str,
    runs: usize,
) -> anyhow::Result<()> {
    let limits = Limits::default();
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let outcome = run(pool, host, code, &limits).await;
        samples.push(started.elapsed());
        if let Err(failure) = &outcome.result {
            anyhow::bail!("{name}: {}", failure.message);
        }
    }
    println!(
        "{name:<28} p50 {:>7.3} ms   p99 {:>7.3} ms   ({runs} runs)",
        ms(percentile(&mut samples, 0.5)),
        ms(percentile(&mut samples, 0.99))
    );
    Ok(())
}

/// Runs/s with `callers` concurrent callers for `duration`; every `spin_every`th run (if any) is an endless loop
/// killed at a 50 ms deadline. Returns (all runs/s, successful runs/s).
async fn throughput(
    pool: &Arc<WorkerPool>,
    host: &Arc<dyn RunHost>,
    callers: usize,
    duration: Duration,
    spin_every: Option<usize>,
) -> (f64, f64) {
    let started = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|caller| {
            let pool = pool.clone();
            let host = host.clone();
            tokio::spawn(async move {
                let limits = Limits::default();
                let spin_limits = Limits {
                    wall: Duration::from_millis(50),
                    loop_iterations: u64::MAX,
                    ..Limits::default()
                };
                let (mut total, mut ok) = (0usize, 0usize);
                let mut i = caller;
                while started.elapsed() < duration {
                    let spin = spin_every.is_some_and(|every| i % every == 0);
                    let outcome = if spin {
                        run(&pool, &host, SPIN, &spin_limits).await
                    } else {
                        run(&pool, &host, ONE_CALL, &limits).await
                    };
                    total += 1;
                    ok += usize::from(outcome.result.is_ok());
                    i += callers;
                }
                (total, ok)
            })
        })
        .collect();
    let (mut total, mut ok) = (0, 0);
    for task in tasks {
        if let Ok((t, o)) = task.await {
            total += t;
            ok += o;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    (total as f64 / seconds, ok as f64 / seconds)
}

/// Time from a worker being killed at its deadline to the pool having a ready replacement.
async fn respawn(
    pool: &WorkerPool,
    host: &Arc<dyn RunHost>,
    size: usize,
    rounds: usize,
) -> Vec<Duration> {
    let limits = Limits {
        wall: Duration::from_millis(20),
        loop_iterations: u64::MAX,
        ..Limits::default()
    };
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        while pool.stats().idle < size {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let _ = run(pool, host, SPIN, &limits).await;
        let killed = Instant::now();
        while pool.stats().idle < size {
            tokio::time::sleep(Duration::from_micros(100)).await;
        }
        samples.push(killed.elapsed());
    }
    samples
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let exe = match args.iter().position(|a| a == "--exe") {
        Some(i) => PathBuf::from(args.get(i + 1).context("--exe needs a path")?),
        None => std::env::current_exe()?
            .parent()
            .and_then(|examples| examples.parent())
            .context("no target directory")?
            .join("toolgate"),
    };
    anyhow::ensure!(
        exe.exists(),
        "{} is missing: build --bin toolgate first",
        exe.display()
    );
    let recycle_after_runs = match args.iter().position(|a| a == "--recycle") {
        Some(i) => args
            .get(i + 1)
            .context("--recycle needs a number")?
            .parse()?,
        None => 200,
    };
    let size = 4;
    let shutdown = CancellationToken::new();
    let pool = WorkerPool::new(
        PoolConfig {
            size,
            worker_exe: exe,
            recycle_after_runs,
        },
        shutdown.clone(),
    );
    let host: Arc<dyn RunHost> = Arc::new(Echo);
    let runs = if quick { 50 } else { 2000 };
    let seconds = Duration::from_secs(if quick { 1 } else { 5 });

    // Warm up: workers started, code paths and caches hot.
    latency(&pool, &host, "warm-up", ONE_CALL, runs / 4).await?;
    println!(
        "-- latency, one caller (pool of {size} warm workers; recycled every {recycle_after_runs} runs)"
    );
    latency(&pool, &host, "empty program", EMPTY, runs).await?;
    latency(&pool, &host, "one tool call", ONE_CALL, runs).await?;
    latency(
        &pool,
        &host,
        "ten parallel read-only calls",
        TEN_PARALLEL,
        runs,
    )
    .await?;

    println!("-- throughput, one tool call per run");
    for callers in [1, 4] {
        let (total, _) = throughput(&pool, &host, callers, seconds, None).await;
        println!("{callers} concurrent callers: {total:>8.0} runs/s");
    }
    let (total, ok) = throughput(&pool, &host, 4, seconds, Some(10)).await;
    println!(
        "4 callers, every 10th run an endless loop killed at 50 ms: {total:>6.0} runs/s ({ok:.0} successful runs/s)"
    );

    println!("-- respawn: deadline kill -> replacement ready");
    let mut samples = respawn(&pool, &host, size, if quick { 5 } else { 50 }).await;
    println!(
        "respawn p50 {:>7.3} ms   p99 {:>7.3} ms",
        ms(percentile(&mut samples, 0.5)),
        ms(percentile(&mut samples, 0.99))
    );
    println!("-- {:?}", pool.stats());
    shutdown.cancel();
    Ok(())
}
