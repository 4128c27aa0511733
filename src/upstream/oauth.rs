//! toolgate as an OAuth client of its HTTP upstreams (`[servers.NAME.auth]`), on rmcp's `auth` feature.
//!
//! - `type = "oauth"`: `toolgate login NAME` ([`login`]) discovers the authorization server
//!   (RFC 9728 protected-resource metadata from the server's `WWW-Authenticate` challenge or
//!   its well-known URL, then RFC 8414 / OpenID metadata), registers (pre-registered client,
//!   client metadata document, or RFC 7591 registration), runs the authorization-code flow
//!   with PKCE and the RFC 8707 `resource` through a loopback redirect, and stores the tokens
//!   ([`store`]). Connecting then wraps the server's bounded HTTP client in rmcp's
//!   [`AuthClient`], which refreshes a token before it expires and once on a 401.
//! - `type = "client_credentials"`: each connection asks the token endpoint for a token with
//!   the configured secret or signed JWT, and asks again before it expires and when the
//!   server refuses it ([`renew`]); nothing is stored.
//!
//! A server that has no usable token, or whose token was refused and could not be refreshed,
//! or that asks for a scope toolgate was not granted, "needs login" ([`AuthWatch`]): `toolgate
//! check` and `/readyz` say so and its calls fail with `UPSTREAM_AUTH_REQUIRED`, naming the
//! command to run. Tokens are never logged or printed.

pub mod login;
pub mod renew;
pub mod store;

use std::sync::{Arc, Mutex};

use rmcp::transport::auth::{
    AuthClient, AuthorizationManager, ClientCredentialsConfig, JwtSigningAlgorithm,
    OAuthClientConfig, WWWAuthenticateParams,
};
use tokio_util::sync::DropGuard;

use crate::config::{ClientCredential, ServerId, UpstreamAuth};

/// How long a `client_credentials` token request may take.
const TOKEN_REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The command that signs in to `server`.
pub fn login_command(server: &ServerId) -> String {
    format!("toolgate login {server}")
}

/// A `WWW-Authenticate` challenge a server answered with.
#[derive(Debug, Clone)]
pub struct Challenge {
    /// 401 (no or refused token) or 403 (`insufficient_scope`).
    pub status: u16,
    pub header: String,
}

impl Challenge {
    pub fn params(&self, url: &str) -> WWWAuthenticateParams {
        match url::Url::parse(url) {
            Ok(base) => WWWAuthenticateParams::parse(&self.header, &base),
            Err(_) => WWWAuthenticateParams::default(),
        }
    }
}

/// One HTTP server's sign-in state, shared by its connection's HTTP client (which reports
/// challenges and successes) and its [`super::Upstream`] (which reports "needs login").
#[derive(Debug, Default)]
pub struct AuthWatch {
    /// The URL of a server with `auth` (`None` for every other server).
    url: Option<String>,
    /// The token file of an `oauth` server.
    store: Option<store::FileStore>,
    /// The renewer of a `client_credentials` server's current connection.
    renewer: Mutex<Option<Arc<renew::Renewer>>>,
    client_credentials: bool,
    needs_login: Mutex<Option<String>>,
    challenge: Mutex<Option<Challenge>>,
}

impl AuthWatch {
    pub fn for_server(config: &crate::config::ServerConfig) -> Self {
        let crate::config::Transport::Http {
            url,
            auth: Some(auth),
            ..
        } = &config.transport
        else {
            return Self::default();
        };
        let store = match auth {
            UpstreamAuth::OAuth(settings) => {
                store::FileStore::for_url(url, settings.token_dir.as_deref()).ok()
            }
            UpstreamAuth::ClientCredentials(_) => None,
        };
        Self {
            url: Some(url.clone()),
            store,
            client_credentials: matches!(auth, UpstreamAuth::ClientCredentials(_)),
            ..Self::default()
        }
    }

    /// What renews a `client_credentials` server's token on its current connection.
    pub fn renewer(&self) -> Option<Arc<renew::Renewer>> {
        lock(&self.renewer).clone()
    }

    fn set_renewer(&self, renewer: Option<Arc<renew::Renewer>>) {
        *lock(&self.renewer) = renewer;
    }

    fn clear_needs_login(&self) {
        *lock(&self.needs_login) = None;
    }

    /// Why the server needs `toolgate login`, if it does.
    pub fn needs_login(&self) -> Option<String> {
        lock(&self.needs_login).clone()
    }

    pub fn set_needs_login(&self, reason: String) {
        *lock(&self.needs_login) = Some(reason);
    }

    /// The last challenge since the last success.
    pub fn last_challenge(&self) -> Option<Challenge> {
        lock(&self.challenge).clone()
    }

    pub(super) fn saw_challenge(&self, status: u16, header: &str) {
        *lock(&self.challenge) = Some(Challenge {
            status,
            header: header.to_owned(),
        });
    }

    /// A request went through with the current token: whatever was refused before is over.
    pub(super) fn saw_success(&self) {
        *lock(&self.challenge) = None;
        *lock(&self.needs_login) = None;
    }

