//! What toolgate keeps for a 2026-07-28 client's task (SEP-2663) that its upstream runs as a 2025-11-25 task: the requests the upstream made during it, and its outcome.
//!
//! A 2025-11-25 server delivers what it asks during a task (elicitation, sampling) and the
//! task's result through `tasks/result`; a SEP-2663 client polls `tasks/get`, which carries
//! both (`inputRequests`, `result` or `error`), and answers with `tasks/update`. So while a
//! bridged task waits for input or has ended, a *driver* (a `tasks/result` toolgate sends
//! upstream) runs; the requests it brings arrive through the bridge's [`AskSink`] (the relay
//! routes them here by their related-task `_meta`) and wait, keyed, until a `tasks/update`
//! answers them; its answer is the task's outcome.

use std::{collections::BTreeMap, time::Duration};

use rmcp::model::{ErrorData, InputRequests, InputResponses};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::{
    rounds::{AskSink, Asked, RoundsError, check_answer},
    upstream::UpstreamError,
};

/// What a driver's `tasks/result` ends with.
pub type DriverOutcome = Result<Map<String, Value>, UpstreamError>;

/// One bridged task.
pub struct Bridge {
    /// Where the upstream's requests about this task go.
    pub sink: AskSink,
    pub state: tokio::sync::Mutex<BridgeState>,
    /// Stops the driver; fired when the task is forgotten.
    cancel: CancellationToken,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bridge")
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// The mutable part of a [`Bridge`].
pub struct BridgeState {
    asks: mpsc::Receiver<Asked>,
    /// Requests shown to the client and not answered yet, by key (never reused).
    open: BTreeMap<String, Asked>,
    next_key: u64,
    driver: Option<oneshot::Receiver<DriverOutcome>>,
    /// The task's result (`Ok`) or JSON-RPC error (`Err`), once the driver had it.
    outcome: Option<Result<Map<String, Value>, ErrorData>>,
}

impl Bridge {
    /// A bridge for a task whose client declared `capabilities` in the request that created it.
    pub fn new(capabilities: rmcp::model::ClientCapabilities) -> Self {
        let (sink, asks) = AskSink::new(capabilities);
        Self {
            sink,
            state: tokio::sync::Mutex::new(BridgeState {
                asks,
                open: BTreeMap::new(),
                next_key: 1,
                driver: None,
                outcome: None,
            }),
            cancel: CancellationToken::new(),
        }
    }

    /// The token a driver stops on (the task was forgotten or cancelled).
    pub fn driver_token(&self) -> CancellationToken {
        self.cancel.child_token()
    }
}

impl BridgeState {
    fn add(&mut self, asked: Asked) {
        let key = format!("{}-{}", kind_of(&asked), self.next_key);
        self.next_key += 1;
        self.open.insert(key, asked);
    }

    /// Takes in the requests that arrived and drops those the upstream withdrew.
    fn collect(&mut self) {
        while let Ok(asked) = self.asks.try_recv() {
            self.add(asked);
        }
        self.open.retain(|_, asked| !asked.reply.is_closed());
    }

    /// Reads a finished driver's outcome. A driver that failed on toolgate's side (timed
    /// out, the server unreachable) is forgotten, to be started again.
    fn settle(&mut self) {
        let Some(driver) = self.driver.as_mut() else {
            return;
        };
        match driver.try_recv() {
            Err(oneshot::error::TryRecvError::Empty) => {}
            Err(oneshot::error::TryRecvError::Closed) => self.driver = None,
            Ok(outcome) => {
                self.driver = None;
                self.record(outcome);
            }
        }
    }

    fn record(&mut self, outcome: DriverOutcome) {
        match outcome {
            Ok(result) => self.outcome = Some(Ok(result)),
            Err(UpstreamError::Rpc { error, .. }) => self.outcome = Some(Err(error)),
            Err(other) => tracing::debug!("a task's tasks/result ended early: {other}"),
        }
    }

    /// Whether a driver should be started: none runs and the outcome is not known.
    pub fn needs_driver(&mut self) -> bool {
        self.settle();
        self.driver.is_none() && self.outcome.is_none()
    }

    /// A driver was started; its outcome will come through `outcome`.
    pub fn driving(&mut self, outcome: oneshot::Receiver<DriverOutcome>) {
        self.driver = Some(outcome);
    }

    /// Waits up to `wait` for the outcome, or (with `for_asks`) for a request of the
    /// upstream; returns at once when either is there already.
    pub async fn wait(&mut self, wait: Duration, for_asks: bool) {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            self.collect();
            self.settle();
            if self.outcome.is_some() || (for_asks && !self.open.is_empty()) {
                return;
            }
            let Some(driver) = self.driver.as_mut() else {
                return;
            };
            tokio::select! {
                // Time is up: the task is reported as it is now.
                () = tokio::time::sleep_until(deadline) => return,
                // The driver ended: read it at the top of the loop.
                outcome = driver => {
                    self.driver = None;
                    if let Ok(outcome) = outcome {
                        self.record(outcome);
                    }
                }
                // The upstream asks something.
                asked = self.asks.recv(), if for_asks => {
                    if let Some(asked) = asked {
                        self.add(asked);
                    }
                }
            }
        }
    }

    /// The task's outcome, once known.
    pub fn outcome(&mut self) -> Option<&Result<Map<String, Value>, ErrorData>> {
        self.settle();
        self.outcome.as_ref()
    }

    /// The requests waiting for the client's answer.
    pub fn open_requests(&mut self) -> InputRequests {
        self.collect();
        self.open
            .iter()
            .map(|(key, asked)| (key.clone(), asked.request.clone()))
            .collect()
    }

    /// Answers waiting requests with `responses`; keys that name no waiting request are
    /// ignored (SEP-2663). Every answer is checked before any is sent.
    pub fn answer(&mut self, responses: InputResponses) -> Result<(), RoundsError> {
        self.collect();
        for (key, value) in &responses {
            if let Some(open) = self.open.get(key) {
                check_answer(open.ask, value).map_err(|error| RoundsError::InvalidResponse {
                    key: key.clone(),
                    method: open.ask.method(),
                    error,
                })?;
            }
        }
        for (key, value) in responses {
            match self.open.remove(&key) {
                // The upstream may have given up on it meanwhile; nothing to do then.
                Some(open) => {
                    let _ = open.reply.send(Ok(value));
                }
                None => {
                    tracing::debug!(%key, "tasks/update: an input response for no waiting request")
                }
            }
        }
        Ok(())
    }

    /// The task was cancelled: its waiting requests are withdrawn.
    pub fn withdraw(&mut self) {
        self.collect();
        self.open.clear();
    }
}

fn kind_of(asked: &Asked) -> &'static str {
    match asked.ask {
        crate::relay::Ask::Sampling => "sampling",
        crate::relay::Ask::Elicitation => "elicitation",
        crate::relay::Ask::Roots => "roots",
    }
}
