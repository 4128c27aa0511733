//! The rmcp client handler toolgate runs against each upstream: relays progress, notices list changes.

use std::sync::Arc;

#[expect(
    deprecated,
    reason = "logging notifications are still sent by 2025-era servers"
)]
use rmcp::model::LoggingMessageNotificationParam;
use rmcp::{
    ClientHandler, RoleClient,
    model::{ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam},
    service::NotificationContext,
};
use tokio::sync::Notify;

use super::ProgressRoutes;
use crate::config::ServerId;

pub struct UpstreamClient {
    server: ServerId,
    progress: Arc<ProgressRoutes>,
    list_changed: Arc<Notify>,
}

impl UpstreamClient {
    pub(super) fn new(
        server: ServerId,
        progress: Arc<ProgressRoutes>,
        list_changed: Arc<Notify>,
    ) -> Self {
        Self {
            server,
            progress,
            list_changed,
        }
    }
}

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("toolgate", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.forward(params).await;
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "upstream announced a tool list change");
        // `notify_one` stores a permit, so a change during a re-import is not lost.
        self.list_changed.notify_one();
    }

    #[expect(
        deprecated,
        reason = "older upstreams still log this way; we relay it to our log"
    )]
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        tracing::info!(server = %self.server, level = ?params.level, data = %params.data, "upstream log");
    }
}
