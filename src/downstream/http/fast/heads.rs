//! One timer per HTTP front for the calls whose response headers wait for their first event.
//!
//! A session's call holds its headers back for up to [`super::body::HEAD_WAIT`]
//! ([`super::body::CallBody::respond`]). A tokio timer of its own per call is set earlier
//! than the runtime's planned wake-up whenever calls come one at a time, and tokio then
//! writes its eventfd to wake its driver: one `write` and one `epoll_wait` more per call
//! (`BENCHMARKS.md`). Here one task sleeps until the earliest wait's end, so a call that
//! starts while that task's timer is armed sets none; the waits all have the same length, so
//! they end in the order they began.
use std::{
    collections::VecDeque,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard},
    task::{Context, Poll, Waker},
};

use tokio::{
    sync::Notify,
    time::{Duration, Instant},
};
use tokio_util::sync::CancellationToken;

/// The waits of one front, and the task that ends them.
pub(in crate::downstream::http) struct HeadWaits {
    length: Duration,
    waits: Mutex<Waits>,
    /// Wakes the task when a wait begins while none is pending.
    begun: Notify,
}

#[derive(Default)]
struct Waits {
    next_key: u64,
    /// In the order they began, which is the order they end.
    pending: VecDeque<Pending>,
    /// The front stopped: every wait is over at once, so no response waits for a timer
    /// that no longer runs.
    stopped: bool,
}

struct Pending {
    key: u64,
    until: Instant,
    waker: Waker,
}

impl Waits {
    fn find(&self, key: u64) -> Option<usize> {
        self.pending.binary_search_by_key(&key, |p| p.key).ok()
    }
}

impl HeadWaits {
    /// Waits of `length`, timed by a task of their own that runs until `stop`.
    pub(in crate::downstream::http) fn start(
        length: Duration,
        stop: CancellationToken,
    ) -> Arc<Self> {
        let waits = Arc::new(Self {
            length,
            waits: Mutex::default(),
            begun: Notify::new(),
        });
        tokio::spawn(waits.clone().run(stop));
        waits
    }

    fn waits(&self) -> MutexGuard<'_, Waits> {
        self.waits.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A wait of `length`, from its first poll; ends early when dropped.
    pub(in crate::downstream::http) fn wait(&self) -> HeadWait<'_> {
        HeadWait {
            waits: self,
            key: None,
        }
    }

    async fn run(self: Arc<Self>, stop: CancellationToken) {
        loop {
            let next = self.end_due();
            tokio::select! {
                biased;
                () = stop.cancelled() => break,
                () = async {
                    match next {
                        Some(until) => tokio::time::sleep_until(until).await,
                        None => self.begun.notified().await,
                    }
                } => {}
            }
        }
        let mut waits = self.waits();
        waits.stopped = true;
        let ended = std::mem::take(&mut waits.pending);
        drop(waits);
        ended.into_iter().for_each(|p| p.waker.wake());
    }

    /// Ends every wait whose time is up; the end of the next one.
    fn end_due(&self) -> Option<Instant> {
        let now = Instant::now();
        loop {
            let mut waits = self.waits();
            let until = waits.pending.front()?.until;
            if until > now {
                return Some(until);
            }
            let ended = waits.pending.pop_front();
            // Woken without the lock: a waker may run code of its own.
            drop(waits);
            if let Some(ended) = ended {
                ended.waker.wake();
            }
        }
    }
}

/// One call's wait ([`HeadWaits::wait`]).
pub(in crate::downstream::http) struct HeadWait<'a> {
    waits: &'a HeadWaits,
    /// Set once begun.
    key: Option<u64>,
}

impl Future for HeadWait<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut waits = self.waits.waits();
        if waits.stopped {
            return Poll::Ready(());
        }
        let Some(key) = self.key else {
            let key = waits.next_key;
            waits.next_key += 1;
            let first = waits.pending.is_empty();
            waits.pending.push_back(Pending {
                key,
                until: Instant::now() + self.waits.length,
                waker: cx.waker().clone(),
            });
            drop(waits);
            self.key = Some(key);
            if first {
                self.waits.begun.notify_one();
            }
            return Poll::Pending;
        };
        match waits.find(key) {
            Some(at) => {
                let pending = &mut waits.pending[at];
                if !pending.waker.will_wake(cx.waker()) {
                    pending.waker = cx.waker().clone();
                }
                Poll::Pending
            }
            // Taken out by the task: over.
            None => Poll::Ready(()),
        }
    }
}

impl Drop for HeadWait<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            let mut waits = self.waits.waits();
            if let Some(at) = waits.find(key) {
                waits.pending.remove(at);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LENGTH: Duration = Duration::from_millis(20);

    #[tokio::test]
    async fn a_wait_ends_after_its_length_and_not_before() {
        let heads = HeadWaits::start(LENGTH, CancellationToken::new());
        let began = std::time::Instant::now();
        heads.wait().await;
        assert!(
            began.elapsed() >= LENGTH,
            "ended after {:?}",
            began.elapsed()
        );
        assert!(heads.waits().pending.is_empty());
    }

    #[tokio::test]
    async fn waits_that_overlap_each_end_after_their_own_length() {
        let heads = HeadWaits::start(LENGTH, CancellationToken::new());
        let mut ends = tokio::task::JoinSet::new();
        for _ in 0..3 {
            let heads = heads.clone();
            ends.spawn(async move {
                let began = std::time::Instant::now();
                heads.wait().await;
                began.elapsed()
            });
            tokio::time::sleep(Duration::from_millis(7)).await;
        }
        while let Some(waited) = ends.join_next().await {
            let waited = waited.expect("a wait's task");
            assert!(waited >= LENGTH, "ended after {waited:?}");
        }
    }

    #[tokio::test]
    async fn a_dropped_wait_leaves_the_queue_and_the_next_still_ends() {
        let heads = HeadWaits::start(LENGTH, CancellationToken::new());
        let mut dropped = Box::pin(heads.wait());
        assert!(futures::poll!(dropped.as_mut()).is_pending());
        assert_eq!(heads.waits().pending.len(), 1);
        drop(dropped);
        assert!(heads.waits().pending.is_empty());
        // Begun while the task still sleeps for the dropped one.
        tokio::time::timeout(Duration::from_secs(2), heads.wait())
            .await
            .expect("the next wait ends");
    }

    #[tokio::test]
    async fn stopping_ends_every_wait_and_later_ones_at_once() {
        let stop = CancellationToken::new();
        let heads = HeadWaits::start(Duration::from_secs(3600), stop.clone());
        let mut waiting = Box::pin(heads.wait());
        assert!(futures::poll!(waiting.as_mut()).is_pending());
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("ended by the stop");
        tokio::time::timeout(Duration::from_secs(5), heads.wait())
            .await
            .expect("a wait after the stop ends at once");
    }
}
