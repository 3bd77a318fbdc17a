//! What a round of the shipper does about each file it follows, decided without I/O or a clock
//! ([`plan`]): from the files' state, what the disk said of each when the round looked
//! ([`OnDisk`]), the leases, the time and the store's health, the requests to the store (ask,
//! ship a part, compact) and what the round carries out on the disk and in the index before
//! sending them ([`Plan`]). [`super::Shipper`] reads the facts, calls it and carries it out.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::tracked::{
    COMPACT_AT, FileRequest, KEPT_AS_SHIPPED, Leased, MAX_COMPACT, MAX_PART, Tracked,
};
use crate::fleet::layout::SessionKey;
use crate::fleet::lease::{Leases, Shipping};
use crate::journal::JournalDir;
use crate::journal::dir::SEGMENT_SUFFIX;
use crate::journal::mark::Mark;

/// What the disk said of a followed file when the round looked at it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct OnDisk {
    /// Its length in bytes.
    pub len: u64,
    /// Its inode (a catalog rewritten in place gets a new one).
    pub inode: u64,
}

/// What a round knows besides the files: the time, the store's health, the leases and the
/// erasures.
pub(super) struct Round<'a> {
    /// Now, on the fleet's clock: what the leases are judged at.
    pub now: Duration,
    /// When the last round looked at the files, on the fleet's clock: the earliest the bytes
    /// it did not see may have been written.
    pub last_look: Duration,
    /// The store is failing: nothing is compacted.
    pub failing: bool,
    /// The leases this process holds, lost or watches.
    pub leases: &'a Leases,
    /// The sessions erased from the store: nothing of them is shipped.
    pub erased: &'a HashSet<SessionKey>,
    /// The journal directory (the ledger names files relative to it).
    pub local: &'a JournalDir,
}

/// A closed file done with, as the ledger records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct LedgerLine {
    /// Relative to the journal directory.
    pub file: String,
    /// Bytes in the store.
    pub bytes: u64,
    /// The host that continued its session, when the rest of it stays on this disk (empty when
    /// not known).
    pub stranded: Option<String>,
}

/// What a round does: the requests to the store, and what is carried out first on the disk and
/// in the index.
#[derive(Default)]
pub(super) struct Plan {
    /// What to ask of the store about each file (by the path it is followed under).
    pub requests: Vec<(PathBuf, FileRequest)>,
    /// Marks to add beside segments (the epoch a segment starts under; a stranded segment's
    /// fence), before any request is sent.
    pub marks: Vec<(PathBuf, Mark)>,
    /// Closed segments done with, for the ledger.
    pub ledger: Vec<LedgerLine>,
    /// Files of which the store will hold no more than it does, and how many bytes it holds:
    /// for the index, which reads them no further.
    pub settled: Vec<(PathBuf, u64)>,
}

/// What becomes of a file after a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Followed,
    /// Done with (shipped whole, erased, removed from the disk): forgotten.
    Forgotten,
}

/// What each file of `tracked` needs this round, from what the disk holds of it (`on_disk`, by
/// the path it is followed under; a file absent from it is not on the disk), and `round`. The
/// files' state is brought up to date (their inode, a shipped length unknown again, since when
/// bytes wait, stranded, the epoch they start under); files done with are removed from
/// `tracked` and settled.
pub(super) fn plan(
    tracked: &mut HashMap<PathBuf, Tracked>,
    on_disk: &HashMap<PathBuf, OnDisk>,
    round: &Round<'_>,
) -> Plan {
    let mut plan = Plan::default();
    let mut forgotten = Vec::new();
    for (path, t) in tracked.iter_mut() {
        if plan_file(path, t, on_disk.get(path).copied(), round, &mut plan) == Fate::Forgotten {
            forgotten.push(path.clone());
        }
    }
    for path in forgotten {
        if let Some(t) = tracked.remove(&path) {
            plan.settled.push((path, t.shipped.unwrap_or(0)));
        }
    }
    plan
}

