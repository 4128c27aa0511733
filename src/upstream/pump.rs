//! A stdio server's stdout read by a task of its own, so that rmcp's client loop wakes only for the bytes it is to read.
//!
//! The size guard hands each answer to a raw call to its caller as it reads it
//! ([`super::raw`]), and under load that is nearly every line. Read inside rmcp's transport,
//! every read went through rmcp's service loop: a `select!` over its channels and its token,
//! in a span, for a read that left rmcp nothing. Here a task reads (and so diverts), and rmcp
//! reads from a channel what is left.
//!
//! The task is owned by the [`Pumped`] reader given to rmcp: dropping it (rmcp's transport
//! closed, the connection gone) aborts the task, which drops the guard and so ends the raw
//! calls still waiting, as dropping the guard itself did. It also ends at the end of stdout.

use std::{
    io,
    pin::Pin,
    task::{Context, Poll},
};

use tokio::{
    io::{AsyncRead, ReadBuf},
    sync::mpsc,
};
use tokio_util::task::AbortOnDropHandle;

use super::size_guard::SizeGuard;

/// Chunks read and not yet taken by rmcp. One: the guard holds the next meanwhile, so that
/// a server writing faster than rmcp reads is held back as before, by its pipe.
const WAITING_CHUNKS: usize = 1;

/// What rmcp reads: the bytes the guard left, in order, then the end of stdout.
pub struct Pumped {
    chunks: mpsc::Receiver<io::Result<Vec<u8>>>,
    chunk: Vec<u8>,
    at: usize,
    _pump: AbortOnDropHandle<()>,
}

impl Pumped {
    /// Starts reading `guard` in a task (on the current runtime).
    pub fn spawn<R>(mut guard: SizeGuard<R>) -> Self
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let (sender, chunks) = mpsc::channel(WAITING_CHUNKS);
        let pump = tokio::spawn(async move {
            loop {
                let read = match guard.next_ready().await {
                    Ok(Some(bytes)) => Ok(bytes),
                    Ok(None) => break,
                    Err(error) => Err(error),
                };
                let failed = read.is_err();
                // rmcp stopped reading (the send fails), or the read failed: either way
                // nothing more is read.
                if sender.send(read).await.is_err() || failed {
                    break;
                }
            }
        });
        Self {
            chunks,
            chunk: Vec::new(),
            at: 0,
            _pump: AbortOnDropHandle::new(pump),
        }
    }
}

impl AsyncRead for Pumped {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.at == this.chunk.len() {
            match this.chunks.poll_recv(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(chunk))) => {
                    this.chunk = chunk;
                    this.at = 0;
                }
                Poll::Ready(Some(Err(error))) => return Poll::Ready(Err(error)),
                // The end of stdout (or of the task): read as the end of the stream.
                Poll::Ready(None) => return Poll::Ready(Ok(())),
            }
        }
        let n = out.remaining().min(this.chunk.len() - this.at);
        out.put_slice(&this.chunk[this.at..this.at + n]);
        this.at += n;
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// What rmcp reads through the pump is what it read from the guard itself, over lines
    /// written in pieces, an over-limit line and a last line without its newline.
    #[tokio::test]
    async fn reads_what_the_guard_reads() {
        let input: Vec<u8> = [
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n".as_slice(),
            b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n",
            b"{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"text\":\"",
            &[b'x'; 300],
            b"\"}}\n",
            b"{\"jsonrpc\":\"2.0\",\"id\":3}",
        ]
        .concat();
        let mut direct = Vec::new();
        let mut guard = SizeGuard::new(input.as_slice(), 200);
        while let Some(ready) = guard.next_ready().await.unwrap() {
            direct.extend_from_slice(&ready);
        }
        // The same bytes through a pipe, written in small pieces with pauses.
        let (mut write, read) = tokio::io::duplex(64);
        let writer = tokio::spawn({
            let input = input.clone();
            async move {
                for piece in input.chunks(7) {
                    write.write_all(piece).await.unwrap();
                    tokio::task::yield_now().await;
                }
            }
        });
        let mut pumped = Vec::new();
        Pumped::spawn(SizeGuard::new(read, 200))
            .read_to_end(&mut pumped)
            .await
            .unwrap();
        writer.await.unwrap();
        assert_eq!(
            String::from_utf8(pumped).unwrap(),
            String::from_utf8(direct.clone()).unwrap()
        );
        let direct = String::from_utf8(direct).unwrap();
        assert!(direct.contains("over max_message_bytes"), "{direct}");
        assert!(
            direct.ends_with("{\"jsonrpc\":\"2.0\",\"id\":3}"),
            "{direct}"
        );
    }

    /// Dropping the reader ends the task, which drops the guard: its stream is dropped too,
    /// though the writer never closes it.
    #[tokio::test]
    async fn dropping_the_reader_ends_the_task() {
        let (mut write, read) = tokio::io::duplex(64);
        let pumped = Pumped::spawn(SizeGuard::new(read, 200));
        drop(pumped);
        // The read half is dropped once the aborted task is: writing then fails.
        let mut failed = false;
        for _ in 0..100 {
            if write.write_all(b"{}\n").await.is_err() {
                failed = true;
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(failed, "the pump still held the stream");
    }
}
