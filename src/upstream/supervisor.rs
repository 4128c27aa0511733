//! One task per server: start it, import what it offers, follow its changes and pings, and restart it with backoff when it dies or hangs.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use rmcp::model::{ClientRequest, PingRequest};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use super::{
    ServerState, Upstream, UpstreamEvent,
    client::{Changes, UpstreamClient},
    connect::{self, Connection},
    import_tools, passthrough,
};
use crate::config::{ServerConfig, SuperviseSettings};

/// What one server's supervisor needs; [`Supervisor::run`] owns it until the gateway stops.
pub(super) struct Supervisor {
    pub upstream: Arc<Upstream>,
    pub config: ServerConfig,
    pub settings: SuperviseSettings,
    pub events: mpsc::UnboundedSender<UpstreamEvent>,
    pub shutdown: CancellationToken,
    /// Fired when a reload retired this server: from then on it reports nothing.
    pub mute: CancellationToken,
}

/// Why a live connection ended.
enum Ended {
    /// The gateway is stopping.
    Shutdown,
    /// The server died or hung; the text says how.
    Down(String),
}

impl Supervisor {
    /// Starts the server and keeps it running: each death or hang withdraws its tools and,
    /// unless restarts are off, starts it again after a growing, jittered delay.
    #[tracing::instrument(level = "debug", skip_all, fields(server = %self.upstream.name))]
    pub async fn run(self) {
        let name = self.upstream.name.clone();
        let mut backoff = Backoff::new(&self.settings);
        let mut first = true;
        loop {
            let changes = Changes {
                tools: Arc::new(Notify::new()),
                offer: Arc::new(Notify::new()),
            };
            match self.start(&changes).await {
                Ok(connection) => {
                    self.first_start_done(&mut first);
                    let up_since = Instant::now();
                    match self.watch(connection, &changes).await {
                        Ended::Shutdown => return,
                        Ended::Down(reason) => {
                            tracing::error!(server = %name, "server went down: {reason}");
                            self.down(reason);
                        }
                    }
                    // A server that ran for a good while and then died starts over from the
                    // first delay; one that dies right after each start backs off further.
                    if up_since.elapsed() >= self.settings.reset_after {
                        backoff.reset();
                    }
                }
                Err(reason) => {
                    if self.shutdown.is_cancelled() {
                        return;
                    }
                    tracing::error!(server = %name, "server failed to start: {reason}");
                    self.down(reason);
                    self.first_start_done(&mut first);
                }
            }
            if !self.settings.restart {
                return;
            }
            let delay = backoff.next();
            tracing::warn!(
                server = %name,
                restart = self.upstream.restarts() + 1,
                "restarting in {} ms",
                delay.as_millis()
            );
            tokio::select! {
                // The delay is over: try again.
                () = tokio::time::sleep(delay) => {}
                // The gateway is stopping during the delay.
                () = self.shutdown.cancelled() => return,
            }
            self.upstream.count_restart();
            self.upstream.set_state(ServerState::Starting);
        }
    }

    /// Sends `event` to the registry's owner, unless a reload retired this server.
    fn report(&self, event: UpstreamEvent) {
        if !self.mute.is_cancelled() {
            let _ = self.events.send(event);
        }
    }

    /// Tells the gateway that this server's first attempt is over, once.
    fn first_start_done(&self, first: &mut bool) {
        if std::mem::take(first) {
            self.report(UpstreamEvent::Started {
                server: self.upstream.name.clone(),
            });
        }
    }

