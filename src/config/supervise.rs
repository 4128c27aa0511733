//! `[gateway.supervise]`: how upstream servers are started, health-checked and restarted.

use std::time::Duration;

use serde::Deserialize;

use super::ConfigError;

/// `[gateway.supervise]` as written; every value in milliseconds unless named otherwise.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSupervise {
    /// Restart a server that died or stopped answering pings (default `true`).
    pub restart: Option<bool>,
    /// The first restart delay; it doubles per failed attempt.
    pub backoff_initial_ms: Option<u64>,
    /// The cap of the restart delay.
    pub backoff_max_ms: Option<u64>,
    /// A server that stayed up this long starts again from the first delay.
    pub reset_after_ms: Option<u64>,
    /// How often a live server is pinged; `0` turns pings off.
    pub ping_interval_ms: Option<u64>,
    /// How long one ping may take.
    pub ping_timeout_ms: Option<u64>,
    /// Missed pings in a row after which the server counts as hung and is restarted.
    pub ping_failures: Option<u32>,
    /// How long one start (spawn, handshake, first lists) may take.
    pub start_timeout_ms: Option<u64>,
    /// How long `tools/list` and calls wait for servers still on their first start.
    pub start_grace_ms: Option<u64>,
}

/// Validated supervision settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuperviseSettings {
    pub restart: bool,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    pub reset_after: Duration,
    /// `None`: no pings.
    pub ping_interval: Option<Duration>,
    pub ping_timeout: Duration,
    pub ping_failures: u32,
    pub start_timeout: Duration,
    pub start_grace: Duration,
    /// `gateway.max_message_bytes`: the largest line read from a stdio server; a larger
    /// answer fails its call at once with `MESSAGE_TOO_LARGE`.
    pub max_message_bytes: usize,
}

/// Default of `gateway.max_message_bytes`: 16 MiB, rmcp's own line limit.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

impl Default for SuperviseSettings {
    fn default() -> Self {
        Self {
            restart: true,
            backoff_initial: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            reset_after: Duration::from_secs(60),
            ping_interval: Some(Duration::from_secs(15)),
            ping_timeout: Duration::from_secs(5),
            ping_failures: 3,
            start_timeout: Duration::from_secs(60),
            start_grace: Duration::from_secs(3),
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
        }
    }
}

impl SuperviseSettings {
    /// Defaults overridden by what was written.
    pub fn from_raw(
        raw: &RawSupervise,
        invalid: &dyn Fn(String, String) -> ConfigError,
    ) -> Result<Self, ConfigError> {
        let d = Self::default();
        let positive = |value: Option<u64>, default: Duration, key: &str| match value {
            Some(0) => Err(invalid(
                format!("gateway.supervise.{key}"),
                "expected a positive number of milliseconds".into(),
            )),
            Some(ms) => Ok(Duration::from_millis(ms)),
            None => Ok(default),
        };
        let settings = Self {
            restart: raw.restart.unwrap_or(d.restart),
            backoff_initial: positive(
                raw.backoff_initial_ms,
                d.backoff_initial,
                "backoff_initial_ms",
            )?,
            backoff_max: positive(raw.backoff_max_ms, d.backoff_max, "backoff_max_ms")?,
            reset_after: positive(raw.reset_after_ms, d.reset_after, "reset_after_ms")?,
            ping_interval: match raw.ping_interval_ms {
                Some(0) => None,
                Some(ms) => Some(Duration::from_millis(ms)),
                None => d.ping_interval,
            },
            ping_timeout: positive(raw.ping_timeout_ms, d.ping_timeout, "ping_timeout_ms")?,
            ping_failures: match raw.ping_failures {
                Some(0) => {
                    return Err(invalid(
                        "gateway.supervise.ping_failures".into(),
                        "expected a positive number".into(),
                    ));
                }
                Some(n) => n,
                None => d.ping_failures,
            },
            start_timeout: positive(raw.start_timeout_ms, d.start_timeout, "start_timeout_ms")?,
            // Zero is meaningful: answer at once with whatever has started.
            start_grace: raw
                .start_grace_ms
                .map_or(d.start_grace, Duration::from_millis),
            max_message_bytes: d.max_message_bytes,
        };
        if settings.backoff_max < settings.backoff_initial {
            return Err(invalid(
                "gateway.supervise.backoff_max_ms".into(),
                format!(
                    "expected at least backoff_initial_ms ({} ms), found {} ms",
                    settings.backoff_initial.as_millis(),
                    settings.backoff_max.as_millis()
                ),
            ));
        }
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid(key: String, message: String) -> ConfigError {
        ConfigError::Invalid {
            file: "servers.toml".into(),
            key,
            message,
        }
    }

    #[test]
    fn defaults_when_nothing_is_written() {
        let settings = SuperviseSettings::from_raw(&RawSupervise::default(), &invalid).unwrap();
        assert_eq!(settings, SuperviseSettings::default());
    }

    #[test]
    fn zero_ping_interval_turns_pings_off_but_zero_timeouts_are_refused() {
        let raw = RawSupervise {
            ping_interval_ms: Some(0),
            start_grace_ms: Some(0),
            ..RawSupervise::default()
        };
        let settings = SuperviseSettings::from_raw(&raw, &invalid).unwrap();
        assert_eq!(settings.ping_interval, None);
        assert_eq!(settings.start_grace, Duration::ZERO);

        let raw = RawSupervise {
            ping_timeout_ms: Some(0),
            ..RawSupervise::default()
        };
        let error = SuperviseSettings::from_raw(&raw, &invalid).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("gateway.supervise.ping_timeout_ms"),
            "{error}"
        );
    }

    #[test]
    fn a_cap_below_the_first_delay_is_refused() {
        let raw = RawSupervise {
            backoff_initial_ms: Some(1000),
            backoff_max_ms: Some(10),
            ..RawSupervise::default()
        };
        let error = SuperviseSettings::from_raw(&raw, &invalid).unwrap_err();
        assert!(error.to_string().contains("backoff_max_ms"), "{error}");
    }
}
