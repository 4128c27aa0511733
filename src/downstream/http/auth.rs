//! Which profile an HTTP request is for: its path and bearer token, and the refusals.

use axum::{
    http::{HeaderMap, HeaderValue, StatusCode, header::AUTHORIZATION, header::WWW_AUTHENTICATE},
    response::{IntoResponse, Response},
};
use sha2::{Digest, Sha256};

use crate::config::{Config, ProfileName};

/// SHA-256 digests of bearer tokens, compared in constant time: digests have one length, so
/// the comparison reveals nothing about a token's length either.
pub struct TokenSet<T> {
    entries: Vec<([u8; 32], T)>,
}

impl<T> Default for TokenSet<T> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
        }
    }
}

impl<T> TokenSet<T> {
    pub fn insert(&mut self, token: &str, value: T) {
        self.entries
            .push((Sha256::digest(token.as_bytes()).into(), value));
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, token: &str) -> Option<&T> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        // Look at every entry whatever matches, so timing does not tell which one did.
        let mut found = None;
        for (candidate, value) in &self.entries {
            let difference = candidate
                .iter()
                .zip(digest.iter())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b));
            if difference == 0 {
                found = Some(value);
            }
        }
        found
    }
}

/// The profiles, their tokens, and whether callers without a token are let in.
pub struct Access {
    profiles: Vec<ProfileName>,
    tokens: TokenSet<ProfileName>,
    guarded: Vec<ProfileName>,
    require_profile: bool,
    /// No profile lists tokens, or `gateway.http.allow_anonymous` is set.
    anonymous: bool,
}

impl Access {
    pub fn new(config: &Config) -> Self {
        let mut tokens = TokenSet::default();
        for profile in &config.profiles {
            for token in &profile.tokens {
                tokens.insert(token.expose(), profile.name.clone());
            }
        }
        let guarded: Vec<ProfileName> = config
            .profiles
            .iter()
            .filter(|p| !p.tokens.is_empty())
            .map(|p| p.name.clone())
            .collect();
        let anonymous = guarded.is_empty() || config.http.allow_anonymous;
        if !anonymous {
            for profile in config.profiles.iter().filter(|p| p.tokens.is_empty()) {
                if profile.name.as_str() != ProfileName::DEFAULT {
                    tracing::warn!(
                        profile = %profile.name,
                        "this profile lists no tokens while others do: HTTP callers cannot select it (set gateway.http.allow_anonymous = true to open it)"
                    );
                }
            }
        }
        Self {
            profiles: config.profiles.iter().map(|p| p.name.clone()).collect(),
            tokens,
            guarded,
            require_profile: config.require_profile,
            anonymous,
        }
    }

    /// Which profile this request is for, or the refusal to send.
    pub fn select(
        &self,
        path_profile: Option<&str>,
        headers: &HeaderMap,
    ) -> Result<ProfileName, Refusal> {
        let token_profile = match bearer_token(headers) {
            Ok(Some(token)) => match self.tokens.get(token) {
                Some(profile) => Some(profile),
                None => return Err(Refusal::bad_token("unknown bearer token")),
            },
            Ok(None) => None,
            Err(()) => {
                return Err(Refusal::bad_token(
                    "the Authorization header must be `Bearer <token>`",
                ));
            }
        };
        if token_profile.is_none() && !self.anonymous {
            return Err(Refusal::unauthorized(
                "this gateway requires a bearer token: profiles list tokens, and callers without one are refused",
            ));
        }
        match (path_profile, token_profile) {
            (Some(name), token_profile) => {
                let Some(profile) = self.profiles.iter().find(|p| p.as_str() == name) else {
                    return Err(Refusal::new(
                        StatusCode::NOT_FOUND,
                        format!("unknown profile {name:?}"),
                    ));
                };
                match token_profile {
                    Some(owner) if owner != profile => Err(Refusal::new(
                        StatusCode::FORBIDDEN,
                        format!("this bearer token does not grant profile {name:?}"),
                    )),
                    None if self.guarded.contains(profile) => Err(Refusal::unauthorized(format!(
                        "profile {name:?} requires a bearer token"
                    ))),
                    _ => Ok(profile.clone()),
                }
            }
            (None, Some(profile)) => Ok(profile.clone()),
            (None, None) => {
                let default = ProfileName::default_profile();
                if self.require_profile || self.guarded.contains(&default) {
                    return Err(Refusal::unauthorized(
                        "this gateway requires a profile: use /mcp/{profile} or a bearer token",
                    ));
                }
                Ok(default)
            }
        }
    }
}

/// `Ok(None)` without an Authorization header; `Err` for one that is not a bearer token.
pub(super) fn bearer_token(headers: &HeaderMap) -> Result<Option<&str>, ()> {
    let Some(value) = headers.get(AUTHORIZATION) else {
        return Ok(None);
    };
    let value = value.to_str().map_err(|_| ())?;
    let (scheme, token) = value.split_once(' ').ok_or(())?;
    if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() {
        Ok(Some(token.trim()))
    } else {
        Err(())
    }
}

/// Why a request is refused before any MCP handling: a status and a one-line explanation.
#[derive(Debug)]
pub struct Refusal {
    pub status: StatusCode,
    pub message: String,
    /// The `WWW-Authenticate` challenge a 401 carries (RFC 6750).
    challenge: Option<&'static str>,
}

impl Refusal {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        let challenge =
            (status == StatusCode::UNAUTHORIZED).then_some(r#"Bearer realm="toolgate""#);
        Self {
            status,
            message: message.into(),
            challenge,
        }
    }

    /// 401 for a caller that sent no token.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, message)
    }

    /// 401 for a caller whose token is unknown or malformed.
    pub fn bad_token(message: impl Into<String>) -> Self {
        Self {
            challenge: Some(r#"Bearer realm="toolgate", error="invalid_token""#),
            ..Self::new(StatusCode::UNAUTHORIZED, message)
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let mut response = (self.status, format!("{}\n", self.message)).into_response();
        if let Some(challenge) = self.challenge {
            response
                .headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_401_carries_a_bearer_challenge() {
        for refusal in [Refusal::unauthorized("no"), Refusal::bad_token("bad")] {
            let response = refusal.into_response();
            assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
            let challenge = response.headers().get(WWW_AUTHENTICATE).unwrap();
            assert!(challenge.to_str().unwrap().starts_with("Bearer "));
        }
        let forbidden = Refusal::new(StatusCode::FORBIDDEN, "no").into_response();
        assert!(forbidden.headers().get(WWW_AUTHENTICATE).is_none());
    }

    #[test]
    fn tokens_match_exactly() {
        let mut set = TokenSet::default();
        set.insert("alpha", 1);
        set.insert("beta", 2);
        assert_eq!(set.get("beta"), Some(&2));
        assert_eq!(set.get("alph"), None);
        assert_eq!(set.get("alphaa"), None);
    }
}
