//! The identity provider's signing keys: discovered, fetched within a deadline, cached, and refetched at a bounded rate.
//!
//! Keys are read without waiting. A fetch happens when none were ever fetched, when they are
//! older than `jwks_max_age_secs`, or when a token names a `kid` the cache lacks, but never
//! sooner than `jwks_min_refresh_secs` after the previous attempt: a flood of tokens with
//! made-up `kid`s costs the IdP at most one request per interval. One fetch runs at a time
//! and the callers that wanted it share its outcome; each waits at most a few fetch timeouts.

use std::{
    sync::{Arc, RwLock},
    time::{Duration, Instant},
};

use jsonwebtoken::{
    Algorithm, DecodingKey,
    jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse},
};
use serde_json::Value;

use super::OAuthError;
use crate::config::AuthSettings;

/// Largest metadata or key set document read from the IdP.
const MAX_DOCUMENT_BYTES: usize = 512 * 1024;

/// One usable public key.
pub struct Key {
    pub kid: Option<String>,
    /// The algorithms this key may verify: its `alg`, else those of its type and curve.
    algorithms: Vec<Algorithm>,
    pub key: DecodingKey,
}

impl Key {
    fn from_jwk(jwk: &Jwk) -> Option<Self> {
        if matches!(
            jwk.common.public_key_use,
            Some(PublicKeyUse::Encryption | PublicKeyUse::Other(_))
        ) {
            return None;
        }
        let by_type: Vec<Algorithm> = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => crate::config::ASYMMETRIC
                .into_iter()
                .filter(|a| a.family() == jsonwebtoken::AlgorithmFamily::Rsa)
                .collect(),
            AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
                EllipticCurve::P256 => vec![Algorithm::ES256],
                EllipticCurve::P384 => vec![Algorithm::ES384],
                _ => return None,
            },
            AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
                vec![Algorithm::EdDSA]
            }
            // Symmetric keys are never taken from a key set: a verifier holds public keys only.
            _ => return None,
        };
        let algorithms = match jwk.common.key_algorithm {
            None => by_type,
            Some(alg) => {
                let named: Algorithm = alg.to_string().parse().ok()?;
                if !by_type.contains(&named) {
                    return None;
                }
                vec![named]
            }
        };
        let key = DecodingKey::from_jwk(jwk).ok()?;
        Some(Self {
            kid: jwk.common.key_id.clone(),
            algorithms,
            key,
        })
    }

    fn fits(&self, kid: Option<&str>, alg: Algorithm) -> bool {
        self.algorithms.contains(&alg) && (kid.is_none() || self.kid.as_deref() == kid)
    }
}

/// The keys of one successful fetch.
#[derive(Default)]
struct Keys {
    keys: Vec<Arc<Key>>,
    fetched: Option<Instant>,
}

impl Keys {
    fn matching(&self, kid: Option<&str>, alg: Algorithm) -> Vec<Arc<Key>> {
        self.keys
            .iter()
            .filter(|key| key.fits(kid, alg))
            .cloned()
            .collect()
    }

    fn fresh(&self, max_age: Duration) -> bool {
        self.fetched.is_some_and(|at| at.elapsed() < max_age)
    }
}

/// What the one fetch at a time remembers.
#[derive(Default)]
struct Fetching {
    /// The discovered (or configured) key set URL.
    jwks_uri: Option<String>,
    last_attempt: Option<Instant>,
    last_error: Option<String>,
}

pub struct KeyCache {
    client: reqwest::Client,
    issuer: String,
    fetch_timeout: Duration,
    min_refresh: Duration,
    max_age: Duration,
    current: RwLock<Arc<Keys>>,
    fetching: tokio::sync::Mutex<Fetching>,
}

impl KeyCache {
    pub fn new(settings: &AuthSettings) -> Result<Self, OAuthError> {
        let client = reqwest::Client::builder()
            .connect_timeout(settings.fetch_timeout)
            .timeout(settings.fetch_timeout)
            .redirect(reqwest::redirect::Policy::limited(3))
            .build()
            .map_err(|e| OAuthError::Unreachable(format!("no HTTP client: {e}")))?;
        Ok(Self {
            client,
            issuer: settings.issuer.clone(),
            fetch_timeout: settings.fetch_timeout,
            min_refresh: settings.jwks_min_refresh,
            max_age: settings.jwks_max_age,
            current: RwLock::default(),
            fetching: tokio::sync::Mutex::new(Fetching {
                jwks_uri: settings.jwks_uri.clone(),
                ..Fetching::default()
            }),
        })
    }

