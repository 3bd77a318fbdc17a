//! A session of the store followed for `serve --store`'s team view ([`crate::net::team`]): read
//! in full once — every host's catalog (does the session exist, is it open), then its segments,
//! pulled into the same local copy as the commands' and rendered as `export --format html`
//! renders them — then kept up with, a look at a time:
//!
//! - a look ([`Follower::changed`]) is one listing of the session's directory in the store:
//!   the same names as before, and nothing more is read;
//! - else the render ([`Follower::render`]) pulls what the listing names past the local copy
//!   (a segment that grew: its new parts, appended, as `from_store` pulls them; a segment that
//!   appeared, whole), reading the session's lease history again first only when a segment or
//!   an epoch is new (what is pulled is checked against it as every pull is), and renders the
//!   session again: the catalogs' segments, then those the store holds that the catalogs did
//!   not name yet, in the order the session was written (by epoch).
//!
//! The session is followed while the catalogs said it was open (`live` or `idle`) and its
//! last segment was not closed by its writer (no end marker read). A render's tag digests what
//! it was rendered from: the listing, the segments in order, and whether it is open.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::from_store::{self, Limits, Opened};
use crate::catalog::Catalog;
use crate::fleet::layout::Entry;
use crate::fleet::layout::SessionId;
use crate::fleet::store::Store;
use crate::fleet::{lease, pull};
use crate::hex;
use crate::journal::{JournalDir, Tail, mark};
use crate::net::team::{Failure, Follower, Rendered, TAG_LEN};

/// The segments a listing of a session's directory names, each with the epochs it was
/// written under.
type Files = BTreeMap<String, Vec<u64>>;

/// What a listing of `session`'s directory (`objects`) names: its segments and their epochs.
fn files(session: &str, objects: &[String]) -> Files {
    pull::segment_files(SessionId::new(session), objects)
        .into_iter()
        .map(|(file, entries)| {
            let mut epochs: Vec<u64> = entries
                .iter()
                .filter_map(|e| match e {
                    Entry::Epoch { epoch } => Some(*epoch),
                    _ => None,
                })
                .collect();
            epochs.sort_unstable();
            epochs.dedup();
            (file.to_string(), epochs)
        })
        .collect()
}

/// What a new listing asks of a follower.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Catchup {
    /// Nothing: the store holds what the last render showed.
    Nothing,
    /// The segments listed grew (or were fenced, or compacted): what is new pulled.
    Pull,
    /// A segment or an epoch is new: the lease history read again, then what is new pulled.
    History,
}

/// What listing `now` (its segments `now_files`) asks of a follower that rendered listing
/// `before` (its segments `before_files`).
fn catchup(before: &[String], before_files: &Files, now: &[String], now_files: &Files) -> Catchup {
    if before == now {
        Catchup::Nothing
    } else if before_files == now_files {
        Catchup::Pull
    } else {
        Catchup::History
    }
}

/// The tag of a render of the listing `listed` (sorted), of `segments` in order, `open` or
/// not: [`TAG_LEN`] hex digits.
fn tag(listed: &[String], segments: &[PathBuf], open: bool) -> String {
    let mut digest = Sha256::new();
    for name in listed {
        digest.update(name.as_bytes());
        digest.update(b"\n");
    }
    digest.update(b"\0");
    for path in segments {
        let name = path.file_name().unwrap_or_default();
        digest.update(name.as_encoded_bytes());
        digest.update(b"\n");
    }
    digest.update([u8::from(open)]);
    hex::encode(&digest.finalize()[..TAG_LEN / 2])
}

/// A store error as the team view says it.
fn store(e: impl std::fmt::Display) -> Failure {
    Failure::Store(format!("{e:#}"))
}

/// One session of the store, followed.
pub(super) struct StoreFollower {
    id: String,
    store: Store,
    copy: JournalDir,
    /// Always there but while dropped ([`Drop`]: shut down in the background, so that a
    /// follower may be dropped on the server's runtime).
    runtime: Option<tokio::runtime::Runtime>,
    /// The session's segments in the order the catalogs named them, then those the store
    /// holds that they did not (relative to the copy's root).
    segments: Vec<String>,
    /// The catalogs said it was open when it was read in full.
    open: bool,
    /// The listing the last render was made from (sorted), and what it names.
    listed: Vec<String>,
    files: Files,
    history: lease::Epochs,
    /// A listing newer than the last render, from the last look.
    fresh: Option<Vec<String>>,
}

