//! `run_code` end to end: an rmcp client → `toolgate serve` (stdio, code mode) → worker pool → echo_server.
//!
//! `cargo build --release --bin toolgate --examples && ./target/release/examples/bench_run_code`
//! (`--quick` for a smoke run). Unlike `bench_code` (the pool alone, in process), this pays
//! for everything a client sees: MCP framing both ways, the pipeline around `run_code` and
//! around each sub-call, the upstream round trip.

use std::{
    process::Stdio,
    time::{Duration, Instant},
};

use anyhow::Context;
use rmcp::{ServiceExt, model::CallToolRequestParams, transport::TokioChildProcess};
use serde_json::json;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let runs = if quick { 20 } else { 2000 };
    let dir = std::env::current_exe()?
        .parent()
        .context("examples directory")?
        .to_path_buf();
    // `BENCH_TOOLGATE`: another gateway binary or a wrapper script, as for `bench`.
    let toolgate = match std::env::var_os("BENCH_TOOLGATE") {
        Some(path) => path.into(),
        None => dir.parent().context("target directory")?.join("toolgate"),
    };
    let echo = dir.join("echo_server");
    let work = tempfile::tempdir()?;
    let config = work.path().join("servers.toml");
    std::fs::write(
        &config,
        format!(
            "[gateway]\nmode = \"code\"\n[gateway.code]\nworkers = 2\n[servers.echo]\ncommand = {:?}\n",
            echo.display().to_string()
        ),
    )?;
    let mut command = tokio::process::Command::new(&toolgate);
    command.arg("--config").arg(&config).arg("serve");
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .context("spawn toolgate")?;
    let client = ().serve(transport).await.context("handshake")?;

    let programs = [
        ("empty program", "return 1;".to_owned()),
        (
            "one tool call",
            "return await tools.echo__echo({text: 'hello world!'});".to_owned(),
        ),
        (
            "ten parallel read-only calls",
            "return (await Promise.all([...Array(10).keys()].map(i => tools.echo__echo({text: 'x' + i})))).length;"
                .to_owned(),
        ),
    ];
    println!("| program | runs | p50 | p99 |\n|---|---:|---:|---:|");
    for (what, code) in programs {
        let mut samples = Vec::with_capacity(runs);
        for i in 0..runs + runs / 10 {
            let mut params = CallToolRequestParams::new("run_code");
            params.arguments = json!({ "code": code }).as_object().cloned();
            let started = Instant::now();
            let result = client.call_tool(params).await?;
            let elapsed = started.elapsed();
            anyhow::ensure!(result.is_error != Some(true), "{what} failed: {result:?}");
            // The first tenth warms the pool and the caches up.
            if i >= runs / 10 {
                samples.push(elapsed);
            }
        }
        samples.sort();
        println!(
            "| {what} | {} | {:.2} ms | {:.2} ms |",
            samples.len(),
            percentile(&samples, 0.5).as_secs_f64() * 1e3,
            percentile(&samples, 0.99).as_secs_f64() * 1e3
        );
    }
    client.cancel().await?;
    Ok(())
}
