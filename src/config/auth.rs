//! `[gateway.auth]`: toolgate as an OAuth resource server (issuer, audience, keys, claim → profile).

use std::time::Duration;

use jsonwebtoken::Algorithm;
use serde::Deserialize;

use super::{ConfigError, Profile, ProfileName};

/// `[gateway.auth]` as written. Its presence turns IdP tokens on.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAuth {
    /// The identity provider's issuer URL, exactly as its tokens carry it in `iss`.
    pub issuer: Option<String>,
    /// toolgate's resource URL (`https://toolgate.example/mcp`): what `aud` must hold.
    pub audience: Option<String>,
    /// Where the signing keys are; without it, found from the issuer's metadata
    /// (RFC 8414, then OpenID discovery).
    pub jwks_uri: Option<String>,
    /// Accepted signature algorithms; default every asymmetric one.
    pub algorithms: Option<Vec<String>>,
    /// Slack allowed on `exp` and `nbf`, in seconds; default 60.
    pub clock_skew_secs: Option<u64>,
    /// The claim whose values select the profile (`scope`, `groups`, `roles`,
    /// `realm_access.roles`); default `scope`.
    pub claim: Option<String>,
    /// `[[gateway.auth.map]]`: claim value → profile; the first listed match wins.
    #[serde(default)]
    pub map: Vec<RawClaimProfile>,
    /// Time limit of one request to the identity provider, in milliseconds; default 5000.
    pub fetch_timeout_ms: Option<u64>,
    /// Least time between two key fetches asked for by an unknown `kid`, in seconds; default 30.
    pub jwks_min_refresh_secs: Option<u64>,
    /// Keys older than this are fetched again before use, in seconds; default 3600.
    pub jwks_max_age_secs: Option<u64>,
}

/// One `[[gateway.auth.map]]` entry as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawClaimProfile {
    pub value: String,
    pub profile: String,
}

/// One validated `[[gateway.auth.map]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimProfile {
    pub value: String,
    pub profile: ProfileName,
}

pub const DEFAULT_CLOCK_SKEW_SECS: u64 = 60;
pub const DEFAULT_FETCH_TIMEOUT_MS: u64 = 5000;
pub const DEFAULT_JWKS_MIN_REFRESH_SECS: u64 = 30;
pub const DEFAULT_JWKS_MAX_AGE_SECS: u64 = 3600;
pub const DEFAULT_CLAIM: &str = "scope";

/// The algorithms accepted unless `algorithms` is given: the asymmetric ones. HMAC needs a
/// secret shared with the IdP, and a verifier holding only public keys must never take one.
pub const ASYMMETRIC: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// The validated `[gateway.auth]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthSettings {
    pub issuer: String,
    pub audience: String,
    pub jwks_uri: Option<String>,
    pub algorithms: Vec<Algorithm>,
    pub clock_skew: Duration,
    pub claim: String,
    pub map: Vec<ClaimProfile>,
    pub fetch_timeout: Duration,
    pub jwks_min_refresh: Duration,
    pub jwks_max_age: Duration,
}

