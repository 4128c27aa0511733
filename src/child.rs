//! The environment toolgate gives a child process: a small base set plus its own `env`, never the gateway's secrets.
//!
//! Without `env_clear()` every upstream and command hook would see every variable the
//! gateway was started with: other servers' secrets exported for their `${VAR}`, profile
//! tokens, every `TOOLGATE_*` override. Like the MCP SDKs, a child gets only the variables
//! a program needs to run ([`BASE_ENV`], from the gateway's environment when set) and what
//! its config entry lists in `env` or names in `env_passthrough` (resolved at load).

use std::collections::BTreeMap;

/// Inherited when set: what the MCP SDKs pass to stdio servers on Unix.
pub const BASE_ENV: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// Clears `command`'s inherited environment, then sets the base set and `env`.
pub fn set_env(command: &mut tokio::process::Command, env: &BTreeMap<String, String>) {
    command.env_clear();
    for name in BASE_ENV {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    command.envs(env);
}
