//! A client handler that answers what toolgate relays from an upstream (sampling, elicitation, roots) and records what it is sent.
#![allow(deprecated)] // logging, sampling and roots: 2025-era features relayed here

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use rmcp::{
    ClientHandler, ErrorData, RoleClient,
    model::{
        ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
        ElicitRequestParams, ElicitResult, ElicitationAction, Implementation, ListRootsResult,
        LoggingMessageNotificationParam, ResourceUpdatedNotificationParam, Root, SamplingMessage,
    },
    service::{NotificationContext, RequestContext},
};
use serde_json::json;
use tokio::sync::Notify;

/// A client that answers sampling, elicitation and roots as the tests expect, and records the
/// log messages, resource updates and list changes it is sent.
#[derive(Clone, Default)]
pub struct Answers {
    pub logs: Arc<Mutex<Vec<LoggingMessageNotificationParam>>>,
    pub updates: Arc<Mutex<Vec<String>>>,
    pub changes: Arc<Mutex<Vec<&'static str>>>,
    seen: Arc<Notify>,
}

impl Answers {
    /// Waits (at most 10 s) until `done` holds of what was sent, and fails naming `what`.
    pub async fn wait_until(&self, what: &str, done: impl Fn(&Self) -> bool) {
        let waited = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let notified = self.seen.notified();
                if done(self) {
                    return;
                }
                notified.await;
            }
        })
        .await;
        assert!(waited.is_ok(), "timed out waiting for {what}");
    }

    /// The `data` of each log message, as text.
    pub fn log_data(&self) -> Vec<String> {
        self.logs
            .lock()
            .unwrap()
            .iter()
            .map(|l| l.data.as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

/// Roots, sampling and elicitation: what toolgate's upstream client declares, and what a
/// client must declare to be sent the requests toolgate relays from an upstream.
pub fn relayed_capabilities() -> ClientCapabilities {
    ClientCapabilities::builder()
        .enable_roots()
        .enable_sampling()
        .enable_elicitation()
        .build()
}

impl ClientHandler for Answers {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(relayed_capabilities(), Implementation::new("answers", "0"))
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let asked = serde_json::to_string(&params.messages).unwrap_or_default();
        let answer = SamplingMessage::assistant_text(format!("you asked {asked}"));
        Ok(CreateMessageResult::new(answer, "test-model".into()))
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let mut result = ElicitResult::new(ElicitationAction::Accept);
        result.content = Some(json!({"answer": "yes"}));
        Ok(result)
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        Ok(ListRootsResult::new(vec![Root::new("file:///work")]))
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.logs.lock().unwrap().push(params);
        self.seen.notify_waiters();
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.updates.lock().unwrap().push(params.uri);
        self.seen.notify_waiters();
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changes.lock().unwrap().push("prompts");
        self.seen.notify_waiters();
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changes.lock().unwrap().push("resources");
        self.seen.notify_waiters();
    }
}
