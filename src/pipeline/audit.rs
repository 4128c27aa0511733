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

/// How long the gateway waits, on its way out, for the audit lines still queued.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// What the writer thread is asked to do.
enum Message {
    Line(String),
    /// Write everything queued before this, then say so.
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// Appends audit records; the writer thread owns the file, so a slow disk never stalls a call.
pub struct AuditLog {
    lines: mpsc::Sender<Message>,
    with_arguments: bool,
}

impl AuditLog {
    pub fn open(path: &Path, with_arguments: bool) -> std::io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let (lines, receiver) = mpsc::channel::<Message>();
        std::thread::Builder::new()
            .name("toolgate-audit".into())
            .spawn(move || {
                let mut out = BufWriter::new(file);
                let mut flushed = Vec::new();
                // Ends when every sender is gone (the pipeline dropped).
                while let Ok(message) = receiver.recv() {
                    // Write what else is queued, then flush: the file is current when idle.
                    for message in std::iter::once(message).chain(receiver.try_iter()) {
                        match message {
                            Message::Line(line) => {
                                let _ = writeln!(out, "{line}");
                            }
                            Message::Flush(done) => flushed.push(done),
                        }
                    }
                    let _ = out.flush();
                    for done in flushed.drain(..) {
                        let _ = done.send(());
                    }
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
        // Who, when an IdP token said so (HTTP with `[gateway.auth]`); never the token.
        if let Some(subject) = call.client.as_ref().and_then(|c| c.subject.as_deref()) {
            record["subject"] = subject.into();
        }
        if self.with_arguments {
            record["arguments"] = serde_json::Value::Object(call.arguments.clone());
        }
        let _ = self.lines.send(Message::Line(record.to_string()));
    }

    /// Returns once every line written before is in the file, or after [`FLUSH_WAIT`]: the
    /// writer thread does not outlive the process, so the gateway waits for it on its way out.
    pub async fn flush(&self) {
        let (done, flushed) = tokio::sync::oneshot::channel();
        if self.lines.send(Message::Flush(done)).is_ok()
            && tokio::time::timeout(FLUSH_WAIT, flushed).await.is_err()
        {
            tracing::warn!("the audit log was not written within {FLUSH_WAIT:?}");
        }
    }
}
