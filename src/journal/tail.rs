//! Following a segment while its writer appends to it (`acp-journal watch`).
//!
//! A [`SegmentTail`] decodes what is complete in the file, remembers where it stopped, and goes
//! on from there once more bytes arrive: the same block-at-a-time zstd decoding and the same
//! record checks as [`super::SegmentReader`], but an input that ends (inside a zstd unit, a
//! frame or a line) means "wait for more" ([`Next::Pending`]) instead of the end of the data.
//! A live segment always ends in an unfinished frame; only real damage (zstd errors, a bad
//! CRC, a repeated record, a line too long) ends it early. Memory stays flat: decoded lines are
//! dropped once handed out, and one zstd frame's `seq`s are remembered.

use std::collections::HashSet;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::format::{DecodeError, Header, Record, decode_header, decode_record};
use super::frames::{BlockDecoder, Step};
use super::reader::{OpenError, Tail, check_record, is_end_marker, line_too_long, too_long_reason};

/// What [`SegmentTail::poll`] found.
#[derive(Debug)]
pub enum Next {
    /// The next record (the end marker included, as [`super::SegmentReader`] hands it out).
    Record(Record),
    /// Nothing more is complete yet: wait for the file to grow.
    Pending,
    /// Nothing will follow: the segment was closed ([`Tail::Clean`]) or is damaged here
    /// ([`Tail::Corrupt`]).
    End(Tail),
}

/// The bytes a tail reads: the file as it grows, or only as much of it as a shared count says
/// may be read yet.
struct Source {
    file: File,
    read: u64,
    within: Option<Arc<AtomicU64>>,
}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let room = match &self.within {
            Some(within) => {
                let room = within.load(Ordering::Acquire).saturating_sub(self.read);
                usize::try_from(room).unwrap_or(usize::MAX).min(buf.len())
            }
            None => buf.len(),
        };
        if room == 0 {
            return Ok(0);
        }
        let got = self.file.read(&mut buf[..room])?;
        self.read += got as u64;
        Ok(got)
    }
}

/// A segment being followed as it grows.
pub struct SegmentTail {
    path: PathBuf,
    decoder: BlockDecoder<Source>,
    /// Decompressed bytes not yet handed out as lines, from `start`.
    buf: Vec<u8>,
    start: usize,
    /// `buf[start..scanned]` holds no newline.
    scanned: usize,
    /// Where `buf[start]` sits in the decompressed stream.
    offset: u64,
    header: Option<Header>,
    records: u64,
    last_was_end_marker: bool,
    /// The input read so far ends at a zstd frame boundary.
    at_frame_end: bool,
    /// A frame began since the last line was taken, with no partial line pending.
    new_frame: bool,
    /// The current frame's `seq`s (a repeat is damage, as in the reader).
    seen: HashSet<u64>,
    end: Option<Tail>,
}

impl SegmentTail {
    /// Open a segment to follow, and read its header if it is there yet.
    ///
    /// # Errors
    /// The file cannot be opened, or its header shows it is not a journal (or a newer format).
    pub fn open(path: &Path) -> Result<SegmentTail, OpenError> {
        SegmentTail::open_source(path, None)
    }

    /// Open a segment to follow only as far as `within` says (its first bytes, a count that
    /// grows): what lies past it is read as if not written yet.
    ///
    /// # Errors
    /// As [`SegmentTail::open`].
    pub fn open_within(path: &Path, within: Arc<AtomicU64>) -> Result<SegmentTail, OpenError> {
        SegmentTail::open_source(path, Some(within))
    }

