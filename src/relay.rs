//! Routes what an upstream sends unasked (log messages, resource updates, sampling, elicitation and roots requests) to the client sessions it belongs to.
//!
//! The rules (README, "What passes through"):
//! - **Server requests** (`sampling/createMessage`, `elicitation/create`, `roots/list`) about
//!   a task (related-task `_meta`) go to the task's owner: the `tasks/result` of its
//!   2025-era session waiting for it (sent from that request's handler, so that over HTTP it
//!   rides that request's stream), else the session; a 2026-07-28 task's [`tasks::Bridge`].
//!   Other server requests go to the session with a call in flight on that server. With
//!   none in flight, to the only session that sees the server. Several candidates, none, or a session whose client did
//!   not declare the capability: a JSON-RPC error, never an answer made up by toolgate.
//!   A 2026-07-28 call takes them as `InputRequiredResult` rounds ([`crate::rounds`]): the
//!   request goes to that call's [`AskSink`]; a session with several such calls in flight on
//!   the server cannot tell which one it belongs to (an error too).
//! - **Log messages** go to the sessions with a call in flight on that server; with none in
//!   flight, to every session that sees the server. Each session gets only messages at or
//!   above the level it set with `logging/setLevel`. The logger name carries the server:
//!   `{server}` or `{server}/{logger}`.
//! - **Resource updates** go to the sessions subscribed to that resource, under the URI each
//!   subscribed with.
//! - **Task status** (`notifications/tasks/status`) goes to the session that created the
//!   task, with the task id it knows ([`tasks`]).
// rmcp marks logging, sampling and roots deprecated (SEP-2577, 2026-07-28); 2025-11-25
// clients and servers use them, and this module exists to relay them.
#![allow(deprecated)]

mod ask;
mod late;
mod listeners;
mod reach;
pub use ask::Ask;
use ask::{asked_between_calls, undeclared};
pub use late::SWEEP_EVERY;
pub use listeners::Listening;
pub use reach::{NoticeStream, Reach};
pub mod tasks;

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicU64, Ordering},
    },
};

use rmcp::{
    ErrorData, RoleServer,
    model::{
        ErrorCode, LoggingLevel, LoggingMessageNotificationParam, ResourceUpdatedNotificationParam,
    },
    service::Peer,
};
use tokio::sync::{mpsc, watch};

use crate::{
    config::{ProfileName, ServerId},
    registry::Views,
    rounds::AskSink,
};

/// One downstream session, numbered in this gateway's lifetime.
pub type SessionId = u64;

/// The client a call came from: where its server requests and messages go.
#[derive(Clone)]
pub struct Caller {
    /// How the session's client is reached: a 2026-07-28 call taken by HTTP's modern fast
    /// path has no rmcp peer, only its response stream, and is asked through `rounds`.
    pub reach: Reach,
    pub session: SessionId,
    /// A 2026-07-28 call: where the upstream's requests go instead of `peer`.
    pub rounds: Option<AskSink>,
    /// The `sub` of the caller's IdP token (HTTP with `[gateway.auth]`), for the audit log
    /// and hook requests.
    pub subject: Option<std::sync::Arc<str>>,
}

/// Where an upstream's request goes.
pub enum Route {
    /// A request to the client session (2025-era).
    Client(Peer<RoleServer>),
    /// An input request of a 2026-07-28 call.
    Rounds(AskSink),
    /// A request about a task, to the 2025-era client's `tasks/result` waiting for it: the
    /// job runs in that request's handler, so that over HTTP it rides that request's stream.
    Waiting(mpsc::Sender<TaskJob>),
}

/// One `tasks/result` waiting for a task: its number and the queue its handler sends from.
type Waiting = (u64, mpsc::Sender<TaskJob>);

/// Sends one request to a client through the peer it is given, and hands on the answer.
pub type TaskJob =
    Box<dyn FnOnce(Peer<RoleServer>) -> futures::future::BoxFuture<'static, ()> + Send>;

struct Session {
    profile: ProfileName,
    reach: Reach,
    /// Set by `logging/setLevel`; `None`: everything the upstreams send.
    level: Option<LoggingLevel>,
    /// (server, upstream URI) → the URI this session subscribed with.
    subscriptions: HashMap<(ServerId, String), String>,
}

