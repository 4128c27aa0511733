//! How a call's client is reached: its rmcp peer, or the call's own response stream (HTTP's fast paths). Progress and the relay's log messages both go through it.

use std::sync::Arc;

use rmcp::{
    RoleServer,
    model::{
        LoggingMessageNotification, LoggingMessageNotificationParam, ProgressNotification,
        ProgressNotificationParam, ServerNotification,
    },
    service::Peer,
};

/// A call's own response stream (HTTP's fast paths): the notifications sent to the client
/// during the call (progress; a 2026-07-28 call's log messages too), in the order they were
/// sent. Bounded: a notification that finds it full is dropped, as
/// [`crate::downstream::guard`] drops them for a client that does not read. Boxed: tokio
/// allocates a channel's first 32 slots at once, and rmcp's clients ask every call for
/// progress.
pub type NoticeStream = tokio::sync::mpsc::Sender<Box<ServerNotification>>;

/// How a client is reached. Cloned for every call (its progress and its approval both
/// hold one): a peer is shared, not cloned, since a `Peer` clone is a dozen reference counts.
#[derive(Clone)]
pub enum Reach {
    /// Through its rmcp peer (stdio, and HTTP's typed path).
    Peer(Arc<Peer<RoleServer>>),
    /// Onto the response stream of its call (HTTP's fast paths, `downstream::http::fast` and
    /// `downstream::http::modern`), which may have no rmcp peer. Such a client is sent
    /// notifications only, and only while its call's response is open.
    Stream(NoticeStream),
}

impl Reach {
    /// Through `peer`.
    pub fn of(peer: &Peer<RoleServer>) -> Self {
        Reach::Peer(Arc::new(peer.clone()))
    }

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

    /// Sends one progress notification (its token already the client's).
    pub async fn progress(&self, params: ProgressNotificationParam) -> Result<(), String> {
        self.notify(ServerNotification::ProgressNotification(
            ProgressNotification::new(params),
        ))
        .await
    }

    /// Sends one log message.
    pub(super) async fn log(&self, params: LoggingMessageNotificationParam) -> Result<(), String> {
        self.notify(ServerNotification::LoggingMessageNotification(
            LoggingMessageNotification::new(params),
        ))
        .await
    }

    async fn notify(&self, notice: ServerNotification) -> Result<(), String> {
        match self {
            Reach::Peer(peer) => peer
                .send_notification(notice)
                .await
                .map_err(|e| e.to_string()),
            Reach::Stream(stream) => stream.try_send(Box::new(notice)).map_err(|e| match e {
                tokio::sync::mpsc::error::TrySendError::Full(_) => {
                    "the response stream is full: notification dropped".to_owned()
                }
                tokio::sync::mpsc::error::TrySendError::Closed(_) => {
                    "the response stream is gone".to_owned()
                }
            }),
        }
    }
}
