//! The 2025-11-25 `tasks` capability in the answer to `initialize`, which rmcp's types cannot hold.

use serde_json::Value;

use super::{super::GatewayService, offers_tasks};

/// The `tasks` capability (2025-11-25) toolgate declares when [`offers_tasks`].
pub fn capability() -> Value {
    serde_json::json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// Adds `capabilities.tasks` to the answer to `initialize` (a whole JSON-RPC response) when
/// the session's profile offers tasks, or while what the servers offer is unknown yet, and
/// takes out the 2026-07-28 Tasks extension, which a 2025-era session cannot use
/// ([`crate::downstream::GatewayService`]'s `get_info` declares it for `server/discover`).
pub fn handshake_patch(service: &GatewayService) -> super::super::lines::HandshakePatch {
    handshake_patch_for(service.gateway.clone(), service.profile.clone())
}

/// [`handshake_patch`] for a session of `profile`.
pub fn handshake_patch_for(
    gateway: std::sync::Arc<crate::gateway::Gateway>,
    profile: crate::config::ProfileName,
) -> super::super::lines::HandshakePatch {
    std::sync::Arc::new(move |message: &mut Value| {
        let offered = gateway.first_starts_pending()
            || gateway
                .view(&profile)
                .is_some_and(|view| offers_tasks(&view));
        let Some(Value::Object(capabilities)) = message
            .get_mut("result")
            .and_then(|r| r.get_mut("capabilities"))
        else {
            return;
        };
        if let Some(Value::Object(extensions)) = capabilities.get_mut("extensions") {
            extensions.remove(rmcp::model::TASKS_EXTENSION_ID);
            if extensions.is_empty() {
                capabilities.remove("extensions");
            }
        }
        if offered {
            capabilities.insert("tasks".into(), capability());
        }
    })
}
