//! The index's manifest: `index/snapshot.json`, one object replaced only by compare-and-swap
//! (as the lease is), naming every Parquet part of the tables that counts. A writer adds its
//! parts and commits; a compaction replaces many parts with one; a commit that lost a race
//! reads the manifest again and tries again, so concurrent writers never lose each other's
//! parts. A reader reads the manifest once: one consistent snapshot.
//!
//! Why not Delta Lake or Iceberg: delta-rs brings a second `object_store` and `arrow` (309
//! packages with S3), Iceberg a catalog service; what the index needs of them is this one
//! object and its conditional write. Engines read the parts it lists (or, hive-partitioned,
//! the directories; see FORMAT.md).

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::table::Table;
use crate::fleet::store::{Error, Store, Version, Write, Written};

/// The manifest's name under the store's prefix.
pub const MANIFEST: &str = "index/snapshot.json";
/// The manifest's format; a reader that finds another falls back to the journals. Still 1 with
/// the `edits` table (issue 53): its parts are listed in fields a build of before ignores (see
/// [`Stored`]), so such a build still reads the manifest, and keeps committing to it, instead
/// of finding it unreadable and starting it afresh.
pub const FORMAT: u32 = 1;
/// Largest manifest read: a larger one is unreadable (readers fall back on the journals, the
/// next writer starts it afresh). Compaction keeps a real one to a few parts per table and day:
/// years of a busy team's index are a few megabytes.
pub const MAX_MANIFEST: u64 = 8 << 20;
/// Most entries (parts and parts compacted away) a manifest may list, for the same reason.
pub const MAX_ENTRIES: usize = 40_000;
/// How long after a commit the manifest is read back.
const SETTLE: Duration = Duration::from_millis(100);

/// One Parquet part of a table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    /// Which table.
    pub table: Table,
    /// Its object, relative to the store's prefix.
    pub path: String,
    /// Rows in it.
    pub rows: u64,
    /// Its size.
    pub bytes: u64,
    /// The day its rows belong to (`YYYY-MM-DD`, UTC), for the tables partitioned by day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub day: Option<String>,
    /// The smallest and largest word of a postings part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub words: Option<(String, String)>,
}

/// A part taken out of the manifest, removed from the store once readers are done with it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Removed {
    /// Its object.
    pub path: String,
    /// When it left the manifest (Unix microseconds, the compactor's clock: only for the
    /// grace before it is deleted).
    pub at: i64,
}

/// The manifest.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Stored", into = "Stored")]
pub struct Snapshot {
    /// [`FORMAT`].
    pub format: u32,
    /// Raised by every commit.
    pub version: u64,
    /// Every part that counts.
    pub parts: Vec<Part>,
    /// Parts compacted away, to delete after a grace.
    pub removed: Vec<Removed>,
    /// Entries of the manifest as the store holds it that it may not name (see
    /// [`Snapshot::sanitized`]), left out when it was read: never written back.
    pub left_out: usize,
}

/// The manifest as the store holds it: the parts (and parts compacted away) of the tables of
/// format 1 (`sessions`, `turns`, `postings`) in `parts` and `removed`, where every build reads
/// them; those of the tables added since (`edits`) in `later_parts` and `later_removed`, which
/// a build of before ignores, and leaves out when it commits: the parts it dropped are taken in
/// again by the next upkeep ([`super::compact::adopt`]; a part compacted away that comes back
/// so is read twice until the next compaction, and a row counted twice counts once).
#[derive(Serialize, Deserialize)]
struct Stored {
    format: u32,
    version: u64,
    parts: Vec<Part>,
    #[serde(default)]
    removed: Vec<Removed>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    later_parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    later_removed: Vec<Removed>,
}

impl From<Stored> for Snapshot {
    fn from(stored: Stored) -> Snapshot {
        let mut parts = stored.parts;
        parts.extend(stored.later_parts);
        let mut removed = stored.removed;
        removed.extend(stored.later_removed);
        Snapshot {
            format: stored.format,
            version: stored.version,
            parts,
            removed,
            left_out: 0,
        }
    }
}

