//! The commands that read, on the shared store (`--store`): what a command needs is pulled
//! into a private local copy of the store (`$XDG_CACHE_HOME/acp-journal/stores/<tag>/`, laid
//! out as a journal directory), and the command reads that. Every host's catalog is pulled
//! first (one listing and one small read per host, never a read per session); then the
//! segments of the sessions the command names, or of every session when it names none (for
//! `watch`, every open one). Pulling again fetches only what is new; `watch`'s copy is kept up
//! to date while it runs.

use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use futures_util::StreamExt;
use parking_lot::RwLock;

use crate::catalog::Catalog;
use crate::cli::Command;
use crate::fleet::layout::SessionId;
use crate::fleet::store::Store;
use crate::fleet::{index, pull};
use crate::hex;
use crate::journal::JournalDir;
use crate::lru;

/// Sessions pulled at once.
const PULLS: usize = 8;
/// How often `watch`'s copy is brought up to date.
const REFRESH: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether `command` reads journals through a local copy of the store with `--store` (`blame`
/// reads the store's index first: `team_blame`).
pub(super) fn reads(command: &Command) -> bool {
    matches!(
        command,
        Command::List(_)
            | Command::Verify(_)
            | Command::Show(_)
            | Command::Export(_)
            | Command::Search(_)
            | Command::Stats(_)
            | Command::Note(_)
            | Command::Replay(_)
            | Command::Rerun(_)
            | Command::Diff(_)
            | Command::Bundle(_)
            | Command::Watch(_)
    )
}

/// The sessions a command reads.
enum Wanted {
    /// These IDs, prefixes or files.
    Named(Vec<String>),
    /// Every session.
    All,
    /// The sessions still open (`watch` without names).
    Open,
}

/// What `command` reads.
fn wanted(command: &Command) -> Wanted {
    match command {
        // The sessions not closed: their turns are counted from their segments (a killed
        // host's catalog lacks its last turns).
        // Behind a commit: any session may have written its lines.
        Command::List(a) if a.commit.is_some() => Wanted::All,
        Command::List(_) => Wanted::Open,
        // Its lines: any later session may have written over them.
        Command::Show(a) if a.commits => Wanted::All,
        Command::Show(a) => Wanted::Named(vec![a.session.clone()]),
        Command::Bundle(a) => Wanted::Named(vec![a.session.clone()]),
        Command::Rerun(a) => Wanted::Named(vec![a.source.clone()]),
        Command::Diff(a) => Wanted::Named(vec![a.a.clone(), a.b.clone()]),
        Command::Replay(a) => Wanted::Named(a.sources.clone()),
        Command::Export(a) => Wanted::Named(a.sessions.clone()),
        Command::Search(a) => a
            .session
            .clone()
            .map_or(Wanted::All, |s| Wanted::Named(vec![s])),
        Command::Stats(a) => a
            .session
            .clone()
            .map_or(Wanted::All, |s| Wanted::Named(vec![s])),
        Command::Verify(a) if !a.targets.is_empty() => Wanted::Named(a.targets.clone()),
        Command::Watch(a) if !a.sessions.is_empty() => Wanted::Named(a.sessions.clone()),
        Command::Watch(_) => Wanted::Open,
        _ => Wanted::All,
    }
}

/// The IDs `wanted` names among `sessions`: an ID, else a unique prefix (an ambiguous one is
/// left for the command to report).
fn ids(wanted: &Wanted, sessions: &[crate::catalog::SessionSummary]) -> Vec<String> {
    match wanted {
        Wanted::All => sessions.iter().map(|s| s.session.clone()).collect(),
        Wanted::Open => sessions
            .iter()
            .filter(|s| s.open && !s.deleted)
            .map(|s| s.session.clone())
            .collect(),
        Wanted::Named(names) => names
            .iter()
            .flat_map(|name| {
                if let Some(s) = sessions.iter().find(|s| &s.session == name) {
                    return vec![s.session.clone()];
                }
                let prefixed: Vec<String> = sessions
                    .iter()
                    .filter(|s| s.session.starts_with(name.as_str()))
                    .map(|s| s.session.clone())
                    .collect();
                if prefixed.len() == 1 {
                    prefixed
                } else {
                    Vec::new()
                }
            })
            .collect(),
    }
}

/// The segments written on now, by the catalogs: the latest of each open session.
fn live_segments(sessions: &[crate::catalog::SessionSummary]) -> HashSet<String> {
    sessions
        .iter()
        .filter(|s| s.open && !s.deleted)
        .filter_map(|s| s.segments.last().cloned())
        .collect()
}

/// The local copy of the store at `url` (and the endpoint the environment gives, for
/// S3-compatible stores that share bucket names).
fn cache_dir(url: &str) -> PathBuf {
    use sha2::Digest;
    let endpoint = std::env::var("AWS_ENDPOINT_URL")
        .or_else(|_| std::env::var("AWS_ENDPOINT"))
        .unwrap_or_default();
    let digest = sha2::Sha256::digest(format!("{url}\n{endpoint}").as_bytes());
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    env("XDG_CACHE_HOME")
        .or_else(|| env("HOME").map(|h| h.join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".acp-journal-cache"))
        .join("acp-journal/stores")
        .join(hex::encode(&digest[..8]))
}

/// The store at `url` opened for reading: every host's catalog pulled into the local copy.
pub(super) struct Opened {
    pub(super) store: Store,
    pub(super) copy: JournalDir,
    pub(super) runtime: tokio::runtime::Runtime,
    /// Every host's catalog as believed.
    catalogs: pull::Catalogs,
}

/// Open the store at `url` and pull every host's catalog into its local copy.
///
/// # Errors
/// The store cannot be opened or listed, or the local copy cannot be written.
pub(super) fn open(url: &str) -> anyhow::Result<Opened> {
    let store = Store::open(url)?;
    let copy = JournalDir::mirror(cache_dir(url));
    copy.create_dirs()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let catalogs = runtime
        .block_on(pull::catalogs(&store, &copy))
        .map_err(|e| anyhow::anyhow!("reading the store {url}: {e}"))?;
    for said in catalogs.said(url) {
        eprintln!("acp-journal: warning: {said}");
    }
    Ok(Opened {
        store,
        copy,
        runtime,
        catalogs,
    })
}

/// The local copy of the store at `url` with every host's catalog (for resolving names).
///
/// # Errors
/// As [`open`].
pub(super) fn catalog_copy(url: &str) -> anyhow::Result<JournalDir> {
    Ok(open(url)?.copy)
}

/// The one session of the store at `url` that `name` names (an ID, else a unique prefix), by
/// every host's catalog.
///
/// # Errors
/// As [`open`]; a name that names no one session.
pub(super) fn session_named(url: &str, name: &str) -> anyhow::Result<String> {
    let copy = open(url)?.copy;
    let sessions = copy.sessions_with(false)?;
    match ids(&Wanted::Named(vec![name.to_string()]), &sessions).pop() {
        Some(id) => Ok(id),
        None => anyhow::bail!(
            "{name:?} names no one session of {url} (see `acp-journal --store {url} list`)"
        ),
    }
}

/// How much a reader keeps of the store on disk.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    /// The copy of the sessions read (`--store-cache`).
    pub(super) copy: u64,
    /// The index's parts read (`--index-cache`).
    pub(super) index: u64,
}

