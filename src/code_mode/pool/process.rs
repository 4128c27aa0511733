//! One worker process as the gateway sees it: spawn, frames in and out without ever blocking, kill, and what its
//! death means.

use std::{
    os::unix::process::ExitStatusExt,
    path::Path,
    process::{ExitStatus, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::StreamExt;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    process::{Child, ChildStdout, Command},
    sync::mpsc,
    task::JoinHandle,
};
use tokio_util::{
    bytes::{Buf, BytesMut},
    codec::{Decoder, FramedRead},
    sync::{CancellationToken, DropGuard},
};

use crate::code_mode::wire::{self, FailureKind, FromWorker, ToWorker};

/// How much of a worker's stderr is kept for failure messages.
const STDERR_TAIL_BYTES: usize = 4096;
/// How much of that tail goes into a message the model reads.
const STDERR_IN_MESSAGE: usize = 400;
/// How long a worker that closed its stdout gets to actually exit before it is killed.
const EXIT_GRACE: Duration = Duration::from_millis(500);

/// The OS limits a worker is started with; a worker only serves runs that fit them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct WorkerSpec {
    pub memory_bytes: u64,
    pub cpu_seconds: u64,
}

/// A worker could not be started.
#[derive(Debug, thiserror::Error)]
pub(super) enum SpawnError {
    #[error("cannot start {exe}: {source}")]
    Start { exe: String, source: std::io::Error },
    #[error("the worker did not become ready: {0}")]
    NotReady(String),
}

/// What reading the next frame gave.
pub(super) enum Incoming {
    Frame(FromWorker),
    /// A frame that is too long or not a frame: the worker is broken or hostile.
    Garbage(String),
    /// End of output: the worker died (or closed stdout, which is the same to us).
    Closed,
}

/// A running worker process, owned by the pool or by the one run using it.
pub(super) struct WorkerProcess {
    pub spec: WorkerSpec,
    /// Runs served so far.
    pub runs: u32,
    /// Wall time spent in runs: an upper bound of the CPU time the worker has used against RLIMIT_CPU.
    pub busy: Duration,
    pub idle_since: Instant,
    /// The highest request id seen; ids must grow over the worker's whole life.
    pub last_request: u64,
    child: Child,
    writer: mpsc::UnboundedSender<Vec<u8>>,
    frames: FramedRead<ChildStdout, LineDecoder>,
    stderr_tail: Arc<Mutex<Vec<u8>>>,
    stderr_task: Option<JoinHandle<()>>,
    /// Stops the writer and stderr tasks when the worker is dropped.
    _tasks: DropGuard,
}

