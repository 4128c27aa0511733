//! Section 0: raw line round trips through `cat` pipes, the floor any forwarder process costs.

use super::*;

/// A `tools/call` line much like the one the benchmark's client sends.
pub(super) const RAW_LINE: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello world!"}}}
"#;

/// Round trips of `RAW_LINE` through a ring of `hops` chained `cat` processes, timed on a
/// plain blocking thread: the cost of waking processes through pipes, with no MCP at all.
pub(super) fn raw_round_trips(
    hops: usize,
    warmup: usize,
    n: usize,
) -> anyhow::Result<Vec<Duration>> {
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
pub(super) async fn floor_benchmark(plan: &Plan) -> anyhow::Result<f64> {
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
        "\nThe two extra wake-ups add about {added:.0} µs to the p50 here (a same-CPU wake-up \
         costs a few µs, a cross-CPU one tens of µs on this VM). This is the floor issue 10's \
         latency goal names; sections 1 and 2 also run a real forwarder that reads nothing \
         (`examples/forwarder.rs`) between the client and echo_server."
    );
    Ok(added)
}
