//! Logging to stderr, plus the optional OpenTelemetry export of call spans over OTLP/HTTP.
//!
//! The exporter is `opentelemetry-otlp`'s, on the SDK's batch thread with reqwest's blocking
//! client: no task of the gateway's runtime waits on a collector. Its errors are log lines
//! on stderr (target `opentelemetry*`), never stdout. [`Telemetry::shutdown`] sends what is
//! still batched before the process exits.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::{Resource, trace::SdkTracerProvider};
use tracing::{Level, Metadata};
use tracing_subscriber::{
    EnvFilter, Layer, Registry, filter::filter_fn, layer::SubscriberExt, util::SubscriberInitExt,
};

use crate::config::{OtlpProtocol, TracingSettings};

/// How long the exit waits for the last spans to reach the collector.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// The standard variables that turn export on without a config key.
const ENDPOINT_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];

/// The standard variables that choose the encoding.
const PROTOCOL_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
];

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("cannot start the OTLP exporter: {0}")]
    Exporter(String),
    #[error("cannot install the log subscriber: {0}")]
    Subscriber(String),
}

/// How log lines on stderr look.
#[derive(Debug, Clone, Copy)]
pub enum LogStyle {
    /// Human-readable; coloured when `ansi`.
    Text { ansi: bool },
    /// One JSON object per line.
    Json,
}

/// What was installed; [`shutdown`](Self::shutdown) it before exiting.
#[must_use]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Whether spans are exported.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Sends the spans still batched (bounded wait), then stops the exporter. Call it
    /// outside the async runtime: the exporter's client blocks.
    pub fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(error) = provider.shutdown_with_timeout(SHUTDOWN_WAIT)
        {
            tracing::warn!(target: "toolgate::telemetry", "the last spans may not have been exported: {error}");
        }
    }
}

/// The endpoint that turns export on: the config's, else a standard variable's (which the
/// exporter then reads itself). `OTEL_SDK_DISABLED=true` turns it off.
fn wanted(settings: &TracingSettings, env: &dyn Fn(&str) -> Option<String>) -> bool {
    if env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return false;
    }
    settings.otlp_endpoint.is_some()
        || ENDPOINT_VARS
            .iter()
            .any(|var| env(var).is_some_and(|v| !v.trim().is_empty()))
}

/// Installs the global subscriber: `filter` for the log lines on stderr, and the
/// OpenTelemetry layer when export is configured (by `settings` or the environment). Must
/// run outside the async runtime (the exporter's blocking client is built here).
pub fn init(
    style: LogStyle,
    filter: EnvFilter,
    settings: &TracingSettings,
) -> Result<Telemetry, TelemetryError> {
    let provider = match wanted(settings, &|var| std::env::var(var).ok()) {
        true => Some(provider(settings)?),
        false => None,
    };
    let export = provider.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("toolgate"))
            .with_filter(filter_fn(exported))
            .boxed()
    });
    tracing_subscriber::registry()
        .with(layers(style, filter, export))
        .try_init()
        .map_err(|e| TelemetryError::Subscriber(e.to_string()))?;
    if provider.is_some() {
        super::EXPORTING.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(Telemetry { provider })
}

type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync>;

/// The log lines' layer, and the export layer when there is one.
///
/// A list, not an `Option` layer: tracing-subscriber's `None` layer declares an interest in
/// every callsite, so every span up to the logs' most verbose level was recorded and entered
/// even though no layer kept it: rmcp's `serve_inner` span, for one, on every poll of both
/// service loops (about 1,000 instructions per call, BENCHMARKS.md).
fn layers(style: LogStyle, filter: EnvFilter, export: Option<BoxedLayer>) -> Vec<BoxedLayer> {
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs = match style {
        LogStyle::Text { ansi } => logs.with_ansi(ansi).with_filter(filter).boxed(),
        LogStyle::Json => logs.json().with_filter(filter).boxed(),
    };
    std::iter::once(logs).chain(export).collect()
}

