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

/// `fd`, if it is a stream socket (a socket pair's end, a TCP or Unix connection) that is
/// not set to pass credentials. A datagram socket is left to the blocking handles, which
/// read it as before: MCP's stdio transport is a stream of lines.
fn stream_socket(fd: OwnedFd) -> Option<OwnedFd> {
    use std::os::unix::fs::FileTypeExt;
    let file = File::from(fd);
    let is_socket = file
        .metadata()
        .is_ok_and(|metadata| metadata.file_type().is_socket());
    let is_stream = is_socket && getsockopt(&file, sockopt::SockType) == Ok(SockType::Stream);
    // With `SO_PASSCRED` a `recv` stops where the writer changes, leaving bytes queued after
    // a short read ([`short`] would then wait for bytes already there).
    let passes_credentials = is_stream && getsockopt(&file, sockopt::PassCred) != Ok(false);
    (is_stream && !passes_credentials).then(|| file.into())
}

/// Whether a `recv` or `send` moved some but not all of the `asked` bytes: a short read left
/// the socket empty, a short send found the client's queue full, so the next call would
/// only meet `EAGAIN`. The readiness is then cleared, the rule tokio applies to its own
/// sockets and pipes (tokio-rs/tokio#5866): the reactor's epoll is edge-triggered, so bytes
/// that arrive (or room that frees) later mark the socket ready again. Under load that saves
/// an `EAGAIN` call at the end of each burst of a client's lines. It holds because a stream
/// socket's `recv` takes every queued message that fits, unless credentials are passed,
/// which [`stream_socket`] refuses; a client that sends out-of-band data (`MSG_OOB`, where
/// `recv` stops) has the rest read with its next line.
fn short(done: usize, asked: usize) -> bool {
    0 < done && done < asked
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
            let asked = room.len();
            let fd = ready.get_inner().as_raw_fd();
            match ready.try_io(|_| uninterrupted(|| recv(fd, room, MsgFlags::MSG_DONTWAIT))) {
                Ok(read) => {
                    let read = read?;
                    if short(read, asked) {
                        ready.clear_ready();
                    }
                    buf.advance(read);
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
                Ok(written) => {
                    if written.as_ref().is_ok_and(|&n| short(n, buf.len())) {
                        ready.clear_ready();
                    }
                    return Poll::Ready(written);
                }
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

#[cfg(test)]
mod tests {
    use std::{os::unix::net::UnixStream, time::Duration};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    const WAIT: Duration = Duration::from_secs(5);

    /// Our end of a socket pair as [`open`] would take it, and the client's end.
    fn pair() -> (Input, UnixStream) {
        let (ours, client) = UnixStream::pair().unwrap();
        let ours = stream_socket(OwnedFd::from(ours)).expect("a stream socket");
        (
            Input::Socket(registered(ours, Interest::READABLE).unwrap()),
            client,
        )
    }

    async fn read(input: &mut Input, room: usize) -> Vec<u8> {
        let mut buf = vec![0; room];
        let n = tokio::time::timeout(WAIT, input.read(&mut buf))
            .await
            .expect("bytes the client sent are read")
            .unwrap();
        buf.truncate(n);
        buf
    }

    #[tokio::test]
    async fn bytes_sent_after_a_short_read_are_read() {
        let (mut input, mut client) = pair();
        std::io::Write::write_all(&mut client, b"one\n").unwrap();
        assert_eq!(read(&mut input, 64).await, b"one\n");
        // The short read cleared the readiness; the next bytes mark it again.
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            std::io::Write::write_all(&mut client, b"two\n").unwrap();
            client
        });
        assert_eq!(read(&mut input, 64).await, b"two\n");
        drop(late.join());
    }

    #[tokio::test]
    async fn a_read_that_fills_the_buffer_keeps_the_socket_ready() {
        let (mut input, mut client) = pair();
        let sent: Vec<u8> = (0..10_000u32).map(|n| (n % 251) as u8).collect();
        std::io::Write::write_all(&mut client, &sent).unwrap();
        let mut got = Vec::new();
        // Nothing more is sent: every read after a full one must find the rest queued.
        while got.len() < sent.len() {
            got.extend(read(&mut input, 4096).await);
        }
        assert_eq!(got, sent);
    }

    #[tokio::test]
    async fn a_short_send_to_a_full_queue_waits_for_room() {
        let (ours, mut client) = UnixStream::pair().unwrap();
        let ours = stream_socket(OwnedFd::from(ours)).expect("a stream socket");
        let mut output = Output::Socket(registered(ours, Interest::WRITABLE).unwrap());
        let sent: Vec<u8> = (0..3_000_000u32).map(|n| (n % 253) as u8).collect();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            std::io::Read::read_to_end(&mut client, &mut got).unwrap();
            got
        });
        tokio::time::timeout(WAIT, output.write_all(&sent))
            .await
            .expect("the client's reads make room")
            .unwrap();
        drop(output);
        assert_eq!(reader.join().unwrap(), sent);
    }

    #[test]
    fn a_socket_that_passes_credentials_is_left_to_the_blocking_handles() {
        let (ours, _client) = UnixStream::pair().unwrap();
        nix::sys::socket::setsockopt(&ours, sockopt::PassCred, &true).unwrap();
        assert!(stream_socket(OwnedFd::from(ours)).is_none());
    }
}
