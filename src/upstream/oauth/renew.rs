//! Keeps a `client_credentials` server's token fresh: a new one is asked for before the current one expires, and at once when the server refuses it.
//!
//! rmcp's [`AuthClient`] refreshes only with a refresh token, which the client-credentials
//! grant does not issue: without this, a token would be sent until it expired and every call
//! after that would fail. A [`Renewer`] owns the grant: it asks the token endpoint again (the
//! same rmcp exchange as the first time, which stores the new token where [`AuthClient`]
//! reads it) shortly before rmcp would stop sending the current token, and when the server
//! answers a request with 401 ([`Renewer::after_refusal`]; the HTTP client then sends that
//! request once more with the new token). One renewal runs at a time.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use rmcp::transport::auth::{AuthClient, AuthorizationManager, ClientCredentialsConfig};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::{AuthWatch, TOKEN_REQUEST_TIMEOUT, lock};
use crate::config::ServerId;

/// rmcp stops sending a token once fewer than `min(30 s, lifetime / 2)` remain
/// (`AuthorizationManager::get_access_token`); renewal comes before that.
const RMCP_REFRESH_BUFFER: Duration = Duration::from_secs(30);
/// How long after a failed renewal the next one is tried.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// The token last obtained.
#[derive(Clone)]
struct Current {
    token: String,
    obtained: Instant,
    /// `expires_in` of the token response; `None`: the server gave none, it is renewed only
    /// when refused.
    lifetime: Option<Duration>,
}

impl Current {
    /// When rmcp would stop sending this token.
    fn stale_at(&self) -> Option<Instant> {
        let lifetime = self.lifetime?;
        let buffer = RMCP_REFRESH_BUFFER
            .min(lifetime / 2)
            .max(Duration::from_secs(1));
        Some(self.obtained + lifetime.saturating_sub(buffer))
    }

    /// When to renew: a quarter of the usable time (at most 30 s) before it goes stale.
    fn renew_at(&self) -> Option<Instant> {
        let stale = self.stale_at()?;
        let usable = stale.saturating_duration_since(self.obtained);
        Some(stale - (usable / 4).min(RMCP_REFRESH_BUFFER))
    }

    fn is_stale(&self) -> bool {
        self.stale_at().is_some_and(|at| Instant::now() >= at)
    }
}

/// Renews one server's client-credentials token.
pub struct Renewer {
    server: ServerId,
    url: String,
    config: ClientCredentialsConfig,
    manager: Arc<tokio::sync::Mutex<AuthorizationManager>>,
    current: Mutex<Option<Current>>,
    /// When a failed renewal is tried again.
    retry_at: Mutex<Option<Instant>>,
    /// One renewal at a time.
    single: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Renewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Renewer")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

/// Wraps `client` for `config`'s grant, obtains the first token and starts the task that
/// renews it (stopped when the returned guard is dropped with the connection).
pub(super) async fn start<C>(
    server: &ServerId,
    url: &str,
    config: ClientCredentialsConfig,
    manager: AuthorizationManager,
    client: C,
    watch: &Arc<AuthWatch>,
) -> Result<(AuthClient<C>, DropGuard), String> {
    let client = AuthClient::new(client, manager);
    let renewer = Arc::new(Renewer {
        server: server.clone(),
        url: url.to_owned(),
        config,
        manager: client.auth_manager.clone(),
        current: Mutex::new(None),
        retry_at: Mutex::new(None),
        single: tokio::sync::Mutex::new(()),
    });
    renewer.renew().await?;
    watch.set_renewer(Some(renewer.clone()));
    let cancel = CancellationToken::new();
    tokio::spawn(renewer.keep_fresh(watch.clone(), cancel.clone()));
    Ok((client, cancel.drop_guard()))
}

impl Renewer {
    /// The token to send again after the server refused `sent`: the one another request
    /// renewed meanwhile, or a new one. `None` when none could be obtained (logged, and the
    /// server marked as needing attention in `watch`).
    pub async fn after_refusal(&self, sent: Option<&str>, watch: &AuthWatch) -> Option<String> {
        let _one = self.single.lock().await;
        if let Some(current) = lock(&self.current).clone()
            && Some(current.token.as_str()) != sent
            && !current.is_stale()
        {
            return Some(current.token);
        }
        match self.renew().await {
            Ok(()) => lock(&self.current).as_ref().map(|c| c.token.clone()),
            Err(error) => {
                tracing::warn!(server = %self.server, %error, "the server refused its client_credentials token and a new one could not be obtained");
                watch.set_needs_login(format!(
                    "server \"{}\" refused toolgate's client_credentials token and a new one could not be obtained: {error}",
                    self.server
                ));
                None
            }
        }
    }

