//! Reading a session's history from the store for a `session/load` (the I/O half of
//! [`crate::proto::history::Replay`]). Runs on a blocking thread and streams chunks back.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::journal::store::segments_in;
use crate::journal::{SegmentReader, Store};
use crate::proto::history::Replay;
use crate::proto::{ClientSupport, HistoryChunk};

/// Replay lines per chunk sent to the main loop.
const CHUNK: usize = 2048;

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
    /// A live session's: only the records numbered below this, tool calls left open.
    pub until: Option<u64>,
}

/// Read the session's segments (oldest first) twice — compactions and terminal outputs first
/// ([`Replay::observes`] picks the records), then the replay —
/// and send the chunks to `tx`. Stops early when `cancel` is set or the receiver is gone.
pub fn read(
    store: &Store,
    req: HistoryRequest,
    cancel: Arc<AtomicBool>,
    tx: mpsc::Sender<(u64, HistoryChunk)>,
) {
    let send =
        |chunk| tx.blocking_send((req.load, chunk)).is_ok() && !cancel.load(Ordering::Relaxed);
    let segments = segments_in(&store.session_dir(&req.session)).unwrap_or_default();
    if segments.is_empty() {
        send(HistoryChunk::Missing);
        return;
    }
    let mut replay = Replay::new(&req.session, req.support, req.transcript_limit);
    if req.until.is_some() {
        replay.keep_tools_open();
    }
    let before = |seq: u64| req.until.is_none_or(|until| seq < until);
    for path in &segments {
        match SegmentReader::open(path) {
            Ok(mut reader) => {
                while let Some(record) = reader.next_where(|line| replay.observes(line)) {
                    if before(record.seq) {
                        replay.observe(&record);
                    }
                }
            }
            Err(e) => tracing::warn!("skipping {}: {e}", path.display()),
        }
    }
    let mut lines: Vec<Bytes> = Vec::with_capacity(CHUNK);
    for path in &segments {
        let Ok(reader) = SegmentReader::open(path) else {
            continue;
        };
        for record in reader.filter(|r| before(r.seq)) {
            replay.emit(&record, &mut lines);
            if lines.len() >= CHUNK && !send(HistoryChunk::Lines(std::mem::take(&mut lines))) {
                return;
            }
        }
    }
    let summary = replay.finish(&mut lines);
    if send(HistoryChunk::Lines(lines)) {
        send(HistoryChunk::End(summary));
    }
}
