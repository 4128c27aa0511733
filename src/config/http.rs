//! `[gateway.http]`: the HTTP listener's doors and limits (anonymous access, Origin and Host
//! allowlists, the metrics listener, session, connection and timeout caps).

use std::{net::SocketAddr, time::Duration};

use serde::Deserialize;

use super::{ConfigError, Profile, Secret};

/// `[gateway.http]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHttp {
    /// Lets callers without a token use the profiles that list no tokens, even when other
    /// profiles list some.
    #[serde(default)]
    pub allow_anonymous: bool,
    /// Browser origins allowed besides loopback ones: `https://app.example`,
    /// `http://host:8080`, `http://host:*`.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Whether loopback origins (`http(s)://localhost|127.0.0.1|[::1]`, any port) are
    /// allowed without being listed; default true.
    pub allow_loopback_origins: Option<bool>,
    /// `Host` values allowed besides loopback names and the bound address: `host` or `host:port`.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Serve `/metrics` on this address (its own listener).
    pub metrics_addr: Option<String>,
    /// Bearer token `/metrics` requires; needed for a non-loopback `metrics_addr`.
    pub metrics_token: Option<String>,
    pub max_sessions: Option<usize>,
    pub max_sessions_per_profile: Option<usize>,
    pub session_idle_secs: Option<u64>,
    pub max_connections: Option<usize>,
    pub header_timeout_secs: Option<u64>,
    pub body_timeout_secs: Option<u64>,
    pub connection_idle_secs: Option<u64>,
}

/// Default cap on live MCP sessions over the whole gateway.
pub const DEFAULT_MAX_SESSIONS: usize = 1000;
/// Default idle time after which a session is closed.
pub const DEFAULT_SESSION_IDLE_SECS: u64 = 300;
/// Default cap on open connections (lowered further to fit the open-file limit).
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Default time a client has to send a request's headers (and to start the next one).
pub const DEFAULT_HEADER_TIMEOUT_SECS: u64 = 10;
/// Default time a client has to send a request's body.
pub const DEFAULT_BODY_TIMEOUT_SECS: u64 = 30;
/// Default time a connection may move no bytes at all before it is closed.
pub const DEFAULT_CONNECTION_IDLE_SECS: u64 = 60;

/// One allowed browser origin: scheme, host and port (`None`: any port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedOrigin {
    pub scheme: String,
    pub host: String,
    pub port: Option<u16>,
}

impl AllowedOrigin {
    /// Parses `scheme://host`, `scheme://host:port` or `scheme://host:*`; a missing port is
    /// the scheme's default (RFC 6454), so `https://app.example` is port 443 only.
    pub fn parse(text: &str) -> Result<Self, String> {
        let expected = || {
            format!(
                "expected an origin like \"https://app.example\", \"http://host:8080\" or \"http://host:*\", found {text:?}"
            )
        };
        let (scheme, rest) = text.split_once("://").ok_or_else(expected)?;
        let scheme = scheme.to_ascii_lowercase();
        if !matches!(scheme.as_str(), "http" | "https") || rest.is_empty() || rest.contains('/') {
            return Err(expected());
        }
        let (host, port) = split_host_port(rest).ok_or_else(expected)?;
        let port = match port {
            Some("*") => None,
            Some(port) => Some(port.parse::<u16>().map_err(|_| expected())?),
            None => Some(if scheme == "https" { 443 } else { 80 }),
        };
        Ok(Self {
            scheme,
            host: host.to_ascii_lowercase(),
            port,
        })
    }
}

/// One allowed `Host`: a name and, optionally, the only port it may carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHost {
    pub host: String,
    pub port: Option<u16>,
}

impl AllowedHost {
    /// Parses `host` (any port) or `host:port`; IPv6 addresses in brackets.
    pub fn parse(text: &str) -> Result<Self, String> {
        let expected = || format!("expected `host` or `host:port`, found {text:?}");
        let (host, port) = split_host_port(text).ok_or_else(expected)?;
        let port = port
            .map(|p| p.parse::<u16>().map_err(|_| expected()))
            .transpose()?;
        Ok(Self {
            host: host.to_ascii_lowercase(),
            port,
        })
    }
}

/// `host[:port]` or `[v6][:port]` → (host without brackets, port text).
pub fn split_host_port(text: &str) -> Option<(&str, Option<&str>)> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        match after {
            "" => (host, None),
            _ => (host, Some(after.strip_prefix(':')?)),
        }
    } else {
        match text.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    let legal = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._:".contains(&b));
    legal.then_some((host, port))
}

