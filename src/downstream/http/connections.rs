//! Accepting HTTP/1.1 connections within limits: a connection cap below the open-file limit,
//! a header-read timeout (slowloris), and an idle timeout for connections that move no bytes.
//!
//! At the cap, new connections wait in the kernel's accept queue rather than being refused;
//! idle ones are cut by the timeouts, so a flood of idle sockets delays new clients by at
//! most the header timeout instead of locking them out for good.

use std::{
    io,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use axum::Router;
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    service::TowerToHyperService,
};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::Semaphore,
    time::Instant,
};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

/// File descriptors kept free for everything that is not a client connection (upstream
/// pipes, hook processes, log files), besides 4 per upstream server and hook.
const FD_RESERVE: u64 = 64;
/// How long stopping waits for open connections to finish their responses.
const DRAIN: Duration = Duration::from_secs(5);
/// Pause after a failed `accept` (out of descriptors), so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The limits one listener serves under.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
}

/// `wanted`, lowered so that connections cannot exhaust `fd_limit` (with `children` upstream
/// servers and hooks needing descriptors too).
pub fn connection_cap(wanted: usize, fd_limit: Option<u64>, children: usize) -> usize {
    let Some(fd_limit) = fd_limit else {
        return wanted;
    };
    let reserve = FD_RESERVE + 4 * children as u64;
    let fitting = fd_limit.saturating_sub(reserve).max(8);
    wanted.min(usize::try_from(fitting).unwrap_or(usize::MAX))
}

/// Serves `app` on `listener` until `stop` fires, then lets open connections finish for a
/// few seconds.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    stop: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let connections = TaskTracker::new();
    let mut full_since_warned = false;
    loop {
        if slots.available_permits() == 0 && !full_since_warned {
            tracing::warn!(
                max = limits.max_connections,
                "connection limit reached: new connections wait until one closes"
            );
        }
        full_since_warned = slots.available_permits() == 0;
        let slot = tokio::select! {
            // Stop accepting.
            () = stop.cancelled() => break,
            // A connection closed (or there was room already).
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        let stream = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let app = app.clone();
        let stop = stop.clone();
        connections.spawn(async move {
            serve_connection(stream, app, limits, stop).await;
            drop(slot);
        });
    }
    connections.close();
    if tokio::time::timeout(DRAIN, connections.wait())
        .await
        .is_err()
    {
        tracing::debug!("open connections did not finish within {DRAIN:?}");
    }
}

async fn serve_connection(
    stream: TcpStream,
    app: Router,
    limits: ConnectionLimits,
    stop: CancellationToken,
) {
    let _ = stream.set_nodelay(true);
    let watched = Watched::new(stream);
    let activity = watched.activity.clone();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let connection = builder.serve_connection(TokioIo::new(watched), TowerToHyperService::new(app));
    tokio::pin!(connection);
    let mut stopping = false;
    loop {
        let idle_deadline = activity.last() + limits.idle_timeout;
        tokio::select! {
            // Served to the end, or failed (header timeout, client gone).
            done = connection.as_mut() => {
                if let Err(error) = done {
                    tracing::debug!(%error, "connection ended");
                }
                return;
            }
            // The listener is stopping: finish the response in progress, take no more.
            () = stop.cancelled(), if !stopping => {
                stopping = true;
                connection.as_mut().graceful_shutdown();
            }
            // No byte either way for the idle timeout: a stalled client.
            () = tokio::time::sleep_until(idle_deadline) => {
                if activity.last() + limits.idle_timeout <= Instant::now() {
                    tracing::debug!("closing a connection idle for {:?}", limits.idle_timeout);
                    return;
                }
            }
        }
    }
}

/// When a connection last moved a byte, as milliseconds after its start.
struct Activity {
    start: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn touch(&self) {
        let elapsed = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(elapsed, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }
}

/// A TCP stream that records when it last read or wrote something.
struct Watched {
    stream: TcpStream,
    activity: Arc<Activity>,
}

impl Watched {
    fn new(stream: TcpStream) -> Self {
        Self {
            stream,
            activity: Arc::new(Activity {
                start: Instant::now(),
                last_ms: AtomicU64::new(0),
            }),
        }
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_fits_under_the_fd_limit() {
        assert_eq!(connection_cap(1024, Some(1024), 2), 1024 - 64 - 8);
        assert_eq!(connection_cap(100, Some(20_000), 2), 100);
        assert_eq!(connection_cap(1024, None, 2), 1024);
        assert_eq!(connection_cap(1024, Some(10), 0), 8, "never below a few");
    }
}
