//! Child processes: the environment they get, and how they are contained (own process group, killed with the gateway).
//!
//! **Environment.** Without `env_clear()` every upstream and command hook would see every
//! variable the gateway was started with: other servers' secrets exported for their `${VAR}`,
//! profile tokens, every `TOOLGATE_*` override. Like the MCP SDKs, a child gets only the
//! variables a program needs to run ([`BASE_ENV`], from the gateway's environment when set)
//! and what its config entry lists in `env` or names in `env_passthrough` (resolved at load).
//!
//! **Containment.** Every child (stdio upstreams, command hooks, code-mode workers) is started
//! through [`contain`], and those that may have children of their own through [`spawn_group`]:
//! - it leads a process group of its own, so one signal reaches what it started too
//!   (`npx`/`uv`/`sh -c` grandchildren), and a Ctrl-C in the gateway's terminal does not hit it
//!   before the gateway has had its say;
//! - dropping its handle kills it ([`ChildGroup`]: the whole group);
//! - on Linux the kernel SIGKILLs it when the gateway dies, even by SIGKILL
//!   (`PR_SET_PDEATHSIG`), so no exit path of the gateway leaves a direct child behind.
//!
//! **Open files.** `toolgate serve` raises its own soft open-file limit to the hard one
//! ([`raise_open_file_limit`]): each client connection, upstream pipe and hook holds
//! descriptors. Its children get the soft limit back that the gateway was started with, as
//! systemd recommends: some programs size tables by the soft limit or close every possible
//! descriptor before `exec`, and use `select()`, which breaks above 1024.
//!
//! What this cannot do: a grandchild is not covered by the parent-death signal (the kernel
//! clears it on `fork`). After a SIGKILL of the gateway it is reparented and lives on, unless
//! it watches its own parent; on every other exit path the group kill ends it, unless it left
//! the group (`setsid`, a daemon). A supervisor that kills the whole cgroup (systemd
//! `KillMode=control-group`) covers those cases.

use std::{
    collections::BTreeMap, ffi::OsStr, io, process::ExitStatus, time::Duration, time::Instant,
};

use nix::{
    errno::Errno,
    sys::signal::{Signal, killpg},
    unistd::Pid,
};
use process_wrap::tokio::{ChildWrapper, CommandWrap, ProcessGroup};
use rlimit::Resource;
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

/// Inherited when set: what the MCP SDKs pass to stdio servers on Unix.
pub const BASE_ENV: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// How long a child gets to exit by itself once its stdin is closed, when it is stopped.
pub const EXIT_AFTER_EOF: Duration = Duration::from_millis(1000);
/// How long it then gets after SIGTERM, before SIGKILL.
pub const EXIT_AFTER_TERM: Duration = Duration::from_millis(1000);
/// How long reaping may take after SIGKILL (it is immediate unless the kernel is stuck).
const REAP_AFTER_KILL: Duration = Duration::from_millis(500);
/// How often a stopping group is looked at.
const POLL: Duration = Duration::from_millis(20);

/// The open-file limit (soft, hard) before [`raise_open_file_limit`] first changed it.
static STARTING_NOFILE: std::sync::OnceLock<(u64, u64)> = std::sync::OnceLock::new();

/// Raises the soft open-file limit to the hard one where allowed, remembering the starting
/// limit for children; the resulting soft limit. Idempotent.
pub fn raise_open_file_limit() -> Option<u64> {
    match rlimit::getrlimit(Resource::NOFILE) {
        Ok(limits) => {
            STARTING_NOFILE.get_or_init(|| limits);
        }
        Err(error) => {
            tracing::warn!(%error, "could not read the open-file limit");
            return None;
        }
    }
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(soft) => Some(soft),
        Err(error) => {
            tracing::warn!(%error, "could not raise the open-file limit");
            None
        }
    }
}

