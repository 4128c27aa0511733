//! The warm pool of `toolgate worker` processes and the one entry point for running a program: [`WorkerPool::run`].
//!
//! The gateway side is the authority: it owns the deadline (SIGKILL at `wall`), counts tool calls and output,
//! schedules the program's tool calls, and treats anything unexpected from a worker as a crash. A worker that
//! is killed, dies, or is recycled is always replaced in the background, so the pool never shrinks; a run that
//! finds no idle worker starts one (up to a bound) instead of queueing behind a busy one.

mod lease;
mod outcome;
mod process;
mod run;

use std::{
    path::PathBuf,
    sync::{
        Arc, Mutex, MutexGuard, Weak,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use serde_json::Value;
use tokio::{sync::Notify, time::Instant};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

pub use crate::code_mode::wire::{FailureKind, ToolFailure};
use crate::code_mode::worker::{DEFAULT_CPU_SECONDS, DEFAULT_MEMORY_BYTES};
use lease::{Lease, Slot};
pub use outcome::{RunFailure, RunOutcome};
use process::{WorkerProcess, WorkerSpec};

/// The future a [`RunHost`] returns for a tool call.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Workers beyond `size` that may be alive at once (busy or idle); runs beyond that wait for a free worker,
/// bounded by their deadline.
const MAX_EXTRA_WORKERS: usize = 16;
/// An extra idle worker (beyond `size`) is stopped after this long without work.
const IDLE_TRIM_AFTER: Duration = Duration::from_secs(30);
/// How long a starting worker may take to say `ready` (debug builds on a busy machine are slow).
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// CPU seconds kept in reserve beyond a run's wall limit when choosing a worker (RLIMIT_CPU is per process).
const CPU_MARGIN: Duration = Duration::from_secs(5);
/// How often the background task looks for idle workers to trim.
const MAINTENANCE_EVERY: Duration = Duration::from_secs(5);

/// The limits of one run.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Wall-clock time from the call to the result; the worker is SIGKILLed when it passes.
    pub wall: Duration,
    /// Tool calls per run; one more ends the run with `limit`.
    pub max_tool_calls: u32,
    /// Captured logs plus the returned value, in bytes.
    pub max_output_bytes: usize,
    /// The worker's address-space limit (RLIMIT_AS); workers are started per distinct value.
    pub memory_bytes: u64,
    /// Loop iterations per run, all loops together (the inserted tick counts them; Boa's own
    /// per-loop limit, a little higher, is the backstop).
    pub loop_iterations: u64,
    /// How deeply calls may nest, checked as each function starts (Boa's own limit, a little
    /// higher, is the backstop).
    pub recursion_depth: usize,
    /// Read-only tool calls that may be in flight at once.
    pub max_parallel: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            wall: Duration::from_secs(30),
            max_tool_calls: 100,
            max_output_bytes: 1 << 20,
            memory_bytes: DEFAULT_MEMORY_BYTES,
            loop_iterations: 10_000_000,
            recursion_depth: 512,
            max_parallel: 10,
        }
    }
}

/// How the pool runs its workers.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// Workers kept alive (idle or busy) at all times.
    pub size: usize,
    /// The `toolgate` binary to start as `worker`.
    pub worker_exe: PathBuf,
    /// A worker is replaced after this many runs: bounds heap growth and RLIMIT_CPU accumulation.
    pub recycle_after_runs: u32,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            size: 2,
            worker_exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("toolgate")),
            recycle_after_runs: 200,
        }
    }
}

/// A tool the program may call, by its exposed name.
#[derive(Debug, Clone)]
pub struct ToolInfo {
    pub name: String,
    /// `readOnlyHint`: calls may overlap with other read-only calls.
    pub read_only: bool,
}

/// One program to run.
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub code: String,
    pub tools: Vec<ToolInfo>,
    pub limits: Limits,
}