/// Pull what `command` reads from the store at `url`; returns the local copy to read. For
/// `watch`, the copy is kept up to date every second on a thread of its own (the catalogs, the
/// sessions followed, which segments are written on), so `watch` follows it as it grows.
///
/// # Errors
/// The store cannot be opened or read, or the local copy cannot be written.
pub(super) fn local_copy(
    url: &str,
    command: &Command,
    limits: Limits,
) -> anyhow::Result<JournalDir> {
    match pulled_copy(url, command, limits) {
        Ok(copy) => Ok(copy),
        // A store that cannot answer: the sessions named as the last pull left them, said.
        Err(e) => match kept_copy(url, command) {
            Some(copy) => {
                eprintln!(
                    "acp-journal: warning: {e:#}: reading the local copy of the store instead ({}), as of its last pull",
                    copy.root().display()
                );
                Ok(copy)
            }
            None => Err(e),
        },
    }
}

/// The local copy of the store at `url`, when it holds every session `command` names (a
/// command that names none is not served from it: it would not say what it lacks).
fn kept_copy(url: &str, command: &Command) -> Option<JournalDir> {
    let Wanted::Named(names) = wanted(command) else {
        return None;
    };
    let copy = JournalDir::mirror(cache_dir(url));
    let sessions = copy.sessions_with(false).ok()?;
    let found = ids(&Wanted::Named(names.clone()), &sessions);
    let held = found.len() == names.len()
        && found.iter().all(|id| {
            crate::journal::dir::segments_in(&copy.session_dir(id)).is_ok_and(|s| !s.is_empty())
        });
    held.then_some(copy)
}