impl Drop for StoreFollower {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which a task of the server's runtime may not do.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl std::fmt::Debug for StoreFollower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreFollower")
            .field("id", &self.id)
            .field("segments", &self.segments)
            .field("open", &self.open)
            .field("listed", &self.listed.len())
            .finish_non_exhaustive()
    }
}

/// Session `id` (its exact ID) of the store at `url` read in full and rendered, and what
/// follows it (also when it is closed: the caller keeps it only while it is open).
///
/// # Errors
/// No such session (`NotFound`), or the store's.
pub(super) fn read(
    url: &str,
    limits: Limits,
    id: &str,
) -> Result<(Rendered, StoreFollower), Failure> {
    let opened = from_store::open(url).map_err(store)?;
    let sessions = opened.copy.sessions_with(false).map_err(store)?;
    // The ID itself, never a prefix or a path.
    let Some(summary) = sessions.iter().find(|s| s.session == id && !s.deleted) else {
        return Err(Failure::NotFound("no such session in the store".into()));
    };
    let Opened {
        store,
        copy,
        runtime,
        ..
    } = opened;
    let mut follower = StoreFollower {
        id: id.to_string(),
        store,
        copy,
        runtime: Some(runtime),
        segments: summary.segments.clone(),
        open: matches!(summary.store_state(), "live" | "idle"),
        listed: Vec::new(),
        files: Files::new(),
        history: lease::Epochs::default(),
        fresh: None,
    };
    let listed = follower.list()?;
    follower.history = follower.history()?;
    let rendered = follower.pull_and_render(listed)?;
    from_store::trim(&follower.copy, &[follower.id.clone()], limits.copy);
    Ok((rendered, follower))
}

impl StoreFollower {
    /// What `future` gives, run on this follower's runtime.
    fn block_on<T>(&self, future: impl std::future::Future<Output = T>) -> T {
        self.runtime
            .as_ref()
            .expect("a follower's runtime is there until it is dropped")
            .block_on(future)
    }

    /// The session's directory in the store, listed (sorted).
    fn list(&self) -> Result<Vec<String>, Failure> {
        let dir = pull::session_dir(SessionId::new(&self.id));
        let mut listed = self.block_on(self.store.list(&dir)).map_err(store)?;
        listed.sort_unstable();
        Ok(listed)
    }

    /// The session's lease history, read from the store.
    fn history(&self) -> Result<lease::Epochs, Failure> {
        let key = crate::fleet::layout::SessionKey::of(SessionId::new(&self.id));
        self.block_on(lease::history(&self.store, &key))
            .map_err(store)
    }

    /// What `listed` names past the local copy pulled, and the session rendered from it.
    fn pull_and_render(&mut self, listed: Vec<String>) -> Result<Rendered, Failure> {
        from_store::mark_used(&self.copy, &self.id);
        let pull = pull::session_listed(
            &self.store,
            &self.copy,
            SessionId::new(&self.id),
            &listed,
            &self.history,
        );
        for why in self.block_on(pull).skipped {
            tracing::warn!(
                "following {:?} in the store: {why} (read up to there)",
                self.id
            );
        }
        let files = files(&self.id, &listed);
        for file in files.keys() {
            if !self.segments.contains(file) {
                self.segments.push(file.clone());
            }
        }
        let paths = self.paths();
        if paths.is_empty() {
            return Err(Failure::NotFound(
                "the store holds nothing of the session's journal yet".into(),
            ));
        }
        let mut html = Vec::new();
        let told = &mut |path: &Path, tail: &Tail| {
            tracing::debug!("following {}: {tail}", path.display());
        };
        let closed = super::export::html_told(&paths, true, &mut html, told).map_err(store)?;
        let open = self.open && !closed;
        let tag = tag(&listed, &paths, open);
        self.listed = listed;
        self.files = files;
        Ok(Rendered {
            html: html.into(),
            tag,
            open,
        })
    }

    /// The session's segments the local copy holds, in the order the session was written.
    fn paths(&self) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = self
            .segments
            .iter()
            .map(|s| self.copy.root().join(s))
            .filter(|p| p.is_file())
            .collect();
        // Segments that were in a shared store go in the order their session was written (by
        // lease epoch), whatever their writers' clocks said (as `Catalog::resolve` orders them).
        if paths.iter().any(|p| mark::read(p).epoch.is_some()) {
            mark::in_epoch_order(&mut paths);
        }
        paths
    }
}

