//! The running gateway: owns the registry, the upstreams and the pipeline, and publishes views.
//!
//! Upstream events flow into one owner task that applies them to the [`Registry`] and
//! publishes the new [`View`] on a `watch` channel. Readers (downstream sessions, the
//! pipeline) take the current `Arc<View>` without locking the registry; sessions watch the
//! channel to announce list changes.
//!
//! Upstreams start in the background. Once every server's first start is over, or the start
//! grace has passed, the owner checks the configuration against the imported names and
//! publishes the [`Readiness`]; requests that need the tools wait for it (at most the grace),
//! so a slow server delays no `initialize` and a typo'd policy never serves a call.
//!
//! A reload ([`reload`]) swaps the configuration, the pipeline's rules and the views
//! together, and starts, restarts or retires only the servers whose config changed.

mod reload;
mod rules;

use reload::Reconfigure;
pub use reload::{ReloadError, Reloaded, triggers};
use rules::{Base, code_runner, rules, stages};

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use tokio::sync::{mpsc, watch};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    clean,
    config::Config,
    config::ProfileName,
    drain::Drain,
    hooks::ExternalHook,
    pinning::{LockError, Pins},
    pipeline::Pipeline,
    pipeline::{Stages, audit::AuditLog, builtin::Limits, validate},
    registry::{NameClash, Registry, UnmatchedEntry, View, Views},
    relay::Relay,
    upstream::{UpstreamEvent, Upstreams},
};

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Names that cannot be exposed as configured (shared under `prefix = "never"`, reserved).
    #[error("{file}: key `gateway.prefix`: {}", describe(.clashes))]
    NameClash {
        file: String,
        clashes: Vec<NameClash>,
    },
    #[error("cannot open the audit log {path}: {error}")]
    AuditLog { path: String, error: std::io::Error },
    /// An allow/deny or hook `tools` entry that matches no tool of any configured server: a
    /// typo that would silently switch a policy off, so it stops the start.
    #[error("{file}: {}", describe_unmatched(.entries))]
    UnmatchedRestriction {
        file: String,
        entries: Vec<UnmatchedEntry>,
    },
    /// One of the above, as told to every request that waited for the start.
    #[error("{0}")]
    Shared(String),
    /// The lock of pinned tools is configured but missing, unreadable or not valid.
    #[error(transparent)]
    Pinning(#[from] LockError),
}

fn describe_unmatched(entries: &[UnmatchedEntry]) -> String {
    let each: Vec<String> = entries
        .iter()
        .map(|e| format!("key `{}`: entry {:?} matches no tool", e.key, e.entry))
        .collect();
    // The first entry's known names: the list a typo is most likely to be fixed from.
    let known = entries
        .first()
        .map(|e| e.known.join(", "))
        .unwrap_or_default();
    format!("{}; known tools: {known}", each.join("; "))
}

