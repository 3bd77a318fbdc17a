//! Appending records to one segment file.
//!
//! One zstd stream per file at level 1 (zstd's fast strategy: on the relay's flood it costs
//! about 40 % less CPU than level 3 for about 3.5 % more bytes, docs/BENCHMARKS.md).
//! [`SegmentWriter::append`] compresses a record into a
//! staging buffer; [`SegmentWriter::flush`] ends the zstd block and hands every staged byte to
//! the kernel with a single `write(2)`, so once `flush` returns, a kill -9 of the process loses
//! nothing appended so far. Frames are ended and a new one begun about every
//! [`FRAME_ROLL_BYTES`] of uncompressed data, which bounds the damage of a corrupt byte and gives
//! readers resynchronisation points. The writer never reopens a file: a crashed segment stays as
//! it is and a later run starts a new one.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use zstd::stream::raw::{InBuffer, Operation, OutBuffer};

use super::event::Event;
use super::format::{Body, Header, Record, encode_header, encode_record};

/// zstd compression level: the fastest of zstd's positive levels, since every relayed line is
/// compressed before it is forwarded (DESIGN §3 chose 3; see the module doc).
pub const ZSTD_LEVEL: i32 = 1;
/// A frame is ended once it holds this many uncompressed bytes.
pub const FRAME_ROLL_BYTES: u64 = 1 << 20;

/// Statistics of a segment, kept up to date by the writer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentStats {
    /// Records written (the header not counted).
    pub records: u64,
    /// Uncompressed bytes (header included).
    pub raw_bytes: u64,
    /// Bytes in the file.
    pub file_bytes: u64,
}

/// An open segment being appended to.
pub struct SegmentWriter {
    file: File,
    path: PathBuf,
    encoder: zstd::stream::raw::Encoder<'static>,
    /// Uncompressed bytes of the record being encoded (reused).
    scratch: Vec<u8>,
    /// Compressed bytes not yet handed to the kernel.
    staged: Vec<u8>,
    frame_bytes: u64,
    stats: SegmentStats,
    unsynced: bool,
}

impl SegmentWriter {
    /// Create `path` (which must not exist) with mode 0600 and write `header` to it.
    ///
    /// # Errors
    /// Any I/O error creating or writing the file; `AlreadyExists` if the path is taken.
    pub fn create(path: &Path, header: &Header) -> io::Result<SegmentWriter> {
        SegmentWriter::with_file(super::private::create_private_file(path)?, path, header)
    }

