//! The tasks each client session created through toolgate (MCP 2025-11-25): the id the client sees, and the server and upstream id behind it.
//!
//! A client never sees an upstream's task id: it gets `tg-<n>`, numbered in this gateway's
//! lifetime, which is unique across servers (two servers may both name a task `1`), names
//! no server (a profile may hide which server a tool comes from) and carries nothing the
//! client could edit to reach another task. Every lookup is by (session, id): an id from
//! another session, an old id, or a made-up one is simply unknown. The upstream's own
//! `tasks/list` is never relayed, since toolgate is one client to it and it lists every
//! session's tasks; `tasks/list` is built from this table instead.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{
        Mutex, MutexGuard,
        atomic::{AtomicU64, Ordering},
    },
};

use crate::config::ServerId;

use super::SessionId;

/// Tasks kept per session; creating more forgets the oldest (its upstream may still hold it,
/// until its `ttl`).
pub const MAX_TASKS_PER_SESSION: usize = 1_000;

/// Where one client-visible task lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRoute {
    /// The id the client knows it by (`tg-<n>`).
    pub id: String,
    pub server: ServerId,
    /// The server's own task id.
    pub upstream_id: String,
    /// The calling tool's timeout: what bounds a `tasks/result` wait.
    pub timeout_ms: u64,
}

#[derive(Default)]
struct Inner {
    /// Per session, by number (creation order, which `tasks/list` pages through).
    sessions: HashMap<SessionId, BTreeMap<u64, TaskRoute>>,
    /// (server, upstream id) → (session, number): where a status notification goes.
    owners: HashMap<(ServerId, String), (SessionId, u64)>,
}

/// The table of every session's tasks.
#[derive(Default)]
pub struct Tasks {
    next: AtomicU64,
    inner: Mutex<Inner>,
}

/// The number in a client-visible id `tg-<n>`.
fn number_of(id: &str) -> Option<u64> {
    let digits = id.strip_prefix("tg-")?;
    // Only the canonical form: `tg-01` is not `tg-1`.
    if digits.starts_with('0') && digits != "0" {
        return None;
    }
    digits.parse().ok()
}

impl Tasks {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A few map operations per critical section, none of which can leave them halfway.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a task `server` created for `session`; returns its client-visible route.
    pub fn add(
        &self,
        session: SessionId,
        server: ServerId,
        upstream_id: String,
        timeout_ms: u64,
    ) -> TaskRoute {
        let number = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let route = TaskRoute {
            id: format!("tg-{number}"),
            server,
            upstream_id,
            timeout_ms,
        };
        let mut inner = self.lock();
        let key = (route.server.clone(), route.upstream_id.clone());
        // A server that reuses an id replaces its older task.
        if let Some((old_session, old_number)) = inner.owners.remove(&key)
            && let Some(tasks) = inner.sessions.get_mut(&old_session)
        {
            tasks.remove(&old_number);
        }
        inner.owners.insert(key, (session, number));
        let tasks = inner.sessions.entry(session).or_default();
        tasks.insert(number, route.clone());
        let oldest = (tasks.len() > MAX_TASKS_PER_SESSION)
            .then(|| tasks.pop_first())
            .flatten();
        if let Some((_, old)) = oldest {
            inner.owners.remove(&(old.server, old.upstream_id));
        }
        route
    }

    /// The task `id` of `session`; `None` for any other session's, or an unknown id.
    pub fn get(&self, session: SessionId, id: &str) -> Option<TaskRoute> {
        let number = number_of(id)?;
        self.lock().sessions.get(&session)?.get(&number).cloned()
    }

    /// Forgets one task (its server no longer knows it).
    pub fn remove(&self, session: SessionId, id: &str) {
        let Some(number) = number_of(id) else { return };
        let mut inner = self.lock();
        let Some(route) = inner
            .sessions
            .get_mut(&session)
            .and_then(|tasks| tasks.remove(&number))
        else {
            return;
        };
        inner.owners.remove(&(route.server, route.upstream_id));
    }

