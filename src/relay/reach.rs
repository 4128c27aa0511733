//! How the relay reaches a session's client: its rmcp peer, or the response stream of a 2026-07-28 call taken by HTTP's modern fast path.

use rmcp::{
    RoleServer,
    model::{LoggingMessageNotification, LoggingMessageNotificationParam, ServerNotification},
    service::Peer,
};

use crate::upstream::{NoticeStream, send_notice};

/// How a session's client is reached.
#[derive(Clone)]
pub enum Reach {
    /// Through its rmcp peer.
    Peer(Peer<RoleServer>),
    /// Through the response stream of its one call: a 2026-07-28 request taken by HTTP's
    /// modern fast path (`downstream::http::modern`), which has no rmcp peer. Such a client
    /// is sent notifications only, and only while its call's response is open.
    Stream(NoticeStream),
}

impl Reach {
    /// The rmcp peer, when the client is reached through one.
    pub fn peer(&self) -> Option<&Peer<RoleServer>> {
        match self {
            Reach::Peer(peer) => Some(peer),
            Reach::Stream(_) => None,
        }
    }

    /// Nothing can reach the client any more.
    pub(super) fn is_closed(&self) -> bool {
        match self {
            Reach::Peer(peer) => peer.is_transport_closed(),
            Reach::Stream(stream) => stream.is_closed(),
        }
    }

    pub(super) async fn log(&self, params: LoggingMessageNotificationParam) -> Result<(), String> {
        match self {
            Reach::Peer(peer) => peer
                .notify_logging_message(params)
                .await
                .map_err(|e| e.to_string()),
            Reach::Stream(stream) => send_notice(
                stream,
                ServerNotification::LoggingMessageNotification(LoggingMessageNotification::new(
                    params,
                )),
            ),
        }
    }
}
