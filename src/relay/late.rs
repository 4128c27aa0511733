//! The sessions of 2026-07-28 HTTP requests, forgotten once nothing more can reach their client.
//!
//! Over HTTP each 2026-07-28 request has a handler, an rmcp peer and a session number of its
//! own. While its work runs, the session is one the relay routes to (log messages, the
//! upstream's requests). When the work ends, what the upstream sent just before its answer
//! (a log message) may still be on its way through the relay, and may still reach the
//! request's stream as long as rmcp's service for that request runs. That service ends once
//! the answer is out (or the client is gone), and its peer is then closed: nothing can reach
//! that client any more. So the session is forgotten when its peer is closed, and at the
//! latest [`LATE_MESSAGES`] after the work. Held longer, each one keeps its peer's channel
//! (about 10 KiB): held 2 s each, 14,000 calls/s kept about 300 MiB.

use std::{
    collections::VecDeque,
    time::{Duration, Instant},
};

use super::{Relay, SessionId};

/// How long a 2026-07-28 HTTP request's session stays known at most after its work.
const LATE_MESSAGES: Duration = Duration::from_secs(2);
/// How often the sweeper looks at the sessions left once requests stop ending.
pub const SWEEP_EVERY: Duration = Duration::from_millis(50);
/// Sessions one ending request forgets at most: the rest is the sweeper's, so that no
/// request's answer waits on many.
const FORGET_AT_ONCE: usize = 4;

/// The sessions waiting to be forgotten, in the order their work ended.
#[derive(Default)]
pub(super) struct Late {
    queue: VecDeque<(SessionId, Instant)>,
    /// A sweeper runs ([`Relay::sweep_late`] in a loop, until it returns `false`).
    sweeping: bool,
}

impl Relay {
    /// The work of the 2026-07-28 HTTP request whose session is `session` ended (module
    /// doc). `true`: the caller must start a sweeper, which calls [`Relay::sweep_late`]
    /// every [`SWEEP_EVERY`] until it returns `false`, and [`Relay::sweeper_gone`] if it
    /// ends otherwise.
    pub(crate) fn forget_later(&self, session: SessionId) -> bool {
        self.forget_later_at(session, Instant::now())
    }

    fn forget_later_at(&self, session: SessionId, now: Instant) -> bool {
        let (gone, start) = {
            let mut inner = self.lock();
            // The requests that ended before this one are mostly over by now: while requests
            // keep coming, they are forgotten here, in order.
            let mut gone = Vec::new();
            while let Some(&(front, deadline)) = inner.late.queue.front() {
                if gone.len() == FORGET_AT_ONCE || !(deadline <= now || inner.is_closed(front)) {
                    break;
                }
                inner.late.queue.pop_front();
                gone.push(front);
            }
            inner.late.queue.push_back((session, now + LATE_MESSAGES));
            let start = !std::mem::replace(&mut inner.late.sweeping, true);
            (gone, start)
        };
        for session in gone {
            self.unregister(session);
        }
        start
    }

    /// Forgets every waiting session whose request's service has ended or whose time is up.
    /// `false` when none is left: the sweeper ends (the next [`Relay::forget_later`] starts
    /// another). For the sweeper only.
    pub(crate) fn sweep_late(&self) -> bool {
        self.sweep_late_at(Instant::now())
    }

    fn sweep_late_at(&self, now: Instant) -> bool {
        let (gone, more) = {
            let mut inner = self.lock();
            let mut gone = Vec::new();
            let mut queue = std::mem::take(&mut inner.late.queue);
            queue.retain(|&(session, deadline)| {
                let over = deadline <= now || inner.is_closed(session);
                if over {
                    gone.push(session);
                }
                !over
            });
            inner.late.queue = queue;
            let more = !inner.late.queue.is_empty();
            inner.late.sweeping = more;
            (gone, more)
        };
        for session in gone {
            self.unregister(session);
        }
        more
    }

    /// The sweeper ended without [`Relay::sweep_late`] saying so (its task was dropped): the
    /// next [`Relay::forget_later`] starts another, so that no session waits for good.
    pub(crate) fn sweeper_gone(&self) {
        self.lock().late.sweeping = false;
    }

    /// The gateway stops: every waiting session is forgotten now. For the sweeper only.
    pub(crate) fn forget_late_now(&self) {
        let gone: Vec<SessionId> = {
            let mut inner = self.lock();
            inner.late.sweeping = false;
            inner
                .late
                .queue
                .drain(..)
                .map(|(session, _)| session)
                .collect()
        };
        for session in gone {
            self.unregister(session);
        }
    }
}

