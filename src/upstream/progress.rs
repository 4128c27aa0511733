//! Progress routing: upstream progress tokens → (calling client, the client's own token).

use std::collections::HashMap;
use std::sync::Arc;

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
}

impl ProgressRoutes {
    pub(super) async fn lock(&self) -> MutexGuard<'_, HashMap<ProgressToken, ProgressSink>> {
        self.routes.lock().await
    }

    /// Relays one upstream progress notification to the client that made the call.
    pub(super) async fn forward(&self, mut params: ProgressNotificationParam) {
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
        params.progress_token = sink.token;
        if let Err(error) = sink.peer.notify_progress(params).await {
            tracing::debug!(%error, "could not relay progress to the client");
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
