//! IdP tokens (`[gateway.auth]`): a JWT verified against the issuer's keys, its claim mapped to profiles, and the RFC 9728 metadata.
//!
//! A token is accepted when its `alg` is one of `algorithms` (never HMAC or `none`), a key
//! of the issuer's key set with its `kid` verifies the signature, `iss` is the issuer, `aud`
//! holds the audience (toolgate's resource URL), and `exp` / `nbf` hold within the clock
//! skew. Its `claim` values select profiles through `[[gateway.auth.map]]`, first listed
//! first. The token itself is never logged nor forwarded: only its subject (`sub`) goes on,
//! into the audit log and hook requests.

mod jwks;

use std::sync::Arc;

use axum::{
    Json,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use jsonwebtoken::{Validation, errors::ErrorKind};
use serde_json::{Map, Value, json};

use crate::config::{AuthSettings, ProfileName};

/// Where RFC 9728 puts a protected resource's metadata.
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// Why a token was refused; each has a stable code.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error("the bearer token is not a JWT toolgate can read: {0}")]
    Malformed(String),
    #[error("the token is signed with {0}, which gateway.auth.algorithms does not accept")]
    Algorithm(String),
    #[error("the token's signing key is unknown: {0}")]
    UnknownKey(String),
    #[error("the token's signature does not verify")]
    Signature,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet (nbf)")]
    NotYetValid,
    #[error("the token's audience (aud) is not {0:?}")]
    Audience(String),
    #[error("the token's issuer (iss) is not {0:?}")]
    Issuer(String),
    #[error("the token lacks the required claim {0:?}")]
    MissingClaim(String),
    #[error("the identity provider's signing keys are unavailable: {0}")]
    Unreachable(String),
    #[error(
        "this token grants no profile here: its claim {claim:?} holds none of the values gateway.auth.map lists"
    )]
    NoProfile { claim: String },
    #[error("this token does not grant profile {0:?}")]
    NotGranted(String),
}

impl OAuthError {
    /// Stable machine code, for logs and scripts.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Malformed(_) => "AUTH_TOKEN_MALFORMED",
            Self::Algorithm(_) => "AUTH_ALGORITHM_REFUSED",
            Self::UnknownKey(_) => "AUTH_UNKNOWN_KEY",
            Self::Signature => "AUTH_BAD_SIGNATURE",
            Self::Expired => "AUTH_TOKEN_EXPIRED",
            Self::NotYetValid => "AUTH_TOKEN_NOT_YET_VALID",
            Self::Audience(_) => "AUTH_WRONG_AUDIENCE",
            Self::Issuer(_) => "AUTH_WRONG_ISSUER",
            Self::MissingClaim(_) => "AUTH_MISSING_CLAIM",
            Self::Unreachable(_) => "AUTH_IDP_UNAVAILABLE",
            Self::NoProfile { .. } | Self::NotGranted(_) => "AUTH_NO_PROFILE",
        }
    }

    /// 401 for a token that is not valid, 403 for a valid one that grants too little, 503
    /// when the keys cannot be had (the caller is not at fault).
    pub fn status(&self) -> StatusCode {
        match self {
            Self::NoProfile { .. } | Self::NotGranted(_) => StatusCode::FORBIDDEN,
            Self::Unreachable(_) => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::UNAUTHORIZED,
        }
    }

    /// The RFC 6750 `error` code of its challenge.
    fn rfc6750(&self) -> Option<&'static str> {
        match self.status() {
            StatusCode::UNAUTHORIZED => Some("invalid_token"),
            StatusCode::FORBIDDEN => Some("insufficient_scope"),
            _ => None,
        }
    }
}

/// Who a verified token speaks for, and what it may use.
#[derive(Debug, Clone)]
pub struct Identity {
    pub subject: Option<String>,
    /// In `[[gateway.auth.map]]` order; never empty.
    pub profiles: Vec<ProfileName>,
}

/// The verified subject of an HTTP request, put into its extensions for the handler: it
/// reaches the audit log and hook requests.
#[derive(Debug, Clone)]
pub struct Subject(pub Arc<str>);

