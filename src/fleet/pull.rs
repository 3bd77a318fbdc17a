//! Pulling from the store into a journal directory: a session's segments (for a host that
//! continues it, or a reader), and every host's catalog merged into one (for `list`).
//!
//! A file is pulled by appending the bytes the store has past what the local copy holds, in
//! order, so a local copy is always a prefix of the file (a reader sees at worst an
//! unfinished segment) and pulling again fetches only what is new. Each segment's epoch and
//! fence are kept beside the local copy ([`crate::journal::mark`]), so a load replays the
//! segments in epoch order and each only up to its fence — also this host's own segments,
//! whose local copies run on past a fence another host wrote.
//!
//! The store is untrusted: a name that would leave its directory is skipped, a part larger than
//! any the shipper writes is refused, a compressed part may not inflate past the size its name
//! gives, a segment whose header names another session is removed, and a segment not written
//! under an epoch its session's lease history gives to its run is not pulled: each is reported
//! ([`Pulled::skipped`]).

use crate::fleet::layout::{SessionId, SessionKey};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::Write;
use std::path::Path;

use futures_util::StreamExt;

use super::Error;
use super::layout::{self, Entry, Step};
use super::lease;
use super::parsed::{self, HostLine, HostLines};
use super::store::Store;
use crate::catalog::{Catalog, CatalogEntry, SessionSummary};
use crate::journal::JournalDir;
use crate::journal::dir::segment_name_ok;
use crate::journal::private::{create_private_dir, create_private_file};

/// Largest part a reader accepts (the shipper writes at most 64 MiB).
const MAX_PART: u64 = 256 << 20;
/// Parts fetched at once for one file.
const FETCHES: usize = 8;
/// Host catalogs parsed at once.
const PARSES: usize = 4;

/// What a pull brought.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pulled {
    /// Files that grew.
    pub files: usize,
    /// Bytes appended.
    pub bytes: u64,
    /// Files that stopped short, and why (a part missing, damaged or not what its name says):
    /// what came before it was kept.
    pub skipped: Vec<String>,
}

/// A segment's name in the store is one the journal directory could hold: `sessions/<key>/<name>`
/// (or `connections/<name>`) with `<name>` one plain component ending in `.acpj.zst`.
fn safe_segment(file: &str) -> bool {
    let parts: Vec<&str> = file.split('/').collect();
    match parts.as_slice() {
        ["sessions", key, name] => {
            !key.is_empty() && !key.starts_with('.') && !key.contains('\\') && segment_name_ok(name)
        }
        ["connections", name] => segment_name_ok(name),
        _ => false,
    }
}

/// Pull every segment of `session` the store holds into `local` (what the local copies lack),
/// keeping each one's epoch and fence beside it. A file that cannot be read whole keeps what
/// came before the trouble ([`Pulled::skipped`]).
///
/// # Errors
/// The store's listing.
pub async fn session(
    store: &Store,
    local: &JournalDir,
    session: SessionId<'_>,
) -> Result<Pulled, Error> {
    let key = SessionKey::of(session);
    // Neither waits for the other; the listing's error is the one said, as when it came first.
    let dir = session_dir(session);
    let (objects, history) = tokio::join!(store.list(&dir), lease::history(store, &key));
    let (objects, history) = (objects?, history?);
    Ok(session_listed(store, local, session, &objects, &history).await)
}

/// The directory of `session`'s segments in the store (what [`session`] lists).
pub fn session_dir(session: SessionId<'_>) -> String {
    format!("sessions/{}", SessionKey::of(session))
}

/// The segments of `session` that `objects` (a listing of its directory, [`session_dir`])
/// names, each with its entries: only names a journal directory could hold, under it.
pub fn segment_files<'a>(
    session: SessionId<'_>,
    objects: &'a [String],
) -> BTreeMap<&'a str, Vec<Entry>> {
    let dir = session_dir(session);
    let mut files: BTreeMap<&str, Vec<Entry>> = BTreeMap::new();
    for rel in objects {
        if let Some((file, entry)) = layout::split_object(rel)
            && safe_segment(file)
            && file
                .strip_prefix(dir.as_str())
                .is_some_and(|r| r.starts_with('/'))
        {
            files.entry(file).or_default().push(entry);
        }
    }
    files
}

