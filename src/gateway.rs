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
    config::{Config, PrefixPolicy},
    pipeline::Pipeline,
    registry::{NameClash, Registry, View},
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
}

fn describe(clashes: &[NameClash]) -> String {
    clashes
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

pub struct Gateway {
    pub config: Config,
    pub upstreams: Arc<Upstreams>,
    pub pipeline: Pipeline,
    views: watch::Receiver<Arc<View>>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

impl Gateway {
    /// Starts every upstream, builds the first view, and starts following changes.
    pub async fn start(config: Config) -> Result<Arc<Self>, StartError> {
        let shutdown = CancellationToken::new();
        let (events_tx, mut events) = mpsc::unbounded_channel();
        let upstreams =
            Arc::new(Upstreams::start(&config.servers, events_tx, shutdown.child_token()).await);

        let mut registry = Registry::new(config.prefix);
        while let Ok(event) = events.try_recv() {
            apply(&mut registry, event);
        }
        // A clash at start is a configuration mistake: refuse rather than serve half of it.
        if !registry.clashes().is_empty() {
            let clashes = registry.clashes().to_vec();
            shutdown.cancel();
            upstreams.shutdown().await;
            return Err(StartError::NameClash {
                file: config.source.clone(),
                clashes,
            });
        }
        let (views_tx, views) = watch::channel(registry.view());
        let tasks = TaskTracker::new();
        tasks.spawn(own_registry(registry, events, views_tx, shutdown.clone()));
        Ok(Arc::new(Self {
            pipeline: Pipeline::new(upstreams.clone()),
            config,
            upstreams,
            views,
            shutdown,
            tasks,
        }))
    }

    /// The current view: what `tools/list` shows and what `tools/call` dispatches to.
    pub fn view(&self) -> Arc<View> {
        self.views.borrow().clone()
    }

    /// A receiver that wakes on every new view.
    pub fn watch_views(&self) -> watch::Receiver<Arc<View>> {
        self.views.clone()
    }

    /// Fired when the gateway stops; sessions' tasks hang off it.
    pub fn shutdown_token(&self) -> &CancellationToken {
        &self.shutdown
    }

    pub fn tasks(&self) -> &TaskTracker {
        &self.tasks
    }

    /// Stops following changes, closes every upstream and kills their process groups.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        self.upstreams.shutdown().await;
        self.tasks.close();
        self.tasks.wait().await;
    }
}

fn apply(registry: &mut Registry, event: UpstreamEvent) {
    match event {
        UpstreamEvent::Tools { server, tools } => registry.replace(&server, tools),
        // Its tools stay listed so that a call names the server that is down rather than
        // calling the tool unknown.
        UpstreamEvent::Down { .. } => {}
    }
}

/// The registry's single writer: applies upstream events and publishes each new view.
async fn own_registry(
    mut registry: Registry,
    mut events: mpsc::UnboundedReceiver<UpstreamEvent>,
    views: watch::Sender<Arc<View>>,
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
        apply(&mut registry, event);
        for clash in registry.clashes() {
            tracing::error!("{clash}");
        }
        let view = registry.view();
        views.send_if_modified(|current| {
            let changed = current.fingerprint() != view.fingerprint();
            *current = view;
            changed
        });
    }
}

/// Names the policy, for messages.
pub fn policy_name(policy: PrefixPolicy) -> &'static str {
    match policy {
        PrefixPolicy::Always => "always",
        PrefixPolicy::OnConflict => "on-conflict",
        PrefixPolicy::Never => "never",
    }
}
