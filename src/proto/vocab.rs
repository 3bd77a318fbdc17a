//! The core's vocabulary: what every component of [`super::Proxy`] speaks — the IDs (a
//! client-facing [`SessionId`], an agent's [`AgentSessionId`], a client connection's [`ConnId`],
//! the proxy's own request's [`OwnId`]), where a line comes from or goes ([`Peer`], [`Target`]),
//! when ([`Stamp`]), what the shell is asked to do ([`Action`], [`CatalogUpdate`]) and what it
//! answers with ([`HistoryChunk`], [`ListedSession`]), what a client accepts
//! ([`ClientSupport`]), what a replay leaves ([`Summary`]), and the settings ([`Config`]). It
//! imports nothing else of the core: the components stand on it.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use crate::acp::updates::Need;
use crate::journal::format::Record;
use crate::wire::Side;
use crate::wire::envelope::{Peek, RequestId};

/// The core's hash map: keyed by IDs the peers choose, hashed with foldhash's fast hasher
/// seeded per map (hashbrown's default; several times cheaper than SipHash on the short keys
/// every line is looked up by).
pub(super) type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// The core's insertion-ordered map (see [`HashMap`]): an entry's place in it reaches the entry
/// again without hashing (the session table's slots).
pub(super) type IndexMap<K, V> = indexmap::IndexMap<K, V, foldhash::fast::RandomState>;

/// The core's hash set (see [`HashMap`]).
pub(super) type HashSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;

/// When an input happened, read by the shell (the core never reads a clock).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamp {
    /// Wall clock, Unix microseconds.
    pub unix_us: i64,
    /// Monotonic microseconds since the run started.
    pub mono_us: u64,
}

/// A line as the core hands it on: when it came, its peek, its bytes.
#[derive(Clone, Copy)]
pub(super) struct Line<'a> {
    pub(super) at: Stamp,
    pub(super) peek: &'a Peek<'a>,
    pub(super) bytes: &'a Bytes,
}

/// An ACP session ID, exactly as on the wire.
pub type SessionId = Arc<str>;

/// Which journal a record goes to.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// The run's own journal: what belongs to no session (the `initialize` exchange, stderr,
    /// the proxy's events; FORMAT.md's connection segment). "Connection" in the core means a
    /// client connection only.
    Run,
    /// A session's journal.
    Session(SessionId),
}

/// The `initialize` request and response lines (without line endings), once seen.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Initialize {
    /// The client's request.
    pub request: Option<Bytes>,
    /// The agent's response.
    pub response: Option<Bytes>,
}

