//! The tasks each client created through toolgate: the id the client sees, and the server and upstream id behind it.
//!
//! A task belongs to an [`Owner`]: a session (stdio, or a 2025-11-25 HTTP session), or, for
//! a 2026-07-28 HTTP request, which has no session, the caller (profile and a SHA-256 of its
//! bearer token, as for input rounds: [`crate::rounds`]). A 2026-07-28 client's task
//! (SEP-2663) carries a [`Bridge`]: what toolgate keeps to answer `tasks/get` and
//! `tasks/update` from its upstream's 2025-11-25 task.
//!
//! A client never sees an upstream's task id: it gets `tg-<n>`, numbered in this gateway's
//! lifetime, which is unique across servers (two servers may both name a task `1`), names
//! no server (a profile may hide which server a tool comes from) and carries nothing the
//! client could edit to reach another task. Every lookup is by (owner, id): an id from
//! another owner, an old id, or a made-up one is simply unknown. The upstream's own
//! `tasks/list` is never relayed, since toolgate is one client to it and it lists every
//! session's tasks; `tasks/list` is built from this table instead.

mod bridge;

use std::{
    collections::{BTreeMap, HashMap},
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicU64, Ordering},
    },
};

pub use bridge::{Bridge, BridgeState};

use crate::config::ServerId;
pub use crate::rounds::Owner;

use super::SessionId;

/// Tasks kept per owner; creating more forgets the oldest (its upstream may still hold it,
/// until its `ttl`).
pub const MAX_TASKS_PER_SESSION: usize = 1_000;

/// Where one client-visible task lives.
#[derive(Debug, Clone)]
pub struct TaskRoute {
    /// The id the client knows it by (`tg-<n>`).
    pub id: String,
    pub server: ServerId,
    /// The server's own task id.
    pub upstream_id: String,
    /// The calling tool's timeout: what bounds a `tasks/result` wait.
    pub timeout_ms: u64,
    /// A 2026-07-28 client's task (SEP-2663); `None` for a 2025-11-25 client's.
    pub bridge: Option<Arc<Bridge>>,
    /// Relays the task's progress to its client while the task is known here.
    pub progress: Option<Arc<crate::upstream::ProgressRoute>>,
}

/// What a task keeps besides its ids ([`TaskRoute`]).
#[derive(Default)]
pub struct Held {
    pub bridge: Option<Arc<Bridge>>,
    pub progress: Option<crate::upstream::ProgressRoute>,
}

impl PartialEq for TaskRoute {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
            && self.server == other.server
            && self.upstream_id == other.upstream_id
            && self.timeout_ms == other.timeout_ms
            && match (&self.bridge, &other.bridge) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
    }
}

#[derive(Default)]
struct Inner {
    /// Per owner, by number (creation order, which `tasks/list` pages through).
    sessions: HashMap<Owner, BTreeMap<u64, TaskRoute>>,
    /// (server, upstream id) → (owner, number): where a status notification or a request
    /// about the task goes.
    owners: HashMap<(ServerId, String), (Owner, u64)>,
}

/// The table of every session's tasks.
#[derive(Default)]
pub struct Tasks {
    next: AtomicU64,
    inner: Mutex<Inner>,
}

/// The number in a client-visible id `tg-<n>` (or `tg-<n>.<secret>`).
fn number_of(id: &str) -> Option<u64> {
    let rest = id.strip_prefix("tg-")?;
    let digits = rest.split_once('.').map_or(rest, |(digits, _)| digits);
    // Only the canonical form: `tg-01` is not `tg-1`.
    if digits.starts_with('0') && digits != "0" {
        return None;
    }
    digits.parse().ok()
}

