//! Code mode fixtures: a real worker pool on the `toolgate` binary under test, and an in-process `RunHost` with a
//! few tools that record what the pool made them do.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate::code_mode::pool::{
    BoxFuture, FailureKind, Limits, PoolConfig, RunHost, RunOutcome, RunRequest, ToolFailure,
    ToolInfo, WorkerPool,
};

/// A pool of `size` warm workers running the binary under test; killed with `shutdown`.
pub fn pool(size: usize) -> (Arc<WorkerPool>, CancellationToken) {
    let shutdown = CancellationToken::new();
    let pool = WorkerPool::new(
        PoolConfig {
            size,
            worker_exe: super::toolgate(),
            recycle_after_runs: 200,
        },
        shutdown.clone(),
    );
    (pool, shutdown)
}

/// Short limits for tests: the wall clock is generous enough for a debug build on two busy cores.
pub fn limits(wall: Duration) -> Limits {
    Limits {
        wall,
        ..Limits::default()
    }
}

/// The host's tools: `read` and `hang` are read-only, `write` and `deny` are not.
pub fn tools() -> Vec<ToolInfo> {
    [
        ("read", true),
        ("write", false),
        ("deny", false),
        ("hang", true),
    ]
    .into_iter()
    .map(|(name, read_only)| ToolInfo {
        name: name.to_owned(),
        read_only,
    })
    .collect()
}

/// Runs `code` on `pool` against `host` with `limits`.
pub async fn run_with(
    pool: &WorkerPool,
    host: &Arc<TestHost>,
    code: &str,
    limits: Limits,
) -> RunOutcome {
    let request = RunRequest {
        code: code.to_owned(),
        tools: tools(),
        limits,
    };
    pool.run(request, host.clone(), CancellationToken::new())
        .await
}

/// Runs `code` with a 5 s wall limit and a fresh host.
pub async fn run(pool: &WorkerPool, code: &str) -> RunOutcome {
    run_with(pool, &TestHost::new(), code, limits(Duration::from_secs(5))).await
}

/// The value of a successful run; panics with the outcome's text otherwise.
pub fn value(outcome: &RunOutcome) -> Value {
    match &outcome.result {
        Ok(value) => value.clone().unwrap_or(Value::Null),
        Err(_) => panic!("the run failed: {}", outcome.text()),
    }
}

/// The failure of a run; panics when it succeeded.
pub fn failure(outcome: &RunOutcome) -> (FailureKind, String) {
    match &outcome.result {
        Ok(value) => panic!("the run succeeded with {value:?}: {}", outcome.text()),
        Err(failure) => (failure.kind, failure.message.clone()),
    }
}

/// Asserts that the pool still serves a trivial program.
pub async fn assert_pool_serves(pool: &WorkerPool) {
    let outcome = run(pool, "return 1 + 1").await;
    assert_eq!(value(&outcome), json!(2), "{}", outcome.text());
}

/// A host whose tools record their calls.
///
/// - `read({ms?, tag?})` (read-only): sleeps `ms`, returns `{"echo": args}`.
/// - `write({id, ms?})`: sleeps `ms`, returns `{"wrote": id}`.
/// - `deny()`: fails with code `DENIED`.
/// - `hang()` (read-only): waits for its cancel token, then counts the cancellation.
#[derive(Default)]
pub struct TestHost {
    in_flight: AtomicUsize,
    /// The most calls in flight at once.
    pub max_in_flight: AtomicUsize,
    /// `start <tool> <id>` / `end <tool> <id>` in the order they happened.
    pub events: Mutex<Vec<String>>,
    /// `hang` calls whose cancel token fired.
    pub cancelled: AtomicUsize,
    /// `call_finished` notifications: (n, name, ok).
    pub finished: Mutex<Vec<(u64, String, bool)>>,
}

impl TestHost {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn events(&self) -> Vec<String> {
        self.events.lock().unwrap().clone()
    }

    fn event(&self, what: String) {
        self.events.lock().unwrap().push(what);
    }
}

impl RunHost for TestHost {
    fn call_tool(
        &self,
        n: u64,
        name: String,
        arguments: Value,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<Value, ToolFailure>> {
        Box::pin(async move {
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_in_flight.fetch_max(now, Ordering::SeqCst);
            let id = arguments.get("id").cloned().unwrap_or(Value::from(n));
            self.event(format!("start {name} {id}"));
            let ms = arguments.get("ms").and_then(Value::as_u64).unwrap_or(0);
            let result = match name.as_str() {
                "read" => {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Ok(json!({ "echo": arguments }))
                }
                "write" => {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Ok(json!({ "wrote": id }))
                }
                "deny" => Err(ToolFailure {
                    code: "DENIED".to_owned(),
                    message: "writes are not allowed here".to_owned(),
                }),
                "hang" => {
                    cancel.cancelled().await;
                    self.cancelled.fetch_add(1, Ordering::SeqCst);
                    Err(ToolFailure {
                        code: "CANCELLED".to_owned(),
                        message: "cancelled".to_owned(),
                    })
                }
                other => Err(ToolFailure {
                    code: "UNKNOWN_TOOL".to_owned(),
                    message: format!("unknown tool {other:?}"),
                }),
            };
            self.event(format!("end {name} {id}"));
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            result
        })
    }

    fn search(&self, query: String, limit: Option<usize>) -> Value {
        json!({ "query": query, "limit": limit, "tools": ["read"] })
    }

    fn describe(&self, name: String) -> Option<String> {
        (name == "read").then(|| "read(args: { ms?: number }): Promise<unknown>".to_owned())
    }

    fn call_finished(&self, n: u64, name: &str, ok: bool) {
        self.finished.lock().unwrap().push((n, name.to_owned(), ok));
    }
}