/// Each session of the store, and the hosts believed to have journaled it.
pub(super) use crate::fleet::listing::Hosts;

/// [`local_copy`], from the store.
fn pulled_copy(url: &str, command: &Command, limits: Limits) -> anyhow::Result<JournalDir> {
    Ok(pulled(url, command, limits)?.0)
}

/// What `command` reads, pulled from the store at `url` (as [`local_copy`] does, with no
/// fallback to the copy as last pulled), and the hosts of each session of the store.
///
/// # Errors
/// The store cannot be opened or read, or the local copy cannot be written.
pub(super) fn pulled(
    url: &str,
    command: &Command,
    limits: Limits,
) -> anyhow::Result<(JournalDir, Hosts)> {
    if let Some(found) = from_index(url, command, limits)? {
        return Ok(found);
    }
    let limit = limits.copy;
    let opened = open(url)?;
    let wanted = wanted(command);
    let sessions = opened.copy.sessions_with(false)?;
    let named = ids(&wanted, &sessions);
    opened.pull(url, &named)?;
    trim(&opened.copy, &named, limit);
    if !matches!(command, Command::Watch(_)) {
        let hosts = opened.catalogs.claims.clone();
        return Ok((opened.copy, hosts));
    }
    let live = Arc::new(RwLock::new(live_segments(&sessions)));
    let copy = opened.copy.clone().with_live(live.clone());
    let url = url.to_string();
    let hosts = opened.catalogs.claims.clone();
    std::thread::Builder::new()
        .name("store-copy".into())
        .spawn(move || opened.refresh(&url, &wanted, named, &live))?;
    Ok((copy, hosts))
}

/// Mark session `id` of the local copy `copy` used now ([`trim`] removes the sessions used
/// longest ago first).
pub(super) fn mark_used(copy: &JournalDir, id: &str) {
    let dir = copy.session_dir(id);
    if crate::journal::private::create_private_dir(&dir).is_ok() {
        let used = dir.join(USED);
        let _ = crate::journal::private::create_private_file(&used)
            .or_else(|_| std::fs::File::options().write(true).open(&used))
            .and_then(|f| f.set_modified(std::time::SystemTime::now()));
    }
}

impl Opened {
    /// Pull sessions `ids` into the copy (each marked used now).
    pub(super) fn pull(&self, url: &str, ids: &[String]) -> anyhow::Result<()> {
        for id in ids {
            mark_used(&self.copy, id);
        }
        self.runtime.block_on(async {
            let pulls = ids
                .iter()
                .map(|id| pull::session(&self.store, &self.copy, SessionId::new(id)));
            let mut results = futures_util::stream::iter(pulls).buffer_unordered(PULLS);
            while let Some(result) = results.next().await {
                let pulled = result.map_err(|e| anyhow::anyhow!("reading the store {url}: {e}"))?;
                warn(url, &pulled.skipped);
            }
            anyhow::Ok(())
        })
    }