/// An instruction for the shell. Apply in the order polled.
#[must_use]
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Write exactly these bytes to `to`.
    Forward {
        /// The receiving peer.
        to: Peer,
        /// The line, terminator included: the bytes received.
        line: Bytes,
    },
    /// Create a journal segment for a session seen for the first time in this run.
    OpenSession {
        /// The session.
        session: SessionId,
        /// Its working directory, when known.
        cwd: Option<String>,
        /// The initialize exchange, copied into the segment header.
        initialize: Initialize,
    },
    /// Append a record to a journal (before any later `Forward`).
    Journal {
        /// The journal.
        target: Target,
        /// The record.
        record: Record,
    },
    /// The client closed its stream: close the agent's stdin.
    CloseAgentStdin,
    /// Read a session's journals and answer with [`super::Proxy::handle_history`] chunks: the replay
    /// built by the history module's `Replay`, then its summary (or `Missing`).
    FetchHistory {
        /// Names the answer.
        load: u64,
        /// The client-facing session ID.
        session: SessionId,
        /// What the client accepts.
        support: ClientSupport,
        /// Bound of the transcript kept for re-priming.
        transcript_limit: usize,
        /// The session is live (another connection joins it): replay only the records before
        /// this sequence number (what follows reaches the client live), and leave tool calls
        /// still running open. The shell starts the read once the records before it are
        /// written.
        until: Option<u64>,
        /// The agent's `initialize` response: which agent loads the session (the history
        /// says which of its agent-side sessions on this host holds every turn).
        agent: Option<Bytes>,
    },
    /// End a client connection (it fell too far behind while joining a session); the shell
    /// then reports its end as for any connection.
    EndClient(ConnId),
    /// Stop a `FetchHistory` (its chunks are no longer wanted).
    CancelHistory {
        /// The fetch.
        load: u64,
    },
    /// Read the session list from the journals and answer with [`super::Proxy::handle_sessions`].
    FetchSessions {
        /// Names the answer.
        request: u64,
        /// The agent's `initialize` response: whose sessions the default list shows.
        agent: Option<Bytes>,
    },
    /// Record session metadata in the journals' catalog.
    Catalog(CatalogUpdate),
    /// Which of the IDs a session the agent just created may take
    /// ([`super::reuse_candidates`]: `session`, `session~2`, …) the journals do not hold yet:
    /// answer with [`super::Proxy::handle_free_id`] (the first it does not hold). The agent's
    /// lines wait for the answer.
    FindFreeId {
        /// Names the answer.
        ask: u64,
        /// The agent's ID for its new session.
        session: SessionId,
    },
    /// What the catalog learned with the turns (coalesced per session, each with the Unix
    /// microseconds it was learned at), to write to the catalog: after
    /// [`super::Proxy::handle_facts_due`], and before any `FetchSessions` or `Catalog`, so the
    /// catalog is read and written with every turn seen.
    TurnFacts(Vec<(CatalogUpdate, i64)>),
    /// Tell the user (log at info level).
    Log(String),
    /// Kill the agent (a prompt stalled past `--stall-timeout` and its cancel): the shell then
    /// restarts it as after a crash.
    RestartAgent,
    /// Copy `parent`'s journal up to `turns` prompt turns or `message` (inclusive; all when
    /// neither) into a new session `fork`, and answer with [`super::Proxy::handle_forked`].
    ForkJournal {
        /// Names the answer.
        op: u64,
        /// The session forked.
        parent: SessionId,
        /// The new session.
        fork: SessionId,
        /// Keep messages up to and including this `messageId`.
        message: Option<String>,
    },
}

/// Session metadata for the catalog.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CatalogUpdate {
    /// The client-facing `session` continues on the agent as `agent`.
    Alias {
        /// Client-facing ID.
        session: SessionId,
        /// Agent-side ID.
        agent: AgentSessionId,
    },
    /// A `session_info_update` passed through.
    Info {
        /// The session.
        session: SessionId,
        /// New title, if set.
        title: Option<String>,
        /// New `updatedAt`, if set.
        updated_at: Option<String>,
    },
    /// The client deleted the session.
    Delete {
        /// The session.
        session: SessionId,
    },
    /// The session's state changed: `running` (a prompt in progress), `idle`, or
    /// `requires_action` (the agent waits for the user).
    State {
        /// The session.
        session: SessionId,
        /// The state.
        state: &'static str,
    },
    /// The client named the session (`_session/rename`, a vendor extension the adapters
    /// share): its title from now on, whatever the agent's.
    Rename {
        /// The session.
        session: SessionId,
        /// The name.
        title: String,
    },
    /// The client archived (`_session/archive`) or unarchived (`_session/unarchive`) the
    /// session: archived, it is left out of `session/list` unless asked for.
    Archive {
        /// The session.
        session: SessionId,
        /// Archived or not.
        archived: bool,
    },
    /// The session's first prompt in this run: its first line (redacted), the session's title
    /// when the agent gives none.
    Prompt {
        /// The session.
        session: SessionId,
        /// See [`crate::acp::prompt_title`].
        title: String,
    },
    /// Prompt turns ended (the last at the time given with it).
    TurnEnded {
        /// The session.
        session: SessionId,
        /// How many.
        turns: u64,
    },
    /// The agent reported token usage or cost (`usage_update` fields, or a prompt's `usage`).
    Usage {
        /// The session.
        session: SessionId,
        /// The reported fields.
        usage: serde_json::Value,
    },
    /// A session announced a child session (a subagent), journaled with the root of its tree.
    Child {
        /// The root of the tree: the session whose journal holds the child's lines.
        session: SessionId,
        /// The child's session ID.
        child: SessionId,
        /// The session that announced it (the root, or another child).
        parent: SessionId,
    },
}

