//! A command hook: one long-lived process, JSON lines both ways, answers matched by `call_id`.
//!
//! The process leads its own process group ([`crate::child::spawn_group`]), and the whole
//! group ends on every way out: [`CommandHook::shutdown`] when the gateway stops (stdin
//! closed, then SIGTERM, then SIGKILL), a restart after it died (the old group is killed as
//! its handle drops), and any other drop. So `sh -c "helper & exec hook"` leaves no `helper`.

use std::{
    collections::{BTreeMap, HashMap},
    process::Stdio,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
};

use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    process::ChildStdin,
    sync::oneshot,
};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::HookError;
use crate::child::ChildGroup;

type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<Result<Value, HookError>>>>>;

/// Spawned on first use, and again after it dies.
pub struct CommandHook {
    key: String,
    program: String,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    running: tokio::sync::Mutex<Option<Running>>,
    /// Set by [`CommandHook::shutdown`]: the hook is not started again.
    closed: AtomicBool,
}

struct Running {
    stdin: ChildStdin,
    pending: Pending,
    alive: Arc<AtomicBool>,
    /// Dropping it kills the whole process group.
    child: ChildGroup,
    /// Ends the stdout reader when the process is dropped, even if a grandchild still holds
    /// the pipe open.
    _reader: DropGuard,
}

impl CommandHook {
    pub fn new(
        key: String,
        program: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
    ) -> Self {
        Self {
            key,
            program,
            args,
            env,
            running: tokio::sync::Mutex::new(None),
            closed: AtomicBool::new(false),
        }
    }

    fn spawn(&self) -> Result<Running, HookError> {
        let mut child = crate::child::spawn_group(&self.program, |cmd| {
            crate::child::set_env(cmd, &self.env);
            cmd.args(&self.args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit());
        })
        .map_err(|e| HookError::Process(format!("could not run {:?}: {e}", self.program)))?;
        let (Some(stdin), Some(stdout)) = (child.take_stdin(), child.take_stdout()) else {
            return Err(HookError::Process("no stdio pipes".into()));
        };
        let pending: Pending = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        let key = self.key.clone();
        let (reader_pending, reader_alive) = (pending.clone(), alive.clone());
        let stop_reading = CancellationToken::new();
        let stopped = stop_reading.clone();
        // Owned by `Running` (its drop guard stops it); otherwise ends at the hook's EOF.
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            loop {
                let line = tokio::select! {
                    () = stopped.cancelled() => break,
                    line = lines.next_line() => match line {
                        Ok(Some(line)) => line,
                        _ => break,
                    },
                };
                let answer: Option<Value> = serde_json::from_str(&line).ok();
                let call_id = answer
                    .as_ref()
                    .and_then(|a| a.get("call_id"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let waiter = call_id.and_then(|id| reader_pending.lock().ok()?.remove(&id));
                match (waiter, answer) {
                    (Some(waiter), Some(answer)) => {
                        let _ = waiter.send(Ok(answer));
                    }
                    _ => {
                        tracing::warn!(hook = %key, "hook wrote a line that answers no pending call (not JSON, an unknown call_id, or a call that timed out or was cancelled): {line:.120}")
                    }
                }
            }
            reader_alive.store(false, Ordering::SeqCst);
            // Whoever still waits learns now rather than at their timeout.
            if let Ok(mut pending) = reader_pending.lock() {
                for (_, waiter) in pending.drain() {
                    let _ = waiter.send(Err(HookError::Process("exited before answering".into())));
                }
            }
        });
        Ok(Running {
            stdin,
            pending,
            alive,
            child,
            _reader: stop_reading.drop_guard(),
        })
    }

    /// Stops the hook for good: closes its stdin (the way it is asked to exit), then SIGTERMs
    /// and at last SIGKILLs its process group ([`ChildGroup::stop`]). Later calls fail.
    pub async fn shutdown(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let Some(running) = self.running.lock().await.take() else {
            return;
        };
        let Running {
            stdin, mut child, ..
        } = running;
        drop(stdin);
        child.stop().await;
    }

    /// Writes `request` and waits for the line answering `call_id`.
    pub async fn ask(&self, call_id: &str, request: &Value) -> Result<Value, HookError> {
        let (answer, waiting) = oneshot::channel();
        let pending = {
            let mut running = self.running.lock().await;
            if self.closed.load(Ordering::SeqCst) {
                return Err(HookError::Process("the gateway is shutting down".into()));
            }
            // Its stdout's EOF tells a death, unless a grandchild holds the pipe open: the
            // exit of the process itself counts too.
            if !running.as_mut().is_some_and(|r| {
                r.alive.load(Ordering::SeqCst) && matches!(r.child.try_wait(), Ok(None))
            }) {
                // Replacing a dead process drops it, which kills what is left of its group.
                *running = Some(self.spawn()?);
            }
            let Some(process) = running.as_mut() else {
                return Err(HookError::Process("not running".into()));
            };
            if let Ok(mut pending) = process.pending.lock() {
                pending.insert(call_id.to_owned(), answer);
            }
            let mut line = request.to_string();
            line.push('\n');
            let written = async {
                process.stdin.write_all(line.as_bytes()).await?;
                process.stdin.flush().await
            }
            .await;
            if let Err(error) = written {
                process.alive.store(false, Ordering::SeqCst);
                return Err(HookError::Process(format!(
                    "could not write to it: {error}"
                )));
            }
            process.pending.clone()
        };
        // If this wait is abandoned (timeout), forget the call so a late answer is dropped.
        let _forget = Forget { pending, call_id };
        waiting
            .await
            .unwrap_or_else(|_| Err(HookError::Process("exited before answering".into())))
    }
}

struct Forget<'a> {
    pending: Pending,
    call_id: &'a str,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.remove(self.call_id);
        }
    }
}
