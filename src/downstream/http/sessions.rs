//! Caps on live MCP sessions, per gateway and per profile, and their idle expiry.
//!
//! Each profile's endpoint has its own [`CappedSessions`] (rmcp's in-memory session manager
//! plus counting); all of them share one [`SessionLimits`]. A session-creating request
//! (`initialize` without `Mcp-Session-Id`) first takes a [`Reservation`]; at the cap it is
//! refused with 503 before rmcp sees it. When rmcp creates the session, a pending
//! reservation of its profile turns into a live session, so concurrent `initialize` calls
//! neither overshoot the cap nor are refused early. A session stops counting when rmcp
//! closes it: `DELETE`, idle expiry (`session_idle_secs`), or the gateway stopping; its
//! worker task ends then.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, Instant},
};

use futures::Stream;
use rmcp::{
    model::{ClientJsonRpcMessage, ServerJsonRpcMessage},
    transport::{
        WorkerTransport,
        streamable_http_server::{
            SessionId, SessionManager,
            session::{
                ServerSseMessage,
                local::{
                    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker, SessionError,
                },
            },
        },
    },
};

use super::{fast::FastSessions, owners::Owners};
use crate::{
    config::{HttpSettings, ProfileName},
    downstream::guard::Guarded,
};

/// How often the "sessions refused" warning may be logged.
const WARN_INTERVAL: Duration = Duration::from_secs(60);

/// Sessions of one profile (or all), as counted against a cap: `live + pending`.
///
/// `pending` reservations have no session yet; `converted` ones have become `live` but are
/// still held. Reservations are interchangeable, so `pending + converted` is always the
/// number held, and a dropped one gives back a conversion if there is one.
#[derive(Default)]
struct Count {
    live: usize,
    pending: usize,
    converted: usize,
}

impl Count {
    fn taken(&self) -> usize {
        self.live + self.pending
    }
}

#[derive(Default)]
struct Counts {
    total: Count,
    per_profile: HashMap<ProfileName, Count>,
    /// Refusals since the last warning, and when that was.
    refused: usize,
    warned_at: Option<Instant>,
}

/// The session caps and what counts against them; shared by every profile's endpoint.
pub struct SessionLimits {
    max: usize,
    max_per_profile: Option<usize>,
    counts: Mutex<Counts>,
}

/// Why a session was not opened: the message for the 503.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Full(pub String);

/// How long a client refused for the session cap is told to wait.
const RETRY_AFTER_SECS: u64 = 30;

impl Full {
    /// The answer to request `id`: 503 with a JSON-RPC error body, so MCP clients can show
    /// the reason.
    pub fn refusal(self, id: &rmcp::model::RequestId) -> axum::response::Response {
        use axum::http::{HeaderValue, StatusCode, header::RETRY_AFTER};
        let error = rmcp::model::ErrorData::new(rmcp::model::ErrorCode(-32000), self.0, None);
        let mut response = super::envelope::jsonrpc_error(id.clone(), error);
        *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
        response
    }
}

impl SessionLimits {
    pub fn new(settings: &HttpSettings) -> Arc<Self> {
        Arc::new(Self {
            max: settings.max_sessions,
            max_per_profile: settings.max_sessions_per_profile,
            counts: Mutex::new(Counts::default()),
        })
    }

    fn counts(&self) -> MutexGuard<'_, Counts> {
        // A panic elsewhere cannot leave the counts half-updated (each update is one step).
        self.counts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Holds a place for one new session of `profile`, or says why there is none.
    pub fn reserve(self: &Arc<Self>, profile: &ProfileName) -> Result<Reservation, Full> {
        let mut counts = self.counts();
        let total = counts.total.taken();
        let mine = counts.per_profile.get(profile).map_or(0, Count::taken);
        let full = if total >= self.max {
            Some(format!(
                "too many MCP sessions: this gateway serves at most {} (gateway.http.max_sessions); close idle sessions or retry later",
                self.max
            ))
        } else {
            self.max_per_profile.filter(|max| mine >= *max).map(|max| {
                format!(
                    "too many MCP sessions for profile {profile:?}: at most {max} (gateway.http.max_sessions_per_profile); close idle sessions or retry later"
                )
            })
        };
        if let Some(message) = full {
            counts.refused += 1;
            let now = Instant::now();
            if counts
                .warned_at
                .is_none_or(|at| now.duration_since(at) >= WARN_INTERVAL)
            {
                tracing::warn!(
                    refused = counts.refused,
                    live = counts.total.live,
                    "refusing new MCP sessions: {message}"
                );
                counts.warned_at = Some(now);
                counts.refused = 0;
            }
            return Err(Full(message));
        }
        counts.total.pending += 1;
        counts
            .per_profile
            .entry(profile.clone())
            .or_default()
            .pending += 1;
        Ok(Reservation {
            limits: self.clone(),
            profile: profile.clone(),
        })
    }

    /// Counts a session rmcp is creating, turning a pending reservation of `profile` live;
    /// `false` at the cap (only possible for a creation without a reservation).
    fn open(&self, profile: &ProfileName) -> bool {
        let mut counts = self.counts();
        let Counts {
            total, per_profile, ..
        } = &mut *counts;
        let mine = per_profile.entry(profile.clone()).or_default();
        if mine.pending > 0 && total.pending > 0 {
            for count in [total, mine] {
                count.pending -= 1;
                count.converted += 1;
                count.live += 1;
            }
            return true;
        }
        if total.taken() >= self.max || self.max_per_profile.is_some_and(|max| mine.taken() >= max)
        {
            return false;
        }
        total.live += 1;
        mine.live += 1;
        true
    }