impl From<Snapshot> for Stored {
    fn from(snapshot: Snapshot) -> Stored {
        let (parts, later_parts) = snapshot
            .parts
            .into_iter()
            .partition(|p| p.table.in_format_1());
        let (removed, later_removed) = snapshot
            .removed
            .into_iter()
            .partition(|r| is_part_path(&r.path).is_none_or(|(table, _)| table.in_format_1()));
        Stored {
            format: snapshot.format,
            version: snapshot.version,
            parts,
            removed,
            later_parts,
            later_removed,
        }
    }
}

impl Snapshot {
    /// The parts of `table`.
    pub fn of(&self, table: Table) -> impl Iterator<Item = &Part> {
        self.parts.iter().filter(move |p| p.table == table)
    }

    /// The manifest with only what it may name: parts that are index parts of their table
    /// and day, within [`super::bounds::MAX_PART_BYTES`], each once, and parts compacted away that are index
    /// parts and no longer listed (anything else — a segment, a catalog, a lease — is never
    /// read, and never deleted, because a manifest names it); how many were left out is kept
    /// in [`Snapshot::left_out`].
    pub fn sanitized(mut self) -> Snapshot {
        let before = self.parts.len() + self.removed.len();
        let mut seen = std::collections::HashSet::new();
        self.parts.retain(|p| {
            p.is_index_part()
                && p.bytes <= super::bounds::MAX_PART_BYTES
                && seen.insert(p.path.clone())
        });
        let listed: std::collections::HashSet<&str> =
            self.parts.iter().map(|p| p.path.as_str()).collect();
        let mut gone = std::collections::HashSet::new();
        self.removed.retain(|r| {
            is_part_path(&r.path).is_some()
                && !listed.contains(r.path.as_str())
                && gone.insert(r.path.clone())
        });
        self.left_out = before - self.parts.len() - self.removed.len();
        self
    }
}

impl Part {
    /// Whether its path is an index part of its table (and of its day, for a table by day).
    pub fn is_index_part(&self) -> bool {
        is_part_path(&self.path).is_some_and(|(table, day)| {
            table == self.table && day.as_deref() == self.day.as_deref()
        })
    }
}

/// The table and day of an index part's path: `index/<table>/day=YYYY-MM-DD/<name>.parquet` for
/// the tables by day, `index/postings/<name>.parquet`; the name of letters, digits, `-`, `_`
/// and `.`, at most 200 bytes. `None` for anything else.
pub fn is_part_path(path: &str) -> Option<(Table, Option<String>)> {
    let rest = path.strip_prefix("index/")?;
    let (dir, rest) = rest.split_once('/')?;
    let table = [Table::Sessions, Table::Turns, Table::Postings, Table::Edits]
        .into_iter()
        .find(|t| t.dir() == dir)?;
    let (day, name) = match (table, rest.split_once('/')) {
        (Table::Postings, None) => (None, rest),
        (Table::Sessions | Table::Turns | Table::Edits, Some((day, name))) => {
            let day = day.strip_prefix("day=")?;
            let valid = day.len() == 10
                && day.bytes().enumerate().all(|(i, b)| match i {
                    4 | 7 => b == b'-',
                    _ => b.is_ascii_digit(),
                });
            if !valid {
                return None;
            }
            (Some(day.to_string()), name)
        }
        _ => return None,
    };
    let stem = name.strip_suffix(".parquet")?;
    let plain = !stem.is_empty()
        && name.len() <= 200
        && !stem.starts_with('.')
        && stem
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    plain.then_some((table, day))
}

/// What the store holds as the manifest.
#[derive(Debug)]
pub enum Read {
    /// None yet: no host has indexed anything.
    Absent,
    /// The manifest, at a version, with only what it may name ([`Snapshot::sanitized`]).
    Found(Version, Snapshot),
    /// Something that is not a manifest of this format (hostile, damaged, or newer).
    Unreadable(Version, String),
}