/// The validated `[gateway.http]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSettings {
    pub allow_anonymous: bool,
    pub allowed_origins: Vec<AllowedOrigin>,
    /// Loopback origins are allowed besides `allowed_origins`.
    pub allow_loopback_origins: bool,
    pub allowed_hosts: Vec<AllowedHost>,
    pub metrics_addr: Option<SocketAddr>,
    pub metrics_token: Option<Secret>,
    pub max_sessions: usize,
    /// `None`: only the gateway-wide cap applies.
    pub max_sessions_per_profile: Option<usize>,
    pub session_idle: Duration,
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub connection_idle: Duration,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            allow_anonymous: false,
            allowed_origins: Vec::new(),
            allow_loopback_origins: true,
            allowed_hosts: Vec::new(),
            metrics_addr: None,
            metrics_token: None,
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_sessions_per_profile: None,
            session_idle: Duration::from_secs(DEFAULT_SESSION_IDLE_SECS),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: Duration::from_secs(DEFAULT_HEADER_TIMEOUT_SECS),
            body_timeout: Duration::from_secs(DEFAULT_BODY_TIMEOUT_SECS),
            connection_idle: Duration::from_secs(DEFAULT_CONNECTION_IDLE_SECS),
        }
    }
}

impl HttpSettings {
    /// Whether the metrics listener may bind `addr`: loopback always, anything else only
    /// behind a token.
    pub fn check_metrics_addr(&self, addr: SocketAddr) -> Result<(), String> {
        if addr.ip().is_loopback() || self.metrics_token.is_some() {
            Ok(())
        } else {
            Err(format!(
                "metrics address {addr} is not a loopback address: set `gateway.http.metrics_token` to serve metrics there"
            ))
        }
    }
}

