//! The catalog: the journal directory's index of sessions (`catalog.ndjson`), one JSON line per
//! segment opened or closed, alias, title, delete, state change, turn end or usage report, and the
//! session summaries read from it ([`Catalog::sessions`] for the commands, [`CatalogIndex`] kept up
//! to date in memory by a proxy that serves `session/list`).
//!
//! It sits above the journal: it knows ACP (a prompt turn, a `session_info_update` title) where
//! it rebuilds itself from the segments. The catalog is append-only (each entry is one `write(2)`
//! on an `O_APPEND` file, so concurrent proxies never interleave inside a line) and can be
//! rebuilt from the segments, which are the truth.

mod entry;
mod in_memory;
mod rebuild;
mod summary;

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::journal::dir::segments_in;
use crate::journal::private::create_private_file;
use crate::journal::{JournalDir, SegmentReader, mark};
pub use entry::{AgentInfo, CatalogEntry, HostScope};
pub use in_memory::CatalogIndex;
use rebuild::{SegmentScan, scan_segments};
pub use summary::{STORE_STATES, SessionSummary};
use summary::{Summaries, closing};

/// The Git branch checked out in `cwd` (or the repository containing it): `None` outside a
/// repository, on a detached head, or when `.git` cannot be read. Reads files only (no `git`
/// process): `.git/HEAD`, or through a worktree's `.git` file (`gitdir: …`).
pub fn git_branch(cwd: &Path) -> Option<String> {
    let mut dir = Some(cwd);
    while let Some(d) = dir {
        let dot_git = d.join(".git");
        let git_dir = if dot_git.is_dir() {
            dot_git
        } else if let Ok(link) = fs::read_to_string(&dot_git) {
            let target = link.trim().strip_prefix("gitdir:")?.trim();
            d.join(target)
        } else {
            dir = d.parent();
            continue;
        };
        let head = fs::read_to_string(git_dir.join("HEAD")).ok()?;
        let branch = head.trim().strip_prefix("ref: refs/heads/")?;
        return Some(branch.to_string());
    }
    None
}

/// The catalog of a [`JournalDir`].
pub trait Catalog {
    /// Append one entry to the catalog with a single `write(2)`.
    ///
    /// # Errors
    /// I/O errors.
    fn append_catalog(&self, entry: &CatalogEntry) -> io::Result<()> {
        self.append_catalog_entries(std::slice::from_ref(entry))
    }

    /// Append entries to the catalog with a single `write(2)` (nothing for none).
    ///
    /// # Errors
    /// I/O errors.
    fn append_catalog_entries(&self, entries: &[CatalogEntry]) -> io::Result<()>;

    /// Every session in the journal directory, newest first, from the catalog (rebuilt from the
    /// segments if the catalog is missing). Segments never closed are read to count their records.
    ///
    /// # Errors
    /// I/O errors reading the catalog.
    fn sessions(&self) -> io::Result<Vec<SessionSummary>>;

    /// Like [`Catalog::sessions`]; with `count_open` false, segments never closed are not read
    /// (their record counts are then 0), which keeps this fast on a busy journal directory.
    ///
    /// # Errors
    /// I/O errors reading the catalog.
    fn sessions_with(&self, count_open: bool) -> io::Result<Vec<SessionSummary>>;

    /// The sessions `entries` list, as [`Catalog::sessions_with`] (open segments not counted)
    /// lists them from a catalog of those entries in that order: for a reader that holds the
    /// entries already, parsed.
    fn sessions_of(&self, entries: impl IntoIterator<Item = CatalogEntry>) -> Vec<SessionSummary>;

    /// Rewrite the catalog from the segments (after it was lost or damaged). Deletions recorded
    /// only in the old catalog are forgotten.
    ///
    /// # Errors
    /// I/O errors.
    fn rebuild_catalog(&self) -> io::Result<usize>;

    /// Resolve a command-line `<session>` argument: a session ID, a path to a segment file or
    /// a directory of segments, or a unique prefix of a session ID, in that order. Returns the
    /// segment paths. A session ID always means that session, even when a file of the same
    /// name exists: an agent-chosen ID such as `../../etc/passwd` never names a file.
    ///
    /// # Errors
    /// A message naming the problem: no match, or an ambiguous prefix with its candidates.
    fn resolve(&self, arg: &str) -> Result<Vec<PathBuf>, String>;
}

