//! Shared by the journal targets: read a segment the way every command does and check what
//! any reader of it may rely on.

use acp_journal::journal::format::{decode_record, encode_record};
use acp_journal::journal::{Record, SegmentReader};
use acp_journal::render::{Style, Transcript};

/// Records kept for the prefix check: a small input can inflate to millions of records, and
/// the harness, not the reader, would then run out of memory.
const KEEP: usize = 4096;

/// The first [`KEEP`] records of a segment (none when it has no readable header), after
/// checking that the reader ends with a tail, that each record reads back as written and
/// renders.
pub fn read(bytes: &[u8]) -> Vec<Record> {
    let Ok(mut reader) = SegmentReader::new(bytes) else {
        return vec![];
    };
    let mut records = vec![];
    let mut transcript = Transcript::new(std::io::sink(), Style::Plain);
    for record in reader.by_ref() {
        let mut line = Vec::new();
        encode_record(&record, &mut line);
        let back = decode_record(&line[..line.len() - 1]).expect("a record read re-encodes");
        assert_eq!(back, record, "a record changed through re-encoding");
        transcript.record(&record).expect("rendering to a sink");
        if records.len() < KEEP {
            records.push(record);
        }
    }
    assert!(
        reader.tail().is_some(),
        "an exhausted reader reports how the segment ends"
    );
    transcript.finish().expect("rendering to a sink");
    records
}

/// Reading a prefix of a segment returns a prefix of its records (what a crash leaves is
/// never misread), checked at `cut` (taken modulo the length) on the records kept.
pub fn check_prefix(bytes: &[u8], full: &[Record], cut: usize) {
    if bytes.is_empty() {
        return;
    }
    let part = read(&bytes[..cut % bytes.len()]);
    assert!(
        part.len() <= full.len(),
        "a prefix of the file gave more records"
    );
    assert_eq!(
        &full[..part.len()],
        &part[..],
        "a prefix of the file gave other records"
    );
}
