//! Call spans and W3C trace context: where a call's span hangs, and the `traceparent` it passes on.
//!
//! Every call runs in a `tools/call` span (target `toolgate::call`, level debug) carrying the
//! profile, tool, server, outcome code and duration; a `run_code` program's sub-calls are its
//! children. Hooks and upstream requests get child spans of their own (`toolgate::call::hook`,
//! `toolgate::call::upstream`) whose context is what goes out as `traceparent`.
//!
//! Export over OTLP/HTTP ([`export`]) is off unless configured. Off, the spans are disabled
//! callsites (no span is built) unless `RUST_LOG` asks for debug, and a client's
//! `traceparent` is forwarded unchanged to hooks and upstreams; nothing else is generated.

pub mod export;

use std::{
    fmt,
    sync::atomic::{AtomicBool, Ordering},
};

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Set once the OpenTelemetry layer is installed ([`export::init`]).
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Whether spans are exported (and so have OpenTelemetry ids of their own).
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// A W3C `traceparent` (version 00): `00-<trace id>-<parent span id>-<flags>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Traceparent {
    pub trace_id: u128,
    pub span_id: u64,
    pub flags: u8,
}

impl Traceparent {
    /// Parses the header's value as W3C Trace Context level 1 reads it: lowercase hex, ids
    /// not all zero, version `ff` invalid; a later version may carry more after the flags.
    /// Anything else is `None`: the call then starts a trace of its own.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        let bytes = text.as_bytes();
        if bytes.len() < 55 || (bytes.len() > 55 && (bytes[..2] == *b"00" || bytes[55] != b'-')) {
            return None;
        }
        let hex = |range: std::ops::Range<usize>| {
            let part = text.get(range)?;
            part.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                .then_some(part)
        };
        let version = hex(0..2)?;
        if version == "ff" || bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
            return None;
        }
        let trace_id = u128::from_str_radix(hex(3..35)?, 16).ok()?;
        let span_id = u64::from_str_radix(hex(36..52)?, 16).ok()?;
        let flags = u8::from_str_radix(hex(53..55)?, 16).ok()?;
        (trace_id != 0 && span_id != 0).then_some(Self {
            trace_id,
            span_id,
            flags,
        })
    }

    fn of(context: &SpanContext) -> Option<Self> {
        context.is_valid().then(|| Self {
            trace_id: u128::from_be_bytes(context.trace_id().to_bytes()),
            span_id: u64::from_be_bytes(context.span_id().to_bytes()),
            flags: context.trace_flags().to_u8(),
        })
    }

    fn context(self) -> opentelemetry::Context {
        opentelemetry::Context::new().with_remote_span_context(SpanContext::new(
            TraceId::from_bytes(self.trace_id.to_be_bytes()),
            SpanId::from_bytes(self.span_id.to_be_bytes()),
            TraceFlags::new(self.flags),
            true,
            TraceState::default(),
        ))
    }
}

impl fmt::Display for Traceparent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "00-{:032x}-{:016x}-{:02x}",
            self.trace_id, self.span_id, self.flags
        )
    }
}

/// Where a call sits in a trace, before its own span exists.
#[derive(Clone, Default)]
pub struct Trace {
    /// The span the call's span is a child of: a `run_code` call's, for its sub-calls.
    pub parent: Option<Span>,
    /// The client's `traceparent` (for a sub-call: its program's client's).
    pub remote: Option<Traceparent>,
}

impl Trace {
    /// The `tools/call` span of a call: a child of `parent`, else of the client's trace,
    /// else a new trace's root. Its outcome fields are filled by [`finish`].
    pub fn call_span(&self, call_id: &str, profile: &str, tool: &str) -> Span {
        let parent = self.parent.as_ref().and_then(Span::id);
        let kind = if self.parent.is_some() {
            "internal"
        } else {
            "server"
        };
        let span = tracing::debug_span!(
            target: "toolgate::call",
            parent: parent,
            "tools/call",
            otel.name = tracing::field::Empty,
            otel.kind = kind,
            otel.status_code = tracing::field::Empty,
            call_id,
            profile,
            tool,
            server = tracing::field::Empty,
            decision = tracing::field::Empty,
            outcome = tracing::field::Empty,
            duration_us = tracing::field::Empty,
        );
        if span.is_disabled() {
            return span;
        }
        span.record("otel.name", format!("tools/call {tool}"));
        if self.parent.is_none()
            && exporting()
            && let Some(remote) = self.remote
        {
            // Before the span is first entered: afterwards its parent is fixed.
            let _ = span.set_parent(remote.context());
        }
        span
    }
}

/// Fills a call span's outcome (no-op on a disabled span).
pub fn finish(
    span: &Span,
    server: Option<&dyn fmt::Display>,
    decision: &str,
    outcome: &str,
    elapsed_us: u64,
) {
    if span.is_disabled() {
        return;
    }
    if let Some(server) = server {
        span.record("server", tracing::field::display(server));
    }
    span.record("decision", decision);
    span.record("outcome", outcome);
    span.record("duration_us", elapsed_us);
    if outcome != "OK" {
        span.record("otel.status_code", "error");
    }
}

/// The `traceparent` that goes out on a hop (hook or upstream request) made in `hop`: its
/// span's own when spans are exported, else the client's unchanged.
pub fn outgoing(hop: &Span, remote: Option<Traceparent>) -> Option<Traceparent> {
    if !exporting() || hop.is_disabled() {
        return remote;
    }
    let context = hop.context();
    Traceparent::of(context.span().span_context()).or(remote)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparents_parse_as_w3c_reads_them_and_print_back() {
        let text = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let parsed = Traceparent::parse(text).unwrap();
        assert_eq!(parsed.trace_id, 0x0af7651916cd43dd8448eb211c80319c);
        assert_eq!(parsed.span_id, 0xb7ad6b7169203331);
        assert_eq!(parsed.flags, 1);
        assert_eq!(parsed.to_string(), text);
        // A later version may append fields; version 00 may not.
        assert!(Traceparent::parse(&format!("01{}-extra", &text[2..])).is_some());
        for bad in [
            "",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x",
            "00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c8031ég-b7ad6b7169203331-01",
        ] {
            assert_eq!(Traceparent::parse(bad), None, "{bad}");
        }
    }
}