    fn close(&self, profile: &ProfileName) {
        let mut counts = self.counts();
        counts.total.live = counts.total.live.saturating_sub(1);
        if let Some(count) = counts.per_profile.get_mut(profile) {
            count.live = count.live.saturating_sub(1);
        }
    }

    /// Live sessions over the whole gateway.
    pub fn live(&self) -> usize {
        self.counts().total.live
    }
}

/// A place held for one session being created; given back on drop.
pub struct Reservation {
    limits: Arc<SessionLimits>,
    profile: ProfileName,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut counts = self.limits.counts();
        let Counts {
            total, per_profile, ..
        } = &mut *counts;
        let Some(mine) = per_profile.get_mut(&self.profile) else {
            return;
        };
        // Give back a conversion of this profile if any, else a pending place: which of
        // the interchangeable reservations it was does not matter.
        let converted = mine.converted > 0;
        for count in [total, mine] {
            if converted {
                count.converted = count.converted.saturating_sub(1);
            } else {
                count.pending = count.pending.saturating_sub(1);
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CappedSessionError {
    #[error("the session cap is reached")]
    Full,
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

/// rmcp's in-memory sessions of one profile, counted against [`SessionLimits`].
pub struct CappedSessions {
    inner: LocalSessionManager,
    limits: Arc<SessionLimits>,
    /// Told when a session closes.
    owners: Arc<Owners>,
    profile: ProfileName,
    /// The HTTP fast path, told of each session created and closed.
    fast: Option<Arc<FastSessions>>,
}

impl CappedSessions {
    pub fn new(
        limits: Arc<SessionLimits>,
        owners: Arc<Owners>,
        profile: ProfileName,
        idle: Duration,
        fast: Option<Arc<FastSessions>>,
    ) -> Self {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(idle);
        Self {
            inner,
            limits,
            owners,
            profile,
            fast,
        }
    }
}

impl SessionManager for CappedSessions {
    type Error = CappedSessionError;
    type Transport = Guarded<WorkerTransport<LocalSessionWorker>>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        if !self.limits.open(&self.profile) {
            return Err(CappedSessionError::Full);
        }
        match self.inner.create_session().await {
            Ok((id, transport)) => {
                if let Some(fast) = &self.fast
                    && let Some(handle) = self.inner.sessions.read().await.get(&id).cloned()
                {
                    fast.created(&id, &self.profile, handle);
                }
                Ok((id, Guarded::new(transport)))
            }
            Err(error) => {
                self.limits.close(&self.profile);
                Err(error.into())
            }
        }
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        // As rmcp's own `close_session`, but counting: only the call that removes the
        // session from the map gives its place back, however many race to close it.
        if let Some(fast) = &self.fast {
            fast.closed(id);
        }
        let handle = self.inner.sessions.write().await.remove(id);
        if let Some(handle) = handle {
            self.limits.close(&self.profile);
            self.owners.forget(id);
            match handle.close().await {
                Ok(()) | Err(SessionError::SessionServiceTerminated) => {}
                Err(error) => return Err(LocalSessionManagerError::from(error).into()),
            }
        }
        Ok(())
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max: usize, per_profile: Option<usize>) -> Arc<SessionLimits> {
        SessionLimits::new(&HttpSettings {
            max_sessions: max,
            max_sessions_per_profile: per_profile,
            ..HttpSettings::default()
        })
    }

    fn profile(name: &str) -> ProfileName {
        ProfileName::parse(name).unwrap()
    }

    #[test]
    fn reservations_and_live_sessions_count_against_the_cap() {
        let limits = limits(2, None);
        let a = profile("a");
        let first = limits.reserve(&a).unwrap();
        assert!(limits.open(&a));
        // Created but not yet answered: counted once, not twice.
        let second = limits.reserve(&a).unwrap();
        drop(first);
        assert!(limits.reserve(&a).is_err(), "one live, one pending");
        drop(second);
        assert!(
            limits.reserve(&a).is_ok(),
            "the second never became a session"
        );
        limits.close(&a);
        assert_eq!(limits.live(), 0);
    }

    #[test]
    fn reservations_dropped_in_any_order_leave_nothing_behind() {
        let limits = limits(3, Some(3));
        let a = profile("a");
        let (one, two, three) = (
            limits.reserve(&a).unwrap(),
            limits.reserve(&a).unwrap(),
            limits.reserve(&a).unwrap(),
        );
        assert!(limits.reserve(&a).is_err());
        assert!(limits.open(&a));
        assert!(limits.open(&a));
        drop(three);
        drop(one);
        drop(two);
        assert_eq!(limits.live(), 2);
        assert!(limits.reserve(&a).is_ok(), "two live, one free");
        let counts = limits.counts();
        assert_eq!(
            (counts.total.converted, counts.per_profile[&a].converted),
            (0, 0)
        );
    }

    #[test]
    fn a_profile_cap_leaves_other_profiles_room() {
        let limits = limits(10, Some(1));
        let (a, b) = (profile("a"), profile("b"));
        let _held = limits.reserve(&a).unwrap();
        let refused = limits.reserve(&a).err().unwrap();
        assert!(
            refused.0.contains("max_sessions_per_profile"),
            "{}",
            refused.0
        );
        assert!(limits.reserve(&b).is_ok());
    }

    #[test]
    fn opening_without_a_reservation_still_stops_at_the_cap() {
        let limits = limits(1, None);
        let a = profile("a");
        assert!(limits.open(&a));
        assert!(!limits.open(&a));
        assert_eq!(limits.live(), 1);
    }
}
