//! The index repairs itself: the host holding the compaction lease looks, every
//! [`super::indexer::UPKEEP`], for sessions the hosts' catalogs list that the index lacks or
//! knows less of (a host killed before its last commit and never started again, rows lost with
//! a part) for longer than [`AFTER_US`], and indexes them from the store's own journals — the
//! segments a reader would pull, each segment's rows given to the host whose catalog opened it
//! — at most [`AT_ONCE`] a pass. The catalogs are kept in a copy of the store's in the journal
//! directory (pulled again each pass: one listing and the parts that are new); the segments
//! pulled for a repair are removed once indexed.

use std::path::PathBuf;

use super::compact::rows_of;
use super::edits::Repos;
use super::snapshot::{self, Part, Snapshot};
use super::view;
use super::writer::{Rows, put_rows};
use crate::catalog::Catalog;
use crate::fleet::Error;
use crate::fleet::layout::SessionId;
use crate::fleet::pull;
use crate::fleet::store::Store;
use crate::journal::JournalDir;

/// How long the catalogs must have known more of a session than the index before it is
/// repaired (its host commits every [`super::writer::FLUSH`]; a host that is alive does it
/// itself well before).
pub const AFTER_US: i64 = 60_000_000;
/// Most sessions repaired in one pass (the rest in the next).
pub const AT_ONCE: usize = 32;

/// What a pass did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Repaired {
    /// Sessions indexed from the store's journals.
    pub sessions: usize,
    /// Sessions still behind, left for the next pass.
    pub left: usize,
}

/// Index, as `host`, the sessions the catalogs know more of than `snapshot` has for longer than
/// [`AFTER_US`] at `now_us`, from the store's journals pulled into `copy`.
///
/// # Errors
/// The store's, or the local copy's.
pub async fn repair(
    store: &Store,
    copy: &JournalDir,
    snapshot: &Snapshot,
    host: &str,
    now_us: i64,
) -> Result<Repaired, Error> {
    copy.create_dirs().map_err(Error::Journal)?;
    let catalogs = pull::catalogs(store, copy).await?;
    let summaries = copy.sessions_with(false).map_err(Error::Journal)?;
    let view = view::sessions(store, snapshot, &catalogs, &summaries, now_us).await?;
    let due: Vec<String> = view
        .lagging
        .iter()
        .filter(|l| l.since_us.saturating_add(AFTER_US) <= now_us)
        .map(|l| l.session.clone())
        .collect();
    if due.is_empty() {
        return Ok(Repaired::default());
    }
    let mut rows = Rows::default();
    let mut repos = Repos::default();
    let mut repaired = 0;
    for session in due.iter().take(AT_ONCE) {
        pull::session(store, copy, SessionId::new(session)).await?;
        let dir = copy.session_dir(session);
        let mut paths = crate::journal::dir::segments_in(&dir).unwrap_or_default();
        crate::journal::mark::in_epoch_order(&mut paths);
        let segments: Vec<(PathBuf, String)> = paths
            .into_iter()
            .filter_map(|path| {
                let host = catalogs.opened_by.get(&copy.relative(&path))?;
                Some((path, host.clone()))
            })
            .collect();
        let found = rows_of(&segments, &mut repos);
        let _ = std::fs::remove_dir_all(&dir);
        if found.sessions.is_empty() {
            continue;
        }
        rows.add(found);
        repaired += 1;
    }
    if repaired > 0 {
        let parts = put_rows(store, host, &rows).await?;
        snapshot::commit(store, |s| {
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
    }
    Ok(Repaired {
        sessions: repaired,
        left: due.len().saturating_sub(AT_ONCE),
    })
}