/// Clears `command`'s inherited environment, then sets the base set and `env`.
pub fn set_env(command: &mut tokio::process::Command, env: &BTreeMap<String, String>) {
    command.env_clear();
    for name in BASE_ENV {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    command.envs(env);
}

/// Makes the child of `command` lead its own process group, die when its handle is dropped,
/// and (Linux) die with the gateway. Every child toolgate starts goes through here.
///
/// The parent-death signal is tied to the *thread* that forks: it fires when that thread
/// exits. Spawn only from the main thread or the runtime's worker threads, which live as
/// long as the process; never from `spawn_blocking` or after `block_in_place`, whose threads
/// exit when idle and would take the child with them.
pub fn contain(command: &mut tokio::process::Command) {
    command.process_group(0).kill_on_drop(true);
    #[cfg(target_os = "linux")]
    die_with_parent(command);
}

/// Asks the kernel to SIGKILL the child when its parent dies, and gives the child back the
/// open-file limit the gateway was started with.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)] // the one `unsafe` of the crate: see SAFETY below
fn die_with_parent(command: &mut tokio::process::Command) {
    // Read before the fork: the child compares it with its parent once the signal is armed.
    let parent = Pid::this();
    let nofile = STARTING_NOFILE.get().copied();
    // SAFETY: `pre_exec` is unsafe because the closure runs in the forked child before
    // `exec`, where only async-signal-safe work is allowed (another thread of the parent may
    // have held the allocator's or any other lock at the fork). This closure allocates
    // nothing, takes no lock and touches no shared state: it makes two system calls, prctl
    // (through nix's `set_pdeathsig`) and getppid, and builds an `io::Error` from a raw errno,
    // which does not allocate. `parent` and `nofile` are plain integers copied into the
    // closure. `setrlimit` is async-signal-safe too; lowering a soft limit cannot fail in
    // practice, and if it did the child would merely keep the raised one, so it is ignored.
    unsafe {
        command.pre_exec(move || {
            if let Some((soft, hard)) = nofile {
                let _ = rlimit::setrlimit(Resource::NOFILE, soft, hard);
            }
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            // The gateway may have died between the fork and the prctl: the signal would
            // then never come. The child has been reparented by now, so its parent differs;
            // failing here makes the child `_exit` before it ever runs the program.
            if nix::unistd::getppid() != parent {
                return Err(io::Error::from(Errno::ESRCH));
            }
            Ok(())
        });
    }
}

/// Starts `program` (configured by `configure`: arguments, environment, pipes) as the leader
/// of its own process group, contained as [`contain`] says.
pub fn spawn_group(
    program: impl AsRef<OsStr>,
    configure: impl FnOnce(&mut tokio::process::Command),
) -> io::Result<ChildGroup> {
    let mut wrap = CommandWrap::with_new(program, |command| {
        configure(command);
        contain(command);
    });
    // process-wrap's group child signals and reaps the whole group.
    wrap.wrap(ProcessGroup::leader());
    let child = wrap.spawn()?;
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .ok_or_else(|| io::Error::other("the child has no process id"))?;
    Ok(ChildGroup {
        child,
        pgid: Pid::from_raw(pid),
        ended: false,
    })
}

/// A child leading its own process group. Dropping it SIGKILLs the whole group, so no path
/// (a restart, an error, a dropped start) leaves its grandchildren behind.
pub struct ChildGroup {
    child: Box<dyn ChildWrapper>,
    pgid: Pid,
    /// The group was killed and reaped by [`ChildGroup::stop`]: nothing is left to kill, and
    /// the group id may even belong to someone else by now.
    ended: bool,
}

impl ChildGroup {
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin().take()
    }

    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout().take()
    }

    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr().take()
    }

    /// Waits for the leader to exit (and reaps what it left in the group that is ours).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// The leader's status if it has exited.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// SIGKILLs the whole group now and reaps the leader (bounded).
    pub async fn kill(&mut self) {
        self.signal(Signal::SIGKILL);
        let _ = tokio::time::timeout(REAP_AFTER_KILL, self.child.wait()).await;
        self.ended = true;
    }

    /// Ends the group gently; the caller has closed the child's stdin first, which is how a
    /// stdio program is asked to exit. Waits up to [`EXIT_AFTER_EOF`] for the group to be
    /// gone, then SIGTERMs it and waits up to [`EXIT_AFTER_TERM`], then SIGKILLs what is left.
    /// Takes at most the sum of the two plus a short reap.
    pub async fn stop(&mut self) {
        if self.gone_within(EXIT_AFTER_EOF).await {
            self.ended = true;
            return;
        }
        tracing::debug!(
            pgid = self.pgid.as_raw(),
            "child group still running after EOF: SIGTERM"
        );
        self.signal(Signal::SIGTERM);
        if self.gone_within(EXIT_AFTER_TERM).await {
            self.ended = true;
            return;
        }
        // A member that ignores SIGTERM, or (where nobody reaps orphans) a zombie grandchild.
        tracing::debug!(
            pgid = self.pgid.as_raw(),
            "child group still running after SIGTERM: SIGKILL"
        );
        self.kill().await;
    }

    /// Polls until no process of the group is left, zombies included (the leader reaped by us,
    /// the rest exited and reaped by whoever adopted them).
    async fn gone_within(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            // Reaps the leader and any of our own children in the group, so that our zombies
            // do not count as members.
            let _ = self.child.try_wait();
            if killpg(self.pgid, None) == Err(Errno::ESRCH) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    fn signal(&self, signal: Signal) {
        match killpg(self.pgid, signal) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(error) => {
                tracing::warn!(pgid = self.pgid.as_raw(), %error, "cannot signal a child's process group")
            }
        }
    }
}

impl Drop for ChildGroup {
    fn drop(&mut self) {
        if !self.ended {
            self.signal(Signal::SIGKILL);
        }
    }
}
