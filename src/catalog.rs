//! The catalog: the journal directory's index of sessions (`catalog.ndjson`), one JSON line per
//! segment opened or closed, alias, title, delete, state change, turn end or usage report, and the
//! session summaries read from it ([`Catalog::sessions`] for the commands, [`CatalogIndex`] kept up
//! to date in memory by a proxy that serves `session/list`).
//!
//! It sits above the journal: it knows ACP (a prompt turn, a `session_info_update` title) where
//! it rebuilds itself from the segments. The catalog is append-only (each entry is one `write(2)`
//! on an `O_APPEND` file, so concurrent proxies never interleave inside a line) and can be
//! rebuilt from the segments, which are the truth.

use std::collections::{HashMap, HashSet};
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::journal::dir::{is_segment_of, segments_in};
use crate::journal::private::create_private_file;
use crate::journal::{Body, Event, JournalDir, SegmentReader, Tail, mark};
use crate::wire::Side;

/// One line of the catalog.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "ev", rename_all = "lowercase")]
pub enum CatalogEntry {
    /// A session segment was created.
    Open {
        /// The session ID.
        session: String,
        /// The segment's path relative to the journal directory.
        segment: String,
        /// Working directory, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
        /// The agent command line (as in the segment header).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
        /// The agent's own name, from its `initialize` response (see
        /// [`crate::acp::agent_title`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent_name: Option<String>,
        /// The agent's `agentInfo` `name` and `version`, as it reported them (what identifies
        /// it: [`crate::acp::AgentId`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent_info: Option<AgentInfo>,
        /// The Git branch checked out in `cwd` when the segment was opened.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        git_branch: Option<String>,
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
    /// The session's first prompt (in a run): its first line, the session's title while the
    /// agent gives none. The first such entry of a session counts.
    Prompt {
        /// The session ID.
        session: String,
        /// See [`crate::acp::prompt_title`].
        title: String,
        /// Unix microseconds.
        t: i64,
    },
    /// The client named the session (`_session/rename`): its title from then on, whatever the
    /// agent's.
    Rename {
        /// The session ID.
        session: String,
        /// The name.
        title: String,
        /// Unix microseconds.
        t: i64,
    },
    /// The client archived the session (`_session/archive`) or took it back
    /// (`_session/unarchive`): archived, `session/list` leaves it out unless asked.
    Archive {
        /// The session ID.
        session: String,
        /// Archived or not.
        archived: bool,
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
    /// What the session is doing, as the proxy serving it saw it: `running` (a prompt turn is
    /// in progress), `idle`, or `requires_action` (the agent waits for the user).
    State {
        /// The session ID.
        session: String,
        /// The state.
        state: String,
        /// Unix microseconds.
        t: i64,
    },
    /// Prompt turns of the session ended (the last at `t`).
    TurnEnded {
        /// The session ID.
        session: String,
        /// How many (entries are coalesced; absent: one).
        #[serde(default = "one", skip_serializing_if = "is_one")]
        turns: u64,
        /// Unix microseconds.
        t: i64,
    },
    /// Token usage and cost the agent reported (the fields of a `usage_update`, or a prompt
    /// response's `usage`), merged into what was reported before.
    Usage {
        /// The session ID.
        session: String,
        /// The reported fields, as JSON.
        usage: serde_json::Value,
        /// Unix microseconds.
        t: i64,
    },
    /// The session announced a child session (a subagent): its lines are in this session's
    /// segments (the root of its tree). Not a session of its own in any list.
    Child {
        /// The root of the tree.
        session: String,
        /// The child's session ID.
        child: String,
        /// The session that announced it (the root, or another child).
        parent: String,
        /// Unix microseconds.
        t: i64,
    },
    /// A session segment was closed cleanly.
    Close {
        /// The segment's path relative to the journal directory.
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

impl CatalogEntry {
    /// The session the entry speaks of (a `Close` names its segment instead).
    pub fn session(&self) -> Option<&str> {
        match self {
            CatalogEntry::Open { session, .. }
            | CatalogEntry::Alias { session, .. }
            | CatalogEntry::Info { session, .. }
            | CatalogEntry::Prompt { session, .. }
            | CatalogEntry::Rename { session, .. }
            | CatalogEntry::Archive { session, .. }
            | CatalogEntry::Delete { session, .. }
            | CatalogEntry::State { session, .. }
            | CatalogEntry::TurnEnded { session, .. }
            | CatalogEntry::Usage { session, .. }
            | CatalogEntry::Child { session, .. } => Some(session),
            CatalogEntry::Close { .. } => None,
        }
    }
}

/// One host's catalog as a reader of the shared store takes it: a host speaks only for the
/// sessions it opened there (an `Open` naming a segment of that very session) and for those
/// segments; whatever else it says about other hosts' sessions is left out.
#[derive(Debug, Default)]
pub struct HostScope {
    sessions: HashSet<String>,
    /// Segment → its session.
    segments: HashMap<String, String>,
}

impl HostScope {
    /// The session `entry` (admitted) speaks of: its own, or for a `Close` its segment's.
    pub fn session_of<'a>(&'a self, entry: &'a CatalogEntry) -> Option<&'a str> {
        match entry {
            CatalogEntry::Close { segment, .. } => self.segments.get(segment).map(String::as_str),
            other => other.session(),
        }
    }

    /// Whether `entry`, the next of the host's catalog, is the host's to say.
    pub fn admits(&mut self, entry: &CatalogEntry) -> bool {
        match entry {
            CatalogEntry::Open {
                session, segment, ..
            } => {
                let ok = is_segment_of(segment, session);
                if ok {
                    self.sessions.insert(session.clone());
                    self.segments.insert(segment.clone(), session.clone());
                }
                ok
            }
            CatalogEntry::Close { segment, .. } => self.segments.contains_key(segment),
            other => other.session().is_some_and(|s| self.sessions.contains(s)),
        }
    }
}

fn one() -> u64 {
    1
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's `skip_serializing_if` passes a reference
fn is_one(n: &u64) -> bool {
    *n == 1
}

/// What `list` shows for one session.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
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
    /// Segment paths relative to the journal directory, oldest first.
    pub segments: Vec<String>,
    /// True while a segment has no close entry (being written, or its proxy was killed).
    pub open: bool,
    /// Its latest segment was closed cleanly: the session ended well, even if an earlier run
    /// of it was killed (that run's segment stays unclosed: the session went on after it).
    pub ended_clean: bool,
    /// The latest title from the agent's `session_info_update`.
    pub title: Option<String>,
    /// The first line of its first prompt (see [`CatalogEntry::Prompt`]).
    pub prompt: Option<String>,
    /// The name the client gave it (`_session/rename`), over any title of the agent's.
    pub name: Option<String>,
    /// Archived by the client (`_session/archive`).
    pub archived: bool,
    /// The latest `updatedAt` from the agent, if it sent one.
    pub updated_at: Option<String>,
    /// Agent-side IDs the session was continued under.
    pub agent_ids: Vec<String>,
    /// Deleted by the client (`session/delete`).
    pub deleted: bool,
    /// The agent command line of its latest segment.
    pub agent: Option<String>,
    /// The agent's own name (`agentInfo`) in its latest segment that had one.
    pub agent_name: Option<String>,
    /// The agent's `agentInfo` name and version in its latest segment that had them.
    pub agent_info: Option<AgentInfo>,
    /// Prompt turns across its segments (those of its latest segment counted as they end,
    /// while it is written).
    pub turns: u64,
    /// The state its proxy last reported (`running`, `idle`, `requires_action`); meaningful
    /// only while `open` and its proxy is alive.
    pub state: Option<String>,
    /// When its last prompt turn ended, Unix microseconds.
    pub last_turn_ended: Option<i64>,
    /// Token usage and cost reported by the agent (merged `usage_update` and prompt `usage`
    /// fields), as JSON.
    pub usage: Option<serde_json::Value>,
    /// The Git branch of its cwd when it started.
    pub git_branch: Option<String>,
    /// Child sessions (subagents) it announced, journaled with it.
    pub subagents: u64,
}

/// An agent's `agentInfo` `name` and `version` in a catalog's `open` entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentInfo {
    /// `agentInfo.name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `agentInfo.version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl AgentInfo {
    /// The `agentInfo` of an `initialize` response, if it names the agent.
    pub fn of(response: &serde_json::Value) -> Option<AgentInfo> {
        let id = crate::acp::AgentId::of(Some(response), None);
        id.name.is_some().then_some(AgentInfo {
            name: id.name,
            version: id.version,
        })
    }
}

/// Session summaries built from catalog entries, in the order they were appended.
#[derive(Debug, Default)]
struct Summaries {
    by_id: HashMap<String, SessionSummary>,
    /// Closed segments: records, bytes, turns, time.
    closed: HashMap<String, (u64, u64, u64, i64)>,
    /// Segment → session, to attribute a close.
    segment_of: HashMap<String, String>,
    /// Turns ended in each session's latest segment while it is open, from `turnended`
    /// entries (its close entry gives the count then).
    live_turns: HashMap<String, u64>,
    /// (session, child) announced: each child counted once.
    children: HashSet<(String, String)>,
}

impl Summaries {
    /// Apply every parseable line of catalog text (a torn or foreign line is skipped).
    fn apply_lines(&mut self, bytes: &[u8]) -> Vec<String> {
        bytes
            .split(|b| *b == b'\n')
            .filter_map(|line| serde_json::from_slice::<CatalogEntry>(line).ok())
            .filter_map(|entry| self.apply(entry))
            .collect()
    }

    /// Apply one entry; returns the session it changed.
    fn apply(&mut self, entry: CatalogEntry) -> Option<String> {
        match entry {
            CatalogEntry::Open {
                session,
                segment,
                cwd,
                agent,
                agent_name,
                git_branch,
                t,
                agent_info,
            } => {
                // A catalog names only segments of the session itself: never a path out of
                // the journal directory, nor another session's.
                if !is_segment_of(&segment, &session) {
                    return None;
                }
                let s = self
                    .by_id
                    .entry(session.clone())
                    .or_insert_with(|| SessionSummary::new(session.clone(), t));
                if agent.is_some() {
                    s.agent = agent;
                }
                if agent_name.is_some() {
                    s.agent_name = agent_name;
                }
                if agent_info.is_some() {
                    s.agent_info = agent_info;
                }
                if cwd.is_some() {
                    s.cwd = cwd;
                }
                if git_branch.is_some() {
                    s.git_branch = git_branch;
                }
                // A session opened again after a delete (the client loaded it) is back.
                s.deleted = false;
                s.open = true;
                s.ended_clean = false;
                s.updated = s.updated.max(t);
                self.live_turns.remove(&session);
                self.segment_of.insert(segment.clone(), session.clone());
                s.segments.push(segment);
                Some(session)
            }
            CatalogEntry::Close {
                segment,
                records,
                bytes,
                turns,
                t,
            } => {
                self.closed
                    .insert(segment.clone(), (records, bytes, turns, t));
                let session = self.segment_of.get(&segment)?.clone();
                let s = self.by_id.get_mut(&session)?;
                if s.segments.last() == Some(&segment) {
                    self.live_turns.remove(&session);
                    s.ended_clean = true;
                }
                s.records += records;
                s.bytes += bytes;
                s.turns += turns;
                s.updated = s.updated.max(closing(s, t));
                s.open = s.segments.iter().any(|seg| !self.closed.contains_key(seg));
                if !s.open {
                    s.state = None;
                }
                Some(session)
            }
            CatalogEntry::Alias { session, agent, .. } => {
                self.by_id.get_mut(&session)?.agent_ids.push(agent);
                Some(session)
            }
            CatalogEntry::Info {
                session,
                title,
                updated_at,
                t,
            } => {
                let s = self.by_id.get_mut(&session)?;
                s.title = title.or(s.title.take());
                s.updated_at = updated_at.or(s.updated_at.take());
                s.updated = s.updated.max(t);
                Some(session)
            }
            CatalogEntry::Rename { session, title, t } => {
                let s = self.by_id.get_mut(&session)?;
                s.name = Some(title);
                s.updated = s.updated.max(t);
                Some(session)
            }
            CatalogEntry::Archive {
                session, archived, ..
            } => {
                self.by_id.get_mut(&session)?.archived = archived;
                Some(session)
            }
            CatalogEntry::Prompt { session, title, t } => {
                let s = self.by_id.get_mut(&session)?;
                s.prompt.get_or_insert(title);
                s.updated = s.updated.max(t);
                Some(session)
            }
            CatalogEntry::Delete { session, .. } => {
                self.by_id.get_mut(&session)?.deleted = true;
                Some(session)
            }
            CatalogEntry::State { session, state, t } => {
                let s = self.by_id.get_mut(&session)?;
                s.state = Some(state);
                s.updated = s.updated.max(t);
                Some(session)
            }
            CatalogEntry::TurnEnded { session, turns, t } => {
                let s = self.by_id.get_mut(&session)?;
                *self.live_turns.entry(session.clone()).or_default() += turns;
                s.last_turn_ended = Some(t);
                s.updated = s.updated.max(t);
                Some(session)
            }
            CatalogEntry::Usage { session, usage, t } => {
                let s = self.by_id.get_mut(&session)?;
                match (&mut s.usage, usage) {
                    (Some(serde_json::Value::Object(old)), serde_json::Value::Object(new)) => {
                        old.extend(new);
                    }
                    (slot, usage) => *slot = Some(usage),
                }
                s.updated = s.updated.max(t);
                Some(session)
            }
            CatalogEntry::Child { session, child, .. } => {
                let s = self.by_id.get_mut(&session)?;
                // A child is announced again when a later run learns the tree anew.
                if self.children.insert((session.clone(), child)) {
                    s.subagents += 1;
                }
                Some(session)
            }
        }
    }
}

/// What a segment's close at `t` says of a session's last activity: nothing when the catalog
/// tells its turns' ends, or it had none (a proxy ending, with every session it served, is
/// nobody's activity); the close time for turns a catalog written before turn ends were cannot
/// date otherwise.
fn closing(s: &SessionSummary, t: i64) -> i64 {
    if s.last_turn_ended.is_some() || s.turns == 0 {
        i64::MIN
    } else {
        t
    }
}

impl SessionSummary {
    /// Its title: the name the client gave it, else the agent's, else the first line of its
    /// first prompt.
    pub fn shown_title(&self) -> Option<&str> {
        self.name
            .as_deref()
            .or(self.title.as_deref())
            .or(self.prompt.as_deref())
    }

    /// True when the client ever sent it a prompt (a session opened and left empty has none).
    pub fn has_prompt(&self) -> bool {
        self.prompt.is_some() || self.turns > 0 || self.last_turn_ended.is_some()
    }

    fn new(session: String, t: i64) -> SessionSummary {
        SessionSummary {
            session,
            cwd: None,
            started: t,
            updated: t,
            records: 0,
            bytes: 0,
            segments: vec![],
            open: false,
            ended_clean: false,
            title: None,
            prompt: None,
            name: None,
            archived: false,
            updated_at: None,
            agent_ids: vec![],
            deleted: false,
            agent: None,
            agent_name: None,
            agent_info: None,
            turns: 0,
            state: None,
            last_turn_ended: None,
            usage: None,
            git_branch: None,
            subagents: 0,
        }
    }
}

/// The catalog kept in memory and brought up to date by reading only what was appended since
/// (a proxy answering `session/list` over thousands of sessions in milliseconds). Summaries
/// here skip what needs the segments themselves (records and turns of unclosed segments, and
/// whether a pruned segment is gone).
#[derive(Debug)]
pub struct CatalogIndex {
    path: PathBuf,
    /// Bytes of the catalog applied so far (a partial last line is left for the next read).
    offset: u64,
    summaries: Summaries,
}

impl CatalogIndex {
    /// The index of `journals`' catalog (empty until [`CatalogIndex::refresh`]).
    pub fn new(journals: &JournalDir) -> CatalogIndex {
        CatalogIndex {
            path: journals.root().join("catalog.ndjson"),
            offset: 0,
            summaries: Summaries::default(),
        }
    }

    /// Read what was appended since the last refresh (everything again when the catalog was
    /// rewritten); returns the sessions that changed.
    ///
    /// # Errors
    /// I/O errors other than a missing catalog.
    pub fn refresh(&mut self) -> io::Result<Vec<String>> {
        let mut file = match fs::File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(e),
        };
        let len = file.metadata()?.len();
        if len < self.offset {
            // Rewritten (`list --rebuild-catalog`): start over.
            self.offset = 0;
            self.summaries = Summaries::default();
        }
        if len == self.offset {
            return Ok(vec![]);
        }
        file.seek(io::SeekFrom::Start(self.offset))?;
        let mut bytes = Vec::with_capacity((len - self.offset) as usize);
        file.take(len - self.offset).read_to_end(&mut bytes)?;
        let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        self.offset += whole as u64;
        let mut changed = self.summaries.apply_lines(&bytes[..whole]);
        changed.sort_unstable();
        changed.dedup();
        Ok(changed)
    }

    /// Every session, in no particular order.
    pub fn sessions(&self) -> impl Iterator<Item = &SessionSummary> {
        self.summaries.by_id.values()
    }

    /// One session.
    pub fn get(&self, session: &str) -> Option<&SessionSummary> {
        self.summaries.by_id.get(session)
    }
}

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
        let live_turns = summaries.live_turns;
        let mut by_id = summaries.by_id;
        // Segments removed by `prune` (or by hand) are gone from the list; a copy of a shared
        // store lists what its catalog says, pulled or not.
        if !self.is_mirror() {
            by_id.retain(|_, s| {
                s.segments.retain(|seg| self.root().join(seg).exists());
                !s.segments.is_empty()
            });
        }
        for s in by_id.values_mut() {
            s.records = 0;
            s.bytes = 0;
            s.turns = 0;
            for segment in &s.segments {
                let path = self.root().join(segment);
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
                    let torn = !self.writer_alive(segment);
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

/// Catalog entries rebuilt from the session segments themselves (headers, and records for
/// counts, titles and aliases).
fn scan_segments(journals: &JournalDir) -> io::Result<Vec<CatalogEntry>> {
    let mut entries = Vec::new();
    let dirs = match fs::read_dir(journals.root().join("sessions")) {
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
            let segment = journals.relative(&path);
            entries.push(CatalogEntry::Open {
                git_branch: None,
                session: session.clone(),
                segment: segment.clone(),
                cwd: header.cwd.clone(),
                agent: Some(header.argv.join(" ")),
                agent_name: header
                    .initialize
                    .as_ref()
                    .and_then(|i| i.response_value())
                    .and_then(|r| crate::acp::agent_title(&r)),
                t: header.started,
                agent_info: header
                    .initialize
                    .as_ref()
                    .and_then(|i| i.response_value())
                    .and_then(|r| AgentInfo::of(&r)),
            });
            let scan = SegmentScan::of(reader);
            if let Some(title) = scan.prompt {
                entries.push(CatalogEntry::Prompt {
                    session: session.clone(),
                    title,
                    t: header.started,
                });
            }
            if let Some(title) = scan.name.clone() {
                entries.push(CatalogEntry::Rename {
                    session: session.clone(),
                    title,
                    t: scan.last,
                });
            }
            if let Some(archived) = scan.archived {
                entries.push(CatalogEntry::Archive {
                    session: session.clone(),
                    archived,
                    t: scan.last,
                });
            }
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
            for (child, parent) in scan.children {
                entries.push(CatalogEntry::Child {
                    session: session.clone(),
                    child,
                    parent,
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
    /// The first line of its first prompt.
    prompt: Option<String>,
    /// The last name the agent took (`_session/rename`).
    name: Option<String>,
    /// The last archive state the agent took (`_session/archive`/`unarchive`).
    archived: Option<bool>,
    aliases: Vec<String>,
    /// The child sessions announced (child, the session that announced it), in order.
    children: Vec<(String, String)>,
    clean: bool,
}

impl SegmentScan {
    /// Read the rest of a segment whose header `reader` has read.
    fn of(mut reader: SegmentReader<fs::File>) -> SegmentScan {
        let session = reader.header().session.clone().unwrap_or_default();
        let mut scan = SegmentScan {
            records: 0,
            turns: 0,
            last: reader.header().started,
            title: None,
            prompt: None,
            name: None,
            archived: None,
            aliases: vec![],
            children: vec![],
            clean: false,
        };
        // The session and its children: a child's lines are in its root's segments.
        let mut tree: HashSet<String> = HashSet::from([session.clone()]);
        // Session-index requests the client sent, by id: applied once the agent answers.
        let mut asks: HashMap<String, serde_json::Value> = HashMap::new();
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
                        if scan.prompt.is_none() {
                            let msg: serde_json::Value =
                                serde_json::from_slice(&payload.bytes).unwrap_or_default();
                            scan.prompt = crate::acp::prompt_title(&msg["params"]["prompt"]);
                        }
                    }
                    if *from == Side::Client && finder(b"\"_session/") {
                        let msg: serde_json::Value =
                            serde_json::from_slice(&payload.bytes).unwrap_or_default();
                        if msg["method"]
                            .as_str()
                            .is_some_and(|m| m.starts_with("_session/"))
                        {
                            asks.insert(msg["id"].to_string(), msg);
                        }
                    }
                    if *from == Side::Agent && !asks.is_empty() && finder(b"\"result\"") {
                        let msg: serde_json::Value =
                            serde_json::from_slice(&payload.bytes).unwrap_or_default();
                        if let Some(ask) = asks.remove(&msg["id"].to_string())
                            && msg.get("result").is_some()
                        {
                            match ask["method"].as_str() {
                                Some("_session/rename") => {
                                    scan.name = ask["params"]["title"].as_str().map(str::to_string);
                                }
                                Some("_session/archive") => scan.archived = Some(true),
                                Some("_session/unarchive") => scan.archived = Some(false),
                                _ => {}
                            }
                        }
                    }
                    if *from == Side::Agent && finder(b"\"session_info_update\"") {
                        let msg: serde_json::Value =
                            serde_json::from_slice(&payload.bytes).unwrap_or_default();
                        // A child's title is not the session's.
                        // Nor is one the agent made of a re-prime.
                        if let Some(title) = msg["params"]["update"]["title"].as_str()
                            && msg["params"]["sessionId"] == session.as_str()
                            && !crate::acp::is_reprime_title(title)
                        {
                            scan.title = Some(title.to_string());
                        }
                    }
                    if *from == Side::Agent && crate::acp::subagents::may_name_child(&payload.bytes)
                    {
                        let msg: serde_json::Value =
                            serde_json::from_slice(&payload.bytes).unwrap_or_default();
                        let parent = msg["params"]["sessionId"].as_str().unwrap_or_default();
                        if let Some(child) =
                            crate::acp::subagents::child_update(&msg["params"]["update"])
                            && tree.contains(parent)
                            && tree.insert(child.child.to_string())
                        {
                            scan.children
                                .push((child.child.to_string(), parent.to_string()));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn open(session: &str, t: i64) -> CatalogEntry {
        CatalogEntry::Open {
            session: session.into(),
            segment: format!(
                "sessions/{}/{t}.acpj.zst",
                crate::journal::dir::session_key(session)
            ),
            cwd: Some("/w".into()),
            agent: Some("agent".into()),
            agent_name: None,
            git_branch: Some("main".into()),
            t,
            agent_info: None,
        }
    }

    #[test]
    fn a_child_session_is_counted_once_with_its_root_and_listed_on_its_own_never() {
        let mut summaries = Summaries::default();
        let child = |child: &str, t| CatalogEntry::Child {
            session: "root".into(),
            child: child.into(),
            parent: "root".into(),
            t,
        };
        for entry in [
            open("root", 1),
            child("c1", 2),
            child("c2", 3),
            child("c1", 4),
        ] {
            summaries.apply(entry);
        }
        // A child of a session the catalog never opened is nobody's.
        summaries.apply(CatalogEntry::Child {
            session: "ghost".into(),
            child: "c3".into(),
            parent: "ghost".into(),
            t: 5,
        });
        assert_eq!(summaries.by_id["root"].subagents, 2);
        assert_eq!(summaries.by_id.len(), 1, "no child is a session of its own");
    }

    #[test]
    fn the_index_reads_only_what_was_appended_and_starts_over_after_a_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let journals = JournalDir::new(dir.path());
        journals.create_dirs().unwrap();
        let mut index = CatalogIndex::new(&journals);
        assert!(index.refresh().unwrap().is_empty(), "no catalog yet");
        journals.append_catalog(&open("a", 1)).unwrap();
        journals.append_catalog(&open("b", 2)).unwrap();
        assert_eq!(index.refresh().unwrap(), ["a", "b"]);
        assert!(index.refresh().unwrap().is_empty(), "nothing new");
        for entry in [
            CatalogEntry::State {
                session: "a".into(),
                state: "running".into(),
                t: 5,
            },
            CatalogEntry::Usage {
                session: "a".into(),
                usage: serde_json::json!({"used": 1, "size": 9}),
                t: 6,
            },
            CatalogEntry::Usage {
                session: "a".into(),
                usage: serde_json::json!({"used": 2}),
                t: 7,
            },
            CatalogEntry::TurnEnded {
                session: "a".into(),
                turns: 1,
                t: 8,
            },
        ] {
            journals.append_catalog(&entry).unwrap();
        }
        // A line still being written is left for later.
        std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join("catalog.ndjson"))
            .unwrap()
            .write_all(br#"{"ev":"delete","session":"b""#)
            .unwrap();
        assert_eq!(index.refresh().unwrap(), ["a"]);
        let a = index.get("a").unwrap();
        assert_eq!(a.state.as_deref(), Some("running"));
        assert_eq!(a.usage, Some(serde_json::json!({"used": 2, "size": 9})));
        assert_eq!((a.last_turn_ended, a.updated), (Some(8), 8));
        assert_eq!(a.git_branch.as_deref(), Some("main"));
        std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join("catalog.ndjson"))
            .unwrap()
            .write_all(b",\"t\":9}\n")
            .unwrap();
        assert_eq!(index.refresh().unwrap(), ["b"]);
        assert!(index.get("b").unwrap().deleted);
        // Rewritten shorter: read again from the start.
        std::fs::write(
            dir.path().join("catalog.ndjson"),
            serde_json::to_string(&open("c", 3)).unwrap() + "\n",
        )
        .unwrap();
        assert_eq!(index.refresh().unwrap(), ["c"]);
        assert!(index.get("a").is_none());
    }

    #[test]
    fn a_live_session_counts_its_turns_as_they_end_and_its_close_does_not_count_them_twice() {
        let dir = tempfile::tempdir().unwrap();
        let journals = JournalDir::new(dir.path());
        journals.create_dirs().unwrap();
        let turns = |journals: &JournalDir| journals.sessions_with(false).unwrap()[0].turns;
        let open = open("S", 1);
        let CatalogEntry::Open { segment, .. } = &open else {
            unreachable!()
        };
        std::fs::create_dir_all(journals.session_dir("S")).unwrap();
        std::fs::write(dir.path().join(segment), b"").unwrap();
        journals.append_catalog(&open).unwrap();
        // An entry written before the count existed stands for one turn.
        std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join("catalog.ndjson"))
            .unwrap()
            .write_all(b"{\"ev\":\"turnended\",\"session\":\"S\",\"t\":2}\n")
            .unwrap();
        journals
            .append_catalog(&CatalogEntry::TurnEnded {
                session: "S".into(),
                turns: 3,
                t: 3,
            })
            .unwrap();
        assert_eq!(turns(&journals), 4, "counted while the segment is open");
        journals
            .append_catalog(&CatalogEntry::Close {
                segment: segment.clone(),
                records: 10,
                bytes: 0,
                turns: 4,
                t: 4,
            })
            .unwrap();
        assert_eq!(
            turns(&journals),
            4,
            "the close's count replaces the live one"
        );
    }

    #[test]
    fn a_proxys_end_is_not_its_sessions_last_activity() {
        let mut summaries = Summaries::default();
        for (session, ended) in [("a", 10), ("b", 20)] {
            let open = open(session, 1);
            let CatalogEntry::Open { segment, .. } = &open else {
                unreachable!()
            };
            let segment = segment.clone();
            summaries.apply(open);
            summaries.apply(CatalogEntry::TurnEnded {
                session: session.into(),
                turns: 1,
                t: ended,
            });
            summaries.apply(CatalogEntry::Close {
                segment,
                records: 3,
                bytes: 0,
                turns: 1,
                t: 100,
            });
        }
        // Without turn ends: an empty session's last activity is its start; an old catalog's
        // turns are dated by the close.
        let empty = open("c", 1);
        let CatalogEntry::Open { segment, .. } = &empty else {
            unreachable!()
        };
        let segment = segment.clone();
        summaries.apply(empty);
        summaries.apply(CatalogEntry::Close {
            segment,
            records: 1,
            bytes: 0,
            turns: 0,
            t: 100,
        });
        let old = open("d", 2);
        let CatalogEntry::Open { segment, .. } = &old else {
            unreachable!()
        };
        let segment = segment.clone();
        summaries.apply(old);
        summaries.apply(CatalogEntry::Close {
            segment,
            records: 9,
            bytes: 0,
            turns: 2,
            t: 100,
        });
        let updated = |s: &str| summaries.by_id[s].updated;
        assert_eq!(
            (updated("a"), updated("b"), updated("c"), updated("d")),
            (10, 20, 1, 100)
        );
    }

    #[test]
    fn the_git_branch_comes_from_head_or_a_worktree_link() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("src/deep")).unwrap();
        std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/feature/x\n").unwrap();
        assert_eq!(
            git_branch(&repo.join("src/deep")).as_deref(),
            Some("feature/x")
        );
        let worktree = dir.path().join("wt");
        let gitdir = repo.join(".git/worktrees/wt");
        std::fs::create_dir_all(&gitdir).unwrap();
        std::fs::create_dir_all(&worktree).unwrap();
        std::fs::write(gitdir.join("HEAD"), "ref: refs/heads/other\n").unwrap();
        std::fs::write(
            worktree.join(".git"),
            format!("gitdir: {}\n", gitdir.display()),
        )
        .unwrap();
        assert_eq!(git_branch(&worktree).as_deref(), Some("other"));
        std::fs::write(repo.join(".git/HEAD"), "0123456789abcdef\n").unwrap();
        assert_eq!(git_branch(&repo), None, "a detached head has no branch");
    }
}
