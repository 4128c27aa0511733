//! The worker's job executor and host hooks: microtasks run to exhaustion, nothing ever spins or sleeps.
//!
//! Boa's `SimpleJobExecutor` busy-polls pending futures. Here no job waits on anything outside the engine: tool
//! calls are plain pending promises that the run loop settles when their answer frame arrives, so the executor
//! only drains queues and the run loop blocks on stdin when they are empty (0 CPU while waiting).

use std::{
    cell::RefCell,
    collections::VecDeque,
    future::Future,
    pin::Pin,
    rc::Rc,
    task::{Poll, Waker},
};

use boa_engine::{
    Context, JsResult, JsValue,
    builtins::promise::{OperationType, Promise},
    context::HostHooks,
    job::{GenericJob, Job, JobExecutor, NativeAsyncJob, PromiseJob},
    object::{JsObject, builtins::JsPromise},
};

/// Runs promise jobs (and the engine's generic and immediately-ready async jobs) in FIFO order.
///
/// Timers do not exist in the sandbox, so timeout and interval jobs are dropped; so are
/// `FinalizationRegistry` cleanups, which the language lets a host skip.
#[derive(Default)]
pub(super) struct Executor {
    promise_jobs: RefCell<VecDeque<PromiseJob>>,
    generic_jobs: RefCell<VecDeque<GenericJob>>,
    async_jobs: RefCell<VecDeque<NativeAsyncJob>>,
}

impl JobExecutor for Executor {
    fn enqueue_job(self: Rc<Self>, job: Job, _context: &mut Context) {
        match job {
            Job::PromiseJob(job) => self.promise_jobs.borrow_mut().push_back(job),
            Job::GenericJob(job) => self.generic_jobs.borrow_mut().push_back(job),
            Job::AsyncJob(job) => self.async_jobs.borrow_mut().push_back(job),
            Job::TimeoutJob(_) | Job::IntervalJob(_) | Job::FinalizationRegistryCleanupJob(_) => {}
            // `Job` is non-exhaustive; anything new is refused the same way.
            _ => {}
        }
    }

    /// Drains every queue; the first error (only an uncatchable engine error can get here) stops the run.
    fn run_jobs(self: Rc<Self>, context: &mut Context) -> JsResult<()> {
        loop {
            let promise_job = self.promise_jobs.borrow_mut().pop_front();
            if let Some(job) = promise_job {
                job.call(context)?;
                continue;
            }
            let generic_job = self.generic_jobs.borrow_mut().pop_front();
            if let Some(job) = generic_job {
                job.call(context)?;
                continue;
            }
            let async_job = self.async_jobs.borrow_mut().pop_front();
            if let Some(job) = async_job {
                poll_once(job, context)?;
                continue;
            }
            return Ok(());
        }
    }
}

/// Polls an engine async job once. The engine's own ones (a dynamic `import()` refused by the idle module
/// loader) finish at once; one that does not is dropped, and whatever awaited it never settles, which the run
/// loop reports instead of waiting for the deadline.
fn poll_once(job: NativeAsyncJob, context: &mut Context) -> JsResult<()> {
    let cell = RefCell::new(context);
    let mut future = job.call(&cell);
    match Pin::new(&mut future).poll(&mut std::task::Context::from_waker(Waker::noop())) {
        Poll::Ready(result) => result.map(drop),
        Poll::Pending => Ok(()),
    }
}

/// Host hooks: UTC as the only time zone (no file reads), and a record of rejections nobody handled.
#[derive(Default)]
pub(super) struct Hooks {
    unhandled: RefCell<Vec<JsObject<Promise>>>,
    max_buffer_bytes: u64,
}

impl Hooks {
    /// Hooks whose `ArrayBuffer`s may not exceed `max_buffer_bytes` (the process limit would abort first
    /// anyway; this turns the common case into a catchable `RangeError`).
    pub(super) fn new(max_buffer_bytes: u64) -> Self {
        Self {
            unhandled: RefCell::default(),
            max_buffer_bytes,
        }
    }

    /// The reason of the first rejected promise that still has no handler, if any.
    pub(super) fn first_unhandled(&self) -> Option<JsValue> {
        self.unhandled.borrow().iter().find_map(|promise| {
            match JsPromise::from_object(promise.clone().upcast())
                .ok()?
                .state()
            {
                boa_engine::builtins::promise::PromiseState::Rejected(reason) => Some(reason),
                _ => None,
            }
        })
    }
}

impl HostHooks for Hooks {
    fn promise_rejection_tracker(
        &self,
        promise: &JsObject<Promise>,
        operation: OperationType,
        _context: &mut Context,
    ) {
        let mut unhandled = self.unhandled.borrow_mut();
        match operation {
            OperationType::Reject => unhandled.push(promise.clone()),
            OperationType::Handle => unhandled.retain(|p| p != promise),
        }
    }

    fn local_timezone_offset_seconds(&self, _unix_time_seconds: i64) -> i32 {
        0
    }

    fn max_buffer_size(&self, _context: &mut Context) -> u64 {
        self.max_buffer_bytes
    }
}