    fn open_source(path: &Path, within: Option<Arc<AtomicU64>>) -> Result<SegmentTail, OpenError> {
        let io = |source| OpenError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let source = Source {
            file,
            read: 0,
            within,
        };
        let mut tail = SegmentTail {
            path: path.to_path_buf(),
            decoder: BlockDecoder::new(source).map_err(io)?,
            buf: Vec::with_capacity(64 * 1024),
            start: 0,
            scanned: 0,
            offset: 0,
            header: None,
            records: 0,
            last_was_end_marker: false,
            at_frame_end: false,
            new_frame: false,
            seen: HashSet::new(),
            end: None,
        };
        if let Err(e) = tail.read_header() {
            return Err(match e {
                e @ DecodeError::UnsupportedVersion { .. } => OpenError::Version {
                    path: path.to_path_buf(),
                    source: e,
                },
                e => OpenError::NotAJournal {
                    path: path.to_path_buf(),
                    reason: e.to_string(),
                },
            });
        }
        Ok(tail)
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The segment's header, once its line is complete (on Linux a segment appears in the
    /// journal directory with its header whole).
    pub fn header(&self) -> Option<&Header> {
        self.header.as_ref()
    }

    /// Records handed out so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Decode the header line if it is complete; `Ok` when it is not there yet.
    fn read_header(&mut self) -> Result<(), DecodeError> {
        if self.header.is_some() {
            return Ok(());
        }
        match self.line() {
            Some(Ok(range)) => {
                let header = decode_header(&self.buf[range]);
                self.header = Some(header?);
                Ok(())
            }
            Some(Err(tail)) => Err(DecodeError::Malformed(tail.to_string())),
            None => Ok(()),
        }
    }

    /// The next record if one is complete.
    pub fn poll(&mut self) -> Next {
        if let Some(end) = &self.end {
            return Next::End(end.clone());
        }
        if self.header.is_none() {
            if let Err(e) = self.read_header() {
                self.corrupt(format!("not a journal header: {e}"));
                return self.poll();
            }
            if self.header.is_none() {
                return Next::Pending;
            }
        }
        match self.line() {
            Some(Ok(range)) => {
                let decoded = decode_record(&self.buf[range]);
                self.accept(decoded)
            }
            Some(Err(tail)) => {
                self.end = Some(tail);
                self.poll()
            }
            None if self.last_was_end_marker && self.at_frame_end && self.pending() == 0 => {
                self.end = Some(Tail::Clean);
                self.poll()
            }
            None => Next::Pending,
        }
    }

    /// How the segment ends if nothing more is ever written to it (its writer is gone): what a
    /// [`super::SegmentReader`] over the file as it stands would report after the records
    /// handed out so far. Call once [`SegmentTail::poll`] says [`Next::Pending`].
    pub fn give_up(&mut self) -> Tail {
        if let Some(end) = &self.end {
            return end.clone();
        }
        let tail = match self.pending() {
            0 if self.last_was_end_marker && self.at_frame_end => Tail::Clean,
            0 => Tail::Unfinished,
            bytes => Tail::Torn {
                bytes: bytes as u64,
            },
        };
        self.end = Some(tail.clone());
        tail
    }

    /// Decompressed bytes of a partial line.
    fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The next complete line (its range in `buf`), `None` when the input ran out first, or the
    /// damage that ends the segment.
    fn line(&mut self) -> Option<Result<std::ops::Range<usize>, Tail>> {
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[self.scanned..]) {
                let end = self.scanned + i;
                let line = self.start..end;
                self.offset += (end + 1 - self.start) as u64;
                self.start = end + 1;
                self.scanned = self.start;
                return Some(Ok(line));
            }
            self.scanned = self.buf.len();
            let pending = self.pending();
            if line_too_long(pending, self.decoder.compressed_bytes()) {
                return Some(Err(self.damage(too_long_reason())));
            }
            if self.start > 0 {
                self.buf.drain(..self.start);
                self.scanned -= self.start;
                self.start = 0;
            }
            let frames = self.decoder.frames();
            let step = self.decoder.step(&mut self.buf);
            if self.decoder.frames() != frames && self.start == self.buf.len() {
                self.new_frame = true;
            }
            self.at_frame_end = matches!(step, Step::Complete);
            match step {
                Step::Data => {}
                Step::Complete | Step::Truncated => return None,
                Step::Damaged(reason) => return Some(Err(self.damage(format!("zstd: {reason}")))),
            }
        }
    }

    fn damage(&self, reason: String) -> Tail {
        Tail::Corrupt {
            offset: self.offset,
            record: self.records + 1,
            reason,
        }
    }

    fn corrupt(&mut self, reason: String) {
        self.end = Some(self.damage(reason));
    }

    /// Count a decoded record in, or note why the segment is damaged from here (as the reader).
    fn accept(&mut self, decoded: Result<Record, DecodeError>) -> Next {
        let new_frame = std::mem::take(&mut self.new_frame);
        match check_record(decoded, &mut self.seen, new_frame) {
            Ok(record) => {
                self.records += 1;
                self.last_was_end_marker = is_end_marker(&record);
                Next::Record(record)
            }
            Err(reason) => {
                self.corrupt(reason);
                self.poll()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::SegmentReader;
    use crate::journal::format::encode_record;
    use crate::journal::writer::SegmentWriter;
    use std::io::Write;

    fn message(seq: u64, size: usize) -> Record {
        // Varied text, so zstd cannot shrink a frame's worth to nothing.
        let text: String = (0..size)
            .map(|i| char::from(b'a' + ((i as u64 * 7 + seq * 13) % 26) as u8))
            .collect();
        crate::journal::reader::tests::message(seq, &text)
    }

    fn encoded(records: &[Record]) -> Vec<u8> {
        let mut out = Vec::new();
        for r in records {
            encode_record(r, &mut out);
        }
        out
    }

    /// Every record complete so far; panics on an end.
    fn drain(tail: &mut SegmentTail, into: &mut Vec<Record>) {
        loop {
            match tail.poll() {
                Next::Record(r) => into.push(r),
                Next::Pending => return,
                Next::End(end) => panic!("ended early: {end}"),
            }
        }
    }

    fn full_read(path: &Path) -> (Vec<Record>, Tail) {
        let mut reader = SegmentReader::open(path).unwrap();
        let records: Vec<Record> = reader.by_ref().collect();
        (records, reader.tail().unwrap().clone())
    }

    #[test]
    fn a_tail_within_a_count_reads_no_further_than_it_and_goes_on_as_it_grows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.acpj.zst");
        let mut w = SegmentWriter::create(&path, &crate::journal::writer::tests::header()).unwrap();
        let mut written = Vec::new();
        let mut ends = Vec::new();
        for seq in 0..300 {
            let record = message(seq, 500 + (seq as usize * 37) % 3000);
            w.append(&record).unwrap();
            written.push(record);
            w.flush().unwrap();
            ends.push(std::fs::metadata(&path).unwrap().len());
        }
        w.close(300, 1, 300).unwrap();
        let whole = std::fs::metadata(&path).unwrap().len();
        let within = Arc::new(AtomicU64::new(0));
        let mut tail = SegmentTail::open_within(&path, within.clone()).unwrap();
        assert!(tail.header().is_none(), "nothing may be read yet");
        assert!(matches!(tail.poll(), Next::Pending));
        let mut got = Vec::new();
        // As far as each flush's end: exactly the records flushed by then, never one more.
        for (n, &end) in ends.iter().enumerate().step_by(7) {
            within.store(end, Ordering::Release);
            drain(&mut tail, &mut got);
            assert_eq!(got.len(), n + 1, "within {end} bytes");
        }
        within.store(whole, Ordering::Release);
        let end = loop {
            match tail.poll() {
                Next::Record(r) => got.push(r),
                Next::Pending => panic!("the whole file ends"),
                Next::End(end) => break end,
            }
        };
        assert_eq!(end, Tail::Clean);
        assert_eq!(encoded(&got[..300]), encoded(&written), "byte for byte");
    }

    #[test]
    fn a_tail_read_between_writes_equals_a_full_read_across_frame_rolls() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.acpj.zst");
        let mut w = SegmentWriter::create(&path, &crate::journal::writer::tests::header()).unwrap();
        let mut tail = SegmentTail::open(&path).unwrap();
        assert!(tail.header().is_some());
        let mut got = Vec::new();
        let mut written = Vec::new();
        // ~3.5 MiB of records: at least three frame rolls, each flush read at once.
        for seq in 0..1800 {
            let record = message(seq, 1000 + (seq as usize * 37) % 2000);
            w.append(&record).unwrap();
            written.push(record);
            if seq % 3 != 0 {
                w.flush().unwrap();
                drain(&mut tail, &mut got);
                assert_eq!(got.len(), written.len(), "record {seq} seen once flushed");
            }
        }
        w.flush().unwrap();
        drain(&mut tail, &mut got);
        assert!(matches!(tail.poll(), Next::Pending), "a live segment waits");
        w.close(1800, 1, 1800).unwrap();
        let end = loop {
            match tail.poll() {
                Next::Record(r) => got.push(r),
                Next::Pending => panic!("a closed segment ends"),
                Next::End(end) => break end,
            }
        };
        assert_eq!(end, Tail::Clean);
        let (full, end) = full_read(&path);
        assert_eq!(end, Tail::Clean);
        assert_eq!(encoded(&got), encoded(&full), "byte for byte");
        assert_eq!(got.len(), 1801);
        assert!(
            tail.seen.len() < 1200,
            "one frame's seqs: {}",
            tail.seen.len()
        );
    }

    /// The bytes of a segment written record by record, and the file length after each flush.
    fn written(n: u64) -> (Vec<u8>, Vec<usize>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.acpj.zst");
        let mut w = SegmentWriter::create(&path, &crate::journal::writer::tests::header()).unwrap();
        let mut ends = vec![];
        for seq in 0..n {
            // Big enough that some flushes roll a frame.
            w.append(&message(seq, 30_000 + (seq as usize * 7919) % 60_000))
                .unwrap();
            w.flush().unwrap();
            ends.push(std::fs::metadata(&path).unwrap().len() as usize);
        }
        w.close(n, 1, n).unwrap();
        (std::fs::read(&path).unwrap(), ends)
    }

    #[test]
    fn torn_partial_writes_wait_for_the_rest_and_lose_nothing() {
        let (bytes, ends) = written(60);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.acpj.zst");
        let mut file = std::fs::File::create(&path).unwrap();
        // Every write cut in pieces at odd places (inside a frame header, a block header, a
        // block), the header's included: a reader may see any prefix of a write.
        let mut cuts = vec![];
        let mut prev = 0;
        for &end in &ends {
            let span = end - prev;
            for piece in [1, 3, 5, 9, span / 2, span - 1] {
                if piece > 0 && piece < span && prev + piece > *cuts.last().unwrap_or(&0) {
                    cuts.push(prev + piece);
                }
            }
            cuts.push(end);
            prev = end;
        }
        cuts.push(bytes.len());
        file.write_all(&bytes[..1]).unwrap();
        let mut at = 1;
        let mut tail = SegmentTail::open(&path).unwrap();
        assert!(tail.header().is_none());
        let mut got = Vec::new();
        for cut in cuts {
            if cut <= at {
                continue;
            }
            file.write_all(&bytes[at..cut]).unwrap();
            at = cut;
            loop {
                match tail.poll() {
                    Next::Record(r) => got.push(r),
                    Next::Pending => break,
                    Next::End(end) => {
                        assert_eq!(at, bytes.len(), "ended at {at}: {end}");
                        assert_eq!(end, Tail::Clean);
                        break;
                    }
                }
            }
            if tail.header().is_none() {
                continue;
            }
            // Exactly the complete records a full read of the cut file gives.
            let (so_far, end) = full_read(&path);
            assert!(!end.is_corrupt(), "cut {cut}: {end}");
            assert_eq!(got.len(), so_far.len(), "cut {cut}");
        }
        let (full, end) = full_read(&path);
        assert_eq!(end, Tail::Clean);
        assert_eq!(encoded(&got), encoded(&full));
        assert_eq!(got.len(), 61);
    }

    #[test]
    fn a_writer_gone_mid_record_gives_the_tail_a_full_read_gives() {
        let (bytes, ends) = written(5);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.acpj.zst");
        // Cut inside the last record's write: the zstd block whole but the line unfinished is
        // not possible with our writer (a flush ends the line), so cut a block in half: the
        // segment is unfinished, the partial block dropped.
        let cut = ends[3] + (ends[4] - ends[3]) / 2;
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let mut tail = SegmentTail::open(&path).unwrap();
        let mut got = Vec::new();
        drain(&mut tail, &mut got);
        let (full, end) = full_read(&path);
        assert_eq!(encoded(&got), encoded(&full));
        assert_eq!(tail.give_up(), end);
        assert_eq!(end, Tail::Unfinished);
    }

    #[test]
    fn damage_is_reported_as_the_reader_reports_it() {
        let (mut bytes, ends) = written(6);
        let at = ends[2] + 40;
        bytes[at] ^= 0x55;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.acpj.zst");
        std::fs::write(&path, &bytes).unwrap();
        let mut tail = SegmentTail::open(&path).unwrap();
        let mut got = Vec::new();
        let end = loop {
            match tail.poll() {
                Next::Record(r) => got.push(r),
                Next::Pending => break tail.give_up(),
                Next::End(end) => break end,
            }
        };
        let (full, full_end) = full_read(&path);
        assert_eq!(encoded(&got), encoded(&full));
        assert_eq!(end, full_end);
        assert!(end.is_corrupt(), "{end}");
    }
}