/// [`session`], from a listing of its directory already made (`objects`) and its lease
/// history (`history`): a follower that lists the directory to learn whether anything changed
/// pulls what it listed, reading the history again only when a segment or an epoch is new.
pub async fn session_listed(
    store: &Store,
    local: &JournalDir,
    session: SessionId<'_>,
    objects: &[String],
    history: &lease::Epochs,
) -> Pulled {
    let mut pulled = Pulled::default();
    for (file, entries) in segment_files(session, objects) {
        let name = file.rsplit('/').next().unwrap_or(file);
        let run = layout::run_of_segment(name).unwrap_or(name);
        let epochs: Vec<u64> = entries
            .iter()
            .filter_map(|e| match e {
                Entry::Epoch { epoch } => Some(*epoch),
                _ => None,
            })
            .collect();
        if !history.admits(run, &epochs) {
            pulled.skipped.push(format!(
                "{file}: not written under an epoch the session's lease history gives its run (epochs {epochs:?}): not read"
            ));
            continue;
        }
        let path = local.root().join(file);
        let existed = path.exists();
        // A file this host writes is never behind the store (the store has only what it
        // shipped from it), so nothing is appended to it; its mark still says where the
        // shared session's copy of it ends.
        match pull_file(store, file, &entries, &path).await {
            Ok(0) => {}
            Ok(bytes) => {
                pulled.files += 1;
                pulled.bytes += bytes;
            }
            Err(e) => pulled.skipped.push(e.to_string()),
        }
        if !existed && path.exists() && !names(&path, session.as_str(), run) {
            let _ = std::fs::remove_file(&path);
            pulled.skipped.push(format!(
                "{file}: its header is not that of a segment of session {session:?} by run {run:?}: not read"
            ));
            continue;
        }
        if path.exists() {
            let fence = entries
                .iter()
                .filter_map(|e| match e {
                    Entry::Fence { end } => Some(*end),
                    _ => None,
                })
                .min();
            let mark = crate::journal::mark::Mark {
                epoch: epochs.iter().copied().max(),
                fence,
                pulled: !existed,
            };
            if mark != crate::journal::mark::Mark::default()
                && let Err(e) = crate::journal::mark::add(&path, mark)
            {
                pulled.skipped.push(format!("{}: {e}", path.display()));
            }
        }
    }
    pulled
}

/// Whether the segment at `path` says it is session `session`'s, written by run `run`.
fn names(path: &Path, session: &str, run: &str) -> bool {
    crate::journal::SegmentReader::open(path)
        .is_ok_and(|r| r.header().session.as_deref() == Some(session) && r.header().run == run)
}

/// Append to `path` what the store holds of `file` past the local copy's end; returns the
/// bytes appended. A local copy longer than the store's is left as it is.
///
/// # Errors
/// The store's, a part that is not what its name says, or the local disk's; the parts before
/// the one in error are appended all the same.
pub async fn pull_file(
    store: &Store,
    file: &str,
    entries: &[Entry],
    path: &Path,
) -> Result<u64, Error> {
    let have = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let (steps, end) = layout::parts_to_read(entries, have);
    if steps.is_empty() || end <= have {
        return Ok(0);
    }
    // Parts larger than any the shipper writes are not read, nor anything after them.
    let readable = steps
        .iter()
        .position(|s| s.end - s.start > MAX_PART)
        .unwrap_or(steps.len());
    let oversized = steps.get(readable).map(|step| {
        Error::invalid(format!(
            "a part of {} bytes in the store (at most {MAX_PART} are read)",
            step.end - step.start
        ))
        .at(file)
    });
    let compressed = layout::compressed(file);
    // Collected first: a stream over a borrowing closure is not `Send` for every lifetime,
    // which a task spawned on the fleet's runtime (the index's repair) needs.
    let fetches: Vec<_> = steps[..readable]
        .iter()
        .map(|&step| fetch(store, file, step, compressed))
        .collect();
    let mut chunks = futures_util::stream::iter(fetches).buffered(FETCHES);
    if let Some(dir) = path.parent() {
        create_private_dir(dir).map_err(|e| Error::local(dir, e))?;
    }
    let mut out = match std::fs::OpenOptions::new().append(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            create_private_file(path).map_err(|e| Error::local(path, e))?
        }
        Err(e) => return Err(Error::local(path, e)),
    };
    let mut written = 0;
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        out.write_all(&chunk).map_err(|e| Error::local(path, e))?;
        written += chunk.len() as u64;
    }
    match oversized {
        Some(why) => Err(why),
        None => Ok(written),
    }
}

