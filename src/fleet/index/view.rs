//! What a reader believes of the index, and how complete it is: the index is written by anyone
//! who can write the bucket, so a row is believed only for a session its host could speak for,
//! and its answer is checked against the hosts' catalogs (which every reader pulls: one
//! listing and the parts that are new).
//!
//! - **Who may speak for a session.** A row (of the sessions, turns or edits table) names the host
//!   that journaled it; it is believed only if that host's catalog opened the session (of a
//!   session more than one host says it opened, only the hosts its lease history names: the
//!   rule [`crate::fleet::pull::catalogs`] applies to catalogs) — or, for a session no catalog
//!   in the store names (catalogs lost, or not shipped yet), if its lease history names the
//!   host. So no part can hide, retitle or invent another host's session.
//! - **Which row is the latest.** The highest `version` (its last activity) among the believed
//!   rows, none dated more than [`MAX_SKEW_US`] past the reader's clock: a version cannot
//!   outrank the next row of the session's own host for long.
//! - **How far behind.** A session the catalogs list that the index lacks, or knows less of (fewer
//!   turns, not closed), is behind; [`IN_FLIGHT_US`] after the catalogs said so, it is lagging,
//!   and the reader says so, and reads it from the catalogs (`list`) or its journal (`search`).
//! - **What could not be read.** A part that cannot be read is left out and named; the rest of
//!   the index still answers.

use crate::fleet::layout::{SessionId, SessionKey};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use futures_util::StreamExt;

use super::bounds::MAX_PART_BYTES;
use super::edits::EditRow;
use super::rows::{SessionRow, TurnRow};
use super::snapshot::{Part, Snapshot};
use super::table::{self, Table};
use crate::catalog::{AgentInfo, CatalogEntry, SessionSummary};
use crate::fleet::Error;
use crate::fleet::lease;
use crate::fleet::pull::Catalogs;
use crate::fleet::store::Store;

/// Most a row's version (its last activity, Unix microseconds) may be past the reader's clock.
pub const MAX_SKEW_US: i64 = 3_600_000_000;
/// How long a session's news in the catalogs may wait for the index before the index is said
/// to lag (its host commits every [`super::writer::FLUSH`], after a ship round).
pub const IN_FLIGHT_US: i64 = 30_000_000;
/// Sessions no catalog names whose lease history is read, at most, per reading.
const HISTORIES: usize = 256;
/// Parts of a table fetched and decoded at once (each read within its own bounds:
/// `super::bounds`; the usage fetches the sessions and turns tables side by side).
const FETCHES: usize = 4;
/// Most rows a reading keeps of one table, whatever the manifest lists: past them, the rest of
/// the parts are left out and said.
const MAX_ROWS_READ: usize = 4 << 20;

/// Which hosts may speak for which sessions.
#[derive(Debug, Default)]
pub struct Believers {
    claims: HashMap<String, BTreeSet<String>>,
    /// Of sessions no catalog names: the hosts their lease history names.
    histories: HashMap<String, BTreeSet<String>>,
}

impl Believers {
    /// The hosts the catalogs believe for each session, and, for `unclaimed` sessions (no
    /// catalog names them), the hosts their lease histories name (at most [`HISTORIES`] read;
    /// the rest speak for nothing).
    ///
    /// # Errors
    /// The store's.
    pub async fn new(
        store: &Store,
        catalogs: &Catalogs,
        unclaimed: impl IntoIterator<Item = String>,
    ) -> Result<Believers, Error> {
        let unclaimed: BTreeSet<String> = unclaimed
            .into_iter()
            .filter(|s| !catalogs.claims.contains_key(s))
            .take(HISTORIES)
            .collect();
        let lookups: Vec<_> = unclaimed
            .into_iter()
            .map(|session| history_of(store, session))
            .collect();
        let mut histories = HashMap::new();
        let mut found = futures_util::stream::iter(lookups).buffer_unordered(FETCHES);
        while let Some((session, history)) = found.next().await {
            let history = history?;
            histories.insert(session, history.hosts.into_values().collect());
        }
        Ok(Believers {
            claims: catalogs.claims.clone(),
            histories,
        })
    }

    /// Whether `host` may speak for `session`.
    pub fn believes(&self, session: &str, host: &str) -> bool {
        self.claims
            .get(session)
            .or_else(|| self.histories.get(session))
            .is_some_and(|hosts| hosts.contains(host))
    }
}

/// The hosts `session`'s lease history names.
async fn history_of(
    store: &Store,
    session: String,
) -> (String, Result<lease::Epochs, crate::fleet::store::Error>) {
    let history = lease::history(store, &SessionKey::of(SessionId::new(&session))).await;
    (session, history)
}

