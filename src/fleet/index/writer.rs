//! Writing the index, on the shipper's thread (the relay never waits for it): the session
//! segments this process writes are followed as they grow (so what is indexed is what was
//! journaled, redacted), a row is kept for each turn that ends and for each session that
//! changed, with the words its messages hold; every [`FLUSH`] what was kept is written as
//! Parquet parts (turns and sessions by day, postings sorted by word) and committed to the
//! manifest. A store that fails keeps the rows waiting (bounded: past [`MAX_WAITING`] turn
//! rows the oldest are dropped, and `index rebuild` restores them); the shipper says the
//! store's trouble, once.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::rows::{Follower, SessionRow, TurnRow};
use super::snapshot::{self, Part, Snapshot};
use super::table::{self, Table};
use crate::fleet::store::Store;
use crate::journal::tail::{Next, SegmentTail};
use crate::journal::{JournalDir, SegmentReader, mark};

/// Between two writes of what was kept (a turn is searchable within this, plus a ship round).
pub const FLUSH: Duration = Duration::from_secs(8);
/// Most turn rows kept while the store cannot take them.
const MAX_WAITING: usize = 100_000;

/// A segment followed.
struct Followed {
    tail: SegmentTail,
    /// Once its header is read.
    follower: Option<Follower>,
}

/// The index writer of a process.
pub struct Writer {
    store: Store,
    local: JournalDir,
    host: String,
    followed: HashMap<PathBuf, Followed>,
    turns: Vec<TurnRow>,
    sessions: HashMap<String, SessionRow>,
    postings: BTreeSet<(String, String)>,
    last_flush: Instant,
    /// The sessions erased from the store (their rows are never written).
    erased: std::sync::Arc<std::collections::HashSet<String>>,
}

/// `at` (Unix microseconds) as the UTC day `YYYY-MM-DD`.
pub fn day(at: i64) -> String {
    jiff::Timestamp::from_microsecond(at)
        .map(|t| t.strftime("%Y-%m-%d").to_string())
        .unwrap_or_else(|_| "1970-01-01".into())
}

/// A new part's name: the table's directory, the day partition, and a name no other writer
/// takes (host, time, random).
pub fn part_path(table: Table, day: Option<&str>, host: &str) -> String {
    let mut random = [0u8; 6];
    let _ = getrandom::fill(&mut random);
    let nonce = hex::encode(random);
    let now = jiff::Timestamp::now().as_microsecond();
    let name = format!("{host}-{now}-{nonce}.parquet");
    match day {
        Some(day) => format!("index/{}/day={day}/{name}", table.dir()),
        None => format!("index/{}/{name}", table.dir()),
    }
}

/// Write `bytes` as a new part of `table` and describe it.
pub async fn put_part(
    store: &Store,
    table: Table,
    day: Option<&str>,
    host: &str,
    rows: u64,
    words: Option<(String, String)>,
    bytes: Bytes,
) -> Result<Part, String> {
    let path = part_path(table, day, host);
    let size = bytes.len() as u64;
    store
        .put_new(&path, bytes)
        .await
        .map_err(|e| e.to_string())?;
    Ok(Part {
        table,
        path,
        rows,
        bytes: size,
        day: day.map(str::to_string),
        words,
    })
}

/// Rows as new parts, written by `host`: the turns and the sessions a part per day (a turn's
/// day is its start's, a session's its last activity's), the postings one part, sorted by word.
///
/// # Errors
/// The store's, or rows Parquet cannot encode.
pub async fn put_rows(
    store: &Store,
    host: &str,
    turns: &[TurnRow],
    sessions: &[SessionRow],
    postings: &BTreeSet<(String, String)>,
) -> Result<Vec<Part>, String> {
    let wrong = |e: parquet::errors::ParquetError| e.to_string();
    let mut parts = Vec::new();
    let mut turns_by_day: BTreeMap<String, Vec<TurnRow>> = BTreeMap::new();
    for t in turns {
        turns_by_day
            .entry(day(t.started_us))
            .or_default()
            .push(t.clone());
    }
    for (d, rows) in &turns_by_day {
        let bytes = table::encode_turns(rows).map_err(wrong)?;
        let n = rows.len() as u64;
        parts.push(put_part(store, Table::Turns, Some(d), host, n, None, bytes).await?);
    }
    let mut sessions_by_day: BTreeMap<String, Vec<SessionRow>> = BTreeMap::new();
    for s in sessions {
        sessions_by_day
            .entry(day(s.last_activity_us))
            .or_default()
            .push(s.clone());
    }
    for (d, rows) in &sessions_by_day {
        let bytes = table::encode_sessions(rows).map_err(wrong)?;
        let n = rows.len() as u64;
        parts.push(put_part(store, Table::Sessions, Some(d), host, n, None, bytes).await?);
    }
    if !postings.is_empty() {
        let rows: Vec<(String, String)> = postings.iter().cloned().collect();
        let words = rows
            .first()
            .zip(rows.last())
            .map(|(a, b)| (a.0.clone(), b.0.clone()));
        let bytes = table::encode_postings(&rows).map_err(wrong)?;
        let n = rows.len() as u64;
        parts.push(put_part(store, Table::Postings, None, host, n, words, bytes).await?);
    }
    Ok(parts)
}

