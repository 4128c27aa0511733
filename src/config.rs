//! Configuration: `servers.toml` (figment) overridden by `TOOLGATE_*` variables, parsed then validated.
//!
//! Loading happens in two steps so that every error can name the file and the key:
//! [`load`] merges the file and the environment into a [`RawConfig`] (serde, unknown keys
//! rejected), then [`validate`](validate::validate) turns it into a typed [`Config`]
//! (`${VAR}` expanded, names checked, transport chosen).

mod auth;
mod code;
mod http;
mod names;
mod pinning;
mod supervise;
mod telemetry;
mod upstream_auth;
mod validate;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use figment::{
    Figment,
    providers::{Env, Format, Toml},
};
use serde::Deserialize;

pub use auth::{ASYMMETRIC, AuthSettings, ClaimProfile, RawAuth, RawClaimProfile, check_auth_url};
pub use code::{CodeSettings, Mode, RawCode, SdkDocs, SdkForm};
pub use http::{AllowedHost, AllowedOrigin, HttpSettings, RawHttp, split_host_port};
pub use names::{ProfileName, Secret, ServerId, ServerName};
pub use pinning::{DEFAULT_LOCK, OnChange, OnNew, PinningSettings, RawPinning};
pub use supervise::{RawSupervise, SuperviseSettings};
pub use telemetry::{OtlpProtocol, RawTracing, TracingSettings};
pub use upstream_auth::{
    ClientCredential, ClientCredentialsSettings, OAuthSettings, RawUpstreamAuth, UpstreamAuth,
};
pub use validate::validate;

/// Prefix of the environment variables that override the file (`TOOLGATE_GATEWAY__PREFIX=never`).
pub const ENV_PREFIX: &str = "TOOLGATE_";

/// Everything that can be wrong with a configuration; each variant names where.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {} not found", .0.display())]
    MissingFile(PathBuf),
    #[error("{file}: {message}")]
    Parse { file: String, message: String },
    #[error("{file}: key `{key}`: {message}")]
    Invalid {
        file: String,
        key: String,
        message: String,
    },
}

impl ConfigError {
    /// Stable machine code, for logs and scripts.
    pub fn code(&self) -> &'static str {
        "CONFIG_INVALID"
    }
}

/// How upstream tool names become exposed names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PrefixPolicy {
    /// `{server}__{tool}` for every tool: names never depend on which other servers exist.
    #[default]
    Always,
    /// The bare tool name unless two servers share it; then both get the prefix.
    OnConflict,
    /// The bare tool name; two servers sharing one is an error.
    Never,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    #[serde(default)]
    pub gateway: RawGateway,
    #[serde(default)]
    pub servers: BTreeMap<String, RawServer>,
    #[serde(default)]
    pub profiles: BTreeMap<String, RawProfile>,
    #[serde(default)]
    pub hooks: Vec<RawHook>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGateway {
    #[serde(default)]
    pub prefix: PrefixPolicy,
    /// Refuse callers that select no profile, instead of giving them `default`.
    #[serde(default)]
    pub require_profile: bool,
    /// Default time limit of one call, in milliseconds.
    pub call_timeout_ms: Option<u64>,
    /// Largest result (serialized JSON) passed back to a client, in bytes.
    pub max_result_bytes: Option<usize>,
    /// Largest message (one line) read from a stdio upstream, in bytes.
    pub max_message_bytes: Option<usize>,
    /// Write call arguments into the audit log (they may hold secrets, so off by default).
    #[serde(default)]
    pub audit_arguments: bool,
    /// On SIGTERM, SIGINT or stdin EOF: how long calls in flight may take before they are
    /// cancelled, in milliseconds.
    pub drain_grace_ms: Option<u64>,
    /// Answer `tools/call` over stdio from the raw JSON lines (default `true`); `false`
    /// sends every message through rmcp's typed path, as an escape hatch.
    pub fast_path: Option<bool>,
    /// `native` (default), `code` or `both`: the default of every profile.
    pub mode: Option<Mode>,
    /// How `run_code` shows the tools: `inline`, `catalog` or `auto` (default).
    pub sdk: Option<SdkForm>,
    /// `auto` switches to `catalog` above this many (estimated) tokens.
    pub sdk_inline_max_tokens: Option<usize>,
    /// `brief` (default: first sentences) or `full` descriptions in the inline form.
    pub sdk_docs: Option<SdkDocs>,
    /// Limits of `run_code` runs and the worker pool.
    #[serde(default)]
    pub code: RawCode,
    /// `[gateway.http]`: the HTTP listener's doors and limits.
    #[serde(default)]
    pub http: RawHttp,
    /// `[gateway.supervise]`: starts, health pings and restarts of upstream servers.
    #[serde(default)]
    pub supervise: RawSupervise,
    /// `[gateway.pinning]`: the lock of pinned tool definitions. Its presence alone makes
    /// the lock required.
    pub pinning: Option<RawPinning>,
    /// `[gateway.tracing]`: OpenTelemetry export of the call spans.
    #[serde(default)]
    pub tracing: RawTracing,
    /// `[gateway.auth]`: accept identity provider tokens (OAuth resource server).
    pub auth: Option<RawAuth>,
    /// Where the tokens of `oauth` servers are stored (default: the user's data directory).
    pub token_dir: Option<String>,
}

