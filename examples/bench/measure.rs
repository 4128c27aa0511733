//! What the benchmark reads off its samples and processes: percentiles, CPU time per process, RSS, load.

use std::time::Duration;

use anyhow::Context;

/// Sorted samples, for percentiles.
pub(super) struct Stats(pub(super) Vec<Duration>);

impl Stats {
    pub(super) fn new(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        Self(samples)
    }

    /// Nearest-rank percentile.
    pub(super) fn pct(&self, p: f64) -> Duration {
        let rank = ((p / 100.0) * self.0.len() as f64).ceil() as usize;
        self.0[rank.clamp(1, self.0.len()) - 1]
    }

    pub(super) fn mean(&self) -> Duration {
        self.0.iter().sum::<Duration>() / self.0.len().max(1) as u32
    }
}

pub(super) fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

pub(super) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub(super) fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

/// `VmRSS` of `pid`, in KiB.
pub(super) fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    status_kib(pid, "VmRSS")
}

/// `VmHWM` of `pid` (its peak RSS so far), in KiB.
pub(super) fn peak_rss_kib(pid: u32) -> anyhow::Result<u64> {
    status_kib(pid, "VmHWM")
}

fn status_kib(pid: u32, key: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| format!("no {key} in /proc/PID/status"))
}

pub(super) fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

pub(super) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

pub(super) fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("model name"))
                .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

pub(super) fn verdict(ok: bool) -> &'static str {
    if ok {
        "meets the goal"
    } else {
        "MISSES the goal"
    }
}

/// The processes that serve a route, for CPU time per call.
pub(super) struct CpuWatch {
    pub(super) gateway: Option<u32>,
    pub(super) upstream: u32,
}

impl CpuWatch {
    /// (gateway, upstream) CPU time so far.
    pub(super) fn now(&self) -> (Duration, Duration) {
        (
            self.gateway.map(cpu_time).unwrap_or_default(),
            cpu_time(self.upstream),
        )
    }

    /// Runs `work`, adding the CPU time it cost each process to `total`.
    pub(super) async fn measure<T>(
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
pub(super) fn cpu_time(pid: u32) -> Duration {
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
pub(super) fn children(pid: u32) -> Vec<u32> {
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
pub(super) fn cpu_cells(
    cpu: (Duration, Duration),
    calls: usize,
    through: bool,
) -> (String, String) {
    let per = |d: Duration| format!("{:.1}", us(d) / calls as f64);
    (if through { per(cpu.0) } else { "–".into() }, per(cpu.1))
}

/// Calls per second of each path that made `calls` calls in `elapsed`.
pub(super) fn rates(elapsed: &[Duration], calls: usize) -> Vec<f64> {
    elapsed
        .iter()
        .map(|e| calls as f64 / e.as_secs_f64())
        .collect()
}