impl super::Inner {
    /// Whether `session`'s peer is closed (or the session is gone): nothing can reach its
    /// client any more.
    fn is_closed(&self, session: SessionId) -> bool {
        self.sessions
            .get(&session)
            .is_none_or(|s| s.reach.is_closed())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rmcp::{
        RoleServer, ServerHandler,
        model::ClientJsonRpcMessage,
        service::{RunningService, serve_directly},
        transport::{OneshotTransport, async_rw::AsyncRwTransport},
    };
    use tokio::io::DuplexStream;

    use super::*;
    use crate::{config::ProfileName, registry::Views};

    struct Quiet;
    impl ServerHandler for Quiet {}

    /// A live rmcp service (its peer open until it is cancelled), and the client's ends.
    type Served = (
        RunningService<RoleServer, Quiet>,
        DuplexStream,
        DuplexStream,
    );

    fn served() -> Served {
        let (client_out, server_in) = tokio::io::duplex(1024);
        let (server_out, client_in) = tokio::io::duplex(1024);
        let transport = AsyncRwTransport::new_server(server_in, server_out);
        (
            serve_directly(Quiet, transport, None),
            client_out,
            client_in,
        )
    }

    fn relay() -> Relay {
        let (_views_tx, views) = tokio::sync::watch::channel(Arc::new(Views::default()));
        Relay::new(views)
    }

    fn known(relay: &Relay, session: SessionId) -> bool {
        relay.lock().sessions.contains_key(&session)
    }

    fn waiting(relay: &Relay) -> usize {
        relay.lock().late.queue.len()
    }

    #[tokio::test]
    async fn a_session_stays_until_its_service_ends_then_goes() {
        let relay = relay();
        let profile = ProfileName::default_profile();
        let (one, two) = (served(), served());
        relay.register(1, &profile, one.0.peer());
        relay.register(2, &profile, two.0.peer());

        assert!(relay.forget_later(1), "the first one starts a sweeper");
        assert!(!relay.forget_later(2), "one sweeper at a time");
        assert!(
            relay.sweep_late(),
            "both services still run: the sweeper goes on"
        );
        assert!(known(&relay, 1) && known(&relay, 2));

        one.0.cancel().await.unwrap();
        assert!(relay.sweep_late(), "session 2 is still waiting");
        assert!(!known(&relay, 1), "its service ended: forgotten");
        assert!(known(&relay, 2));

        two.0.cancel().await.unwrap();
        assert!(!relay.sweep_late(), "none left: the sweeper ends");
        assert!(!known(&relay, 2));
        assert_eq!(waiting(&relay), 0);
    }

    #[tokio::test]
    async fn sessions_whose_service_ended_are_forgotten_as_the_next_work_ends() {
        let relay = relay();
        let profile = ProfileName::default_profile();
        let (one, two, three) = (served(), served(), served());
        for (session, served) in [(1, &one), (2, &two), (3, &three)] {
            relay.register(session, &profile, served.0.peer());
        }
        relay.forget_later(1);
        relay.forget_later(2);
        one.0.cancel().await.unwrap();
        relay.forget_later(3);
        assert!(
            !known(&relay, 1),
            "ended before the next work ended: forgotten then"
        );
        assert!(known(&relay, 2) && known(&relay, 3), "still answering");
        assert_eq!(waiting(&relay), 2);

        relay.forget_late_now();
        assert!(
            !known(&relay, 2) && !known(&relay, 3),
            "the gateway stops: all go"
        );
        assert_eq!(waiting(&relay), 0);
        assert!(relay.forget_later(4), "a sweeper starts again after a stop");
        drop((two, three));
    }

    #[tokio::test]
    async fn a_session_goes_once_its_time_is_up_though_its_service_still_runs() {
        let relay = relay();
        let one = served();
        relay.register(1, &ProfileName::default_profile(), one.0.peer());
        let now = Instant::now();
        relay.forget_later_at(1, now);
        assert!(relay.sweep_late_at(now + LATE_MESSAGES / 2));
        assert!(known(&relay, 1), "its service runs and its time is not up");
        assert!(!relay.sweep_late_at(now + LATE_MESSAGES));
        assert!(!known(&relay, 1), "its time is up");
    }

    #[tokio::test]
    async fn an_ending_request_forgets_a_few_and_leaves_the_rest_to_the_sweeper() {
        let relay = relay();
        let one = served();
        let now = Instant::now();
        for session in 1..=10 {
            relay.register(session, &ProfileName::default_profile(), one.0.peer());
            relay.forget_later_at(session, now);
        }
        assert_eq!(waiting(&relay), 10, "all still answering");
        one.0.cancel().await.unwrap();
        relay.forget_later_at(11, now);
        assert_eq!(waiting(&relay), 11 - FORGET_AT_ONCE);
        assert!(!relay.sweep_late_at(now), "the sweeper takes the rest");
        assert_eq!(waiting(&relay), 0);
    }

    /// What this module stands on: rmcp's service for a stateless HTTP request (a
    /// `OneshotTransport`, as rmcp serves every 2026-07-28 request) ends once it has sent its
    /// answer, and its peer is then closed. Were it kept open, every session would wait its
    /// full `LATE_MESSAGES` again.
    #[tokio::test]
    async fn rmcp_closes_a_oneshot_requests_peer_once_the_answer_is_out() {
        let ping: ClientJsonRpcMessage = serde_json::from_value(
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
        )
        .unwrap();
        let (transport, mut answers) = OneshotTransport::<RoleServer>::new(ping);
        let running = serve_directly(Quiet, transport, None);
        let peer = running.peer().clone();
        let answer = answers.recv().await.expect("an answer");
        assert!(
            serde_json::to_value(&answer)
                .unwrap()
                .get("result")
                .is_some(),
            "{answer:?}"
        );
        let closed = async {
            while !peer.is_transport_closed() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), closed)
            .await
            .expect("the peer is closed once the answer is out");
        drop(running);
    }
}
