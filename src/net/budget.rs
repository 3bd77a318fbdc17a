//! What a socket may send before it shows the token: at most [`BYTES`] bytes and, over HTTP/2,
//! [`FRAMES`] frames ([`Budget`]). Past either, the socket is closed. A client with the token
//! needs a fraction of it (a TLS handshake, one request's head, a few frames: `SETTINGS`, its
//! acknowledgement, `WINDOW_UPDATE`, `HEADERS`); a socket that floods the server with
//! `PING`s, `SETTINGS` or any other frame it must parse and answer gets that many answers and
//! no more, whatever its rate, so unauthenticated work cannot starve the server's one thread.
//! Once the socket has shown the token, nothing is counted.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::sockets::Pass;

/// Bytes a socket may send before it shows the token (TLS records included): room for a TLS
/// handshake, a request head at its limit ([`super::MAX_HEAD`]) and HTTP/2 windows of body.
pub(super) const BYTES: usize = 256 * 1024;

/// HTTP/2 frames a socket may send before it shows the token (the page's assets, fetched
/// without it, take a few dozen).
pub(super) const FRAMES: usize = 256;

/// The HTTP/2 client preface, before the first frame.
const PREFACE: usize = 24;

/// A socket's stream, counted until its [`Pass`] is authenticated.
pub(super) struct Budget<S> {
    inner: S,
    pass: Arc<Pass>,
    bytes: usize,
    /// HTTP/2 framing, when the socket speaks it.
    frames: Option<Frames>,
}

/// Where the reader is in the HTTP/2 byte stream: the preface, a frame's 9-byte header, or a
/// frame's payload.
struct Frames {
    count: usize,
    /// Bytes of the preface still to come.
    preface: usize,
    header: [u8; 9],
    /// Bytes of `header` read.
    have: usize,
    /// Bytes of the current frame's payload still to come.
    payload: usize,
}

impl Frames {
    fn new() -> Frames {
        Frames {
            count: 0,
            preface: PREFACE,
            header: [0; 9],
            have: 0,
            payload: 0,
        }
    }

    /// Count the frames that start in `bytes`.
    fn read(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let skip = if self.preface > 0 {
                let n = self.preface.min(bytes.len());
                self.preface -= n;
                n
            } else if self.payload > 0 {
                let n = self.payload.min(bytes.len());
                self.payload -= n;
                n
            } else {
                let n = (9 - self.have).min(bytes.len());
                self.header[self.have..self.have + n].copy_from_slice(&bytes[..n]);
                self.have += n;
                if self.have == 9 {
                    self.have = 0;
                    self.count += 1;
                    let [a, b, c, ..] = self.header;
                    self.payload = usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c);
                }
                n
            };
            bytes = &bytes[skip..];
        }
    }
}

impl<S> Budget<S> {
    /// `inner`, counted for `pass`; its frames counted too when it speaks HTTP/2 (`h2`).
    pub(super) fn new(inner: S, pass: Arc<Pass>, h2: bool) -> Budget<S> {
        Budget {
            inner,
            pass,
            bytes: 0,
            frames: h2.then(Frames::new),
        }
    }

    /// Count `bytes` just read; false once past the budget (before the token was shown).
    fn count(&mut self, bytes: &[u8]) -> bool {
        if self.pass.is_authenticated() {
            self.frames = None;
            return true;
        }
        self.bytes = self.bytes.saturating_add(bytes.len());
        if let Some(frames) = &mut self.frames {
            frames.read(bytes);
            if frames.count > FRAMES {
                return false;
            }
        }
        self.bytes <= BYTES
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Budget<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if this.count(&buf.filled()[before..]) {
                    Poll::Ready(Ok(()))
                } else {
                    Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        "sent more than a socket without the token may",
                    )))
                }
            }
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Budget<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_counted_across_reads_of_any_size() {
        let ping = [0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
        let settings = [0, 0, 0, 4, 0, 0, 0, 0, 0];
        let mut stream = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        for _ in 0..10 {
            stream.extend_from_slice(&ping);
            stream.extend_from_slice(&settings);
        }
        for chunk in [1, 2, 7, 9, 17, 1000] {
            let mut frames = Frames::new();
            for piece in stream.chunks(chunk) {
                frames.read(piece);
            }
            assert_eq!(frames.count, 20, "read {chunk} bytes at a time");
        }
    }
}
