//! What a child process inherits from the gateway: a small base environment plus its own
//! `env` (never the gateway's secrets), and the open-file limit the gateway was started with.
//!
//! Without `env_clear()` every upstream and command hook would see every variable the
//! gateway was started with: other servers' secrets exported for their `${VAR}`, profile
//! tokens, every `TOOLGATE_*` override. Like the MCP SDKs, a child gets only the variables
//! a program needs to run ([`BASE_ENV`], from the gateway's environment when set) and what
//! its config entry lists in `env` or names in `env_passthrough` (resolved at load).
//!
//! `toolgate serve` raises its own soft open-file limit to the hard one
//! ([`raise_open_file_limit`]): each client connection, upstream pipe and hook holds
//! descriptors. Its children get the soft limit back that the gateway was started with, as
//! systemd recommends: some programs size tables by the soft limit or close every possible
//! descriptor before `exec`, and use `select()`, which breaks above 1024.

use std::{collections::BTreeMap, sync::OnceLock};

use rlimit::Resource;

/// Inherited when set: what the MCP SDKs pass to stdio servers on Unix.
pub const BASE_ENV: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// The open-file limit (soft, hard) before [`raise_open_file_limit`] first changed it.
static STARTING_NOFILE: OnceLock<(u64, u64)> = OnceLock::new();

/// Prepares `command` to run as a child of the gateway: clears its inherited environment,
/// sets the base set and `env`, and gives it back the starting open-file limit.
pub fn prepare(command: &mut tokio::process::Command, env: &BTreeMap<String, String>) {
    command.env_clear();
    for name in BASE_ENV {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    command.envs(env);
    #[cfg(unix)]
    if let Some(&(soft, hard)) = STARTING_NOFILE.get() {
        // SAFETY: the closure runs in the forked child before `exec`, where only
        // async-signal-safe calls are allowed: `setrlimit` is one, and nothing here
        // allocates or takes a lock. Lowering a soft limit cannot fail in practice; if it
        // did, the child would merely keep the raised one, so the error is ignored.
        unsafe {
            command.pre_exec(move || {
                let _ = rlimit::setrlimit(Resource::NOFILE, soft, hard);
                Ok(())
            });
        }
    }
}

/// Raises the soft open-file limit to the hard one where allowed, remembering the starting
/// limit for children; the resulting soft limit. Idempotent.
pub fn raise_open_file_limit() -> Option<u64> {
    match rlimit::getrlimit(Resource::NOFILE) {
        Ok(limits) => {
            STARTING_NOFILE.get_or_init(|| limits);
        }
        Err(error) => {
            tracing::warn!(%error, "could not read the open-file limit");
            return None;
        }
    }
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(soft) => Some(soft),
        Err(error) => {
            tracing::warn!(%error, "could not raise the open-file limit");
            None
        }
    }
}
