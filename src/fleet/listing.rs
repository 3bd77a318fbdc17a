//! The store's sessions as a reader lists them: every host's catalog pulled and merged, and the
//! team index's sessions table where it is not behind the catalogs ([`index::view`]) — what a
//! host answers `session/list` with, and what the team page lists. Each catalog line is parsed
//! once, and the list is made from the parsed entries and the index's rows, not written and
//! read back.

use std::collections::{BTreeSet, HashMap};

use super::Error;
use super::index;
use super::pull::{self, Catalogs};
use super::store::Store;
use crate::catalog::{Catalog, SessionSummary};
use crate::journal::JournalDir;

/// Each session of the store, and the hosts believed to have journaled it.
pub type Hosts = HashMap<String, BTreeSet<String>>;

/// The store's sessions, as one reading found them.
#[derive(Debug, Default)]
pub struct Listing {
    /// Every session, deleted ones included, as a copy whose catalog is the merged one lists
    /// them ([`Catalog::sessions_with`]).
    pub sessions: Vec<SessionSummary>,
    /// The hosts of each session (see [`hosts`]).
    pub hosts: Hosts,
    /// Whether the index answered (else the catalogs alone did: no index, or none to trust).
    pub indexed: bool,
}

/// The store's sessions: every host's catalog pulled into `copy` (a mirror), and the index's
/// sessions table read at the reader's time `now_us` (what it says of either logged). A store
/// with no index, or one that cannot be read, is listed from the catalogs.
///
/// # Errors
/// The store's listing of the catalogs, or the local disk's.
pub async fn read(store: &Store, copy: &JournalDir, now_us: i64) -> Result<Listing, Error> {
    let url = store.url();
    // The index's manifest and sessions table are fetched while the catalogs are pulled:
    // neither needs the other until the rows are checked against the catalogs.
    let index = async {
        match index::reader::open(store).await? {
            index::reader::Found::Index(snapshot) => {
                let rows = index::view::session_rows(store, &snapshot).await;
                Ok::<_, Error>(Some((snapshot, rows)))
            }
            _ => Ok(None),
        }
    };
    let (catalogs, index) = tokio::join!(pull::catalogs(store, copy), index);
    let catalogs = catalogs?;
    for said in catalogs.said(url) {
        tracing::warn!("{said}");
    }
    let view = async {
        match index? {
            Some((snapshot, rows)) => {
                let summaries = &catalogs.sessions;
                index::view::believed_sessions(store, &snapshot, rows, &catalogs, summaries, now_us)
                    .await
                    .map(Some)
            }
            None => Ok(None),
        }
    };
    match view.await {
        Ok(Some(view)) => {
            for said in view.said(url) {
                tracing::debug!("{said}");
            }
            Ok(Listing {
                sessions: copy.sessions_of(view.catalog(&catalogs)),
                hosts: hosts(&catalogs, &view),
                indexed: true,
            })
        }
        Ok(None) => Ok(unindexed(catalogs)),
        Err(e) => {
            tracing::warn!("{url}: the index cannot be read ({e}): reading the catalogs");
            Ok(unindexed(catalogs))
        }
    }
}

/// The listing of the catalogs alone.
fn unindexed(catalogs: Catalogs) -> Listing {
    Listing {
        sessions: catalogs.sessions,
        hosts: catalogs.claims,
        indexed: false,
    }
}

/// The hosts of each session: those the catalogs believe, and for a session only the index
/// knows, the host of its believed row.
pub fn hosts(catalogs: &Catalogs, view: &index::view::View) -> Hosts {
    let mut hosts = catalogs.claims.clone();
    for row in &view.rows {
        hosts
            .entry(row.session.clone())
            .or_insert_with(|| BTreeSet::from([row.host.clone()]));
    }
    hosts
}

#[cfg(test)]
#[path = "listing_tests.rs"]
mod tests;
