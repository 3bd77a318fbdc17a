//! The proxy's two ends of the wire: reading the client's lines and writing lines to the client
//! and to the agent, without blocking the main loop and without a thread hop when they are pipes.
//!
//! In production the client is our stdin/stdout ([`Client::stdio`]). When they are pipes (as an
//! editor connects them) they are switched to non-blocking mode and driven by the main loop's
//! reactor: a line is read, journaled and written by one thread, with no wake-up of another.
//! Anything else (a file, a terminal) falls back to a dedicated std thread, which never blocks
//! the loop either. Any [`AsyncRead`]/[`AsyncWrite`] can stand in for either end
//! ([`ClientInput::reader`], [`Output::writer`]): the shell's tests use in-memory pipes.

use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::unix::pipe;
use tokio::sync::mpsc;

use super::lines::LineSplitter;

/// Bytes queued for one destination above which its source is no longer read.
pub const BACKLOG_LIMIT: usize = 1 << 20;

/// Bytes queued for the editor above which the editor itself is no longer read either. Relayed
/// lines rarely get there (the agent stops being read past [`BACKLOG_LIMIT`]: only a huge line
/// does); the proxy's own answers can, for an editor that keeps sending requests the proxy
/// answers itself (`session/list` from the journal, …) and reads nothing. (4 MiB in unit tests,
/// whose debug-built core would take seconds over a 64 MiB line.)
pub const STALLED_LIMIT: usize = if cfg!(test) { 4 << 20 } else { 64 << 20 };

/// A duplicate of one of our standard descriptors, as an owned fd.
fn dup_std(fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: dup(2) of a standard descriptor; the new fd is owned by the returned value.
    let new = unsafe { libc::dup(fd) };
    if new < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `new` is a freshly created descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// A byte stream the main loop reads (one dynamic call per read, not per line).
pub type Reader = Box<dyn AsyncRead + Send + Unpin>;

/// A byte stream the main loop writes (one dynamic call per batch of lines). Written bytes must
/// reach the reader without a flush; dropping the writer closes the stream.
pub type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// The client's end of the proxy: its lines in, lines for it out.
pub struct Client {
    /// The client's lines.
    pub input: ClientInput,
    /// Lines for the client.
    pub output: Output,
}

impl Client {
    /// Our stdin and stdout, as pipes when they are.
    pub fn stdio() -> Client {
        Client {
            input: ClientInput::stdin(),
            output: Output::stdout(),
        }
    }
}

/// Where lines from the client come from.
pub enum ClientInput {
    /// A stream read by the main loop: our stdin when it is a pipe.
    Stream {
        /// The stream.
        reader: Reader,
        /// Its line splitter.
        lines: LineSplitter,
    },
    /// Anything else: a thread reads it and sends batches of lines.
    Thread(mpsc::Receiver<Vec<Bytes>>),
}

impl ClientInput {
    /// Our stdin, as a pipe when it is one.
    pub fn stdin() -> ClientInput {
        match dup_std(0).and_then(pipe::Receiver::from_owned_fd) {
            Ok(pipe) => ClientInput::reader(Box::new(pipe)),
            Err(_) => ClientInput::Thread(spawn_stdin_thread()),
        }
    }

    /// Lines read from `reader` by the main loop.
    pub fn reader(reader: Reader) -> ClientInput {
        ClientInput::Stream {
            reader,
            lines: LineSplitter::new(),
        }
    }

    /// The next batch of whole lines; at end of stream, the final partial line (if any) and
    /// then `None`.
    pub async fn read(&mut self) -> Option<Vec<Bytes>> {
        use tokio::io::AsyncReadExt;
        match self {
            ClientInput::Stream { reader, lines } => loop {
                match reader.read_buf(lines.buffer()).await {
                    Ok(n) if n > 0 => {
                        let batch: Vec<Bytes> = std::iter::from_fn(|| lines.next_line()).collect();
                        if !batch.is_empty() {
                            return Some(batch);
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    _ => return lines.finish().map(|last| vec![last]),
                }
            },
            ClientInput::Thread(rx) => rx.recv().await,
        }
    }
}

/// Read our stdin on a std thread (for stdin that is not a pipe).
fn spawn_stdin_thread() -> mpsc::Receiver<Vec<Bytes>> {
    let (tx, rx) = mpsc::channel::<Vec<Bytes>>(64);
    std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || {
            use std::io::Read;
            let mut stdin = std::io::stdin().lock();
            let mut splitter = LineSplitter::new();
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match stdin.read(&mut buf) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => 0,
                };
                if n == 0 {
                    if let Some(last) = splitter.finish() {
                        let _ = tx.blocking_send(vec![last]);
                    }
                    return;
                }
                splitter.push(&buf[..n]);
                let batch: Vec<Bytes> = std::iter::from_fn(|| splitter.next_line()).collect();
                if !batch.is_empty() && tx.blocking_send(batch).is_err() {
                    return;
                }
            }
        })
        .expect("spawning the stdin thread");
    rx
}

