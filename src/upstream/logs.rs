//! An upstream's log messages between their reader and their relay, so that a call's answer does not overtake them.
//!
//! A server writes `notifications/message` and then the answer of the call it logged for.
//! The answer reaches the waiting call at once, but the log goes through rmcp, which runs
//! each notification handler as a task of its own; the call could write its answer (and, for
//! a 2026-07-28 client over HTTP, end the only stream the log could reach) before the relay
//! ran. So every log line is counted where it is read, before rmcp sees it (a stdio server's
//! stdout in `size_guard`, an HTTP server's event streams in `bounded_http`), the handler
//! counts it off once relayed, and a finished call waits for the count to reach zero,
//! boundedly. Counting at the reader makes this exact, not a guess about task scheduling
//! (across an HTTP server's two streams nothing is ordered: a log it sends on its GET stream
//! after the answer cannot be waited for).

use std::{
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use tokio::sync::Notify;

/// How long a finished call waits, at most, for log relays still running: a stuck client,
/// or a log line rmcp could not decode (never counted off), costs this once.
const SETTLE_LIMIT: Duration = Duration::from_millis(200);

/// The method a log line has, as it is written in JSON.
const LOG_METHOD: &[u8] = br#""notifications/message""#;

#[derive(Default)]
pub struct LogRelays {
    /// Log lines read and not yet relayed.
    pending: AtomicUsize,
    relayed: Notify,
}

impl LogRelays {
    /// The reader passes `line` on to rmcp: counts it if it is a log message.
    pub fn read(&self, line: &[u8]) {
        if is_log(line) {
            self.pending.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A log message was relayed (to whoever should get it, possibly nobody).
    pub fn relayed(&self) {
        let previous = self
            .pending
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if previous == Ok(1) {
            self.relayed.notify_waiters();
        }
    }

    /// Waits until every log message read so far is relayed, for at most [`SETTLE_LIMIT`];
    /// past it the count is taken as lost (a line rmcp never handed to the handler).
    pub async fn settle(&self) {
        if self.pending.load(Ordering::SeqCst) == 0 {
            return;
        }
        let all_relayed = async {
            loop {
                let relayed = self.relayed.notified();
                tokio::pin!(relayed);
                // Registered before the check, so a relay finishing in between still wakes us.
                relayed.as_mut().enable();
                if self.pending.load(Ordering::SeqCst) == 0 {
                    return;
                }
                relayed.await;
            }
        };
        if tokio::time::timeout(SETTLE_LIMIT, all_relayed)
            .await
            .is_err()
        {
            tracing::debug!(
                "log relays did not finish before the call's answer; not waiting for them again"
            );
            self.pending.store(0, Ordering::SeqCst);
        }
    }
}

/// Whether `line` is a `notifications/message`. The method's bytes are looked for first
/// (inside a JSON string they would be escaped, so plain text cannot match), and only a line
/// that has them is parsed, for its envelope alone.
fn is_log(line: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        #[serde(borrow)]
        id: Option<&'a serde_json::value::RawValue>,
        #[serde(borrow)]
        method: Option<&'a serde_json::value::RawValue>,
    }
    if memchr::memmem::find(line, LOG_METHOD).is_none() {
        return false;
    }
    match serde_json::from_slice::<Head<'_>>(line) {
        Ok(head) => {
            head.id.is_none()
                && head
                    .method
                    .is_some_and(|m| m.get().as_bytes() == LOG_METHOD)
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_log_notifications_are_counted() {
        let logs = LogRelays::default();
        logs.read(br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#);
        logs.read(br#"{"method":"notifications/message","jsonrpc":"2.0","params":{}}"#);
        // Not logs: a request of that name, another method, the name inside a value.
        logs.read(br#"{"jsonrpc":"2.0","id":1,"method":"notifications/message"}"#);
        logs.read(br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#);
        logs.read(br#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"\"notifications/message\""}]}}"#);
        logs.read(br#"{"jsonrpc":"2.0","id":3,"result":{"notifications/message":1}}"#);
        logs.read(b"not json \"notifications/message\"");
        assert_eq!(logs.pending.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn settle_waits_for_the_relays_read_before_it() {
        let logs = std::sync::Arc::new(LogRelays::default());
        logs.read(br#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#);
        let relaying = logs.clone();
        let relay = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            relaying.relayed();
        });
        let started = tokio::time::Instant::now();
        logs.settle().await;
        let waited = started.elapsed();
        assert_eq!(logs.pending.load(Ordering::SeqCst), 0);
        relay.await.expect("the relay task");
        assert!(
            waited >= Duration::from_millis(25),
            "settled after {waited:?}"
        );
        assert!(
            waited < SETTLE_LIMIT,
            "settled only at the limit: {waited:?}"
        );
    }

    #[tokio::test]
    async fn a_log_never_relayed_costs_one_bounded_wait() {
        let logs = LogRelays::default();
        logs.read(br#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#);
        logs.settle().await;
        assert_eq!(logs.pending.load(Ordering::SeqCst), 0);
        // Counted off later anyway: the count does not wrap.
        logs.relayed();
        assert_eq!(logs.pending.load(Ordering::SeqCst), 0);
    }
}
