//! Writing the index, on the index's own task ([`super::indexer`]: the relay and the shipper
//! never wait for it): the session segments of the journal directory are followed as far as
//! the store holds them (so what is indexed is what a reader can pull, redacted, and a segment
//! stranded on this disk says nothing past its fence), a row is kept for each turn that ends
//! and for each session that changed, with the words its messages hold; every [`FLUSH`] what
//! was kept is written as Parquet parts (turns and sessions by day, postings sorted by word)
//! and committed to the manifest, and the commit says how far each segment is indexed (for
//! [`super::ledger`]). What waits for a commit is bounded ([`MAX_WAITING`] bytes): past it the
//! segments are read no further until a commit takes it, the rest waiting in the journals, on
//! disk. Nothing is dropped.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::edits::{EditRow, Repos};
use super::ledger::Indexed;
use super::rows::{Earlier, Follower, SessionRow, TurnRow};
use super::snapshot::{self, Part, Snapshot};
use super::table::{self, Table};
use crate::fleet::Error;
use crate::fleet::clock::SharedClock;
use crate::fleet::layout::{SessionId, SessionKey};
use crate::fleet::shipped::Shipped;
use crate::fleet::store::Store;
use crate::hex;
use crate::journal::tail::{Next, SegmentTail};
use crate::journal::{JournalDir, SegmentReader, mark};

/// Between two writes of what was kept (a turn is searchable within this, plus a ship round).
pub const FLUSH: Duration = Duration::from_secs(8);
/// Most bytes of rows kept for the next commit (their texts, words and IDs counted).
const MAX_WAITING: usize = 64 << 20;

/// A segment followed.
struct Followed {
    /// Relative to the journal directory (its name in the ledger).
    rel: String,
    tail: SegmentTail,
    /// What the store holds of it: how far it may be read.
    shipped: Arc<Shipped>,
    /// Once its header is read.
    follower: Option<Follower>,
    /// Its turns up to this number are in the index already (not written again).
    committed: u32,
    /// The highest turn number read from it so far.
    read: u32,
    /// Rows were taken from it since the last commit.
    changed: bool,
    /// Read to its end, or as far as the store will ever hold it.
    ended: bool,
}

/// What a commit took: how far each segment it carried rows of is indexed now, and the
/// segments done with (read to their end and all their rows in the index).
#[derive(Debug, Default)]
pub struct Committed {
    /// For the ledger.
    pub indexed: Vec<(String, Indexed)>,
    /// Followed no more.
    pub done: Vec<PathBuf>,
    /// The manifest as committed (`None`: nothing waited).
    pub snapshot: Option<Snapshot>,
}

/// The index writer of a journal directory.
pub struct Writer {
    store: Store,
    local: JournalDir,
    host: String,
    followed: HashMap<PathBuf, Followed>,
    /// The rows kept for the next commit (its sessions' rows are those of `sessions` then).
    waiting: Rows,
    sessions: HashMap<String, SessionRow>,
    /// The repositories of the paths edited.
    repos: Repos,
    /// Bytes of the rows kept (about: their texts and IDs).
    waiting_bytes: usize,
    /// When the last flush began, on [`Writer::clock`].
    last_flush: Duration,
    /// The clock [`FLUSH`] is measured on (the fleet's: tokio's paused time in tests).
    clock: SharedClock,
    /// The sessions erased from the store (their rows are never written).
    erased: Arc<HashSet<SessionKey>>,
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
) -> Result<Part, Error> {
    let path = part_path(table, day, host);
    let size = bytes.len() as u64;
    store.put_new(&path, bytes).await?;
    Ok(Part {
        table,
        path,
        rows,
        bytes: size,
        day: day.map(str::to_string),
        words,
    })
}

/// Most rows a part is written with (a reader takes up to [`super::bounds::MAX_ROWS`]).
pub const PART_ROWS: usize = 256 << 10;
/// About the most bytes of row data a part is written with (a reader decodes up to
/// [`super::bounds::MAX_DECODED_BYTES`], and reads up to [`super::bounds::MAX_PART_BYTES`]).
pub const PART_BYTES: usize = 24 << 20;

