//! Sections 1 and 2: `tools/call` latency (sequential, interleaved blocks) and throughput (16 callers), and the goals they decide.

use super::*;

pub(super) async fn call_benchmarks(env: &Env, plan: &Plan, floor: f64) -> anyhow::Result<()> {
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
            gateway_http(env, &one, Era::Session).await?,
        )?,
        Route::through(
            "client → toolgate (stdio, `fast_path = false`) → echo_server",
            gateway_stdio(env, &typed, "gateway-typed").await?,
        )?,
        Route::through(
            "client → toolgate (HTTP, `fast_path = false`) → echo_server",
            gateway_http(env, &typed, Era::Session).await?,
        )?,
        // What any process in the middle costs: relays that move the bytes and read none.
        Route::forwarder(env, false).await?,
        Route::forwarder(env, true).await?,
        // What HTTP costs without a gateway: echo_server on rmcp's HTTP server.
        Route::direct_http(env, Era::Session).await?,
        // Over stdio as Node's clients spawn toolgate: a socket pair for each of stdin and
        // stdout, not pipes.
        Route::through(
            "client → toolgate (stdio, socket pairs as Node spawns it) → echo_server",
            gateway_sockets(env, &one, "gateway-sockets").await?,
        )?,
        // A 2026-07-28 client over HTTP: no session, every request on its own (rmcp's
        // per-request path in both servers; toolgate's fast path serves sessions only).
        Route::through(
            "client → toolgate (HTTP 2026-07-28) → echo_server",
            gateway_http(env, &one, Era::Modern).await?,
        )?,
        Route::direct_http(env, Era::Modern).await?,
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
         | toolgate (or forwarder) CPU µs/call | echo_server CPU µs/call |"
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
        let (gw_cpu, up_cpu) = cpu_cells(*cpu, calls, path.cpu.gateway.is_some());
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
    // This process's own CPU (the client), for what the three processes cost together.
    let mut client_cpu = vec![Duration::ZERO; paths.len()];
    for _ in 0..plan.blocks {
        for (((path, total), cpu), client) in paths
            .iter()
            .zip(elapsed.iter_mut())
            .zip(cpu.iter_mut())
            .zip(client_cpu.iter_mut())
        {
            let peer = path.session.peer();
            let before = cpu_time(std::process::id());
            *total += path
                .cpu
                .measure(cpu, concurrent(&peer, &path.params, per_block))
                .await?;
            *client += cpu_time(std::process::id()).saturating_sub(before);
        }
    }
    let calls = per_block * plan.blocks;
    let rates = rates(&elapsed, calls);
    println!(
        "\n## 2. Throughput: {CALLERS} concurrent callers sharing one client, {calls} calls per path\n"
    );
    println!(
        "| path | calls/s | × direct | toolgate (or forwarder) CPU µs/call | echo_server CPU µs/call | client CPU µs/call |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (i, ((path, rate), cpu)) in paths.iter().zip(&rates).zip(&cpu).enumerate() {
        let (gw_cpu, up_cpu) = cpu_cells(*cpu, calls, path.cpu.gateway.is_some());
        println!(
            "| {} | {rate:.0} | {:.2} | {gw_cpu} | {up_cpu} | {:.1} |",
            path.label,
            rate / rates[0],
            us(client_cpu[i]) / calls as f64
        );
    }
    // What the machine's cores allow at most, given what each process spent per call.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let spent = |i: usize| (us(cpu[i].0) + us(cpu[i].1) + us(client_cpu[i])) / calls as f64;
    let cpu_bound = |i: usize| cores as f64 * 1e6 / spent(i) / rates[0];
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
        "- of which toolgate's own share (added − floor) is about {:.0} µs (against a real \
         forwarder: see the last lines)",
        added_stdio - floor
    );
    println!(
        "- stdio throughput with {CALLERS} callers: {ratio_stdio:.2}× direct (goal ≥ 0.8): {}",
        verdict(ratio_stdio >= 0.8)
    );
    println!(
        "- the three processes spent {:.1} µs of CPU per call through toolgate (stdio), {:.1} direct: {cores} cores allow at most {:.2}× direct ({:.2}× over HTTP, {:.1} µs)",
        spent(1),
        spent(0),
        cpu_bound(1),
        cpu_bound(2),
        spent(2)
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
    // The same goals measured against a relay that reads nothing, instead of against direct.
    for (i, how) in [(5, "1 thread, epoll"), (6, "`--threads`, blocking")] {
        println!(
            "- a forwarder that reads nothing ({how}) in the same run: added p50 {:.0} µs \
             (toolgate {:+.0} µs over it), {:.2}× direct throughput (toolgate {:.2}× of it), \
             {:.1} µs CPU/call (toolgate {:+.1} µs over it)",
            us(stats[i].pct(50.0)) - us(direct_p50),
            us(stats[1].pct(50.0)) - us(stats[i].pct(50.0)),
            rates[i] / rates[0],
            rates[1] / rates[i],
            cpu_per_call(i),
            cpu_per_call(1) - cpu_per_call(i)
        );
    }

    println!(
        "- direct HTTP (rmcp's client and server, no gateway) in the same run: added p50 {:.0} µs \
         over direct stdio, {:.2}× direct stdio throughput (toolgate over HTTP {:.2}× of it), \
         echo_server {:.1} µs and the client {:.1} µs CPU/call at {CALLERS} in flight",
        us(stats[7].pct(50.0)) - us(direct_p50),
        rates[7] / rates[0],
        rates[2] / rates[7],
        us(cpu[7].1) / calls as f64,
        us(client_cpu[7]) / calls as f64
    );
    println!(
        "- stdio over socket pairs (as Node's clients spawn toolgate) in the same run: added \
         p50 {:.0} µs, {:.2}× direct throughput, {:.1} µs CPU/call at {CALLERS} in flight",
        us(stats[8].pct(50.0)) - us(direct_p50),
        rates[8] / rates[0],
        cpu_per_call(8)
    );

    println!(
        "- a 2026-07-28 client over HTTP (no session) in the same run: through toolgate added \
         p50 {:.0} µs, {:.2}× direct stdio throughput, {:.1} µs CPU/call at {CALLERS} in \
         flight; direct to echo_server's rmcp HTTP server added p50 {:.0} µs, {:.2}× (toolgate \
         {:.2}× of it), echo_server {:.1} µs CPU/call; the client {:.1} and {:.1} µs CPU/call",
        us(stats[9].pct(50.0)) - us(direct_p50),
        rates[9] / rates[0],
        cpu_per_call(9),
        us(stats[10].pct(50.0)) - us(direct_p50),
        rates[10] / rates[0],
        rates[9] / rates[10],
        us(cpu[10].1) / calls as f64,
        us(client_cpu[9]) / calls as f64,
        us(client_cpu[10]) / calls as f64
    );

    for path in paths {
        path.session.close().await;
    }
    Ok(())
}