    /// Spawns or connects, completes the handshake and imports the tools and offer, within
    /// the start timeout.
    async fn start(&self, changes: &Changes) -> Result<Connection, String> {
        let upstream = &self.upstream;
        let handler = UpstreamClient::new(
            upstream.name.clone(),
            upstream.progress.clone(),
            upstream.logs.clone(),
            upstream.relay.clone(),
            changes.clone(),
        );
        let limit = self.settings.start_timeout;
        let starting = async {
            let mut connection = connect::connect(
                &self.config,
                handler,
                self.settings.max_message_bytes,
                &upstream.auth,
            )
            .await?;
            match import_tools(&upstream.name, connection.peer(), &connection.json_lists()).await {
                Ok(tools) => Ok((connection, tools)),
                // Refused for want of a (better) token: the server needs a login.
                Err(_) if upstream.auth.refused(&upstream.name).is_some() => {
                    let reason = upstream.needs_login().unwrap_or_default();
                    connection.stop().await;
                    Err(reason)
                }
                Err(reason) => {
                    let reason = connection
                        .describe_failure(&format!("tools/list failed: {reason}"))
                        .await;
                    connection.stop().await;
                    Err(reason)
                }
            }
        };
        let (connection, tools) = tokio::select! {
            // Started, or failed to.
            result = tokio::time::timeout(limit, starting) => match result {
                Ok(result) => result?,
                Err(_) => return Err(format!("did not finish starting within {} ms", limit.as_millis())),
            },
            // The gateway is stopping before this server came up.
            () = self.shutdown.cancelled() => return Err("gateway shutting down".to_owned()),
        };
        let name = &upstream.name;
        upstream.set_state(ServerState::Ready {
            tools: tools.items.len(),
        });
        upstream.set_link(Some(super::Link {
            peer: connection.peer().clone(),
            raw: connection.raw().cloned(),
            json: connection.json_lists(),
        }));
        tracing::info!(server = %name, tools = tools.items.len(), restarts = upstream.restarts(), "server ready");
        self.report(UpstreamEvent::Tools {
            server: name.clone(),
            tools: tools.items,
            extras: tools.extras,
        });
        let offer = self
            .import_offer(connection.peer(), &connection.json_lists())
            .await;
        self.report(UpstreamEvent::Offer {
            server: name.clone(),
            offer,
        });
        Ok(connection)
    }

    /// Follows one live connection until it ends, the server hangs, or the gateway stops;
    /// then closes it and kills the child's group.
    async fn watch(&self, mut connection: Connection, changes: &Changes) -> Ended {
        let name = &self.upstream.name;
        let peer = connection.peer().clone();
        let lists = connection.json_lists();
        let mut pings = Pings::new(&self.settings);
        let ended = loop {
            tokio::select! {
                // The gateway is stopping: close the client and kill the child's group.
                () = self.shutdown.cancelled() => break Ended::Shutdown,
                // The connection ended on its own: the child exited or the HTTP session broke.
                () = connection.closed() => {
                    break Ended::Down(connection.describe_failure("server exited").await);
                }
                // Time to check that the server still answers.
                () = pings.due() => {
                    if let Some(reason) = pings.ping(&peer).await {
                        break Ended::Down(reason);
                    }
                }
                // The server said its tools changed: import them again, whole.
                () = changes.tools.notified() => match self.bounded(import_tools(name, &peer, &lists)).await {
                    Some(Ok(tools)) => {
                        tracing::info!(server = %name, tools = tools.items.len(), "tool list changed");
                        self.upstream.set_state(ServerState::Ready { tools: tools.items.len() });
                        self.report(UpstreamEvent::Tools { server: name.clone(), tools: tools.items, extras: tools.extras });
                    }
                    Some(Err(error)) => tracing::warn!(server = %name, %error, "re-import after list_changed failed; keeping the previous list"),
                    None => tracing::warn!(server = %name, "re-import after list_changed timed out; keeping the previous list"),
                },
                // The server said its prompts or resources changed: import them again, whole.
                () = changes.offer.notified() => {
                    let offer = self.import_offer(&peer, &lists).await;
                    self.report(UpstreamEvent::Offer { server: name.clone(), offer });
                }
            }
        };
        connection.stop().await;
        ended
    }

    /// `work` (a list import) within the start timeout: a server that stops answering must
    /// not hold the supervisor, whose pings would then never run.
    async fn bounded<T>(&self, work: impl Future<Output = T>) -> Option<T> {
        tokio::time::timeout(self.settings.start_timeout, work)
            .await
            .ok()
    }

    /// Prompts, resources and templates, within the start timeout (empty past it).
    async fn import_offer(
        &self,
        peer: &rmcp::service::Peer<rmcp::RoleClient>,
        lists: &super::lists::JsonLists,
    ) -> crate::registry::passthrough::Offer {
        let name = &self.upstream.name;
        match self
            .bounded(passthrough::import_offer(name, peer, lists))
            .await
        {
            Some(offer) => offer,
            None => {
                tracing::warn!(server = %name, "listing prompts and resources timed out; none from this server");
                crate::registry::passthrough::Offer::default()
            }
        }
    }

