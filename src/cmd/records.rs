//! One streamed pass over a session's segments, oldest first: what `show` and `export` read.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender};

use crate::journal::reader::is_end_marker;
use crate::journal::{Header, Record, SegmentReader, Tail};
use crate::redact;
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
    Record(&'a Record),
    /// A segment ended other than cleanly (unfinished, torn or corrupt).
    End {
        /// The segment file.
        path: &'a Path,
        /// How it ends.
        tail: &'a Tail,
    },
}

/// Records handed over between the reading thread and the visitor at a time.
const BATCH_RECORDS: usize = 256;
/// Batches in flight: with [`BATCH_RECORDS`], what bounds a pass's memory (a few MiB at most
/// for ordinary lines), whatever the session's size.
const BATCHES_IN_FLIGHT: usize = 8;

/// What the reading thread sends: [`Step`]s, owned, records in batches.
enum Reading {
    Segment(usize, Header),
    Records(Vec<Record>),
    End(usize, Tail),
    Failed(anyhow::Error),
}

/// Read `segments` in order and hand every step to `visit`; with `redact`, messages are
/// redacted again as the proxy does when journaling.
///
/// Two threads: one decompresses, checks, decodes (and redacts) the records while `visit`
/// renders the ones before, through a bounded channel, so a pass takes the longer of the two
/// halves rather than their sum, and memory stays flat. Visited batches go back to the reading
/// thread to be freed there: memory freed by the thread that allocated it is cheap, by another
/// it is not (with glibc's allocator, the pipeline cost more CPU than it saved). When `visit`
/// fails (a closed pipe), the reading thread stops at its next batch.
pub(super) fn walk(
    segments: &[PathBuf],
    redact: bool,
    visit: &mut dyn FnMut(Step<'_>) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    let (send, receive) = std::sync::mpsc::sync_channel(BATCHES_IN_FLIGHT);
    let (recycle, visited) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(move || read(segments, redact, &send, &visited));
        for reading in receive {
            match reading {
                Reading::Segment(index, header) => visit(Step::Segment {
                    index,
                    header: &header,
                })?,
                Reading::Records(records) => {
                    for record in &records {
                        visit(Step::Record(record))?;
                    }
                    // The reading thread may be gone (it ended): then drop the batch here.
                    let _ = recycle.send(records);
                }
                Reading::End(index, tail) => visit(Step::End {
                    path: &segments[index],
                    tail: &tail,
                })?,
                Reading::Failed(e) => return Err(e),
            }
        }
        Ok(())
    })
}

/// The reading half of [`walk`]: stops early when the visitor is gone.
fn read(
    segments: &[PathBuf],
    redact: bool,
    send: &SyncSender<Reading>,
    visited: &Receiver<Vec<Record>>,
) {
    for (index, path) in segments.iter().enumerate() {
        let mut reader = match SegmentReader::open(path) {
            Ok(reader) => reader,
            Err(e) => {
                let e = anyhow::Error::new(e).context(format!("reading {}", path.display()));
                let _ = send.send(Reading::Failed(e));
                return;
            }
        };
        if send
            .send(Reading::Segment(index, reader.header().clone()))
            .is_err()
        {
            return;
        }
        let mut batch = Vec::with_capacity(BATCH_RECORDS);
        for mut record in reader.by_ref().filter(|r| !is_end_marker(r)) {
            if redact {
                redact::redact_record(&mut record);
            }
            batch.push(record);
            if batch.len() == BATCH_RECORDS {
                visited.try_iter().for_each(drop);
                let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH_RECORDS));
                if send.send(Reading::Records(full)).is_err() {
                    return;
                }
            }
        }
        if !batch.is_empty() && send.send(Reading::Records(batch)).is_err() {
            return;
        }
        if let Some(tail) = reader.tail().filter(|t| **t != Tail::Clean)
            && send.send(Reading::End(index, tail.clone())).is_err()
        {
            return;
        }
    }
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

/// A segment's file name, for notes that must not depend on where the journal directory lives.
pub(super) fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