/// One answer to [`Action::FetchHistory`].
#[derive(Clone, Debug, PartialEq)]
pub enum HistoryChunk {
    /// Replay lines (`session/update` notifications, newline-terminated), in order.
    Lines(Vec<Bytes>),
    /// The replay is complete.
    End(Summary),
    /// No journal holds the session.
    Missing,
    /// The session may not be continued here (another host holds it): the message says why.
    Refused(String),
}

/// A session as the journals list it, for `session/list`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListedSession {
    /// Client-facing ID.
    pub session: String,
    /// Working directory.
    pub cwd: Option<String>,
    /// Its title: the agent's latest, else the first line of its first prompt.
    pub title: Option<String>,
    /// The client ever sent it a prompt: sessions without one are left out of lists.
    pub prompted: bool,
    /// Archived by the client (`_session/archive`): left out unless the list asks for it.
    pub archived: bool,
    /// Last activity.
    pub updated: Activity,
    /// Agent-side IDs it was continued under.
    pub agent_ids: Vec<String>,
    /// `running`, `idle` or `requires_action` while a live proxy serves it.
    pub state: Option<String>,
    /// When its last prompt turn ended, ISO 8601.
    pub last_turn_ended_at: Option<String>,
    /// Token usage and cost the agent reported, as JSON (`cost` is shown as the row's cost).
    pub usage: Option<serde_json::Value>,
    /// The Git branch of its cwd when it started.
    pub git_branch: Option<String>,
    /// The agent that recorded it (its command line), when listing every agent's sessions.
    pub agent: Option<String>,
}

/// When a listed session was last active, in the two forms a list uses.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Activity {
    /// ISO 8601.
    pub at: Option<String>,
    /// Unix microseconds: the list's order (newest first).
    pub us: i64,
}

/// How the proxy handles session loading (`--load`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LoadMode {
    /// Agents with `loadSession` load natively; for the others the proxy serves loads from the
    /// journal.
    #[default]
    Auto,
    /// Always serve loads from the journal, hiding the agent's own replay.
    Journal,
    /// Never emulate loading (list, close and delete are still served for agents that lack
    /// them).
    Agent,
    /// Change nothing: a pure recorder.
    Off,
}

/// Core settings.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Redact secrets in journal copies.
    pub redact: bool,
    /// Session loading.
    pub load: LoadMode,
    /// Send a transcript of the earlier conversation with the first prompt after a load that
    /// had to start a fresh agent session.
    pub reprime: bool,
    /// Bound of that transcript, in bytes.
    pub reprime_limit: usize,
    /// `--stall-timeout`: a prompt that gets no message from the agent for this long
    /// (microseconds) is cancelled, and if the agent still does not answer within
    /// `stall_grace_us`, the agent is restarted.
    pub stall_timeout_us: Option<u64>,
    /// See `stall_timeout_us`.
    pub stall_grace_us: u64,
    /// How long a restarted agent has to answer the client's recorded `initialize`
    /// (microseconds): past it the agent is taken for failed and restarted again (within
    /// `--respawn`), and the client's requests waiting for it are answered with an error. No
    /// request waits longer for a restarted agent, across restarts; the client's lines wait
    /// bounded (`held_limit`).
    pub reinit_timeout_us: u64,
    /// Bytes of client lines the core holds for the agent (while a restarted agent is
    /// initialized, or a lost session is restored) before it stops reading the client:
    /// backpressure, as a full pipe would give, instead of unbounded memory. Also the bound of
    /// the agent lines held while a load brings their session up: past it they go out as they
    /// come (the agent is not stopped, as the load waits for its answer).
    pub held_limit: usize,
    /// A host (`acp-journal serve`): connections come and go while the agent and its sessions
    /// live on; a session's lines go only to the connections attached to it.
    pub hosted: bool,
    /// The agent is a remote host the bridge connects to (`--connect`): its restarts are
    /// connections made again, and the log, the client's notices and errors say so.
    pub remote: bool,
    /// A host's agent requests for a session nobody is attached to wait this long
    /// (microseconds) for a connection to attach, then are answered as when the connection
    /// they went to ends (a permission request cancelled, anything else -32603).
    pub unattended_timeout_us: u64,
    /// The shell answers [`Action::FindFreeId`] (it keeps journals): a session the agent creates
    /// under an ID the journals already hold (an earlier run's) gets a fresh client-facing ID,
    /// mapped to the agent's, so two conversations never share a journal. Without it, or with
    /// `--load off`, no ID is taken for reused.
    pub asks_free_ids: bool,
    /// `--offer-history`: the journal's MCP server added to the `mcpServers` of every
    /// `session/new`, `session/load` and `session/resume` the agent is sent.
    pub offer_history: Option<&'static HistoryOffer>,
}