/// A session the index is behind on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lag {
    /// Its ID.
    pub session: String,
    /// Since when the catalogs know more of it (Unix microseconds, its host's clock).
    pub since_us: i64,
}

/// The index's sessions as a reader believes them.
#[derive(Debug, Default)]
pub struct View {
    /// The latest believed row of each session, newest activity first.
    pub rows: Vec<SessionRow>,
    /// Sessions the catalogs know more of than the index (in flight or lagging).
    pub behind: HashSet<String>,
    /// Of those, the ones behind for longer than [`IN_FLIGHT_US`], oldest first.
    pub lagging: Vec<Lag>,
    /// Rows not believed.
    pub disbelieved: usize,
    /// Parts that could not be read, and why.
    pub skipped: Vec<String>,
    /// Entries of the manifest that are no index parts, left out.
    pub left_out: usize,
    /// Who may speak for what (for the turns table).
    pub believers: Believers,
}

/// Rows of a table as fetched, none believed yet, and the parts that could not be read.
#[derive(Debug)]
pub struct Fetched<T> {
    rows: Vec<T>,
    skipped: Vec<String>,
}

/// Every row of every part of `table` in `snapshot`, each part decoded by `decode`; the parts
/// that cannot be read are left out, and said.
async fn every_row<T: Send + 'static>(
    store: &Store,
    snapshot: &Snapshot,
    table: Table,
    decode: fn(bytes::Bytes) -> parquet::errors::Result<Vec<T>>,
) -> Fetched<T> {
    // Collected first, so the task reading them is `Send` (see `pull::pull_file`).
    let fetches: Vec<_> = snapshot
        .of(table)
        .map(|part| rows_of_part(store, part, decode))
        .collect();
    let mut parts = futures_util::stream::iter(fetches).buffer_unordered(FETCHES);
    let (mut rows, mut skipped) = (Vec::new(), Vec::new());
    let mut left_out = 0;
    while let Some(part) = parts.next().await {
        match part {
            Ok(part) if rows.len() + part.len() <= MAX_ROWS_READ => rows.extend(part),
            Ok(_) => left_out += 1,
            Err(e) => skipped.push(e.to_string()),
        }
    }
    if left_out > 0 {
        skipped.push(format!(
            "{left_out} parts of the {} table past the {MAX_ROWS_READ} rows a reading keeps",
            table.dir()
        ));
    }
    Fetched { rows, skipped }
}

/// The rows of one part, read within its size.
async fn rows_of_part<T: Send + 'static>(
    store: &Store,
    part: &Part,
    decode: fn(bytes::Bytes) -> parquet::errors::Result<Vec<T>>,
) -> Result<Vec<T>, Error> {
    let bytes = store
        .get_bounded(&part.path, part.bytes.min(MAX_PART_BYTES))
        .await
        .map_err(|e| Error::from(e).at(&part.path))?;
    // Decoded on a blocking thread: the other parts' requests go on meanwhile.
    crate::fleet::blocking::run(move || decode(bytes))
        .await
        .map_err(|e| Error::from(e).at(&part.path))
}

/// Every row of the sessions table in `snapshot`, none believed yet: what
/// [`believed_sessions`] checks. It needs only the manifest, so a reader fetches it while it
/// pulls the catalogs.
pub async fn session_rows(store: &Store, snapshot: &Snapshot) -> Fetched<SessionRow> {
    every_row(store, snapshot, Table::Sessions, table::decode_sessions).await
}

/// Every row of the turns table in `snapshot`, none believed yet: what [`believed_turns`]
/// checks. It needs only the manifest, as [`session_rows`].
pub async fn turn_rows(store: &Store, snapshot: &Snapshot) -> Fetched<TurnRow> {
    every_row(store, snapshot, Table::Turns, table::decode_turns).await
}

/// The index's sessions, checked against `catalogs` (and `summaries`, the sessions the merged
/// catalogs list), at the reader's time `now_us`.
///
/// # Errors
/// The store's, when it cannot be asked for a lease history.
pub async fn sessions(
    store: &Store,
    snapshot: &Snapshot,
    catalogs: &Catalogs,
    summaries: &[SessionSummary],
    now_us: i64,
) -> Result<View, Error> {
    let fetched = session_rows(store, snapshot).await;
    believed_sessions(store, snapshot, fetched, catalogs, summaries, now_us).await
}

