//! The raw path to a stdio upstream: `tools/call` written and answered as bytes, beside rmcp's client on the same pipes.
//!
//! rmcp's client decodes every answer into its typed enums and spawns tasks around each
//! request; for a forwarded call that is most of the gateway's cost (`BENCHMARKS.md`). Here
//! one writer task owns the child's stdin and takes whole lines from two senders: rmcp's
//! transport ([`SharedStdin`]) and [`RawLink`], which writes `tools/call` requests with ids
//! of its own (`"tg-<n>"`, strings, so they never meet rmcp's numbers). The reader
//! ([`super::size_guard::SizeGuard`], in a task of its own: [`super::pump`]) hands every
//! answer to such an id to the waiting call as the line it was ([`RawLink::divert`]);
//! everything else (lists, notifications, progress, the server's requests) goes on to rmcp
//! as before.
//!
//! The queue to the child is bounded twice: [`QUEUE`] lines, and `max_message_bytes` bytes
//! together, the line being written included (one larger line goes alone). A sender waits for
//! room; a call's wait is bounded by its deadline (the pipeline's timeout drops it). A raw
//! request whose call is gone (timed out, cancelled) before the writer reaches it is dropped
//! unwritten, so that a server that stopped reading does not run, once it reads again, the
//! calls that nobody waits for any more.

mod call;
mod head;
mod peek;
mod slot;

pub use call::RawResult;
/// For `examples/fuzz.rs`.
#[doc(hidden)]
pub use head::walk_against_serde as answer_walk_against_serde;
use head::{ForRawCall, for_raw_call};
pub use slot::{Event, Waiter};

use std::{
    io,
    pin::Pin,
    sync::{
        Arc, Mutex, Weak,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    task::{Context, Poll},
};

use tokio::{
    io::{AsyncWrite, AsyncWriteExt},
    process::ChildStdin,
    sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError, mpsc},
};
use tokio_util::sync::{CancellationToken, PollSemaphore, PollSender};

/// Lines waiting for the child's stdin (both senders together); a sender waits beyond that.
/// Their bytes are bounded too (`max_message_bytes`, see the module doc).
const QUEUE: usize = 1024;
/// Small lines queued together are written with one `write` (under load, one wake-up of the
/// child for several requests).
const COALESCE_BYTES: usize = 64 * 1024;

/// An answer to a raw request, as read: the whole line and where its `result` or `error` is.
pub struct RawAnswer {
    pub line: Vec<u8>,
    pub result: Option<(usize, usize)>,
    pub error: Option<(usize, usize)>,
    /// The result's keys, read by the walk that checked it ([`head`]).
    facts: Option<peek::Facts>,
}

/// One line for the child, holding its room in the byte budget until it is written.
struct Out {
    line: Vec<u8>,
    _room: OwnedSemaphorePermit,
    /// The raw call it is the request of: dropped unwritten if that call is gone.
    call: Option<u64>,
}

/// The byte budget's room for `line`: its length, or the whole budget for a longer line.
fn room_for(line: &[u8], budget: usize) -> u32 {
    u32::try_from(line.len().clamp(1, budget)).unwrap_or(u32::MAX)
}

/// The raw side of one stdio connection: its request ids, the calls waiting for answers and
/// the queue to the child's stdin.
pub struct RawLink {
    queue: mpsc::Sender<Out>,
    /// The byte budget of the queue (permits are bytes).
    room: Arc<Semaphore>,
    budget: usize,
    /// Where the reader leaves what comes for each waiting call.
    pending: Mutex<crate::FastMap<u64, slot::Filler>>,
    /// How many calls wait; read without the lock by the reader, which skips every line
    /// while nobody waits.
    waiting: AtomicUsize,
    next: AtomicU64,
    /// Set when the connection's reader ended: new calls fail at once.
    closed: std::sync::atomic::AtomicBool,
}

/// A call waiting for its answer; its entry goes when it does (answered, timed out, cancelled).
pub struct Waiting<'a> {
    link: &'a RawLink,
    pub id: u64,
    /// Its progress (when it asked for it) and its answer, in the order the server wrote them.
    pub events: Waiter,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.link.forget(self.id);
    }
}