/// The MCP server `--offer-history` adds for the agent (see `proto::offer`): over stdio,
/// `command` with `args`, then `mcp --repository <the session's cwd>`; under `serve`, to an
/// agent that declares MCP over HTTP, `http` instead.
#[derive(Debug, PartialEq, Eq)]
pub struct HistoryOffer {
    /// The entry's name (a client entry of the same name wins).
    pub name: String,
    /// The proxy's own binary.
    pub command: String,
    /// What goes before `mcp`: the journal directory, the object store.
    pub args: Vec<String>,
    /// `serve`'s own MCP endpoint (`None` for the stdio proxy).
    pub http: Option<HttpOffer>,
}

/// `serve`'s MCP endpoint on a loopback listener of its own: a session's entry is its URL with
/// `?repository=<the session's cwd>`, and a bearer token that grants that scope only, the
/// HMAC-SHA256 of the cwd under a key made at start and never written anywhere.
#[derive(PartialEq, Eq)]
pub struct HttpOffer {
    /// `http://127.0.0.1:PORT/mcp`.
    url: String,
    key: [u8; 32],
}

impl fmt::Debug for HttpOffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HttpOffer({}, key …)", self.url)
    }
}

impl HttpOffer {
    /// The endpoint at `url` (a loopback address's `/mcp`), its tokens made under `key`.
    pub fn new(url: String, key: [u8; 32]) -> HttpOffer {
        HttpOffer { url, key }
    }

    /// The URL of the server scoped to `cwd`.
    pub fn url_for(&self, cwd: &str) -> String {
        let query = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("repository", cwd)
            .finish();
        format!("{}?{query}", self.url)
    }

    /// The bearer token that grants the server scoped to `cwd`, and nothing else.
    pub fn token(&self, cwd: &str) -> String {
        use base64::Engine;
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &self.key);
        let tag = ring::hmac::sign(&key, cwd.as_bytes());
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(tag.as_ref())
    }

    /// The scope a request's query names: its one `repository`; `None` when it names none or
    /// several.
    pub fn scope_of(query: &str) -> Option<String> {
        let mut named = url::form_urlencoded::parse(query.as_bytes())
            .filter(|(name, _)| name == "repository")
            .map(|(_, value)| value.into_owned());
        match (named.next(), named.next()) {
            (Some(scope), None) => Some(scope),
            _ => None,
        }
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            redact: true,
            load: LoadMode::Auto,
            reprime: true,
            reprime_limit: 32 * 1024,
            stall_timeout_us: None,
            stall_grace_us: 5_000_000,
            reinit_timeout_us: 60_000_000,
            held_limit: 8 * 1024 * 1024,
            hosted: false,
            remote: false,
            unattended_timeout_us: 300_000_000,
            asks_free_ids: false,
            offer_history: None,
        }
    }
}