/// How one call of a tool may be retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retry {
    /// Attempts in all, the first included.
    pub attempts: u32,
    #[serde(default)]
    pub backoff_ms: u64,
}

/// `[servers.NAME.tools.TOOL]`: limits for one upstream tool (by its upstream name).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolPolicy {
    pub timeout_ms: Option<u64>,
    /// Makes this tool retryable.
    pub retry: Option<Retry>,
}

/// When a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HookStage {
    Pre,
    Post,
}

/// What a failing hook (error, timeout, garbage) means.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// Fail closed: the call is denied (pre) or blocked (post).
    #[default]
    Deny,
    /// Fail open: the hook is skipped.
    Allow,
}

/// One `[[hooks]]` entry as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHook {
    pub stage: HookStage,
    /// Globs over exposed names; all tools when absent.
    pub tools: Option<Vec<String>>,
    /// Profiles it applies to; all when absent.
    pub profiles: Option<Vec<String>>,
    pub http: Option<String>,
    pub command: Option<Vec<String>>,
    /// Environment of a `command` hook, on top of the base set ([`crate::child`]).
    #[serde(default, deserialize_with = "scalars::map")]
    pub env: BTreeMap<String, String>,
    /// Variables of the gateway's own environment a `command` hook may see too.
    #[serde(default)]
    pub env_passthrough: Vec<String>,
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub on_error: OnError,
}

/// One `[profiles.NAME]` table as written: an agent's view of the tools.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProfile {
    /// Inherit that profile's restrictions (a chain, farthest first).
    pub extends: Option<String>,
    /// Exact exposed names or `*` globs; only these are visible (when given).
    pub allow: Option<Vec<String>>,
    /// Exact exposed names or `*` globs; these are hidden.
    pub deny: Option<Vec<String>>,
    /// Bearer tokens that select this profile over HTTP (and are required on its path).
    #[serde(default)]
    pub tokens: Vec<String>,
    /// Servers whose tools exist for this profile (and profiles extending it) only.
    #[serde(default)]
    pub servers: BTreeMap<String, RawServer>,
    /// `native`, `code` or `both`; inherited along `extends`, else the gateway's.
    pub mode: Option<Mode>,
}

/// One `[servers.NAME]` table as written: either `command` (stdio) or `url` (streamable HTTP).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    pub command: Option<String>,
    #[serde(default, deserialize_with = "scalars::list")]
    pub args: Vec<String>,
    /// The child's environment, on top of the base set ([`crate::child`]).
    #[serde(default, deserialize_with = "scalars::map")]
    pub env: BTreeMap<String, String>,
    /// Variables of the gateway's own environment this child may see too (by name).
    #[serde(default)]
    pub env_passthrough: Vec<String>,
    pub cwd: Option<String>,
    pub url: Option<String>,
    #[serde(default, deserialize_with = "scalars::map")]
    pub headers: BTreeMap<String, String>,
    /// How toolgate signs in to a `url` server ([`UpstreamAuth`]).
    pub auth: Option<RawUpstreamAuth>,
    /// Time limit of one call to this server, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// Retry for this server's tools annotated `idempotentHint`.
    pub retry: Option<Retry>,
    /// Per-tool limits, by upstream tool name.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolPolicy>,
}