impl RawLink {
    /// Takes the child's stdin: returns the link, rmcp's writer and the writer task's stop
    /// (cancelled when the connection is stopped, which closes the child's stdin). What waits
    /// for stdin holds at most `max_bytes` (`max_message_bytes`).
    pub fn new(stdin: ChildStdin, max_bytes: usize) -> (Arc<Self>, SharedStdin, CancellationToken) {
        let (queue, lines) = mpsc::channel(QUEUE);
        let stop = CancellationToken::new();
        let budget = max_bytes.clamp(1, u32::MAX as usize);
        let room = Arc::new(Semaphore::new(budget));
        let link = Arc::new(Self {
            queue: queue.clone(),
            room: room.clone(),
            budget,
            pending: Mutex::new(crate::FastMap::default()),
            waiting: AtomicUsize::new(0),
            next: AtomicU64::new(1),
            closed: Default::default(),
        });
        // Owned through `stop` (cancelled by the connection's stop and by rmcp's close) and
        // ended by the queue closing when both senders are gone.
        tokio::spawn(write_lines(
            stdin,
            lines,
            Arc::downgrade(&link),
            stop.clone(),
        ));
        let shared = SharedStdin {
            line: Vec::new(),
            lines: std::collections::VecDeque::new(),
            room: PollSemaphore::new(room),
            reserved: None,
            budget,
            queue: PollSender::new(queue),
            stop: stop.clone(),
        };
        (link, shared, stop)
    }

    /// A fresh request id, and where its answer (and its progress, if `progress`) will come.
    pub fn expect(&self, progress: bool) -> Option<Waiting<'_>> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (filler, events) = slot::slot(progress);
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if self.closed.load(Ordering::Acquire) {
            return None;
        }
        pending.insert(id, filler);
        self.waiting.store(pending.len(), Ordering::Release);
        Some(Waiting {
            link: self,
            id,
            events,
        })
    }

    fn forget(&self, id: u64) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if pending.remove(&id).is_some() {
            self.waiting.store(pending.len(), Ordering::Release);
        }
    }

    /// Queues one line (with its newline) for the child; waits while the queue is full.
    /// `call`: the raw call it is the request of (dropped unwritten once that call is gone).
    /// Cancel-safe: a line is queued whole or not at all.
    pub async fn send(&self, line: Vec<u8>, call: Option<u64>) -> Result<(), ()> {
        let wanted = room_for(&line, self.budget);
        // Room and a slot taken at once when there are (nearly always), without making the
        // futures that wait for them.
        let room = match self.room.clone().try_acquire_many_owned(wanted) {
            Ok(room) => room,
            Err(TryAcquireError::Closed) => return Err(()),
            Err(TryAcquireError::NoPermits) => self
                .room
                .clone()
                .acquire_many_owned(wanted)
                .await
                .map_err(|_| ())?,
        };
        let out = Out {
            line,
            _room: room,
            call,
        };
        match self.queue.try_send(out) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Closed(_)) => Err(()),
            Err(mpsc::error::TrySendError::Full(out)) => self.queue.send(out).await.map_err(|_| ()),
        }
    }

    /// Queues one line if there is room now, else drops it (for a `Drop` that cannot wait).
    pub fn try_send(&self, line: Vec<u8>) {
        let Ok(room) = self
            .room
            .clone()
            .try_acquire_many_owned(room_for(&line, self.budget))
        else {
            return;
        };
        let _ = self.queue.try_send(Out {
            line,
            _room: room,
            call: None,
        });
    }

    /// Whether raw call `id` still waits for its answer.
    fn is_waiting(&self, id: u64) -> bool {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&id)
    }

    /// If `line` answers a raw request or is progress for one, hands it to its call (an
    /// answer for a call that is gone is dropped) and returns `None`; otherwise gives it back
    /// for rmcp.
    pub fn divert(&self, line: Vec<u8>) -> Option<Vec<u8>> {
        if self.waiting.load(Ordering::Acquire) == 0 {
            return Some(line);
        }
        match for_raw_call(&line) {
            Some(ForRawCall::Answer {
                id,
                result,
                error,
                facts,
            }) => {
                let pending = {
                    let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
                    let entry = pending.remove(&id);
                    self.waiting.store(pending.len(), Ordering::Release);
                    entry
                };
                match pending {
                    Some(filler) => filler.answer(RawAnswer {
                        line,
                        result,
                        error,
                        facts,
                    }),
                    None => tracing::debug!(id, "an answer came for a call no longer waiting"),
                }
                None
            }
            Some(ForRawCall::Progress { id, params }) => {
                let pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
                let Some(filler) = pending.get(&id) else {
                    drop(pending);
                    return Some(line);
                };
                match filler.progress(Box::new(params)) {
                    Ok(()) => None,
                    Err(slot::Refused::NotWanted) => {
                        drop(pending);
                        Some(line)
                    }
                    Err(slot::Refused::Full) => {
                        tracing::debug!(id, "progress dropped: the client is not reading it");
                        None
                    }
                }
            }
            None => Some(line),
        }
    }

    /// The connection's reader ended: every waiting call fails now, and new ones at once.
    pub fn close(&self) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        self.closed.store(true, Ordering::Release);
        pending.clear();
        self.waiting.store(0, Ordering::Release);
    }
}

