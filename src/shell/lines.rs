//! Splitting a byte stream into whole lines, zero-copy, with no length cap.
//!
//! Lines are handed out as [`Bytes`] *including* their `\n` (and any `\r`), so forwarding them
//! is byte-exact for free. No UTF-8 check, no CR stripping, no maximum length: a line is held
//! until its newline arrives, whatever its size.

use bytes::{Bytes, BytesMut};

/// Accumulates bytes and yields complete lines.
#[derive(Debug, Default)]
pub struct LineSplitter {
    buf: BytesMut,
    /// Bytes of `buf` already searched for a newline.
    searched: usize,
}

impl LineSplitter {
    /// An empty splitter.
    pub fn new() -> LineSplitter {
        LineSplitter {
            buf: BytesMut::with_capacity(64 * 1024),
            searched: 0,
        }
    }

    /// The buffer to read into: reserve room and read into its spare capacity
    /// (`tokio::io::AsyncReadExt::read_buf` does this).
    pub fn buffer(&mut self) -> &mut BytesMut {
        if self.buf.capacity() - self.buf.len() < 16 * 1024 {
            // Grow geometrically with the pending line so a huge line costs O(n) copies.
            let want = (self.buf.len()).max(64 * 1024);
            self.buf.reserve(want);
        }
        &mut self.buf
    }

    /// Append bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete line, terminator included.
    pub fn next_line(&mut self) -> Option<Bytes> {
        match memchr::memchr(b'\n', &self.buf[self.searched..]) {
            Some(i) => {
                let end = self.searched + i + 1;
                self.searched = 0;
                Some(self.buf.split_to(end).freeze())
            }
            None => {
                self.searched = self.buf.len();
                None
            }
        }
    }

    /// At end of stream: the final bytes that had no newline, if any.
    pub fn finish(&mut self) -> Option<Bytes> {
        self.searched = 0;
        (!self.buf.is_empty()).then(|| self.buf.split().freeze())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_keeping_terminators() {
        let mut s = LineSplitter::new();
        s.push(b"a\r\nbb");
        assert_eq!(s.next_line().unwrap(), &b"a\r\n"[..]);
        assert_eq!(s.next_line(), None);
        s.push(b"b\n\nc");
        assert_eq!(s.next_line().unwrap(), &b"bbb\n"[..]);
        assert_eq!(s.next_line().unwrap(), &b"\n"[..]);
        assert_eq!(s.next_line(), None);
        assert_eq!(s.finish().unwrap(), &b"c"[..]);
        assert_eq!(s.finish(), None);
    }

    #[test]
    fn a_huge_line_arrives_whole() {
        let mut s = LineSplitter::new();
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..20 {
            s.push(&chunk);
            assert_eq!(s.next_line(), None);
        }
        s.push(b"\n");
        assert_eq!(s.next_line().unwrap().len(), 20 * (1 << 20) + 1);
    }
}
