//! Reading a segment: the header eagerly, records lazily, and how the file ends.
//!
//! The reader streams (flat memory whatever the file size) and never fails on damage: it
//! returns the longest valid prefix of records, then reports the end as a [`Tail`]. Only a file
//! that is not a journal at all (or a newer format) is an error.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::event::Event;
use super::format::{Body, DecodeError, Header, Record, decode_header, decode_record};
use super::frames::{BlockDecoder, Step};

/// Longest decompressed line a reader accepts (a hostile length cannot exhaust memory).
pub const MAX_LINE_BYTES: usize = 1 << 30;
/// Lines up to this size are always accepted; a longer one only while the decompressed data
/// stays within [`MAX_EXPANSION`] times the compressed bytes read. A compression bomb (a few
/// KiB of zstd that inflate to GiBs with no newline) is then refused once it has cost 64 MiB,
/// while a genuine huge message (its zstd rarely smaller than a tenth) is read whole.
pub const FREE_LINE_BYTES: usize = 64 << 20;
/// See [`FREE_LINE_BYTES`]: how far a line past that size may outgrow the compressed input.
pub const MAX_EXPANSION: u64 = 256;

/// Whether a line still without its newline, `pending` decompressed bytes long after
/// `compressed` bytes of zstd were read, is past the limits above (damage, not a line to wait for).
pub(super) fn line_too_long(pending: usize, compressed: u64) -> bool {
    pending > MAX_LINE_BYTES
        || (pending > FREE_LINE_BYTES && pending as u64 > MAX_EXPANSION.saturating_mul(compressed))
}

/// The damage [`line_too_long`] reports.
pub(super) fn too_long_reason() -> String {
    format!(
        "line over {FREE_LINE_BYTES} bytes inflated more than {MAX_EXPANSION} times from its zstd, or over {MAX_LINE_BYTES} bytes"
    )
}

/// The checks on a decoded record that both [`SegmentReader`] and [`super::SegmentTail`] make:
/// the record decodes, and its `seq` is not a repeat within the zstd frame (`seen`, cleared when
/// `new_frame`). `Err` is why the segment is damaged from here.
pub(super) fn check_record(
    decoded: Result<Record, DecodeError>,
    seen: &mut std::collections::HashSet<u64>,
    new_frame: bool,
) -> Result<Record, String> {
    if new_frame {
        seen.clear();
    }
    match decoded {
        Ok(record) if !seen.insert(record.seq) => Err(format!(
            "a copy of the earlier record {} (damaged compressed data)",
            record.seq
        )),
        Ok(record) => Ok(record),
        Err(e) => Err(e.to_string()),
    }
}

/// How a segment ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tail {
    /// The writer closed the segment: the last record is the end marker.
    Clean,
    /// The file ends on a record boundary but was never closed: its writer is still running
    /// or was killed. Nothing after the last record was flushed.
    Unfinished,
    /// The file ends inside a record, as after a crash mid-write or a power loss: the partial
    /// record (`bytes` decompressed bytes) is dropped.
    Torn {
        /// Decompressed bytes of the dropped partial record.
        bytes: u64,
    },
    /// Damage: nothing after `offset` (decompressed byte offset) can be trusted.
    Corrupt {
        /// Decompressed byte offset of the first bad line.
        offset: u64,
        /// Index of the first bad record (0 = header).
        record: u64,
        /// What is wrong.
        reason: String,
    },
}

impl Tail {
    /// True when the segment's end loses something (torn or corrupt), as opposed to a clean
    /// close or a writer still running.
    pub fn is_damaged(&self) -> bool {
        matches!(self, Tail::Torn { .. } | Tail::Corrupt { .. })
    }

    /// True when the segment is damaged (not merely unfinished or torn by a crash).
    pub fn is_corrupt(&self) -> bool {
        matches!(self, Tail::Corrupt { .. })
    }
}

