//! Draining: on SIGTERM, SIGINT or stdin EOF, take no new calls, let those in flight finish within `drain_grace_ms`, then cancel the rest.
//!
//! Every call from a client passes [`Drain::admit`] in the pipeline and holds its
//! [`Admission`] until it has been recorded (audit line, metrics). [`Drain::run`] then:
//! 1. refuses every later call (`SHUTTING_DOWN`), while sessions stay open so that answers
//!    still reach their clients;
//! 2. waits until the admitted calls are done, at most the grace;
//! 3. cancels those still running: each sends `notifications/cancelled` to its upstream and
//!    ends with `SHUTTING_DOWN`; they get a short while more to do so.
//!
//! Only then do the sessions close and the upstreams stop. The calls a `run_code` program
//! makes are not admitted separately: they belong to their program's call, and end with it.

use std::{
    future::Future,
    sync::{
        Arc, Mutex, OnceLock,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use tokio::time::Instant;
use tokio_util::{
    sync::CancellationToken,
    task::{TaskTracker, task_tracker::TaskTrackerToken},
};

/// How long cancelled calls get, after the grace, to reach their upstream and be recorded.
const SETTLE: Duration = Duration::from_secs(2);

/// The gateway's one drain: shared by the pipeline (admission) and whoever stops the gateway.
#[derive(Debug)]
pub struct Drain {
    grace: Duration,
    /// Fired when draining starts: no call is admitted after it.
    closing: CancellationToken,
    /// Fires when the grace is over (or on [`Drain::hurry`]): admitted calls are cancelled.
    cut: Arc<Cut>,
    /// One token per admitted call still running.
    calls: TaskTracker,
    /// When the grace ends, fixed by the first caller of [`Drain::run`].
    deadline: OnceLock<Instant>,
    /// Set by a [`Drain::hurry`] that came before the grace ran out: the calls were cut by it.
    hurried: AtomicBool,
}

/// What one drain did, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drained {
    /// Calls in flight when draining started.
    pub in_flight: usize,
    /// Of those, the ones still running at the end of the grace, and cancelled.
    pub cancelled: usize,
}

impl Drain {
    pub fn new(grace: Duration) -> Self {
        Self {
            grace,
            closing: CancellationToken::new(),
            cut: Arc::default(),
            calls: TaskTracker::new(),
            deadline: OnceLock::new(),
            hurried: AtomicBool::new(false),
        }
    }

    pub fn grace(&self) -> Duration {
        self.grace
    }

    /// Whether calls are being refused.
    pub fn is_draining(&self) -> bool {
        self.closing.is_cancelled()
    }

    /// Lets one call in, unless draining has started.
    pub fn admit(&self) -> Option<Admission> {
        // The token first, then the check: a drain that starts in between then waits for this
        // call (its wait sees the token), or this call sees the drain; never neither.
        let in_flight = self.calls.token();
        if self.closing.is_cancelled() {
            return None;
        }
        Some(Admission {
            _in_flight: in_flight,
            cut: self.cut.clone(),
            was_cut: AtomicBool::new(false),
        })
    }

    /// Drains (see the module doc) and returns when no admitted call is left, or at the end
    /// of the grace plus a short settling time. Safe to call again or concurrently: every
    /// caller waits for the same deadline, fixed by the first.
    pub async fn run(&self) -> Drained {
        let deadline = *self.deadline.get_or_init(|| Instant::now() + self.grace);
        let in_flight = self.calls.len();
        self.closing.cancel();
        self.calls.close();
        if in_flight > 0 {
            tracing::info!(
                in_flight,
                grace_ms = self.grace.as_millis() as u64,
                "draining: waiting for calls in flight"
            );
        }
        let finished = tokio::select! {
            // Checked first: a later run, past the deadline, finds the calls already done.
            biased;
            () = self.calls.wait() => true,
            () = tokio::time::sleep_until(deadline) => false,
            // A second signal: no more waiting.
            () = self.cut.fired.cancelled() => false,
        };
        let mut cancelled = 0;
        if !finished {
            cancelled = self.calls.len();
            tracing::info!(
                cancelled,
                "drain grace over: cancelling the calls still running"
            );
            self.cut.fire();
            if tokio::time::timeout(SETTLE, self.calls.wait())
                .await
                .is_err()
            {
                tracing::warn!(
                    left = self.calls.len(),
                    "calls still running {SETTLE:?} after their cancel"
                );
            }
        }
        Drained {
            in_flight,
            cancelled,
        }
    }

    /// Cancels the calls in flight now instead of at the end of the grace (a second signal).
    pub fn hurry(&self) {
        if !self.cut.fired.is_cancelled() {
            self.hurried.store(true, Ordering::Relaxed);
        }
        self.cut.fire();
    }

    /// Whether a [`hurry`](Self::hurry), not the end of the grace, fired the cut.
    pub fn hurried(&self) -> bool {
        self.hurried.load(Ordering::Relaxed)
    }
}

/// The drain's cut: the admitted calls running; when it fires, it cancels those not yet
/// cancelled and marks them as its own.
///
/// A call's token is listed here while it runs: a child of its client's ([`Admission::run`]),
/// or a fast path's own token ([`Admission::run_on`]), so that the client or the cut cancels
/// it without a task waiting on both. A relay did that before (a `select!` over the
/// client's and the drain's `cancelled()`, polled whenever the call waited): callgrind counted
/// 6 polls of `WaitForCancellationFuture` per forwarded call with it (bc143a5), 4 without
/// (042284f), and about 715 instructions less per call in all (BENCHMARKS.md).
#[derive(Debug, Default)]
struct Cut {
    fired: CancellationToken,
    /// The calls running, and which of them the cut cancelled.
    running: Mutex<slab::Slab<Listing>>,
}

/// A running call's place on the cut's list.
#[derive(Debug)]
enum Listing {
    Running(CancellationToken),
    /// The cut cancelled it: it had not been cancelled before (by its client or its caller).
    Cut,
}

impl Cut {
    fn running(&self) -> std::sync::MutexGuard<'_, slab::Slab<Listing>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fire(&self) {
        // Before the list is read: an `enter` that finds the token not yet cancelled lists
        // its call before this reads the list, and one after finds it cancelled.
        self.fired.cancel();
        let mut cut = Vec::new();
        for (_, listing) in self.running().iter_mut() {
            // A call its client cancelled first ends as the client's; the audit says so.
            if matches!(listing, Listing::Running(call) if !call.is_cancelled())
                && let Listing::Running(call) = std::mem::replace(listing, Listing::Cut)
            {
                cut.push(call);
            }
        }
        // After the lock, like every drop of a token (see `Listed`).
        for call in cut {
            call.cancel();
        }
    }

    /// Lists a running call's token; `None`: the cut has fired, and the token is cancelled.
    fn enter(&self, call: &CancellationToken) -> Option<usize> {
        let mut running = self.running();
        // Under the lock: see `fire`.
        if self.fired.is_cancelled() {
            drop(running);
            call.cancel();
            return None;
        }
        Some(running.insert(Listing::Running(call.clone())))
    }
}

