//! Sections 3 to 5: `tools/list` of 1,000 tools, startup with 10 upstreams, and idle memory.

use super::*;

pub(super) async fn list_benchmarks(env: &Env, plan: &Plan) -> anyhow::Result<()> {
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
            gateway_http(env, &config, Era::Session).await?,
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
pub(super) async fn startup_once(
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

pub(super) async fn startup_and_memory(env: &Env, plan: &Plan) -> anyhow::Result<()> {
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