impl std::fmt::Display for Tail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tail::Clean => write!(f, "clean"),
            Tail::Unfinished => write!(
                f,
                "unfinished (writer still running or killed; nothing lost)"
            ),
            Tail::Torn { bytes } => {
                write!(f, "torn tail ({bytes} bytes of a partial record dropped)")
            }
            Tail::Corrupt {
                offset,
                record,
                reason,
            } => {
                write!(
                    f,
                    "corrupt at record {record} (decompressed byte {offset}): {reason}"
                )
            }
        }
    }
}

/// Why a file could not be opened as a journal.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The file is not a journal segment (or its header is damaged).
    #[error("{path}: not an acp-journal segment ({reason})")]
    NotAJournal {
        /// The file.
        path: PathBuf,
        /// What was found instead.
        reason: String,
    },
    /// The header announces a newer format.
    #[error("{path}: {source}")]
    Version {
        /// The file.
        path: PathBuf,
        /// The version error.
        source: DecodeError,
    },
}

/// Decompressed lines of a zstd stream, with end-of-input classification.
struct Lines<R: Read> {
    decoder: BlockDecoder<R>,
    buf: Vec<u8>,
    start: usize,
    /// Where `buf[start]` sits in the decompressed stream.
    offset: u64,
    eof: Option<End>,
    /// A zstd frame began since the last line was taken, with no partial line pending.
    new_frame: bool,
}

/// How the decompressed stream ended.
#[derive(Clone, Debug)]
enum End {
    /// All frames complete.
    Complete,
    /// The last frame is incomplete (writer crashed or still writing).
    Truncated,
    /// zstd reported damage.
    Damaged(String),
}

enum Line {
    /// A complete line: `buf[range]` of the [`Lines`], valid until the next call.
    Full(std::ops::Range<usize>),
    /// Input ended; `partial` bytes remained without a newline.
    End {
        partial: u64,
        end: End,
    },
    TooLong,
}

impl<R: Read> Lines<R> {
    fn new(inner: R) -> io::Result<Self> {
        Ok(Lines {
            decoder: BlockDecoder::new(inner)?,
            buf: Vec::with_capacity(64 * 1024),
            start: 0,
            offset: 0,
            eof: None,
            new_frame: false,
        })
    }

    fn next_line(&mut self) -> Line {
        let mut searched = self.start;
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[searched..]) {
                let end = searched + i;
                let line = self.start..end;
                self.offset += (end + 1 - self.start) as u64;
                self.start = end + 1;
                return Line::Full(line);
            }
            searched = self.buf.len();
            let pending = self.buf.len() - self.start;
            if line_too_long(pending, self.decoder.compressed_bytes()) {
                return Line::TooLong;
            }
            if let Some(end) = &self.eof {
                return Line::End {
                    partial: (self.buf.len() - self.start) as u64,
                    end: end.clone(),
                };
            }
            // Compact, then read more.
            if self.start > 0 {
                self.buf.drain(..self.start);
                searched -= self.start;
                self.start = 0;
            }
            let frames = self.decoder.frames();
            let step = self.decoder.step(&mut self.buf);
            if self.decoder.frames() != frames && self.start == self.buf.len() {
                self.new_frame = true;
            }
            match step {
                Step::Data => {}
                Step::Complete => self.eof = Some(End::Complete),
                Step::Truncated => self.eof = Some(End::Truncated),
                Step::Damaged(reason) => self.eof = Some(End::Damaged(reason)),
            }
        }
    }
}

/// A streaming reader over one segment.
pub struct SegmentReader<R: Read> {
    header: Header,
    lines: Lines<R>,
    records: u64,
    last_was_end_marker: bool,
    tail: Option<Tail>,
    /// Sequence numbers of the records of the current zstd frame. A record is written to a
    /// segment once, so a repeated one is damage: a flipped bit in a back-reference can make
    /// zstd copy an earlier line, CRC and all. (Back-references never leave their frame.)
    seen: std::collections::HashSet<u64>,
}