/// The resource server: settings, key cache, and the metadata it publishes.
pub struct OAuth {
    settings: AuthSettings,
    keys: jwks::KeyCache,
    /// Absolute URL of the metadata, as the challenges name it.
    metadata_url: String,
    metadata: Value,
}

impl OAuth {
    pub fn new(settings: &AuthSettings) -> Result<Self, OAuthError> {
        let metadata_url = metadata_url(&settings.audience);
        let mut metadata = json!({
            "resource": settings.audience,
            "authorization_servers": [settings.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "toolgate",
        });
        if matches!(settings.claim.as_str(), "scope" | "scp") {
            let mut scopes: Vec<&str> = settings.map.iter().map(|e| e.value.as_str()).collect();
            scopes.dedup();
            metadata["scopes_supported"] = json!(scopes);
        }
        Ok(Self {
            keys: jwks::KeyCache::new(settings)?,
            settings: settings.clone(),
            metadata_url,
            metadata,
        })
    }

    /// The profiles a token can select, which callers without one never get.
    pub fn mapped_profiles(&self) -> impl Iterator<Item = &ProfileName> {
        self.settings.mapped_profiles()
    }

    /// Verifies `token` and maps its claim to profiles.
    pub async fn verify(&self, token: &str) -> Result<Identity, OAuthError> {
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| OAuthError::Malformed(e.to_string()))?;
        if !self.settings.algorithms.contains(&header.alg) {
            return Err(OAuthError::Algorithm(format!("{:?}", header.alg)));
        }
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_audience(&[&self.settings.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.validate_nbf = true;
        validation.leeway = self.settings.clock_skew.as_secs();
        let keys = self
            .keys
            .keys_for(header.kid.as_deref(), header.alg)
            .await?;
        // Several keys only for a token without `kid`: the first that verifies it counts.
        let mut outcome = Err(OAuthError::Signature);
        for key in keys {
            outcome = jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation)
                .map_err(|e| self.refusal(e.into_kind()));
            if !matches!(outcome, Err(OAuthError::Signature)) {
                break;
            }
        }
        let claims = outcome?.claims;
        let profiles = self.profiles_of(&claims);
        if profiles.is_empty() {
            return Err(OAuthError::NoProfile {
                claim: self.settings.claim.clone(),
            });
        }
        Ok(Identity {
            subject: claims.get("sub").and_then(Value::as_str).map(str::to_owned),
            profiles,
        })
    }

    fn refusal(&self, kind: ErrorKind) -> OAuthError {
        match kind {
            ErrorKind::InvalidSignature => OAuthError::Signature,
            ErrorKind::ExpiredSignature => OAuthError::Expired,
            ErrorKind::ImmatureSignature => OAuthError::NotYetValid,
            ErrorKind::InvalidAudience => OAuthError::Audience(self.settings.audience.clone()),
            ErrorKind::InvalidIssuer => OAuthError::Issuer(self.settings.issuer.clone()),
            ErrorKind::MissingRequiredClaim(claim) => OAuthError::MissingClaim(claim),
            ErrorKind::InvalidAlgorithm => OAuthError::Algorithm("another algorithm".into()),
            other => OAuthError::Malformed(format!("{other:?}")),
        }
    }

    /// The profiles whose `[[gateway.auth.map]]` value the claim holds, in map order.
    fn profiles_of(&self, claims: &Map<String, Value>) -> Vec<ProfileName> {
        let claim = &self.settings.claim;
        let values = claim_values(claims, claim);
        let mut profiles: Vec<ProfileName> = Vec::new();
        for entry in &self.settings.map {
            if values.contains(&entry.value.as_str()) && !profiles.contains(&entry.profile) {
                profiles.push(entry.profile.clone());
            }
        }
        profiles
    }

    /// The `WWW-Authenticate` value of a refusal (`None`: a request without a token, which
    /// RFC 6750 answers without an error code).
    pub fn challenge(&self, error: Option<&OAuthError>) -> String {
        let mut challenge = String::from("Bearer");
        if let Some(code) = error.and_then(OAuthError::rfc6750) {
            challenge.push_str(&format!(" error=\"{code}\","));
            if let Some(error) = error {
                // Quoted-string safe: no quotes or backslashes, printable ASCII only.
                let description: String = error
                    .to_string()
                    .chars()
                    .map(|c| match c {
                        '"' | '\\' => '\'',
                        c if c.is_ascii_graphic() || c == ' ' => c,
                        _ => '?',
                    })
                    .collect();
                challenge.push_str(&format!(" error_description=\"{description}\","));
            }
        }
        challenge.push_str(&format!(" resource_metadata=\"{}\"", self.metadata_url));
        challenge
    }

    /// The RFC 9728 metadata document; public, so any origin may read it.
    pub fn metadata(&self) -> Response {
        let mut response = Json(self.metadata.clone()).into_response();
        response.headers_mut().insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
        response
    }
}

/// `https://host/mcp` → `https://host/.well-known/oauth-protected-resource/mcp` (RFC 9728 §3.1:
/// the well-known segment goes between the host and the path).
pub fn metadata_url(audience: &str) -> String {
    match reqwest::Url::parse(audience) {
        Ok(url) => format!(
            "{}{METADATA_PATH}{}",
            url.origin().ascii_serialization(),
            url.path().trim_end_matches('/')
        ),
        // Validated at load; unreachable in practice, and still a usable relative reference.
        Err(_) => METADATA_PATH.to_owned(),
    }
}

/// The string values of `claim`: its own key first, else a dotted path into nested objects
/// (`realm_access.roles`). `scope` and `scp` are space-separated strings (RFC 8693 §4.2).
fn claim_values<'a>(claims: &'a Map<String, Value>, claim: &str) -> Vec<&'a str> {
    let found = claims.get(claim).or_else(|| {
        let mut parts = claim.split('.');
        let first = claims.get(parts.next()?)?;
        parts.try_fold(first, |value, part| value.get(part))
    });
    let split = matches!(claim, "scope" | "scp");
    match found {
        Some(Value::String(text)) if split => text.split_whitespace().collect(),
        Some(Value::String(text)) => vec![text.as_str()],
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Whether a bearer token has the shape of a JWS (three base64url parts): only such tokens
/// are checked as IdP tokens; anything else is an unknown static token.
pub fn looks_like_jwt(token: &str) -> bool {
    let parts: Vec<&str> = token.split('.').collect();
    parts.len() == 3
        && parts[..2].iter().all(|p| !p.is_empty())
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_values_read_scopes_lists_and_nested_paths() {
        let claims: Map<String, Value> = serde_json::from_value(json!({
            "scope": "openid tools:ops  tools:read",
            "groups": ["ops", 7, "dev"],
            "realm_access": {"roles": ["admin"]},
            "https://example.com/roles": ["namespaced"],
            "name": "a b",
        }))
        .unwrap();
        assert_eq!(
            claim_values(&claims, "scope"),
            ["openid", "tools:ops", "tools:read"]
        );
        assert_eq!(claim_values(&claims, "groups"), ["ops", "dev"]);
        assert_eq!(claim_values(&claims, "realm_access.roles"), ["admin"]);
        assert_eq!(
            claim_values(&claims, "https://example.com/roles"),
            ["namespaced"]
        );
        assert_eq!(claim_values(&claims, "name"), ["a b"]);
        assert!(claim_values(&claims, "missing.path").is_empty());
    }

    #[test]
    fn metadata_sits_between_host_and_path() {
        assert_eq!(
            metadata_url("https://tg.example/mcp"),
            "https://tg.example/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            metadata_url("http://127.0.0.1:8080/"),
            "http://127.0.0.1:8080/.well-known/oauth-protected-resource"
        );
    }

    #[test]
    fn only_three_part_tokens_look_like_jwts() {
        assert!(looks_like_jwt("eyJh.eyJz.c2ln"));
        assert!(
            looks_like_jwt("eyJh.eyJz."),
            "alg none has an empty signature"
        );
        assert!(!looks_like_jwt("ops-secret-token"));
        assert!(!looks_like_jwt("a.b"));
        assert!(!looks_like_jwt("a b.c.d"));
    }
}