    /// Every second: the catalogs, then the sessions followed (named ones, or every open one),
    /// then which segments are live. A failing store is said once and tried again.
    fn refresh(
        self,
        url: &str,
        wanted: &Wanted,
        named: Vec<String>,
        live: &RwLock<HashSet<String>>,
    ) {
        let mut failing = false;
        loop {
            std::thread::sleep(REFRESH);
            let refreshed = self
                .runtime
                .block_on(pull::catalogs(&self.store, &self.copy))
                .map_err(|e| anyhow::anyhow!("reading the store {url}: {e}"))
                .and_then(|_| Ok(self.copy.sessions_with(false)?))
                .and_then(|sessions| {
                    let ids = match wanted {
                        Wanted::Named(_) => named.clone(),
                        _ => ids(wanted, &sessions),
                    };
                    self.pull(url, &ids)?;
                    Ok(live_segments(&sessions))
                });
            match refreshed {
                Ok(now) => {
                    *live.write() = now;
                    failing = false;
                }
                Err(e) if !failing => {
                    eprintln!("acp-journal: {e:#} (trying again every second)");
                    failing = true;
                }
                Err(_) => {}
            }
        }
    }
}

/// Pull session `id` from the store at `url` into the journal directory `local` (for `fork
/// --store`, which forks it there).
///
/// # Errors
/// The store cannot be opened or listed, or the journal directory cannot be written.
pub(super) fn pull_session(url: &str, local: &JournalDir, id: &str) -> anyhow::Result<()> {
    let store = Store::open(url)?;
    local.create_dirs()?;
    let pulled = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(pull::session(&store, local, SessionId::new(id)))
        .map_err(|e| anyhow::anyhow!("reading the store {url}: {e}"))?;
    warn(url, &pulled.skipped);
    Ok(())
}

/// Ship session `session`'s segments in the journal directory `local` (and its catalog) to the
/// store at `url`, waiting at most `within`: a session made here by a command, not by a proxy.
///
/// # Errors
/// The store cannot be opened.
pub(super) fn publish(
    url: &str,
    local: &JournalDir,
    session: &str,
    within: std::time::Duration,
) -> anyhow::Result<()> {
    let segments = crate::journal::dir::segments_in(&local.session_dir(session))?;
    // The fork's segments were written by this process, under a run of their own.
    let run = segments
        .first()
        .and_then(|s| crate::journal::SegmentReader::open(s).ok())
        .map(|r| r.header().run.clone())
        .unwrap_or_default();
    let fleet = crate::fleet::Fleet::start(
        url,
        local.clone(),
        &run,
        crate::fleet::Options {
            ship_interval: std::time::Duration::from_millis(200),
            lease_ttl: std::time::Duration::from_secs(30),
            takeover: false,
            index: true,
        },
    )?;
    for path in segments {
        fleet.opened(&path);
        fleet.closed(&path);
    }
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(fleet.finish(within));
    Ok(())
}

/// The store's index at `url`: a client, a runtime for it, the snapshot. `None` when there is
/// no index or it cannot be trusted (said on stderr): the caller reads the journals.
///
/// # Errors
/// The store cannot be opened or read.
fn open_index(
    url: &str,
) -> anyhow::Result<Option<(Store, tokio::runtime::Runtime, index::snapshot::Snapshot)>> {
    let store = Store::open(url)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let snapshot = match runtime.block_on(index::reader::open(&store)) {
        Ok(index::reader::Found::Index(s)) => s,
        Ok(index::reader::Found::Missing) => return Ok(None),
        Ok(index::reader::Found::Unreadable(why)) => {
            eprintln!(
                "acp-journal: {url}: the index cannot be read ({why}): reading the journals instead (`acp-journal index rebuild` writes it anew)"
            );
            return Ok(None);
        }
        Err(e) => anyhow::bail!("reading the store {url}: {e}"),
    };
    Ok(Some((store, runtime, snapshot)))
}

/// The store's index as a reader believes it (see [`index::view`]): every host's catalog pulled
/// into the local copy, and the index's sessions checked against them.
pub(super) struct Indexed {
    pub(super) opened: Opened,
    pub(super) snapshot: index::snapshot::Snapshot,
    pub(super) view: index::view::View,
}

/// The store's index at `url`, read and checked, what it says of its own completeness said on
/// stderr. `None` when there is no index or it cannot be trusted (said): the caller reads the
/// journals.
///
/// # Errors
/// The store cannot be opened or read, or the local copy cannot be written.
pub(super) fn open_view(url: &str) -> anyhow::Result<Option<Indexed>> {
    Ok(open_view_with(url, async |_, _| ())?.map(|(indexed, ())| indexed))
}