/// What a run may do outside the worker. Implemented by the lead on top of the pipeline.
pub trait RunHost: Send + Sync {
    /// One tool call from the program; `n` counts from 1 within the run (the lead uses it for sub-call ids
    /// `<call_id>:code:<n>`). Cancel fires when the run ends before the call does; the future is then polled
    /// for a while longer in the background so that the cancellation can reach the upstream.
    fn call_tool(
        &self,
        n: u64,
        name: String,
        arguments: Value,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<Value, ToolFailure>>;
    fn search(&self, query: String, limit: Option<usize>) -> Value;
    fn describe(&self, name: String) -> Option<String>;
    /// A tool call finished (for progress notifications). Default: nothing.
    fn call_finished(&self, _n: u64, _name: &str, _ok: bool) {}
}

/// Counters and gauges of the pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Workers started (warm and on demand).
    pub spawned: u64,
    /// Workers the pool killed mid-run (deadline, limit, cancel, protocol violation).
    pub killed: u64,
    /// Workers that died on their own mid-run (limits enforced by the OS, crashes) or while idle.
    pub crashed: u64,
    /// Workers retired after `recycle_after_runs` runs, CPU budget, or idleness.
    pub recycled: u64,
    /// Runs started.
    pub runs: u64,
    /// Workers alive now (idle, busy, starting).
    pub live: usize,
    /// Workers idle now.
    pub idle: usize,
}

#[derive(Default)]
struct Counters {
    spawned: AtomicU64,
    killed: AtomicU64,
    crashed: AtomicU64,
    recycled: AtomicU64,
    runs: AtomicU64,
}

struct PoolState {
    idle: Vec<WorkerProcess>,
    /// Workers alive or being started, idle or busy.
    live: usize,
    /// The memory limit of the latest run: warm workers are started with it.
    warm_memory: u64,
}

/// Warm `toolgate worker` processes and the runs on them.
pub struct WorkerPool {
    config: PoolConfig,
    shutdown: CancellationToken,
    state: Mutex<PoolState>,
    /// Wakes the background task: a worker is gone and must be replaced.
    replenish: Arc<Notify>,
    /// Wakes runs waiting for a worker: one became idle, or a slot to start one freed up.
    available: Notify,
    tasks: TaskTracker,
    counters: Counters,
}

impl WorkerPool {
    /// Starts `size` warm workers in the background; `shutdown` kills them all. Call inside a Tokio runtime.
    pub fn new(config: PoolConfig, shutdown: CancellationToken) -> Arc<Self> {
        let pool = Arc::new(Self {
            config,
            shutdown: shutdown.clone(),
            state: Mutex::new(PoolState {
                idle: Vec::new(),
                live: 0,
                warm_memory: DEFAULT_MEMORY_BYTES,
            }),
            replenish: Arc::new(Notify::new()),
            available: Notify::new(),
            tasks: TaskTracker::new(),
            counters: Counters::default(),
        });
        let replenish = pool.replenish.clone();
        pool.tasks
            .spawn(maintain(Arc::downgrade(&pool), replenish, shutdown));
        pool
    }

    /// Runs one program. Never panics; every failure is a [`RunOutcome`]. `cancel` = the client cancelled
    /// `run_code`: the worker is killed at once and in-flight sub-calls are cancelled (reported as `timeout`,
    /// "the run was cancelled").
    pub async fn run(
        &self,
        request: RunRequest,
        host: Arc<dyn RunHost>,
        cancel: CancellationToken,
    ) -> RunOutcome {
        self.counters.runs.fetch_add(1, Ordering::Relaxed);
        let deadline = deadline_after(request.limits.wall);
        let mut worker = tokio::select! {
            () = cancel.cancelled() => {
                return RunOutcome::failed(FailureKind::Timeout, "the run was cancelled".to_owned());
            }
            worker = self.acquire(&request.limits, deadline) => match worker {
                Ok(worker) => Lease { pool: self, worker: Some(worker) },
                Err(failure) => return RunOutcome::failed(failure.kind, failure.message),
            },
        };
        let started = Instant::now();
        let driven = run::drive(
            &mut worker,
            run::Context {
                request: &request,
                host: &host,
                cancel: &cancel,
                shutdown: &self.shutdown,
                deadline,
                tasks: &self.tasks,
            },
        )
        .await;
        let result = match driven.end {
            run::RunEnd::Done(result) => {
                let mut worker = worker.take();
                worker.busy += started.elapsed();
                self.release(worker);
                result
            }
            run::RunEnd::Stopped(failure) => {
                // Dropping the lease kills the worker.
                drop(worker);
                Err(failure)
            }
            run::RunEnd::Died => {
                let (kind, message) = worker.exit_report().await;
                worker.take().kill();
                self.counters.crashed.fetch_add(1, Ordering::Relaxed);
                self.forget_one();
                Err(RunFailure { kind, message })
            }
        };
        RunOutcome {
            logs: driven.logs,
            result,
            tool_calls: driven.tool_calls,
        }
    }

