//! Keeping the index small: the parts of a table's day (the postings: of the whole table) are
//! merged into one once there are [`COMPACT_AT`] of them, by whichever host holds the
//! compaction lease (an ordinary session lease on a reserved name, [`LEASE`]), so no service
//! of its own is needed; the merge is committed only if every part it replaces is still in
//! the manifest, so two compactors can never lose or double a row. Parts compacted away are
//! deleted [`GRACE`] after they left the manifest (a reader that read it before may still be
//! reading them). And the whole index, rebuilt from the journals (`index rebuild`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

use super::edits::{EditRow, Repos};
use super::rows::{Earlier, Follower, SessionRow, TurnRow};
use super::snapshot::{self, Part, Removed, Snapshot};
use super::table::{self, Table};
use super::writer::{PART_ROWS, Rows, put_edits, put_postings, put_rows, put_sessions, put_turns};
use crate::fleet::Error;
use crate::fleet::store::Store;
use crate::journal::SegmentReader;
use crate::journal::reader::is_end_marker;

/// Parts of one table and day merged once there are this many.
pub const COMPACT_AT: usize = 8;
/// How long a part compacted away stays in the store (microseconds).
pub const GRACE: i64 = 60_000_000;
/// Most parts deleted by one compaction (the rest by the next).
const DELETES: usize = 1000;
/// The reserved session name whose lease says which host compacts.
pub const LEASE: &str = "acp-journal:index-compaction";
/// How long an index part may sit in the store unlisted by the manifest before a compaction
/// takes it in (microseconds; a writer's commit, retried, takes seconds).
pub const ORPHAN_AFTER: i64 = 300_000_000;
/// Most parts taken in by one compaction.
const ADOPTED: usize = 100;

/// Whether a part is small enough to be merged: under half the rows and a quarter of the bytes
/// a part is written with at most. Parts that size are left as they are, so a table that outgrows
/// one part (the postings, which are not by day) is not merged again and again.
fn small(p: &Part) -> bool {
    p.rows < (PART_ROWS / 2) as u64 && p.bytes < super::bounds::MAX_PART_BYTES / 4
}

/// Whether `snapshot` has parts to merge or to delete.
pub fn needed(snapshot: &Snapshot, now_us: i64) -> bool {
    let mut groups: HashMap<(Table, Option<&str>), usize> = HashMap::new();
    for p in snapshot.parts.iter().filter(|p| small(p)) {
        *groups.entry((p.table, p.day.as_deref())).or_default() += 1;
    }
    groups.values().any(|&n| n >= COMPACT_AT)
        || snapshot
            .removed
            .iter()
            .any(|r| r.at.saturating_add(GRACE) <= now_us)
}

/// Delete the parts compacted away more than [`GRACE`] ago (only index parts the manifest no
/// longer lists: what it names otherwise is never deleted, see [`snapshot::Snapshot::sanitized`];
/// at most [`DELETES`] at once), then merge the small parts of every table's day that has
/// [`COMPACT_AT`] of them or more (a part that cannot be read is left where it is). Returns how
/// many parts were merged away.
///
/// # Errors
/// The store's.
pub async fn compact(store: &Store, host: &str, now_us: i64) -> Result<usize, Error> {
    let found = super::reader::open(store).await?;
    let super::reader::Found::Index(snapshot) = found else {
        return Ok(0);
    };
    let due: Vec<String> = snapshot
        .removed
        .iter()
        .filter(|r| r.at.saturating_add(GRACE) <= now_us)
        .map(|r| r.path.clone())
        .take(DELETES)
        .collect();
    store.delete_many(&due).await?;
    if !due.is_empty() {
        tracing::info!(
            "index: {} parts compacted away more than {} s ago deleted",
            due.len(),
            GRACE / 1_000_000
        );
        snapshot::commit(store, |s| {
            let before = s.removed.len();
            s.removed.retain(|r| !due.contains(&r.path));
            s.removed.len() != before
        })
        .await?;
    }
    let mut groups: BTreeMap<(Table, Option<String>), Vec<Part>> = BTreeMap::new();
    for p in snapshot.parts.into_iter().filter(small) {
        groups.entry((p.table, p.day.clone())).or_default().push(p);
    }
    let mut merged = 0;
    for ((table, day), parts) in groups.into_iter().filter(|(_, v)| v.len() >= COMPACT_AT) {
        let (read, new) = merge(store, table, day.as_deref(), host, &parts).await?;
        if read.len() < 2 {
            // Nothing to merge: what was read is one part, or none.
            let paths: Vec<String> = new.iter().map(|p| p.path.clone()).collect();
            store.delete_many(&paths).await?;
            continue;
        }
        let replaced: BTreeSet<&str> = read.iter().map(String::as_str).collect();
        let committed = snapshot::commit(store, |s| {
            let present = s
                .parts
                .iter()
                .filter(|p| replaced.contains(p.path.as_str()))
                .count();
            if present != replaced.len() {
                return false;
            }
            s.parts.retain(|p| !replaced.contains(p.path.as_str()));
            s.parts.extend(new.iter().cloned());
            s.removed.extend(replaced.iter().map(|path| Removed {
                path: path.to_string(),
                at: now_us,
            }));
            true
        })
        .await?;
        if new
            .iter()
            .all(|n| committed.parts.iter().any(|p| p.path == n.path))
        {
            merged += replaced.len();
        } else {
            // Another host merged them first: this merge is nobody's.
            let paths: Vec<String> = new.iter().map(|p| p.path.clone()).collect();
            store.delete_many(&paths).await?;
        }
    }
    Ok(merged)
}