impl SegmentReader<File> {
    /// Open a segment file and read its header.
    ///
    /// # Errors
    /// The file cannot be read, is not a journal, or has a newer format version.
    pub fn open(path: &Path) -> Result<SegmentReader<File>, OpenError> {
        let file = File::open(path).map_err(|source| OpenError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        SegmentReader::new(file).map_err(|e| e.with_path(path))
    }
}

impl SegmentReader<std::io::Take<File>> {
    /// Open a segment file, reading at most its first `limit` bytes (where a fence in the
    /// shared store ends it: see [`super::mark`]).
    ///
    /// # Errors
    /// As [`SegmentReader::open`].
    pub fn open_until(
        path: &Path,
        limit: u64,
    ) -> Result<SegmentReader<std::io::Take<File>>, OpenError> {
        let file = File::open(path).map_err(|source| OpenError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        SegmentReader::new(file.take(limit)).map_err(|e| e.with_path(path))
    }
}

impl OpenError {
    fn with_path(self, path: &Path) -> OpenError {
        match self {
            OpenError::Io { source, .. } => OpenError::Io {
                path: path.into(),
                source,
            },
            OpenError::NotAJournal { reason, .. } => OpenError::NotAJournal {
                path: path.into(),
                reason,
            },
            OpenError::Version { source, .. } => OpenError::Version {
                path: path.into(),
                source,
            },
        }
    }
}

impl<R: Read> SegmentReader<R> {
    /// Read the header from any byte source.
    ///
    /// # Errors
    /// As [`SegmentReader::open`]; the path in errors is empty.
    pub fn new(inner: R) -> Result<SegmentReader<R>, OpenError> {
        let not_journal = |reason: String| OpenError::NotAJournal {
            path: PathBuf::new(),
            reason,
        };
        let mut lines = Lines::new(inner).map_err(|source| OpenError::Io {
            path: PathBuf::new(),
            source,
        })?;
        let header = match lines.next_line() {
            Line::Full(range) => match decode_header(&lines.buf[range]) {
                Ok(h) => h,
                Err(e @ DecodeError::UnsupportedVersion { .. }) => {
                    return Err(OpenError::Version {
                        path: PathBuf::new(),
                        source: e,
                    });
                }
                Err(e) => return Err(not_journal(e.to_string())),
            },
            Line::End {
                end: End::Damaged(e),
                ..
            } => return Err(not_journal(format!("not zstd data: {e}"))),
            Line::End { .. } => return Err(not_journal("no complete header line".into())),
            Line::TooLong => return Err(not_journal("header line too long".into())),
        };
        Ok(SegmentReader {
            header,
            lines,
            records: 0,
            last_was_end_marker: false,
            tail: None,
            seen: std::collections::HashSet::new(),
        })
    }

    /// The segment's header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// How the segment ends; `None` until the iterator is exhausted.
    pub fn tail(&self) -> Option<&Tail> {
        self.tail.as_ref()
    }

    fn corrupt(&mut self, reason: String) {
        self.tail = Some(Tail::Corrupt {
            offset: self.lines.offset,
            record: self.records + 1,
            reason,
        });
    }
}

impl<R: Read> SegmentReader<R> {
    /// The next record whose line contains `needle`, skipping the others without decoding
    /// them (a fast scan for rare records; skipped lines are not checksummed).
    pub fn next_containing(&mut self, needle: &[u8]) -> Option<Record> {
        let finder = memchr::memmem::Finder::new(needle);
        self.next_where(|line| finder.find(line).is_some())
    }

    /// The next record whose stored line (the JSON record, message included) satisfies
    /// `wanted`; the others are skipped without decoding or checksumming.
    pub fn next_where(&mut self, wanted: impl Fn(&[u8]) -> bool) -> Option<Record> {
        loop {
            if self.tail.is_some() {
                return None;
            }
            match self.lines.next_line() {
                Line::Full(range) => {
                    let line = &self.lines.buf[range.clone()];
                    // A skipped end marker still decides how the segment ends.
                    let wanted_line = wanted(line);
                    if wanted_line || memchr::memmem::find(line, END_EVENT).is_some() {
                        let decoded = decode_record(&self.lines.buf[range]);
                        let record = self.accept(decoded)?;
                        if wanted_line {
                            return Some(record);
                        }
                    } else {
                        self.records += 1;
                        self.last_was_end_marker = false;
                    }
                }
                Line::TooLong => {
                    self.corrupt(too_long_reason());
                    return None;
                }
                Line::End { partial, end } => {
                    self.end(partial, end);
                    return None;
                }
            }
        }
    }

