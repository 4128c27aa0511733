//! Where the reader leaves what comes for one raw call (its progress, then its answer), and where the call waits for it.
//!
//! One allocation per call. A oneshot for the answer and a channel for the progress were
//! three (the channel allocates its first block of slots at once, and rmcp's clients ask every
//! call for progress), with a wake-up path each. The reader fills the slot in the order the
//! server wrote, and the call takes progress before the answer, so an answer never overtakes
//! the progress written before it.

use std::{
    collections::VecDeque,
    future::poll_fn,
    sync::{Arc, Mutex, MutexGuard},
    task::{Poll, Waker},
};

use rmcp::model::ProgressNotificationParam;

use super::RawAnswer;

/// Progress notifications one raw call may have waiting; more are dropped (a client that
/// reads keeps this near zero).
const PROGRESS_QUEUE: usize = 64;

/// A call's slot: the reader's side ([`Filler`]) and the call's ([`Waiter`]).
pub(super) fn slot(progress: bool) -> (Filler, Waiter) {
    let shared = Arc::new(Mutex::new(State {
        progress: VecDeque::new(),
        answer: None,
        closed: false,
        waker: None,
        wants_progress: progress,
    }));
    (Filler(shared.clone()), Waiter(shared))
}

struct State {
    progress: VecDeque<Box<ProgressNotificationParam>>,
    answer: Option<RawAnswer>,
    /// The reader's side is gone: nothing more comes.
    closed: bool,
    waker: Option<Waker>,
    wants_progress: bool,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a call is given, in the order the server wrote it.
pub enum Event {
    Progress(Box<ProgressNotificationParam>),
    Answer(RawAnswer),
    /// The connection ended (or the call was forgotten) before an answer came.
    Closed,
}

/// Why a progress notification was not left for its call.
pub(super) enum Refused {
    /// The call did not ask for progress: the line is someone else's to handle.
    NotWanted,
    /// Its queue is full: the notification is dropped.
    Full,
}

/// The reader's side; dropping it without an answer tells the call the connection ended.
pub(super) struct Filler(Arc<Mutex<State>>);

impl Filler {
    pub fn answer(self, answer: RawAnswer) {
        let waker = {
            let mut state = lock(&self.0);
            state.answer = Some(answer);
            // Nothing more comes: `drop` need not wake the call again.
            state.closed = true;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    pub fn progress(&self, params: Box<ProgressNotificationParam>) -> Result<(), Refused> {
        let waker = {
            let mut state = lock(&self.0);
            if !state.wants_progress {
                return Err(Refused::NotWanted);
            }
            if state.progress.len() >= PROGRESS_QUEUE {
                return Err(Refused::Full);
            }
            state.progress.push_back(params);
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }
}

impl Drop for Filler {
    fn drop(&mut self) {
        let waker = {
            let mut state = lock(&self.0);
            if state.closed {
                return;
            }
            state.closed = true;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// The call's side.
pub struct Waiter(Arc<Mutex<State>>);

impl Waiter {
    /// The next progress notification, else the answer, else (nothing more can come)
    /// [`Event::Closed`]. Cancel-safe: nothing is taken until it is returned.
    pub async fn next(&mut self) -> Event {
        poll_fn(|cx| {
            let mut state = lock(&self.0);
            if let Some(params) = state.progress.pop_front() {
                return Poll::Ready(Event::Progress(params));
            }
            if let Some(answer) = state.answer.take() {
                return Poll::Ready(Event::Answer(answer));
            }
            if state.closed {
                return Poll::Ready(Event::Closed);
            }
            match &mut state.waker {
                Some(waker) => waker.clone_from(cx.waker()),
                None => state.waker = Some(cx.waker().clone()),
            }
            Poll::Pending
        })
        .await
    }

    /// The answer of a call that asked for no progress; `Err` if the connection ended first.
    pub async fn answer(&mut self) -> Result<RawAnswer, ()> {
        loop {
            match self.next().await {
                Event::Answer(answer) => return Ok(answer),
                Event::Closed => return Err(()),
                Event::Progress(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{NumberOrString, ProgressToken};

    use super::*;

    fn progress(n: f64) -> Box<ProgressNotificationParam> {
        Box::new(ProgressNotificationParam::new(
            ProgressToken(NumberOrString::Number(1)),
            n,
        ))
    }

    fn answer(line: &str) -> RawAnswer {
        RawAnswer {
            line: line.as_bytes().to_vec(),
            result: None,
            error: None,
            facts: None,
        }
    }

    #[tokio::test]
    async fn progress_comes_before_the_answer_written_after_it() {
        let (filler, mut waiter) = slot(true);
        // The call waits before anything comes: the reader's writes wake it.
        let taking = tokio::spawn(async move {
            let mut seen = Vec::new();
            loop {
                match waiter.next().await {
                    Event::Progress(p) => seen.push(format!("p{}", p.progress)),
                    Event::Answer(a) => {
                        seen.push(String::from_utf8(a.line).unwrap_or_default());
                        return seen;
                    }
                    Event::Closed => {
                        seen.push("closed".into());
                        return seen;
                    }
                }
            }
        });
        tokio::task::yield_now().await;
        assert!(filler.progress(progress(1.0)).is_ok());
        assert!(filler.progress(progress(2.0)).is_ok());
        filler.answer(answer("done"));
        let seen = taking.await.expect("the waiting task");
        assert_eq!(seen, ["p1", "p2", "done"]);
    }

    #[tokio::test]
    async fn a_filler_gone_without_an_answer_closes_the_call() {
        let (filler, mut waiter) = slot(false);
        assert!(matches!(
            filler.progress(progress(1.0)),
            Err(Refused::NotWanted)
        ));
        let waiting = tokio::spawn(async move { waiter.answer().await.is_err() });
        tokio::task::yield_now().await;
        drop(filler);
        assert!(waiting.await.expect("the waiting task"));
    }

    #[test]
    fn progress_past_the_queue_is_refused() {
        let (filler, _waiter) = slot(true);
        for n in 0..PROGRESS_QUEUE {
            assert!(filler.progress(progress(n as f64)).is_ok());
        }
        assert!(matches!(filler.progress(progress(0.0)), Err(Refused::Full)));
    }
}
