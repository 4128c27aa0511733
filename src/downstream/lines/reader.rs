//! The reading half of the stdio transport: a task that reads the client's lines, lets the fast path take its own, and hands the rest to rmcp in order.
//!
//! Read inside rmcp's service loop, every line (nearly all of them `tools/call`s the fast
//! path takes) woke that loop: a `select!` over its channels and its token, in a span. Here a
//! task of its own reads, and rmcp's loop wakes for the lines it is to decode.
//!
//! Order is kept as when rmcp read each line itself: after a line for rmcp, nothing more is
//! read until rmcp has taken it (and so claimed its id, [`super::super::guard`]).

use std::{io, sync::Arc};

use tokio::{
    io::{AsyncBufReadExt, AsyncRead, BufReader},
    sync::mpsc,
};
use tokio_util::task::AbortOnDropHandle;

use super::Intercept;

/// Bytes kept at each end of an over-limit line, to find its `id`.
const KEEP: usize = 512;
/// A line buffer grown past this by a long message is shrunk back to it once the message is
/// handed on, so one large message does not pin its size for the rest of the session.
const KEPT_LINE_CAPACITY: usize = 64 * 1024;
/// JSON's byte order mark, which RFC 8259 §8.1 lets a parser ignore.
pub(super) const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// What is kept of a line over the limit while the rest of it is skipped.
#[derive(Default)]
pub(super) struct Oversized {
    pub(super) head: Vec<u8>,
    pub(super) tail: Vec<u8>,
    /// Its length so far, without the newline.
    pub(super) bytes: usize,
}

impl Oversized {
    fn add(&mut self, piece: &[u8]) {
        self.bytes += piece.len();
        if self.head.len() < KEEP {
            let room = KEEP - self.head.len();
            self.head.extend_from_slice(&piece[..piece.len().min(room)]);
        }
        let piece = &piece[piece.len().saturating_sub(KEEP)..];
        self.tail.extend_from_slice(piece);
        if self.tail.len() > KEEP {
            self.tail.drain(..self.tail.len() - KEEP);
        }
    }
}

/// What the reader hands to rmcp's side.
pub(super) enum LineRead {
    /// One message: no newline, no carriage return, no byte order mark; not blank.
    Line(Vec<u8>),
    /// The line exceeded the limit and was skipped up to its newline.
    TooLong(Oversized),
    Eof,
    Io(io::Error),
}

/// One bounded line read (into `LineReader::line`, for `Line`).
enum Read {
    Line,
    TooLong(Oversized),
    Eof,
    Io(io::Error),
}

pub(super) struct LineReader<R> {
    read: BufReader<R>,
    line: Vec<u8>,
    max_line: usize,
    /// Skipping a line over the limit, up to its newline.
    over: Option<Oversized>,
    intercept: Option<Arc<dyn Intercept>>,
}

impl<R: AsyncRead + Unpin + Send + 'static> LineReader<R> {
    pub(super) fn new(read: R) -> Self {
        Self {
            read: BufReader::new(read),
            line: Vec::new(),
            max_line: super::MAX_LINE_BYTES,
            over: None,
            intercept: None,
        }
    }

    pub(super) fn set_max_line(&mut self, max_line: usize) {
        self.max_line = max_line;
    }

    pub(super) fn set_intercept(&mut self, intercept: Arc<dyn Intercept>) {
        self.intercept = Some(intercept);
    }

    /// Reads in a task of its own from here on: the lines for rmcp come out of the receiver,
    /// one at a time. The task ends at the end of the input or when the handle is dropped.
    pub(super) fn spawn(mut self) -> (mpsc::Receiver<LineRead>, AbortOnDropHandle<()>) {
        let (sender, lines) = mpsc::channel(1);
        let task = tokio::spawn(async move {
            loop {
                let read = self.next().await;
                let end = matches!(read, LineRead::Eof | LineRead::Io(_));
                if sender.send(read).await.is_err() || end {
                    break;
                }
                // Room again once rmcp has taken the line: only then is the next one read.
                match sender.reserve().await {
                    Ok(room) => drop(room),
                    Err(_) => break,
                }
            }
        });
        (lines, AbortOnDropHandle::new(task))
    }

    /// The next line for rmcp: blank lines and lines the fast path takes are passed over.
    async fn next(&mut self) -> LineRead {
        loop {
            match self.read_line().await {
                Read::Line => {}
                Read::TooLong(over) => return LineRead::TooLong(over),
                Read::Eof => return LineRead::Eof,
                Read::Io(error) => return LineRead::Io(error),
            }
            let line = self.line.strip_suffix(b"\n").unwrap_or(&self.line);
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let line = line.strip_prefix(UTF8_BOM).unwrap_or(line);
            let skipped = line.iter().all(u8::is_ascii_whitespace)
                || self.intercept.as_ref().is_some_and(|i| i.take(line));
            let message = (!skipped).then(|| line.to_vec());
            self.line.clear();
            self.line.shrink_to(KEPT_LINE_CAPACITY);
            if let Some(message) = message {
                return LineRead::Line(message);
            }
        }
    }

    /// Reads one line into `self.line` without letting it grow past `self.max_line`:
    /// `read_until` could not be bounded, since it only returns at a newline.
    async fn read_line(&mut self) -> Read {
        loop {
            let available = match self.read.fill_buf().await {
                Ok(available) => available,
                Err(error) => return Read::Io(error),
            };
            if available.is_empty() {
                return Read::Eof;
            }
            // memchr looks at many bytes a step; a byte loop paid a compare and a branch for each.
            let newline = memchr::memchr(b'\n', available);
            let take = newline.map_or(available.len(), |at| at + 1);
            let piece = &available[..newline.unwrap_or(available.len())];
            if self.over.is_none() && self.line.len().saturating_add(piece.len()) > self.max_line {
                // Over the limit: from here on only its ends and its length are kept.
                let mut over = Oversized::default();
                over.add(&self.line);
                self.line.clear();
                self.line.shrink_to(KEPT_LINE_CAPACITY);
                self.over = Some(over);
            }
            let outcome = match self.over.as_mut() {
                Some(over) => {
                    over.add(piece);
                    match newline {
                        Some(_) => self.over.take().map(Read::TooLong),
                        None => None,
                    }
                }
                None => {
                    self.line.extend_from_slice(&available[..take]);
                    newline.map(|_| Read::Line)
                }
            };
            self.read.consume(take);
            if let Some(outcome) = outcome {
                return outcome;
            }
        }
    }
}
