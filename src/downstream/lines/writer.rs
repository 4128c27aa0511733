//! The client's side of the stdio stream: whole lines, in order, the answers of one upstream read in at most two writes.

use std::{
    future::Future,
    io,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use tokio::{
    io::{AsyncWrite, AsyncWriteExt},
    sync::Mutex,
};

pub(super) type Reply = Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;

/// Writes whole lines to the client, in turn with rmcp's messages.
pub trait WriteLine: Send + Sync {
    fn write_line(&self, line: Vec<u8>) -> Reply;
}

/// The client's side of the stream: lines go out whole and in the order they were given.
///
/// A line given while no writer is at work is written at once, by its caller. The writer
/// then takes one turn at the back of the run queue ([`RunQueueTurn`]) before it looks for
/// more: lines given meanwhile are queued, and go out together in its next `write`.
///
/// Under load the upstream's reader completes several calls from one read, and their tasks
/// are woken together. Each used to write its own answer the moment it ran (16 calls in
/// flight: 8 writes to the client per read from the upstream). Now the first answer goes
/// out at once and the others in one more write. All of them at the end of the turn instead
/// cost throughput (`BENCHMARKS.md`): the client, on the other core, waited for the whole
/// batch, and the three processes fell into lock-step.
pub struct LineWriter<W> {
    queue: std::sync::Mutex<Queued>,
    out: Mutex<Option<W>>,
}

#[derive(Default)]
struct Queued {
    bytes: Vec<u8>,
    /// A writer is writing and will take what is queued before it stops.
    writing: bool,
}

/// Clears `writing` if the writer stops without finishing (its future dropped), so that the
/// next line starts a writer again.
struct Writing<'a>(&'a std::sync::Mutex<Queued>);

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).writing = false;
    }
}

/// One turn at the back of the run queue: pending once, after waking itself, so the tasks
/// already woken run first. Not `tokio::task::yield_now`, which on a current-thread runtime
/// resumes only after the scheduler polled the I/O driver: one more `epoll_wait` per answer
/// when calls come one at a time. A lone call's turn is a second poll of its task.
#[derive(Default)]
struct RunQueueTurn(bool);

impl Future for RunQueueTurn {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl<W: AsyncWrite + Send + Unpin + 'static> LineWriter<W> {
    pub(super) fn new(out: W) -> Self {
        Self {
            queue: std::sync::Mutex::new(Queued::default()),
            out: Mutex::new(Some(out)),
        }
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queued> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes what is queued until nothing is; the caller set `writing`.
    async fn write_queued(&self) -> io::Result<()> {
        let writing = Writing(&self.queue);
        let mut out = self.out.lock().await;
        loop {
            let batch = {
                let mut queued = self.queue();
                if queued.bytes.is_empty() {
                    // Under the lock: a line queued after this starts a writer of its own.
                    queued.writing = false;
                    std::mem::forget(writing);
                    return Ok(());
                }
                std::mem::take(&mut queued.bytes)
            };
            let Some(out) = out.as_mut() else {
                return Err(io::Error::new(
                    io::ErrorKind::NotConnected,
                    "the transport is closed",
                ));
            };
            out.write_all(&batch).await?;
            out.flush().await?;
            RunQueueTurn::default().await;
        }
    }

    /// Closes the stream once what is queued is written.
    pub(super) async fn close(&self) {
        drop(self.out.lock().await.take());
    }
}

impl<W: AsyncWrite + Send + Unpin + 'static> WriteLine for Arc<LineWriter<W>> {
    fn write_line(&self, line: Vec<u8>) -> Reply {
        {
            let mut queued = self.queue();
            if queued.bytes.is_empty() {
                queued.bytes = line;
            } else {
                queued.bytes.extend_from_slice(&line);
            }
            if queued.writing {
                // The writer at work takes it with its next write.
                return Box::pin(std::future::ready(Ok(())));
            }
            queued.writing = true;
        }
        let writer = self.clone();
        Box::pin(async move { writer.write_queued().await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream that keeps each `write` it is given apart.
    #[derive(Clone, Default)]
    struct Writes(Arc<std::sync::Mutex<Vec<Vec<u8>>>>);

    impl AsyncWrite for Writes {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bytes: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.0.lock().unwrap().push(bytes.to_vec());
            Poll::Ready(Ok(bytes.len()))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    impl Writes {
        fn taken(&self) -> Vec<String> {
            let writes = std::mem::take(&mut *self.0.lock().unwrap());
            writes
                .into_iter()
                .map(|w| String::from_utf8(w).unwrap())
                .collect()
        }
    }

    /// Answers woken together (as one upstream read wakes them): the first goes out at
    /// once, the rest in one more write, all in order; a lone line later is written alone.
    #[tokio::test(flavor = "current_thread")]
    async fn answers_woken_together_go_out_in_two_writes_in_order() {
        let writes = Writes::default();
        let writer = Arc::new(LineWriter::new(writes.clone()));
        let tasks: Vec<_> = (0..5)
            .map(|i| {
                let writer = writer.clone();
                tokio::spawn(async move { writer.write_line(format!("{i}\n").into_bytes()).await })
            })
            .collect();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        assert_eq!(writes.taken(), ["0\n", "1\n2\n3\n4\n"]);

        writer.write_line(b"5\n".to_vec()).await.unwrap();
        assert_eq!(writes.taken(), ["5\n"]);
    }

    /// A writer dropped during its turn (its caller gave up) leaves no line behind: the
    /// next line starts a writer that takes what was queued.
    #[tokio::test(flavor = "current_thread")]
    async fn a_writer_dropped_in_its_turn_leaves_nothing_behind() {
        let writes = Writes::default();
        let writer = Arc::new(LineWriter::new(writes.clone()));
        let mut first = writer.write_line(b"a\n".to_vec());
        let waker = futures::task::noop_waker();
        assert!(
            first
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
        // Queued behind the writer at work, which is then dropped before it comes back.
        writer.write_line(b"b\n".to_vec()).await.unwrap();
        drop(first);
        writer.write_line(b"c\n".to_vec()).await.unwrap();
        assert_eq!(writes.taken(), ["a\n", "b\nc\n"]);
    }
}