    /// Up to `limit` of the session's tasks after the one numbered by `after` (a cursor, see
    /// [`Tasks::cursor_of`]), and whether more follow. `None`: the cursor is not one.
    pub fn page(
        &self,
        session: SessionId,
        after: Option<&str>,
        limit: usize,
    ) -> Option<(Vec<TaskRoute>, bool)> {
        let start = match after {
            Some(cursor) => number_of(cursor)?.checked_add(1)?,
            None => 0,
        };
        let inner = self.lock();
        let Some(tasks) = inner.sessions.get(&session) else {
            return Some((Vec::new(), false));
        };
        let mut rest = tasks.range(start..).map(|(_, route)| route.clone());
        let page: Vec<TaskRoute> = rest.by_ref().take(limit).collect();
        Some((page, rest.next().is_some()))
    }

    /// Whether `session` has any task.
    pub fn has_tasks(&self, session: SessionId) -> bool {
        self.lock()
            .sessions
            .get(&session)
            .is_some_and(|tasks| !tasks.is_empty())
    }

    /// The cursor for the page after `route` (its id: opaque to clients).
    pub fn cursor_of(route: &TaskRoute) -> String {
        route.id.clone()
    }

    /// Who owns the task `upstream_id` of `server`: its session and client-visible id.
    pub fn owner(&self, server: &ServerId, upstream_id: &str) -> Option<(SessionId, String)> {
        let inner = self.lock();
        let (session, number) = *inner
            .owners
            .get(&(server.clone(), upstream_id.to_owned()))?;
        Some((session, format!("tg-{number}")))
    }

    /// The session ended: its tasks are no longer reachable through toolgate.
    pub fn forget_session(&self, session: SessionId) {
        let mut inner = self.lock();
        if let Some(tasks) = inner.sessions.remove(&session) {
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
        let Some((session, id)) = self.tasks.owner(server, upstream_id) else {
            tracing::debug!(%server, upstream_id, "dropped the status of a task no session owns");
            return;
        };
        let Some(peer) = self.lock().sessions.get(&session).map(|s| s.peer.clone()) else {
            return;
        };
        params["taskId"] = serde_json::Value::String(id);
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
        let a = tasks.add(1, server("x"), "7".into(), 1000);
        let b = tasks.add(2, server("y"), "7".into(), 1000);
        assert_ne!(a.id, b.id, "ids are unique across sessions and servers");
        assert_eq!(tasks.get(1, &a.id), Some(a.clone()));
        assert_eq!(
            tasks.get(2, &a.id),
            None,
            "another session's task is unknown"
        );
        assert_eq!(tasks.get(1, "7"), None, "an upstream id is not a client id");
        let padded = a.id.replace("tg-", "tg-0");
        assert_eq!(tasks.get(1, &padded), None);
        assert_eq!(tasks.owner(&server("y"), "7"), Some((2, b.id.clone())));
        tasks.forget_session(2);
        assert_eq!(tasks.owner(&server("y"), "7"), None);
        assert_eq!(tasks.get(2, &b.id), None);
    }

    #[test]
    fn pages_follow_creation_order_and_cursors_are_checked() {
        let tasks = Tasks::default();
        let routes: Vec<_> = (0..5)
            .map(|n| tasks.add(1, server("x"), n.to_string(), 1000))
            .collect();
        let (first, more) = tasks.page(1, None, 2).unwrap();
        assert_eq!(first, routes[..2].to_vec());
        assert!(more);
        let cursor = Tasks::cursor_of(&first[1]);
        let (second, _) = tasks.page(1, Some(&cursor), 10).unwrap();
        assert_eq!(second, routes[2..].to_vec());
        assert!(tasks.page(1, Some("nonsense"), 2).is_none());
        tasks.remove(1, &routes[0].id);
        assert_eq!(tasks.page(1, None, 10).unwrap().0.len(), 4);
    }
}
