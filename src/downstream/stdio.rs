//! Serving one MCP session on the gateway's own stdin/stdout.

use std::{
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use rmcp::ServiceExt;
use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::sync::CancellationToken;

use super::{GatewayService, fast::FastPath, guard::Guarded, lines::Lines};
use crate::{config::ProfileName, gateway::Gateway};

mod streams;

/// Serves `profile` until the client closes stdin, `stop` fires (after a signal, once the
/// calls in flight are drained), or the session fails. The caller has checked that `profile`
/// exists.
///
/// When the client closes stdin nobody is left to read answers, but the calls in flight still
/// end cleanly (finished, or cancelled upstream at the end of `drain_grace_ms`, and audited):
/// the drain starts at once, rather than after rmcp's own fixed wait for its handlers (5 s,
/// after which it cancels them itself, so that wait also bounds the grace here).
pub async fn serve(
    gateway: Arc<Gateway>,
    profile: ProfileName,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let service = GatewayService::new(gateway.clone(), profile);
    let fast_path = gateway.config().fast_path;
    // Pipes and sockets without blocking: the blocking `stdio()` costs a thread hand-off per
    // message.
    let (stdin, stdout) = streams::open();
    let client_gone = CancellationToken::new();
    let stdin = EofSignal {
        inner: stdin,
        eof: client_gone.clone(),
    };
    // Unreadable lines, duplicate ids and malformed `tools/call` params are answered before
    // rmcp dispatches; a line over `max_message_bytes` is answered, never buffered whole.
    let lines = Lines::new(stdin, stdout)
        .with_max_line(gateway.config().supervise.max_message_bytes)
        .with_handshake_patch(super::tasks::handshake_patch(&service));
    // `tools/call` is taken from its raw line before rmcp decodes it ([`super::fast`]).
    let fast = fast_path.then(|| FastPath::new(service.clone(), lines.writer()));
    let lines = match &fast {
        Some(fast) => lines.with_intercept(fast.clone()),
        None => lines,
    };
    let transport = match &fast {
        Some(fast) => Guarded::new(lines).with_shared_ids(fast.ids()),
        None => Guarded::new(lines),
    };
    // A client that starts the gateway says hello at once: give servers that start quickly
    // a moment, so that `initialize` declares what they offer rather than everything
    // (bounded: a slow server must not delay the handshake).
    let first_starts = tokio::time::timeout(
        super::INITIALIZE_WAIT.min(gateway.config().supervise.start_grace),
        gateway.ready(),
    );
    tokio::select! {
        _ = first_starts => {}
        () = stop.cancelled() => return Ok(()),
    }
    let handshake = service.serve(transport);
    let running = tokio::select! {
        // The client said hello (or the handshake failed).
        running = handshake => running?,
        // Asked to stop before any client arrived.
        () = stop.cancelled() => return Ok(()),
    };
    if let Some(fast) = &fast {
        fast.start(running.peer().clone());
    }
    let cancel = running.cancellation_token();
    let waiting = running.waiting();
    tokio::pin!(waiting);
    tokio::select! {
        // The session ended by itself.
        quit = &mut waiting => {
            tracing::info!(reason = ?quit, "client session ended");
            if client_gone.is_cancelled() {
                // The end of stdin ended the session first: calls the fast path took are
                // still in flight, and get the same grace.
                gateway.drain.run().await;
            }
            if let Some(fast) = &fast {
                fast.stop().await;
            }
            return Ok(());
        }
        // The client closed stdin: let the calls in flight end within the grace.
        () = client_gone.cancelled() => {
            tracing::info!("client closed stdin");
            gateway.drain.run().await;
        }
        // Asked to stop, and the calls in flight are drained.
        () = stop.cancelled() => cancel.cancel(),
    }
    let quit = waiting.await;
    tracing::info!(reason = ?quit, "client session ended");
    if let Some(fast) = &fast {
        fast.stop().await;
    }
    Ok(())
}

/// Stdin that fires `eof` when the client closes it.
struct EofSignal<R> {
    inner: R,
    eof: CancellationToken,
}

impl<R: AsyncRead + Unpin> AsyncRead for EofSignal<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        // A successful read of nothing into room for something is end of file.
        if matches!(polled, Poll::Ready(Ok(())))
            && buf.filled().len() == before
            && buf.remaining() > 0
        {
            self.eof.cancel();
        }
        polled
    }
}
