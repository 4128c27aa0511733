//! The worker's OS sandbox: resource limits, then a seccomp filter that leaves only pipe I/O and memory.
//!
//! First the worker checks that it maps less than its memory cap: `setrlimit` accepts a cap below what is mapped
//! already, and memory reserved before it would then stay usable beyond it.
//!
//! Order matters: `setrlimit` itself is refused once the filter is in place. The filter applies to every thread
//! (TSYNC), but the worker is single-threaded anyway.
//!
//! Refused system calls fail with `EPERM` rather than killing the worker: library code that probes (the time
//! zone, `getcwd` in a module loader) then fails softly, and the self-check can report what it saw. Nothing a
//! refused call could have done is reachable another way, so killing would add no safety.

use std::collections::BTreeMap;

use rlimit::Resource;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Why the sandbox could not be set up; the worker then exits instead of running unconfined.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("cannot set {resource}: {source}")]
    Rlimit {
        resource: &'static str,
        source: std::io::Error,
    },
    #[error("cannot build the seccomp filter: {0}")]
    Filter(String),
    #[error("cannot install the seccomp filter: {0}")]
    Install(String),
    #[error("seccomp is not supported on this architecture ({0})")]
    Arch(&'static str),
    /// `setrlimit` accepts a cap below what is already mapped, and then only new mappings
    /// fail: memory reserved before the cap (an allocator's arena) would stay usable beyond it.
    #[error(
        "the worker already maps {mapped_mib} MiB, at or over its memory cap of {cap_mib} MiB (RLIMIT_AS), so the cap would not hold (start it with MIMALLOC_ARENA_RESERVE=0, as the gateway does, so that the allocator does not reserve 1 GiB at once)"
    )]
    OverCap { mapped_mib: u64, cap_mib: u64 },
    #[error("cannot read the worker's mapped size from /proc/self/status: {0}")]
    Mapped(String),
}

/// The OS limits of one worker process.
#[derive(Debug, Clone, Copy)]
pub struct ProcessLimits {
    /// Address-space limit (RLIMIT_AS); an allocation beyond it aborts the worker.
    pub memory_bytes: u64,
    /// CPU seconds over the worker's whole life (RLIMIT_CPU soft limit: SIGXCPU); the pool recycles workers
    /// before they get near it.
    pub cpu_seconds: u64,
}

/// Applies the resource limits and then the seccomp filter to the calling process.
pub fn apply(limits: ProcessLimits) -> Result<(), SandboxError> {
    // Read before the limits: RLIMIT_NOFILE leaves no descriptor to open the file with.
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|error| SandboxError::Mapped(error.to_string()))?;
    let mapped =
        mapped_bytes(&status).ok_or_else(|| SandboxError::Mapped("no `VmSize` line".to_owned()))?;
    cap_holds(mapped, limits.memory_bytes)?;
    set_rlimits(limits)?;
    install_filter()
}

/// The process's mapped size (`VmSize`, in kB) from the text of `/proc/self/status`.
fn mapped_bytes(status: &str) -> Option<u64> {
    let line = status
        .lines()
        .find_map(|line| line.strip_prefix("VmSize:"))?;
    let kib = line.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()?;
    kib.checked_mul(1024)
}

/// Whether an address-space cap of `cap` bytes binds a process that maps `mapped` already.
fn cap_holds(mapped: u64, cap: u64) -> Result<(), SandboxError> {
    match mapped < cap {
        true => Ok(()),
        false => Err(SandboxError::OverCap {
            mapped_mib: mapped >> 20,
            cap_mib: cap >> 20,
        }),
    }
}

fn set_rlimits(limits: ProcessLimits) -> Result<(), SandboxError> {
    let set = |resource: Resource, name: &'static str, soft: u64, hard: u64| {
        rlimit::setrlimit(resource, soft, hard).map_err(|source| SandboxError::Rlimit {
            resource: name,
            source,
        })
    };
    set(Resource::CORE, "RLIMIT_CORE", 0, 0)?;
    // Only fds 0-2 stay usable: nothing can be opened even if the filter missed a call.
    set(Resource::NOFILE, "RLIMIT_NOFILE", 3, 3)?;
    set(Resource::NPROC, "RLIMIT_NPROC", 0, 0)?;
    set(
        Resource::AS,
        "RLIMIT_AS",
        limits.memory_bytes,
        limits.memory_bytes,
    )?;
    // The hard limit (SIGKILL) a little above the soft one (SIGXCPU), so that the usual ending is SIGXCPU, which
    // the pool reports as a CPU limit.
    set(
        Resource::CPU,
        "RLIMIT_CPU",
        limits.cpu_seconds,
        limits.cpu_seconds.saturating_add(5),
    )
}

fn install_filter() -> Result<(), SandboxError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| SandboxError::Arch(std::env::consts::ARCH))?;
    let filter = SeccompFilter::new(
        rules().map_err(|e| SandboxError::Filter(e.to_string()))?,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
        arch,
    )
    .map_err(|e| SandboxError::Filter(e.to_string()))?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| SandboxError::Filter(e.to_string()))?;
    seccompiler::apply_filter_all_threads(&program)
        .map_err(|e| SandboxError::Install(e.to_string()))
}