#[derive(Default)]
struct Inner {
    sessions: crate::FastMap<SessionId, Session>,
    /// Per server, one entry per call in flight.
    in_flight: crate::FastMap<ServerId, Vec<Busy>>,
    /// (server, upstream task id) → the `tasks/result` requests of its 2025-era client
    /// waiting for it (numbered), which send what the server asks about the task.
    waiting: HashMap<(ServerId, String), Vec<Waiting>>,
    /// 2026-07-28 `subscriptions/listen` streams with resource subscriptions
    /// ([`listeners`]).
    listeners: HashMap<u64, listeners::Listener>,
    /// 2026-07-28 HTTP requests' sessions whose work is over ([`late`]).
    late: late::Late,
}

impl Inner {
    /// Whether any session or listen stream is subscribed to (server, upstream URI).
    fn subscribed(&self, key: &(ServerId, String)) -> bool {
        self.sessions
            .values()
            .any(|s| s.subscriptions.contains_key(key))
            || self
                .listeners
                .values()
                .any(|l| l.subscriptions.contains_key(key))
    }
}

/// One call in flight on a server.
struct Busy {
    call: u64,
    session: SessionId,
    rounds: Option<AskSink>,
}

/// The sessions the gateway serves, as far as upstream traffic must reach them.
pub struct Relay {
    next: AtomicU64,
    next_call: AtomicU64,
    inner: Mutex<Inner>,
    views: watch::Receiver<Arc<Views>>,
    /// The tasks each session created ([`tasks`]).
    pub tasks: tasks::Tasks,
}

/// A call in flight on a server: ends when dropped.
pub struct InFlight<'a> {
    relay: &'a Relay,
    server: &'a ServerId,
    call: u64,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut inner = self.relay.lock();
        // The server's list stays when it empties: its next call reuses it (servers are few).
        if let Some(calls) = inner.in_flight.get_mut(self.server)
            && let Some(at) = calls.iter().position(|b| b.call == self.call)
        {
            calls.swap_remove(at);
        }
    }
}

/// A client's `tasks/result` waiting for a task: ends when dropped.
pub struct TaskWait {
    relay: Arc<Relay>,
    key: (ServerId, String),
    number: u64,
}

impl Drop for TaskWait {
    fn drop(&mut self) {
        let mut inner = self.relay.lock();
        if let Some(waiting) = inner.waiting.get_mut(&self.key) {
            waiting.retain(|(number, _)| *number != self.number);
            if waiting.is_empty() {
                inner.waiting.remove(&self.key);
            }
        }
    }
}

fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