/// What the OpenTelemetry layer sees: the call spans and their hops, and the warnings and
/// errors logged inside them (as span events). Not the exporter's own doings.
fn exported(metadata: &Metadata<'_>) -> bool {
    let target = metadata.target();
    if metadata.is_span() {
        target.starts_with("toolgate::call")
    } else {
        target.starts_with("toolgate") && *metadata.level() <= Level::WARN
    }
}

fn provider(settings: &TracingSettings) -> Result<SdkTracerProvider, TelemetryError> {
    let mut exporter = opentelemetry_otlp::SpanExporter::builder().with_http();
    if let Some(endpoint) = &settings.otlp_endpoint {
        exporter = exporter.with_endpoint(traces_url(endpoint));
    }
    // The config's, else the exporter reads the standard variables, else OTLP's default
    // (protobuf; the crate's own default is JSON once its `http-json` feature is on).
    let env_protocol = PROTOCOL_VARS
        .iter()
        .any(|var| std::env::var(var).is_ok_and(|v| !v.trim().is_empty()));
    let protocol = match settings.protocol {
        Some(OtlpProtocol::Json) => Some(Protocol::HttpJson),
        Some(OtlpProtocol::Protobuf) => Some(Protocol::HttpBinary),
        None if env_protocol => None,
        None => Some(Protocol::HttpBinary),
    };
    if let Some(protocol) = protocol {
        exporter = exporter.with_protocol(protocol);
    }
    let exporter = exporter
        .build()
        .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES are read here; the config key wins.
    let resource = Resource::builder();
    let resource = match (
        &settings.service_name,
        std::env::var_os("OTEL_SERVICE_NAME"),
    ) {
        (Some(name), _) => resource.with_service_name(name.clone()),
        (None, None) => resource.with_service_name("toolgate"),
        (None, Some(_)) => resource,
    };
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build())
}

/// `gateway.tracing.otlp_endpoint` is the collector's base URL, as
/// `OTEL_EXPORTER_OTLP_ENDPOINT` is: spans go to its `/v1/traces`.
fn traces_url(endpoint: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_owned()
    } else {
        format!("{base}/v1/traces")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_is_on_only_when_an_endpoint_is_named_and_not_disabled() {
        let none = TracingSettings::default();
        let configured = TracingSettings {
            otlp_endpoint: Some("http://127.0.0.1:4318".into()),
            ..TracingSettings::default()
        };
        let empty = |_: &str| None;
        assert!(!wanted(&none, &empty));
        assert!(wanted(&configured, &empty));
        let env_endpoint =
            |var: &str| (var == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| "http://c:4318".into());
        assert!(wanted(&none, &env_endpoint));
        let blank = |var: &str| (var == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| " ".into());
        assert!(!wanted(&none, &blank));
        let disabled = |var: &str| (var == "OTEL_SDK_DISABLED").then(|| "TRUE".into());
        assert!(!wanted(&configured, &disabled));
    }

    #[test]
    fn a_span_no_layer_keeps_is_not_recorded() {
        let filter = EnvFilter::new("toolgate=info,rmcp=error");
        let subscriber = tracing_subscriber::registry().with(layers(LogStyle::Json, filter, None));
        tracing::subscriber::with_default(subscriber, || {
            // rmcp wraps each service loop in an info span; the filter drops rmcp below error.
            assert!(tracing::info_span!(target: "rmcp::service", "serve_inner").is_disabled());
            assert!(tracing::debug_span!(target: "toolgate::call", "tools/call").is_disabled());
            assert!(!tracing::info_span!(target: "toolgate::gateway", "kept").is_disabled());
        });
    }

    #[test]
    fn the_endpoint_is_a_base_url() {
        assert_eq!(traces_url("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(traces_url("http://c:4318/"), "http://c:4318/v1/traces");
        assert_eq!(
            traces_url("http://c:4318/v1/traces"),
            "http://c:4318/v1/traces"
        );
    }
}