/// The allowed system calls. Measured with `strace -f` over tool calls, catalog lookups, logs, dates, regexes,
/// big strings and objects, typed arrays, `Temporal`, a refused `import()`, loop and recursion limits, an
/// allocation failure and a native stack overflow, a worker makes only these after the filter is in place:
/// `read(0)`, `write(1|2)`, `brk`, `mmap(fd -1)`, `munmap`, `mremap`, `sigaltstack`, `exit_group`, and for `abort`:
/// `rt_sigprocmask`, `gettid`, `getpid`, `tgkill(self)`.
/// Also allowed, as harmless and plausible on other machines or code paths: `writev` (on fds 1 and 2),
/// `mprotect`, `madvise`, `futex`, `rt_sigreturn`, `rt_sigaction` (abort's second try), `getrandom` (reseeding
/// `Math.random`), `clock_gettime`/`clock_getres`/`gettimeofday` (when the vDSO falls back to a syscall),
/// `sched_yield`, `exit`.
fn rules() -> Result<BTreeMap<i64, Vec<SeccompRule>>, seccompiler::BackendError> {
    let arg0_is = |value: u64| -> Result<SeccompRule, seccompiler::BackendError> {
        SeccompRule::new(vec![SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            value,
        )?])
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_read, vec![arg0_is(0)?]);
    rules.insert(libc::SYS_write, vec![arg0_is(1)?, arg0_is(2)?]);
    rules.insert(libc::SYS_writev, vec![arg0_is(1)?, arg0_is(2)?]);
    // `abort` signals its own process only.
    rules.insert(
        libc::SYS_tgkill,
        vec![arg0_is(u64::from(std::process::id()))?],
    );
    // Anonymous memory only (fd -1): no mapping a file descriptor that might have leaked in.
    rules.insert(
        libc::SYS_mmap,
        vec![SeccompRule::new(vec![SeccompCondition::new(
            4,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            u64::from(u32::MAX),
        )?])?],
    );
    for call in [
        libc::SYS_brk,
        libc::SYS_munmap,
        libc::SYS_mremap,
        libc::SYS_mprotect,
        libc::SYS_madvise,
        libc::SYS_futex,
        libc::SYS_sigaltstack,
        libc::SYS_rt_sigreturn,
        libc::SYS_rt_sigprocmask,
        libc::SYS_rt_sigaction,
        libc::SYS_getrandom,
        libc::SYS_clock_gettime,
        libc::SYS_clock_getres,
        libc::SYS_gettimeofday,
        libc::SYS_sched_yield,
        libc::SYS_gettid,
        libc::SYS_getpid,
        libc::SYS_exit,
        libc::SYS_exit_group,
    ] {
        rules.insert(call, Vec::new());
    }
    Ok(rules)
}

/// What `toolgate worker --self-check` prints after entering the same sandbox: for each forbidden action,
/// `"refused: <errno>"` or `"allowed"`.
pub fn self_check() -> serde_json::Value {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").map(drop);
    let open = std::fs::File::open("/etc/passwd").map(drop);
    let exec = std::process::Command::new("/bin/true")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map(drop);
    serde_json::json!({
        "socket": verdict(socket),
        "open": verdict(open),
        "exec": verdict(exec),
    })
}

fn verdict(result: std::io::Result<()>) -> String {
    match result {
        Ok(()) => "allowed".to_owned(),
        Err(error) => format!("refused: {}", errno_name(&error)),
    }
}

fn errno_name(error: &std::io::Error) -> String {
    match error.raw_os_error() {
        Some(libc::EPERM) => "EPERM".to_owned(),
        Some(libc::EACCES) => "EACCES".to_owned(),
        Some(libc::EMFILE) => "EMFILE".to_owned(),
        Some(libc::EAGAIN) => "EAGAIN".to_owned(),
        Some(libc::ENOSYS) => "ENOSYS".to_owned(),
        _ => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_compiles_for_this_architecture() {
        let arch = TargetArch::try_from(std::env::consts::ARCH).unwrap();
        let filter = SeccompFilter::new(
            rules().unwrap(),
            SeccompAction::Errno(libc::EPERM as u32),
            SeccompAction::Allow,
            arch,
        )
        .unwrap();
        let program: BpfProgram = filter.try_into().unwrap();
        assert!(!program.is_empty());
    }

    #[test]
    fn the_mapped_size_is_read_from_vmsize() {
        let status =
            "Name:\ttoolgate\nVmPeak:\t  90000 kB\nVmSize:\t   88572 kB\nVmRSS:\t 37580 kB\n";
        assert_eq!(mapped_bytes(status), Some(88_572 * 1024));
        assert_eq!(mapped_bytes("Name:\ttoolgate\n"), None);
        assert_eq!(mapped_bytes("VmSize:\t lots kB\n"), None);
    }

    #[test]
    fn a_cap_below_what_is_mapped_is_refused() {
        assert!(cap_holds(88 << 20, 256 << 20).is_ok());
        // What a worker maps once mimalloc has reserved its first 1 GiB arena.
        let refused = cap_holds(1_134_012 * 1024, 256 << 20).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "the worker already maps 1107 MiB, at or over its memory cap of 256 MiB (RLIMIT_AS), so the cap would not hold (start it with MIMALLOC_ARENA_RESERVE=0, as the gateway does, so that the allocator does not reserve 1 GiB at once)"
        );
        assert!(cap_holds(256 << 20, 256 << 20).is_err());
    }

    #[test]
    fn errors_are_named_by_errno() {
        assert_eq!(
            verdict(Err(std::io::Error::from_raw_os_error(libc::EPERM))),
            "refused: EPERM"
        );
        assert_eq!(verdict(Ok(())), "allowed");
    }
}