/// A validated profile: its parent and its own restriction (entries checked against the
/// imported names at start, when those are known).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    pub name: ProfileName,
    pub extends: Option<ProfileName>,
    /// As written; [`Config::mode_of`] resolves inheritance.
    pub mode: Option<Mode>,
    pub allow: Option<Vec<String>>,
    pub deny: Option<Vec<String>>,
    pub tokens: Vec<Secret>,
}

/// How to reach one upstream server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        /// Its own variables and the passed-through ones, resolved at load; the child sees
        /// these plus the base set ([`crate::child`]), nothing else of the gateway's.
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
        auth: Option<UpstreamAuth>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    pub id: ServerId,
    pub transport: Transport,
    pub timeout_ms: Option<u64>,
    pub retry: Option<Retry>,
    pub tools: BTreeMap<String, ToolPolicy>,
}

/// How an external hook is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookTransport {
    /// POST the request as JSON, read the decision from the body.
    Http { url: String },
    /// One long-lived process: requests on stdin, decisions on stdout, one JSON per line.
    Command {
        program: String,
        args: Vec<String>,
        /// Its own variables and the passed-through ones, resolved at load.
        env: BTreeMap<String, String>,
    },
}

/// A validated `[[hooks]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookConfig {
    /// `hooks[i]`, for messages.
    pub key: String,
    pub stage: HookStage,
    pub tools: Vec<String>,
    /// Empty: every profile.
    pub profiles: Vec<ProfileName>,
    pub transport: HookTransport,
    pub timeout_ms: u64,
    pub on_error: OnError,
}

/// The validated configuration the gateway runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Where it came from, for messages.
    pub source: String,
    pub prefix: PrefixPolicy,
    /// Global servers sorted by name (the order tools are listed in), then each profile's own.
    pub servers: Vec<ServerConfig>,
    /// Sorted by name; always contains `default` (declared or implied, unrestricted).
    pub profiles: Vec<Profile>,
    pub require_profile: bool,
    pub call_timeout_ms: u64,
    pub max_result_bytes: usize,
    pub audit_arguments: bool,
    /// How long a stopping gateway lets calls in flight finish ([`crate::drain`]).
    pub drain_grace_ms: u64,
    /// `tools/call` over stdio takes the raw fast path ([`crate::downstream::fast`]).
    pub fast_path: bool,
    pub hooks: Vec<HookConfig>,
    pub http: HttpSettings,
    /// Starts, health pings and restarts of upstream servers.
    pub supervise: SuperviseSettings,
    /// Code mode: the gateway's default mode, the SDK form, run limits.
    pub code: CodeSettings,
    /// Tool pinning: the lock file and what a changed or new tool gets.
    pub pinning: PinningSettings,
    /// OpenTelemetry export of the call spans ([`crate::telemetry`]).
    pub tracing: TracingSettings,
    /// IdP tokens over HTTP ([`crate::downstream::http::oauth`]); `None`: off.
    pub auth: Option<AuthSettings>,
}

impl Config {
    /// `profile`'s mode: its own, else the nearest ancestor's, else the gateway's.
    pub fn mode_of(&self, profile: &ProfileName) -> Mode {
        let mut next = self.profiles.iter().find(|p| &p.name == profile);
        // Bounded: validation rejects cycles, and this cannot loop past the profile count.
        for _ in 0..=self.profiles.len() {
            let Some(p) = next else { break };
            if let Some(mode) = p.mode {
                return mode;
            }
            next = p
                .extends
                .as_ref()
                .and_then(|parent| self.profiles.iter().find(|q| &q.name == parent));
        }
        self.code.mode
    }
}

