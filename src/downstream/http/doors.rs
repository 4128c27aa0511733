//! `Host` and `Origin` checks against DNS rebinding and cross-site browser requests.
//!
//! - `Host` must be present, non-empty and name this server: a loopback name
//!   (`localhost`, `127.0.0.1`, `[::1]`), the bound address, or a configured
//!   `gateway.http.allowed_hosts` entry; otherwise 400 (missing/empty/malformed) or 403.
//! - `Origin`, when present (browsers send it), must be a configured
//!   `gateway.http.allowed_origins` entry or, unless `allow_loopback_origins = false`, a
//!   loopback origin (`http` or `https`, any port); otherwise 403. Requests without `Origin`
//!   (non-browser clients) are unaffected.
//!
//! Loopback origins are allowed by default because a page on this machine (a local
//! inspector, a dev UI) is the usual browser client; listing an origin never removes them, so
//! adding one cannot lock such a page out by surprise. Where other local web servers may
//! serve untrusted pages, `allow_loopback_origins = false` leaves only the listed origins
//! (`"http://localhost:6274"` lists one loopback port).

use std::net::SocketAddr;

use axum::http::{HeaderMap, StatusCode, header::HOST, header::ORIGIN};

use super::auth::Refusal;
use crate::config::{AllowedHost, AllowedOrigin, split_host_port};

const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The `Host` and `Origin` values one listener accepts.
#[derive(Debug, Clone)]
pub struct Doors {
    hosts: Vec<AllowedHost>,
    origins: Vec<AllowedOrigin>,
}

impl Doors {
    /// Hosts: loopback names, `bound`'s own address (when it is a specific one) and the
    /// configured entries. Origins: the configured ones, and loopback ones if `loopback_origins`.
    pub fn new(
        bound: SocketAddr,
        hosts: &[AllowedHost],
        origins: &[AllowedOrigin],
        loopback_origins: bool,
    ) -> Self {
        let mut allowed: Vec<AllowedHost> = LOOPBACK_NAMES
            .iter()
            .map(|name| AllowedHost {
                host: (*name).to_owned(),
                port: None,
            })
            .collect();
        if !bound.ip().is_loopback() && !bound.ip().is_unspecified() {
            allowed.push(AllowedHost {
                host: bound.ip().to_string(),
                port: None,
            });
        }
        allowed.extend(hosts.iter().cloned());
        let mut origins = origins.to_vec();
        let loopback_schemes: &[&str] = if loopback_origins {
            &["http", "https"]
        } else {
            &[]
        };
        for scheme in loopback_schemes {
            for name in LOOPBACK_NAMES {
                origins.push(AllowedOrigin {
                    scheme: (*scheme).to_owned(),
                    host: name.to_owned(),
                    port: None,
                });
            }
        }
        Self {
            hosts: allowed,
            origins,
        }
    }

    /// The allowed hosts as rmcp's `allowed_hosts` entries, so its own check agrees with ours.
    pub fn rmcp_hosts(&self) -> Vec<String> {
        self.hosts
            .iter()
            .map(|h| match (h.host.contains(':'), h.port) {
                (true, Some(port)) => format!("[{}]:{port}", h.host),
                (false, Some(port)) => format!("{}:{port}", h.host),
                (_, None) => h.host.clone(),
            })
            .collect()
    }

    pub fn check(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        self.check_host(headers)?;
        self.check_origin(headers)
    }

