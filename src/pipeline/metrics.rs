//! Per-tool call metrics, rendered as Prometheus text at `GET /metrics`.

use std::{
    collections::BTreeMap,
    fmt::Write,
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

/// Upper bounds of the latency histogram, in seconds.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0,
];

#[derive(Default)]
struct ToolStats {
    calls: u64,
    errors: BTreeMap<&'static str, u64>,
    /// Cumulative counts per bucket of [`BUCKETS`].
    buckets: [u64; BUCKETS.len()],
    seconds: f64,
}

/// Counts by tool; a short lock per call.
#[derive(Default)]
pub struct Metrics {
    by_tool: Mutex<BTreeMap<String, ToolStats>>,
    /// `tools/call` requests answered by a fast path: stdio's ([`crate::downstream::fast`])
    /// or HTTP's ([`crate::downstream::http::fast`], [`crate::downstream::http::modern`]).
    fast_path_calls: AtomicU64,
    /// Calls forwarded to a stdio upstream over the raw path ([`crate::upstream::raw`]).
    raw_upstream_calls: AtomicU64,
}

impl Metrics {
    pub fn count_fast_path_call(&self) {
        self.fast_path_calls.fetch_add(1, Ordering::Relaxed);
    }

    pub fn count_raw_upstream_call(&self) {
        self.raw_upstream_calls.fetch_add(1, Ordering::Relaxed);
    }

    pub fn record(&self, tool: &str, error: Option<&'static str>, elapsed: Duration) {
        let Ok(mut by_tool) = self.by_tool.lock() else {
            return;
        };
        let stats = match by_tool.get_mut(tool) {
            Some(stats) => stats,
            None => by_tool.entry(tool.to_owned()).or_default(),
        };
        stats.calls += 1;
        if let Some(code) = error {
            *stats.errors.entry(code).or_default() += 1;
        }
        let seconds = elapsed.as_secs_f64();
        stats.seconds += seconds;
        for (count, bound) in stats.buckets.iter_mut().zip(BUCKETS) {
            if seconds <= bound {
                *count += 1;
            }
        }
    }

    /// Prometheus text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let Ok(by_tool) = self.by_tool.lock() else {
            return out;
        };
        let _ = writeln!(
            out,
            "# HELP toolgate_calls_total Tool calls handled, by exposed tool name."
        );
        let _ = writeln!(out, "# TYPE toolgate_calls_total counter");
        for (tool, stats) in by_tool.iter() {
            let _ = writeln!(
                out,
                "toolgate_calls_total{{tool=\"{}\"}} {}",
                escape(tool),
                stats.calls
            );
        }
        let _ = writeln!(
            out,
            "# HELP toolgate_call_errors_total Failed tool calls, by tool and error code."
        );
        let _ = writeln!(out, "# TYPE toolgate_call_errors_total counter");
        for (tool, stats) in by_tool.iter() {
            for (code, count) in &stats.errors {
                let _ = writeln!(
                    out,
                    "toolgate_call_errors_total{{tool=\"{}\",code=\"{code}\"}} {count}",
                    escape(tool)
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP toolgate_call_duration_seconds Time from request to answer."
        );
        let _ = writeln!(out, "# TYPE toolgate_call_duration_seconds histogram");
        for (tool, stats) in by_tool.iter() {
            let tool = escape(tool);
            for (count, bound) in stats.buckets.iter().zip(BUCKETS) {
                let _ = writeln!(
                    out,
                    "toolgate_call_duration_seconds_bucket{{tool=\"{tool}\",le=\"{bound}\"}} {count}"
                );
            }
            let _ = writeln!(
                out,
                "toolgate_call_duration_seconds_bucket{{tool=\"{tool}\",le=\"+Inf\"}} {}",
                stats.calls
            );
            let _ = writeln!(
                out,
                "toolgate_call_duration_seconds_sum{{tool=\"{tool}\"}} {}",
                stats.seconds
            );
            let _ = writeln!(
                out,
                "toolgate_call_duration_seconds_count{{tool=\"{tool}\"}} {}",
                stats.calls
            );
        }
        let _ = writeln!(
            out,
            "# HELP toolgate_fast_path_calls_total tools/call requests answered by a fast path, over stdio or HTTP (not by rmcp's typed service).\n# TYPE toolgate_fast_path_calls_total counter\ntoolgate_fast_path_calls_total {}",
            self.fast_path_calls.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP toolgate_raw_upstream_calls_total Calls forwarded to a stdio upstream as raw JSON lines.\n# TYPE toolgate_raw_upstream_calls_total counter\ntoolgate_raw_upstream_calls_total {}",
            self.raw_upstream_calls.load(Ordering::Relaxed)
        );
        out
    }
}

fn escape(label: &str) -> String {
    label
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
