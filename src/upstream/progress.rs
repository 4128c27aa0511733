//! Progress routing: upstream progress tokens → (calling client, the client's own token).

use std::collections::HashMap;
use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use tokio::sync::{Mutex, MutexGuard};

use super::ProgressSink;

/// Routes for the calls in flight on one upstream that asked for progress.
///
/// An async mutex on purpose: a call holds it across sending its request, and the progress
/// handler takes it before looking up, so the first progress can never beat the route.
#[derive(Default)]
pub struct ProgressRoutes {
    routes: Mutex<HashMap<ProgressToken, ProgressSink>>,
    /// Relays started but not finished. rmcp runs each notification handler as its own task,
    /// so an upstream's last progress can still be on its way when the result arrives.
    in_flight: AtomicUsize,
}

/// How many times a finished call yields, at most, for progress relays still running.
const SETTLE_YIELDS: usize = 64;
/// How many times it yields first, for relays spawned but not started.
const SETTLE_MIN_YIELDS: usize = 16;

impl ProgressRoutes {
    pub(super) async fn lock(&self) -> MutexGuard<'_, HashMap<ProgressToken, ProgressSink>> {
        self.routes.lock().await
    }

    /// Relays one upstream progress notification to the client that made the call.
    pub(super) async fn forward(&self, params: ProgressNotificationParam) {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.relay(params).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
    }

    async fn relay(&self, mut params: ProgressNotificationParam) {
        let sink = self
            .routes
            .lock()
            .await
            .get(&params.progress_token)
            .cloned();
        let Some(sink) = sink else {
            tracing::debug!(token = ?params.progress_token, "progress for no call in flight");
            return;
        };
        params.progress_token = sink.token.clone();
        if let Err(error) = sink.notify(params).await {
            tracing::debug!(%error, "could not relay progress to the client");
        }
    }

    /// Lets progress that arrived before a call's result reach the client before the result
    /// does: yields to the relay tasks already scheduled, boundedly, so a stuck client cannot
    /// hold the call.
    ///
    /// rmcp spawns the handler of a progress notification that came just before the result,
    /// and on a multi-thread runtime that task may not have started (and so not be counted)
    /// when the result wakes the call: the first [`SETTLE_MIN_YIELDS`] yields are taken
    /// whatever the count says (the HTTP fast path, which writes the answer at once, lost
    /// the last progress of the conformance suite's `tools-call-with-progress` once in four
    /// runs without them).
    pub(super) async fn settle(&self) {
        for _ in 0..SETTLE_MIN_YIELDS {
            tokio::task::yield_now().await;
        }
        for _ in 0..SETTLE_YIELDS {
            if self.in_flight.load(Ordering::SeqCst) == 0 {
                return;
            }
            tokio::task::yield_now().await;
        }
    }
}

/// Removes a route when the call ends, however it ends.
pub(super) struct RouteGuard {
    routes: Arc<ProgressRoutes>,
    token: Option<ProgressToken>,
}

impl RouteGuard {
    pub(super) fn new(routes: Arc<ProgressRoutes>, token: ProgressToken) -> Self {
        Self {
            routes,
            token: Some(token),
        }
    }
}

impl Drop for RouteGuard {
    fn drop(&mut self) {
        let Some(token) = self.token.take() else {
            return;
        };
        // Usually uncontended: remove now. Otherwise leave it to a task, since drop cannot wait.
        if let Ok(mut routes) = self.routes.routes.try_lock() {
            routes.remove(&token);
        } else if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let routes = self.routes.clone();
            runtime.spawn(async move {
                routes.routes.lock().await.remove(&token);
            });
        }
    }
}

/// The route of a task's progress (MCP 2025-11-25: a task-augmented request's token stays
/// live for the task's life): removed when dropped, with the task.
pub struct ProgressRoute(#[allow(dead_code)] RouteGuard);

impl std::fmt::Debug for ProgressRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressRoute")
    }
}

impl ProgressRoutes {
    /// Routes progress for `token` (toolgate's, sent upstream) to `sink` until the route drops.
    pub(super) async fn route(
        self: &Arc<Self>,
        token: ProgressToken,
        sink: ProgressSink,
    ) -> ProgressRoute {
        self.routes.lock().await.insert(token.clone(), sink);
        ProgressRoute(RouteGuard::new(self.clone(), token))
    }
}