/// The bytes of one step.
async fn fetch(
    store: &Store,
    file: &str,
    step: Step,
    compressed: bool,
) -> Result<bytes::Bytes, Error> {
    let name = format!("{file}/{}", layout::part_name(step.start, step.end));
    let size = step.end - step.start;
    let wrong = |e: Error| e.at(&name);
    if compressed {
        let packed = store.get(&name).await.map_err(|e| wrong(e.into()))?;
        if packed.len() as u64 > MAX_PART {
            return Err(wrong(Error::invalid(format!("{} bytes", packed.len()))));
        }
        let plain = zstd::bulk::decompress(&packed, usize::try_from(size).unwrap_or(0)).map_err(
            |source| {
                wrong(Error::Decompress {
                    expected: Some(size),
                    source,
                })
            },
        )?;
        if plain.len() as u64 != size {
            return Err(wrong(Error::invalid(format!(
                "{} bytes, not {size}",
                plain.len()
            ))));
        }
        let from = usize::try_from(step.from - step.start).unwrap_or(0);
        return Ok(bytes::Bytes::from(plain).slice(from..));
    }
    let bytes = store
        .get_range(&name, step.from - step.start..size)
        .await
        .map_err(|e| wrong(e.into()))?;
    if bytes.len() as u64 != step.end - step.from {
        return Err(wrong(Error::invalid(format!(
            "{} bytes, not the {} its name gives",
            bytes.len(),
            step.end - step.from
        ))));
    }
    Ok(bytes)
}

/// Every host's catalog as a reader believes it.
#[derive(Debug, Default)]
pub struct Catalogs {
    /// The hosts' catalogs that stopped short, and why (what came before was kept).
    pub skipped: Vec<String>,
    /// Each session, and the hosts believed about it: those whose catalog opened it, and of a
    /// session more than one host says it opened, those its lease history names.
    pub claims: HashMap<String, BTreeSet<String>>,
    /// Each segment a believed catalog opened (`sessions/<key>/<name>`), and its host.
    pub opened_by: HashMap<String, String>,
    /// The merged catalog's lines, in time order, each with the session it speaks of.
    pub lines: Vec<(Option<String>, Vec<u8>)>,
    /// The sessions the merged catalog lists, as the copy lists them
    /// (`sessions_with(false)`), from the lines as parsed once.
    pub sessions: Vec<SessionSummary>,
    /// The keys of erasure markers not honoured: their session's lease is still in the store,
    /// so no `acp-journal erase` wrote them.
    pub refused_erasures: Vec<SessionKey>,
}

impl Catalogs {
    /// What a reader says on stderr of the catalogs it could not read whole and the markers it
    /// refused.
    pub fn said(&self, url: &str) -> Vec<String> {
        let mut said: Vec<String> = self
            .skipped
            .iter()
            .map(|why| format!("{url}: {why} (read up to there)"))
            .collect();
        said.extend(self.refused_erasures.iter().map(|key| {
            format!(
                "{url}: erased/{key} marks a session erased, but its lease is still in the store (`acp-journal erase` deletes it first): not honoured"
            )
        }));
        said
    }
}

/// The file of a reader's copy listing the erasure markers honoured.
const HONOURED_ERASURES: &str = "erasures-honoured";