    /// Renews before each token goes stale, until `cancel`.
    async fn keep_fresh(self: Arc<Self>, watch: Arc<AuthWatch>, cancel: CancellationToken) {
        loop {
            let due = self.next_due();
            tokio::select! {
                () = cancel.cancelled() => return,
                () = sleep_until(due) => {}
            }
            let _one = self.single.lock().await;
            // A refusal may have renewed it meanwhile.
            if self.next_due().is_some_and(|at| at > Instant::now()) {
                continue;
            }
            match self.renew().await {
                Ok(()) => {
                    tracing::debug!(server = %self.server, "renewed the client_credentials token");
                    watch.clear_needs_login();
                }
                Err(error) => {
                    tracing::warn!(server = %self.server, %error, "could not renew the client_credentials token; trying again in {} s", RETRY_AFTER.as_secs());
                    *lock(&self.retry_at) = Some(Instant::now() + RETRY_AFTER);
                    if lock(&self.current).as_ref().is_none_or(Current::is_stale) {
                        watch.set_needs_login(format!(
                            "server \"{}\": its client_credentials token expired and a new one could not be obtained: {error}",
                            self.server
                        ));
                    }
                }
            }
        }
    }

    /// When the next renewal is due: a retry after a failure, else before the token goes
    /// stale; `None` when the token has no lifetime.
    fn next_due(&self) -> Option<Instant> {
        if let Some(at) = *lock(&self.retry_at) {
            return Some(at);
        }
        lock(&self.current).as_ref().and_then(Current::renew_at)
    }

    /// Asks the token endpoint for a new token (stored where rmcp's client reads it).
    async fn renew(&self) -> Result<(), String> {
        let url = &self.url;
        let manager = self.manager.clone().lock_owned().await;
        let config = self.config.clone();
        // rmcp's private_key_jwt exchange is not `Send` (it holds a form serializer across
        // an await), so it runs on a blocking thread, on this runtime's driver.
        let handle = tokio::runtime::Handle::current();
        let exchanged = tokio::task::spawn_blocking(move || {
            handle.block_on(tokio::time::timeout(
                TOKEN_REQUEST_TIMEOUT,
                manager.exchange_client_credentials(&config),
            ))
        })
        .await
        .map_err(|e| format!("client_credentials token request for {url} failed: {e}"))?;
        let response = match exchanged {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => {
                return Err(format!(
                    "client_credentials token request for {url} failed: {e}"
                ));
            }
            Err(_) => {
                return Err(format!(
                    "client_credentials token request for {url} timed out"
                ));
            }
        };
        // The response's fields, read through its JSON form (rmcp does not re-export the
        // `oauth2` trait that reads them).
        let fields = serde_json::to_value(&response).unwrap_or_default();
        let Some(token) = fields["access_token"].as_str() else {
            return Err(format!(
                "client_credentials token response from {url} has no access_token"
            ));
        };
        *lock(&self.current) = Some(Current {
            token: token.to_owned(),
            obtained: Instant::now(),
            lifetime: fields["expires_in"].as_u64().map(Duration::from_secs),
        });
        *lock(&self.retry_at) = None;
        Ok(())
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(lifetime: Option<u64>) -> Current {
        Current {
            token: "t".into(),
            obtained: Instant::now(),
            lifetime: lifetime.map(Duration::from_secs),
        }
    }

    #[test]
    fn renewal_comes_before_rmcp_stops_sending_the_token() {
        for secs in [2, 4, 10, 60, 3600] {
            let current = token(Some(secs));
            let (Some(renew), Some(stale)) = (current.renew_at(), current.stale_at()) else {
                panic!("a token with a lifetime has both times");
            };
            assert!(
                renew > current.obtained,
                "{secs} s: renews after it was obtained"
            );
            assert!(renew < stale, "{secs} s: renews before it goes stale");
        }
        // An hour's token: stale 30 s before expiry, renewed 30 s before that.
        let hour = token(Some(3600));
        let renew = hour.renew_at().map(|at| at - hour.obtained);
        assert_eq!(renew, Some(Duration::from_secs(3540)));
    }

    #[test]
    fn a_token_without_a_lifetime_is_renewed_only_when_refused() {
        let current = token(None);
        assert_eq!(current.renew_at(), None);
        assert!(!current.is_stale());
    }
}