/// Read the manifest.
///
/// # Errors
/// The store's.
pub async fn read(store: &Store) -> Result<Read, Error> {
    let (version, bytes) = match store.get_versioned(MANIFEST, MAX_MANIFEST).await {
        Ok(Some(found)) => found,
        Ok(None) => return Ok(Read::Absent),
        Err(e) if super::super::store::is_too_large(&e) => {
            // Not read: its version, for the next writer to replace it.
            return Ok(match store.head(MANIFEST).await? {
                Some(version) => {
                    Read::Unreadable(version, format!("larger than {MAX_MANIFEST} bytes"))
                }
                None => Read::Absent,
            });
        }
        Err(e) => return Err(e),
    };
    Ok(match serde_json::from_slice::<Snapshot>(&bytes) {
        Ok(s) if s.parts.len() + s.removed.len() > MAX_ENTRIES => Read::Unreadable(
            version,
            format!(
                "{} entries, more than the {MAX_ENTRIES} allowed",
                s.parts.len() + s.removed.len()
            ),
        ),
        Ok(s) if s.format == FORMAT => Read::Found(version, s.sanitized()),
        Ok(s) => Read::Unreadable(
            version,
            format!("format {} (this build reads {FORMAT})", s.format),
        ),
        Err(e) => Read::Unreadable(version, e.to_string()),
    })
}

/// How long a commit waits before its attempt `attempt` (from 1): a random moment of a window
/// that doubles from 50 ms up to 1.6 s.
fn backoff(attempt: u32) -> Duration {
    let window_ms = 50u64 << attempt.min(5);
    let mut random = [0u8; 8];
    let _ = getrandom::fill(&mut random);
    Duration::from_millis(u64::from_le_bytes(random) % window_ms + 1)
}

/// Commit `change` to the manifest: read it, apply `change` (which says whether it changed
/// anything, and must change nothing the second time: add what is missing, remove what is
/// there), write it back if still at the version read, else read it again and retry (after a
/// random pause, longer each time). A write
/// told yes is read back a moment later, and committed again if the change is not there:
/// some stores check a condition then write, so two racing writers can both be told yes. An
/// unreadable manifest is started afresh (the index is derived: `index rebuild` brings back
/// what it listed). Returns the manifest as committed.
///
/// # Errors
/// The store's, or a manifest that keeps changing under the writer.
pub async fn commit(
    store: &Store,
    mut change: impl FnMut(&mut Snapshot) -> bool,
) -> Result<Snapshot, Error> {
    for attempt in 0..16u32 {
        if attempt > 0 {
            // Writers that collided try again at different moments.
            tokio::time::sleep(backoff(attempt)).await;
        }
        let (write, mut snapshot) = match read(store).await? {
            Read::Absent => (Write::Create, Snapshot::default()),
            Read::Found(version, snapshot) => (Write::Replace(version), snapshot),
            Read::Unreadable(version, why) => {
                tracing::warn!(
                    "{}: the index manifest is unreadable ({why}): starting it afresh",
                    store.url()
                );
                (Write::Replace(version), Snapshot::default())
            }
        };
        snapshot.format = FORMAT;
        if !change(&mut snapshot) {
            return Ok(snapshot);
        }
        snapshot.version += 1;
        let bytes = Bytes::from(serde_json::to_vec(&snapshot).unwrap_or_default());
        match store.put_versioned(MANIFEST, bytes, write).await? {
            Written::Yes(_) => {
                tokio::time::sleep(SETTLE).await;
                if let Read::Found(_, mut now) = read(store).await?
                    && !change(&mut now)
                {
                    return Ok(now);
                }
            }
            Written::Conflict => {}
        }
    }
    Err(Error::Generic {
        store: "acp-journal",
        source: "the index manifest keeps changing".into(),
    })
}
