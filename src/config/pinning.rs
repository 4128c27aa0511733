//! `[gateway.pinning]`: where the lock of pinned tool definitions is, and what a changed or new tool gets.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::ConfigError;

/// The lock's file name, next to the config file, when `lock` is not given.
pub const DEFAULT_LOCK: &str = "toolgate.lock";

/// What happens to a tool whose definition no longer matches its pin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnChange {
    /// Withheld: not listed, calls are unknown tool. A rug pull must not reach a model.
    #[default]
    Block,
    /// Served as the upstream now defines it, with a warning and the diff in the log.
    Warn,
}

/// What happens to a tool the lock does not know (new on a pinned server, or a server that
/// was never pinned).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnNew {
    /// Served, logged at debug level only.
    Allow,
    /// Served, with a warning.
    Warn,
    /// Withheld until `toolgate pin` records it. The default: a lock means "only what was
    /// reviewed", and a new tool's description reaches the model as surely as a changed one.
    #[default]
    Block,
}

impl OnNew {
    pub fn as_str(self) -> &'static str {
        match self {
            OnNew::Allow => "allow",
            OnNew::Warn => "warn",
            OnNew::Block => "block",
        }
    }
}

/// `[gateway.pinning]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPinning {
    /// The lock file; relative to the config file's directory. `${VAR}`s are expanded.
    pub lock: Option<String>,
    pub on_change: Option<OnChange>,
    pub on_new: Option<OnNew>,
}

/// Validated pinning settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinningSettings {
    /// Relative paths are relative to the config file's directory once [`super::load`] has
    /// resolved them (relative to the working directory for a config parsed from text).
    pub lock: PathBuf,
    /// `[gateway.pinning]` was written: the lock must exist to serve. Without the section,
    /// pinning is on exactly when the default lock file exists.
    pub required: bool,
    pub on_change: OnChange,
    pub on_new: OnNew,
}

impl Default for PinningSettings {
    fn default() -> Self {
        Self {
            lock: PathBuf::from(DEFAULT_LOCK),
            required: false,
            on_change: OnChange::default(),
            on_new: OnNew::default(),
        }
    }
}

impl PinningSettings {
    pub fn from_raw(
        raw: Option<RawPinning>,
        invalid: &dyn Fn(String, String) -> ConfigError,
        expand: &dyn Fn(&str) -> Result<String, String>,
    ) -> Result<Self, ConfigError> {
        let Some(raw) = raw else {
            return Ok(Self::default());
        };
        let lock = match &raw.lock {
            Some(lock) => {
                let key = "gateway.pinning.lock".to_owned();
                let lock = expand(lock).map_err(|m| invalid(key.clone(), m))?;
                if lock.trim().is_empty() {
                    return Err(invalid(
                        key,
                        "expected the path of the lock file, found an empty string".into(),
                    ));
                }
                PathBuf::from(lock)
            }
            None => PathBuf::from(DEFAULT_LOCK),
        };
        Ok(Self {
            lock,
            required: true,
            on_change: raw.on_change.unwrap_or_default(),
            on_new: raw.on_new.unwrap_or_default(),
        })
    }

    /// Makes a relative `lock` relative to `dir`, the config file's directory.
    pub fn resolve_in(&mut self, dir: &Path) {
        if self.lock.is_relative() {
            self.lock = dir.join(&self.lock);
        }
    }
}