    fn end(&mut self, partial: u64, end: End) {
        self.tail = Some(match end {
            End::Damaged(reason) => Tail::Corrupt {
                offset: self.lines.offset,
                record: self.records + 1,
                reason: format!("zstd: {reason}"),
            },
            _ if partial > 0 => Tail::Torn { bytes: partial },
            End::Complete if self.last_was_end_marker => Tail::Clean,
            _ => Tail::Unfinished,
        });
    }

    /// Count a decoded record in, or note why the segment is damaged from here.
    fn accept(&mut self, decoded: Result<Record, DecodeError>) -> Option<Record> {
        let new_frame = std::mem::take(&mut self.lines.new_frame);
        match check_record(decoded, &mut self.seen, new_frame) {
            Ok(record) => {
                self.records += 1;
                self.last_was_end_marker = is_end_marker(&record);
                Some(record)
            }
            Err(reason) => {
                self.corrupt(reason);
                None
            }
        }
    }
}

impl<R: Read> Iterator for SegmentReader<R> {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        self.next_where(|_| true)
    }
}

/// The type of the event the writer appends when it closes a segment, as it appears in a line
/// (a line without it is skipped undecoded by [`SegmentReader::next_where`]).
const END_EVENT: &[u8] = b"segment_end";

/// True for the record a writer appends on close.
pub fn is_end_marker(record: &Record) -> bool {
    matches!(&record.body, Body::Event(Event::SegmentEnd { .. }))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::journal::format::Payload;
    use crate::journal::writer::SegmentWriter;
    use crate::wire::Side;
    use bytes::Bytes;
    use std::io::Read;

    /// A `session/update` record numbered `seq` carrying `text`.
    pub(crate) fn message(seq: u64, text: &str) -> Record {
        Record {
            seq,
            unix_us: 1,
            mono_us: seq,
            body: Body::Message {
                from: Side::Agent,
                payload: Payload::from_line(Bytes::from(format!(
                    r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"n":{seq},"t":"{text}"}}}}"#
                ))),
            },
        }
    }

    /// Writes `n` records, flushing after each, and returns the file bytes and the file length
    /// after each flush.
    fn sample(n: u64, close: bool) -> (Vec<u8>, Vec<usize>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.acpj.zst");
        let mut w = SegmentWriter::create(&path, &crate::journal::writer::tests::header()).unwrap();
        let mut ends = vec![std::fs::metadata(&path).unwrap().len() as usize];
        for seq in 0..n {
            w.append(&message(seq, &"x".repeat((seq as usize * 37) % 200)))
                .unwrap();
            w.flush().unwrap();
            ends.push(std::fs::metadata(&path).unwrap().len() as usize);
        }
        if close {
            w.close(n, 1, n).unwrap();
        }
        (std::fs::read(&path).unwrap(), ends)
    }

    #[test]
    fn closed_segment_reads_clean() {
        let (bytes, _) = sample(20, true);
        let mut r = SegmentReader::new(&bytes[..]).unwrap();
        let n = r.by_ref().filter(|r| !is_end_marker(r)).count();
        assert_eq!(n, 20);
        assert_eq!(r.tail(), Some(&Tail::Clean));
    }

    #[test]
    fn truncation_at_every_offset_returns_the_longest_valid_prefix() {
        let (bytes, ends) = sample(25, false);
        for cut in 0..=bytes.len() {
            let expected = ends.iter().filter(|e| **e <= cut).count();
            match SegmentReader::new(&bytes[..cut]) {
                Err(_) => assert_eq!(expected, 0, "cut {cut}: header was complete"),
                Ok(mut r) => {
                    let got: Vec<u64> = r.by_ref().map(|r| r.seq).collect();
                    assert_eq!(got.len(), expected - 1, "cut {cut}");
                    assert!(got.iter().enumerate().all(|(i, s)| *s == i as u64));
                    assert!(!r.tail().unwrap().is_corrupt(), "cut {cut}: {:?}", r.tail());
                }
            }
        }
    }

    #[test]
    fn bit_flips_are_always_detected() {
        let (bytes, _) = sample(8, true);
        let clean: Vec<Record> = SegmentReader::new(&bytes[..]).unwrap().collect();
        let content = zstd::stream::decode_all(&bytes[..]).unwrap();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            if zstd::stream::decode_all(&bad[..]).ok().as_ref() == Some(&content) {
                continue; // the flip hit a bit zstd ignores: nothing changed
            }
            let Ok(mut r) = SegmentReader::new(&bad[..]) else {
                continue;
            };
            let got: Vec<Record> = r.by_ref().collect();
            // Whatever is returned is a true prefix; the damage is reported.
            assert!(got.len() <= clean.len());
            assert_eq!(&clean[..got.len()], &got[..], "flip at {i}");
            if got.len() == clean.len() {
                assert_ne!(r.tail(), Some(&Tail::Clean), "flip at {i} undetected");
            }
        }
    }

    /// The segments of the sample recordings in `journals/` (real proxy runs in front of the
    /// reference SDK agents).
    fn real_recordings() -> Vec<(PathBuf, Vec<u8>)> {
        fn walk(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            entries.sort();
            for path in entries {
                if path.is_dir() {
                    walk(&path, out);
                } else if path.to_string_lossy().ends_with(".acpj.zst") {
                    let bytes = std::fs::read(&path).unwrap();
                    out.push((path, bytes));
                }
            }
        }
        let mut out = Vec::new();
        walk(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("journals"),
            &mut out,
        );
        assert!(out.len() >= 4, "sample recordings in journals/");
        out
    }

    /// The complete lines the zstd reference decoder gets out of `bytes` (a cut file is
    /// decoded as far as it goes).
    fn reference_lines(bytes: &[u8]) -> usize {
        let mut out = Vec::new();
        if let Ok(mut decoder) = zstd::stream::read::Decoder::new(bytes) {
            let _ = decoder.read_to_end(&mut out);
        }
        out.iter().filter(|b| **b == b'\n').count()
    }

    #[test]
    fn real_recordings_re_encode_byte_for_byte() {
        for (path, bytes) in real_recordings() {
            let mut text = Vec::new();
            zstd::stream::read::Decoder::new(&bytes[..])
                .unwrap()
                .read_to_end(&mut text)
                .unwrap();
            for line in text.split_inclusive(|b| *b == b'\n').skip(1) {
                let record = decode_record(&line[..line.len() - 1]).unwrap();
                let mut out = Vec::new();
                crate::journal::format::encode_record(&record, &mut out);
                assert_eq!(
                    String::from_utf8_lossy(&out),
                    String::from_utf8_lossy(line),
                    "{}",
                    path.display()
                );
            }
        }
    }

    #[test]
    fn real_recordings_cut_anywhere_give_exactly_the_records_they_hold() {
        for (path, bytes) in real_recordings() {
            let mut full = SegmentReader::new(&bytes[..]).unwrap();
            let clean: Vec<Record> = full.by_ref().collect();
            assert_eq!(full.tail(), Some(&Tail::Clean), "{}", path.display());
            for cut in 0..=bytes.len() {
                let lines = reference_lines(&bytes[..cut]);
                let at = || format!("{} cut at {cut} of {}", path.display(), bytes.len());
                match SegmentReader::new(&bytes[..cut]) {
                    Err(_) => assert_eq!(lines, 0, "{}: the header was whole", at()),
                    Ok(mut reader) => {
                        let got: Vec<Record> = reader.by_ref().collect();
                        assert_eq!(got.len() + 1, lines, "{}", at());
                        assert_eq!(got[..], clean[..got.len()], "{}", at());
                        let tail = reader.tail().unwrap();
                        assert!(!tail.is_corrupt(), "{}: {tail}", at());
                        assert_eq!(*tail == Tail::Clean, cut == bytes.len(), "{}", at());
                    }
                }
            }
        }
    }

    #[test]
    fn every_single_bit_flip_in_a_real_recording_is_detected() {
        for (path, bytes) in real_recordings() {
            let mut full = SegmentReader::new(&bytes[..]).unwrap();
            let header = format!("{:?}", full.header());
            let clean: Vec<Record> = full.by_ref().collect();
            let content = zstd::stream::decode_all(&bytes[..]).unwrap();
            for bit in 0..bytes.len() * 8 {
                let mut bad = bytes.clone();
                bad[bit / 8] ^= 1 << (bit % 8);
                let at = || format!("{} bit {bit}", path.display());
                let Ok(mut reader) = SegmentReader::new(&bad[..]) else {
                    continue; // detected: not a journal any more
                };
                assert_eq!(format!("{:?}", reader.header()), header, "{}", at());
                let got: Vec<Record> = reader.by_ref().collect();
                // Never a record that differs: what is returned is a true prefix.
                assert!(got.len() <= clean.len(), "{}", at());
                assert_eq!(got[..], clean[..got.len()], "{}", at());
                // The damage is reported: the segment no longer reads as cleanly closed, unless
                // the flip changed nothing zstd decodes.
                if reader.tail() == Some(&Tail::Clean) {
                    let same = zstd::stream::decode_all(&bad[..]).ok().as_ref() == Some(&content);
                    assert!(same, "{} undetected", at());
                }
            }
        }
    }

    #[test]
    fn records_repeated_across_frames_are_remembered_one_frame_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.acpj.zst");
        let mut w = SegmentWriter::create(&path, &crate::journal::writer::tests::header()).unwrap();
        for seq in 0..3000 {
            w.append(&message(seq, &"y".repeat(900))).unwrap();
            w.flush().unwrap();
        }
        w.close(3000, 1, 3000).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let mut r = SegmentReader::new(&bytes[..]).unwrap();
        assert_eq!(r.by_ref().count(), 3001, "records and the end marker");
        assert_eq!(r.tail(), Some(&Tail::Clean));
        assert!(r.seen.len() < 1200, "one frame's seqs: {}", r.seen.len());
    }

    #[test]
    fn next_containing_skips_to_matching_records_and_still_reports_the_tail() {
        let (bytes, _) = sample(30, true);
        let mut r = SegmentReader::new(&bytes[..]).unwrap();
        let mut seqs = vec![];
        while let Some(rec) = r.next_containing(b"\"n\":1") {
            seqs.push(rec.seq);
        }
        assert_eq!(seqs, [1, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]);
        assert_eq!(r.tail(), Some(&Tail::Clean));
    }

    #[test]
    fn a_compression_bomb_is_refused_once_past_the_free_line_size() {
        use std::io::Write;
        let (mut bytes, _) = sample(1, true);
        // 80 MiB without a newline, in a few KiB of zstd.
        let mut bomb = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..80 {
            bomb.write_all(&chunk).unwrap();
        }
        let bomb = bomb.finish().unwrap();
        assert!((bomb.len() as u64 + bytes.len() as u64) * MAX_EXPANSION < 80 << 20);
        bytes.extend(bomb);
        let mut r = SegmentReader::new(&bytes[..]).unwrap();
        assert_eq!(
            r.by_ref().count(),
            2,
            "the records before the bomb are kept"
        );
        assert!(
            matches!(r.tail(), Some(Tail::Corrupt { reason, .. }) if reason.contains("inflated")),
            "{:?}",
            r.tail()
        );
    }

    #[test]
    fn garbage_is_not_a_journal() {
        assert!(matches!(
            SegmentReader::new(&b"hello world"[..]),
            Err(OpenError::NotAJournal { .. })
        ));
        let plain = zstd::stream::encode_all(&b"{\"a\":1}\n"[..], 3).unwrap();
        assert!(matches!(
            SegmentReader::new(&plain[..]),
            Err(OpenError::NotAJournal { .. })
        ));
    }
}
