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
/// The manifest's format; a reader that finds a later one falls back to the journals.
pub const FORMAT: u32 = 1;
/// Largest manifest read.
const MAX_MANIFEST: u64 = 64 << 20;
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
pub struct Snapshot {
    /// [`FORMAT`].
    pub format: u32,
    /// Raised by every commit.
    pub version: u64,
    /// Every part that counts.
    pub parts: Vec<Part>,
    /// Parts compacted away, to delete after a grace.
    #[serde(default)]
    pub removed: Vec<Removed>,
}

impl Snapshot {
    /// The parts of `table`.
    pub fn of(&self, table: Table) -> impl Iterator<Item = &Part> {
        self.parts.iter().filter(move |p| p.table == table)
    }
}

/// What the store holds as the manifest.
#[derive(Debug)]
pub enum Read {
    /// None yet: no host has indexed anything.
    Absent,
    /// The manifest, at a version.
    Found(Version, Snapshot),
    /// Something that is not a manifest of this format (hostile, damaged, or newer).
    Unreadable(Version, String),
}

/// Read the manifest.
///
/// # Errors
/// The store's.
pub async fn read(store: &Store) -> Result<Read, Error> {
    let Some((version, bytes)) = store.get_versioned(MANIFEST, MAX_MANIFEST).await? else {
        return Ok(Read::Absent);
    };
    Ok(match serde_json::from_slice::<Snapshot>(&bytes) {
        Ok(s) if s.format == FORMAT => Read::Found(version, s),
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
