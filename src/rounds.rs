//! Multi round-trip requests (2026-07-28): what an upstream asks during a 2026-07-28 client's call reaches that client as `InputRequiredResult` rounds.
//!
//! A 2026-07-28 server may not send requests to its client; it answers the call with an
//! `InputRequiredResult` instead, and the client retries the call with `inputResponses` and
//! the `requestState` it was given. toolgate's upstreams are 2025-era sessions, which do send
//! `sampling/createMessage`, `elicitation/create` and `roots/list` mid-call. So a 2026-07-28
//! client's call runs as an [`Exchange`]:
//!
//! - the call's work (the pipeline, or the forwarded request) runs in a task of its own;
//! - each request the upstream makes during it arrives through the call's [`AskSink`]
//!   ([`crate::relay`] routes it there) and waits, unanswered, for the client;
//! - the client's request is answered with the waiting requests and a fresh `requestState`,
//!   and the exchange is parked under it, bound to its [`Owner`];
//! - the retry takes the exchange back (each `requestState` works once), answers the waiting
//!   requests with `inputResponses`, and waits again for the result or the next requests.
//!
//! A parked exchange expires after [`INPUT_WAIT`]; at most [`MAX_PARKED`] are held (and
//! [`MAX_PARKED_PER_OWNER`] per owner). An exchange that is dropped, expires or whose retry is
//! cancelled cancels its work, which tells the upstream.

// Sampling and roots are 2025-era features rmcp marks deprecated (SEP-2577); they are what
// this module carries to 2026-07-28 clients.
#![allow(deprecated)]

mod exchange;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, Instant},
};

use rmcp::model::{
    ClientCapabilities, CreateMessageResult, ElicitResult, ErrorData, InputRequest, InputResponses,
    ListRootsResult,
};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

pub use exchange::{Exchange, Outcome, Step};

use crate::{config::ProfileName, relay::Ask, relay::SessionId};

/// How long a parked exchange waits for the client's retry.
pub const INPUT_WAIT: Duration = Duration::from_secs(300);
/// Exchanges parked at once, in all.
pub const MAX_PARKED: usize = 1024;
/// Exchanges parked at once for one owner.
pub const MAX_PARKED_PER_OWNER: usize = 64;
/// Requests of one call that may wait for the client at once.
const ASKS_PER_CALL: usize = 16;

/// Who may continue a parked exchange.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Owner {
    /// A stdio session (one client per process).
    Session(SessionId),
    /// An HTTP caller: 2026-07-28 requests have no session, so the profile and a SHA-256 of
    /// the `Authorization` header (none: all zero) stand for the client.
    Http {
        profile: ProfileName,
        credential: [u8; 32],
    },
}

/// The request an exchange answers; a retry must be the same request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct What {
    pub method: &'static str,
    /// The tool or prompt name, or the resource URI, as the client sent it.
    pub name: String,
}

impl std::fmt::Display for What {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {:?}", self.method, self.name)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RoundsError {
    #[error(
        "requestState does not name a request of this client waiting for input: unknown, already used, or expired (a pending request waits {} s)",
        INPUT_WAIT.as_secs()
    )]
    UnknownState,
    #[error("requestState belongs to {expected}, not to {got}")]
    Mismatch { expected: What, got: What },
    #[error("inputResponses[{key:?}] is not a valid answer to {method}: {error}")]
    InvalidResponse {
        key: String,
        method: &'static str,
        error: String,
    },
    #[error(
        "toolgate holds {held} requests waiting for client input, its limit for {scope}; answer or abandon one first"
    )]
    Full { held: usize, scope: &'static str },
    #[error("the call ended without an answer")]
    Lost,
    #[error("toolgate could not draw a random requestState")]
    NoRandomness,
    #[error("the client cancelled the request")]
    Cancelled,
}

impl RoundsError {
    /// The stable code, in the JSON-RPC error's `data.code`.
    pub fn code(&self) -> &'static str {
        match self {
            RoundsError::UnknownState => "UNKNOWN_REQUEST_STATE",
            RoundsError::Mismatch { .. } => "REQUEST_STATE_MISMATCH",
            RoundsError::InvalidResponse { .. } => "INVALID_INPUT_RESPONSE",
            RoundsError::Full { .. } => "TOO_MANY_PENDING_INPUTS",
            RoundsError::Lost | RoundsError::NoRandomness => "INTERNAL",
            RoundsError::Cancelled => "CANCELLED",
        }
    }
}

/// One request an upstream made, waiting for the client's answer.
pub struct Asked {
    pub ask: Ask,
    pub request: InputRequest,
    /// The client's answer (already checked to be of the request's result type) or an error.
    pub reply: oneshot::Sender<Result<Value, ErrorData>>,
}

/// Where a 2026-07-28 call's upstream requests go; held by the call while it runs.
#[derive(Clone)]
pub struct AskSink {
    tx: mpsc::Sender<Asked>,
    /// What the client declared in the request that started the call.
    capabilities: Arc<ClientCapabilities>,
}

impl AskSink {
    pub fn new(capabilities: ClientCapabilities) -> (Self, mpsc::Receiver<Asked>) {
        let (tx, rx) = mpsc::channel(ASKS_PER_CALL);
        let sink = Self {
            tx,
            capabilities: Arc::new(capabilities),
        };
        (sink, rx)
    }