    fn snapshot(&self) -> Arc<Keys> {
        // A poisoned lock still holds a whole `Arc`: nothing is half-written.
        match self.current.read() {
            Ok(keys) => keys.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The keys that may have signed a token with this `kid` (`None`: every key of the
    /// algorithm) and `alg`, fetching first when the cache is empty, stale, or lacks the `kid`.
    pub async fn keys_for(
        &self,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<Vec<Arc<Key>>, OAuthError> {
        let keys = self.snapshot();
        let found = keys.matching(kid, alg);
        if !found.is_empty() && keys.fresh(self.max_age) {
            return Ok(found);
        }
        // Discovery plus the key set: two requests, each bounded; a waiter gives up after
        // the fetch ahead of it and its own.
        let wait = self.fetch_timeout * 5;
        let Ok(mut fetching) = tokio::time::timeout(wait, self.fetching.lock()).await else {
            return Err(OAuthError::Unreachable(
                "the identity provider's keys are still being fetched".into(),
            ));
        };
        // Someone else's fetch may have brought the key meanwhile.
        let keys = self.snapshot();
        let found = keys.matching(kid, alg);
        if !found.is_empty() && keys.fresh(self.max_age) {
            return Ok(found);
        }
        let allowed = fetching
            .last_attempt
            .is_none_or(|at| at.elapsed() >= self.min_refresh);
        if allowed {
            fetching.last_attempt = Some(Instant::now());
            match self.fetch(&mut fetching).await {
                Ok(fetched) => {
                    tracing::info!(
                        keys = fetched.keys.len(),
                        "fetched the identity provider's signing keys"
                    );
                    fetching.last_error = None;
                    let fetched = Arc::new(fetched);
                    match self.current.write() {
                        Ok(mut current) => *current = fetched.clone(),
                        Err(poisoned) => *poisoned.into_inner() = fetched.clone(),
                    }
                    let found = fetched.matching(kid, alg);
                    return match found.is_empty() {
                        true => Err(unknown(kid, alg)),
                        false => Ok(found),
                    };
                }
                Err(error) => {
                    tracing::warn!(code = "AUTH_IDP_UNAVAILABLE", "{error}");
                    fetching.last_error = Some(error);
                }
            }
        }
        // No fetch now (too soon, or it failed): stale keys still verify what they signed.
        if !found.is_empty() {
            return Ok(found);
        }
        match (&fetching.last_error, keys.fetched) {
            (Some(error), None) => Err(OAuthError::Unreachable(error.clone())),
            _ => Err(unknown(kid, alg)),
        }
    }

    async fn fetch(&self, fetching: &mut Fetching) -> Result<Keys, String> {
        let jwks_uri = match &fetching.jwks_uri {
            Some(uri) => uri.clone(),
            None => {
                let uri = self.discover().await?;
                fetching.jwks_uri = Some(uri.clone());
                uri
            }
        };
        let document = self.get_json(&jwks_uri).await?;
        let Some(entries) = document.get("keys").and_then(Value::as_array) else {
            return Err(format!("the key set at {jwks_uri} has no `keys` array"));
        };
        let keys: Vec<Arc<Key>> = entries
            .iter()
            .filter_map(|entry| {
                let key = serde_json::from_value::<Jwk>(entry.clone())
                    .ok()
                    .and_then(|jwk| Key::from_jwk(&jwk));
                if key.is_none() {
                    tracing::debug!(kid = ?entry.get("kid"), "skipped a key toolgate cannot verify with");
                }
                key.map(Arc::new)
            })
            .collect();
        Ok(Keys {
            keys,
            fetched: Some(Instant::now()),
        })
    }

    /// The key set URL from the issuer's metadata: RFC 8414 first, then OpenID discovery.
    /// The document must name the configured issuer, as both specifications require.
    async fn discover(&self) -> Result<String, String> {
        let url = reqwest::Url::parse(&self.issuer)
            .map_err(|e| format!("issuer {:?} is not a URL: {e}", self.issuer))?;
        let origin = url.origin().ascii_serialization();
        let path = url.path().trim_end_matches('/');
        let candidates = [
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!(
                "{}/.well-known/openid-configuration",
                self.issuer.trim_end_matches('/')
            ),
        ];
        let mut problems = Vec::new();
        for candidate in candidates {
            match self.get_json(&candidate).await {
                Ok(metadata) => {
                    if metadata.get("issuer").and_then(Value::as_str) != Some(&self.issuer) {
                        problems.push(format!(
                            "{candidate} names another issuer than {:?}",
                            self.issuer
                        ));
                        continue;
                    }
                    match metadata.get("jwks_uri").and_then(Value::as_str) {
                        Some(uri) => {
                            crate::config::check_auth_url(uri, true)
                                .map_err(|m| format!("{candidate}: jwks_uri: {m}"))?;
                            return Ok(uri.to_owned());
                        }
                        None => problems.push(format!("{candidate} has no jwks_uri")),
                    }
                }
                Err(problem) => problems.push(problem),
            }
        }
        Err(format!(
            "could not discover the identity provider's keys (set gateway.auth.jwks_uri): {}",
            problems.join("; ")
        ))
    }

    /// GETs a JSON document within the fetch timeout and [`MAX_DOCUMENT_BYTES`].
    async fn get_json(&self, url: &str) -> Result<Value, String> {
        let mut response = self
            .client
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| format!("{url}: {}", e.without_url()))?;
        if !response.status().is_success() {
            return Err(format!("{url}: status {}", response.status()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| format!("{url}: {}", e.without_url()))?
        {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(format!("{url}: larger than {MAX_DOCUMENT_BYTES} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|e| format!("{url}: not JSON: {e}"))
    }
}

fn unknown(kid: Option<&str>, alg: Algorithm) -> OAuthError {
    OAuthError::UnknownKey(match kid {
        Some(kid) => format!("no {alg:?} signing key with kid {kid:?}"),
        None => format!("no {alg:?} signing key"),
    })
}