    /// Records why the server is gone and withdraws what it offered.
    fn down(&self, reason: String) {
        let name = &self.upstream.name;
        self.upstream.set_link(None);
        self.upstream.set_last_error(reason.clone());
        self.upstream.set_state(ServerState::Failed(reason.clone()));
        self.report(UpstreamEvent::Down {
            server: name.clone(),
            reason,
        });
    }
}

/// Health pings of one live connection: a server that misses `failures` in a row is hung.
struct Pings {
    interval: Option<Duration>,
    timeout: Duration,
    failures: u32,
    missed: u32,
    next: tokio::time::Instant,
}

impl Pings {
    fn new(settings: &SuperviseSettings) -> Self {
        let interval = settings.ping_interval;
        Self {
            interval,
            timeout: settings.ping_timeout,
            failures: settings.ping_failures,
            missed: 0,
            next: tokio::time::Instant::now() + interval.unwrap_or_default(),
        }
    }

    /// Resolves when the next ping is due; never when pings are off.
    async fn due(&self) {
        match self.interval {
            Some(_) => tokio::time::sleep_until(self.next).await,
            None => std::future::pending().await,
        }
    }

    /// Sends one ping; `Some(reason)` once too many were missed in a row.
    async fn ping(&mut self, peer: &rmcp::service::Peer<rmcp::RoleClient>) -> Option<String> {
        let request = ClientRequest::PingRequest(PingRequest::default());
        let answered = tokio::time::timeout(self.timeout, peer.send_request(request)).await;
        // From now, not from when it was due: a slow ping must not make the next one instant.
        self.next = tokio::time::Instant::now() + self.interval.unwrap_or_default();
        let missed = match answered {
            Ok(Ok(_)) => None,
            Ok(Err(error)) => Some(format!("ping failed: {error}")),
            Err(_) => Some(format!(
                "no answer to a ping within {} ms",
                self.timeout.as_millis()
            )),
        };
        match missed {
            None => {
                self.missed = 0;
                None
            }
            Some(why) => {
                self.missed += 1;
                tracing::warn!(missed = self.missed, "{why}");
                (self.missed >= self.failures).then(|| {
                    format!(
                        "stopped answering: {} missed pings in a row (last: {why})",
                        self.missed
                    )
                })
            }
        }
    }
}

/// Exponential restart delays with jitter, capped.
struct Backoff {
    initial: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    fn new(settings: &SuperviseSettings) -> Self {
        Self {
            initial: settings.backoff_initial,
            max: settings.backoff_max,
            attempt: 0,
        }
    }

    fn reset(&mut self) {
        self.attempt = 0;
    }

    /// The next delay: `initial × 2^attempt`, capped, then scaled by a random factor in
    /// [0.5, 1.0] so that servers that died together do not restart in lockstep.
    fn next(&mut self) -> Duration {
        let doubled = self
            .initial
            .saturating_mul(1u32.checked_shl(self.attempt.min(31)).unwrap_or(u32::MAX));
        self.attempt = self.attempt.saturating_add(1);
        doubled.min(self.max).mul_f64(0.5 + fastrand::f64() / 2.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_with_jitter_and_resets() {
        let settings = SuperviseSettings {
            backoff_initial: Duration::from_millis(100),
            backoff_max: Duration::from_millis(1000),
            ..SuperviseSettings::default()
        };
        let mut backoff = Backoff::new(&settings);
        let delays: Vec<Duration> = (0..40).map(|_| backoff.next()).collect();
        let bounds = [100, 200, 400, 800, 1000, 1000];
        for (delay, full) in delays.iter().zip(bounds) {
            let full = Duration::from_millis(full);
            assert!(
                *delay >= full / 2 && *delay <= full,
                "{delay:?} not in [{:?}, {full:?}]",
                full / 2
            );
        }
        assert!(delays.iter().all(|d| *d <= Duration::from_millis(1000)));
        backoff.reset();
        assert!(backoff.next() <= Duration::from_millis(100));
    }
}