/// Every host's catalog, pulled into `local`'s `hosts/<host>/catalog.ndjson` and merged, in time
/// order, into its `catalog.ndjson` (replaced whole): the store's sessions as one catalog.
///
/// # Errors
/// The store's listing, or the local disk's.
pub async fn catalogs(store: &Store, local: &JournalDir) -> Result<Catalogs, Error> {
    // What was erased from the store leaves this copy too: its catalog lines, its sessions —
    // of the markers honoured (see `erase::honoured`; those honoured before are kept in the
    // copy and not asked about again). The markers are asked about while the catalogs are
    // pulled.
    let known_file = local.root().join(HONOURED_ERASURES);
    let known: HashSet<SessionKey> = std::fs::read_to_string(&known_file)
        .unwrap_or_default()
        .lines()
        .map(SessionKey::named)
        .collect();
    let erasures = async {
        let markers = super::erase::erased_keys(store).await?;
        super::erase::honoured(store, markers, &known).await
    };
    let (pulled, erasures) = tokio::join!(pull_host_catalogs(store, local), erasures);
    let (hosts, skipped) = pulled?;
    let (erased, refused_erasures) = erasures?;
    if erased != known {
        let mut keys: Vec<&SessionKey> = erased.iter().collect();
        keys.sort();
        let text: String = keys.iter().map(|k| format!("{k}\n")).collect();
        let tmp = known_file.with_extension("tmp");
        let written = create_private_file(&tmp)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .and_then(|()| std::fs::rename(&tmp, &known_file));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::local(&known_file, e));
        }
    }
    if !erased.is_empty() {
        for host in &hosts {
            let path = local.root().join(layout::host_catalog(host));
            if let Ok(mut bytes) = std::fs::read(&path)
                && super::erase::blank_lines(&mut bytes, &erased) > 0
            {
                let tmp = path.with_extension("ndjson.erase.tmp");
                let written = create_private_file(&tmp)
                    .and_then(|mut f| f.write_all(&bytes))
                    .and_then(|()| std::fs::rename(&tmp, &path));
                if let Err(e) = written {
                    return Err(Error::local(&path, e));
                }
            }
        }
        for key in &erased {
            let _ = std::fs::remove_dir_all(local.root().join("sessions").join(key.as_str()));
        }
    }
    // Each host speaks only for the sessions it opened; of a session more than one host
    // says it opened, only those its lease history says took it (any host may write any
    // catalog, so a claim alone is not believed where it matters).
    // Parsed a few at once, each on a blocking thread, kept in the hosts' order.
    let parses: Vec<_> = hosts
        .iter()
        .map(|host| {
            let path = local.root().join(layout::host_catalog(host));
            super::blocking::run(move || parsed::host_catalog(&path))
        })
        .collect();
    let catalogs: Vec<Option<std::sync::Arc<HostLines>>> = futures_util::stream::iter(parses)
        .buffered(PARSES)
        .collect()
        .await;
    let parsed: Vec<(&str, std::sync::Arc<HostLines>)> = hosts
        .iter()
        .zip(catalogs)
        .filter_map(|(host, catalog)| Some((host.as_str(), catalog?)))
        .collect();
    let mut said: Vec<(&str, &HostLine)> = Vec::new();
    let mut claims: BTreeMap<String, BTreeMap<&str, Vec<String>>> = BTreeMap::new();
    for (host, catalog) in &parsed {
        for line in &catalog.lines {
            if let CatalogEntry::Open {
                session, segment, ..
            } = &line.entry
            {
                claims
                    .entry(session.clone())
                    .or_default()
                    .entry(host)
                    .or_default()
                    .push(segment.clone());
            }
            said.push((host, line));
        }
    }
    let mut refused: std::collections::HashSet<(String, &str)> = Default::default();
    for (session, by_host) in claims.iter().filter(|(_, h)| h.len() > 1) {
        let history = lease::history(store, &SessionKey::of(SessionId::new(session))).await?;
        for (host, segments) in by_host {
            let run_of = |segment: &String| {
                let name = segment.rsplit('/').next().unwrap_or(segment);
                layout::run_of_segment(name).unwrap_or(name).to_string()
            };
            if !segments.iter().any(|s| history.took(host, &run_of(s))) {
                refused.insert((session.clone(), host));
            }
        }
    }
    let mut believed = Catalogs {
        skipped,
        refused_erasures,
        ..Catalogs::default()
    };
    for (session, by_host) in claims {
        for (host, segments) in by_host {
            if refused.contains(&(session.clone(), host)) {
                continue;
            }
            for segment in segments {
                believed.opened_by.insert(segment, host.to_string());
            }
            believed
                .claims
                .entry(session.clone())
                .or_default()
                .insert(host.to_string());
        }
    }
    let mut lines: Vec<&HostLine> = said
        .into_iter()
        .filter(|(host, line)| {
            line.session
                .as_ref()
                .is_none_or(|s| !refused.contains(&(s.clone(), *host)))
        })
        .map(|(_, line)| line)
        .collect();
    lines.sort_by_key(|line| line.entry.t());
    write_catalog(local, lines.iter().map(|line| line.line.as_slice()))?;
    let mut entries = Vec::with_capacity(lines.len());
    believed.lines = lines
        .into_iter()
        .map(|line| {
            entries.push(line.entry.clone());
            (line.session.clone(), line.line.clone())
        })
        .collect();
    believed.sessions = local.sessions_of(entries);
    Ok(believed)
}

