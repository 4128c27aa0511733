//! Code-mode settings: `mode` per gateway and profile, the SDK form, and `[gateway.code]` limits.

use serde::Deserialize;

use super::ConfigError;
pub use crate::code_mode::sdk::{SdkDocs, SdkForm};

/// What a profile's `tools/list` offers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Every visible tool; no `run_code`.
    #[default]
    Native,
    /// Only `run_code`: the model calls the tools from a program.
    Code,
    /// Every visible tool plus `run_code`.
    Both,
}

impl Mode {
    pub fn has_run_code(self) -> bool {
        matches!(self, Mode::Code | Mode::Both)
    }
}

/// `[gateway.code]` as written: limits of one `run_code` run and the worker pool.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCode {
    pub timeout_ms: Option<u64>,
    pub max_tool_calls: Option<u32>,
    pub max_output_bytes: Option<usize>,
    pub memory_mb: Option<u64>,
    pub loop_iterations: Option<u64>,
    pub recursion_depth: Option<usize>,
    pub max_parallel: Option<usize>,
    /// Warm worker processes.
    pub workers: Option<usize>,
}

/// Validated code-mode settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeSettings {
    pub mode: Mode,
    pub sdk: SdkForm,
    pub sdk_docs: SdkDocs,
    pub sdk_inline_max_tokens: usize,
    pub timeout_ms: u64,
    pub max_tool_calls: u32,
    pub max_output_bytes: usize,
    pub memory_mb: u64,
    pub loop_iterations: u64,
    pub recursion_depth: usize,
    pub max_parallel: usize,
    pub workers: usize,
}

impl Default for CodeSettings {
    fn default() -> Self {
        Self {
            mode: Mode::Native,
            sdk: SdkForm::Auto,
            sdk_docs: SdkDocs::Brief,
            sdk_inline_max_tokens: 4_000,
            timeout_ms: 30_000,
            max_tool_calls: 100,
            max_output_bytes: 1024 * 1024,
            memory_mb: 256,
            loop_iterations: 10_000_000,
            recursion_depth: 512,
            max_parallel: 10,
            workers: 2,
        }
    }
}

impl CodeSettings {
    /// Defaults overridden by what was written; every number must be positive.
    pub fn from_raw(
        mode: Option<Mode>,
        sdk: Option<SdkForm>,
        sdk_docs: Option<SdkDocs>,
        sdk_inline_max_tokens: Option<usize>,
        raw: &RawCode,
        invalid: &dyn Fn(String, String) -> ConfigError,
    ) -> Result<Self, ConfigError> {
        let d = Self::default();
        fn positive<T: Copy + Default + PartialEq>(
            value: Option<T>,
            default: T,
            key: &str,
            invalid: &dyn Fn(String, String) -> ConfigError,
        ) -> Result<T, ConfigError> {
            match value {
                Some(v) if v == T::default() => {
                    Err(invalid(key.to_owned(), "expected a positive number".into()))
                }
                Some(v) => Ok(v),
                None => Ok(default),
            }
        }
        let settings = Self {
            mode: mode.unwrap_or(d.mode),
            sdk: sdk.unwrap_or(d.sdk),
            sdk_docs: sdk_docs.unwrap_or(d.sdk_docs),
            sdk_inline_max_tokens: positive(
                sdk_inline_max_tokens,
                d.sdk_inline_max_tokens,
                "gateway.sdk_inline_max_tokens",
                invalid,
            )?,
            timeout_ms: positive(
                raw.timeout_ms,
                d.timeout_ms,
                "gateway.code.timeout_ms",
                invalid,
            )?,
            max_tool_calls: positive(
                raw.max_tool_calls,
                d.max_tool_calls,
                "gateway.code.max_tool_calls",
                invalid,
            )?,
            max_output_bytes: positive(
                raw.max_output_bytes,
                d.max_output_bytes,
                "gateway.code.max_output_bytes",
                invalid,
            )?,
            memory_mb: positive(
                raw.memory_mb,
                d.memory_mb,
                "gateway.code.memory_mb",
                invalid,
            )?,
            loop_iterations: positive(
                raw.loop_iterations,
                d.loop_iterations,
                "gateway.code.loop_iterations",
                invalid,
            )?,
            recursion_depth: positive(
                raw.recursion_depth,
                d.recursion_depth,
                "gateway.code.recursion_depth",
                invalid,
            )?,
            max_parallel: positive(
                raw.max_parallel,
                d.max_parallel,
                "gateway.code.max_parallel",
                invalid,
            )?,
            workers: positive(raw.workers, d.workers, "gateway.code.workers", invalid)?,
        };
        if settings.memory_mb < 32 {
            return Err(invalid(
                "gateway.code.memory_mb".into(),
                format!(
                    "expected at least 32 (MiB): a worker cannot start below that, found {}",
                    settings.memory_mb
                ),
            ));
        }
        Ok(settings)
    }
}