/// A destination: lines queued in order and written without blocking the main loop.
pub struct Output {
    sink: Option<Sink>,
    queue: VecDeque<Bytes>,
    queued: Arc<AtomicUsize>,
    /// Close the destination once the queue is written.
    closing: bool,
    /// The reader went away (broken pipe); shared with the stdout thread when there is one.
    gone: Arc<AtomicBool>,
}

enum Sink {
    /// A non-blocking pipe on the reactor (our stdout, the agent's stdin).
    Pipe(pipe::Sender),
    /// Our stdout when it is not a pipe, written by a std thread.
    Thread(std::sync::mpsc::Sender<Bytes>),
    /// Any other stream, written by the main loop like a pipe.
    Writer(Writer),
}

impl Output {
    /// Our stdout, as a pipe when it is one.
    pub fn stdout() -> Output {
        match dup_std(1).and_then(pipe::Sender::from_owned_fd) {
            Ok(pipe) => Output::new(Sink::Pipe(pipe)),
            Err(_) => {
                let queued = Arc::new(AtomicUsize::new(0));
                let gone = Arc::new(AtomicBool::new(false));
                let tx = spawn_stdout_thread(queued.clone(), gone.clone());
                Output {
                    queued,
                    gone,
                    ..Output::new(Sink::Thread(tx))
                }
            }
        }
    }

    /// A pipe we own (the agent's stdin).
    pub fn pipe(fd: OwnedFd) -> io::Result<Output> {
        Ok(Output::new(Sink::Pipe(pipe::Sender::from_owned_fd(fd)?)))
    }

    /// Lines written to `writer` by the main loop, without blocking it.
    pub fn writer(writer: Writer) -> Output {
        Output::new(Sink::Writer(writer))
    }

