//! A per-server budget for the lines an upstream can push into the gateway's own log (its stderr and its log notifications).
//!
//! Without it, an upstream that writes 100,000 lines makes 100,000 gateway log lines. Each
//! server gets a token bucket; lines beyond it are counted, not logged, and the count is
//! logged once the bucket has refilled, so nothing is dropped without a trace.

use std::{sync::Mutex, time::Instant};

/// Lines a server may log in a burst.
const BURST: f64 = 200.0;
/// Lines a server may log per second, sustained.
const PER_SECOND: f64 = 50.0;

/// What to do with one line.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Log it.
    Log,
    /// Log it, after a line saying how many were suppressed before it.
    LogAfterSuppressed(u64),
    /// Count it; do not log it.
    Suppress,
}

#[derive(Debug)]
pub struct LogBudget {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    tokens: f64,
    refilled: Instant,
    suppressed: u64,
}

impl Default for LogBudget {
    fn default() -> Self {
        Self {
            state: Mutex::new(State {
                tokens: BURST,
                refilled: Instant::now(),
                suppressed: 0,
            }),
        }
    }
}

impl LogBudget {
    pub fn take(&self) -> Verdict {
        self.take_at(Instant::now())
    }

    fn take_at(&self, now: Instant) -> Verdict {
        let mut state = match self.state.lock() {
            Ok(state) => state,
            Err(poisoned) => poisoned.into_inner(),
        };
        let elapsed = now.saturating_duration_since(state.refilled);
        state.refilled = now;
        state.tokens = (state.tokens + elapsed.as_secs_f64() * PER_SECOND).min(BURST);
        if state.tokens < 1.0 {
            state.suppressed += 1;
            return Verdict::Suppress;
        }
        state.tokens -= 1.0;
        match std::mem::take(&mut state.suppressed) {
            0 => Verdict::Log,
            n => Verdict::LogAfterSuppressed(n),
        }
    }
}

/// Logs `line` through `log` unless the budget says no; says how many were suppressed.
pub fn log_within(budget: &LogBudget, server: &impl std::fmt::Display, log: impl FnOnce()) {
    match budget.take() {
        Verdict::Log => log(),
        Verdict::LogAfterSuppressed(n) => {
            tracing::warn!(%server, suppressed = n, "{n} log lines from this server were suppressed (more than {PER_SECOND} a second)");
            log();
        }
        Verdict::Suppress => {}
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// How long a silent server takes to earn a full burst back.
    const REFILL: Duration = Duration::from_secs(4);

    #[test]
    fn a_flood_is_cut_to_the_burst_and_counted() {
        let budget = LogBudget::default();
        let start = Instant::now();
        let verdicts: Vec<Verdict> = (0..100_000).map(|_| budget.take_at(start)).collect();
        let logged = verdicts.iter().filter(|v| **v == Verdict::Log).count();
        assert_eq!(logged, BURST as usize);
        // After a quiet second, lines pass again and the first one carries the count.
        let later = start + Duration::from_secs(1);
        assert_eq!(
            budget.take_at(later),
            Verdict::LogAfterSuppressed(100_000 - BURST as u64)
        );
        assert_eq!(budget.take_at(later), Verdict::Log);
        // A full burst is back after REFILL.
        let refilled = later + REFILL;
        let logged = (0..1000)
            .filter(|_| budget.take_at(refilled) == Verdict::Log)
            .count();
        assert_eq!(logged, BURST as usize);
    }
}
