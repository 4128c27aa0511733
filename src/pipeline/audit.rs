//! `--audit-log FILE`: one JSON line per call, written by a thread of its own.

use std::{
    fs::OpenOptions,
    io::{BufWriter, Write},
    path::Path,
    sync::mpsc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use serde_json::json;

use super::ToolCall;

/// Appends audit records; the writer thread owns the file, so a slow disk never stalls a call.
pub struct AuditLog {
    lines: mpsc::Sender<String>,
    with_arguments: bool,
}

impl AuditLog {
    pub fn open(path: &Path, with_arguments: bool) -> std::io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let (lines, receiver) = mpsc::channel::<String>();
        std::thread::Builder::new()
            .name("toolgate-audit".into())
            .spawn(move || {
                let mut out = BufWriter::new(file);
                // Ends when every sender is gone (the pipeline dropped).
                while let Ok(line) = receiver.recv() {
                    let _ = writeln!(out, "{line}");
                    // Write what else is queued, then flush: the file is current when idle.
                    while let Ok(more) = receiver.try_recv() {
                        let _ = writeln!(out, "{more}");
                    }
                    let _ = out.flush();
                }
            })?;
        Ok(Self {
            lines,
            with_arguments,
        })
    }

    pub fn write(&self, call: &ToolCall, decision: &str, outcome: &str, elapsed: Duration) {
        let at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut record = json!({
            "ts_ms": at,
            "call_id": call.call_id,
            "profile": call.profile.as_str(),
            "tool": call.entry.exposed,
            "server": call.entry.server.to_string(),
            "upstream_tool": call.entry.upstream_name,
            "decision": decision,
            "outcome": outcome,
            "duration_us": elapsed.as_micros() as u64,
        });
        if self.with_arguments {
            record["arguments"] = serde_json::Value::Object(call.arguments.clone());
        }
        let _ = self.lines.send(record.to_string());
    }
}