/// The turns a session had in its segments before `segment` (in the order the session was
/// written).
fn turns_before(local: &JournalDir, session: &str, segment: &Path, host: &str) -> u32 {
    let mut segments =
        crate::journal::dir::segments_in(&local.session_dir(session)).unwrap_or_default();
    mark::in_epoch_order(&mut segments);
    let mut turns = 0;
    for path in segments.iter().take_while(|p| p.as_path() != segment) {
        let Ok(reader) = SegmentReader::open(path) else {
            continue;
        };
        let mut f = Follower::new(reader.header(), host, turns);
        for record in reader {
            f.record(&record);
        }
        turns = f.session().turns;
    }
    turns
}

impl Writer {
    /// A writer for `local`'s segments into `store`, as `host`.
    pub fn new(store: Store, local: JournalDir, host: String) -> Writer {
        Writer {
            store,
            local,
            host,
            followed: HashMap::new(),
            turns: Vec::new(),
            sessions: HashMap::new(),
            postings: BTreeSet::new(),
            last_flush: Instant::now(),
            erased: Default::default(),
        }
    }

    /// Follow the session segment at `path` (this process writes it).
    pub fn follow(&mut self, path: &Path) {
        if self.followed.contains_key(path) {
            return;
        }
        match SegmentTail::open(path) {
            Ok(tail) => {
                self.followed.insert(
                    path.to_path_buf(),
                    Followed {
                        tail,
                        follower: None,
                    },
                );
            }
            Err(e) => tracing::debug!("index: {}: {e}", path.display()),
        }
    }

    /// Read what the followed segments gained since the last call.
    pub fn poll(&mut self) {
        let mut ended = Vec::new();
        for (path, f) in &mut self.followed {
            loop {
                match f.tail.poll() {
                    Next::Record(record) => {
                        let follower = match f.follower.as_mut() {
                            Some(follower) => follower,
                            None => {
                                let Some(header) = f.tail.header() else { break };
                                let session = header.session.clone().unwrap_or_default();
                                let before = turns_before(&self.local, &session, path, &self.host);
                                f.follower.insert(Follower::new(header, &self.host, before))
                            }
                        };
                        if let Some(turn) = follower.record(&record) {
                            self.turns.push(turn);
                        }
                        let row = follower.session();
                        self.sessions.insert(row.session.clone(), row.clone());
                    }
                    Next::Pending => break,
                    Next::End(_) => {
                        if let Some(follower) = f.follower.as_mut() {
                            let row = follower.close();
                            self.sessions.insert(row.session.clone(), row.clone());
                        }
                        ended.push(path.clone());
                        break;
                    }
                }
            }
            if let Some(follower) = f.follower.as_mut() {
                let session = follower.session().session.clone();
                for word in follower.take_words() {
                    self.postings.insert((word, session.clone()));
                }
            }
        }
        for path in ended {
            self.followed.remove(&path);
        }
        if self.turns.len() > MAX_WAITING {
            let drop = self.turns.len() - MAX_WAITING;
            self.turns.drain(..drop);
            tracing::warn!(
                "index: {drop} turn rows dropped while {} fails; `acp-journal index rebuild` restores them",
                self.store.url()
            );
        }
    }

    /// The sessions erased from the store, as last listed.
    pub fn set_erased(&mut self, keys: std::sync::Arc<std::collections::HashSet<String>>) {
        self.erased = keys;
    }

    /// Whether rows wait and [`FLUSH`] has passed (or `now` is the end).
    pub fn due(&self, end: bool) -> bool {
        !self.sessions.is_empty() && (end || self.last_flush.elapsed() >= FLUSH)
    }

    /// Write what was kept as parts and commit them; the manifest as committed. What fails
    /// waits for the next flush (the shipper says the store's trouble, once).
    ///
    /// # Errors
    /// The store's.
    pub async fn flush(&mut self) -> Result<Snapshot, String> {
        self.last_flush = Instant::now();
        self.write().await
    }

    async fn write(&mut self) -> Result<Snapshot, String> {
        let erased = self.erased.clone();
        let gone = |session: &str| crate::fleet::layout::is_erased(&erased, session);
        self.turns.retain(|t| !gone(&t.session));
        self.sessions.retain(|s, _| !gone(s));
        self.postings.retain(|(_, s)| !gone(s));
        let sessions: Vec<SessionRow> = self.sessions.values().cloned().collect();
        let parts = put_rows(
            &self.store,
            &self.host,
            &self.turns,
            &sessions,
            &self.postings,
        )
        .await?;
        let committed = snapshot::commit(&self.store, |s| {
            let missing: Vec<Part> = parts
                .iter()
                .filter(|p| !s.parts.iter().any(|q| q.path == p.path))
                .cloned()
                .collect();
            let changed = !missing.is_empty();
            s.parts.extend(missing);
            changed
        })
        .await
        .map_err(|e| e.to_string())?;
        self.turns.clear();
        self.sessions.clear();
        self.postings.clear();
        Ok(committed)
    }
}