impl WorkerProcess {
    /// Starts `exe worker` with a cleared environment, contained ([`crate::child::contain`]), and waits for `ready`.
    pub async fn spawn(
        exe: &Path,
        spec: WorkerSpec,
        ready_within: Duration,
    ) -> Result<Self, SpawnError> {
        let mut command = Command::new(exe);
        command
            .arg("worker")
            .arg("--memory-bytes")
            .arg(spec.memory_bytes.to_string())
            .arg("--cpu-seconds")
            .arg(spec.cpu_seconds.to_string())
            .env_clear()
            // mimalloc (the global allocator) reserves address space 1 GiB at a time, before
            // the worker sets its RLIMIT_AS: the reserve would lift the memory cap to 1 GiB and
            // leave the stack no room to grow. Without it, every mapping counts against the cap.
            .env("MIMALLOC_ARENA_RESERVE", "0")
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Its own group, killed on drop and (Linux) with the gateway. A worker cannot fork
        // (RLIMIT_NPROC = 0, seccomp), so the leader is all there is to kill.
        crate::child::contain(&mut command);
        let mut child = command.spawn().map_err(|source| SpawnError::Start {
            exe: exe.display().to_string(),
            source,
        })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(SpawnError::NotReady("its pipes are missing".to_owned()));
        };
        let token = CancellationToken::new();
        let (writer, mut outbox) = mpsc::unbounded_channel::<Vec<u8>>();
        // Writes go through a task so that a worker that stops reading can never block a run's loop; the pipe
        // fills, this task waits, the deadline still fires.
        tokio::spawn({
            let token = token.clone();
            let mut stdin = stdin;
            async move {
                loop {
                    let line = tokio::select! {
                        () = token.cancelled() => return,
                        line = outbox.recv() => line,
                    };
                    let Some(line) = line else { return };
                    let written = tokio::select! {
                        () = token.cancelled() => return,
                        written = stdin.write_all(&line) => written,
                    };
                    if written.is_err() {
                        return;
                    }
                }
            }
        });
        let stderr_tail = Arc::new(Mutex::new(Vec::new()));
        let stderr_task = tokio::spawn(keep_tail(stderr, stderr_tail.clone(), token.clone()));
        let mut worker = Self {
            spec,
            runs: 0,
            busy: Duration::ZERO,
            idle_since: Instant::now(),
            last_request: 0,
            child,
            writer,
            frames: FramedRead::new(
                stdout,
                LineDecoder {
                    max: 4096,
                    scanned: 0,
                },
            ),
            stderr_tail,
            stderr_task: Some(stderr_task),
            _tasks: token.drop_guard(),
        };
        match tokio::time::timeout(ready_within, worker.next_frame()).await {
            Ok(Incoming::Frame(FromWorker::Ready)) => Ok(worker),
            Ok(Incoming::Frame(other)) => Err(SpawnError::NotReady(format!(
                "it sent {other:?} instead of ready"
            ))),
            Ok(Incoming::Garbage(error)) => Err(SpawnError::NotReady(error)),
            Ok(Incoming::Closed) => {
                let (_, message) = worker.exit_report().await;
                Err(SpawnError::NotReady(message))
            }
            Err(_) => Err(SpawnError::NotReady(format!(
                "no ready frame within {} ms",
                ready_within.as_millis()
            ))),
        }
    }

    /// Bounds the frames accepted from now on (per run: it depends on the run's output limit).
    pub fn set_max_frame(&mut self, max: usize) {
        self.frames.decoder_mut().max = max;
    }

    /// Queues a frame for the worker; never waits. A dead worker's frames are dropped (its EOF tells the rest).
    pub fn send(&self, frame: &ToWorker) {
        let _ = self.writer.send(wire::encode(frame));
    }

    /// The next frame from the worker. Cancel-safe: a partly read line stays buffered.
    pub async fn next_frame(&mut self) -> Incoming {
        match self.frames.next().await {
            None => Incoming::Closed,
            Some(Err(FrameError::Io)) => Incoming::Closed,
            Some(Err(FrameError::TooLong(max))) => {
                Incoming::Garbage(format!("the worker sent a frame over {max} bytes"))
            }
            Some(Ok(line)) => match serde_json::from_slice(&line) {
                Ok(frame) => Incoming::Frame(frame),
                Err(error) => Incoming::Garbage(format!("the worker sent a bad frame: {error}")),
            },
        }
    }

    /// Whether the process is still running (an idle worker can die, e.g. killed from outside).
    pub fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGKILL now; the process is reaped in the background once dropped.
    pub fn kill(mut self) {
        let _ = self.child.start_kill();
    }

    /// After the worker's output closed: how it ended, as a run failure (kind and message).
    pub async fn exit_report(&mut self) -> (FailureKind, String) {
        let status = match tokio::time::timeout(EXIT_GRACE, self.child.wait()).await {
            Ok(Ok(status)) => Some(status),
            _ => {
                let _ = self.child.start_kill();
                None
            }
        };
        if let Some(task) = self.stderr_task.take() {
            // The tail is complete once stderr reaches end of file, right after the process is gone.
            let _ = tokio::time::timeout(Duration::from_millis(200), task).await;
        }
        let tail = self
            .stderr_tail
            .lock()
            .map(|tail| String::from_utf8_lossy(&tail).into_owned())
            .unwrap_or_default();
        classify(status, &tail, self.spec)
    }
}

/// Keeps the last bytes of the worker's stderr.
async fn keep_tail(
    mut stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<Vec<u8>>>,
    token: CancellationToken,
) {
    let mut buffer = [0u8; 1024];
    loop {
        let read = tokio::select! {
            () = token.cancelled() => return,
            read = stderr.read(&mut buffer) => read,
        };
        let Ok(n @ 1..) = read else { return };
        if let Ok(mut tail) = tail.lock() {
            tail.extend_from_slice(&buffer[..n]);
            if tail.len() > STDERR_TAIL_BYTES {
                let excess = tail.len() - STDERR_TAIL_BYTES;
                tail.drain(..excess);
            }
        }
    }
}

