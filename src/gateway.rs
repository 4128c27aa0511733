//! The running gateway: owns the registry, the upstreams and the pipeline, and publishes views.
//!
//! Upstream events flow into one owner task that applies them to the [`Registry`] and
//! publishes the new [`View`] on a `watch` channel. Readers (downstream sessions, the
//! pipeline) take the current `Arc<View>` without locking the registry; sessions watch the
//! channel to announce list changes.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    code_mode::CodeRunner,
    config::ProfileName,
    config::{Config, HookStage},
    drain::Drain,
    hooks::{ExternalGate, ExternalHook, ExternalPost},
    pipeline::Pipeline,
    pipeline::{
        Stages,
        audit::AuditLog,
        builtin::{Limits, RetryTransient, Timeout},
        validate,
    },
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
}

pub struct Gateway {
    pub config: Config,
    pub upstreams: Arc<Upstreams>,
    pub pipeline: Arc<Pipeline>,
    /// Where upstream log messages, resource updates and server requests find their sessions.
    pub relay: Arc<Relay>,
    /// Admits calls until the gateway stops; then lets those in flight finish or cancels them.
    pub drain: Arc<Drain>,
    /// The configured hooks, for their processes to be stopped with the gateway.
    hooks: Vec<Arc<ExternalHook>>,
    views: watch::Receiver<Arc<Views>>,
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
        let shutdown = CancellationToken::new();
        let (events_tx, mut events) = mpsc::unbounded_channel();
        let (views_tx, views) = watch::channel(Arc::new(Views::default()));
        let relay = Arc::new(Relay::new(views.clone()));
        let upstreams = Arc::new(
            Upstreams::start(
                &config.servers,
                events_tx,
                relay.clone(),
                shutdown.child_token(),
            )
            .await,
        );

        let limits = Limits::from_config(&config);
        let mut registry =
            Registry::new(config.prefix, &config.profiles).with_code(config.code.clone());
        while let Ok(event) = events.try_recv() {
            apply(&mut registry, &limits, event);
        }
        if let Err(error) = check_at_start(&registry, &config, &upstreams) {
            shutdown.cancel();
            upstreams.shutdown().await;
            return Err(error);
        }
        views_tx.send_replace(registry.views());
        let tasks = TaskTracker::new();
        tasks.spawn(own_registry(
            registry,
            limits,
            events,
            views_tx,
            shutdown.clone(),
        ));
        let (stages, hooks) = stages(&config, options.stages, audit);
        let drain = Arc::new(Drain::new(std::time::Duration::from_millis(
            config.drain_grace_ms,
        )));
        Ok(Arc::new(Self {
            pipeline: Pipeline::new(
                upstreams.clone(),
                stages,
                code_runner(&config, &shutdown),
                drain.clone(),
            ),
            config,
            upstreams,
            relay,
            drain,
            hooks,
            views,
            shutdown,
            tasks,
        }))
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
        let hooks = futures::future::join_all(self.hooks.iter().map(|hook| hook.shutdown()));
        tokio::join!(self.upstreams.shutdown(), hooks);
        self.tasks.close();
        self.tasks.wait().await;
        self.pipeline.flush_audit().await;
    }
}

/// The `run_code` runner with its warm worker pool, when some profile can run code.
fn code_runner(config: &Config, shutdown: &CancellationToken) -> Option<CodeRunner> {
    let wanted = config
        .profiles
        .iter()
        .any(|p| config.mode_of(&p.name).has_run_code());
    wanted.then(|| CodeRunner::start(&config.code, shutdown.child_token()))
}

/// The configured stages after the given ones: retry → timeout around dispatch; the
/// configured post hooks; the size cap. Also every configured hook, to stop them at the end.
fn stages(
    config: &Config,
    mut stages: Stages,
    audit: Option<AuditLog>,
) -> (Stages, Vec<Arc<ExternalHook>>) {
    let http = reqwest::Client::new();
    let mut hooks = Vec::with_capacity(config.hooks.len());
    for hook in &config.hooks {
        let hook = Arc::new(ExternalHook::new(hook.clone(), &http));
        hooks.push(hook.clone());
        match hook.stage() {
            HookStage::Pre => stages.gates.push(Arc::new(ExternalGate(hook))),
            HookStage::Post => stages.posts.push(Arc::new(ExternalPost(hook))),
        }
    }
    stages.wrappers.push(Arc::new(RetryTransient));
    stages.wrappers.push(Arc::new(Timeout));
    stages.max_result_bytes = Some(config.max_result_bytes);
    stages.audit = audit;
    (stages, hooks)
}

fn apply(registry: &mut Registry, limits: &Limits, event: UpstreamEvent) {
    match event {
        UpstreamEvent::Tools { server, tools } => {
            let (tools, warnings) = validate::import(&server, tools, limits);
            for warning in warnings {
                tracing::warn!("{warning}");
            }
            registry.replace(&server, tools)
        }
        UpstreamEvent::Offer { server, offer } => registry.replace_offer(&server, offer),
        // Its tools stay listed so that a call names the server that is down rather than
        // calling the tool unknown.
        UpstreamEvent::Down { .. } => {}
    }
}

/// The registry's single writer: applies upstream events and publishes each new view.
async fn own_registry(
    mut registry: Registry,
    limits: Limits,
    mut events: mpsc::UnboundedReceiver<UpstreamEvent>,
    views: watch::Sender<Arc<Views>>,
    shutdown: CancellationToken,
) {
    loop {
        let event = tokio::select! {
            // The gateway is stopping.
            () = shutdown.cancelled() => break,
            // Every upstream sender is gone: nothing more can change.
            event = events.recv() => match event {
                Some(event) => event,
                None => break,
            },
        };
        apply(&mut registry, &limits, event);
        for clash in registry.clashes() {
            tracing::error!("{clash}");
        }
        // Every session compares its own profile's fingerprint, so only those whose view
        // really changed announce it.
        views.send_replace(registry.views());
    }
}

/// Mistakes only visible once tools are imported: name clashes, and restriction entries
/// that match nothing (an error, unless the entry names a server that is down: a warning).
fn check_at_start(
    registry: &Registry,
    config: &Config,
    upstreams: &Upstreams,
) -> Result<(), StartError> {
    // A clash at start is a configuration mistake: refuse rather than serve half of it.
    if !registry.clashes().is_empty() {
        return Err(StartError::NameClash {
            file: config.source.clone(),
            clashes: registry.clashes().to_vec(),
        });
    }
    let down: Vec<&crate::config::ServerName> = upstreams
        .iter()
        .filter(|u| !matches!(u.state(), crate::upstream::ServerState::Ready { .. }))
        .map(|u| &u.name().name)
        .collect();
    let mut unmatched = registry.unmatched_entries();
    for hook in &config.hooks {
        unmatched.extend(registry.unmatched_globs(
            &format!("{}.tools", hook.key),
            &hook.tools,
            &hook.profiles,
        ));
    }
    let (warnings, errors): (Vec<_>, Vec<_>) = unmatched.into_iter().partition(|e| {
        down.iter()
            .any(|server| registry.could_name_server(&e.entry, server))
    });
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