/// Take into the manifest the index parts the store holds that it neither lists nor lists as
/// compacted away, unlisted for [`ORPHAN_AFTER`] at `now_us` (by the store's clock): parts whose
/// commit was lost (their writer killed between writing them and committing) or that a
/// manifest dropped. Each is read first; one that cannot be read is left out. Their rows are
/// then believed or not like any other's ([`super::view`]). Returns how many were taken in.
///
/// # Errors
/// The store's.
pub async fn adopt(store: &Store, snapshot: &Snapshot, now_us: i64) -> Result<usize, Error> {
    let listed = store.list_sized("index").await?;
    let known: BTreeSet<&str> = snapshot
        .parts
        .iter()
        .map(|p| p.path.as_str())
        .chain(snapshot.removed.iter().map(|r| r.path.as_str()))
        .collect();
    let mut orphans = Vec::new();
    for (path, size, at) in listed {
        let Some((table, day)) = snapshot::is_part_path(&path) else {
            continue;
        };
        if known.contains(path.as_str())
            || at.saturating_add(ORPHAN_AFTER) > now_us
            || size > super::bounds::MAX_PART_BYTES
        {
            continue;
        }
        let Ok(bytes) = store.get_bounded(&path, size).await else {
            continue;
        };
        let read = match table {
            Table::Sessions => table::decode_sessions(bytes).map(|r| (r.len(), None)),
            Table::Turns => table::decode_turns(bytes).map(|r| (r.len(), None)),
            Table::Edits => table::decode_edits(bytes).map(|r| (r.len(), None)),
            Table::Postings => table::decode_all_postings(bytes).map(|r| {
                let words = r
                    .first()
                    .zip(r.last())
                    .map(|(a, b)| (a.0.clone(), b.0.clone()));
                (r.len(), words)
            }),
        };
        let Ok((rows, words)) = read else {
            continue;
        };
        orphans.push(Part {
            table,
            path,
            rows: rows as u64,
            bytes: size,
            day,
            words,
        });
        if orphans.len() == ADOPTED {
            break;
        }
    }
    if orphans.is_empty() {
        return Ok(0);
    }
    snapshot::commit(store, |s| {
        let missing: Vec<Part> = orphans
            .iter()
            .filter(|o| {
                !s.parts.iter().any(|p| p.path == o.path)
                    && !s.removed.iter().any(|r| r.path == o.path)
            })
            .cloned()
            .collect();
        let changed = !missing.is_empty();
        s.parts.extend(missing);
        changed
    })
    .await?;
    Ok(orphans.len())
}