/// `[gateway.http]` → [`HttpSettings`]; `expand` resolves `${VAR}` in the metrics token.
pub fn settings(
    raw: RawHttp,
    profiles: &[Profile],
    invalid: &dyn Fn(String, String) -> ConfigError,
    expand: &dyn Fn(&str) -> Result<String, String>,
) -> Result<HttpSettings, ConfigError> {
    let key = |field: &str| format!("gateway.http.{field}");
    let allowed_origins = raw
        .allowed_origins
        .iter()
        .enumerate()
        .map(|(i, o)| {
            AllowedOrigin::parse(o).map_err(|m| invalid(key(&format!("allowed_origins[{i}]")), m))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let allowed_hosts = raw
        .allowed_hosts
        .iter()
        .enumerate()
        .map(|(i, h)| {
            AllowedHost::parse(h).map_err(|m| invalid(key(&format!("allowed_hosts[{i}]")), m))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let metrics_token = match raw.metrics_token {
        Some(token) => {
            // Errors name the key, never the value: it is a secret.
            let token = expand(&token).map_err(|m| invalid(key("metrics_token"), m))?;
            if token.trim().is_empty() {
                return Err(invalid(
                    key("metrics_token"),
                    "expected a bearer token, found an empty string".into(),
                ));
            }
            if profiles
                .iter()
                .any(|p| p.tokens.iter().any(|t| t.expose() == token))
            {
                return Err(invalid(
                    key("metrics_token"),
                    "this token is also a profile's token; use a separate one for metrics".into(),
                ));
            }
            Some(Secret::new(token))
        }
        None => None,
    };
    let positive = |value: Option<u64>, default: u64, field: &str| match value {
        Some(0) => Err(invalid(
            key(field),
            "expected a positive number of seconds".into(),
        )),
        Some(value) => Ok(Duration::from_secs(value)),
        None => Ok(Duration::from_secs(default)),
    };
    let count = |value: Option<usize>, field: &str| match value {
        Some(0) => Err(invalid(key(field), "expected a positive number".into())),
        other => Ok(other),
    };
    let mut settings = HttpSettings {
        allow_anonymous: raw.allow_anonymous,
        allowed_origins,
        allow_loopback_origins: raw.allow_loopback_origins.unwrap_or(true),
        allowed_hosts,
        metrics_addr: None,
        metrics_token,
        max_sessions: count(raw.max_sessions, "max_sessions")?.unwrap_or(DEFAULT_MAX_SESSIONS),
        max_sessions_per_profile: count(raw.max_sessions_per_profile, "max_sessions_per_profile")?,
        session_idle: positive(
            raw.session_idle_secs,
            DEFAULT_SESSION_IDLE_SECS,
            "session_idle_secs",
        )?,
        max_connections: count(raw.max_connections, "max_connections")?
            .unwrap_or(DEFAULT_MAX_CONNECTIONS),
        header_timeout: positive(
            raw.header_timeout_secs,
            DEFAULT_HEADER_TIMEOUT_SECS,
            "header_timeout_secs",
        )?,
        body_timeout: positive(
            raw.body_timeout_secs,
            DEFAULT_BODY_TIMEOUT_SECS,
            "body_timeout_secs",
        )?,
        connection_idle: positive(
            raw.connection_idle_secs,
            DEFAULT_CONNECTION_IDLE_SECS,
            "connection_idle_secs",
        )?,
    };
    if let Some(addr) = raw.metrics_addr {
        let parsed: SocketAddr = addr.parse().map_err(|_| {
            invalid(
                key("metrics_addr"),
                format!("expected an address like \"127.0.0.1:9464\", found {addr:?}"),
            )
        })?;
        settings
            .check_metrics_addr(parsed)
            .map_err(|m| invalid(key("metrics_addr"), m))?;
        settings.metrics_addr = Some(parsed);
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_parse_with_default_explicit_and_any_port() {
        let o = AllowedOrigin::parse("HTTPS://App.Example").unwrap();
        assert_eq!(
            (o.scheme.as_str(), o.host.as_str(), o.port),
            ("https", "app.example", Some(443))
        );
        assert_eq!(
            AllowedOrigin::parse("http://h:8080").unwrap().port,
            Some(8080)
        );
        assert_eq!(AllowedOrigin::parse("http://h:*").unwrap().port, None);
        assert_eq!(AllowedOrigin::parse("http://[::1]:*").unwrap().host, "::1");
        for bad in [
            "app.example",
            "ftp://h",
            "http://",
            "http://h/path",
            "http://h:x",
            "null",
        ] {
            assert!(AllowedOrigin::parse(bad).is_err(), "{bad}");
        }
    }

    fn check(raw: RawHttp, profiles: &[Profile]) -> Result<HttpSettings, String> {
        let invalid = |key: String, message: String| ConfigError::Invalid {
            file: "t.toml".into(),
            key,
            message,
        };
        settings(raw, profiles, &invalid, &|v| Ok(v.to_owned())).map_err(|e| e.to_string())
    }

    #[test]
    fn settings_default_and_refuse_what_cannot_work() {
        assert_eq!(
            check(RawHttp::default(), &[]).unwrap(),
            HttpSettings::default()
        );
        let refused = [
            (
                RawHttp {
                    max_sessions: Some(0),
                    ..RawHttp::default()
                },
                "gateway.http.max_sessions",
            ),
            (
                RawHttp {
                    header_timeout_secs: Some(0),
                    ..RawHttp::default()
                },
                "header_timeout_secs",
            ),
            (
                RawHttp {
                    metrics_addr: Some("0.0.0.0:9464".into()),
                    ..RawHttp::default()
                },
                "metrics_token",
            ),
            (
                RawHttp {
                    metrics_addr: Some("nowhere".into()),
                    ..RawHttp::default()
                },
                "metrics_addr",
            ),
            (
                RawHttp {
                    allowed_origins: vec!["evil".into()],
                    ..RawHttp::default()
                },
                "allowed_origins[0]",
            ),
            (
                RawHttp {
                    metrics_token: Some(" ".into()),
                    ..RawHttp::default()
                },
                "metrics_token",
            ),
        ];
        for (raw, key) in refused {
            let error = check(raw, &[]).unwrap_err();
            assert!(error.contains(key), "{error}");
        }
        let open = RawHttp {
            metrics_addr: Some("0.0.0.0:9464".into()),
            metrics_token: Some("scrape".into()),
            ..RawHttp::default()
        };
        assert!(
            check(open, &[]).is_ok(),
            "a token opens a non-loopback address"
        );
        let ops = Profile {
            name: super::super::ProfileName::parse("ops").unwrap(),
            extends: None,
            mode: None,
            allow: None,
            deny: None,
            tokens: vec![Secret::new("shared".into())],
        };
        let shared = RawHttp {
            metrics_token: Some("shared".into()),
            ..RawHttp::default()
        };
        let error = check(shared, &[ops]).unwrap_err();
        assert!(error.contains("also a profile's token"), "{error}");
        assert!(
            !error.contains("shared"),
            "the secret is never printed: {error}"
        );
    }

    #[test]
    fn hosts_parse_with_and_without_port() {
        assert_eq!(
            AllowedHost::parse("Example.com:8443").unwrap(),
            AllowedHost {
                host: "example.com".into(),
                port: Some(8443)
            }
        );
        assert_eq!(AllowedHost::parse("[::1]").unwrap().port, None);
        for bad in ["", ":80", "a b", "h:port"] {
            assert!(AllowedHost::parse(bad).is_err(), "{bad}");
        }
    }
}
