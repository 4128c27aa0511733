//! Resource subscriptions of 2026-07-28 clients: a `subscriptions/listen` stream's `resourceSubscriptions`, told of `notifications/resources/updated` like a 2025 session's `resources/subscribe`.
//!
//! A listen stream has no session peer to notify: its updates go through a channel to the
//! stream's own task, which writes them on the stream under the URI the client gave. Upstream
//! subscriptions are shared with 2025 sessions: the first subscriber of a (server, URI)
//! subscribes upstream, the last to go unsubscribes.

use std::collections::HashMap;

use tokio::sync::mpsc;

use super::{Inner, Relay};
use crate::config::ServerId;

/// Updates one listen stream may have waiting; more are dropped (an update says only that
/// the resource changed, so a later one stands for a dropped one).
const WAITING_UPDATES: usize = 64;

pub(super) struct Listener {
    /// (server, upstream URI) → the URI the client subscribed with.
    pub subscriptions: HashMap<(ServerId, String), String>,
    updates: mpsc::Sender<String>,
}

/// A listen stream's resource subscriptions, registered with the relay.
pub struct Listening {
    pub id: u64,
    /// The client's URIs of the resources that changed.
    pub updates: mpsc::Receiver<String>,
    /// Subscriptions no one held before: subscribe upstream.
    pub first: Vec<(ServerId, String)>,
}

/// Tells the listen streams subscribed to `key` (called with the relay's lock held; never
/// waits).
pub(super) fn tell(inner: &Inner, key: &(ServerId, String)) {
    for listener in inner.listeners.values() {
        if let Some(exposed) = listener.subscriptions.get(key)
            && listener.updates.try_send(exposed.clone()).is_err()
        {
            tracing::debug!(server = %key.0, "a listen stream's resource updates are full or gone");
        }
    }
}

impl Relay {
    /// Registers a listen stream subscribed to `resources`: (server, upstream URI, the
    /// client's URI).
    pub fn listen(&self, resources: Vec<(ServerId, String, String)>) -> Listening {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (updates, receiver) = mpsc::channel(WAITING_UPDATES);
        let mut inner = self.lock();
        let mut first = Vec::new();
        let mut subscriptions = HashMap::new();
        for (server, upstream, exposed) in resources {
            let key = (server, upstream);
            if !inner.subscribed(&key) && !subscriptions.contains_key(&key) {
                first.push(key.clone());
            }
            subscriptions.insert(key, exposed);
        }
        inner.listeners.insert(
            id,
            Listener {
                subscriptions,
                updates,
            },
        );
        Listening {
            id,
            updates: receiver,
            first,
        }
    }

    /// The listen stream `id` ended: the subscriptions no one holds any more (unsubscribe
    /// upstream).
    pub fn stop_listening(&self, id: u64) -> Vec<(ServerId, String)> {
        let mut inner = self.lock();
        let Some(gone) = inner.listeners.remove(&id) else {
            return Vec::new();
        };
        gone.subscriptions
            .into_keys()
            .filter(|key| !inner.subscribed(key))
            .collect()
    }
}
