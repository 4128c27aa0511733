//! The set of upstream servers: started together, then changed one by one by reloads (added, replaced, retired once their calls are over).

use std::sync::{Arc, RwLock};

use tokio::sync::mpsc;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::{ServerState, Upstream, UpstreamError, UpstreamEvent, supervisor};
use crate::{
    config::{ServerConfig, ServerId, SuperviseSettings},
    relay::Relay,
};

/// All upstream servers, by name; a reload adds, replaces and retires members.
pub struct Upstreams {
    members: RwLock<Members>,
    events: mpsc::UnboundedSender<UpstreamEvent>,
    relay: Arc<Relay>,
    settings: SuperviseSettings,
    tasks: TaskTracker,
    shutdown: CancellationToken,
}

/// The current servers: the map and the config order are replaced together.
#[derive(Default)]
struct Members {
    by_name: crate::FastMap<ServerId, Member>,
    order: Vec<ServerId>,
}

/// One running server and what stops it.
struct Member {
    upstream: Arc<Upstream>,
    config: ServerConfig,
    /// Stops this server's supervisor (and with it the child) alone.
    stop: CancellationToken,
    /// Silences the supervisor while it waits to be stopped, so that a retired server's
    /// late events cannot overwrite what its successor imported.
    mute: CancellationToken,
    supervisor: tokio::task::JoinHandle<()>,
}

impl Upstreams {
    /// Starts one supervisor per server and returns at once; each reports
    /// [`UpstreamEvent::Started`] when its server's first start is over.
    pub fn start(
        servers: &[ServerConfig],
        settings: &SuperviseSettings,
        events: mpsc::UnboundedSender<UpstreamEvent>,
        relay: Arc<Relay>,
        shutdown: CancellationToken,
    ) -> Self {
        let upstreams = Self {
            members: RwLock::new(Members::default()),
            events,
            relay,
            settings: settings.clone(),
            tasks: TaskTracker::new(),
            shutdown,
        };
        for server in servers {
            upstreams.add(server.clone());
        }
        upstreams
    }

    fn members(&self) -> std::sync::RwLockReadGuard<'_, Members> {
        self.members
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn members_mut(&self) -> std::sync::RwLockWriteGuard<'_, Members> {
        self.members
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts `server` under a new supervisor, in place of any member of the same id (which
    /// the caller has taken out with [`Upstreams::take`] first).
    pub fn add(&self, server: ServerConfig) {
        let upstream = Arc::new(Upstream::new(
            server.id.clone(),
            self.relay.clone(),
            Arc::new(super::oauth::AuthWatch::for_server(&server)),
        ));
        let stop = self.shutdown.child_token();
        let mute = CancellationToken::new();
        let supervisor = self.tasks.spawn(
            supervisor::Supervisor {
                upstream: upstream.clone(),
                config: server.clone(),
                settings: self.settings.clone(),
                events: self.events.clone(),
                shutdown: stop.clone(),
                mute: mute.clone(),
            }
            .run(),
        );
        let mut members = self.members_mut();
        if !members.order.contains(&server.id) {
            members.order.push(server.id.clone());
        }
        members.by_name.insert(
            server.id.clone(),
            Member {
                upstream,
                config: server,
                stop,
                mute,
                supervisor,
            },
        );
    }

    /// Takes `server` out (new calls no longer find it) and returns what retires it.
    pub fn take(&self, server: &ServerId) -> Option<Retiring> {
        let mut members = self.members_mut();
        let member = members.by_name.remove(server)?;
        members.order.retain(|id| id != server);
        member.mute.cancel();
        Some(Retiring { member })
    }

    /// Puts the servers back in config order (after a reload added some).
    pub fn reorder(&self, order: Vec<ServerId>) {
        let mut members = self.members_mut();
        let mut order: Vec<ServerId> = order
            .into_iter()
            .filter(|id| members.by_name.contains_key(id))
            .collect();
        // Members the new order does not name keep their place at the end.
        let rest: Vec<ServerId> = members
            .order
            .iter()
            .filter(|id| !order.contains(id))
            .cloned()
            .collect();
        order.extend(rest);
        members.order = order;
    }

    /// The configuration `server` runs with, while it is a member.
    pub fn config_of(&self, server: &ServerId) -> Option<ServerConfig> {
        self.members().by_name.get(server).map(|m| m.config.clone())
    }

    /// Waits for `retiring`'s calls in flight (at most `grace`), then stops its supervisor
    /// and child, in a task the upstreams own; returns at once.
    pub fn retire(&self, retiring: Retiring, grace: std::time::Duration) {
        let shutdown = self.shutdown.clone();
        self.tasks.spawn(async move {
            let Retiring { member } = retiring;
            let calls = &member.upstream.calls;
            calls.close();
            tokio::select! {
                // Every call in flight is over, or the grace is.
                _ = tokio::time::timeout(grace, calls.wait()) => {}
                // The gateway is stopping: the supervisor's token is cancelled with it.
                () = shutdown.cancelled() => {}
            }
            if !calls.is_empty() {
                tracing::warn!(server = %member.upstream.name, calls = calls.len(), "stopping a retired server with calls still in flight");
            }
            member.stop.cancel();
            let _ = member.supervisor.await;
            tracing::info!(server = %member.upstream.name, "retired server stopped");
        });
    }

    /// The error for a call to `server` while it is down, with why it went down.
    pub fn unavailable(&self, server: &ServerId) -> UpstreamError {
        if let Some(reason) = self.get(server).and_then(|u| u.needs_login()) {
            return UpstreamError::AuthRequired {
                server: server.clone(),
                reason,
            };
        }
        let reason = match self.get(server).map(|u| u.state()) {
            Some(ServerState::Failed(reason)) => reason,
            Some(other) => other.to_string(),
            None => "not configured".to_owned(),
        };
        UpstreamError::Unavailable {
            server: server.clone(),
            reason,
        }
    }

    pub fn get(&self, server: &ServerId) -> Option<Arc<Upstream>> {
        self.members()
            .by_name
            .get(server)
            .map(|m| m.upstream.clone())
    }

    /// Servers in config order, as they are now.
    pub fn all(&self) -> Vec<Arc<Upstream>> {
        let members = self.members();
        members
            .order
            .iter()
            .filter_map(|name| members.by_name.get(name))
            .map(|m| m.upstream.clone())
            .collect()
    }

    pub fn len(&self) -> usize {
        self.members().order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members().order.is_empty()
    }

    /// Stops every supervisor and kills every child process group, then waits for them.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        self.tasks.close();
        self.tasks.wait().await;
    }
}

/// A server taken out of [`Upstreams`], still running its calls in flight.
pub struct Retiring {
    member: Member,
}