    pub fn stats(&self) -> PoolStats {
        let (live, idle) = {
            let state = self.lock();
            (state.live, state.idle.len())
        };
        PoolStats {
            spawned: self.counters.spawned.load(Ordering::Relaxed),
            killed: self.counters.killed.load(Ordering::Relaxed),
            crashed: self.counters.crashed.load(Ordering::Relaxed),
            recycled: self.counters.recycled.load(Ordering::Relaxed),
            runs: self.counters.runs.load(Ordering::Relaxed),
            live,
            idle,
        }
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        // The state stays consistent under every early exit, so a poisoned lock is still usable.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn max_live(&self) -> usize {
        self.config.size + MAX_EXTRA_WORKERS
    }

    /// A worker that fits the run: an idle one, else a new one, else the next to become free, all by `deadline`.
    async fn acquire(
        &self,
        limits: &Limits,
        deadline: Instant,
    ) -> Result<WorkerProcess, RunFailure> {
        let cpu_needed = limits.wall.saturating_add(CPU_MARGIN);
        loop {
            let available = self.available.notified();
            tokio::pin!(available);
            available.as_mut().enable();
            let start_one = {
                let mut state = self.lock();
                state.warm_memory = limits.memory_bytes;
                if let Some(worker) = self.take_idle(&mut state, limits.memory_bytes, cpu_needed) {
                    return Ok(worker);
                }
                if state.live < self.max_live() {
                    state.live += 1;
                    true
                } else if let Some(position) = state
                    .idle
                    .iter()
                    .position(|w| w.spec.memory_bytes != limits.memory_bytes)
                {
                    // Full, but an idle worker with another memory limit can make room.
                    state.idle.swap_remove(position).kill();
                    self.counters.recycled.fetch_add(1, Ordering::Relaxed);
                    true
                } else {
                    false
                }
            };
            if start_one {
                // Frees the slot if the start fails or this future is dropped (the run was cancelled).
                let slot = Slot(Some(self));
                let spec = WorkerSpec {
                    memory_bytes: limits.memory_bytes,
                    cpu_seconds: cpu_budget(limits.wall),
                };
                let spawned = tokio::time::timeout_at(
                    deadline,
                    WorkerProcess::spawn(&self.config.worker_exe, spec, READY_TIMEOUT),
                )
                .await;
                return match spawned {
                    Ok(Ok(worker)) => {
                        slot.keep();
                        self.counters.spawned.fetch_add(1, Ordering::Relaxed);
                        Ok(worker)
                    }
                    Ok(Err(error)) => Err(RunFailure {
                        kind: FailureKind::Crash,
                        message: format!("cannot start a code worker: {error}"),
                    }),
                    Err(_) => Err(timeout_waiting(limits.wall)),
                };
            }
            tokio::select! {
                () = &mut available => {}
                () = tokio::time::sleep_until(deadline) => return Err(timeout_waiting(limits.wall)),
            }
        }
    }

    /// Takes the most recently used idle worker that fits (warm caches; measured faster than taking the one
    /// idle longest, even though a worker collects its garbage right after a run); dead or spent ones met on
    /// the way are dropped.
    fn take_idle(
        &self,
        state: &mut PoolState,
        memory_bytes: u64,
        cpu_needed: Duration,
    ) -> Option<WorkerProcess> {
        while let Some(position) = state
            .idle
            .iter()
            .rposition(|w| w.spec.memory_bytes == memory_bytes)
        {
            let mut worker = state.idle.remove(position);
            let cpu_left = Duration::from_secs(worker.spec.cpu_seconds).saturating_sub(worker.busy);
            if worker.is_alive() && cpu_left >= cpu_needed {
                self.replenish.notify_one();
                return Some(worker);
            }
            let counter = if worker.is_alive() {
                &self.counters.recycled
            } else {
                &self.counters.crashed
            };
            counter.fetch_add(1, Ordering::Relaxed);
            worker.kill();
            state.live = state.live.saturating_sub(1);
            self.replenish.notify_one();
        }
        None
    }

    /// A worker finished a run normally: back to idle, or retired when it has served enough.
    fn release(&self, mut worker: WorkerProcess) {
        worker.runs += 1;
        if worker.runs >= self.config.recycle_after_runs || self.shutdown.is_cancelled() {
            worker.kill();
            self.counters.recycled.fetch_add(1, Ordering::Relaxed);
            self.forget_one();
            return;
        }
        worker.idle_since = std::time::Instant::now();
        self.lock().idle.push(worker);
        self.available.notify_waiters();
    }