    /// Turns the last challenge into "needs login" (remembering a scope the server asked
    /// for, so that the next login asks for it too) and returns the reason.
    pub(super) fn refused(&self, server: &ServerId) -> Option<String> {
        let url = self.url.as_deref()?;
        let challenge = self.last_challenge()?;
        let params = challenge.params(url);
        let reason = if challenge.status == 403 && params.is_insufficient_scope() {
            let scope = params.scope.unwrap_or_default();
            let needed: Vec<String> = scope.split_whitespace().map(str::to_owned).collect();
            if !needed.is_empty()
                && let Some(store) = &self.store
                && let Err(error) = store.update(|file| {
                    for scope in needed {
                        if !file.needed_scopes.contains(&scope) {
                            file.needed_scopes.push(scope);
                        }
                    }
                })
            {
                tracing::warn!(server = %server, %error, "could not record the scope the server asked for");
            }
            format!(
                "server \"{server}\" requires scope \"{scope}\", which toolgate was not granted: run `{}`",
                login_command(server)
            )
        } else if self.client_credentials {
            // Its renewer already asked for a new token (and logged why it could not).
            format!(
                "server \"{server}\" refused toolgate's client_credentials token and a new one could not be obtained: check [servers.{server}.auth] and the log"
            )
        } else {
            format!(
                "server \"{server}\" refused toolgate's token and refreshing it failed: run `{}`",
                login_command(server)
            )
        };
        self.set_needs_login(reason.clone());
        Some(reason)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `client` (the server's bounded HTTP client) wrapped in rmcp's [`AuthClient`] for `auth`,
/// and for `client_credentials` the guard of the task renewing its token (kept with the
/// connection). An `oauth` server without stored tokens is marked as needing login in `watch`.
pub(super) async fn authorize<C>(
    server: &ServerId,
    url: &str,
    auth: &UpstreamAuth,
    client: C,
    watch: &Arc<AuthWatch>,
) -> Result<(AuthClient<C>, Option<DropGuard>), String> {
    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|e| format!("OAuth setup for {url} failed: {e}"))?;
    match auth {
        UpstreamAuth::OAuth(settings) => {
            let needs_login = |what: &str| {
                let reason = format!(
                    "server \"{server}\" {what}: run `{}`",
                    login_command(server)
                );
                watch.set_needs_login(reason.clone());
                reason
            };
            let store = store::FileStore::for_url(url, settings.token_dir.as_deref())
                .map_err(|e| e.to_string())?;
            let file = store.read().map_err(|e| e.to_string())?;
            if file
                .credentials
                .as_ref()
                .is_none_or(|c| c.token_response.is_none())
            {
                return Err(needs_login("needs login (no stored tokens)"));
            }
            manager.set_credential_store(store);
            match manager.initialize_from_store().await {
                Ok(true) => {}
                Ok(false) => {
                    return Err(needs_login(
                        "needs login (its authorization server changed since the last login)",
                    ));
                }
                Err(e) => return Err(format!("OAuth discovery for {url} failed: {e}")),
            }
            // Refreshing authenticates as the client that logged in: a registered client's
            // secret is in the token file, a pre-registered one's in the config.
            let client_id = file.client_id.clone().unwrap_or_default();
            let secret = match (&settings.client_id, &settings.client_secret) {
                (Some(id), Some(secret)) if *id == client_id => Some(secret.expose().to_owned()),
                _ => file.client_secret.clone(),
            };
            if let Some(secret) = secret {
                manager
                    .configure_client(
                        OAuthClientConfig::new(client_id, url).with_client_secret(secret),
                    )
                    .map_err(|e| format!("OAuth client for {url}: {e}"))?;
            }
        }
        UpstreamAuth::ClientCredentials(settings) => {
            let resolution = manager
                .resolve_metadata()
                .await
                .map_err(|e| format!("OAuth discovery for {url} failed: {e}"))?;
            manager.set_metadata(resolution.metadata);
            let config = client_credentials(settings, url)?;
            manager
                .validate_client_credentials_metadata(&config)
                .and_then(|()| manager.configure_client_credentials(&config))
                .map_err(|e| format!("OAuth client credentials for {url}: {e}"))?;
            let (client, renewal) =
                renew::start(server, url, config, manager, client, watch).await?;
            return Ok((client, Some(renewal)));
        }
    }
    Ok((AuthClient::new(client, manager), None))
}

fn client_credentials(
    settings: &crate::config::ClientCredentialsSettings,
    url: &str,
) -> Result<ClientCredentialsConfig, String> {
    Ok(match &settings.credential {
        ClientCredential::Secret(secret) => ClientCredentialsConfig::ClientSecret {
            client_id: settings.client_id.clone(),
            client_secret: secret.expose().to_owned(),
            scopes: settings.scopes.clone(),
            resource: Some(url.to_owned()),
        },
        ClientCredential::PrivateKey { pem, algorithm } => {
            let signing_algorithm = match algorithm.as_str() {
                "ES256" => JwtSigningAlgorithm::ES256,
                "ES384" => JwtSigningAlgorithm::ES384,
                "RS256" => JwtSigningAlgorithm::RS256,
                "RS384" => JwtSigningAlgorithm::RS384,
                "RS512" => JwtSigningAlgorithm::RS512,
                other => return Err(format!("unsupported signing algorithm {other:?}")),
            };
            ClientCredentialsConfig::PrivateKeyJwt {
                client_id: settings.client_id.clone(),
                signing_key: pem.expose().as_bytes().to_vec(),
                signing_algorithm,
                token_endpoint_audience: None,
                scopes: settings.scopes.clone(),
                resource: Some(url.to_owned()),
            }
        }
    })
}

/// Keeps `watch` told about what `result` (an answer to a request sent to the server) says
/// about the token: a 401/403 challenge, or a success.
pub(super) fn observe<T, E>(
    watch: Option<&Arc<AuthWatch>>,
    result: &Result<T, rmcp::transport::streamable_http_client::StreamableHttpError<E>>,
) where
    E: std::error::Error + Send + Sync + 'static,
{
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    let Some(watch) = watch else { return };
    match result {
        Ok(_) => watch.saw_success(),
        Err(StreamableHttpError::AuthRequired(error)) => {
            watch.saw_challenge(401, &error.www_authenticate_header)
        }
        Err(StreamableHttpError::InsufficientScope(error)) => {
            watch.saw_challenge(403, &error.www_authenticate_header)
        }
        Err(_) => {}
    }
}