    fn new(sink: Sink) -> Output {
        Output {
            sink: Some(sink),
            queue: VecDeque::new(),
            queued: Arc::new(AtomicUsize::new(0)),
            closing: false,
            gone: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Queue a line (dropped if the reader is gone, as a pipe would).
    pub fn push(&mut self, line: Bytes) {
        if self.is_gone() || self.closing {
            return;
        }
        self.queued.fetch_add(line.len(), Ordering::Relaxed);
        match &self.sink {
            Some(Sink::Thread(tx)) => {
                if tx.send(line).is_err() {
                    self.set_gone();
                }
            }
            _ => self.queue.push_back(line),
        }
    }

    /// More than [`BACKLOG_LIMIT`] bytes are waiting: stop reading the source.
    pub fn full(&self) -> bool {
        !self.is_gone() && self.queued.load(Ordering::Relaxed) > BACKLOG_LIMIT
    }

    /// More than [`STALLED_LIMIT`] bytes are waiting: stop reading the reader too.
    pub fn stalled(&self) -> bool {
        !self.is_gone() && self.queued.load(Ordering::Relaxed) > STALLED_LIMIT
    }

    fn set_gone(&mut self) {
        self.gone.store(true, Ordering::Relaxed);
        self.queued.store(0, Ordering::Relaxed);
        self.queue.clear();
    }

    /// Bytes not yet written.
    pub fn backlog(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// True when the reader went away (a write failed with a broken pipe).
    pub fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Relaxed)
    }

    /// Close once everything queued is written.
    pub fn close(&mut self) {
        self.closing = true;
        if matches!(self.sink, Some(Sink::Thread(_))) {
            self.sink = None; // the thread drains its channel, then ends
        }
        self.write_now();
    }

    /// True while queued lines wait for the destination to become writable.
    pub fn waiting(&self) -> bool {
        matches!(self.sink, Some(Sink::Pipe(_) | Sink::Writer(_))) && !self.queue.is_empty()
    }

    /// Wait until the destination can take more (only meaningful while [`Output::waiting`]);
    /// an [`Output::writer`] takes some of the queue right away.
    pub async fn writable(&mut self) {
        if let Some(Sink::Pipe(pipe)) = &self.sink {
            let _ = pipe.writable().await;
        } else if matches!(self.sink, Some(Sink::Writer(_))) {
            std::future::poll_fn(|cx| self.write_some(cx)).await;
        }
    }

    /// Write as much of the queue as the destination takes now, without blocking.
    pub fn write_now(&mut self) {
        let mut cx = Context::from_waker(Waker::noop());
        while !self.queue.is_empty() && self.write_some(&mut cx).is_ready() {}
        if self.closing
            && self.queue.is_empty()
            && matches!(self.sink, Some(Sink::Pipe(_) | Sink::Writer(_)))
        {
            self.sink = None; // dropping the pipe or writer closes it
        }
    }

    /// One vectored write from the head of the queue: ready once it wrote or failed, pending
    /// while the destination takes nothing (a writer then wakes `cx` when it can).
    fn write_some(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.queue.is_empty() {
            return Poll::Ready(());
        }
        // Up to 64 buffers per writev, gathered on the stack (this runs for every batch).
        let mut slices = [IoSlice::new(&[]); 64];
        let mut count = 0;
        for (slot, buffer) in slices.iter_mut().zip(&self.queue) {
            *slot = IoSlice::new(buffer);
            count += 1;
        }
        let written = match &mut self.sink {
            Some(Sink::Pipe(pipe)) => match pipe.try_write_vectored(&slices[..count]) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
                written => written,
            },
            Some(Sink::Writer(writer)) => {
                match Pin::new(writer).poll_write_vectored(cx, &slices[..count]) {
                    Poll::Ready(written) => written,
                    Poll::Pending => return Poll::Pending,
                }
            }
            Some(Sink::Thread(_)) | None => return Poll::Pending,
        };
        match written {
            Ok(mut n) if n > 0 => {
                self.queued.fetch_sub(n, Ordering::Relaxed);
                while n > 0 {
                    let front = self.queue.front_mut().expect("written bytes were queued");
                    let k = n.min(front.len());
                    front.advance(k);
                    n -= k;
                    if front.is_empty() {
                        self.queue.pop_front();
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            _ => {
                // A broken pipe (or a writer that takes nothing): the reader is gone.
                self.set_gone();
                self.sink = None;
            }
        }
        Poll::Ready(())
    }
}

/// Write our stdout on a std thread (for stdout that is not a pipe).
fn spawn_stdout_thread(
    queued: Arc<AtomicUsize>,
    gone: Arc<AtomicBool>,
) -> std::sync::mpsc::Sender<Bytes> {
    let (tx, rx) = std::sync::mpsc::channel::<Bytes>();
    std::thread::Builder::new()
        .name("stdout".into())
        .spawn(move || {
            let mut out = std::io::stdout().lock();
            for line in rx {
                let ok = out.write_all(&line).and_then(|()| out.flush()).is_ok();
                queued.fetch_sub(line.len(), Ordering::Relaxed);
                if !ok {
                    gone.store(true, Ordering::Relaxed);
                    queued.store(0, Ordering::Relaxed);
                    return;
                }
            }
        })
        .expect("spawning the stdout thread");
    tx
}
