//! Guards that keep the pool's count of live workers right when a start or a run is abandoned half-way.

use std::sync::atomic::Ordering;

use super::{WorkerPool, process::WorkerProcess};

/// A reserved place in `live` for a worker being started; given back unless the worker arrived.
pub(super) struct Slot<'a>(pub(super) Option<&'a WorkerPool>);

impl Slot<'_> {
    pub(super) fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if let Some(pool) = self.0.take() {
            pool.forget_one();
        }
    }
}

/// A worker serving a run. Dropped without being taken back (the run's future was dropped, or the gateway
/// stopped the run), it kills the worker and frees its place.
pub(super) struct Lease<'a> {
    pub(super) pool: &'a WorkerPool,
    pub(super) worker: Option<WorkerProcess>,
}

impl Lease<'_> {
    pub(super) fn take(mut self) -> WorkerProcess {
        // Present until taken, and `take` consumes the lease.
        self.worker
            .take()
            .unwrap_or_else(|| unreachable!("a lease holds its worker until taken"))
    }
}

impl std::ops::Deref for Lease<'_> {
    type Target = WorkerProcess;
    fn deref(&self) -> &WorkerProcess {
        self.worker
            .as_ref()
            .unwrap_or_else(|| unreachable!("a lease holds its worker until taken"))
    }
}

impl std::ops::DerefMut for Lease<'_> {
    fn deref_mut(&mut self) -> &mut WorkerProcess {
        self.worker
            .as_mut()
            .unwrap_or_else(|| unreachable!("a lease holds its worker until taken"))
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(worker) = self.worker.take() {
            worker.kill();
            self.pool.counters.killed.fetch_add(1, Ordering::Relaxed);
            self.pool.forget_one();
        }
    }
}