    /// Start a segment in `file` (new and empty, at `path`) by writing `header` to it.
    ///
    /// # Errors
    /// Any I/O error writing the file.
    pub fn with_file(file: File, path: &Path, header: &Header) -> io::Result<SegmentWriter> {
        let mut writer = SegmentWriter {
            file,
            path: path.to_path_buf(),
            encoder: zstd::stream::raw::Encoder::new(ZSTD_LEVEL)?,
            scratch: Vec::with_capacity(4096),
            staged: Vec::with_capacity(4096),
            frame_bytes: 0,
            stats: SegmentStats::default(),
            unsynced: false,
        };
        let mut first = Vec::new();
        encode_header(header, &mut first);
        writer.compress(&first)?;
        writer.flush()?;
        Ok(writer)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Record the file's name once it was given one ([`super::JournalDir::create_segment_writer`]).
    pub(crate) fn set_path(&mut self, path: PathBuf) {
        self.path = path;
    }

    /// Current statistics.
    pub fn stats(&self) -> SegmentStats {
        self.stats
    }

    /// Compress one record into the staging buffer. Nothing reaches the file before
    /// [`SegmentWriter::flush`].
    ///
    /// # Errors
    /// A zstd error (out of memory).
    pub fn append(&mut self, record: &Record) -> io::Result<()> {
        let mut scratch = std::mem::take(&mut self.scratch);
        encode_record(record, &mut scratch);
        let result = self.append_encoded(&scratch, 1);
        scratch.clear();
        self.scratch = scratch;
        result
    }

    /// Compress `records` records already encoded as lines ([`encode_record`]), so the encoding
    /// can happen on another thread than the compression.
    ///
    /// # Errors
    /// A zstd error (out of memory).
    pub fn append_encoded(&mut self, lines: &[u8], records: u64) -> io::Result<()> {
        self.stats.records += records;
        self.compress(lines)
    }

    fn compress(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stats.raw_bytes += bytes.len() as u64;
        self.frame_bytes += bytes.len() as u64;
        let mut input = InBuffer::around(bytes);
        while input.pos() < bytes.len() {
            reserve_for(&mut self.staged, bytes.len() - input.pos());
            let pos = self.staged.len();
            let mut output = OutBuffer::around_pos(&mut self.staged, pos);
            self.encoder.run(&mut input, &mut output)?;
        }
        Ok(())
    }

    /// End the current zstd block (or frame, past [`FRAME_ROLL_BYTES`]) and write every staged
    /// byte to the file with one `write(2)`.
    ///
    /// # Errors
    /// I/O errors from zstd or the file; the staged bytes are kept for a later attempt.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.frame_bytes >= FRAME_ROLL_BYTES {
            self.end_frame()?;
        } else {
            loop {
                reserve_for(&mut self.staged, 64);
                let pos = self.staged.len();
                let mut output = OutBuffer::around_pos(&mut self.staged, pos);
                let remaining = self.encoder.flush(&mut output)?;
                if remaining == 0 {
                    break;
                }
            }
        }
        self.write_staged()
    }

    fn end_frame(&mut self) -> io::Result<()> {
        loop {
            reserve_for(&mut self.staged, 64);
            let pos = self.staged.len();
            let mut output = OutBuffer::around_pos(&mut self.staged, pos);
            let remaining = self.encoder.finish(&mut output, true)?;
            if remaining == 0 {
                break;
            }
        }
        self.encoder.reinit()?;
        self.frame_bytes = 0;
        Ok(())
    }

    fn write_staged(&mut self) -> io::Result<()> {
        if self.staged.is_empty() {
            return Ok(());
        }
        self.file.write_all(&self.staged)?;
        self.stats.file_bytes += self.staged.len() as u64;
        self.staged.clear();
        self.unsynced = true;
        Ok(())
    }

    /// `fdatasync` the file if anything was written since the last sync.
    ///
    /// # Errors
    /// The sync's I/O error.
    pub fn sync(&mut self) -> io::Result<()> {
        if self.unsynced {
            self.file.sync_data()?;
            self.unsynced = false;
        }
        Ok(())
    }

    /// A second handle on the file, to `fdatasync` it from another thread, when something was
    /// written since the last sync; the sync is then counted as done (a failure of it is the
    /// caller's to report).
    ///
    /// # Errors
    /// Duplicating the file descriptor.
    pub fn sync_handle(&mut self) -> Option<io::Result<File>> {
        if !self.unsynced {
            return None;
        }
        self.unsynced = false;
        Some(self.file.try_clone())
    }

    /// Append the end marker (a `segment_end` event stamped with `seq`/`unix_us`/`mono_us`), end
    /// the frame, write it out and sync: the file is then a complete zstd stream that readers
    /// report as clean.
    ///
    /// # Errors
    /// I/O errors; the file then stays as an unfinished segment readers can still salvage.
    pub fn close(mut self, seq: u64, unix_us: i64, mono_us: u64) -> io::Result<SegmentStats> {
        let records = self.stats.records;
        self.append(&Record {
            seq,
            unix_us,
            mono_us,
            body: Body::Event(Event::SegmentEnd { records }),
        })?;
        self.end_frame()?;
        self.write_staged()?;
        self.sync()?;
        Ok(SegmentStats {
            records,
            ..self.stats
        })
    }
}

/// Make sure `buf` has room for at least `want` more bytes plus zstd's block overhead.
fn reserve_for(buf: &mut Vec<u8>, want: usize) {
    let need = zstd::zstd_safe::compress_bound(want).max(256);
    if buf.capacity() - buf.len() < need {
        buf.reserve(need);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::journal::format::{FORMAT_VERSION, Payload, SegmentKind};
    use crate::wire::Side;
    use bytes::Bytes;

    pub(crate) fn header() -> Header {
        Header {
            acpj: FORMAT_VERSION,
            kind: SegmentKind::Connection,
            session: None,
            run: "run".into(),
            proxy: "test".into(),
            started: 0,
            pid: 1,
            argv: vec![],
            cwd: None,
            connection: None,
            initialize: None,
        }
    }

    #[test]
    fn output_is_a_zstd_stream_of_json_lines_and_rolls_frames() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg.acpj.zst");
        let mut w = SegmentWriter::create(&path, &header()).unwrap();
        let big = format!(r#"{{"x":"{}"}}"#, "y".repeat(300_000));
        for seq in 0..10 {
            w.append(&Record {
                seq,
                unix_us: 0,
                mono_us: seq,
                body: Body::Message {
                    from: Side::Client,
                    payload: Payload::from_line(Bytes::from(big.clone())),
                },
            })
            .unwrap();
            w.flush().unwrap();
        }
        let stats = w.close(10, 0, 10).unwrap();
        assert_eq!(stats.records, 10);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len() as u64, stats.file_bytes);
        let frames = bytes
            .windows(4)
            .filter(|w| *w == [0x28, 0xb5, 0x2f, 0xfd])
            .count();
        assert!(frames >= 2, "frames rolled: {frames}");
        let text = zstd::stream::decode_all(&bytes[..]).unwrap();
        assert_eq!(text.iter().filter(|b| **b == b'\n').count(), 12);
    }
}