impl AuthSettings {
    /// `[gateway.auth]` → settings; every profile the map names must exist.
    pub fn from_raw(
        raw: RawAuth,
        profiles: &[Profile],
        invalid: &dyn Fn(String, String) -> ConfigError,
    ) -> Result<Self, ConfigError> {
        let key = |field: &str| format!("gateway.auth.{field}");
        let required = |value: Option<String>, field: &str, example: &str| {
            value.ok_or_else(|| {
                invalid(
                    key(field),
                    format!("required when [gateway.auth] is present, like {example:?}"),
                )
            })
        };
        let issuer = required(
            raw.issuer,
            "issuer",
            "https://keycloak.example/realms/tools",
        )?;
        check_auth_url(&issuer, true).map_err(|m| invalid(key("issuer"), m))?;
        let audience = required(raw.audience, "audience", "https://toolgate.example/mcp")?;
        check_auth_url(&audience, false).map_err(|m| invalid(key("audience"), m))?;
        if let Some(jwks_uri) = &raw.jwks_uri {
            check_auth_url(jwks_uri, true).map_err(|m| invalid(key("jwks_uri"), m))?;
        }
        let algorithms = match raw.algorithms {
            None => ASYMMETRIC.to_vec(),
            Some(names) if names.is_empty() => {
                return Err(invalid(
                    key("algorithms"),
                    "expected at least one algorithm, like [\"RS256\", \"ES256\"]".into(),
                ));
            }
            Some(names) => names
                .iter()
                .enumerate()
                .map(|(i, name)| {
                    algorithm(name).map_err(|m| invalid(key(&format!("algorithms[{i}]")), m))
                })
                .collect::<Result<Vec<_>, _>>()?,
        };
        let claim = raw.claim.unwrap_or_else(|| DEFAULT_CLAIM.to_owned());
        if claim.trim().is_empty() {
            return Err(invalid(
                key("claim"),
                "expected a claim name like \"scope\" or \"groups\"".into(),
            ));
        }
        if raw.map.is_empty() {
            return Err(invalid(
                key("map"),
                "expected at least one [[gateway.auth.map]] entry (value = claim value, profile = profile name): without one no token selects a profile".into(),
            ));
        }
        let map = raw
            .map
            .into_iter()
            .enumerate()
            .map(|(i, entry)| {
                let at = |field: &str| key(&format!("map[{i}].{field}"));
                if entry.value.is_empty() {
                    return Err(invalid(at("value"), "expected a claim value".into()));
                }
                let profile =
                    ProfileName::parse(&entry.profile).map_err(|m| invalid(at("profile"), m))?;
                if !profiles.iter().any(|p| p.name == profile) {
                    return Err(invalid(
                        at("profile"),
                        format!("unknown profile {:?}", entry.profile),
                    ));
                }
                Ok(ClaimProfile {
                    value: entry.value,
                    profile,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let positive = |value: Option<u64>, default: u64, field: &str| match value {
            Some(0) => Err(invalid(key(field), "expected a positive number".into())),
            Some(value) => Ok(value),
            None => Ok(default),
        };
        Ok(Self {
            issuer,
            audience,
            jwks_uri: raw.jwks_uri,
            algorithms,
            clock_skew: Duration::from_secs(raw.clock_skew_secs.unwrap_or(DEFAULT_CLOCK_SKEW_SECS)),
            claim,
            map,
            fetch_timeout: Duration::from_millis(positive(
                raw.fetch_timeout_ms,
                DEFAULT_FETCH_TIMEOUT_MS,
                "fetch_timeout_ms",
            )?),
            // 0 is allowed: every unknown `kid` may fetch (for tests; a flood then reaches the IdP).
            jwks_min_refresh: Duration::from_secs(
                raw.jwks_min_refresh_secs
                    .unwrap_or(DEFAULT_JWKS_MIN_REFRESH_SECS),
            ),
            jwks_max_age: Duration::from_secs(positive(
                raw.jwks_max_age_secs,
                DEFAULT_JWKS_MAX_AGE_SECS,
                "jwks_max_age_secs",
            )?),
        })
    }

    /// The profiles some token can select: callers without a token never get these.
    pub fn mapped_profiles(&self) -> impl Iterator<Item = &ProfileName> {
        self.map.iter().map(|entry| &entry.profile)
    }
}

/// An `https://` URL, or `http://` to a loopback host (a local IdP or a test); the IdP's
/// URLs must be fetched over TLS (`idp`), toolgate's own may be plain HTTP behind a proxy.
pub fn check_auth_url(text: &str, idp: bool) -> Result<(), String> {
    let url = reqwest::Url::parse(text).map_err(|e| {
        format!("expected an absolute URL like \"https://host/path\", found {text:?}: {e}")
    })?;
    let host = url.host_str().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match url.scheme() {
        "https" => {}
        "http" if loopback || !idp => {}
        "http" => {
            return Err(format!(
                "the identity provider must be reached over https:// (plain http:// only to a loopback host), found {text:?}"
            ));
        }
        _ => return Err(format!("expected an https:// URL, found {text:?}")),
    }
    if url.host().is_none() || url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "expected a URL with a host and no query or fragment, found {text:?}"
        ));
    }
    Ok(())
}

/// One accepted algorithm by its JOSE name; HMAC and `none` are refused with the reason.
fn algorithm(name: &str) -> Result<Algorithm, String> {
    if name.eq_ignore_ascii_case("none") || name.to_ascii_uppercase().starts_with("HS") {
        return Err(format!(
            "{name:?} cannot be accepted: toolgate verifies with the identity provider's public keys, so only asymmetric algorithms are allowed ({})",
            names()
        ));
    }
    ASYMMETRIC
        .iter()
        .find(|alg| format!("{alg:?}") == name)
        .copied()
        .ok_or_else(|| format!("unknown algorithm {name:?}: expected one of {}", names()))
}

fn names() -> String {
    ASYMMETRIC
        .iter()
        .map(|alg| format!("{alg:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(name: &str) -> Profile {
        Profile {
            name: ProfileName::parse(name).unwrap(),
            extends: None,
            mode: None,
            allow: None,
            deny: None,
            tokens: Vec::new(),
        }
    }

    fn raw() -> RawAuth {
        RawAuth {
            issuer: Some("https://idp.example/realms/tools".into()),
            audience: Some("https://toolgate.example/mcp".into()),
            map: vec![RawClaimProfile {
                value: "tools:ops".into(),
                profile: "ops".into(),
            }],
            ..RawAuth::default()
        }
    }

    fn check(raw: RawAuth) -> Result<AuthSettings, String> {
        let invalid = |key: String, message: String| ConfigError::Invalid {
            file: "t.toml".into(),
            key,
            message,
        };
        AuthSettings::from_raw(raw, &[profile("default"), profile("ops")], &invalid)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_accept_only_asymmetric_algorithms() {
        let settings = check(raw()).unwrap();
        assert_eq!(settings.algorithms, ASYMMETRIC.to_vec());
        assert_eq!(settings.claim, "scope");
        assert_eq!(settings.clock_skew, Duration::from_secs(60));
        let named = check(RawAuth {
            algorithms: Some(vec!["ES256".into(), "RS256".into()]),
            ..raw()
        })
        .unwrap();
        assert_eq!(named.algorithms, [Algorithm::ES256, Algorithm::RS256]);
    }

    #[test]
    fn what_cannot_work_is_refused_naming_the_key() {
        let refused = [
            (
                RawAuth {
                    issuer: None,
                    ..raw()
                },
                "gateway.auth.issuer",
            ),
            (
                RawAuth {
                    issuer: Some("http://idp.example".into()),
                    ..raw()
                },
                "https://",
            ),
            (
                RawAuth {
                    audience: None,
                    ..raw()
                },
                "gateway.auth.audience",
            ),
            (
                RawAuth {
                    audience: Some("toolgate".into()),
                    ..raw()
                },
                "gateway.auth.audience",
            ),
            (
                RawAuth {
                    algorithms: Some(vec!["RS256".into(), "HS256".into()]),
                    ..raw()
                },
                "algorithms[1]",
            ),
            (
                RawAuth {
                    algorithms: Some(vec!["none".into()]),
                    ..raw()
                },
                "only asymmetric",
            ),
            (
                RawAuth {
                    map: vec![],
                    ..raw()
                },
                "gateway.auth.map",
            ),
            (
                RawAuth {
                    map: vec![RawClaimProfile {
                        value: "x".into(),
                        profile: "nobody".into(),
                    }],
                    ..raw()
                },
                "map[0].profile",
            ),
        ];
        for (raw, needle) in refused {
            let error = check(raw).unwrap_err();
            assert!(error.contains(needle), "{needle}: {error}");
        }
        // A local IdP over plain HTTP is fine.
        assert!(
            check(RawAuth {
                issuer: Some("http://127.0.0.1:8080/realms/x".into()),
                ..raw()
            })
            .is_ok()
        );
    }
}