    fn check_host(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let mut values = headers.get_all(HOST).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                "exactly one Host header is required",
            ));
        };
        let text = value.to_str().unwrap_or_default().trim();
        let Some((host, port)) = split_host_port(text) else {
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                "the Host header is empty or malformed",
            ));
        };
        let port = match port.map(str::parse::<u16>) {
            Some(Ok(port)) => Some(port),
            None => None,
            Some(Err(_)) => {
                return Err(Refusal::new(
                    StatusCode::BAD_REQUEST,
                    "the Host header is empty or malformed",
                ));
            }
        };
        // Allowed hosts are lowercase (config and loopback names): compared without a
        // lowercase copy of the header per request.
        let allowed = self
            .hosts
            .iter()
            .any(|a| a.host.eq_ignore_ascii_case(host) && a.port.is_none_or(|p| Some(p) == port));
        if allowed {
            Ok(())
        } else {
            tracing::warn!(host = %text, "refused a request for another Host (possible DNS rebinding)");
            Err(Refusal::new(
                StatusCode::FORBIDDEN,
                format!("Host {text:?} is not allowed (see gateway.http.allowed_hosts)"),
            ))
        }
    }

    fn check_origin(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let mut values = headers.get_all(ORIGIN).iter();
        let Some(value) = values.next() else {
            return Ok(());
        };
        let text = value.to_str().unwrap_or_default().trim();
        let allowed = values.next().is_none()
            && AllowedOrigin::parse(text).is_ok_and(|origin| {
                let port = origin.port;
                self.origins.iter().any(|a| {
                    a.scheme == origin.scheme
                        && a.host == origin.host
                        && a.port.is_none_or(|p| Some(p) == port)
                })
            });
        if allowed {
            Ok(())
        } else {
            tracing::warn!(origin = %text, "refused a request from a browser origin that is not allowed");
            Err(Refusal::new(
                StatusCode::FORBIDDEN,
                format!("Origin {text:?} is not allowed (see gateway.http.allowed_origins)"),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(axum::http::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(name.clone(), HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn doors() -> Doors {
        let configured = [AllowedOrigin::parse("https://app.example").unwrap()];
        Doors::new("127.0.0.1:8080".parse().unwrap(), &[], &configured, true)
    }

    #[test]
    fn hosts_must_be_present_and_allowed() {
        let doors = doors();
        for ok in ["localhost:8080", "127.0.0.1", "[::1]:9", "LOCALHOST"] {
            assert!(doors.check(&headers(&[(HOST, ok)])).is_ok(), "{ok}");
        }
        for (bad, status) in [
            ("", StatusCode::BAD_REQUEST),
            ("localhost:x", StatusCode::BAD_REQUEST),
            ("evil.example", StatusCode::FORBIDDEN),
            ("127.0.0.2", StatusCode::FORBIDDEN),
        ] {
            let refused = doors.check(&headers(&[(HOST, bad)])).unwrap_err();
            assert_eq!(refused.status, status, "{bad:?}");
        }
        assert_eq!(
            doors.check(&HeaderMap::new()).unwrap_err().status,
            StatusCode::BAD_REQUEST
        );
    }

    #[test]
    fn origins_must_be_loopback_or_configured() {
        let doors = doors();
        for ok in [
            "http://localhost:3000",
            "https://127.0.0.1",
            "http://[::1]:1",
            "https://app.example",
            "https://app.example:443",
        ] {
            assert!(
                doors
                    .check(&headers(&[(HOST, "localhost"), (ORIGIN, ok)]))
                    .is_ok(),
                "{ok}"
            );
        }
        for bad in [
            "http://evil.example",
            "http://app.example",
            "https://app.example:8443",
            "null",
            "",
        ] {
            let refused = doors
                .check(&headers(&[(HOST, "localhost"), (ORIGIN, bad)]))
                .unwrap_err();
            assert_eq!(refused.status, StatusCode::FORBIDDEN, "{bad:?}");
        }
    }

    #[test]
    fn loopback_origins_can_be_turned_off() {
        let configured = [AllowedOrigin::parse("http://localhost:6274").unwrap()];
        let doors = Doors::new("127.0.0.1:8080".parse().unwrap(), &[], &configured, false);
        let check = |origin: &str| doors.check(&headers(&[(HOST, "localhost"), (ORIGIN, origin)]));
        assert!(check("http://localhost:6274").is_ok(), "listed");
        for bad in [
            "http://localhost:3000",
            "http://127.0.0.1:6274",
            "https://[::1]",
        ] {
            assert_eq!(
                check(bad).unwrap_err().status,
                StatusCode::FORBIDDEN,
                "{bad}"
            );
        }
        assert!(
            doors.check(&headers(&[(HOST, "localhost")])).is_ok(),
            "no Origin"
        );
    }

    #[test]
    fn rmcp_gets_the_same_hosts() {
        let hosts = [
            AllowedHost::parse("[::2]:8443").unwrap(),
            AllowedHost::parse("mcp.example").unwrap(),
        ];
        let doors = Doors::new("10.0.0.5:80".parse().unwrap(), &hosts, &[], true);
        assert_eq!(
            doors.rmcp_hosts(),
            [
                "localhost",
                "127.0.0.1",
                "::1",
                "10.0.0.5",
                "[::2]:8443",
                "mcp.example"
            ]
        );
    }
}