impl Relay {
    pub fn new(views: watch::Receiver<Arc<Views>>) -> Self {
        Self {
            next: AtomicU64::new(1),
            next_call: AtomicU64::new(1),
            inner: Mutex::new(Inner::default()),
            views,
            tasks: tasks::Tasks::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every critical section is a few map operations with no await and no panic path
        // that leaves the maps inconsistent, so a poisoned lock is still sound to use.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The client sessions upstream messages can be routed to now: stdio sessions, 2025-era
    /// HTTP sessions, and 2026-07-28 HTTP requests not yet forgotten ([`late`]).
    pub fn sessions(&self) -> usize {
        self.lock().sessions.len()
    }

    /// A number for a new session.
    pub fn new_session(&self) -> SessionId {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// The session can be reached. Called at `notifications/initialized` and by every
    /// request that depends on it, since a client's first request may be handled before its
    /// `initialized` notification; a known session is left as it is.
    pub fn register(&self, session: SessionId, profile: &ProfileName, peer: &Peer<RoleServer>) {
        self.register_reach(session, profile, || Reach::of(peer));
    }

    /// [`Self::register`] for a session reached as `reach` says.
    pub fn register_reach(
        &self,
        session: SessionId,
        profile: &ProfileName,
        reach: impl FnOnce() -> Reach,
    ) {
        self.lock()
            .sessions
            .entry(session)
            .or_insert_with(|| Session {
                profile: profile.clone(),
                reach: reach(),
                level: None,
                subscriptions: HashMap::new(),
            });
    }

    /// The session is gone. Returns the resources only it was subscribed to, to unsubscribe
    /// upstream.
    pub fn unregister(&self, session: SessionId) -> Vec<(ServerId, String)> {
        self.tasks.forget_session(session);
        let mut inner = self.lock();
        let Some(gone) = inner.sessions.remove(&session) else {
            return Vec::new();
        };
        gone.subscriptions
            .into_keys()
            .filter(|key| !inner.subscribed(key))
            .collect()
    }

    /// Marks a call of `session` in flight on `server` until the guard drops; `rounds` for a
    /// 2026-07-28 call.
    pub fn begin_call<'a>(
        &'a self,
        server: &'a ServerId,
        session: SessionId,
        rounds: Option<AskSink>,
    ) -> InFlight<'a> {
        let call = self.next_call.fetch_add(1, Ordering::Relaxed);
        let busy = Busy {
            call,
            session,
            rounds,
        };
        let mut inner = self.lock();
        // The key is cloned only the first time: a call must not allocate for it.
        match inner.in_flight.get_mut(server) {
            Some(calls) => calls.push(busy),
            None => {
                inner.in_flight.insert(server.clone(), vec![busy]);
            }
        }
        InFlight {
            relay: self,
            server,
            call,
        }
    }

    /// A 2025-era client waits in `tasks/result` for the task `upstream_id` of `server`:
    /// what the server asks about the task is queued on `jobs`, for that request's handler to
    /// send (rmcp sends a request on the stream of the request whose handler sends it).
    pub fn await_task(
        self: &Arc<Self>,
        server: &ServerId,
        upstream_id: &str,
        jobs: mpsc::Sender<TaskJob>,
    ) -> TaskWait {
        let number = self.next_call.fetch_add(1, Ordering::Relaxed);
        let key = (server.clone(), upstream_id.to_owned());
        self.lock()
            .waiting
            .entry(key.clone())
            .or_default()
            .push((number, jobs));
        TaskWait {
            relay: self.clone(),
            key,
            number,
        }
    }

    /// Records the session's level; returns the most verbose level any session asked for,
    /// which is what the upstreams are set to.
    pub fn set_level(&self, session: SessionId, level: LoggingLevel) -> LoggingLevel {
        let mut inner = self.lock();
        if let Some(s) = inner.sessions.get_mut(&session) {
            s.level = Some(level);
        }
        inner
            .sessions
            .values()
            .filter_map(|s| s.level)
            .min_by_key(|l| rank(*l))
            .unwrap_or(level)
    }

    /// Records a subscription; `true` when it is the first to this resource (subscribe upstream).
    pub fn subscribe(
        &self,
        session: SessionId,
        server: &ServerId,
        upstream: &str,
        exposed: &str,
    ) -> bool {
        let mut inner = self.lock();
        let key = (server.clone(), upstream.to_owned());
        let first = !inner.subscribed(&key);
        if let Some(s) = inner.sessions.get_mut(&session) {
            s.subscriptions.insert(key, exposed.to_owned());
        }
        first
    }

    /// Drops a subscription; `true` when no session is subscribed to it any more.
    pub fn unsubscribe(&self, session: SessionId, server: &ServerId, upstream: &str) -> bool {
        let mut inner = self.lock();
        let key = (server.clone(), upstream.to_owned());
        if let Some(s) = inner.sessions.get_mut(&session) {
            s.subscriptions.remove(&key);
        }
        !inner.subscribed(&key)
    }

    /// Sessions whose profile's view includes `server`.
    fn seeing<'a>(&self, inner: &'a Inner, server: &ServerId) -> Vec<(&'a SessionId, &'a Session)> {
        let views = self.views.borrow();
        inner
            .sessions
            .iter()
            .filter(|(_, s)| {
                views
                    .get(&s.profile)
                    .is_some_and(|v| v.shows_server(server))
            })
            .collect()
    }

    /// The sessions with a call in flight on `server`, else those that see it.
    fn audience(&self, inner: &Inner, server: &ServerId) -> Vec<SessionId> {
        let mut busy: Vec<SessionId> = inner
            .in_flight
            .get(server)
            .map(|calls| calls.iter().map(|b| b.session).collect())
            .unwrap_or_default();
        busy.sort_unstable();
        busy.dedup();
        busy.retain(|s| inner.sessions.contains_key(s));
        if !busy.is_empty() {
            return busy;
        }
        self.seeing(inner, server)
            .into_iter()
            .map(|(id, _)| *id)
            .collect()
    }

    /// Relays an upstream log message (see the module doc for who gets it).
    pub async fn log(&self, server: &ServerId, mut params: LoggingMessageNotificationParam) {
        params.logger = Some(match params.logger.take() {
            Some(logger) => format!("{server}/{logger}"),
            None => server.to_string(),
        });
        let targets: Vec<Reach> = {
            let inner = self.lock();
            self.audience(&inner, server)
                .iter()
                .filter_map(|id| inner.sessions.get(id))
                .filter(|s| s.level.is_none_or(|min| rank(params.level) >= rank(min)))
                .map(|s| s.reach.clone())
                .collect()
        };
        for reach in targets {
            if let Err(error) = reach.log(params.clone()).await {
                tracing::debug!(%server, %error, "could not relay a log message");
            }
        }
    }

