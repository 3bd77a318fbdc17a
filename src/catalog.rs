//! The catalog: the store's index of sessions (`catalog.ndjson`), one JSON line per segment
//! opened or closed, alias, title or delete, and the session summaries read from it.
//!
//! It sits above the journal: it knows ACP (a prompt turn, a `session_info_update` title) where
//! it rebuilds itself from the segments. The catalog is append-only (each entry is one `write(2)`
//! on an `O_APPEND` file, so concurrent proxies never interleave inside a line) and can be
//! rebuilt from the segments, which are the truth.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::journal::private::create_private_file;
use crate::journal::store::segments_in;
use crate::journal::{Body, Event, SegmentReader, Store, Tail};
use crate::wire::Side;

/// One line of the catalog.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "ev", rename_all = "lowercase")]
pub enum CatalogEntry {
    /// A session segment was created.
    Open {
        /// The session ID.
        session: String,
        /// The segment's path relative to the store root.
        segment: String,
        /// Working directory, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
        /// The agent command line (as in the segment header).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
        /// Unix microseconds.
        t: i64,
    },
    /// The proxy continued the session on a new agent-side session (`session/new` underneath
    /// a `session/load`): the agent knows it as `agent`.
    Alias {
        /// The client-facing session ID.
        session: String,
        /// The agent-side session ID.
        agent: String,
        /// Unix microseconds.
        t: i64,
    },
    /// Session metadata from a `session_info_update` (a patch: absent fields are unchanged).
    Info {
        /// The session ID.
        session: String,
        /// New title.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// New `updatedAt` (ISO 8601, as the agent sent it).
        #[serde(default, rename = "updatedAt", skip_serializing_if = "Option::is_none")]
        updated_at: Option<String>,
        /// Unix microseconds.
        t: i64,
    },
    /// The client deleted the session (`session/delete`): hidden from lists, kept on disk.
    Delete {
        /// The session ID.
        session: String,
        /// Unix microseconds.
        t: i64,
    },
    /// A session segment was closed cleanly.
    Close {
        /// The segment's path relative to the store root.
        segment: String,
        /// Records in the segment (the end marker included).
        records: u64,
        /// File size.
        bytes: u64,
        /// Prompt turns in the segment.
        #[serde(default)]
        turns: u64,
        /// Unix microseconds.
        t: i64,
    },
}

/// What `list` shows for one session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionSummary {
    /// The session ID.
    pub session: String,
    /// Working directory, when known.
    pub cwd: Option<String>,
    /// When its first segment was opened, Unix microseconds.
    pub started: i64,
    /// When its last segment was opened or closed, Unix microseconds.
    pub updated: i64,
    /// Records across its segments (from the catalog, or counted for unclosed segments).
    pub records: u64,
    /// Bytes on disk across its segments.
    pub bytes: u64,
    /// Segment paths relative to the store root, oldest first.
    pub segments: Vec<String>,
    /// True while a segment has no close entry (being written, or its proxy was killed).
    pub open: bool,
    /// The latest title from the agent's `session_info_update`.
    pub title: Option<String>,
    /// The latest `updatedAt` from the agent, if it sent one.
    pub updated_at: Option<String>,
    /// Agent-side IDs the session was continued under.
    pub agent_ids: Vec<String>,
    /// Deleted by the client (`session/delete`).
    pub deleted: bool,
    /// The agent command line of its latest segment.
    pub agent: Option<String>,
    /// Prompt turns across its segments.
    pub turns: u64,
}

/// The catalog of a [`Store`].
pub trait Catalog {
    /// Append one entry to the catalog with a single `write(2)`.
    ///
    /// # Errors
    /// I/O errors.
    fn append_catalog(&self, entry: &CatalogEntry) -> io::Result<()>;

    /// Every session in the store, newest first, from the catalog (rebuilt from the segments if
    /// the catalog is missing). Segments never closed are read to count their records.
    ///
    /// # Errors
    /// I/O errors reading the catalog.
    fn sessions(&self) -> io::Result<Vec<SessionSummary>>;