    /// A worker is gone: free its slot, wake a waiting run, and have it replaced.
    fn forget_one(&self) {
        {
            let mut state = self.lock();
            state.live = state.live.saturating_sub(1);
        }
        self.available.notify_waiters();
        self.replenish.notify_one();
    }

    /// Starts workers until `size` are alive. Returns false when a start failed (the caller backs off).
    async fn top_up(&self) -> bool {
        loop {
            let memory_bytes = {
                let mut state = self.lock();
                if state.live >= self.config.size || self.shutdown.is_cancelled() {
                    return true;
                }
                state.live += 1;
                state.warm_memory
            };
            let spec = WorkerSpec {
                memory_bytes,
                cpu_seconds: DEFAULT_CPU_SECONDS,
            };
            let spawned = tokio::select! {
                () = self.shutdown.cancelled() => None,
                spawned = WorkerProcess::spawn(&self.config.worker_exe, spec, READY_TIMEOUT) => Some(spawned),
            };
            match spawned {
                Some(Ok(worker)) => {
                    self.counters.spawned.fetch_add(1, Ordering::Relaxed);
                    self.lock().idle.push(worker);
                    self.available.notify_waiters();
                }
                Some(Err(error)) => {
                    tracing::warn!(%error, "cannot start a code worker");
                    self.forget_one();
                    return false;
                }
                None => {
                    self.forget_one();
                    return true;
                }
            }
        }
    }

    /// Stops idle workers that are dead, of a memory limit no longer in use, or extra (beyond `size`) and idle
    /// for long.
    fn trim(&self) {
        let mut state = self.lock();
        let warm_memory = state.warm_memory;
        let mut keep = Vec::with_capacity(state.idle.len());
        let mut stopped = 0;
        let mut live = state.live;
        for mut worker in std::mem::take(&mut state.idle) {
            let alive = worker.is_alive();
            // A worker for a memory limit no longer asked for goes even below `size`: top-up replaces it.
            let extra = worker.spec.memory_bytes != warm_memory
                || (live > self.config.size && worker.idle_since.elapsed() >= IDLE_TRIM_AFTER);
            if alive && !extra {
                keep.push(worker);
                continue;
            }
            let counter = if alive {
                &self.counters.recycled
            } else {
                &self.counters.crashed
            };
            counter.fetch_add(1, Ordering::Relaxed);
            worker.kill();
            live = live.saturating_sub(1);
            stopped += 1;
        }
        state.idle = keep;
        state.live = live;
        if stopped > 0 {
            self.replenish.notify_one();
        }
    }

    fn shut_down(&self) {
        let idle = std::mem::take(&mut self.lock().idle);
        let count = idle.len();
        for worker in idle {
            worker.kill();
        }
        let mut state = self.lock();
        state.live = state.live.saturating_sub(count);
    }
}

/// RLIMIT_CPU of a worker started for a run with this wall limit: room for many runs, and at least one.
fn cpu_budget(wall: Duration) -> u64 {
    DEFAULT_CPU_SECONDS.max(wall.as_secs().saturating_add(CPU_MARGIN.as_secs() * 2))
}

/// `now + wall`, or a year from now for a wall too large to add.
fn deadline_after(wall: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(wall)
        .unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600))
}

fn timeout_waiting(wall: Duration) -> RunFailure {
    RunFailure {
        kind: FailureKind::Timeout,
        message: format!(
            "no code worker became available within the {} ms limit",
            wall.as_millis()
        ),
    }
}

/// The pool's background task: keeps `size` workers alive, trims idle extras, kills everything at shutdown.
async fn maintain(pool: Weak<WorkerPool>, replenish: Arc<Notify>, shutdown: CancellationToken) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let healthy = match pool.upgrade() {
            Some(pool) => {
                pool.trim();
                pool.top_up().await
            }
            None => return,
        };
        let pause = if healthy {
            backoff = Duration::from_millis(100);
            MAINTENANCE_EVERY
        } else {
            backoff = (backoff * 2).min(Duration::from_secs(30));
            backoff
        };
        tokio::select! {
            () = shutdown.cancelled() => {
                if let Some(pool) = pool.upgrade() {
                    pool.shut_down();
                }
                return;
            }
            () = replenish.notified(), if healthy => {}
            () = tokio::time::sleep(pause) => {}
        }
    }
}