/// Microseconds as seconds, for messages.
pub(super) fn secs(us: u64) -> f64 {
    us as f64 / 1e6
}

/// A client connection, numbered by the shell (the stdio proxy's is [`ConnId::FIRST`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u32);

impl ConnId {
    /// The first connection: its request ids pass as sent.
    pub const FIRST: ConnId = ConnId(0);
}

/// Where a line comes from or goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Peer {
    /// A client connection.
    Client(ConnId),
    /// The agent.
    Agent,
}

impl Peer {
    /// The side of the proxy, as journal records name it.
    pub fn side(self) -> Side {
        match self {
            Peer::Client(_) => Side::Client,
            Peer::Agent => Side::Agent,
        }
    }
}

/// A session ID as the agent knows it: the client-facing ID of a session live natively, another
/// one for a mapped session. A type of its own, apart from the client-facing [`SessionId`], so
/// that the two namespaces cannot be mixed by accident.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AgentSessionId(Arc<str>);

impl AgentSessionId {
    /// The ID a session live natively has on the agent: its client-facing one.
    pub(super) fn native(session: &SessionId) -> AgentSessionId {
        AgentSessionId(session.clone())
    }

    /// The ID's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The agent-side ID `id`, as an agent named it (in an answer or a line).
impl From<&str> for AgentSessionId {
    fn from(id: &str) -> AgentSessionId {
        AgentSessionId(Arc::from(id))
    }
}

impl Borrow<str> for AgentSessionId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AgentSessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An agent-side session ID as read from an agent's line, for lookups in the table.
#[derive(Clone, Copy, Debug)]
pub(super) struct AgentRef<'a>(pub(super) &'a str);

/// The id of a request of the proxy's own to the agent (`"acp-journal:N"`): a type of its own,
/// so a client's or an agent's id cannot be taken for one (an agent's answer is looked up by
/// its id through [`Borrow`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct OwnId(pub(super) RequestId);

impl OwnId {
    /// The id as it goes on the wire.
    pub(super) fn request_id(&self) -> &RequestId {
        &self.0
    }
}

impl Borrow<RequestId> for OwnId {
    fn borrow(&self) -> &RequestId {
        &self.0
    }
}

/// What the current client accepts of a replay: the update kinds beyond the baseline it
/// declared, its ACP version, and whether it asked for the tail only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientSupport {
    /// `clientCapabilities.session.compaction`.
    pub compaction: bool,
    /// Unstable `clientCapabilities.plan` (`plan_update`, `plan_removed`).
    pub plan_operations: bool,
    /// `clientCapabilities.subagents`: child sessions (the subagents RFD).
    pub subagents: bool,
    /// `clientCapabilities.session.notices`.
    pub notices: bool,
    /// Unstable `clientCapabilities.session.cursors` (`cursor_update`).
    pub cursors: bool,
    /// Unstable `clientCapabilities.session.promptSuggestions`.
    pub prompt_suggestions: bool,
    /// JetBrains AIR's `nativeSubagentSessions` (`subagent_spawned`, `subagent_state_update`).
    pub air_subagents: bool,
    /// JetBrains AIR's `asyncTasks` (`async_task_*`).
    pub air_tasks: bool,
    /// The connection speaks ACP v2 (the agent answered `protocolVersion: 2`): replays are
    /// shaped for it.
    pub v2: bool,
    /// A tail replay: only the last this many prompt turns (`_meta.acpJournal.tail.turns` on
    /// `session/load`, v2 `replayFrom: {"type": "_acpJournal/tail", "turns": N}`).
    pub tail: Option<u64>,
}