/// 128 random bits from the OS, as hex; `None` (logged) without randomness.
fn secret() -> Option<String> {
    let mut bytes = [0u8; 16];
    if let Err(error) = getrandom::fill(&mut bytes) {
        tracing::error!(%error, "no OS randomness for a task id");
        return None;
    }
    Some(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

impl Tasks {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A few map operations per critical section, none of which can leave them halfway.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a task `server` created for `owner`; returns its client-visible route.
    pub fn add(
        &self,
        owner: Owner,
        server: ServerId,
        upstream_id: String,
        timeout_ms: u64,
        held: Held,
    ) -> TaskRoute {
        let number = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        // A 2026-07-28 client's id may be all that guards its task (anonymous HTTP callers
        // of a profile are one owner): a random part makes it unguessable.
        let secret = if held.bridge.is_some() {
            secret()
        } else {
            None
        };
        let route = TaskRoute {
            id: match secret {
                Some(secret) => format!("tg-{number}.{secret}"),
                None => format!("tg-{number}"),
            },
            server,
            upstream_id,
            timeout_ms,
            bridge: held.bridge,
            progress: held.progress.map(Arc::new),
        };
        let mut inner = self.lock();
        let key = (route.server.clone(), route.upstream_id.clone());
        // A server that reuses an id replaces its older task.
        if let Some((old_session, old_number)) = inner.owners.remove(&key)
            && let Some(tasks) = inner.sessions.get_mut(&old_session)
        {
            tasks.remove(&old_number);
        }
        inner.owners.insert(key, (owner.clone(), number));
        let tasks = inner.sessions.entry(owner).or_default();
        tasks.insert(number, route.clone());
        let oldest = (tasks.len() > MAX_TASKS_PER_SESSION)
            .then(|| tasks.pop_first())
            .flatten();
        if let Some((_, old)) = oldest {
            inner.owners.remove(&(old.server, old.upstream_id));
        }
        route
    }

    /// The task `id` of `owner`; `None` for any other owner's, or an unknown id.
    pub fn get(&self, owner: &Owner, id: &str) -> Option<TaskRoute> {
        let number = number_of(id)?;
        let inner = self.lock();
        let route = inner.sessions.get(owner)?.get(&number)?;
        // The whole id, secret included.
        (route.id == id).then(|| route.clone())
    }

    /// Forgets one task (its server no longer knows it).
    pub fn remove(&self, owner: &Owner, id: &str) {
        let Some(number) = number_of(id) else { return };
        let mut inner = self.lock();
        let Some(tasks) = inner.sessions.get_mut(owner) else {
            return;
        };
        if tasks.get(&number).is_none_or(|route| route.id != id) {
            return;
        }
        let Some(route) = tasks.remove(&number) else {
            return;
        };
        inner.owners.remove(&(route.server, route.upstream_id));
    }

    /// Up to `limit` of the session's tasks after the one numbered by `after` (a cursor, see
    /// [`Tasks::cursor_of`]), and whether more follow. `None`: the cursor is not one.
    pub fn page(
        &self,
        owner: &Owner,
        after: Option<&str>,
        limit: usize,
    ) -> Option<(Vec<TaskRoute>, bool)> {
        let start = match after {
            Some(cursor) => number_of(cursor)?.checked_add(1)?,
            None => 0,
        };
        let inner = self.lock();
        let Some(tasks) = inner.sessions.get(owner) else {
            return Some((Vec::new(), false));
        };
        let mut rest = tasks.range(start..).map(|(_, route)| route.clone());
        let page: Vec<TaskRoute> = rest.by_ref().take(limit).collect();
        Some((page, rest.next().is_some()))
    }

    /// Whether `owner` has any task.
    pub fn has_tasks(&self, owner: &Owner) -> bool {
        self.lock()
            .sessions
            .get(owner)
            .is_some_and(|tasks| !tasks.is_empty())
    }

    /// The cursor for the page after `route` (its id: opaque to clients).
    pub fn cursor_of(route: &TaskRoute) -> String {
        route.id.clone()
    }

    /// Who owns the task `upstream_id` of `server`, and its route.
    pub fn owner(&self, server: &ServerId, upstream_id: &str) -> Option<(Owner, TaskRoute)> {
        let inner = self.lock();
        let (owner, number) = inner
            .owners
            .get(&(server.clone(), upstream_id.to_owned()))?;
        let route = inner.sessions.get(owner)?.get(number)?.clone();
        Some((owner.clone(), route))
    }

    /// The session ended: its tasks are no longer reachable through toolgate.
    pub fn forget_session(&self, session: SessionId) {
        let mut inner = self.lock();
        if let Some(tasks) = inner.sessions.remove(&Owner::Session(session)) {
            for route in tasks.into_values() {
                inner.owners.remove(&(route.server, route.upstream_id));
            }
        }
    }
}

impl super::Relay {
    /// Relays an upstream's `notifications/tasks/status` to the session that owns the task,
    /// with the id that session knows; a task no session owns is dropped.
    pub async fn task_status(&self, server: &ServerId, mut params: serde_json::Value) {
        let Some(upstream_id) = params.get("taskId").and_then(|v| v.as_str()) else {
            tracing::debug!(%server, "dropped a task status without a taskId");
            return;
        };
        let Some((owner, route)) = self.tasks.owner(server, upstream_id) else {
            tracing::debug!(%server, upstream_id, "dropped the status of a task no session owns");
            return;
        };
        // A 2026-07-28 client's task: that era's `notifications/tasks` is sent only on a
        // `subscriptions/listen` stream, which toolgate does not offer for tasks.
        let Owner::Session(session) = owner else {
            return;
        };
        if route.bridge.is_some() {
            return;
        }
        let peer = self
            .lock()
            .sessions
            .get(&session)
            .and_then(|s| s.reach.peer().cloned());
        let Some(peer) = peer else {
            return;
        };
        params["taskId"] = serde_json::Value::String(route.id);
        let notice = rmcp::model::ServerNotification::CustomNotification(
            rmcp::model::CustomNotification::new("notifications/tasks/status", Some(params)),
        );
        if let Err(error) = peer.send_notification(notice).await {
            tracing::debug!(%server, %error, "could not relay a task status");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServerName;

    fn server(name: &str) -> ServerId {
        ServerId::global(ServerName::parse(name).unwrap())
    }

    #[test]
    fn a_task_is_reachable_only_from_its_own_session_and_by_its_exact_id() {
        let tasks = Tasks::default();
        let (one, two) = (Owner::Session(1), Owner::Session(2));
        let a = tasks.add(one.clone(), server("x"), "7".into(), 1000, Held::default());
        let b = tasks.add(two.clone(), server("y"), "7".into(), 1000, Held::default());
        assert_ne!(a.id, b.id, "ids are unique across sessions and servers");
        assert_eq!(tasks.get(&one, &a.id), Some(a.clone()));
        assert_eq!(
            tasks.get(&two, &a.id),
            None,
            "another session's task is unknown"
        );
        assert_eq!(
            tasks.get(&one, "7"),
            None,
            "an upstream id is not a client id"
        );
        let padded = a.id.replace("tg-", "tg-0");
        assert_eq!(tasks.get(&one, &padded), None);
        assert_eq!(
            tasks.owner(&server("y"), "7"),
            Some((two.clone(), b.clone()))
        );
        tasks.forget_session(2);
        assert_eq!(tasks.owner(&server("y"), "7"), None);
        assert_eq!(tasks.get(&two, &b.id), None);
    }

    #[test]
    fn a_bridged_tasks_id_has_a_secret_part_that_must_match() {
        let tasks = Tasks::default();
        let held = Held {
            bridge: Some(Arc::new(Bridge::new(Default::default()))),
            progress: None,
        };
        let owner = Owner::Session(1);
        let route = tasks.add(owner.clone(), server("x"), "7".into(), 1000, held);
        let (bare, secret) = route.id.split_once('.').expect("a secret part");
        assert_eq!(secret.len(), 32, "{}", route.id);
        assert_eq!(tasks.get(&owner, &route.id), Some(route.clone()));
        assert_eq!(
            tasks.get(&owner, bare),
            None,
            "the number alone is not the id"
        );
        let wrong = format!("{bare}.{}", "0".repeat(32));
        assert_eq!(tasks.get(&owner, &wrong), None);
        tasks.remove(&owner, &wrong);
        assert!(
            tasks.get(&owner, &route.id).is_some(),
            "a wrong id removes nothing"
        );
        tasks.remove(&owner, &route.id);
        assert_eq!(tasks.get(&owner, &route.id), None);
    }

    #[test]
    fn pages_follow_creation_order_and_cursors_are_checked() {
        let tasks = Tasks::default();
        let routes: Vec<_> = (0..5)
            .map(|n| {
                tasks.add(
                    Owner::Session(1),
                    server("x"),
                    n.to_string(),
                    1000,
                    Held::default(),
                )
            })
            .collect();
        let one = Owner::Session(1);
        let (first, more) = tasks.page(&one, None, 2).unwrap();
        assert_eq!(first, routes[..2].to_vec());
        assert!(more);
        let cursor = Tasks::cursor_of(&first[1]);
        let (second, _) = tasks.page(&one, Some(&cursor), 10).unwrap();
        assert_eq!(second, routes[2..].to_vec());
        assert!(tasks.page(&one, Some("nonsense"), 2).is_none());
        tasks.remove(&one, &routes[0].id);
        assert_eq!(tasks.page(&one, None, 10).unwrap().0.len(), 4);
    }
}
