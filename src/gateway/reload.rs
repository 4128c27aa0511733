//! Reloading the configuration while serving: validate it like `check`, then swap it in whole and touch only the servers that changed.
//!
//! A call takes the rules and its view when it starts and keeps them to its end. The steps:
//! 1. the new file is loaded and validated by [`config::load`], the code path every command
//!    uses; an error leaves everything as it was and is kept for `/readyz`;
//! 2. the pipeline's rules (hooks, size cap, `run_code`) and the configuration are replaced;
//! 3. the registry's owner rebuilds every view (new profiles, modes, naming, limits; removed
//!    servers gone, changed ones withdrawn until they are back) and publishes it: sessions
//!    whose view changed announce `list_changed`;
//! 4. removed and changed servers leave [`Upstreams`](crate::upstream::Upstreams) (new calls
//!    no longer reach them), added and changed ones start under new supervisors, and each
//!    retired one is stopped once its calls in flight are over.
//!
//! Between 2 and 3 (no await but the owner's answer) a call may meet the new rules with the
//! old views; every session that hears `list_changed` meets both new.

pub mod triggers;

use std::{collections::BTreeSet, path::Path, sync::Arc, time::Duration};

use tokio::sync::oneshot;

use super::{Gateway, Owner, check_at_start, rules};
use crate::{
    code_mode::CodeRunner,
    config::{self, Config, ConfigError, ServerConfig, ServerId},
    hooks::ExternalHook,
    pipeline::builtin::Limits,
};

/// Why a reload was refused; the running configuration keeps serving.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The file does not load or validate: the same error `toolgate check` prints.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The gateway is stopping.
    #[error("the gateway is stopping")]
    Stopping,
}

impl ReloadError {
    /// Stable machine code, for logs and scripts.
    pub fn code(&self) -> &'static str {
        match self {
            ReloadError::Config(error) => error.code(),
            ReloadError::Stopping => crate::error::SHUTTING_DOWN,
        }
    }
}

/// What a reload did, by server.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reloaded {
    pub added: Vec<ServerId>,
    pub removed: Vec<ServerId>,
    /// Restarted: how they are started or reached changed.
    pub restarted: Vec<ServerId>,
    /// Keys that differ in the file but only take effect on a restart of the gateway.
    pub needs_restart: Vec<&'static str>,
}

/// A reload's news for the registry's owner; `done` fires once the new views are published.
pub(super) struct Reconfigure {
    config: Config,
    removed: Vec<ServerId>,
    restarted: Vec<ServerId>,
    done: oneshot::Sender<()>,
}

impl Gateway {
    /// Re-reads `path` (and the `TOOLGATE_*` environment) and applies it, or refuses it and
    /// keeps serving the running configuration; either way the outcome is logged and a
    /// refusal is kept for `/readyz` until a reload succeeds.
    pub async fn reload(&self, path: &Path) -> Result<Reloaded, ReloadError> {
        let _one_at_a_time = self.reloading.lock().await;
        let outcome = match config::load(path) {
            Ok(config) => self.apply_reload(config).await,
            Err(error) => Err(ReloadError::Config(error)),
        };
        match &outcome {
            Ok(reloaded) => {
                self.last_reload_error.send_replace(None);
                tracing::info!(
                    added = %names(&reloaded.added),
                    removed = %names(&reloaded.removed),
                    restarted = %names(&reloaded.restarted),
                    "configuration reloaded from {}",
                    path.display()
                );
                if !reloaded.needs_restart.is_empty() {
                    tracing::warn!(
                        "reload: {} changed but take effect only when the gateway restarts; the running values are kept",
                        reloaded.needs_restart.join(", ")
                    );
                }
            }
            Err(error) => {
                tracing::error!(
                    code = error.code(),
                    "reload refused, the running configuration keeps serving: {error}"
                );
                self.last_reload_error.send_replace(Some(error.to_string()));
            }
        }
        outcome
    }

    /// Why the last reload was refused, until one succeeds (what `/readyz` shows).
    pub fn last_reload_error(&self) -> Option<String> {
        self.last_reload_error.borrow().clone()
    }