/// [`open_view`], and what `also` reads of the index's snapshot, read while the catalogs are
/// pulled and the sessions table is fetched (it needs neither).
///
/// # Errors
/// As [`open_view`].
pub(super) fn open_view_with<T>(
    url: &str,
    also: impl AsyncFnOnce(&Store, &index::snapshot::Snapshot) -> T,
) -> anyhow::Result<Option<(Indexed, T)>> {
    let Some((store, runtime, snapshot)) = open_index(url)? else {
        return Ok(None);
    };
    let copy = JournalDir::mirror(cache_dir(url));
    copy.create_dirs()?;
    let (catalogs, rows, also) = runtime.block_on(async {
        tokio::join!(
            pull::catalogs(&store, &copy),
            index::view::session_rows(&store, &snapshot),
            also(&store, &snapshot),
        )
    });
    let catalogs = catalogs.map_err(|e| anyhow::anyhow!("reading the store {url}: {e}"))?;
    for said in catalogs.said(url) {
        eprintln!("acp-journal: warning: {said}");
    }
    let now = jiff::Timestamp::now().as_microsecond();
    let summaries = &catalogs.sessions;
    let read = index::view::believed_sessions(&store, &snapshot, rows, &catalogs, summaries, now);
    let view = match runtime.block_on(read) {
        Ok(view) => view,
        Err(e) => {
            eprintln!(
                "acp-journal: {url}: the index cannot be read ({e}): reading the journals instead"
            );
            return Ok(None);
        }
    };
    for said in view.said(url) {
        eprintln!("acp-journal: {said}");
    }
    let indexed = Indexed {
        opened: Opened {
            store,
            copy,
            runtime,
            catalogs,
        },
        snapshot,
        view,
    };
    Ok(Some((indexed, also)))
}

/// `stats --store` without a session: the team's figures from the index's sessions and turns
/// tables, no journal read. `None` when the index cannot answer: `stats` reads the journals.
///
/// # Errors
/// The store cannot be opened or read.
pub(super) fn team_stats(url: &str) -> anyhow::Result<Option<ExitCode>> {
    let Some(figures) = figures(url)? else {
        return Ok(None);
    };
    write!(std::io::stdout().lock(), "{figures}")?;
    eprintln!(
        "acp-journal: from the store's index ({url}); `stats --scan` counts every message of every journal"
    );
    Ok(Some(ExitCode::SUCCESS))
}

/// The team's figures from the index's sessions and turns tables of the store at `url` (what
/// it could not read said on stderr); `None` when there is no index to trust.
///
/// # Errors
/// The store cannot be opened or read.
pub(super) fn figures(url: &str) -> anyhow::Result<Option<index::figures::Figures>> {
    // The turns table is fetched with the sessions table.
    let Some((Indexed { view, .. }, turns)) = open_view_with(url, index::view::turn_rows)? else {
        return Ok(None);
    };
    let (turns, skipped) = index::view::believed_turns(turns, &view);
    for why in skipped {
        eprintln!("acp-journal: {url}: an index part cannot be read ({why}): left out");
    }
    Ok(Some(index::figures::Figures::of(&view.rows, &turns)))
}