/// What file `t` (followed under `path`; on the disk as `disk` says) needs this round, added to
/// `plan`.
fn plan_file(
    path: &Path,
    t: &mut Tracked,
    disk: Option<OnDisk>,
    round: &Round<'_>,
    plan: &mut Plan,
) -> Fate {
    if let Leased::Mine(key) | Leased::Left(key) = &t.leased
        && round.erased.contains(key)
    {
        // Erased from the store: nothing of it goes there again.
        return Fate::Forgotten;
    }
    let Some(shipped) = t.shipped else {
        plan.requests.push((path.to_path_buf(), FileRequest::Ask));
        return Fate::Followed;
    };
    let Some(disk) = disk else {
        // Removed (pruned) or not made yet (the catalog): nothing to ship now.
        return if t.closed {
            Fate::Forgotten
        } else {
            Fate::Followed
        };
    };
    if t.inode != 0 && (disk.inode != t.inode || disk.len < shipped) {
        // Rewritten in place (`list --rebuild-catalog`): shipped again from the start;
        // readers take the longest chain, so the old parts are removed first.
        t.shipped = None;
        t.inode = disk.inode;
        plan.requests.push((path.to_path_buf(), FileRequest::Ask));
        return Fate::Followed;
    }
    t.inode = disk.inode;
    if disk.len > shipped && t.stranded.is_none() {
        t.waiting_since.get_or_insert(round.last_look);
        plan_growth(path, t, shipped, disk.len, round, plan);
    } else if (t.closed && t.parts.len() > KEPT_AS_SHIPPED || t.parts.len() >= COMPACT_AT)
        && shipped <= MAX_COMPACT
        && !round.failing
    {
        let start = t.parts.iter().map(|p| p.0).min().unwrap_or(0);
        let compact = FileRequest::Compact {
            start,
            end: shipped,
        };
        plan.requests.push((path.to_path_buf(), compact));
    } else if t.closed {
        let file = round.local.relative(&t.local);
        if file.ends_with(SEGMENT_SUFFIX) {
            let stranded = t.stranded.clone();
            let bytes = shipped;
            plan.ledger.push(LedgerLine {
                file,
                bytes,
                stranded,
            });
        }
        return Fate::Forgotten;
    }
    Fate::Followed
}

/// Ship the next part of file `t`, of which the store holds `shipped` bytes and the disk `len`,
/// when it may be shipped now; when its session turns out to be another host's, what the store
/// has of it is all it will have: settled, and said beside it (its fence) for `list`, `stats`
/// and the exports.
fn plan_growth(
    path: &Path,
    t: &mut Tracked,
    shipped: u64,
    len: u64,
    round: &Round<'_>,
    plan: &mut Plan,
) {
    let Some(epoch) = may_ship(t, round.leases, round.now, &mut plan.marks) else {
        if t.stranded.is_some() {
            plan.settled.push((path.to_path_buf(), shipped));
            let fence = Mark {
                fence: Some(shipped),
                ..Mark::default()
            };
            plan.marks.push((t.local.clone(), fence));
        }
        return;
    };
    let ship = FileRequest::Ship {
        start: shipped,
        end: len.min(shipped + MAX_PART),
        epoch,
    };
    plan.requests.push((path.to_path_buf(), ship));
}

/// Whether file `t` may be shipped at `now`: `Some(marker)` when it may (with the epoch marker
/// to write first, if its first part), `None` when not now. A segment a run that is gone left
/// goes under the epoch its run took; a session segment of this process as its lease says
/// ([`Leases::shipping`]), the epoch it starts under marked beside it (added to `marks`), and
/// stranded when the session is another host's.
fn may_ship(
    t: &mut Tracked,
    leases: &Leases,
    now: Duration,
    marks: &mut Vec<(PathBuf, Mark)>,
) -> Option<Option<u64>> {
    match &t.leased {
        Leased::No => Some(None),
        Leased::Left(_) => t
            .epoch
            .map(|epoch| std::mem::take(&mut t.unmarked).then_some(epoch)),
        Leased::Mine(key) => match leases.shipping(key, t.epoch, now) {
            Shipping::Ship { first } => {
                if let Some(epoch) = first {
                    t.epoch = Some(epoch);
                    let marked = Mark {
                        epoch: Some(epoch),
                        ..Mark::default()
                    };
                    marks.push((t.local.clone(), marked));
                }
                Some(first)
            }
            Shipping::NotNow => None,
            Shipping::Stranded(by) => {
                t.stranded = Some(by);
                None
            }
        },
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