    async fn apply_reload(&self, mut new: Config) -> Result<Reloaded, ReloadError> {
        let old = self.config();
        let mut reloaded = Reloaded {
            needs_restart: keep_fixed(&old, &mut new),
            ..Reloaded::default()
        };
        let mut starting: Vec<ServerConfig> = Vec::new();
        for server in &new.servers {
            match self.upstreams.config_of(&server.id) {
                None => {
                    reloaded.added.push(server.id.clone());
                    starting.push(server.clone());
                }
                // Limits (timeouts, retries) apply to the next call without a restart.
                Some(running) if running.transport != server.transport => {
                    reloaded.restarted.push(server.id.clone());
                    starting.push(server.clone());
                }
                Some(_) => {}
            }
        }
        let wanted: BTreeSet<&ServerId> = new.servers.iter().map(|s| &s.id).collect();
        reloaded.removed = self
            .upstreams
            .all()
            .iter()
            .map(|u| u.name().clone())
            .filter(|id| !wanted.contains(id))
            .collect();

        // Rules and configuration first, views after: a session that hears `list_changed`
        // finds the new hooks and limits in place for its next call.
        let hooks = self.swap_hooks(&new, &old);
        let code = self.code_runner_for(&new);
        self.pipeline
            .set_rules(rules(&new, &self.base, &hooks, code));
        self.config.send_replace(Arc::new(new.clone()));

        // From here on no new call resolves to a removed server.
        let (done, published) = oneshot::channel();
        let news = Reconfigure {
            config: new.clone(),
            removed: reloaded.removed.clone(),
            restarted: reloaded.restarted.clone(),
            done,
        };
        if self.reconfigure.send(news).is_err() || published.await.is_err() {
            return Err(ReloadError::Stopping);
        }

        for id in reloaded.removed.iter().chain(&reloaded.restarted) {
            let grace = call_bound(&old, id);
            if let Some(retiring) = self.upstreams.take(id) {
                self.upstreams.retire(retiring, grace);
            }
        }
        for server in starting {
            self.upstreams.add(server);
        }
        self.upstreams
            .reorder(new.servers.iter().map(|s| s.id.clone()).collect());
        Ok(reloaded)
    }