/// `list` and `search` read the store's index first: `list` its sessions table (with every
/// host's catalog, for the sessions the index is behind on; no journal read), `search` the
/// sessions whose words can match and those the index is behind on, and then only those.
/// `None` when the index cannot answer (none, unreadable — said on stderr — or a pattern with
/// no word to look up): the command reads the journals as before.
fn from_index(
    url: &str,
    command: &Command,
    limits: Limits,
) -> anyhow::Result<Option<(JournalDir, Hosts)>> {
    let words = match command {
        Command::List(_) => None,
        Command::Search(a) if a.session.is_none() && !a.scan => {
            match index::reader::required_words(&a.pattern) {
                Some(words) => Some(words),
                None => {
                    eprintln!(
                        "acp-journal: {url}: the pattern has no word the index can look up: every session is read"
                    );
                    return Ok(None);
                }
            }
        }
        _ => return Ok(None),
    };
    // A search's lookups in the postings table are made with the sessions table's fetch.
    let cache = std::sync::Arc::new(index::cache::Cache::new(
        cache_dir(url).join("index-cache"),
        limits.index,
    ));
    let lookups = async |store: &Store, snapshot: &index::snapshot::Snapshot| match &words {
        Some(words) => Some(index::reader::candidates(store, snapshot, words, Some(&cache)).await),
        None => None,
    };
    let Some((Indexed { opened, view, .. }, looked_up)) = open_view_with(url, lookups)? else {
        return Ok(None);
    };
    let Some(looked_up) = looked_up else {
        // `list`: the sessions table, and the catalogs where the index is behind.
        let lines = view.catalog_lines(&opened.catalogs);
        pull::write_catalog(&opened.copy, lines.iter().map(Vec::as_slice))
            .map_err(anyhow::Error::msg)?;
        return Ok(Some((
            opened.copy,
            crate::fleet::listing::hosts(&opened.catalogs, &view),
        )));
    };
    let mut candidates = match looked_up {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "acp-journal: {url}: the index cannot be read ({e}): reading the journals instead"
            );
            return Ok(None);
        }
    };
    // The sessions the index is behind on are searched in their journals.
    candidates.extend(view.lagging.iter().map(|l| l.session.clone()));
    // Only those sessions, pulled, and the copy's catalog naming just them: what the search
    // reads.
    opened.copy.create_dirs()?;
    let ids: Vec<String> = candidates.into_iter().collect();
    opened.pull(url, &ids)?;
    let mut lines = Vec::new();
    for id in &ids {
        let mut segments =
            crate::journal::dir::segments_in(&opened.copy.session_dir(id)).unwrap_or_default();
        crate::journal::mark::in_epoch_order(&mut segments);
        for path in segments {
            let Ok(reader) = crate::journal::SegmentReader::open(&path) else {
                continue;
            };
            let header = reader.header();
            let entry = crate::catalog::CatalogEntry::Open {
                session: id.clone(),
                segment: opened.copy.relative(&path),
                cwd: header.cwd.clone(),
                agent: Some(header.argv.join(" ")),
                agent_name: None,
                git_branch: None,
                t: header.started,
                agent_info: None,
            };
            lines.extend(serde_json::to_vec(&entry));
        }
    }
    pull::write_catalog(&opened.copy, lines.iter().map(Vec::as_slice))
        .map_err(anyhow::Error::msg)?;
    trim(&opened.copy, &ids, limits.copy);
    let hosts = crate::fleet::listing::hosts(&opened.catalogs, &view);
    Ok(Some((opened.copy, hosts)))
}

/// `index rebuild`: every session of the store pulled into the local copy, then the index
/// written anew from their journals.
///
/// # Errors
/// No store given, or the store's.
pub(super) fn index(
    args: crate::cli::IndexArgs,
    url: Option<&str>,
    limit: u64,
) -> anyhow::Result<ExitCode> {
    let crate::cli::IndexAction::Rebuild = args.action;
    let Some(url) = url else {
        anyhow::bail!("index: name the store with --store URL");
    };
    let opened = open(url)?;
    let sessions = opened.copy.sessions_with(false)?;
    let ids: Vec<String> = sessions.iter().map(|s| s.session.clone()).collect();
    opened.pull(url, &ids)?;
    // Each segment's rows are its host's: the host whose catalog opened it.
    let mut segments = Vec::new();
    for id in &ids {
        let mut paths =
            crate::journal::dir::segments_in(&opened.copy.session_dir(id)).unwrap_or_default();
        crate::journal::mark::in_epoch_order(&mut paths);
        segments.push(
            paths
                .into_iter()
                .filter_map(|path| {
                    let host = opened
                        .catalogs
                        .opened_by
                        .get(&opened.copy.relative(&path))?;
                    Some((path, host.clone()))
                })
                .collect::<Vec<_>>(),
        );
    }
    let now = jiff::Timestamp::now().as_microsecond();
    let snapshot = opened
        .runtime
        .block_on(index::compact::rebuild(
            &opened.store,
            "rebuild",
            &segments,
            now,
        ))
        .map_err(|e| anyhow::anyhow!("writing the index to {url}: {e}"))?;
    trim(&opened.copy, &[], limit);
    eprintln!(
        "acp-journal: the index of {url} rebuilt from {} sessions: {} parts, {} rows",
        ids.len(),
        snapshot.parts.len(),
        snapshot.parts.iter().map(|p| p.rows).sum::<u64>()
    );
    Ok(ExitCode::SUCCESS)
}

