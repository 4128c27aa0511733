//! Which profile an HTTP request is for: its path and bearer token (static, or an IdP's JWT), and the refusals.

use axum::{
    http::{HeaderMap, HeaderValue, StatusCode, header::AUTHORIZATION, header::WWW_AUTHENTICATE},
    response::{IntoResponse, Response},
};
use sha2::{Digest, Sha256};
use std::sync::Arc;

use super::oauth::{Identity, OAuth, OAuthError, looks_like_jwt};
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
    /// Profiles a token selects (a static one, or an IdP token through the claim map):
    /// callers without a token never get them.
    guarded: Vec<ProfileName>,
    require_profile: bool,
    /// No profile lists tokens and no IdP is configured, or `gateway.http.allow_anonymous`.
    anonymous: bool,
    /// `[gateway.auth]`: IdP tokens, checked when no static token matches.
    oauth: Option<Arc<OAuth>>,
}

/// The profile a request is for, and who it is when an IdP token said so.
#[derive(Debug)]
pub struct Selected {
    pub profile: ProfileName,
    pub subject: Option<String>,
}

/// What a request's bearer token turned out to be.
enum Bearer {
    None,
    Static(ProfileName),
    Idp(Identity),
}

impl Access {
    pub fn new(config: &Config, oauth: Option<Arc<OAuth>>) -> Self {
        let mut tokens = TokenSet::default();
        for profile in &config.profiles {
            for token in &profile.tokens {
                tokens.insert(token.expose(), profile.name.clone());
            }
        }
        let mut guarded: Vec<ProfileName> = config
            .profiles
            .iter()
            .filter(|p| !p.tokens.is_empty())
            .map(|p| p.name.clone())
            .collect();
        if let Some(oauth) = &oauth {
            for profile in oauth.mapped_profiles() {
                if !guarded.contains(profile) {
                    guarded.push(profile.clone());
                }
            }
        }
        let anonymous = (guarded.is_empty() && oauth.is_none()) || config.http.allow_anonymous;
        if !anonymous {
            for profile in config
                .profiles
                .iter()
                .filter(|p| !guarded.contains(&p.name))
            {
                if profile.name.as_str() != ProfileName::DEFAULT {
                    tracing::warn!(
                        profile = %profile.name,
                        "no token selects this profile while others are guarded: HTTP callers cannot select it (set gateway.http.allow_anonymous = true to open it)"
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
            oauth,
        }
    }

    /// A 401 for a caller without a token; with an IdP, it names the resource metadata.
    fn unauthorized(&self, message: impl Into<String>) -> Refusal {
        let mut refusal = Refusal::unauthorized(message);
        if let Some(oauth) = &self.oauth {
            refusal.challenge = Some(oauth.challenge(None));
        }
        refusal
    }

    /// A 401 for a token that is not valid.
    fn bad_token(&self, message: impl Into<String>) -> Refusal {
        let mut refusal = Refusal::bad_token(message);
        if let Some(oauth) = &self.oauth {
            let error = OAuthError::Malformed("unknown bearer token".into());
            refusal.challenge = Some(oauth.challenge(Some(&error)));
        }
        refusal
    }

    /// The refusal of an IdP token, logged with its code (never the token).
    fn idp_refusal(&self, oauth: &OAuth, error: OAuthError) -> Refusal {
        tracing::info!(
            code = error.code(),
            "refused an identity provider token: {error}"
        );
        let mut refusal = Refusal::new(error.status(), format!("{}: {error}", error.code()));
        if error.status() != StatusCode::SERVICE_UNAVAILABLE {
            refusal.challenge = Some(oauth.challenge(Some(&error)));
        }
        refusal
    }

    async fn bearer(&self, headers: &HeaderMap) -> Result<Bearer, Refusal> {
        let token = match bearer_token(headers) {
            Ok(Some(token)) => token,
            Ok(None) => return Ok(Bearer::None),
            Err(()) => {
                return Err(self.bad_token("the Authorization header must be `Bearer <token>`"));
            }
        };
        if let Some(profile) = self.tokens.get(token) {
            return Ok(Bearer::Static(profile.clone()));
        }
        match &self.oauth {
            Some(oauth) if looks_like_jwt(token) => match oauth.verify(token).await {
                Ok(identity) => Ok(Bearer::Idp(identity)),
                Err(error) => Err(self.idp_refusal(oauth, error)),
            },
            _ => Err(self.bad_token("unknown bearer token")),
        }
    }

    /// Which profile this request is for, or the refusal to send.
    pub async fn select(
        &self,
        path_profile: Option<&str>,
        headers: &HeaderMap,
    ) -> Result<Selected, Refusal> {
        let bearer = self.bearer(headers).await?;
        if matches!(bearer, Bearer::None) && !self.anonymous {
            return Err(self.unauthorized(
                "this gateway requires a bearer token: profiles are guarded by tokens, and callers without one are refused",
            ));
        }
        let (granted, subject): (&[ProfileName], Option<String>) = match &bearer {
            Bearer::None => (&[], None),
            Bearer::Static(profile) => (std::slice::from_ref(profile), None),
            Bearer::Idp(identity) => (&identity.profiles, identity.subject.clone()),
        };
        let selected = |profile: &ProfileName| Selected {
            profile: profile.clone(),
            subject: subject.clone(),
        };
        match path_profile {
            Some(name) => {
                let Some(profile) = self.profiles.iter().find(|p| p.as_str() == name) else {
                    return Err(Refusal::new(
                        StatusCode::NOT_FOUND,
                        format!("unknown profile {name:?}"),
                    ));
                };
                match &bearer {
                    Bearer::None if self.guarded.contains(profile) => {
                        Err(self.unauthorized(format!("profile {name:?} requires a bearer token")))
                    }
                    Bearer::None => Ok(selected(profile)),
                    _ if granted.contains(profile) => Ok(selected(profile)),
                    Bearer::Static(_) => Err(Refusal::new(
                        StatusCode::FORBIDDEN,
                        format!("this bearer token does not grant profile {name:?}"),
                    )),
                    Bearer::Idp(_) => {
                        let error = OAuthError::NotGranted(name.to_owned());
                        match &self.oauth {
                            Some(oauth) => Err(self.idp_refusal(oauth, error)),
                            None => Err(Refusal::new(StatusCode::FORBIDDEN, error.to_string())),
                        }
                    }
                }
            }
            None => match granted.first() {
                Some(profile) => Ok(selected(profile)),
                None => {
                    let default = ProfileName::default_profile();
                    if self.require_profile || self.guarded.contains(&default) {
                        return Err(self.unauthorized(
                            "this gateway requires a profile: use /mcp/{profile} or a bearer token",
                        ));
                    }
                    Ok(selected(&default))
                }
            },
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
    /// The `WWW-Authenticate` challenge a 401 (or an IdP token's 403) carries (RFC 6750).
    challenge: Option<String>,
}

impl Refusal {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        let challenge =
            (status == StatusCode::UNAUTHORIZED).then(|| r#"Bearer realm="toolgate""#.to_owned());
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
            challenge: Some(r#"Bearer realm="toolgate", error="invalid_token""#.to_owned()),
            ..Self::new(StatusCode::UNAUTHORIZED, message)
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let mut response = (self.status, format!("{}\n", self.message)).into_response();
        if let Some(challenge) = self.challenge
            && let Ok(value) = HeaderValue::from_str(&challenge)
        {
            response.headers_mut().insert(WWW_AUTHENTICATE, value);
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
