//! `forwarder`: relays bytes between its own stdio and a child's, reading nothing: the floor any stdio gateway stands on, for `bench`.
//!
//! `forwarder [--threads] PROGRAM [ARGS...]` runs PROGRAM with piped stdin and stdout and
//! copies each direction as the bytes come, no framing and no parsing. By default both
//! directions run on one thread, a current-thread tokio runtime over non-blocking pipes
//! (rmcp's `stdio_pipes`, tokio's child pipes): the shape of `toolgate serve` over stdio.
//! `--threads` copies each direction on its own thread with blocking reads instead, the
//! cheapest relay there is. `bench` puts it where toolgate would be, so what toolgate costs
//! beyond moving the bytes can be told from what any process in the middle costs.

use std::process::Stdio;

use anyhow::{Context, bail};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args_os().skip(1).peekable();
    let threads = args.next_if(|arg| arg == "--threads").is_some();
    let Some(program) = args.next() else {
        bail!("usage: forwarder [--threads] PROGRAM [ARGS...]");
    };
    let args: Vec<_> = args.collect();
    if threads {
        return blocking(&program, &args);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    let relayed = runtime.block_on(evented(&program, &args));
    // Not waiting for a blocking read of stdin (rmcp's fallback when stdio is not a pipe)
    // that only the client can end.
    runtime.shutdown_background();
    relayed
}

/// Both directions on one thread, woken by epoll.
async fn evented(program: &std::ffi::OsStr, args: &[std::ffi::OsString]) -> anyhow::Result<()> {
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot run {}", program.to_string_lossy()))?;
    let (Some(mut child_in), Some(mut child_out)) = (child.stdin.take(), child.stdout.take())
    else {
        bail!("the child has no pipes");
    };
    let (mut stdin, mut stdout) = rmcp::transport::stdio_pipes();
    let up = async {
        let copied = tokio::io::copy(&mut stdin, &mut child_in).await;
        // The client's end of input is the child's.
        drop(child_in);
        copied
    };
    let down = tokio::io::copy(&mut child_out, &mut stdout);
    tokio::pin!(up, down);
    tokio::select! {
        // The child's output ended (it exited, say): so does the relay's, without waiting
        // for the client to close its input.
        copied = &mut down => {
            copied.context("copying the child's stdout")?;
        }
        copied = &mut up => {
            copied.context("copying stdin to the child")?;
            down.await.context("copying the child's stdout")?;
        }
    }
    child.wait().await?;
    Ok(())
}

/// Each direction on its own thread, blocked in `read`.
fn blocking(program: &std::ffi::OsStr, args: &[std::ffi::OsString]) -> anyhow::Result<()> {
    let mut child = std::process::Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {}", program.to_string_lossy()))?;
    let (Some(mut child_in), Some(mut child_out)) = (child.stdin.take(), child.stdout.take())
    else {
        bail!("the child has no pipes");
    };
    let up = std::thread::spawn(move || std::io::copy(&mut std::io::stdin().lock(), &mut child_in));
    std::io::copy(&mut child_out, &mut std::io::stdout().lock())
        .context("copying the child's stdout")?;
    // The child closed its stdout: it is ending, and takes the up thread's pipe with it.
    child.wait()?;
    drop(up);
    Ok(())
}