    /// The hooks of `new`: the running process or client of each hook whose config is
    /// unchanged, new ones for the rest. Dropped hooks stop once no call holds them.
    fn swap_hooks(&self, new: &Config, old: &Config) -> Vec<Arc<ExternalHook>> {
        let mut running = std::mem::take(
            &mut *self
                .hooks
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        let http = std::cell::OnceCell::new();
        let hooks: Vec<Arc<ExternalHook>> = new
            .hooks
            .iter()
            .map(
                |config| match running.iter().position(|hook| hook.config() == config) {
                    Some(at) => running.swap_remove(at),
                    None => Arc::new(ExternalHook::new(config.clone(), &http)),
                },
            )
            .collect();
        *self
            .hooks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = hooks.clone();
        // A call in flight holds the old rules, and with them the hook, to its end.
        let grace = longest_call(old);
        for hook in running {
            let shutdown = self.shutdown.clone();
            self.tasks.spawn(async move {
                let unused = async {
                    while Arc::strong_count(&hook) > 1 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                };
                tokio::select! {
                    // No call holds it any more, or the longest call is over anyway.
                    _ = tokio::time::timeout(grace, unused) => {}
                    // The gateway is stopping: it stops every hook it still knows, and this one.
                    () = shutdown.cancelled() => {}
                }
                hook.shutdown().await;
            });
        }
        hooks
    }

    /// The `run_code` runner for `new`: the running pool (with `new`'s run limits) when there
    /// is one, a new one when `new` is the first to put a profile in code mode.
    fn code_runner_for(&self, new: &Config) -> Option<Arc<CodeRunner>> {
        let running = self.pipeline.rules().code.clone();
        let wanted = new
            .profiles
            .iter()
            .any(|p| new.mode_of(&p.name).has_run_code());
        match running {
            Some(runner) => Some(Arc::new(runner.with_limits(&new.code))),
            None if wanted => Some(Arc::new(CodeRunner::start(
                &new.code,
                self.shutdown.child_token(),
            ))),
            None => None,
        }
    }
}

impl Owner {
    /// A reload's new views: profiles, naming and code settings over what is imported,
    /// without the removed servers, with the restarted ones withdrawn until they are back,
    /// and every tool's limits resolved again.
    pub(super) fn reconfigure(&mut self, news: Reconfigure) {
        let Reconfigure {
            config,
            removed,
            restarted,
            done,
        } = news;
        for server in &removed {
            self.registry.remove(server);
        }
        for server in &restarted {
            self.registry.mark_down(server);
        }
        self.registry
            .reconfigure(config.prefix, &config.profiles, config.code.clone());
        self.limits = Limits::from_config(&config);
        let limits = &self.limits;
        self.registry
            .retime(|server, tool| limits.for_tool(server, tool));
        self.config = config;
        for clash in self.registry.clashes() {
            tracing::error!("{clash}");
        }
        self.views.send_replace(self.registry.views());
        // Names are only known for servers that are up; added ones are checked when they
        // start, like servers that start late.
        if self.checked
            && let Err(error) = check_at_start(
                &self.registry,
                &self.config,
                &self.upstreams,
                &self.withheld,
            )
        {
            tracing::error!("the reloaded configuration shows a mistake: {error}");
        }
        let _ = done.send(());
    }
}

/// Keeps `old`'s values of what only a restart can change (listeners, supervision,
/// telemetry, pinning, the audit log's contents, the stdio path, the drain, the pool size,
/// the identity provider),
/// and names those that `new` changed.
fn keep_fixed(old: &Config, new: &mut Config) -> Vec<&'static str> {
    let mut differ = Vec::new();
    macro_rules! keep {
        ($($field:ident).+, $key:literal) => {
            if old.$($field).+ != new.$($field).+ {
                differ.push($key);
                new.$($field).+ = old.$($field).+.clone();
            }
        };
    }
    keep!(http, "gateway.http");
    keep!(
        supervise,
        "gateway.supervise (and gateway.max_message_bytes)"
    );
    keep!(tracing, "gateway.tracing");
    keep!(pinning, "gateway.pinning");
    keep!(audit_arguments, "gateway.audit_arguments");
    keep!(fast_path, "gateway.fast_path");
    keep!(drain_grace_ms, "gateway.drain_grace_ms");
    keep!(require_profile, "gateway.require_profile");
    keep!(code.workers, "gateway.code.workers");
    // The IdP's keys are fetched and cached by the HTTP front built at start.
    keep!(auth, "gateway.auth");
    differ
}

/// How long a call to `server` may take under `config`: its longest timeout, times its
/// attempts. A retired server waits at most this for its calls in flight.
fn call_bound(config: &Config, server: &ServerId) -> Duration {
    let Some(server) = config.servers.iter().find(|s| &s.id == server) else {
        return Duration::from_millis(config.call_timeout_ms);
    };
    let timeout = server
        .tools
        .values()
        .filter_map(|t| t.timeout_ms)
        .chain(server.timeout_ms)
        .chain([config.call_timeout_ms])
        .max()
        .unwrap_or(config.call_timeout_ms);
    let attempts = server
        .tools
        .values()
        .filter_map(|t| t.retry)
        .chain(server.retry)
        .map(|r| u64::from(r.attempts.max(1)) * (1 + r.backoff_ms / timeout.max(1)))
        .max()
        .unwrap_or(1);
    Duration::from_millis(timeout.saturating_mul(attempts))
}

/// The longest [`call_bound`] of any server in `config`.
fn longest_call(config: &Config) -> Duration {
    config
        .servers
        .iter()
        .map(|s| call_bound(config, &s.id))
        .max()
        .unwrap_or(Duration::from_millis(config.call_timeout_ms))
}

fn names(servers: &[ServerId]) -> String {
    servers
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}
