//! `list_changed` for 2025-era sessions: each session's announcer watches the views and tells its client which of its lists changed.

use std::sync::Arc;

use rmcp::{RoleServer, service::Peer};
use tokio::sync::watch;

use super::GatewayService;
use crate::{config::ProfileName, registry::Views};

/// Fingerprints of one profile's lists: a list changed for a client when its mark did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Marks {
    pub tools: u64,
    pub prompts: u64,
    pub resources: u64,
}

impl Marks {
    /// The marks of `profile`'s current view, marking the change as seen.
    pub(super) fn of(views: &mut watch::Receiver<Arc<Views>>, profile: &ProfileName) -> Self {
        views
            .borrow_and_update()
            .get(profile)
            .map_or_else(Marks::default, |view| Marks {
                tools: view.fingerprint(),
                prompts: view.offers().prompts_fingerprint(),
                resources: view.offers().resources_fingerprint(),
            })
    }
}

/// How often a change announcer checks that its session still exists.
const SESSION_REAP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);

/// Sends the `list_changed` notifications to one 2025-era session whenever its view changes;
/// ends when the session's transport is gone or the gateway stops, and then forgets the
/// session (dropping upstream subscriptions no other session holds).
pub(super) async fn announce_changes(
    service: GatewayService,
    mut views: watch::Receiver<Arc<Views>>,
    peer: Peer<RoleServer>,
    stop: tokio_util::sync::CancellationToken,
) {
    // Lists wait for the start rather than change under the client: the baseline is what a
    // list shows once the gateway is ready; only later arrivals are announced.
    tokio::select! {
        _ = service.gateway.ready() => {}
        () = stop.cancelled() => {
            service.forget_session().await;
            return;
        }
    }
    let mut announced = Marks::of(&mut views, &service.profile);
    // A session can end without a word (HTTP clients just leave): look now and then, so this
    // task does not outlive it until the next change.
    let mut reap = tokio::time::interval(SESSION_REAP_INTERVAL);
    reap.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            // The gateway is stopping.
            () = stop.cancelled() => break,
            // Time to check whether the session is still there.
            _ = reap.tick() => {
                if peer.is_transport_closed() {
                    break;
                }
            }
            // A new view was published.
            changed = views.changed() => {
                if changed.is_err() || peer.is_transport_closed() {
                    break;
                }
                let now = Marks::of(&mut views, &service.profile);
                if announce(&peer, announced, now).await.is_err() {
                    break;
                }
                announced = now;
            }
        }
    }
    service.forget_session().await;
}

/// Sends one notification per list whose mark changed.
async fn announce(
    peer: &Peer<RoleServer>,
    before: Marks,
    now: Marks,
) -> Result<(), rmcp::service::ServiceError> {
    if now.tools != before.tools {
        peer.notify_tool_list_changed().await?;
    }
    if now.prompts != before.prompts {
        peer.notify_prompt_list_changed().await?;
    }
    if now.resources != before.resources {
        peer.notify_resource_list_changed().await?;
    }
    Ok(())
}

impl GatewayService {
    /// The session ended: stop routing to it, and unsubscribe upstream from what only it
    /// was subscribed to.
    async fn forget_session(&self) {
        let orphans = self.gateway.relay.unregister(self.session);
        for (server, uri) in orphans {
            let Some(upstream) = self.gateway.upstreams.get(&server) else {
                continue;
            };
            let limit = crate::upstream::Limit {
                timeout: std::time::Duration::from_millis(self.gateway.config().call_timeout_ms),
                cancel: self.gateway.shutdown_token().child_token(),
                caller: None,
            };
            if let Err(failure) = upstream.unsubscribe(uri, limit).await {
                tracing::debug!(%server, "unsubscribe after the session ended failed: {failure}");
            }
        }
    }
}