/// Default time limit of a call: one minute.
pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 60_000;
/// Default cap on a result's serialized size: 4 MiB.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 4 * 1024 * 1024;
/// Default time calls in flight get to finish when the gateway stops: 5 s.
pub const DEFAULT_DRAIN_GRACE_MS: u64 = 5_000;
/// Default time limit of one hook call.
pub const DEFAULT_HOOK_TIMEOUT_MS: u64 = 5_000;

/// Reads `path` (which must exist) and the `TOOLGATE_*` environment, then validates. A
/// relative lock path is made relative to `path`'s directory.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    if !path.is_file() {
        return Err(ConfigError::MissingFile(path.to_owned()));
    }
    let file = path.display().to_string();
    let raw: RawConfig = Figment::new()
        .merge(Toml::file_exact(path))
        .merge(env_provider())
        .extract()
        .map_err(|error| ConfigError::Parse {
            file: file.clone(),
            message: describe_figment_error(error),
        })?;
    let mut config = validate(raw, &file, &|name| std::env::var(name).ok())?;
    // The lock belongs with the config it pins, wherever toolgate is started from.
    config
        .pinning
        .resolve_in(path.parent().unwrap_or(Path::new("")));
    Ok(config)
}

/// Parses TOML text directly (tests, `toolgate check` on stdin later): no environment
/// overrides; a relative lock path stays relative to the working directory.
pub fn from_toml_str(text: &str, source: &str) -> Result<Config, ConfigError> {
    let raw: RawConfig = Figment::new()
        .merge(Toml::string(text))
        .extract()
        .map_err(|error| ConfigError::Parse {
            file: source.to_owned(),
            message: describe_figment_error(error),
        })?;
    validate(raw, source, &|name| std::env::var(name).ok())
}

/// `TOOLGATE_SERVERS__ECHO__ENV__LOG_LEVEL=debug` → `servers.echo.env.LOG_LEVEL`.
///
/// Figment lowercases whole keys by default, but the names under `env` and `headers` are
/// case-sensitive, so case is decided per segment and `lowercase(false)` goes last (figment
/// resets it on every `map`).
fn env_provider() -> Env {
    Env::prefixed(ENV_PREFIX)
        .map(|key| env_key_to_path(key.as_str()).into())
        .lowercase(false)
}

fn env_key_to_path(key: &str) -> String {
    let mut path: Vec<String> = Vec::new();
    for segment in key.split("__") {
        let keeps_case = path
            .last()
            .is_some_and(|parent| parent == "env" || parent == "headers");
        path.push(if keeps_case {
            segment.to_owned()
        } else {
            segment.to_ascii_lowercase()
        });
    }
    path.join(".")
}

/// Figment's own text, but every error of the chain, one per line.
fn describe_figment_error(error: figment::Error) -> String {
    error
        .into_iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Values that are strings to the child process, whatever they look like. Figment types
/// `TOOLGATE_SERVERS__X__ENV__PORT=8080` as a number; `PORT` still wants the string `8080`.
mod scalars {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, de::Error};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Scalar {
        Text(String),
        Integer(i64),
        Unsigned(u64),
        Float(f64),
        Boolean(bool),
    }

    impl Scalar {
        fn into_string(self) -> String {
            match self {
                Scalar::Text(s) => s,
                Scalar::Integer(i) => i.to_string(),
                Scalar::Unsigned(u) => u.to_string(),
                Scalar::Float(f) => f.to_string(),
                Scalar::Boolean(b) => b.to_string(),
            }
        }
    }

    fn scalar<'de, D: Deserializer<'de>>(value: Scalar) -> Result<String, D::Error> {
        Ok(value.into_string())
    }

    pub fn list<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
        Vec::<Scalar>::deserialize(deserializer)
            .map_err(|_| D::Error::custom("expected a list of strings"))?
            .into_iter()
            .map(scalar::<D>)
            .collect()
    }

    pub fn map<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<BTreeMap<String, String>, D::Error> {
        BTreeMap::<String, Scalar>::deserialize(deserializer)
            .map_err(|_| D::Error::custom("expected a table of strings"))?
            .into_iter()
            .map(|(k, v)| Ok((k, scalar::<D>(v)?)))
            .collect()
    }
}

#[cfg(test)]
mod tests;