/// [`sessions`], of the rows `fetched` ([`session_rows`] of `snapshot`).
///
/// # Errors
/// The store's, when it cannot be asked for a lease history.
pub async fn believed_sessions(
    store: &Store,
    snapshot: &Snapshot,
    fetched: Fetched<SessionRow>,
    catalogs: &Catalogs,
    summaries: &[SessionSummary],
    now_us: i64,
) -> Result<View, Error> {
    let Fetched { rows: all, skipped } = fetched;
    let unclaimed: BTreeSet<String> = all.iter().map(|r| r.session.clone()).collect();
    let believers = Believers::new(store, catalogs, unclaimed).await?;
    let mut view = View {
        skipped,
        left_out: snapshot.left_out,
        ..View::default()
    };
    let mut latest: HashMap<String, SessionRow> = HashMap::new();
    for row in all {
        if !believers.believes(&row.session, &row.host)
            || row.version > now_us.saturating_add(MAX_SKEW_US)
        {
            view.disbelieved += 1;
            continue;
        }
        match latest.get(&row.session) {
            Some(have) if have.version >= row.version => {}
            _ => {
                latest.insert(row.session.clone(), row);
            }
        }
    }
    for summary in summaries.iter().filter(|s| !s.deleted) {
        let since = match latest.get(&summary.session) {
            None => Some(summary.started),
            Some(row) if summary.turns > u64::from(row.turns) => {
                Some(summary.last_turn_ended.unwrap_or(summary.updated))
            }
            Some(row) if !summary.open && row.state != "closed" => Some(summary.updated),
            Some(_) => None,
        };
        if let Some(since_us) = since {
            view.behind.insert(summary.session.clone());
            if since_us.saturating_add(IN_FLIGHT_US) <= now_us {
                view.lagging.push(Lag {
                    session: summary.session.clone(),
                    since_us,
                });
            }
        }
    }
    view.lagging.sort_by_key(|l| l.since_us);
    let mut rows: Vec<SessionRow> = latest.into_values().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.last_activity_us));
    view.rows = rows;
    view.believers = believers;
    Ok(view)
}

/// The index's turns its believed hosts journaled, each once (the same turn committed twice —
/// a run that indexed it again after a kill — counts once), and the parts that could not be
/// read.
pub async fn turns(store: &Store, snapshot: &Snapshot, view: &View) -> (Vec<TurnRow>, Vec<String>) {
    believed_turns(turn_rows(store, snapshot).await, view)
}

/// [`turns`], of the rows `fetched` ([`turn_rows`] of the snapshot `view` was read from).
pub fn believed_turns(fetched: Fetched<TurnRow>, view: &View) -> (Vec<TurnRow>, Vec<String>) {
    let Fetched { rows: all, skipped } = fetched;
    let mut once: BTreeMap<(String, u32, i64), TurnRow> = BTreeMap::new();
    for turn in all {
        if view.believers.believes(&turn.session, &turn.host) {
            once.insert((turn.session.clone(), turn.turn, turn.started_us), turn);
        }
    }
    (once.into_values().collect(), skipped)
}

/// The index's edits and commands its believed hosts journaled, each once (a row committed
/// twice counts once), in time order (a session's rows of one time in the order derived), and
/// the parts that could not be read.
pub async fn edits(store: &Store, snapshot: &Snapshot, view: &View) -> (Vec<EditRow>, Vec<String>) {
    let Fetched { rows: all, skipped } =
        every_row(store, snapshot, Table::Edits, table::decode_edits).await;
    let mut seen = HashSet::new();
    let mut rows: Vec<EditRow> = all
        .into_iter()
        .filter(|e| view.believers.believes(&e.session, &e.host) && seen.insert(e.clone()))
        .collect();
    rows.sort_by_key(|e| e.time_us);
    (rows, skipped)
}

