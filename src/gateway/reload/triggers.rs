//! What starts a reload while serving: SIGHUP, and with `serve --watch` a change of the config file.
//!
//! The file is polled (its modification time, size and inode, every [`POLL`]) rather than
//! watched through inotify: one `stat` per half second costs nothing, needs no new
//! dependency, and sees every way a file gets replaced (written in place, renamed over by an
//! editor, swapped by a Kubernetes ConfigMap symlink, on a network or container file
//! system where inotify says nothing). A change is applied once the file has stayed the same
//! for one more poll, so an editor's double write (truncate, then write; or write a backup,
//! then rename) is read once, whole.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, SystemTime},
};

use tokio_util::sync::CancellationToken;

use crate::gateway::Gateway;

/// How often `--watch` looks at the file.
pub const POLL: Duration = Duration::from_millis(500);

/// SIGHUP, registered as early as possible: its default action ends the process.
pub struct Hangup {
    #[cfg(unix)]
    signal: tokio::signal::unix::Signal,
}

impl Hangup {
    /// Must run inside the runtime.
    pub fn register() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self {
                signal: signal(SignalKind::hangup())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// Resolves on the next SIGHUP (never where there is none).
    async fn recv(&mut self) {
        #[cfg(unix)]
        {
            if self.signal.recv().await.is_none() {
                std::future::pending::<()>().await;
            }
        }
        #[cfg(not(unix))]
        std::future::pending::<()>().await
    }
}

/// What identifies one version of the file; `None` while it cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp(Option<(SystemTime, u64, u64)>);

async fn stamp(path: &Path) -> Stamp {
    let metadata = tokio::fs::metadata(path).await.ok();
    Stamp(metadata.and_then(|m| {
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(&m);
        #[cfg(not(unix))]
        let inode = 0;
        Some((m.modified().ok()?, m.len(), inode))
    }))
}

/// Reloads `path` into `gateway` on every SIGHUP and, when `watch`, on every settled change
/// of the file, until `stop` fires. Each reload's outcome is logged by [`Gateway::reload`].
pub async fn follow(
    gateway: Arc<Gateway>,
    path: PathBuf,
    mut hangup: Hangup,
    watch: bool,
    stop: CancellationToken,
) {
    // What the running configuration was read from (as near as a stat can tell). Only
    // `--watch` compares stamps; without it no stat is taken: each runs on one of tokio's
    // blocking threads, which `serve`, on one thread (README), would otherwise not need.
    let mut applied = match watch {
        true => stamp(&path).await,
        false => Stamp(None),
    };
    // A change seen at the last poll, applied if the next one sees the same.
    let mut settling: Option<Stamp> = None;
    let mut polls = tokio::time::interval(POLL);
    polls.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    if watch {
        tracing::info!(
            "watching {} for changes (every {} ms)",
            path.display(),
            POLL.as_millis()
        );
    }
    loop {
        let poll = async {
            match watch {
                true => {
                    polls.tick().await;
                }
                false => std::future::pending().await,
            }
        };
        tokio::select! {
            // The gateway is stopping.
            () = stop.cancelled() => return,
            // Asked by signal: read the file whether or not it looks changed.
            () = hangup.recv() => {
                tracing::info!("SIGHUP: reloading {}", path.display());
                settling = None;
                if watch {
                    applied = stamp(&path).await;
                }
            }
            // Time to look at the file.
            () = poll => {
                let now = stamp(&path).await;
                if now == applied {
                    settling = None;
                    continue;
                }
                if settling.as_ref() != Some(&now) {
                    // Changed since the last look: wait one more poll for it to settle.
                    settling = Some(now);
                    continue;
                }
                settling = None;
                tracing::info!("{} changed: reloading", path.display());
                applied = now;
            }
        }
        // Refused or not, it is logged and kept for `/readyz`; the running config serves on.
        let _ = gateway.reload(&path).await;
    }
}
