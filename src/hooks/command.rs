//! A command hook: one long-lived process, JSON lines both ways, answers matched by `call_id`.

use std::{
    collections::{BTreeMap, HashMap},
    process::Stdio,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
};

use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop, ProcessGroup};
use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    process::ChildStdin,
    sync::oneshot,
};

use super::HookError;

type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<Result<Value, HookError>>>>>;

/// Spawned on first use, and again after it dies.
pub struct CommandHook {
    key: String,
    program: String,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    running: tokio::sync::Mutex<Option<Running>>,
}

struct Running {
    stdin: ChildStdin,
    pending: Pending,
    alive: Arc<AtomicBool>,
    /// Its whole process group is killed when this is dropped.
    child: Box<dyn ChildWrapper>,
}

impl Drop for Running {
    /// process-wrap's `KillOnDrop` signals the group leader only: a hook run through
    /// `sh -c` would leave its own children behind.
    fn drop(&mut self) {
        if let Err(error) = self.child.start_kill() {
            tracing::debug!(%error, "hook process group already gone");
        }
    }
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
        }
    }

    fn spawn(&self) -> Result<Running, HookError> {
        let mut wrap = CommandWrap::with_new(&self.program, |cmd| {
            crate::child::prepare(cmd, &self.env);
            cmd.args(&self.args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit());
        });
        wrap.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
        let mut child = wrap
            .spawn()
            .map_err(|e| HookError::Process(format!("could not run {:?}: {e}", self.program)))?;
        let (Some(stdin), Some(stdout)) = (child.stdin().take(), child.stdout().take()) else {
            return Err(HookError::Process("no stdio pipes".into()));
        };
        let pending: Pending = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        let key = self.key.clone();
        let (reader_pending, reader_alive) = (pending.clone(), alive.clone());
        // Owned by the process: ends at its EOF, which its kill (on drop) guarantees.
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
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
                        tracing::warn!(hook = %key, "hook wrote a line that answers no pending call: {line:.120}")
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
        })
    }

    /// Writes `request` and waits for the line answering `call_id`.
    pub async fn ask(&self, call_id: &str, request: &Value) -> Result<Value, HookError> {
        let (answer, waiting) = oneshot::channel();
        let pending = {
            let mut running = self.running.lock().await;
            if !running
                .as_ref()
                .is_some_and(|r| r.alive.load(Ordering::SeqCst))
            {
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