impl View {
    /// What a reader of the store at `url` says on stderr of how complete the index's answer
    /// is (nothing when it is whole).
    pub fn said(&self, url: &str) -> Vec<String> {
        let mut said = Vec::new();
        for why in &self.skipped {
            said.push(format!(
                "{url}: an index part cannot be read ({why}): left out"
            ));
        }
        if self.left_out > 0 {
            said.push(format!(
                "{url}: the index's manifest names {} objects that are no index parts: ignored",
                self.left_out
            ));
        }
        if self.disbelieved > 0 {
            said.push(format!(
                "{url}: {} rows of the index speak for sessions their host never opened (or are dated ahead of this clock): not believed",
                self.disbelieved
            ));
        }
        if let Some(oldest) = self.lagging.first() {
            let since = jiff::Timestamp::from_microsecond(oldest.since_us)
                .map(|t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
                .unwrap_or_default();
            said.push(format!(
                "{url}: the index is behind the hosts' catalogs on {} sessions (the oldest since {since}): read from the catalogs and journals instead; a host's next flush or the repair pass of the host holding the compaction lease catches it up",
                self.lagging.len()
            ));
        }
        said
    }

    /// The merged catalog a `list` reads: the index's entries of each session it is not behind
    /// on, and the catalogs' own lines of the others.
    pub fn catalog_lines(&self, catalogs: &Catalogs) -> Vec<Vec<u8>> {
        let (kept, rows) = self.listed(catalogs);
        let mut lines: Vec<Vec<u8>> = kept.map(|(_, line)| line.clone()).collect();
        lines.extend(
            catalog_entries(&rows)
                .iter()
                .filter_map(|e| serde_json::to_vec(e).ok()),
        );
        lines
    }

    /// [`View::catalog_lines`] as entries, for a reader that lists them without writing them:
    /// only the catalogs' lines kept (those of the sessions the index is behind on) are parsed.
    pub fn catalog(&self, catalogs: &Catalogs) -> Vec<CatalogEntry> {
        let (kept, rows) = self.listed(catalogs);
        let mut entries: Vec<CatalogEntry> = kept
            .filter_map(|(_, line)| serde_json::from_slice(line).ok())
            .collect();
        entries.extend(catalog_entries(&rows));
        entries
    }

    /// Of the merged catalog, the catalogs' lines of the sessions the index does not answer
    /// for (it lacks them or is behind on them), and the index's rows of the others.
    fn listed<'a>(
        &self,
        catalogs: &'a Catalogs,
    ) -> (
        impl Iterator<Item = &'a (Option<String>, Vec<u8>)>,
        Vec<SessionRow>,
    ) {
        let from_index: HashSet<String> = self
            .rows
            .iter()
            .map(|r| r.session.as_str())
            .filter(|s| !self.behind.contains(*s))
            .map(str::to_string)
            .collect();
        let rows: Vec<SessionRow> = self
            .rows
            .iter()
            .filter(|r| from_index.contains(r.session.as_str()))
            .cloned()
            .collect();
        let kept = catalogs
            .lines
            .iter()
            .filter(move |(session, _)| session.as_deref().is_none_or(|s| !from_index.contains(s)));
        (kept, rows)
    }
}

/// The catalog entries that list `rows` as `list` shows them (a reader's copy of the store
/// whose catalog is the index's): each session opened, titled, with its turns, closed when its
/// last segment was, hidden when deleted. The segment they name is the session's own
/// (`sessions/<key>/index.acpj.zst`), never read: what a session holds is pulled by the
/// commands that read it.
pub fn catalog_entries(rows: &[SessionRow]) -> Vec<CatalogEntry> {
    let mut entries = Vec::new();
    for r in rows {
        let segment = format!(
            "sessions/{}/index.acpj.zst",
            SessionKey::of(SessionId::new(&r.session))
        );
        // `agent` is the agent's title, else its command line; rows written before issue 51
        // have no command of their own: what they say is shown as the agent's name.
        let title = match &r.agent_command {
            Some(command) => r.agent.clone().filter(|a| a != command),
            None => r.agent.clone(),
        };
        entries.push(CatalogEntry::Open {
            session: r.session.clone(),
            segment: segment.clone(),
            cwd: r.cwd.clone(),
            agent: r.agent_command.clone().or_else(|| r.agent.clone()),
            agent_name: title,
            git_branch: None,
            t: r.started_us,
            agent_info: r.agent_name.as_ref().map(|name| AgentInfo {
                name: Some(name.clone()),
                version: r.agent_version.clone(),
            }),
        });
        if let Some(title) = &r.title {
            entries.push(CatalogEntry::Prompt {
                session: r.session.clone(),
                title: title.clone(),
                t: r.started_us,
            });
        }
        if r.state == "closed" {
            if let Some(t) = r.last_turn_ended_us {
                // When its last turn ended (the close gives the turns).
                entries.push(CatalogEntry::TurnEnded {
                    session: r.session.clone(),
                    turns: 0,
                    t,
                });
            }
            entries.push(CatalogEntry::Close {
                segment,
                records: 0,
                bytes: r.bytes.unwrap_or(0),
                turns: u64::from(r.turns),
                t: r.last_activity_us,
            });
        } else if r.turns > 0 {
            entries.push(CatalogEntry::TurnEnded {
                session: r.session.clone(),
                turns: u64::from(r.turns),
                t: r.last_turn_ended_us.unwrap_or(r.last_activity_us),
            });
        }
        if r.hidden {
            entries.push(CatalogEntry::Delete {
                session: r.session.clone(),
                t: r.last_activity_us,
            });
        }
    }
    entries
}
