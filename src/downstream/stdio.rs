//! Serving one MCP session on the gateway's own stdin/stdout.

use std::sync::Arc;

use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use super::{GatewayService, guard::Guarded, lines::Lines};
use crate::{config::ProfileName, gateway::Gateway};

/// Serves `profile` until the client closes stdin, `stop` fires (SIGTERM/SIGINT), or the
/// session fails. The caller has checked that `profile` exists.
pub async fn serve(
    gateway: Arc<Gateway>,
    profile: ProfileName,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let service = GatewayService::new(gateway.clone(), profile);
    // Non-blocking pipes: the blocking `stdio()` costs a thread hand-off per message.
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    // Unreadable lines, duplicate ids and malformed `tools/call` params are answered before
    // rmcp dispatches.
    let transport = Guarded::new(Lines::new(stdin, stdout));
    let handshake = service.serve(transport);
    let running = tokio::select! {
        // The client said hello (or the handshake failed).
        running = handshake => running?,
        // Asked to stop before any client arrived.
        () = stop.cancelled() => return Ok(()),
    };
    let cancel = running.cancellation_token();
    tokio::select! {
        // The client went away (stdin closed) or the session ended.
        quit = running.waiting() => {
            tracing::info!(reason = ?quit, "client session ended");
        }
        // Asked to stop.
        () = stop.cancelled() => {
            tracing::info!("stopping on signal");
            cancel.cancel();
        }
    }
    Ok(())
}
