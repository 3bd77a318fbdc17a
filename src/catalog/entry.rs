//! The catalog's lines ([`CatalogEntry`], with the agent's [`AgentInfo`]), and what one host's catalog may say as a reader of
//! the shared store takes it ([`HostScope`]).

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::journal::dir::is_segment_of;

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

    /// When it was written (Unix microseconds).
    pub fn t(&self) -> i64 {
        match self {
            CatalogEntry::Open { t, .. }
            | CatalogEntry::Alias { t, .. }
            | CatalogEntry::Info { t, .. }
            | CatalogEntry::Prompt { t, .. }
            | CatalogEntry::Rename { t, .. }
            | CatalogEntry::Archive { t, .. }
            | CatalogEntry::Delete { t, .. }
            | CatalogEntry::State { t, .. }
            | CatalogEntry::TurnEnded { t, .. }
            | CatalogEntry::Usage { t, .. }
            | CatalogEntry::Child { t, .. }
            | CatalogEntry::Close { t, .. } => *t,
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
