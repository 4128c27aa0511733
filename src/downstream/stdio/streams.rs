//! The client's stdin and stdout as the runtime reads and writes them: non-blocking pipes, sockets read without blocking, or tokio's blocking handles.
//!
//! rmcp's [`stdio_pipes`](rmcp::transport::stdio_pipes) drives stdin and stdout through
//! tokio's reactor when both are pipes, and falls back to tokio's blocking handles
//! otherwise: a blocking thread per direction, and a hand-off between threads for each read
//! and write. But Node's `child_process` (so the TypeScript SDK's stdio client, and the
//! desktop clients and editors built on Node) gives its children a socket pair for each of
//! stdin and stdout, not a pipe. Sockets are taken here: each is a duplicate descriptor
//! registered with the reactor, read with `recv` and written with `send`, both with
//! `MSG_DONTWAIT`. The sockets' own flags stay as they are: `O_NONBLOCK` belongs to the
//! open file description, which the process that started toolgate may share (a shell
//! script around it, say), and a socket cannot be reopened through `/proc` as a pipe can.

use std::{
    fs::File,
    io,
    os::fd::{AsFd, AsRawFd, OwnedFd},
    pin::Pin,
    task::{Context, Poll, ready},
};

use nix::{
    errno::Errno,
    sys::socket::{MsgFlags, SockType, getsockopt, recv, send, sockopt},
};
use rmcp::transport::{StdioReader, StdioWriter};
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf, unix::AsyncFd};

/// The client's stdin.
pub(in crate::downstream) enum Input {
    /// As rmcp takes it: non-blocking when stdin and stdout are both pipes, tokio's blocking
    /// handle otherwise (a terminal, a file, a pipe and a socket, a datagram socket).
    Stdio(StdioReader),
    Socket(AsyncFd<OwnedFd>),
}

/// The client's stdout.
pub(in crate::downstream) enum Output {
    Stdio(StdioWriter),
    Socket(AsyncFd<OwnedFd>),
}

/// Stdin and stdout: as sockets when both are stream sockets, else as rmcp's `stdio_pipes`
/// takes them (non-blocking when both are pipes).
pub(in crate::downstream) fn open() -> (Input, Output) {
    if let Some((input, output)) = sockets() {
        tracing::debug!("stdin and stdout are sockets: read and written without blocking");
        return (Input::Socket(input), Output::Socket(output));
    }
    let (input, output) = rmcp::transport::stdio_pipes();
    (Input::Stdio(input), Output::Stdio(output))
}

/// Stdin and stdout, each duplicated and registered with the reactor, when both are
/// stream sockets.
fn sockets() -> Option<(AsyncFd<OwnedFd>, AsyncFd<OwnedFd>)> {
    let input = stream_socket(io::stdin().as_fd().try_clone_to_owned().ok()?)?;
    let output = stream_socket(io::stdout().as_fd().try_clone_to_owned().ok()?)?;
    match (
        registered(input, Interest::READABLE),
        registered(output, Interest::WRITABLE),
    ) {
        (Ok(input), Ok(output)) => Some((input, output)),
        (Err(error), _) | (_, Err(error)) => {
            tracing::debug!(%error, "stdin and stdout are sockets the reactor refused: read and written by blocking threads");
            None
        }
    }
}

/// `fd` registered with the reactor for `interest`.
///
/// tokio deprecates `AsyncFd::with_interest` as unsound for a `T` whose descriptor can be
/// swapped while registered (through `get_mut`), and offers an `unsafe` constructor instead.
/// An `OwnedFd` moved in and never taken out (nothing here calls `get_mut` or
/// `into_inner`) keeps its descriptor for the registration's life, so the safe constructor
/// is sound here, and toolgate keeps its one `unsafe` block (`child.rs`).
#[allow(deprecated)]
fn registered(fd: OwnedFd, interest: Interest) -> io::Result<AsyncFd<OwnedFd>> {
    AsyncFd::with_interest(fd, interest)
}

/// `fd`, if it is a stream socket (a socket pair's end, a TCP or Unix connection). A
/// datagram socket is left to the blocking handles, which read it as before: MCP's stdio
/// transport is a stream of lines.
fn stream_socket(fd: OwnedFd) -> Option<OwnedFd> {
    use std::os::unix::fs::FileTypeExt;
    let file = File::from(fd);
    let is_socket = file
        .metadata()
        .is_ok_and(|metadata| metadata.file_type().is_socket());
    let is_stream = is_socket && getsockopt(&file, sockopt::SockType) == Ok(SockType::Stream);
    is_stream.then(|| file.into())
}

/// `f` until it is not interrupted by a signal.
fn uninterrupted(mut f: impl FnMut() -> nix::Result<usize>) -> io::Result<usize> {
    loop {
        match f() {
            Err(Errno::EINTR) => continue,
            done => return done.map_err(io::Error::from),
        }
    }
}

impl AsyncRead for Input {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let socket = match self.get_mut() {
            Self::Stdio(stdin) => return Pin::new(stdin).poll_read(cx, buf),
            Self::Socket(socket) => socket,
        };
        loop {
            let mut ready = ready!(socket.poll_read_ready(cx))?;
            // The caller's buffer (a `BufReader`'s) is initialized once, not at each read.
            let room = buf.initialize_unfilled();
            let fd = ready.get_inner().as_raw_fd();
            match ready.try_io(|_| uninterrupted(|| recv(fd, room, MsgFlags::MSG_DONTWAIT))) {
                Ok(read) => {
                    buf.advance(read?);
                    return Poll::Ready(Ok(()));
                }
                // Nothing to read after all: the readiness is cleared, wait again.
                Err(_would_block) => continue,
            }
        }
    }
}

impl AsyncWrite for Output {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let socket = match self.get_mut() {
            Self::Stdio(stdout) => return Pin::new(stdout).poll_write(cx, buf),
            Self::Socket(socket) => socket,
        };
        // MSG_NOSIGNAL: a client gone is an error here, not a SIGPIPE, whatever the signal's
        // disposition.
        let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
        loop {
            let mut ready = ready!(socket.poll_write_ready(cx))?;
            let fd = ready.get_inner().as_raw_fd();
            match ready.try_io(|_| uninterrupted(|| send(fd, buf, flags))) {
                Ok(written) => return Poll::Ready(written),
                Err(_would_block) => continue,
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Stdio(stdout) => Pin::new(stdout).poll_flush(cx),
            // Nothing is buffered: each write went to the socket.
            Self::Socket(_) => Poll::Ready(Ok(())),
        }
    }

    /// A socket is left open, as a pipe is: toolgate's exit closes it.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Stdio(stdout) => Pin::new(stdout).poll_shutdown(cx),
            Self::Socket(_) => Poll::Ready(Ok(())),
        }
    }
}