    pub fn declared(&self, ask: Ask) -> bool {
        let caps = &self.capabilities;
        match ask {
            Ask::Sampling => caps.sampling.is_some(),
            Ask::Elicitation => caps.elicitation.is_some(),
            Ask::Roots => caps.roots.is_some(),
        }
    }

    /// Puts `request` before the client and waits for its answer. Dropping the future
    /// withdraws the request.
    pub async fn ask(&self, ask: Ask, request: InputRequest) -> Result<Value, ErrorData> {
        let (reply, answer) = oneshot::channel();
        let asked = Asked {
            ask,
            request,
            reply,
        };
        let gone = || {
            ErrorData::internal_error(
                format!(
                    "the client's call ended before it answered {}",
                    ask.method()
                ),
                None,
            )
        };
        self.tx.send(asked).await.map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }
}

/// Checks that `value` is an answer of the type `ask` expects.
pub(crate) fn check_answer(ask: Ask, value: &Value) -> Result<(), String> {
    let checked = match ask {
        Ask::Sampling => serde_json::from_value::<CreateMessageResult>(value.clone()).map(drop),
        Ask::Elicitation => serde_json::from_value::<ElicitResult>(value.clone()).map(drop),
        Ask::Roots => serde_json::from_value::<ListRootsResult>(value.clone()).map(drop),
    };
    checked.map_err(|e| e.to_string())
}

struct Parked {
    exchange: Exchange,
    since: Instant,
}

/// The parked exchanges of the gateway.
#[derive(Default)]
pub struct Rounds {
    parked: Mutex<HashMap<String, Parked>>,
}

impl Rounds {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Parked>> {
        // Critical sections are map operations without await or panic paths.
        self.parked
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Parks `exchange` under a new `requestState`.
    fn park(&self, exchange: Exchange) -> Result<String, RoundsError> {
        let mut parked = self.lock();
        expire(&mut parked);
        if parked.len() >= MAX_PARKED {
            return Err(RoundsError::Full {
                held: parked.len(),
                scope: "all clients",
            });
        }
        let mine = parked
            .values()
            .filter(|p| p.exchange.owner == exchange.owner)
            .count();
        if mine >= MAX_PARKED_PER_OWNER {
            return Err(RoundsError::Full {
                held: mine,
                scope: "one client",
            });
        }
        let state = new_state().ok_or(RoundsError::NoRandomness)?;
        parked.insert(
            state.clone(),
            Parked {
                exchange,
                since: Instant::now(),
            },
        );
        Ok(state)
    }

    /// Takes back the exchange `state` names for its owner's retry of the same request, and
    /// answers its waiting requests with `responses`. A retry that is refused for its
    /// request or its responses leaves the exchange parked.
    pub fn resume(
        &self,
        state: &str,
        owner: &Owner,
        what: &What,
        responses: Option<InputResponses>,
    ) -> Result<Exchange, RoundsError> {
        let mut parked = self.lock();
        expire(&mut parked);
        let Some(held) = parked.get(state) else {
            return Err(RoundsError::UnknownState);
        };
        // Another client's state is as unknown as a made-up one.
        if held.exchange.owner != *owner {
            return Err(RoundsError::UnknownState);
        }
        if held.exchange.what != *what {
            return Err(RoundsError::Mismatch {
                expected: held.exchange.what.clone(),
                got: what.clone(),
            });
        }
        let responses = responses.unwrap_or_default();
        for (key, value) in &responses {
            if let Some(open) = held.exchange.open.get(key) {
                check_answer(open.ask, value).map_err(|error| RoundsError::InvalidResponse {
                    key: key.clone(),
                    method: open.ask.method(),
                    error,
                })?;
            }
        }
        let Some(Parked { mut exchange, .. }) = parked.remove(state) else {
            return Err(RoundsError::UnknownState);
        };
        drop(parked);
        for (key, value) in responses {
            match exchange.open.remove(&key) {
                // The upstream may have given up on it meanwhile; nothing to do then.
                Some(open) => {
                    let _ = open.reply.send(Ok(value));
                }
                None => tracing::debug!(%key, "an input response for no waiting request"),
            }
        }
        Ok(exchange)
    }

    /// Cancels every parked exchange (the gateway is stopping).
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// Drops expired exchanges every few seconds until `stop` fires, then all of them.
    pub async fn expire_until(self: Arc<Self>, stop: CancellationToken) {
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                // The gateway is stopping: nobody will retry.
                () = stop.cancelled() => break,
                // Time to look for expired exchanges.
                _ = tick.tick() => expire(&mut self.lock()),
            }
        }
        self.clear();
    }

    pub fn parked(&self) -> usize {
        self.lock().len()
    }
}

fn expire(parked: &mut HashMap<String, Parked>) {
    parked.retain(|_, p| p.since.elapsed() < INPUT_WAIT);
}

/// 128 random bits from the OS, as hex: not guessable, not derived from anything else.
fn new_state() -> Option<String> {
    let mut bytes = [0u8; 16];
    if let Err(error) = getrandom::fill(&mut bytes) {
        tracing::error!(%error, "no OS randomness for a requestState");
        return None;
    }
    let mut state = String::with_capacity(35);
    state.push_str("tg.");
    for byte in bytes {
        state.push_str(&format!("{byte:02x}"));
    }
    Some(state)
}
