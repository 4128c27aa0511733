//! `toolgate worker`: the sandboxed process that runs code-mode programs, one at a time, in Boa.
//!
//! Life of a worker: warm the engine up → rlimits + seccomp ([`super::sandbox`]) → `ready` → for each `run` frame
//! a fresh context (`run`) and one `done` frame → exit at end of input. Single-threaded and without an async
//! runtime: the seccomp filter is per thread, and the only thing a worker ever waits for is its stdin.

mod globals;
mod jobs;
mod run;
pub mod typescript;

use std::{
    io::{BufRead, StdinLock, Write},
    process::ExitCode,
    rc::Rc,
};

use boa_engine::Source;

use super::{
    sandbox::{self, ProcessLimits},
    wire::{self, FromWorker, RunLimits, ToWorker},
};

/// Default address-space limit of a worker (RLIMIT_AS).
pub const DEFAULT_MEMORY_BYTES: u64 = 256 << 20;
/// Default CPU seconds over a worker's life (RLIMIT_CPU).
pub const DEFAULT_CPU_SECONDS: u64 = 300;

/// Exit status when the sandbox cannot be set up (sysexits EX_SOFTWARE).
const EXIT_NO_SANDBOX: u8 = 70;
/// Exit status for a frame from the gateway that does not parse.
const EXIT_BAD_FRAME: u8 = 2;

/// Command-line options of `toolgate worker` (the pool passes them; people need not).
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Address-space limit of this worker, in bytes.
    #[arg(long, default_value_t = DEFAULT_MEMORY_BYTES)]
    pub memory_bytes: u64,
    /// CPU seconds this worker may use over its whole life.
    #[arg(long, default_value_t = DEFAULT_CPU_SECONDS)]
    pub cpu_seconds: u64,
    /// Enter the sandbox, try a socket, a file and an exec, print what happened as JSON, exit.
    #[arg(long)]
    pub self_check: bool,
}

/// Runs the worker until its input ends. Called by `main` before any logging or configuration is set up.
pub fn main(options: Options) -> ExitCode {
    warm_up();
    let limits = ProcessLimits {
        memory_bytes: options.memory_bytes,
        cpu_seconds: options.cpu_seconds,
    };
    if let Err(error) = sandbox::apply(limits) {
        eprintln!("toolgate worker: {error}");
        return ExitCode::from(EXIT_NO_SANDBOX);
    }
    if options.self_check {
        let report = sandbox::self_check();
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{report}").and_then(|()| out.flush());
        return ExitCode::SUCCESS;
    }
    send(&FromWorker::Ready);
    let mut input = Input::new();
    let mut next_id = 1;
    while let Some(frame) = input.next_frame() {
        // Anything but `run` here answers a request of a run that has already finished.
        if let ToWorker::Run {
            code,
            tools,
            limits,
        } = frame
        {
            let (done, context) = run::execute(
                &code,
                &tools,
                limits,
                options.memory_bytes,
                &mut next_id,
                &mut input,
            );
            send(&done);
            // Between runs, while the gateway reads the result: the run's garbage goes now rather than in the
            // middle of a later run.
            drop(context);
            boa_engine::gc::force_collect();
        }
    }
    ExitCode::SUCCESS
}

/// Writes one frame to stdout. A gateway that stopped reading is gone: the worker exits.
pub(crate) fn send(frame: &FromWorker) {
    let line = wire::encode(frame);
    let mut out = std::io::stdout().lock();
    if out.write_all(&line).and_then(|()| out.flush()).is_err() {
        std::process::exit(0);
    }
}

/// Frames from the gateway, read with blocking reads on fd 0.
pub(crate) struct Input {
    stdin: StdinLock<'static>,
    line: String,
}

impl Input {
    fn new() -> Self {
        Self {
            stdin: std::io::stdin().lock(),
            line: String::new(),
        }
    }

    /// The next frame; `None` at end of input. The gateway is trusted to send well-formed frames, so one that
    /// does not parse ends the worker (the pool then reports a crash and starts another).
    pub(crate) fn next_frame(&mut self) -> Option<ToWorker> {
        loop {
            self.line.clear();
            match self.stdin.read_line(&mut self.line) {
                Ok(0) | Err(_) => return None,
                Ok(_) if self.line.trim().is_empty() => continue,
                Ok(_) => {}
            }
            return match serde_json::from_str(&self.line) {
                Ok(frame) => Some(frame),
                Err(error) => {
                    eprintln!("toolgate worker: bad frame from the gateway: {error}");
                    std::process::exit(i32::from(EXIT_BAD_FRAME));
                }
            };
        }
    }
}

/// Exercises the engine once before the sandbox closes, so that lazily initialized state (random seeds, the
/// clock, allocator arenas) is set up while its system calls are still allowed.
fn warm_up() {
    let limits = RunLimits {
        loop_iterations: 1_000,
        recursion_depth: 64,
        max_tool_calls: 0,
        max_output_bytes: 0,
    };
    let Ok(mut context) = run::new_context(limits, Rc::new(jobs::Hooks::new(1 << 20))) else {
        return;
    };
    let _ = context.eval(Source::from_bytes(
        "JSON.stringify([Math.random(), Date.now(), new Date().toString(), /a+/.test('aa'), \
         'x'.repeat(10).split(''), new Map([[1, 2]]), Symbol('s').toString()]); \
         (async () => 1)().then((x) => x + 1);",
    ));
    let _ = context.run_jobs();
    let _ = typescript::to_script("const a: number = 1; return a;");
}