impl Follower for StoreFollower {
    fn changed(&mut self) -> Result<bool, Failure> {
        let listed = self.list()?;
        let changed = listed != self.listed;
        self.fresh = changed.then_some(listed);
        Ok(changed)
    }

    fn render(&mut self) -> Result<Rendered, Failure> {
        let listed = match self.fresh.take() {
            Some(listed) => listed,
            None => self.list()?,
        };
        let now = files(&self.id, &listed);
        if catchup(&self.listed, &self.files, &listed, &now) == Catchup::History {
            self.history = self.history()?;
        }
        self.pull_and_render(listed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_listing_asks_for_nothing_a_pull_or_the_history_first() {
        let id = "s-1";
        let key = crate::fleet::layout::SessionKey::of(SessionId::new(id));
        let seg = |name: &str, entry: &str| format!("sessions/{key}/{name}.acpj.zst/{entry}");
        let one = "20261130T100000.000000Z-1";
        let two = "20261130T110000.000000Z-2";
        let before = names(&[
            &seg(one, "epoch-0000000000000001"),
            &seg(one, "0000000000000000-0000000000000100"),
        ]);
        let files_of = |l: &[String]| files(id, l);
        // A name that is no segment of the session, or not a part, changes nothing it reads.
        assert_eq!(files_of(&before).len(), 1);
        assert_eq!(
            files_of(&before)[&format!("sessions/{key}/{one}.acpj.zst")],
            [1]
        );
        let check = |now: &[String], expected: Catchup| {
            let got = catchup(&before, &files_of(&before), now, &files_of(now));
            assert_eq!(got, expected, "{now:?}");
        };
        check(&before, Catchup::Nothing);
        // The segment grew: a part more.
        let mut grown = before.clone();
        grown.push(seg(one, "0000000000000100-0000000000000180"));
        check(&grown, Catchup::Pull);
        // Compacted (its parts replaced by one), or fenced: still the same segment.
        check(
            &names(&[
                &seg(one, "epoch-0000000000000001"),
                &seg(one, "0000000000000000-0000000000000180"),
            ]),
            Catchup::Pull,
        );
        let mut fenced = grown.clone();
        fenced.push(seg(one, "fence-0000000000000180"));
        check(&fenced, Catchup::Pull);
        // A segment appeared (another run continued the session), or an epoch.
        let mut appeared = grown.clone();
        appeared.push(seg(two, "epoch-0000000000000002"));
        appeared.push(seg(two, "0000000000000000-0000000000000040"));
        check(&appeared, Catchup::History);
        let mut epoch = grown.clone();
        epoch.push(seg(one, "epoch-0000000000000003"));
        check(&epoch, Catchup::History);
        // What is not a segment of the session is not followed.
        let mut stray = before.clone();
        stray.push(format!(
            "sessions/{key}/../x.acpj.zst/0000000000000000-0000000000000001"
        ));
        stray.push(format!(
            "sessions/{key}/notes.txt/0000000000000000-0000000000000001"
        ));
        check(&stray, Catchup::Pull);
        assert_eq!(files_of(&stray), files_of(&before));
    }

    #[test]
    fn a_tag_changes_with_the_listing_the_segments_and_whether_it_is_open() {
        let listed = names(&["a/0000000000000000-0000000000000010"]);
        let segments = [PathBuf::from("/c/sessions/k/one.acpj.zst")];
        let base = tag(&listed, &segments, true);
        assert_eq!(base.len(), TAG_LEN);
        assert!(
            base.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_eq!(tag(&listed, &segments, true), base);
        // The copy's place is not part of it: two hosts' tags of one store agree.
        assert_eq!(
            tag(
                &listed,
                &[PathBuf::from("/d/sessions/k/one.acpj.zst")],
                true
            ),
            base
        );
        assert_ne!(tag(&listed, &segments, false), base);
        assert_ne!(
            tag(
                &names(&["a/0000000000000000-0000000000000011"]),
                &segments,
                true
            ),
            base
        );
        let two = [
            segments[0].clone(),
            PathBuf::from("/c/sessions/k/two.acpj.zst"),
        ];
        assert_ne!(tag(&listed, &two, true), base);
    }
}