/// `erase`: the sessions named, erased from the store.
///
/// # Errors
/// No store given, a name that names no session, or the store's.
pub(super) fn erase(args: crate::cli::EraseArgs, url: Option<&str>) -> anyhow::Result<ExitCode> {
    let Some(url) = url else {
        anyhow::bail!("erase: name the store with --store URL");
    };
    let opened = open(url)?;
    let sessions = opened.copy.sessions_with(false)?;
    let named = ids(&Wanted::Named(args.sessions.clone()), &sessions);
    if named.len() != args.sessions.len() {
        anyhow::bail!(
            "erase: {:?} does not name one session each of {url} (see `acp-journal --store {url} list`)",
            args.sessions
        );
    }
    erase_all(&opened, url, &named)
}

/// `prune --store`: the store's sessions (every host's) whose last activity is older than the
/// age, erased (the newest `--keep` kept whatever their age).
///
/// # Errors
/// The store's.
pub(super) fn prune(url: &str, args: crate::cli::PruneArgs) -> anyhow::Result<ExitCode> {
    let opened = open(url)?;
    let now = jiff::Timestamp::now().as_microsecond();
    let cutoff = now.saturating_sub(i64::try_from(args.older_than.as_micros()).unwrap_or(i64::MAX));
    let mut sessions = opened.copy.sessions_with(false)?;
    sessions.sort_by_key(|s| std::cmp::Reverse(s.updated));
    let old: Vec<String> = sessions
        .iter()
        .skip(args.keep)
        .filter(|s| s.updated < cutoff)
        .map(|s| s.session.clone())
        .collect();
    if args.dry_run {
        let mut out = std::io::stdout().lock();
        for id in &old {
            writeln!(out, "would erase {}", id.escape_debug())?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    erase_all(&opened, url, &old)
}

fn erase_all(opened: &Opened, url: &str, sessions: &[String]) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    for id in sessions {
        let erased = opened
            .runtime
            .block_on(crate::fleet::erase::erase(
                &opened.store,
                SessionId::new(id),
            ))
            .map_err(|e| anyhow::anyhow!("erasing {id:?} from {url}: {e}"))?;
        let _ = std::fs::remove_dir_all(opened.copy.session_dir(id));
        writeln!(
            out,
            "erased {}: {} objects, {} catalog lines, {} index rows, {} share links",
            id.escape_debug(),
            erased.objects,
            erased.catalog_lines,
            erased.index_rows,
            erased.share_links
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The file whose time says when a session of the copy was last read.
const USED: &str = ".used";

/// Keep the copy within `limit` bytes: the sessions read longest ago are removed first (the
/// hosts' catalogs, and the sessions `keep`, stay).
pub(super) fn trim(copy: &JournalDir, keep: &[String], limit: u64) {
    let size_of = |dir: &std::path::Path| -> u64 {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0)
    };
    let keep: HashSet<PathBuf> = keep.iter().map(|id| copy.session_dir(id)).collect();
    let sessions: Vec<lru::Entry> = std::fs::read_dir(copy.root().join("sessions"))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .map(|dir| lru::Entry {
                    used: std::fs::metadata(dir.join(USED))
                        .or_else(|_| std::fs::metadata(&dir))
                        .and_then(|m| m.modified())
                        .unwrap_or(std::time::UNIX_EPOCH),
                    bytes: size_of(&dir),
                    path: dir,
                })
                .collect()
        })
        .unwrap_or_default();
    let total =
        sessions.iter().map(|s| s.bytes).sum::<u64>() + size_of(&copy.root().join("connections"));
    lru::trim(
        sessions,
        total,
        limit,
        |dir| keep.contains(dir),
        |dir| std::fs::remove_dir_all(dir).is_ok(),
    );
}

/// Say on stderr which files of the store could not be read whole.
fn warn(url: &str, skipped: &[String]) {
    for why in skipped {
        eprintln!("acp-journal: warning: {url}: {why} (read up to there)");
    }
}