/// `rows` in pieces of at most [`PART_ROWS`] rows and about [`PART_BYTES`] bytes (by `size`).
fn pieces<T>(rows: &[T], size: impl Fn(&T) -> usize) -> Vec<&[T]> {
    let (mut out, mut start, mut bytes) = (Vec::new(), 0, 0);
    for (i, row) in rows.iter().enumerate() {
        let b = size(row);
        if i > start && (i - start >= PART_ROWS || bytes + b > PART_BYTES) {
            out.push(&rows[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += b;
    }
    if start < rows.len() {
        out.push(&rows[start..]);
    }
    out
}

/// About how many bytes `row` holds.
fn session_bytes(row: &SessionRow) -> usize {
    [&row.title, &row.agent, &row.cwd, &row.parent]
        .iter()
        .filter_map(|t| t.as_ref().map(String::len))
        .sum::<usize>()
        + row.session.len()
        + row.host.len()
        + 128
}

/// Sessions of the day `day` as new parts, written by `host`.
///
/// # Errors
/// The store's, or rows Parquet cannot encode.
pub async fn put_sessions(
    store: &Store,
    host: &str,
    day: &str,
    rows: &[SessionRow],
) -> Result<Vec<Part>, Error> {
    let mut parts = Vec::new();
    for piece in pieces(rows, session_bytes) {
        let bytes = table::encode_sessions(piece)?;
        let n = piece.len() as u64;
        parts.push(put_part(store, Table::Sessions, Some(day), host, n, None, bytes).await?);
    }
    Ok(parts)
}

/// Turns of the day `day` as new parts, written by `host`.
///
/// # Errors
/// The store's, or rows Parquet cannot encode.
pub async fn put_turns(
    store: &Store,
    host: &str,
    day: &str,
    rows: &[TurnRow],
) -> Result<Vec<Part>, Error> {
    let mut parts = Vec::new();
    for piece in pieces(rows, turn_bytes) {
        let bytes = table::encode_turns(piece)?;
        let n = piece.len() as u64;
        parts.push(put_part(store, Table::Turns, Some(day), host, n, None, bytes).await?);
    }
    Ok(parts)
}

/// Edits of the day `day` as new parts, written by `host`.
///
/// # Errors
/// The store's, or rows Parquet cannot encode.
pub async fn put_edits(
    store: &Store,
    host: &str,
    day: &str,
    rows: &[EditRow],
) -> Result<Vec<Part>, Error> {
    let mut parts = Vec::new();
    for piece in pieces(rows, EditRow::size) {
        let bytes = table::encode_edits(piece)?;
        let n = piece.len() as u64;
        parts.push(put_part(store, Table::Edits, Some(day), host, n, None, bytes).await?);
    }
    Ok(parts)
}

/// Postings (sorted by word) as new parts, written by `host`.
///
/// # Errors
/// The store's, or rows Parquet cannot encode.
pub async fn put_postings(
    store: &Store,
    host: &str,
    rows: &[(String, String)],
) -> Result<Vec<Part>, Error> {
    let mut parts = Vec::new();
    for piece in pieces(rows, |(word, session)| word.len() + session.len() + 16) {
        let words = piece
            .first()
            .zip(piece.last())
            .map(|(a, b)| (a.0.clone(), b.0.clone()));
        let bytes = table::encode_postings(piece)?;
        let n = piece.len() as u64;
        parts.push(put_part(store, Table::Postings, None, host, n, words, bytes).await?);
    }
    Ok(parts)
}

/// The rows of some sessions, for one commit.
#[derive(Debug, Default)]
pub struct Rows {
    /// Their turns.
    pub turns: Vec<TurnRow>,
    /// Their rows.
    pub sessions: Vec<SessionRow>,
    /// Their words.
    pub postings: BTreeSet<(String, String)>,
    /// Their edits and commands.
    pub edits: Vec<EditRow>,
}

impl Rows {
    /// Add `more`.
    pub fn add(&mut self, more: Rows) {
        self.turns.extend(more.turns);
        self.sessions.extend(more.sessions);
        self.postings.extend(more.postings);
        self.edits.extend(more.edits);
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.turns.is_empty()
            && self.sessions.is_empty()
            && self.postings.is_empty()
            && self.edits.is_empty()
    }
}

/// `rows` by the UTC day of each one's `at`.
fn by_day<T: Clone>(rows: &[T], at: impl Fn(&T) -> i64) -> BTreeMap<String, Vec<T>> {
    let mut days: BTreeMap<String, Vec<T>> = BTreeMap::new();
    for row in rows {
        days.entry(day(at(row))).or_default().push(row.clone());
    }
    days
}

/// Rows as new parts, written by `host`: the turns, the sessions and the edits by day (a
/// turn's day is its start's, a session's its last activity's, an edit's its own), the
/// postings sorted by word; each part of at most [`PART_ROWS`] rows and about [`PART_BYTES`]
/// bytes.
///
/// # Errors
/// The store's, or rows Parquet cannot encode.
pub async fn put_rows(store: &Store, host: &str, rows: &Rows) -> Result<Vec<Part>, Error> {
    let mut parts = Vec::new();
    for (d, rows) in &by_day(&rows.turns, |t| t.started_us) {
        parts.extend(put_turns(store, host, d, rows).await?);
    }
    for (d, rows) in &by_day(&rows.sessions, |s| s.last_activity_us) {
        parts.extend(put_sessions(store, host, d, rows).await?);
    }
    for (d, rows) in &by_day(&rows.edits, |e| e.time_us) {
        parts.extend(put_edits(store, host, d, rows).await?);
    }
    let postings: Vec<(String, String)> = rows.postings.iter().cloned().collect();
    parts.extend(put_postings(store, host, &postings).await?);
    Ok(parts)
}

/// What a session's segments before `segment` (in the order the session was written) said of
/// it.
fn earlier(local: &JournalDir, session: &str, segment: &Path, host: &str) -> Earlier {
    let mut segments =
        crate::journal::dir::segments_in(&local.session_dir(session)).unwrap_or_default();
    mark::in_epoch_order(&mut segments);
    let mut earlier = Earlier::default();
    for path in segments.iter().take_while(|p| p.as_path() != segment) {
        let Ok(reader) = SegmentReader::open(path) else {
            continue;
        };
        let mut f = Follower::new(reader.header(), host, earlier);
        for record in reader {
            f.record(&record);
        }
        f.segment_bytes(segment_bytes(path));
        f.take_derived(true);
        earlier = f.earlier();
    }
    earlier
}

/// Keep the rows of `rows` not in the index already (of a turn past `committed`, the turn the
/// index holds the segment to; all of them while it holds none of it); their bytes.
fn keep_edits(kept: &mut Vec<EditRow>, rows: Vec<EditRow>, committed: u32) -> usize {
    let mut bytes = 0;
    for row in rows {
        if committed == 0 || row.turn > committed {
            bytes += row.size();
            kept.push(row);
        }
    }
    bytes
}

/// The bytes of a session segment on this disk (the session's size in the index).
pub(super) fn segment_bytes(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// About how many bytes `turn` holds.
fn turn_bytes(turn: &TurnRow) -> usize {
    let listed: usize = turn.tools.iter().chain(&turn.paths).map(String::len).sum();
    turn.session.len() + turn.prompt.len() + turn.agent_text.len() + listed + 64
}

impl Writer {
    /// A writer for `local`'s segments into `store`, as `host`, its flushes timed on `clock`.
    pub fn new(store: Store, local: JournalDir, host: String, clock: SharedClock) -> Writer {
        Writer {
            store,
            local,
            host,
            followed: HashMap::new(),
            waiting: Rows::default(),
            sessions: HashMap::new(),
            repos: Repos::default(),
            waiting_bytes: 0,
            last_flush: clock.now(),
            clock,
            erased: Default::default(),
        }
    }

    /// Follow the session segment at `path` as far as `shipped` says the store holds it; the
    /// index holds `indexed` of it already (its turns up to that number are not written again).
    pub fn follow(&mut self, path: &Path, indexed: Indexed, shipped: Arc<Shipped>) {
        if self.followed.contains_key(path) || indexed.done {
            return;
        }
        match SegmentTail::open_within(path, shipped.bytes()) {
            Ok(tail) => {
                self.followed.insert(
                    path.to_path_buf(),
                    Followed {
                        rel: self.local.relative(path),
                        tail,
                        shipped,
                        follower: None,
                        committed: indexed.turns,
                        read: 0,
                        changed: false,
                        ended: false,
                    },
                );
            }
            Err(e) => tracing::debug!("index: {}: {e}", path.display()),
        }
    }

    /// Whether `path` is followed.
    pub fn follows(&self, path: &Path) -> bool {
        self.followed.contains_key(path)
    }

    /// How many segments are followed.
    pub fn following(&self) -> usize {
        self.followed.len()
    }

    /// Whether every segment followed is read to its end (or as far as the store will hold it).
    pub fn caught_up(&self) -> bool {
        self.followed.values().all(|f| f.ended)
    }

    /// Read what the followed segments gained, as far as the store holds them, until the rows
    /// kept reach [`MAX_WAITING`] bytes.
    pub fn poll(&mut self) {
        for (path, f) in &mut self.followed {
            if f.ended {
                continue;
            }
            // Read before the tail: what it holds once settled is all it will ever hold.
            let settled = f.shipped.settled();
            loop {
                if self.waiting_bytes >= MAX_WAITING {
                    return;
                }
                match f.tail.poll() {
                    Next::Record(record) => {
                        let follower = match f.follower.as_mut() {
                            Some(follower) => follower,
                            None => {
                                let Some(header) = f.tail.header() else { break };
                                let session = header.session.clone().unwrap_or_default();
                                let earlier = earlier(&self.local, &session, path, &self.host);
                                f.follower
                                    .insert(Follower::new(header, &self.host, earlier))
                            }
                        };
                        if let Some(turn) = follower.record(&record) {
                            f.read = f.read.max(turn.turn);
                            if turn.turn > f.committed {
                                self.waiting_bytes += turn_bytes(&turn);
                                self.waiting.turns.push(turn);
                            }
                            let derived = follower.take_derived(false);
                            let rows = self.repos.rows(derived, &self.host);
                            self.waiting_bytes +=
                                keep_edits(&mut self.waiting.edits, rows, f.committed);
                        }
                        f.changed = true;
                    }
                    Next::Pending if !settled => break,
                    Next::Pending | Next::End(_) => {
                        if let Some(follower) = f.follower.as_mut() {
                            follower.close();
                            let derived = follower.take_derived(true);
                            let rows = self.repos.rows(derived, &self.host);
                            self.waiting_bytes +=
                                keep_edits(&mut self.waiting.edits, rows, f.committed);
                        }
                        f.ended = true;
                        f.changed = true;
                        break;
                    }
                }
            }
            if let Some(follower) = f.follower.as_mut()
                && f.changed
            {
                follower.segment_bytes(segment_bytes(path));
                let row = follower.session().clone();
                for word in follower.take_words() {
                    self.waiting_bytes += word.len() + row.session.len();
                    self.waiting.postings.insert((word, row.session.clone()));
                }
                if !self.sessions.contains_key(&row.session) {
                    self.waiting_bytes += row.session.len() + 256;
                }
                self.sessions.insert(row.session.clone(), row);
            }
        }
    }

    /// The sessions erased from the store, as last listed.
    pub fn set_erased(&mut self, keys: Arc<HashSet<SessionKey>>) {
        self.erased = keys;
    }

    /// Whether rows wait and [`FLUSH`] has passed since the last flush (or `end`, or the rows
    /// kept are at their bound).
    pub fn due(&self, end: bool) -> bool {
        let waiting = self.followed.values().any(|f| f.changed);
        waiting
            && (end
                || self.waiting_bytes >= MAX_WAITING
                || self.clock.now().saturating_sub(self.last_flush) >= FLUSH)
    }

    /// Write what was kept as parts and commit them. What fails waits for the next flush.
    ///
    /// # Errors
    /// The store's.
    pub async fn flush(&mut self) -> Result<Committed, Error> {
        self.last_flush = self.clock.now();
        if !self.followed.values().any(|f| f.changed) {
            return Ok(Committed::default());
        }
        let erased = self.erased.clone();
        let gone =
            |session: &str| crate::fleet::layout::is_erased(&erased, SessionId::new(session));
        self.sessions.retain(|s, _| !gone(s));
        let waiting = &mut self.waiting;
        waiting.turns.retain(|t| !gone(&t.session));
        waiting.postings.retain(|(_, s)| !gone(s));
        waiting.edits.retain(|e| !gone(&e.session));
        waiting.sessions = self.sessions.values().cloned().collect();
        let snapshot = if waiting.is_empty() {
            None
        } else {
            let parts = put_rows(&self.store, &self.host, waiting).await?;
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
            .await?;
            Some(committed)
        };
        self.waiting = Rows::default();
        self.sessions.clear();
        self.waiting_bytes = 0;
        let mut committed = Committed {
            snapshot,
            ..Committed::default()
        };
        self.followed.retain(|path, f| {
            if std::mem::take(&mut f.changed) {
                f.committed = f.committed.max(f.read);
                let indexed = Indexed {
                    turns: f.committed,
                    done: f.ended,
                };
                committed.indexed.push((f.rel.clone(), indexed));
            }
            if f.ended {
                committed.done.push(path.clone());
            }
            !f.ended
        });
        Ok(committed)
    }
}