/// Takes a call off the cut's list when the call ends, and tells its admission whether the
/// cut cancelled it.
struct Listed<'a> {
    admission: &'a Admission,
    key: Option<usize>,
}

impl Drop for Listed<'_> {
    fn drop(&mut self) {
        let cut = match self.key {
            // After the lock: dropping a token takes the token's own lock.
            Some(key) => {
                let listing = self.admission.cut.running().try_remove(key);
                matches!(listing, Some(Listing::Cut))
            }
            // Started after the cut, which `enter` then cancelled.
            None => true,
        };
        if cut {
            self.admission.was_cut.store(true, Ordering::Relaxed);
        }
    }
}

/// One admitted call: counted as in flight until dropped.
#[derive(Debug)]
pub struct Admission {
    _in_flight: TaskTrackerToken,
    cut: Arc<Cut>,
    /// Set when the call ends, if the drain's cut cancelled it.
    was_cut: AtomicBool,
}

impl Admission {
    /// Runs `work` with a token that fires when `client` cancels or when the drain cuts the
    /// call short, whichever comes first.
    pub async fn run<F: Future>(
        &self,
        client: &CancellationToken,
        work: impl FnOnce(CancellationToken) -> F,
    ) -> F::Output {
        self.run_on(client.child_token(), work).await
    }