/// Parts holding every row of the parts of `parts` that can be read (sessions: the latest
/// version of each; turns and postings: each once), split as a writer splits them. Returns the
/// paths of the parts read, and the new parts.
async fn merge(
    store: &Store,
    table: Table,
    day: Option<&str>,
    host: &str,
    parts: &[Part],
) -> Result<(Vec<String>, Vec<Part>), Error> {
    let mut blobs = Vec::new();
    for p in parts {
        match store
            .get_bounded(&p.path, p.bytes.min(super::bounds::MAX_PART_BYTES))
            .await
        {
            Ok(bytes) => blobs.push((p.path.clone(), bytes)),
            Err(e) => tracing::warn!("index: {}: {e}: not merged", p.path),
        }
    }
    let mut read = Vec::new();
    let unreadable = |path: &str, e: parquet::errors::ParquetError| {
        tracing::warn!("index: {path}: {e}: not merged");
    };
    let day = day.unwrap_or_default();
    let new = match table {
        Table::Sessions => {
            let mut latest: HashMap<String, SessionRow> = HashMap::new();
            for (path, bytes) in blobs {
                let rows = match table::decode_sessions(bytes) {
                    Ok(rows) => rows,
                    Err(e) => {
                        unreadable(&path, e);
                        continue;
                    }
                };
                read.push(path);
                for row in rows {
                    if latest
                        .get(&row.session)
                        .is_none_or(|have| have.version < row.version)
                    {
                        latest.insert(row.session.clone(), row);
                    }
                }
            }
            let rows: Vec<SessionRow> = latest.into_values().collect();
            put_sessions(store, host, day, &rows).await?
        }
        Table::Turns => {
            let mut seen = BTreeMap::new();
            for (path, bytes) in blobs {
                let rows = match table::decode_turns(bytes) {
                    Ok(rows) => rows,
                    Err(e) => {
                        unreadable(&path, e);
                        continue;
                    }
                };
                read.push(path);
                for row in rows {
                    seen.insert((row.session.clone(), row.turn, row.started_us), row);
                }
            }
            let rows: Vec<TurnRow> = seen.into_values().collect();
            put_turns(store, host, day, &rows).await?
        }
        Table::Edits => {
            let mut rows: Vec<EditRow> = Vec::new();
            for (path, bytes) in blobs {
                match table::decode_edits(bytes) {
                    Ok(part) => {
                        read.push(path);
                        rows.extend(part);
                    }
                    Err(e) => unreadable(&path, e),
                }
            }
            // A row in two parts (a commit retried) is kept once; each session's rows stay in
            // their order.
            let mut seen = std::collections::HashSet::new();
            rows.retain(|r| seen.insert(r.clone()));
            put_edits(store, host, day, &rows).await?
        }
        Table::Postings => {
            let mut all = BTreeSet::new();
            for (path, bytes) in blobs {
                match table::decode_all_postings(bytes) {
                    Ok(rows) => {
                        read.push(path);
                        all.extend(rows);
                    }
                    Err(e) => unreadable(&path, e),
                }
            }
            let rows: Vec<(String, String)> = all.into_iter().collect();
            put_postings(store, host, &rows).await?
        }
    };
    Ok((read, new))
}

/// The rows a session's segments (in the order it was written, each with the host that wrote
/// it) give: its turns, its row (the host of its latest segment's), its postings, its edits
/// (their paths placed by `repos`, as this host sees them).
pub fn rows_of(segments: &[(PathBuf, String)], repos: &mut Repos) -> Rows {
    let mut rows = Rows::default();
    let mut session = None;
    let mut earlier = Earlier::default();
    for (path, host) in segments {
        let Ok(reader) = SegmentReader::open(path) else {
            continue;
        };
        let mut f = Follower::new(reader.header(), host, earlier);
        let mut ended = false;
        for record in reader {
            ended = is_end_marker(&record);
            rows.turns.extend(f.record(&record));
        }
        f.segment_bytes(super::writer::segment_bytes(path));
        if ended {
            // Its run closed it: as the writer that followed it says when it ends.
            f.close();
        }
        let derived = f.take_derived(true);
        rows.edits.extend(repos.rows(derived, host));
        earlier = f.earlier();
        let row = f.session().clone();
        for word in f.take_words() {
            rows.postings.insert((word, row.session.clone()));
        }
        session = Some(row);
    }
    rows.sessions.extend(session);
    rows
}

/// Replace the whole index with the rows of `sessions` (each: its segments in order, with the
/// host that wrote each), written as parts by `host`: what `index rebuild` commits. The parts it
/// replaces are deleted after [`GRACE`].
///
/// # Errors
/// The store's.
pub async fn rebuild(
    store: &Store,
    host: &str,
    sessions: &[Vec<(PathBuf, String)>],
    now_us: i64,
) -> Result<Snapshot, Error> {
    let mut rows = Rows::default();
    let mut repos = Repos::default();
    for segments in sessions {
        rows.add(rows_of(segments, &mut repos));
    }
    let parts = put_rows(store, host, &rows).await?;
    Ok(snapshot::commit(store, |s| replace_all(s, &parts, now_us)).await?)
}

/// Make `parts` the manifest's only parts, those it listed before compacted away at `now_us`;
/// whether it changed anything. Parts are compared by path, in any order: the manifest as
/// stored lists the tables of format 1 before the others (`snapshot::Stored`), so a manifest
/// read back after this commit lists `parts` in another order when they mix them.
pub(super) fn replace_all(s: &mut Snapshot, parts: &[Part], now_us: i64) -> bool {
    let listed: BTreeSet<&str> = s.parts.iter().map(|p| p.path.as_str()).collect();
    if listed.len() == parts.len() && parts.iter().all(|p| listed.contains(p.path.as_str())) {
        return false;
    }
    let old = std::mem::replace(&mut s.parts, parts.to_vec());
    s.removed.extend(
        old.into_iter()
            .filter(|p| !parts.contains(p))
            .map(|p| Removed {
                path: p.path,
                at: now_us,
            }),
    );
    true
}
