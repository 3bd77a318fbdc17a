//! One streamed pass over a session's segments, oldest first: what `show` and `export` read.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::journal::reader::is_end_marker;
use crate::journal::{Header, Record, SegmentReader, Tail};
use crate::proto::redact;
use crate::wire::envelope;

/// What a pass hands out, in order.
pub(super) enum Step<'a> {
    /// A segment begins (`index` 0 is the session's first run).
    Segment {
        /// Position among the session's segments.
        index: usize,
        /// Its header.
        header: &'a Header,
    },
    /// A record (the end marker left out).
    Record(Record),
    /// A segment ended other than cleanly (unfinished, torn or corrupt).
    End {
        /// The segment file.
        path: &'a Path,
        /// How it ends.
        tail: &'a Tail,
    },
}

/// Read `segments` in order and hand every step to `visit`; with `redact`, messages are
/// redacted again as the proxy does when journaling.
pub(super) fn walk(
    segments: &[PathBuf],
    redact: bool,
    visit: &mut dyn FnMut(Step<'_>) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    for (index, path) in segments.iter().enumerate() {
        let mut reader =
            SegmentReader::open(path).with_context(|| format!("reading {}", path.display()))?;
        visit(Step::Segment {
            index,
            header: reader.header(),
        })?;
        for record in reader.by_ref().filter(|r| !is_end_marker(r)) {
            let mut record = record;
            if redact {
                redact::redact_record(&mut record);
            }
            visit(Step::Record(record))?;
        }
        if let Some(tail) = reader.tail().filter(|t| **t != Tail::Clean) {
            visit(Step::End { path, tail })?;
        }
    }
    Ok(())
}

/// A wire line redacted again (with `redact`), as the proxy does when journaling.
pub(super) fn redacted_line(line: &[u8], redact: bool) -> Cow<'_, [u8]> {
    if !redact {
        return Cow::Borrowed(line);
    }
    match redact::redact_message(envelope::peek(line).method(), line) {
        Some(clean) => Cow::Owned(clean),
        None => Cow::Borrowed(line),
    }
}

/// A segment's file name, for notes that must not depend on where the store lives.
pub(super) fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
