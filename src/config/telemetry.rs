//! `[gateway.tracing]`: OpenTelemetry export of the call spans over OTLP/HTTP (off by default).

use serde::Deserialize;

use super::ConfigError;

/// `[gateway.tracing]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTracing {
    /// The collector's base URL (`http://127.0.0.1:4318`): spans go to its `/v1/traces`.
    /// Without it, `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) turns export on.
    pub otlp_endpoint: Option<String>,
    /// The `service.name` of the exported spans (default `OTEL_SERVICE_NAME`, else `toolgate`).
    pub service_name: Option<String>,
    /// `http/protobuf` (OTLP's default) or `http/json`; default `OTEL_EXPORTER_OTLP_PROTOCOL`.
    pub protocol: Option<String>,
}

/// How spans are encoded on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    Protobuf,
    Json,
}

/// The validated `[gateway.tracing]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TracingSettings {
    pub otlp_endpoint: Option<String>,
    pub service_name: Option<String>,
    pub protocol: Option<OtlpProtocol>,
}

impl TracingSettings {
    /// `expand` resolves `${VAR}` in the endpoint (it may carry a token in its query).
    pub fn from_raw(
        raw: RawTracing,
        invalid: &dyn Fn(String, String) -> ConfigError,
        expand: &dyn Fn(&str) -> Result<String, String>,
    ) -> Result<Self, ConfigError> {
        let key = |field: &str| format!("gateway.tracing.{field}");
        let otlp_endpoint = match raw.otlp_endpoint {
            Some(endpoint) => {
                let endpoint = expand(&endpoint).map_err(|m| invalid(key("otlp_endpoint"), m))?;
                let scheme_ok = ["http://", "https://"].iter().any(|scheme| {
                    endpoint.len() > scheme.len()
                        && endpoint[..scheme.len()].eq_ignore_ascii_case(scheme)
                });
                if !scheme_ok || endpoint.parse::<http::Uri>().is_err() {
                    return Err(invalid(
                        key("otlp_endpoint"),
                        format!(
                            "expected an http:// or https:// URL like \"http://127.0.0.1:4318\", found {endpoint:?}"
                        ),
                    ));
                }
                Some(endpoint)
            }
            None => None,
        };
        let service_name = match raw.service_name {
            Some(name) if name.trim().is_empty() => {
                return Err(invalid(
                    key("service_name"),
                    "expected a name, found an empty string".into(),
                ));
            }
            other => other,
        };
        let protocol = match raw.protocol.as_deref() {
            None => None,
            Some("http/protobuf") => Some(OtlpProtocol::Protobuf),
            Some("http/json") => Some(OtlpProtocol::Json),
            Some(other) => {
                return Err(invalid(
                    key("protocol"),
                    format!("expected \"http/protobuf\" or \"http/json\", found {other:?}"),
                ));
            }
        };
        Ok(Self {
            otlp_endpoint,
            service_name,
            protocol,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(raw: RawTracing) -> Result<TracingSettings, String> {
        let invalid = |key: String, message: String| ConfigError::Invalid {
            file: "t.toml".into(),
            key,
            message,
        };
        TracingSettings::from_raw(raw, &invalid, &|v| Ok(v.to_owned())).map_err(|e| e.to_string())
    }

    #[test]
    fn settings_default_to_off_and_name_the_bad_key() {
        assert_eq!(
            check(RawTracing::default()).unwrap(),
            TracingSettings::default()
        );
        let good = check(RawTracing {
            otlp_endpoint: Some("http://127.0.0.1:4318".into()),
            service_name: Some("gw".into()),
            protocol: Some("http/json".into()),
        })
        .unwrap();
        assert_eq!(good.protocol, Some(OtlpProtocol::Json));
        for (raw, key) in [
            (
                RawTracing {
                    otlp_endpoint: Some("127.0.0.1:4318".into()),
                    ..RawTracing::default()
                },
                "gateway.tracing.otlp_endpoint",
            ),
            (
                RawTracing {
                    protocol: Some("grpc".into()),
                    ..RawTracing::default()
                },
                "gateway.tracing.protocol",
            ),
            (
                RawTracing {
                    service_name: Some(" ".into()),
                    ..RawTracing::default()
                },
                "gateway.tracing.service_name",
            ),
        ] {
            let error = check(raw).unwrap_err();
            assert!(error.contains(key), "{error}");
        }
    }
}