fn describe(clashes: &[NameClash]) -> String {
    clashes
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// How to start a gateway, beyond its configuration.
#[derive(Default)]
pub struct StartOptions {
    /// `--audit-log FILE`: one JSON line per call.
    pub audit_log: Option<std::path::PathBuf>,
    /// Gates, wrappers and post hooks written in Rust; they run before the configured ones.
    pub stages: Stages,
    /// `true` (serving): return at once and let requests wait for [`Gateway::ready`] at most
    /// the configured start grace. `false` (one-shot commands): wait for every server's first
    /// start and return the start check's error, if any.
    pub in_background: bool,
}

/// Where the gateway is in its start.
#[derive(Debug, Clone)]
pub enum Readiness {
    /// Servers are still on their first start, within the grace.
    Starting,
    /// The start check passed; servers still starting will be announced when they arrive.
    Ready,
    /// The start check failed: the configuration cannot be served.
    Failed(Arc<StartError>),
}

pub struct Gateway {
    /// The configuration in effect: replaced whole by a reload ([`Gateway::config`]).
    config: watch::Sender<Arc<Config>>,
    pub upstreams: Arc<Upstreams>,
    pub pipeline: Arc<Pipeline>,
    /// Where upstream log messages, resource updates and server requests find their sessions.
    pub relay: Arc<Relay>,
    /// 2026-07-28 requests waiting for their client's input ([`crate::rounds`]).
    pub rounds: Arc<crate::rounds::Rounds>,
    /// Admits calls until the gateway stops; then lets those in flight finish or cancels them.
    pub drain: Arc<Drain>,
    /// The configured hooks, for their processes to be stopped with the gateway (or when a
    /// reload drops them).
    hooks: std::sync::Mutex<Vec<Arc<ExternalHook>>>,
    /// The stages given in Rust at start: a reload rebuilds the rules on top of them.
    base: Base,
    /// To the registry's owner: a reload's new profiles, naming and limits.
    reconfigure: mpsc::UnboundedSender<Reconfigure>,
    /// One reload at a time.
    reloading: tokio::sync::Mutex<()>,
    /// Why the last reload was refused; cleared by the next one that succeeds.
    last_reload_error: watch::Sender<Option<String>>,
    views: watch::Receiver<Arc<Views>>,
    readiness: watch::Receiver<Readiness>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

impl Gateway {
    /// Starts every upstream, builds the first view, and starts following changes.
    pub async fn start(config: Config) -> Result<Arc<Self>, StartError> {
        Self::start_with(config, StartOptions::default()).await
    }

    pub async fn start_with(
        config: Config,
        options: StartOptions,
    ) -> Result<Arc<Self>, StartError> {
        let audit =
            match &options.audit_log {
                Some(path) => Some(AuditLog::open(path, config.audit_arguments).map_err(
                    |error| StartError::AuditLog {
                        path: path.display().to_string(),
                        error,
                    },
                )?),
                None => None,
            };
        // Before any server starts: a lock that is wrong stops the start at once.
        let pins = Pins::load(&config.pinning, &config.source)?;
        if let Some(pins) = &pins {
            tracing::info!("serving tools as pinned in {}", pins.path());
        }
        let shutdown = CancellationToken::new();
        let (events_tx, events) = mpsc::unbounded_channel();
        let (reconfigure, reconfigures) = mpsc::unbounded_channel();
        let (views_tx, views) = watch::channel(Arc::new(Views::default()));
        let relay = Arc::new(Relay::new(views.clone()));
        let upstreams = Arc::new(Upstreams::start(
            &config.servers,
            &config.supervise,
            events_tx,
            relay.clone(),
            shutdown.child_token(),
        ));

        let registry =
            Registry::new(config.prefix, &config.profiles).with_code(config.code.clone());
        views_tx.send_replace(registry.views());
        let (readiness_tx, readiness) = watch::channel(Readiness::Starting);
        // One-shot commands wait for every first start, which the start timeout bounds.
        let grace = if options.in_background {
            config.supervise.start_grace
        } else {
            Duration::MAX
        };
        let tasks = TaskTracker::new();
        tasks.spawn(
            Owner {
                registry,
                limits: Limits::from_config(&config),
                pins,
                withheld: BTreeSet::new(),
                config: config.clone(),
                upstreams: upstreams.clone(),
                views: views_tx,
                readiness: readiness_tx,
                pending: config.servers.len(),
                checked: false,
            }
            .run(events, reconfigures, grace, shutdown.clone()),
        );
        let rounds = Arc::new(crate::rounds::Rounds::default());
        tasks.spawn(rounds.clone().expire_until(shutdown.clone()));
        let base = Base {
            gates: options.stages.gates.clone(),
            wrappers: options.stages.wrappers.clone(),
            posts: options.stages.posts.clone(),
        };
        let (stages, hooks) = stages(&config, options.stages, audit);
        let drain = Arc::new(Drain::new(std::time::Duration::from_millis(
            config.drain_grace_ms,
        )));
        let gateway = Arc::new(Self {
            pipeline: Pipeline::new(
                upstreams.clone(),
                stages,
                code_runner(&config, &shutdown),
                drain.clone(),
            ),
            config: watch::Sender::new(Arc::new(config)),
            upstreams,
            relay,
            rounds,
            drain,
            hooks: std::sync::Mutex::new(hooks),
            base,
            reconfigure,
            reloading: tokio::sync::Mutex::new(()),
            last_reload_error: watch::Sender::new(None),
            views,
            readiness,
            shutdown,
            tasks,
        });
        if !options.in_background
            && let Err(error) = gateway.ready().await
        {
            gateway.shutdown().await;
            return Err(Arc::try_unwrap(error)
                .unwrap_or_else(|shared| StartError::Shared(shared.to_string())));
        }
        Ok(gateway)
    }

    /// Waits until the start check is done (at most the start grace while serving): `Err`
    /// if the configuration cannot be served.
    pub async fn ready(&self) -> Result<(), Arc<StartError>> {
        if self.is_ready() {
            return Ok(());
        }
        let mut readiness = self.readiness.clone();
        let settled = readiness
            .wait_for(|r| !matches!(r, Readiness::Starting))
            .await
            .map(|r| r.clone());
        match settled {
            Ok(Readiness::Failed(error)) => Err(error),
            // Ready, or the owner is gone because the gateway is stopping.
            _ => Ok(()),
        }
    }

    /// Whether the start check is done and passed (what `/readyz` reports).
    pub fn is_ready(&self) -> bool {
        matches!(*self.readiness.borrow(), Readiness::Ready)
    }

    /// Whether some server has not finished its first start: what it offers is unknown yet.
    pub fn first_starts_pending(&self) -> bool {
        self.upstreams.all().iter().any(|u| {
            u.restarts() == 0 && matches!(u.state(), crate::upstream::ServerState::Starting)
        })
    }

    /// The configuration in effect now (a reload replaces it whole).
    pub fn config(&self) -> Arc<Config> {
        self.config.borrow().clone()
    }

    /// `profile`'s current view: what `tools/list` shows and what `tools/call` dispatches
    /// to. `None` for a profile that is not configured.
    pub fn view(&self, profile: &ProfileName) -> Option<Arc<View>> {
        self.views.borrow().get(profile).cloned()
    }

    /// A receiver that wakes on every change of any profile's view.
    pub fn watch_views(&self) -> watch::Receiver<Arc<Views>> {
        self.views.clone()
    }

    /// Fired when the gateway stops; sessions' tasks hang off it.
    pub fn shutdown_token(&self) -> &CancellationToken {
        &self.shutdown
    }

    pub fn tasks(&self) -> &TaskTracker {
        &self.tasks
    }

    /// Drains the calls in flight (if nobody has yet), stops following changes, stops every
    /// upstream and command hook with its whole process group, and writes the audit log out.
    pub async fn shutdown(&self) {
        // Calls first: each ends (answered or cancelled upstream) before its upstream goes.
        let drained = self.drain.run().await;
        if drained.in_flight > 0 {
            tracing::info!(
                in_flight = drained.in_flight,
                cancelled = drained.cancelled,
                "calls drained"
            );
        }
        self.shutdown.cancel();
        let hooks = self
            .hooks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        let hooks = futures::future::join_all(hooks.iter().map(|hook| hook.shutdown()));
        tokio::join!(self.upstreams.shutdown(), hooks);
        self.tasks.close();
        self.tasks.wait().await;
        self.pipeline.flush_audit().await;
    }
}

/// Applies one upstream event; returns the server when pinning withheld some of its tools.
///
/// Imported tools go through pinning first, on the definitions exactly as the upstream sent
/// them, then through cleaning, then get their call policy.
fn apply(
    registry: &mut Registry,
    limits: &Limits,
    pins: Option<&Pins>,
    event: UpstreamEvent,
) -> Option<crate::config::ServerId> {
    match event {
        UpstreamEvent::Tools {
            server,
            tools,
            mut extras,
        } => {
            let (mut tools, withheld) = match pins {
                Some(pins) => {
                    let applied = pins.apply(&server, tools);
                    (applied.tools, !applied.withheld.is_empty())
                }
                None => (tools, false),
            };
            clean::tools(&server, &mut tools);
            let (mut tools, warnings) = validate::import(&server, tools, limits);
            for warning in warnings {
                tracing::warn!("{warning}");
            }
            // Pinning and cleaning keep each tool's upstream name: its extra joins it here.
            for imported in &mut tools {
                imported.extra = extras.remove(imported.tool.name.as_ref());
            }
            registry.replace(&server, tools);
            withheld.then_some(server)
        }
        UpstreamEvent::Offer { server, mut offer } => {
            clean::offer(&server, &mut offer);
            registry.replace_offer(&server, offer);
            None
        }
        // Withdrawn until it is back; a call to one of its tools still names it.
        UpstreamEvent::Down { server, .. } => {
            registry.mark_down(&server);
            None
        }
        UpstreamEvent::Started { .. } => None,
    }
}

/// The registry's single writer: applies upstream events, publishes each new view, and
/// decides when the gateway is ready.
struct Owner {
    registry: Registry,
    limits: Limits,
    pins: Option<Pins>,
    /// Servers some of whose tools pinning withheld: entries naming them only warn.
    withheld: BTreeSet<crate::config::ServerName>,
    config: Config,
    upstreams: Arc<Upstreams>,
    views: watch::Sender<Arc<Views>>,
    readiness: watch::Sender<Readiness>,
    /// Servers whose first start is not over yet.
    pending: usize,
    /// Whether the start check has run.
    checked: bool,
}

impl Owner {
    async fn run(
        mut self,
        mut events: mpsc::UnboundedReceiver<UpstreamEvent>,
        mut reconfigures: mpsc::UnboundedReceiver<Reconfigure>,
        grace: Duration,
        shutdown: CancellationToken,
    ) {
        let deadline = tokio::time::Instant::now().checked_add(grace);
        if self.pending == 0 {
            self.check();
        }
        loop {
            let grace_over = async {
                match deadline {
                    Some(deadline) if !self.checked => tokio::time::sleep_until(deadline).await,
                    _ => std::future::pending().await,
                }
            };
            let event = tokio::select! {
                // The gateway is stopping.
                () = shutdown.cancelled() => break,
                // Servers are still starting, but the grace is over: serve what is there.
                () = grace_over => {
                    self.check();
                    continue;
                }
                // A reload: new profiles, naming and limits over what is imported.
                Some(reconfigure) = reconfigures.recv() => {
                    self.reconfigure(reconfigure);
                    continue;
                }
                // Every upstream sender is gone: nothing more can change.
                event = events.recv() => match event {
                    Some(event) => event,
                    None => break,
                },
            };
            let started = matches!(event, UpstreamEvent::Started { .. });
            // A rug pull (a changed definition announced by `list_changed`) is caught here.
            if let Some(server) = apply(&mut self.registry, &self.limits, self.pins.as_ref(), event)
            {
                self.withheld.insert(server.name);
            }
            for clash in self.registry.clashes() {
                tracing::error!("{clash}");
            }
            // Every session compares its own profile's fingerprint, so only those whose view
            // really changed announce it.
            self.views.send_replace(self.registry.views());
            if started {
                self.pending = self.pending.saturating_sub(1);
                if !self.checked && self.pending == 0 {
                    self.check();
                } else if self.checked {
                    // A server that came after the grace: its names could only be checked now.
                    if let Err(error) = check_at_start(
                        &self.registry,
                        &self.config,
                        &self.upstreams,
                        &self.withheld,
                    ) {
                        tracing::error!(
                            "a server that started late shows a configuration mistake: {error}"
                        );
                    }
                }
            }
        }
    }

    /// The start check, once: its outcome is the gateway's readiness.
    fn check(&mut self) {
        self.checked = true;
        let readiness = match check_at_start(
            &self.registry,
            &self.config,
            &self.upstreams,
            &self.withheld,
        ) {
            Ok(()) => Readiness::Ready,
            Err(error) => Readiness::Failed(Arc::new(error)),
        };
        self.readiness.send_replace(readiness);
    }
}

/// Mistakes only visible once tools are imported: name clashes, and restriction entries
/// that match nothing (an error, unless the entry names a server that is down, or one
/// whose tools pinning withheld: a warning).
fn check_at_start(
    registry: &Registry,
    config: &Config,
    upstreams: &Upstreams,
    withheld: &BTreeSet<crate::config::ServerName>,
) -> Result<(), StartError> {
    // A clash at start is a configuration mistake: refuse rather than serve half of it.
    if !registry.clashes().is_empty() {
        return Err(StartError::NameClash {
            file: config.source.clone(),
            clashes: registry.clashes().to_vec(),
        });
    }
    let down: Vec<crate::config::ServerName> = upstreams
        .all()
        .iter()
        .filter(|u| !matches!(u.state(), crate::upstream::ServerState::Ready { .. }))
        .map(|u| u.name().name.clone())
        .collect();
    let mut unmatched = registry.unmatched_entries();
    for hook in &config.hooks {
        unmatched.extend(registry.unmatched_globs(
            &format!("{}.tools", hook.key),
            &hook.tools,
            &hook.profiles,
        ));
    }
    let (warnings, unmatched): (Vec<_>, Vec<_>) = unmatched.into_iter().partition(|e| {
        down.iter()
            .any(|server| registry.could_name_server(&e.entry, server))
    });
    // A drifted tool must not stop the gateway because a profile names it: it is withheld,
    // which is what pinning is for, and the error naming it is already in the log.
    let (withheld_entries, errors): (Vec<_>, Vec<_>) = unmatched.into_iter().partition(|e| {
        withheld
            .iter()
            .any(|server| registry.could_name_server(&e.entry, server))
    });
    for entry in withheld_entries {
        tracing::warn!(
            "entry {:?} in `{}` matches no tool; it may name a tool withheld by pinning ({}), so it is a warning",
            entry.entry,
            entry.key,
            withheld
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    for entry in warnings {
        tracing::warn!(
            "entry {:?} in `{}` matches no tool; it may name a server that is down ({}), so it is a warning for now",
            entry.entry,
            entry.key,
            down.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(StartError::UnmatchedRestriction {
            file: config.source.clone(),
            entries: errors,
        })
    }
}
