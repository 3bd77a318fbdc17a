//! Reading a session's history from the journal directory for a `session/load` (the I/O half of
//! [`crate::proto::history::Replay`]). Runs on a blocking thread and streams chunks back.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::journal::dir::segments_in;
use crate::journal::{JournalDir, SegmentReader, mark};
use crate::proto::history::Replay;
use crate::proto::{ClientSupport, HistoryChunk};

/// Replay lines per chunk sent to the main loop, at most.
const CHUNK: usize = 2048;

/// Replay bytes per chunk, at most (one line may pass it): with the channel's few chunks in
/// flight, what a load holds stays a few MiB however big the session's lines (tool outputs,
/// files read: hundreds of KiB each in the long sessions of coding agents).
const CHUNK_BYTES: usize = 1 << 20;

/// What a history read needs.
pub struct HistoryRequest {
    /// Names the answer.
    pub load: u64,
    /// Client-facing session ID.
    pub session: String,
    /// What the client accepts.
    pub support: ClientSupport,
    /// Transcript bound.
    pub transcript_limit: usize,
    /// A live session's: where its replay stops (tool calls left open).
    pub until: Option<Until>,
    /// The agent loading it (which of its agent-side sessions on this host holds every turn
    /// is the summary's).
    pub agent: crate::acp::AgentId,
}

/// Where a live session's replay stops: at the first record its live run numbered `seq` or
/// later (what follows reaches the client live). Sequence numbers count within one run, so
/// the cut applies to that run's segments only: an earlier run's records are all history,
/// whatever their numbers.
pub struct Until {
    /// The live run (the segments' `run`).
    pub run: String,
    /// The first sequence number not replayed.
    pub seq: u64,
}

impl Until {
    /// The first sequence number `reader`'s segment does not replay, if it is the live run's.
    fn cut_in<R: std::io::Read>(until: Option<&Until>, reader: &SegmentReader<R>) -> Option<u64> {
        until
            .filter(|until| reader.header().run == until.run)
            .map(|until| until.seq)
    }
}

/// Read the session's segments (oldest first) twice — compactions and terminal outputs first
/// ([`Replay::observes`] picks the records), then the replay —
/// and send the chunks to `tx`. Stops early when `cancel` is set or the receiver is gone.
pub fn read(
    journals: &JournalDir,
    req: HistoryRequest,
    cancel: Arc<AtomicBool>,
    tx: mpsc::Sender<(u64, HistoryChunk)>,
) {
    let send =
        |chunk| tx.blocking_send((req.load, chunk)).is_ok() && !cancel.load(Ordering::Relaxed);
    // In the order the shared session was written (by lease epoch), each up to where a fence
    // in the shared store ends it.
    let mut segments = segments_in(&journals.session_dir(&req.session)).unwrap_or_default();
    mark::in_epoch_order(&mut segments);
    let open = |path: &std::path::Path| {
        SegmentReader::open_until(path, mark::read(path).fence.unwrap_or(u64::MAX))
    };
    if segments.is_empty() {
        send(HistoryChunk::Missing);
        return;
    }
    let mut replay = Replay::new(&req.session, req.support, req.transcript_limit);
    replay.for_agent(req.agent.clone());
    if req.until.is_some() {
        replay.keep_tools_open();
    }
    let before = |cut: Option<u64>, seq: u64| cut.is_none_or(|cut| seq < cut);
    for path in &segments {
        match open(path) {
            Ok(mut reader) => {
                let cut = Until::cut_in(req.until.as_ref(), &reader);
                while let Some(record) = reader.next_where(|line| replay.observes(line)) {
                    if before(cut, record.seq) {
                        replay.observe(&record);
                    }
                }
            }
            Err(e) => tracing::warn!("skipping {}: {e}", path.display()),
        }
    }
    let mut lines: Vec<Bytes> = Vec::with_capacity(CHUNK);
    let mut bytes = 0;
    for path in &segments {
        let Ok(reader) = open(path) else {
            continue;
        };
        // A segment this journal directory wrote ran on this host's agent; one pulled from
        // the store, on another's.
        replay.segment(reader.header(), !mark::read(path).pulled);
        let cut = Until::cut_in(req.until.as_ref(), &reader);
        for record in reader.filter(|r| before(cut, r.seq)) {
            let had = lines.len();
            replay.emit(&record, &mut lines);
            bytes += lines[had..].iter().map(Bytes::len).sum::<usize>();
            if lines.len() >= CHUNK || bytes >= CHUNK_BYTES {
                bytes = 0;
                if !send(HistoryChunk::Lines(std::mem::take(&mut lines))) {
                    return;
                }
            }
        }
    }
    let summary = replay.finish(&mut lines);
    if send(HistoryChunk::Lines(lines)) {
        send(HistoryChunk::End(summary));
    }
}