    /// [`run`](Self::run) on `token` itself, not a child: for a token that is this call's
    /// alone and whose cancel nobody reads as the client's (the fast paths keep who cancelled
    /// in their maps of calls in flight). A child cost about 500 instructions per call, to
    /// make and to drop (BENCHMARKS.md).
    pub async fn run_on<F: Future>(
        &self,
        token: CancellationToken,
        work: impl FnOnce(CancellationToken) -> F,
    ) -> F::Output {
        let _listed = Listed {
            key: self.cut.enter(&token),
            admission: self,
        };
        work(token).await
    }

    /// Whether the drain cancelled this call: the grace ended while it ran, and nobody had
    /// cancelled it before. Read after [`run`](Self::run) or [`run_on`](Self::run_on) returns.
    pub fn cut_short(&self) -> bool {
        self.was_cut.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    // Real time, kept short: tokio's paused clock needs a feature the crate does not build.
    use super::*;

    /// Waits for `ms` milliseconds unless `cancel` fires first.
    async fn work(ms: u64, cancel: CancellationToken) -> &'static str {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(ms)) => "finished",
            () = cancel.cancelled() => "cancelled",
        }
    }

    #[tokio::test]
    async fn calls_in_flight_finish_within_the_grace_and_later_ones_are_refused() {
        let drain = Drain::new(Duration::from_secs(30));
        let admission = drain.admit().expect("not draining yet");
        let client = CancellationToken::new();
        let started = Instant::now();
        let (outcome, drained) = tokio::join!(
            async {
                let outcome = admission.run(&client, |cancel| work(100, cancel)).await;
                drop(admission);
                outcome
            },
            drain.run()
        );
        assert_eq!(outcome, "finished");
        assert_eq!(
            drained,
            Drained {
                in_flight: 1,
                cancelled: 0
            }
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no wait for the grace"
        );
        assert!(drain.is_draining());
        assert!(drain.admit().is_none(), "a call after the drain began");
    }

    #[tokio::test]
    async fn a_call_outlasting_the_grace_is_cancelled_at_its_end() {
        let grace = Duration::from_millis(200);
        let drain = Drain::new(grace);
        let admission = drain.admit().expect("not draining yet");
        let client = CancellationToken::new();
        let started = Instant::now();
        let (outcome, drained) = tokio::join!(
            async {
                let outcome = admission.run(&client, |cancel| work(60_000, cancel)).await;
                let cut = admission.cut_short();
                drop(admission);
                (outcome, cut)
            },
            drain.run()
        );
        assert_eq!(outcome, ("cancelled", true));
        assert_eq!(
            drained,
            Drained {
                in_flight: 1,
                cancelled: 1
            }
        );
        assert!(started.elapsed() >= grace, "not before the grace is over");
        assert!(started.elapsed() < SETTLE, "as soon as the call ended");
    }

    #[tokio::test]
    async fn a_client_cancel_still_reaches_the_call() {
        let drain = Drain::new(Duration::from_secs(30));
        let admission = drain.admit().expect("not draining yet");
        let client = CancellationToken::new();
        client.cancel();
        let outcome = admission.run(&client, |cancel| work(60_000, cancel)).await;
        assert_eq!(outcome, "cancelled");
        assert!(!admission.cut_short());
    }

    /// A call still running after its own cancel (an upstream slow to give up, say) when
    /// the cut fires: the client's cancel came first, and the call is not the drain's.
    async fn cancelled_before_the_cut(own_token: bool) -> (bool, bool) {
        let drain = Drain::new(Duration::from_secs(30));
        let admission = drain.admit().expect("not draining yet");
        let client = CancellationToken::new();
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let ran = async {
            let work = |cancel: CancellationToken| async move {
                cancel.cancelled().await;
                let _ = released.await;
                cancel.is_cancelled()
            };
            let cancelled = match own_token {
                true => admission.run_on(client.clone(), work).await,
                false => admission.run(&client, work).await,
            };
            (cancelled, admission.cut_short())
        };
        let stop = async {
            client.cancel();
            tokio::task::yield_now().await;
            drain.hurry();
            let _ = release.send(());
        };
        let (ran, ()) = tokio::join!(ran, stop);
        ran
    }

    #[tokio::test]
    async fn a_call_its_client_cancelled_before_the_cut_is_not_cut_short() {
        assert_eq!(
            cancelled_before_the_cut(true).await,
            (true, false),
            "own token"
        );
        assert_eq!(
            cancelled_before_the_cut(false).await,
            (true, false),
            "child token"
        );
    }

    #[tokio::test]
    async fn only_the_calls_the_cut_cancelled_are_cut_short() {
        let drain = Drain::new(Duration::from_secs(30));
        let (cut, spared) = (drain.admit(), drain.admit());
        let (Some(cut), Some(spared)) = (cut, spared) else {
            panic!("not draining yet")
        };
        let (cut_client, spared_client) = (CancellationToken::new(), CancellationToken::new());
        spared_client.cancel();
        let (was_cut, was_spared, ()) = tokio::join!(
            cut.run(&cut_client, |cancel| work(60_000, cancel)),
            spared.run(&spared_client, |cancel| work(60_000, cancel)),
            async { drain.hurry() },
        );
        assert_eq!((was_cut, was_spared), ("cancelled", "cancelled"));
        assert!(cut.cut_short());
        assert!(!spared.cut_short(), "its client had cancelled it");
    }

    #[tokio::test]
    async fn a_call_admitted_before_the_cut_and_started_after_it_is_cancelled_at_once() {
        let drain = Drain::new(Duration::from_secs(30));
        let admission = drain.admit().expect("not draining yet");
        drain.hurry();
        let client = CancellationToken::new();
        let outcome = admission.run(&client, |cancel| work(60_000, cancel)).await;
        assert_eq!(outcome, "cancelled");
        assert!(admission.cut_short());
        assert!(!client.is_cancelled(), "the client's token is the client's");
    }

    #[tokio::test]
    async fn a_hurry_after_the_grace_ran_out_did_not_cut_anything() {
        let drain = Drain::new(Duration::from_millis(20));
        let admission = drain.admit().expect("not draining yet");
        let client = CancellationToken::new();
        let (outcome, _) = tokio::join!(
            async {
                let outcome = admission.run(&client, |cancel| work(60_000, cancel)).await;
                drop(admission);
                outcome
            },
            drain.run()
        );
        assert_eq!(outcome, "cancelled");
        drain.hurry();
        assert!(!drain.hurried(), "the grace had cut the call already");
    }

    #[tokio::test]
    async fn a_hurry_cancels_at_once_and_a_later_run_returns_at_once() {
        let drain = Drain::new(Duration::from_secs(30));
        let admission = drain.admit().expect("not draining yet");
        let client = CancellationToken::new();
        let started = Instant::now();
        let (outcome, drained) = tokio::join!(
            async {
                let outcome = admission.run(&client, |cancel| work(60_000, cancel)).await;
                drop(admission);
                outcome
            },
            async {
                tokio::join!(drain.run(), async {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    drain.hurry();
                })
                .0
            }
        );
        assert_eq!(outcome, "cancelled");
        assert_eq!(drained.cancelled, 1);
        assert!(started.elapsed() < Duration::from_secs(10), "not the grace");
        assert!(drain.hurried(), "the hurry cut the call, not the grace");
        // Nothing left: a second run (the gateway's own, after the sessions) is immediate.
        assert_eq!(
            drain.run().await,
            Drained {
                in_flight: 0,
                cancelled: 0
            }
        );
    }
}