impl Catalog for JournalDir {
    fn append_catalog_entries(&self, entries: &[CatalogEntry]) -> io::Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut lines = Vec::new();
        for entry in entries {
            serde_json::to_writer(&mut lines, entry).expect("catalog entries serialize");
            lines.push(b'\n');
        }
        let mut file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(self.root().join("catalog.ndjson"))?;
        file.write_all(&lines)
    }

    fn sessions(&self) -> io::Result<Vec<SessionSummary>> {
        self.sessions_with(true)
    }

    fn sessions_with(&self, count_open: bool) -> io::Result<Vec<SessionSummary>> {
        let mut summaries = Summaries::default();
        match fs::read(self.root().join("catalog.ndjson")) {
            Ok(bytes) => {
                summaries.apply_lines(&bytes);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                for entry in scan_segments(self)? {
                    summaries.apply(entry);
                }
            }
            Err(e) => return Err(e),
        }
        Ok(listed(self, summaries, count_open))
    }

    fn sessions_of(&self, entries: impl IntoIterator<Item = CatalogEntry>) -> Vec<SessionSummary> {
        let mut summaries = Summaries::default();
        for entry in entries {
            summaries.apply(entry);
        }
        listed(self, summaries, false)
    }

    fn rebuild_catalog(&self) -> io::Result<usize> {
        let entries = scan_segments(self)?;
        let tmp = self
            .root()
            .join(format!("catalog.ndjson.{}.tmp", std::process::id()));
        let _ = fs::remove_file(&tmp);
        let mut file = create_private_file(&tmp)?;
        for entry in &entries {
            let mut line = serde_json::to_vec(entry).expect("catalog entries serialize");
            line.push(b'\n');
            file.write_all(&line)?;
        }
        file.sync_all()?;
        fs::rename(&tmp, self.root().join("catalog.ndjson"))?;
        Ok(entries.len())
    }

    fn resolve(&self, arg: &str) -> Result<Vec<PathBuf>, String> {
        let sessions = self.sessions_with(false);
        let pick = |s: &SessionSummary| -> Vec<PathBuf> {
            let mut paths: Vec<PathBuf> =
                s.segments.iter().map(|seg| self.root().join(seg)).collect();
            // Segments that were in a shared store go in the order their session was written
            // (by lease epoch), whatever their writers' clocks said.
            if paths.iter().any(|p| mark::read(p).epoch.is_some()) {
                mark::in_epoch_order(&mut paths);
            }
            paths
        };
        if let Some(s) = sessions.iter().flatten().find(|s| s.session == arg) {
            return Ok(pick(s));
        }
        let path = Path::new(arg);
        if path.is_file() {
            return Ok(vec![path.to_path_buf()]);
        }
        if path.is_dir() {
            return segments_in(path).map_err(|e| format!("{arg}: {e}"));
        }
        let sessions = sessions.map_err(|e| {
            format!(
                "reading the journal directory {}: {e}",
                self.root().display()
            )
        })?;
        let matches: Vec<&SessionSummary> = sessions
            .iter()
            .filter(|s| s.session.starts_with(arg))
            .collect();
        match matches.as_slice() {
            [] => Err(format!(
                "no session or journal file {arg:?} in {} (see `acp-journal list`)",
                self.root().display()
            )),
            [one] => Ok(pick(one)),
            many => Err(format!(
                "session prefix {arg:?} is ambiguous ({} matches: {}); use more characters",
                many.len(),
                many.iter()
                    .map(|s| s.session.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

/// The sessions of `dir` that `summaries` (its catalog's entries, applied) list, each one's
/// records, bytes and turns summed over its segments (an open segment read to count them with
/// `count_open`, or when its writer is gone), newest first.
fn listed(dir: &JournalDir, summaries: Summaries, count_open: bool) -> Vec<SessionSummary> {
    let live_turns = summaries.live_turns;
    let mut by_id = summaries.by_id;
    // Segments removed by `prune` (or by hand) are gone from the list; a copy of a shared
    // store lists what its catalog says, pulled or not.
    if !dir.is_mirror() {
        by_id.retain(|_, s| {
            s.segments.retain(|seg| dir.root().join(seg).exists());
            !s.segments.is_empty()
        });
    }
    for s in by_id.values_mut() {
        s.records = 0;
        s.bytes = 0;
        s.turns = 0;
        for segment in &s.segments {
            let path = dir.root().join(segment);
            if let Some((records, bytes, turns, t)) = summaries.closed.get(segment) {
                s.records += records;
                s.bytes += bytes;
                s.turns += turns;
                s.updated = s.updated.max(closing(s, *t));
            } else {
                s.bytes += fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                // The latest segment's turns as they ended (its journal may not have them
                // on disk yet); a segment read counts what a killed proxy left. A segment
                // whose writer is gone (its proxy was killed) is read whatever
                // `count_open` says: nothing more will come, and only its records tell
                // how many turns it holds (the session may have gone on in a later one).
                let live = if s.segments.last() == Some(segment) {
                    live_turns.get(&s.session).copied().unwrap_or(0)
                } else {
                    0
                };
                let mut turns = live;
                let torn = !dir.writer_alive(segment);
                if (count_open || torn)
                    && let Ok(reader) = SegmentReader::open(&path)
                {
                    let scan = SegmentScan::of(reader);
                    s.records += scan.records;
                    turns = turns.max(scan.turns);
                    s.updated = s.updated.max(scan.last);
                }
                s.turns += turns;
            }
        }
    }
    let mut list: Vec<SessionSummary> = by_id.into_values().collect();
    list.sort_by(|a, b| b.started.cmp(&a.started).then(a.session.cmp(&b.session)));
    list
}

#[cfg(test)]
#[path = "catalog_tests.rs"]
mod tests;