/// Every host's catalog pulled into `local` (what is new of each): the hosts the store lists,
/// and the catalogs that stopped short, and why.
///
/// # Errors
/// The store's listing.
async fn pull_host_catalogs(
    store: &Store,
    local: &JournalDir,
) -> Result<(Vec<String>, Vec<String>), Error> {
    // One listing of every host's catalog parts (a page per thousand objects), not one per host.
    let listed = store.list("hosts").await?;
    let mut parts: BTreeMap<String, Vec<Entry>> = BTreeMap::new();
    for rel in &listed {
        let Some((file, entry)) = layout::split_object(rel) else {
            continue;
        };
        let host = file
            .strip_prefix("hosts/")
            .and_then(|f| f.strip_suffix("/catalog.ndjson"))
            .filter(|h| {
                !h.is_empty()
                    && !h.starts_with('.')
                    && h.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            });
        if let Some(host) = host {
            parts.entry(host.to_string()).or_default().push(entry);
        }
    }
    let hosts: Vec<String> = parts.keys().cloned().collect();
    let pulls: Vec<_> = parts
        .iter()
        .map(|(host, entries)| pull_catalog(store, local, host, entries))
        .collect();
    let results: Vec<Result<u64, Error>> = futures_util::stream::iter(pulls)
        .buffer_unordered(16)
        .collect()
        .await;
    let skipped: Vec<String> = results
        .into_iter()
        .filter_map(Result::err)
        .map(|e| e.to_string())
        .collect();
    Ok((hosts, skipped))
}

/// Pull `host`'s catalog, whose parts in the store are `entries`, into `local` (what is new of
/// it); the bytes appended.
async fn pull_catalog(
    store: &Store,
    local: &JournalDir,
    host: &str,
    entries: &[Entry],
) -> Result<u64, Error> {
    let file = layout::host_catalog(host);
    let path = local.root().join(&file);
    let (_, end) = layout::parts_to_read(entries, 0);
    if std::fs::metadata(&path).is_ok_and(|m| m.len() > end) {
        // The host rewrote its catalog: start again.
        let _ = std::fs::remove_file(&path);
    }
    pull_file(store, &file, entries, &path).await
}

/// Replace `local`'s catalog with `lines` (whole: a reader never sees half of it).
///
/// # Errors
/// The local disk's.
pub fn write_catalog<'a>(
    local: &JournalDir,
    mut lines: impl Iterator<Item = &'a [u8]>,
) -> Result<(), Error> {
    let merged = local.root().join("catalog.ndjson");
    let tmp = local.root().join("catalog.ndjson.pull.tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut write = || -> std::io::Result<()> {
        create_private_dir(local.root())?;
        let mut out = std::io::BufWriter::new(create_private_file(&tmp)?);
        for line in lines.by_ref() {
            out.write_all(line)?;
            out.write_all(b"\n")?;
        }
        out.into_inner().map_err(|e| e.into_error())?;
        std::fs::rename(&tmp, &merged)
    };
    write().map_err(|e| Error::local(merged, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_a_journal_directory_could_hold_are_pulled() {
        for good in [
            "sessions/ssess_1/20261121T214153.123456Z-4242.acpj.zst",
            "sessions/s%2E%2E/x.1.acpj.zst",
            "connections/r.acpj.zst",
        ] {
            assert!(safe_segment(good), "{good}");
        }
        for bad in [
            "sessions/../x.acpj.zst",
            "sessions/s/../../x.acpj.zst",
            "sessions/s/x.txt",
            "sessions/s/.hidden.acpj.zst",
            "sessions//x.acpj.zst",
            "sessions/s/a b.acpj.zst",
            "catalog.ndjson",
            "connections/a/b.acpj.zst",
        ] {
            assert!(!safe_segment(bad), "{bad}");
        }
    }
}
