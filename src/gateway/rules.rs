//! The pipeline's rules as a configuration makes them: the stages given in Rust, the hooks, retry and timeout, the size cap, the `run_code` runner.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::{
    code_mode::CodeRunner,
    config::{Config, HookStage},
    hooks::{ExternalGate, ExternalHook, ExternalPost},
    pipeline::{
        Around, PostHook, PreGate, Rules, Stages,
        audit::AuditLog,
        builtin::{RetryTransient, Timeout},
    },
};

/// The `run_code` runner with its warm worker pool, when some profile can run code.
pub(super) fn code_runner(config: &Config, shutdown: &CancellationToken) -> Option<CodeRunner> {
    let wanted = config
        .profiles
        .iter()
        .any(|p| config.mode_of(&p.name).has_run_code());
    wanted.then(|| CodeRunner::start(&config.code, shutdown.child_token()))
}

/// The stages given in Rust ([`crate::gateway::StartOptions::stages`]), kept for a reload's new rules.
#[derive(Clone, Default)]
pub(super) struct Base {
    pub(super) gates: Vec<Arc<dyn PreGate>>,
    pub(super) wrappers: Vec<Arc<dyn Around>>,
    pub(super) posts: Vec<Arc<dyn PostHook>>,
}

/// The configured stages after the given ones: retry → timeout around dispatch; the
/// configured post hooks; the size cap. Also every configured hook, to stop them at the end.
pub(super) fn stages(
    config: &Config,
    mut stages: Stages,
    audit: Option<AuditLog>,
) -> (Stages, Vec<Arc<ExternalHook>>) {
    let http = std::cell::OnceCell::new();
    let hooks: Vec<Arc<ExternalHook>> = config
        .hooks
        .iter()
        .map(|hook| Arc::new(ExternalHook::new(hook.clone(), &http)))
        .collect();
    let base = Base {
        gates: std::mem::take(&mut stages.gates),
        wrappers: std::mem::take(&mut stages.wrappers),
        posts: std::mem::take(&mut stages.posts),
    };
    let rules = rules(config, &base, &hooks, None);
    stages.gates = rules.gates;
    stages.wrappers = rules.wrappers;
    stages.posts = rules.posts;
    stages.max_result_bytes = rules.max_result_bytes;
    stages.raw_upstream = config.fast_path;
    stages.audit = audit;
    (stages, hooks)
}

/// The rules of `config`: the given stages, then the hooks (pre as gates, post as post
/// hooks, in config order), retry → timeout around dispatch, the size cap.
pub(super) fn rules(
    config: &Config,
    base: &Base,
    hooks: &[Arc<ExternalHook>],
    code: Option<Arc<CodeRunner>>,
) -> Rules {
    let mut rules = Rules {
        gates: base.gates.clone(),
        wrappers: base.wrappers.clone(),
        posts: base.posts.clone(),
        max_result_bytes: Some(config.max_result_bytes),
        code,
    };
    for hook in hooks {
        match hook.stage() {
            HookStage::Pre => rules.gates.push(Arc::new(ExternalGate(hook.clone()))),
            HookStage::Post => rules.posts.push(Arc::new(ExternalPost(hook.clone()))),
        }
    }
    rules.wrappers.push(Arc::new(RetryTransient));
    rules.wrappers.push(Arc::new(Timeout));
    rules
}