/// Whether `out` is still to be written: not the request of a raw call that is gone.
fn still_wanted(out: &Out, link: &Weak<RawLink>) -> bool {
    match (out.call, link.upgrade()) {
        (Some(id), Some(link)) => {
            let wanted = link.is_waiting(id);
            if !wanted {
                tracing::debug!(id, "a request whose call is gone was not written");
            }
            wanted
        }
        _ => true,
    }
}

/// Writes queued lines to the child's stdin until stopped or both senders are gone;
/// dropping stdin then closes it, which asks a stdio server to exit.
async fn write_lines(
    mut stdin: ChildStdin,
    mut lines: mpsc::Receiver<Out>,
    link: Weak<RawLink>,
    stop: CancellationToken,
) {
    // The lines of the batch being written keep their room until it is written.
    let mut held: Vec<Out> = Vec::new();
    // One wait for the whole loop: a new one per line registered with the token and left it
    // again on every call.
    let stopped = stop.cancelled();
    tokio::pin!(stopped);
    loop {
        let mut first = tokio::select! {
            // Queued lines first: a stopping connection still writes what was queued before
            // (a cancel sent as the drain ends its calls). The queue is bounded and no new
            // calls start once a connection stops, so it drains.
            biased;
            line = lines.recv() => match line {
                Some(line) => line,
                None => break,
            },
            // The connection is being stopped.
            () = &mut stopped => break,
        };
        if !still_wanted(&first, &link) {
            continue;
        }
        let mut batch = std::mem::take(&mut first.line);
        held.push(first);
        while batch.len() < COALESCE_BYTES {
            match lines.try_recv() {
                Ok(out) if still_wanted(&out, &link) => {
                    batch.extend_from_slice(&out.line);
                    held.push(out);
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        let written = tokio::select! {
            biased;
            written = stdin.write_all(&batch) => written,
            // A server that stopped reading holds the write; stopping must not wait for it.
            () = &mut stopped => break,
        };
        held.clear();
        if let Err(error) = written {
            tracing::debug!(%error, "could not write to a stdio server");
            break;
        }
    }
}

/// rmcp's writer: whole lines go to the shared queue.
pub struct SharedStdin {
    /// The line rmcp is writing, until its newline.
    line: Vec<u8>,
    /// Whole lines not yet queued.
    lines: std::collections::VecDeque<Vec<u8>>,
    /// The queue's byte budget, and the room taken for the first of `lines`.
    room: PollSemaphore,
    reserved: Option<OwnedSemaphorePermit>,
    budget: usize,
    queue: PollSender<Out>,
    stop: CancellationToken,
}

impl SharedStdin {
    fn poll_queue(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some(line) = self.lines.front() {
            let room = match self.reserved.take() {
                Some(room) => room,
                None => match self.room.poll_acquire_many(cx, room_for(line, self.budget)) {
                    Poll::Ready(Some(room)) => room,
                    Poll::Ready(None) => return Poll::Ready(Err(closed())),
                    Poll::Pending => return Poll::Pending,
                },
            };
            match self.queue.poll_reserve(cx) {
                Poll::Ready(Ok(())) => {
                    let Some(line) = self.lines.pop_front() else {
                        break;
                    };
                    let out = Out {
                        line,
                        _room: room,
                        call: None,
                    };
                    if self.queue.send_item(out).is_err() {
                        return Poll::Ready(Err(closed()));
                    }
                }
                Poll::Ready(Err(_)) => return Poll::Ready(Err(closed())),
                Poll::Pending => {
                    self.reserved = Some(room);
                    return Poll::Pending;
                }
            }
        }
        Poll::Ready(Ok(()))
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the server's stdin is closed")
}

impl AsyncWrite for SharedStdin {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        // rmcp writes one encoded message and flushes; lines are queued at the flush.
        let mut rest = bytes;
        while let Some(at) = rest.iter().position(|&b| b == b'\n') {
            this.line.extend_from_slice(&rest[..=at]);
            this.lines.push_back(std::mem::take(&mut this.line));
            rest = &rest[at + 1..];
        }
        this.line.extend_from_slice(rest);
        Poll::Ready(Ok(bytes.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_queue(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let flushed = this.poll_queue(cx);
        if flushed.is_pending() {
            return flushed;
        }
        // rmcp closes its client: the connection is over, and the child's stdin closes.
        this.stop.cancel();
        this.queue.close();
        Poll::Ready(Ok(()))
    }
}