    /// Relays `notifications/resources/updated` to the sessions and listen streams
    /// subscribed to it.
    pub async fn resource_updated(&self, server: &ServerId, uri: &str) {
        let key = (server.clone(), uri.to_owned());
        let targets: Vec<(Peer<RoleServer>, String)> = {
            let inner = self.lock();
            listeners::tell(&inner, &key);
            inner
                .sessions
                .values()
                .filter_map(|s| {
                    let peer = s.reach.peer()?;
                    Some((peer.clone(), s.subscriptions.get(&key)?.clone()))
                })
                .collect()
        };
        for (peer, exposed) in targets {
            let notice = ResourceUpdatedNotificationParam::new(exposed);
            if let Err(error) = peer.notify_resource_updated(notice).await {
                tracing::debug!(%server, %error, "could not relay a resource update");
            }
        }
    }

    /// Where `ask` from `server` must go (module doc), or the error to answer the upstream
    /// with. `related`: the upstream task the request belongs to (its related-task `_meta`).
    pub fn requester(
        &self,
        server: &ServerId,
        ask: Ask,
        related: Option<&str>,
    ) -> Result<Route, ErrorData> {
        if let Some(route) = related.and_then(|id| self.task_requester(server, ask, id)) {
            return route;
        }
        let inner = self.lock();
        let candidates = self.audience(&inner, server);
        let method = ask.method();
        let peer = match candidates.as_slice() {
            [one] => {
                let rounds: Vec<&AskSink> = inner
                    .in_flight
                    .get(server)
                    .into_iter()
                    .flatten()
                    .filter(|b| b.session == *one)
                    .filter_map(|b| b.rounds.as_ref())
                    .collect();
                match rounds.as_slice() {
                    [] => match inner.sessions.get(one).map(|s| &s.reach) {
                        Some(Reach::Stream(_)) => return Err(asked_between_calls(method, server)),
                        reach => reach.and_then(Reach::peer).cloned(),
                    },
                    [sink] if sink.declared(ask) => return Ok(Route::Rounds((*sink).clone())),
                    [_] => return Err(undeclared(method, server)),
                    many => {
                        return Err(ErrorData::internal_error(
                            format!(
                                "toolgate cannot tell which of {} calls of one client session should answer {method} from server \"{server}\"",
                                many.len()
                            ),
                            None,
                        ));
                    }
                }
            }
            [] => None,
            many => {
                return Err(ErrorData::internal_error(
                    format!(
                        "toolgate cannot tell which of {} client sessions should answer {method} from server \"{server}\"",
                        many.len()
                    ),
                    None,
                ));
            }
        };
        Self::to_client(peer, ask, server)
    }

    /// Where a request about the task `upstream_id` goes: the task's own client, whatever
    /// else is in flight on the server; `None` for a task no client of toolgate owns.
    fn task_requester(
        &self,
        server: &ServerId,
        ask: Ask,
        upstream_id: &str,
    ) -> Option<Result<Route, ErrorData>> {
        let (owner, route) = self.tasks.owner(server, upstream_id)?;
        if let Some(bridge) = &route.bridge {
            return Some(if bridge.sink.declared(ask) {
                Ok(Route::Rounds(bridge.sink.clone()))
            } else {
                Err(undeclared(ask.method(), server))
            });
        }
        let tasks::Owner::Session(session) = owner else {
            return None;
        };
        let inner = self.lock();
        let peer = inner
            .sessions
            .get(&session)
            .and_then(|s| s.reach.peer().cloned());
        // The latest `tasks/result` waiting for the task, else the session itself.
        let waiting = inner
            .waiting
            .get(&(server.clone(), upstream_id.to_owned()))
            .and_then(|waiting| waiting.last())
            .map(|(_, jobs)| jobs.clone());
        drop(inner);
        Some(
            Self::to_client(peer, ask, server).map(|route| match (route, waiting) {
                (Route::Client(_), Some(jobs)) => Route::Waiting(jobs),
                (route, _) => route,
            }),
        )
    }

    /// `ask` sent to a 2025-era session's client, if it can take it.
    fn to_client(
        peer: Option<Peer<RoleServer>>,
        ask: Ask,
        server: &ServerId,
    ) -> Result<Route, ErrorData> {
        let method = ask.method();
        let Some(peer) = peer else {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!(
                    "no client session of toolgate can answer {method} from server \"{server}\""
                ),
                None,
            ));
        };
        if peer.peer_info().is_none() {
            // A session opened with `server/discover`: it is asked only in answer to a call.
            return Err(asked_between_calls(method, server));
        }
        if !ask.declared_by(&peer) {
            return Err(undeclared(method, server));
        }
        Ok(Route::Client(peer))
    }
}
