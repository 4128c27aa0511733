//! `[servers.NAME.auth]`: how toolgate signs in to a remote (`url`) server as an OAuth client.
//!
//! `type = "oauth"` is the authorization-code flow with PKCE that `toolgate login NAME` runs
//! once (tokens are then stored and refreshed); `type = "client_credentials"` is a machine
//! identity that needs no login (a client secret, or a private key for `private_key_jwt`).

use serde::Deserialize;

use super::{ConfigError, Secret};

/// The `auth` table as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUpstreamAuth {
    /// `oauth` or `client_credentials`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Scopes to ask for; empty means the server's challenge or metadata decides.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// A pre-registered client (else the client metadata document, else registration).
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// The HTTPS URL of toolgate's client metadata document (CIMD), used as the client id
    /// where the authorization server supports it.
    pub client_metadata_url: Option<String>,
    /// `client_credentials` with `private_key_jwt`: the PEM key, as a file or as text.
    pub private_key_file: Option<String>,
    pub private_key: Option<String>,
    /// `ES256` (default), `ES384`, `RS256`, `RS384` or `RS512`.
    pub signing_algorithm: Option<String>,
    /// The loopback port `toolgate login` listens on for the redirect (default: any free).
    pub redirect_port: Option<u16>,
}

/// A validated `auth` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamAuth {
    OAuth(OAuthSettings),
    ClientCredentials(ClientCredentialsSettings),
}

/// `type = "oauth"`: authorization code + PKCE, signed in with `toolgate login`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthSettings {
    pub scopes: Vec<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<Secret>,
    pub client_metadata_url: Option<String>,
    pub redirect_port: Option<u16>,
    /// `gateway.token_dir`, when set (else the user's data directory).
    pub token_dir: Option<std::path::PathBuf>,
}

/// `type = "client_credentials"`: a machine identity, no login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCredentialsSettings {
    pub client_id: String,
    pub scopes: Vec<String>,
    pub credential: ClientCredential,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientCredential {
    /// `client_secret_basic` or `client_secret_post`, as the server supports.
    Secret(Secret),
    /// `private_key_jwt`: a PEM key (RSA or EC) and its algorithm.
    PrivateKey { pem: Secret, algorithm: String },
}

const ALGORITHMS: [&str; 5] = ["ES256", "ES384", "RS256", "RS384", "RS512"];

/// Checks `raw` (the table at `key`); `expand` resolves `${VAR}`s of a value at a key.
pub(super) fn validate(
    raw: &RawUpstreamAuth,
    key: &str,
    invalid: &dyn Fn(String, String) -> ConfigError,
    expand: &dyn Fn(&str, String) -> Result<String, ConfigError>,
) -> Result<UpstreamAuth, ConfigError> {
    let opt = |value: &Option<String>, field: &str| -> Result<Option<String>, ConfigError> {
        value
            .as_deref()
            .map(|v| expand(v, format!("{key}.{field}")))
            .transpose()
    };
    let client_id = opt(&raw.client_id, "client_id")?;
    let client_secret = opt(&raw.client_secret, "client_secret")?;
    let not_for = |field: &str, present: bool, kind: &str| {
        if present {
            Err(invalid(
                format!("{key}.{field}"),
                format!("`{field}` does not apply to type = \"{kind}\""),
            ))
        } else {
            Ok(())
        }
    };
    match raw.kind.as_deref() {
        Some("oauth") => {
            not_for("private_key", raw.private_key.is_some(), "oauth")?;
            not_for("private_key_file", raw.private_key_file.is_some(), "oauth")?;
            not_for(
                "signing_algorithm",
                raw.signing_algorithm.is_some(),
                "oauth",
            )?;
            if client_secret.is_some() && client_id.is_none() {
                return Err(invalid(
                    format!("{key}.client_secret"),
                    "a client secret needs the `client_id` it belongs to".into(),
                ));
            }
            let client_metadata_url = opt(&raw.client_metadata_url, "client_metadata_url")?;
            if let Some(url) = &client_metadata_url
                && !url.starts_with("https://")
            {
                return Err(invalid(
                    format!("{key}.client_metadata_url"),
                    format!("expected an https:// URL, found {url:?}"),
                ));
            }
            Ok(UpstreamAuth::OAuth(OAuthSettings {
                scopes: raw.scopes.clone(),
                client_id,
                client_secret: client_secret.map(Secret::new),
                client_metadata_url,
                redirect_port: raw.redirect_port,
                token_dir: None,
            }))
        }
        Some("client_credentials") => {
            not_for(
                "client_metadata_url",
                raw.client_metadata_url.is_some(),
                "client_credentials",
            )?;
            not_for(
                "redirect_port",
                raw.redirect_port.is_some(),
                "client_credentials",
            )?;
            let Some(client_id) = client_id else {
                return Err(invalid(
                    format!("{key}.client_id"),
                    "type = \"client_credentials\" needs a `client_id`".into(),
                ));
            };
            let pem = match (&raw.private_key, &raw.private_key_file) {
                (Some(_), Some(_)) => {
                    return Err(invalid(
                        key.to_owned(),
                        "expected one of `private_key` or `private_key_file`, found both".into(),
                    ));
                }
                (Some(text), None) => Some(expand(text, format!("{key}.private_key"))?),
                (None, Some(path)) => {
                    let path = expand(path, format!("{key}.private_key_file"))?;
                    Some(std::fs::read_to_string(&path).map_err(|e| {
                        invalid(
                            format!("{key}.private_key_file"),
                            format!("cannot read {path:?}: {e}"),
                        )
                    })?)
                }
                (None, None) => None,
            };
            let credential = match (client_secret, pem) {
                (Some(_), Some(_)) => {
                    return Err(invalid(
                        key.to_owned(),
                        "expected a `client_secret` or a private key, found both".into(),
                    ));
                }
                (Some(secret), None) => {
                    not_for(
                        "signing_algorithm",
                        raw.signing_algorithm.is_some(),
                        "client_credentials with a client_secret",
                    )?;
                    ClientCredential::Secret(Secret::new(secret))
                }
                (None, Some(pem)) => {
                    let algorithm = raw
                        .signing_algorithm
                        .clone()
                        .unwrap_or_else(|| "ES256".to_owned())
                        .to_ascii_uppercase();
                    if !ALGORITHMS.contains(&algorithm.as_str()) {
                        return Err(invalid(
                            format!("{key}.signing_algorithm"),
                            format!(
                                "expected one of {}, found {algorithm:?}",
                                ALGORITHMS.join(", ")
                            ),
                        ));
                    }
                    ClientCredential::PrivateKey {
                        pem: Secret::new(pem),
                        algorithm,
                    }
                }
                (None, None) => {
                    return Err(invalid(
                        key.to_owned(),
                        "type = \"client_credentials\" needs a `client_secret`, `private_key` or `private_key_file`".into(),
                    ));
                }
            };
            Ok(UpstreamAuth::ClientCredentials(ClientCredentialsSettings {
                client_id,
                scopes: raw.scopes.clone(),
                credential,
            }))
        }
        Some(other) => Err(invalid(
            format!("{key}.type"),
            format!("expected \"oauth\" or \"client_credentials\", found {other:?}"),
        )),
        None => Err(invalid(
            format!("{key}.type"),
            "missing: expected \"oauth\" or \"client_credentials\"".into(),
        )),
    }
}