/// What a worker's exit means for the run it was serving.
fn classify(status: Option<ExitStatus>, stderr: &str, spec: WorkerSpec) -> (FailureKind, String) {
    let Some(status) = status else {
        return (
            FailureKind::Crash,
            "the worker closed its output but did not exit; it was killed".to_owned(),
        );
    };
    let mib = spec.memory_bytes / (1 << 20);
    let (kind, message) = match status.signal() {
        Some(libc::SIGXCPU) => (
            FailureKind::Limit,
            format!(
                "CPU time limit exceeded ({} s per worker)",
                spec.cpu_seconds
            ),
        ),
        Some(libc::SIGABRT) if stderr.contains("memory allocation") => (
            FailureKind::Limit,
            format!("memory limit exceeded ({mib} MiB)"),
        ),
        Some(libc::SIGABRT) if stderr.contains("overflowed its stack") => (
            FailureKind::Limit,
            "the program nests too deeply: the engine's native stack overflowed".to_owned(),
        ),
        Some(libc::SIGSYS) => (
            FailureKind::Crash,
            "the worker made a forbidden system call".to_owned(),
        ),
        Some(signal) => (
            FailureKind::Crash,
            format!("the worker died from signal {signal}"),
        ),
        None => (
            FailureKind::Crash,
            format!(
                "the worker exited unexpectedly with status {}",
                status.code().unwrap_or(-1)
            ),
        ),
    };
    if kind == FailureKind::Crash && !stderr.trim().is_empty() {
        let trimmed = stderr.trim();
        let mut start = trimmed.len().saturating_sub(STDERR_IN_MESSAGE);
        while !trimmed.is_char_boundary(start) {
            start += 1;
        }
        return (kind, format!("{message}; stderr: {}", &trimmed[start..]));
    }
    (kind, message)
}

/// Newline-delimited frames with a length bound that may change between runs.
pub(super) struct LineDecoder {
    max: usize,
    /// How far the buffer has already been searched for a newline, so long frames are scanned once.
    scanned: usize,
}

#[derive(Debug)]
pub(super) enum FrameError {
    TooLong(usize),
    /// Reading the pipe failed; the worker is as good as dead.
    Io,
}

impl From<std::io::Error> for FrameError {
    fn from(_: std::io::Error) -> Self {
        FrameError::Io
    }
}

impl Decoder for LineDecoder {
    type Item = BytesMut;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<BytesMut>, FrameError> {
        let start = self.scanned.min(src.len());
        let newline = src[start..]
            .iter()
            .position(|&b| b == b'\n')
            .map(|i| start + i);
        self.scanned = if newline.is_some() { 0 } else { src.len() };
        match newline {
            Some(end) if end > self.max => Err(FrameError::TooLong(self.max)),
            Some(end) => {
                let mut line = src.split_to(end + 1);
                line.truncate(end);
                Ok(Some(line))
            }
            None if src.len() > self.max => Err(FrameError::TooLong(self.max)),
            None => Ok(None),
        }
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<BytesMut>, FrameError> {
        match self.decode(src)? {
            Some(line) => Ok(Some(line)),
            None => {
                // A final line without its newline is a frame cut off by death; nothing to act on.
                src.advance(src.len());
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_and_bounded() {
        let mut decoder = LineDecoder { max: 8, scanned: 0 };
        let mut buffer = BytesMut::from(&b"{\"a\":1}\n{\"b\""[..]);
        assert_eq!(
            &decoder.decode(&mut buffer).unwrap().unwrap()[..],
            b"{\"a\":1}"
        );
        assert!(decoder.decode(&mut buffer).unwrap().is_none());
        buffer.extend_from_slice(b":22222}\n");
        assert!(matches!(
            decoder.decode(&mut buffer),
            Err(FrameError::TooLong(8))
        ));
        let mut decoder = LineDecoder { max: 8, scanned: 0 };
        let mut endless = BytesMut::from(&b"0123456789"[..]);
        assert!(matches!(
            decoder.decode(&mut endless),
            Err(FrameError::TooLong(8))
        ));
    }

    #[test]
    fn deaths_are_classified() {
        let spec = WorkerSpec {
            memory_bytes: 256 << 20,
            cpu_seconds: 300,
        };
        let abort = ExitStatus::from_raw(libc::SIGABRT);
        let (kind, message) = classify(
            Some(abort),
            "memory allocation of 268435456 bytes failed\n",
            spec,
        );
        assert_eq!(kind, FailureKind::Limit);
        assert_eq!(message, "memory limit exceeded (256 MiB)");
        let (kind, _) = classify(Some(ExitStatus::from_raw(libc::SIGXCPU)), "", spec);
        assert_eq!(kind, FailureKind::Limit);
        let (kind, message) = classify(Some(ExitStatus::from_raw(libc::SIGSEGV)), "boom\n", spec);
        assert_eq!(kind, FailureKind::Crash);
        assert!(message.ends_with("stderr: boom"), "{message}");
        let (kind, message) = classify(Some(ExitStatus::from_raw(3 << 8)), "", spec);
        assert_eq!(kind, FailureKind::Crash);
        assert!(message.contains("status 3"), "{message}");
    }
}
