//! What the catalog says of each session: [`SessionSummary`], built by applying its entries in the order they were appended (`Summaries`).

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::{AgentInfo, CatalogEntry};
use crate::journal::dir::is_segment_of;

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

/// Session summaries built from catalog entries, in the order they were appended.
#[derive(Debug, Default)]
pub(super) struct Summaries {
    pub(super) by_id: HashMap<String, SessionSummary>,
    /// Closed segments: records, bytes, turns, time.
    pub(super) closed: HashMap<String, (u64, u64, u64, i64)>,
    /// Segment → session, to attribute a close.
    segment_of: HashMap<String, String>,
    /// Turns ended in each session's latest segment while it is open, from `turnended`
    /// entries (its close entry gives the count then).
    pub(super) live_turns: HashMap<String, u64>,
    /// (session, child) announced: each child counted once.
    children: HashSet<(String, String)>,
}

impl Summaries {
    /// Apply every parseable line of catalog text (a torn or foreign line is skipped).
    pub(super) fn apply_lines(&mut self, bytes: &[u8]) -> Vec<String> {
        bytes
            .split(|b| *b == b'\n')
            .filter_map(|line| serde_json::from_slice::<CatalogEntry>(line).ok())
            .filter_map(|entry| self.apply(entry))
            .collect()
    }

    /// Apply one entry; returns the session it changed.
    pub(super) fn apply(&mut self, entry: CatalogEntry) -> Option<String> {
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
pub(super) fn closing(s: &SessionSummary, t: i64) -> i64 {
    if s.last_turn_ended.is_some() || s.turns == 0 {
        i64::MIN
    } else {
        t
    }
}

/// The states [`SessionSummary::store_state`] gives.
pub const STORE_STATES: [&str; 4] = ["live", "idle", "closed", "stranded"];

impl SessionSummary {
    /// Its state in a shared store, from what the hosts' catalogs say of it (no lease is
    /// read): `closed` when every run of it was closed; `stranded` when its latest run was
    /// closed but an earlier one never was (killed, or cut off by a host that took it over:
    /// what that run wrote past the store's copy stays on its host's disk); else, its latest
    /// run still open, `live` while its proxy last said a turn was under way (`running`,
    /// `requires_action`) and `idle` otherwise. A host that stopped without closing the
    /// session leaves it `live` or `idle` until a host continues it: the catalogs cannot tell
    /// a silent host from a gone one.
    pub fn store_state(&self) -> &'static str {
        if !self.open {
            "closed"
        } else if self.ended_clean {
            "stranded"
        } else if matches!(self.state.as_deref(), Some("running" | "requires_action")) {
            "live"
        } else {
            "idle"
        }
    }

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