    /// Like [`Catalog::sessions`]; with `count_open` false, segments never closed are not read
    /// (their record counts are then 0), which keeps this fast on a busy store.
    ///
    /// # Errors
    /// I/O errors reading the catalog.
    fn sessions_with(&self, count_open: bool) -> io::Result<Vec<SessionSummary>>;

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

impl Catalog for Store {
    fn append_catalog(&self, entry: &CatalogEntry) -> io::Result<()> {
        let mut line = serde_json::to_vec(entry).expect("catalog entries serialize");
        line.push(b'\n');
        let mut file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(self.root().join("catalog.ndjson"))?;
        file.write_all(&line)
    }

    fn sessions(&self) -> io::Result<Vec<SessionSummary>> {
        self.sessions_with(true)
    }

    fn sessions_with(&self, count_open: bool) -> io::Result<Vec<SessionSummary>> {
        let entries = match fs::read(self.root().join("catalog.ndjson")) {
            Ok(bytes) => bytes
                .split(|b| *b == b'\n')
                .filter_map(|line| serde_json::from_slice::<CatalogEntry>(line).ok())
                .collect(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => scan_segments(self)?,
            Err(e) => return Err(e),
        };
        let mut by_id: BTreeMap<String, SessionSummary> = BTreeMap::new();
        let mut closed: BTreeMap<String, (u64, u64, u64, i64)> = BTreeMap::new();
        for entry in entries {
            match entry {
                CatalogEntry::Open {
                    session,
                    segment,
                    cwd,
                    agent,
                    t,
                } => {
                    let s = by_id
                        .entry(session.clone())
                        .or_insert_with(|| SessionSummary {
                            session,
                            cwd: None,
                            started: t,
                            updated: t,
                            records: 0,
                            bytes: 0,
                            segments: vec![],
                            open: false,
                            title: None,
                            updated_at: None,
                            agent_ids: vec![],
                            deleted: false,
                            agent: None,
                            turns: 0,
                        });
                    if agent.is_some() {
                        s.agent = agent;
                    }
                    if cwd.is_some() {
                        s.cwd = cwd;
                    }
                    // A session opened again after a delete (the client loaded it) is back.
                    s.deleted = false;
                    s.updated = s.updated.max(t);
                    s.segments.push(segment);
                }
                CatalogEntry::Close {
                    segment,
                    records,
                    bytes,
                    turns,
                    t,
                } => {
                    closed.insert(segment, (records, bytes, turns, t));
                }
                CatalogEntry::Alias { session, agent, .. } => {
                    if let Some(s) = by_id.get_mut(&session) {
                        s.agent_ids.push(agent);
                    }
                }
                CatalogEntry::Info {
                    session,
                    title,
                    updated_at,
                    t,
                } => {
                    if let Some(s) = by_id.get_mut(&session) {
                        s.title = title.or(s.title.take());
                        s.updated_at = updated_at.or(s.updated_at.take());
                        s.updated = s.updated.max(t);
                    }
                }
                CatalogEntry::Delete { session, .. } => {
                    if let Some(s) = by_id.get_mut(&session) {
                        s.deleted = true;
                    }
                }
            }
        }
        // Segments removed by `prune` (or by hand) are gone from the list.
        by_id.retain(|_, s| {
            s.segments.retain(|seg| self.root().join(seg).exists());
            !s.segments.is_empty()
        });
        for s in by_id.values_mut() {
            for segment in &s.segments {
                let path = self.root().join(segment);
                if let Some((records, bytes, turns, t)) = closed.get(segment) {
                    s.records += records;
                    s.bytes += bytes;
                    s.turns += turns;
                    s.updated = s.updated.max(*t);
                } else {
                    s.open = true;
                    s.bytes += fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                    if !count_open {
                        continue;
                    }
                    if let Ok(reader) = SegmentReader::open(&path) {
                        let scan = SegmentScan::of(reader);
                        s.records += scan.records;
                        s.turns += scan.turns;
                        s.updated = s.updated.max(scan.last);
                    }
                }
            }
        }
        let mut list: Vec<SessionSummary> = by_id.into_values().collect();
        list.sort_by(|a, b| b.started.cmp(&a.started).then(a.session.cmp(&b.session)));
        Ok(list)
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
            s.segments.iter().map(|seg| self.root().join(seg)).collect()
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
        let sessions =
            sessions.map_err(|e| format!("reading the store {}: {e}", self.root().display()))?;
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

/// Catalog entries rebuilt from the session segments themselves (headers, and records for
/// counts, titles and aliases).
fn scan_segments(store: &Store) -> io::Result<Vec<CatalogEntry>> {
    let mut entries = Vec::new();
    let dirs = match fs::read_dir(store.root().join("sessions")) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(entries),
        Err(e) => return Err(e),
    };
    for dir in dirs {
        let Ok(files) = segments_in(&dir?.path()) else {
            continue;
        };
        for path in files {
            let Ok(reader) = SegmentReader::open(&path) else {
                continue;
            };
            let header = reader.header().clone();
            let Some(session) = header.session.clone() else {
                continue;
            };
            let segment = store.relative(&path);
            entries.push(CatalogEntry::Open {
                session: session.clone(),
                segment: segment.clone(),
                cwd: header.cwd.clone(),
                agent: Some(header.argv.join(" ")),
                t: header.started,
            });
            let scan = SegmentScan::of(reader);
            if let Some(title) = scan.title {
                entries.push(CatalogEntry::Info {
                    session: session.clone(),
                    title: Some(title),
                    updated_at: None,
                    t: scan.last,
                });
            }
            for agent in scan.aliases {
                entries.push(CatalogEntry::Alias {
                    session: session.clone(),
                    agent,
                    t: scan.last,
                });
            }
            if scan.clean {
                let bytes = fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                entries.push(CatalogEntry::Close {
                    segment,
                    records: scan.records,
                    bytes,
                    turns: scan.turns,
                    t: scan.last,
                });
            }
        }
    }
    Ok(entries)
}

/// What reading a whole segment tells about it.
struct SegmentScan {
    records: u64,
    turns: u64,
    last: i64,
    title: Option<String>,
    aliases: Vec<String>,
    clean: bool,
}

impl SegmentScan {
    /// Read the rest of a segment whose header `reader` has read.
    fn of(mut reader: SegmentReader<fs::File>) -> SegmentScan {
        let mut scan = SegmentScan {
            records: 0,
            turns: 0,
            last: reader.header().started,
            title: None,
            aliases: vec![],
            clean: false,
        };
        for record in reader.by_ref() {
            scan.last = scan.last.max(record.unix_us);
            match &record.body {
                Body::Event(Event::SegmentEnd { .. }) => continue,
                Body::Event(Event::SessionMapped { agent_session }) => {
                    scan.aliases.push(agent_session.clone());
                }
                Body::Message { from, payload } if !payload.proxy => {
                    let finder =
                        |needle: &[u8]| memchr::memmem::find(&payload.bytes, needle).is_some();
                    if crate::wire::envelope::is_prompt_turn(*from, false, &payload.bytes) {
                        scan.turns += 1;
                    }
                    if *from == Side::Agent && finder(b"\"session_info_update\"") {
                        let msg: serde_json::Value =
                            serde_json::from_slice(&payload.bytes).unwrap_or_default();
                        if let Some(title) = msg["params"]["update"]["title"].as_str() {
                            scan.title = Some(title.to_string());
                        }
                    }
                }
                _ => {}
            }
            scan.records += 1;
        }
        scan.clean = reader.tail() == Some(&Tail::Clean);
        scan
    }
}