impl ClientSupport {
    /// What a client supports, from the `clientCapabilities` of its `initialize` request.
    pub fn from_capabilities(caps: &Value) -> ClientSupport {
        let present = |v: &Value| !v.is_null();
        let air = &caps["_meta"]["jetbrains"]["air"];
        let air_has = |capability: &str| {
            air["version"].as_u64().is_some_and(|v| v >= 1)
                && air["capabilities"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c == capability))
        };
        ClientSupport {
            compaction: present(&caps["session"]["compaction"]),
            plan_operations: present(&caps["plan"]),
            subagents: present(&caps["subagents"]),
            notices: present(&caps["session"]["notices"]),
            cursors: present(&caps["session"]["cursors"]),
            prompt_suggestions: present(&caps["session"]["promptSuggestions"]),
            air_subagents: air_has("nativeSubagentSessions"),
            air_tasks: air_has("asyncTasks"),
            v2: false,
            tail: None,
        }
    }

    /// The client declared `need` (ACP v2 has subagents, plans, compaction and notices in
    /// its baseline).
    pub fn has(&self, need: Need) -> bool {
        match need {
            Need::Subagents => self.subagents || self.v2,
            Need::Plan => self.plan_operations || self.v2,
            Need::Compaction => self.compaction || self.v2,
            Need::Cursors => self.cursors,
            Need::PromptSuggestions => self.prompt_suggestions,
            Need::AirSubagents => self.air_subagents,
            Need::AirTasks => self.air_tasks,
            Need::V2 => self.v2,
        }
    }

    /// The client takes `notice` updates (`session.notices`; ACP v2: all).
    pub fn takes_notices(&self) -> bool {
        self.notices || self.v2
    }
}

/// The end of a replay: what the proxy needs to bring the agent back.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// Prompt turns in the history.
    pub turns: usize,
    /// A bounded transcript of the conversation, for re-priming a fresh agent session.
    pub transcript: String,
    /// The latest mode (`currentModeId`), if the session had modes.
    pub mode: Option<String>,
    /// The latest value of each config option (`configId` → raw JSON value).
    pub config: BTreeMap<String, Value>,
    /// The agent-side session ID of the last run that mapped this session, if any.
    pub agent_session: Option<String>,
    /// The session's working directory as recorded.
    pub cwd: Option<String>,
    /// What this agent holds of the session on this host (its agent-side sessions, as the
    /// journal tells which turns each was told): a load resumes the one that holds every turn,
    /// else brings the session up afresh and re-primes it.
    pub agent_copy: AgentCopy,
    /// The child sessions (subagents) the history announced, each with the session that
    /// announced it: the session tree goes on with them.
    pub children: Vec<(String, String)>,
    /// The session's cursors as last announced (`cursor_update`), for a client that takes
    /// them, to send only when the session comes back on the agent session that made them.
    pub cursors: Option<Box<Cursors>>,
}

/// What the agent of a run holds of a session on its host, as the journal says
/// (`proto::history::copies`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentCopy {
    /// This agent-side session holds every turn of the journal: a load may resume it.
    Whole(String),
    /// Its agent-side sessions here hold at most the first `known` of the journal's `turns`
    /// (the session went on elsewhere: another host, another agent, a copy never told them).
    Behind {
        /// The most turns one holds.
        known: u64,
        /// The journal's turns.
        turns: u64,
    },
    /// It has no agent-side session of it here (the session never ran on this agent here).
    Absent {
        /// The journal's turns.
        turns: u64,
    },
    /// The journal does not hold the session: the agent's own, if it has one (a session made
    /// without the proxy, which its own list shows), is all there is.
    Unjournaled,
}

impl Default for AgentCopy {
    fn default() -> AgentCopy {
        AgentCopy::Absent { turns: 0 }
    }
}

/// The latest `cursor_update` of each cursor of a session, and whose they are.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cursors {
    /// The agent that made them (its `agentInfo` title or name, from the recorded
    /// `initialize`).
    pub agent: Option<String>,
    /// The agent-side session ID they were made in.
    pub agent_session: String,
    /// The `update` objects, in the order their cursors were first announced.
    pub updates: Vec<Value>,
}
