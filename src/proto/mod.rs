//! The protocol core: a deterministic state machine with no I/O.
//!
//! It contains no file, process or clock code: the shell stamps every input with a [`Stamp`]
//! and applies the [`Action`]s it polls, in order. That makes every rule testable with literal
//! JSON lines (see `tests.rs` and `emulate_tests.rs`).
//!
//! # Driving contract
//! - Inputs (`handle_*`, return `()`): [`Proxy::handle_line`] for every whole line read from a
//!   peer (line ending included): the agent, or a client connection ([`Peer`], [`ConnId`]; the
//!   stdio proxy has one), [`Proxy::handle_eof`] when a peer closes its stream,
//!   [`Proxy::handle_stderr`] for agent stderr chunks, [`Proxy::handle_event`] for things the
//!   shell observed (agent exit, signals), and the answers to its requests to the store
//!   ([`Proxy::handle_history`], [`Proxy::handle_sessions`]).
//! - Output: after each input, drain [`Proxy::poll_action`] until `None` and apply the actions
//!   in order. For every line, its `Journal` actions come before its `Forward`, and an
//!   `OpenSession` before the first `Journal` to that session. The shell keeps the promise built
//!   on that order (a record is written before its line is forwarded): `shell::apply`.
//!
//! # Attribution
//! Every record goes to the journal of the session it belongs to, else to the connection's:
//! [`attribution`].
//!
//! # What the proxy changes
//! With `--load off` nothing: every `Forward` carries the bytes received. Otherwise the core adds
//! what the agent lacks, each part a component with its own state:
//! - [`capabilities`]: the `initialize` response advertises loading, list, resume, close and
//!   delete on the agent's behalf;
//! - [`loading`]: `session/load` and `session/resume` served from the journal;
//! - [`listing`]: `session/list` served from the store or merged with the agent's;
//! - [`native`]: the loads the client sends the agent itself, served from the journal should
//!   the agent fail them; [`fork`]: `session/fork` made in the journal;
//! - [`sessions`] and [`mapping`]: the session table (each session owning its prompt, its native
//!   load and the lines held while a load brings it up), and the edits of a session continued
//!   on the agent under another ID; [`ids`]: the proxy's own request ids; [`edits`]: where the
//!   edits are made on the way through, and what the agent's answers teach the core;
//! - [`restart`]: the agent restarted under live sessions, and every request answered once it
//!   is gone; [`turn_facts`]: what the catalog learns from the turns;
//! - [`connection`]: several client connections on the one agent (ids per connection, lines
//!   routed to the connections a session is attached to, a host's sessions shared by several
//!   clients), and [`clients`]: the transitions as clients come, join, leave and go;
//! - `session/close` and `session/delete` answered here.
//!
//! Edits go through [`crate::wire::rewrite`], which keeps every member it does not change byte for byte.

mod attribution;
mod capabilities;
mod clients;
mod connection;
#[cfg(test)]
mod connection_tests;
mod edits;
mod effects;
#[cfg(test)]
mod emulate_tests;
mod fork;
mod held;
pub mod history;
mod ids;
mod listing;
mod load_request;
mod loading;
mod mapping;
mod native;
mod prompt;
pub mod redact;
#[cfg(test)]
mod redact_tests;
mod restart;
#[cfg(test)]
mod restart_tests;
mod sessions;
#[cfg(test)]
mod tests;
mod turn_facts;

use std::sync::Arc;

use bytes::Bytes;
use serde_json::json;

use crate::journal::Event;
use crate::journal::format::{Body, Payload, Record};
use crate::wire::Side;
use crate::wire::envelope::{self, Kind, Peek, RequestId};
use crate::wire::rewrite;
use capabilities::{AgentCaps, ClientCaps};
pub use connection::{ConnId, Peer};
use connection::{Connections, Inbound, Route};
use effects::{Effects, Queued};
use fork::Forks;
pub use history::{ClientSupport, Summary};
use ids::OwnIds;
use listing::Lists;
use load_request::{NATIVE_HOLD_BYTES, SetupParams};
use loading::{Loads, Step};
use restart::Handshake;
use sessions::AgentRef;
pub use sessions::AgentSessionId;
use sessions::SessionTable;
use turn_facts::TurnFacts;

/// The core's hash map: keyed by IDs the peers choose, hashed with foldhash's fast hasher
/// seeded per map (hashbrown's default; several times cheaper than SipHash on the short keys
/// every line is looked up by).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// The core's hash set (see [`HashMap`]).
type HashSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;

/// When an input happened, read by the shell (the core never reads a clock).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamp {
    /// Wall clock, Unix microseconds.
    pub unix_us: i64,
    /// Monotonic microseconds since the run started.
    pub mono_us: u64,
}

/// An ACP session ID, exactly as on the wire.
pub type SessionId = Arc<str>;

/// Which journal a record goes to.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// The run's connection journal.
    Connection,
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
    /// Read a session's journals and answer with [`Proxy::handle_history`] chunks: the replay
    /// built by [`history::Replay`], then its summary (or `Missing`).
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
    },
    /// End a client connection (it fell too far behind while joining a session); the shell
    /// then reports its end as for any connection.
    EndClient(ConnId),
    /// Stop a `FetchHistory` (its chunks are no longer wanted).
    CancelHistory {
        /// The fetch.
        load: u64,
    },
    /// Read the session list from the store and answer with [`Proxy::handle_sessions`].
    FetchSessions {
        /// Names the answer.
        request: u64,
    },
    /// Record session metadata in the store's catalog.
    Catalog(CatalogUpdate),
    /// Tell the user (log at info level).
    Log(String),
    /// Kill the agent (a prompt stalled past `--stall-timeout` and its cancel): the shell then
    /// restarts it as after a crash.
    RestartAgent,
    /// Copy `parent`'s journal up to `turns` prompt turns or `message` (inclusive; all when
    /// neither) into a new session `fork`, and answer with [`Proxy::handle_forked`].
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
}

/// One answer to [`Action::FetchHistory`].
#[derive(Clone, Debug, PartialEq)]
pub enum HistoryChunk {
    /// Replay lines (`session/update` notifications, newline-terminated), in order.
    Lines(Vec<Bytes>),
    /// The replay is complete.
    End(Summary),
    /// The store has no journal for the session.
    Missing,
}

/// A session as the store lists it, for `session/list`.
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
    /// Last activity, ISO 8601.
    pub updated_at: Option<String>,
    /// Last activity, Unix microseconds: the list's order (newest first).
    pub updated_us: i64,
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

/// Why the proxy sent a request to the agent.
#[derive(Clone, Debug)]
enum Purpose {
    /// A step of load `op`.
    Load(u64, Step),
    /// The client's recorded `initialize`, to a restarted agent.
    Reinitialize,
    /// The client's recorded `authenticate`, to a restarted agent.
    Reauthenticate,
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
        }
    }
}

/// A request awaiting its response.
#[derive(Debug)]
struct Pending {
    method: String,
    /// Sequence number of the request's record (answers to an exited agent's requests go out
    /// in arrival order).
    seq: u64,
    session: Option<SessionId>,
    /// For `session/new` / `session/fork`: the request record, to copy into the new session.
    setup: Option<Setup>,
    /// What the catalog learns should the agent do it (a vendor rename or archive).
    index: Option<CatalogUpdate>,
}

#[derive(Debug)]
struct Setup {
    record: Record,
    /// Its params as sent (unredacted), to bring the session up again after a restart.
    params: SetupParams,
    cwd: Option<String>,
    /// The session it was already copied into (an early update opened it).
    copied_to: Option<SessionId>,
}

/// Requests awaiting their response, by sender and id.
type PendingTable = HashMap<(Side, RequestId), Pending>;

/// What the components of the core share while they handle one input: the output, the session
/// table, the request ids, and what both peers declared.
struct Cx<'a> {
    fx: &'a mut Effects,
    sessions: &'a mut SessionTable,
    ids: &'a mut OwnIds,
    pending: &'a PendingTable,
    agent: AgentCaps,
    client: ClientCaps,
    config: Config,
    initialize: &'a Initialize,
}

impl Cx<'_> {
    /// Send a request of the proxy's own to the agent for operation `op`, journaled with
    /// `session`.
    fn request(
        &mut self,
        at: Stamp,
        session: &SessionId,
        op: u64,
        step: Step,
        method: &str,
        params: &str,
    ) {
        let pending = self.pending;
        let id = self.ids.request(Purpose::Load(op, step), |id| {
            pending.contains_key(&(Side::Client, id.clone()))
        });
        self.fx.send_agent(
            at,
            Target::Session(session.clone()),
            Some(id.request_id()),
            method,
            params,
        );
    }
}

/// The proxy state machine.
#[derive(Debug)]
pub struct Proxy {
    config: Config,
    fx: Effects,
    /// The client connections, and the ids of their requests.
    connections: Connections,
    /// Lines for clients routed to more than one connection, not polled yet.
    routed: std::collections::VecDeque<Action>,
    pending: PendingTable,
    sessions: SessionTable,
    initialize: Initialize,
    /// Agent stderr not yet journaled (journaled by whole lines).
    stderr: Vec<u8>,
    agent: AgentCaps,
    client: ClientCaps,
    ids: OwnIds,
    loads: Loads,
    /// `session/list`s in progress and the working directories watched for changes.
    lists: Lists,
    /// Operation numbers (loads and lists), naming the store requests.
    next_op: u64,
    /// The handshake a restarted agent is told again, and where the current agent's stands.
    handshake: Handshake,
    /// Forks waiting for their journal copy.
    forks: Forks,
    /// The latest input's time, monotonic microseconds.
    now: u64,
    /// Whether the store already holds a session ID (an earlier run's): set by the shell.
    stored: StoredCheck,
    /// The latest line's time, Unix microseconds (when catalog facts are learned).
    unix_now: i64,
    /// What the catalog learns with every turn, until the shell takes it.
    facts: TurnFacts,
    /// The agent's output ended: client requests are answered by the proxy from now on.
    agent_ended: bool,
    /// The client closed its stream: it expects no more answers.
    client_ended: bool,
}

impl Proxy {
    /// A fresh core for one connection.
    pub fn new(config: Config) -> Proxy {
        Proxy {
            config,
            fx: Effects::new(config.redact),
            connections: match config.hosted {
                true => Connections::hosted(),
                false => Connections::default(),
            },
            routed: std::collections::VecDeque::new(),
            pending: HashMap::default(),
            sessions: SessionTable::default(),
            initialize: Initialize::default(),
            stderr: Vec::new(),
            agent: AgentCaps::default(),
            client: ClientCaps::default(),
            ids: OwnIds::default(),
            loads: Loads::default(),
            lists: Lists::default(),
            handshake: Handshake::default(),
            next_op: 0,
            forks: Forks::default(),
            stored: StoredCheck(None),
            now: 0,
            unix_now: 0,
            facts: TurnFacts::default(),
            agent_ended: false,
            client_ended: false,
        }
    }

    /// How to tell that the store already holds a session ID (an earlier run's journal). An
    /// agent's `session/new` answer naming one (an agent that numbers its sessions afresh in
    /// each process) gets a fresh client-facing ID, mapped to the agent's, so two conversations
    /// never share a journal. Without it, no ID is taken for reused.
    pub fn set_stored_check(&mut self, stored: impl Fn(&str) -> bool + Send + 'static) {
        self.stored = StoredCheck(Some(Box::new(stored)));
    }

    /// The next action to apply, in order.
    #[must_use]
    pub fn poll_action(&mut self) -> Option<Action> {
        loop {
            if let Some(action) = self.routed.pop_front() {
                return Some(action);
            }
            if let Some((conn, line)) = self.connections.pop_outgoing() {
                return Some(Action::Forward {
                    to: Peer::Client(conn),
                    line,
                });
            }
            if self.connections.unsettled() {
                self.settle_connections();
            }
            let route = match self.fx.pop()? {
                Queued::Action(action) => return Some(action),
                Queued::ToClients(line) => self.connections.route(line, &self.sessions),
                Queued::ToAsker(id, line) => self.connections.route_reply(&id, line),
            };
            match route {
                Route::One(conn, line) => {
                    return Some(Action::Forward {
                        to: Peer::Client(conn),
                        line,
                    });
                }
                Route::Unanswerable(id, line, why) => {
                    let at = Stamp {
                        unix_us: self.unix_now,
                        mono_us: self.now,
                    };
                    self.answer_unasked(at, id, &line, why);
                }
                Route::Wait(mut waiting) => {
                    waiting.since_us = self.now;
                    let (id, line) = (waiting.id.clone(), waiting.line.clone());
                    if !self.connections.wait(waiting) {
                        let at = Stamp {
                            unix_us: self.unix_now,
                            mono_us: self.now,
                        };
                        self.answer_unasked(at, id, &line, "too many requests wait for a client");
                    }
                }
                Route::Each(conns, line) => {
                    self.routed
                        .extend(conns.into_iter().map(|conn| Action::Forward {
                            to: Peer::Client(conn),
                            line: line.clone(),
                        }));
                }
                Route::Dropped => {}
            }
        }
    }

    /// Requests still awaiting a response (both directions).
    pub fn pending_requests(&self) -> usize {
        self.pending.len()
    }

    /// Sequence number of the next record.
    pub fn next_seq(&self) -> u64 {
        self.fx.next_seq()
    }

    /// The components' shared context, and the loads.
    fn cx(&mut self) -> (Cx<'_>, &mut Loads) {
        (
            Cx {
                fx: &mut self.fx,
                sessions: &mut self.sessions,
                ids: &mut self.ids,
                pending: &self.pending,
                agent: self.agent,
                client: self.client,
                config: self.config,
                initialize: &self.initialize,
            },
            &mut self.loads,
        )
    }

    fn emulates_loading(&self) -> bool {
        matches!(self.config.load, LoadMode::Auto | LoadMode::Journal)
    }

    fn synthesizes_load(&self) -> bool {
        match self.config.load {
            LoadMode::Journal => true,
            LoadMode::Auto => !self.agent.load,
            LoadMode::Agent | LoadMode::Off => false,
        }
    }

    fn next_op(&mut self) -> u64 {
        let op = self.next_op;
        self.next_op += 1;
        op
    }

    /// A whole line from `from` (terminator included; a final line at EOF may lack it).
    pub fn handle_line(&mut self, at: Stamp, from: Peer, line: Bytes) {
        let peek = envelope::peek(&line);
        let conn = match from {
            Peer::Agent => return self.take(at, Side::Agent, &peek, &line),
            Peer::Client(conn) => conn,
        };
        self.connections.arrive(conn);
        if let Some(s) = peek.session.as_deref()
            && peek.method().is_some()
        {
            self.sessions.attach(s, conn);
        }
        let echo_prompts = !self.agent.v2;
        match self
            .connections
            .inbound(conn, &peek, &line, &self.sessions, echo_prompts)
        {
            Inbound::AsIs => self.take(at, Side::Client, &peek, &line),
            Inbound::Renumbered(renumbered) => self.take_later(at, conn, renumbered),
            Inbound::Refused(renumbered, sent, error) => {
                let peek = envelope::peek(&renumbered);
                self.fx
                    .journal_client(at, Target::Connection, &peek, &renumbered);
                self.fx.answer(at, Target::Connection, &sent, Err(&error));
            }
            Inbound::Settled => {
                // Another connection answered first; this answer has nobody to go to.
                tracing::debug!("dropped a late answer of connection {}", conn.0);
            }
        }
    }

    /// A whole line from one side (the proxy's own re-feeds: held and restored lines).
    fn take_line(&mut self, at: Stamp, from: Side, line: Bytes) {
        self.take(at, from, &envelope::peek(&line), &line);
    }

    /// A whole line from one side, as the core handles it, described by `peek`.
    fn take(&mut self, at: Stamp, from: Side, peek: &Peek<'_>, line: &Bytes) {
        self.now = at.mono_us;
        self.unix_now = at.unix_us;
        if from == Side::Client
            && let Some(reinit) = &mut self.handshake.reinit
            && peek.is_message()
        {
            // Messages wait for the restarted agent; anything else is no message of the
            // protocol and passes as it always does.
            reinit.hold(at, peek, line.clone());
            return;
        }
        if self.sessions.prompting() {
            // The client-facing session: the agent's line names its own ID, the pending table
            // holds the client's view.
            let session = match (from, &peek.kind) {
                (Side::Agent, _) => peek
                    .session
                    .as_deref()
                    .map(|s| self.sessions.client_of(AgentRef(s))),
                (Side::Client, Kind::Response { id, .. }) => self
                    .pending
                    .get(&(Side::Agent, id.clone()))
                    .and_then(|p| p.session.clone()),
                (Side::Client, _) => None,
            };
            if let Some(s) = session {
                self.sessions.prompt_active(&s, at.mono_us);
            }
        }
        let consumed = self.config.load != LoadMode::Off
            && match from {
                Side::Client => self.intercept_client(at, peek, line),
                Side::Agent => self.intercept_agent(at, peek, line),
            };
        if !consumed {
            self.pass(at, from, peek, line);
        }
        if from == Side::Agent && matches!(peek.kind, Kind::Response { .. }) {
            // An answer may have brought up a session whose early lines wait unclaimed.
            self.claim_unclaimed(at);
        } else if !consumed && from == Side::Client && self.agent_ended {
            // Nobody will answer it: say so at once.
            self.agent_gone(at);
        }
    }

    /// A line the proxy does not consume: edited where it must be, journaled, forwarded.
    fn pass(&mut self, at: Stamp, from: Side, peek: &Peek<'_>, line: &Bytes) {
        if self.config.stall_timeout_us.is_some()
            && from == Side::Client
            && let Kind::Request { id, method } = &peek.kind
            && method == "session/prompt"
            && let Some(s) = peek.session.as_deref()
        {
            let s = self.sessions.id(s);
            self.sessions.start_prompt(&s, id.clone(), at);
        }
        let rewritten = match (self.config.load, from) {
            (LoadMode::Off, _) => None,
            (_, Side::Client) => self.rewrite_client(at, peek, line),
            (_, Side::Agent) => self.rewrite_agent(peek, line),
        };
        // The journal holds what the client sent and what it received.
        match (from, rewritten.map(Bytes::from)) {
            (Side::Agent, Some(out)) => {
                let facing = envelope::peek(&out);
                self.relay(at, from, &facing, out.clone(), out.clone());
            }
            (_, out) => {
                let forward = out.unwrap_or_else(|| line.clone());
                self.relay(at, from, peek, line.clone(), forward);
            }
        }
    }

    /// Journal `facing` (the client's view of the line, described by `peek`) and forward
    /// `forward` to the other side.
    fn relay(&mut self, at: Stamp, from: Side, peek: &Peek<'_>, facing: Bytes, forward: Bytes) {
        let record = {
            let payload = self.fx.payload(peek, facing);
            self.fx.record(at, Body::Message { from, payload })
        };
        let target = self.attribute(from, peek, &record);
        if let Target::Session(session) = &target
            && !self.sessions.journal_open(session)
        {
            // A setup request names its cwd; early agent traffic may claim a pending
            // session/new.
            let cwd = envelope::str_field(peek.params, "cwd");
            self.open_session(session, cwd, from == Side::Agent);
        }
        if !self.is_native_replay(from, peek, &target) {
            self.fx.journal(target, record);
        }
        self.fx.forward(from.other(), forward);
    }

    /// A peer closed its stream. When the agent's ends while the client is still there, every
    /// client request still waiting for an answer (and any the client sends later) is answered
    /// with error -32603 ("the agent exited"), journaled as a line the proxy made. After the
    /// client closed its stream (a normal shutdown) nothing is answered.
    /// A client connection that ends while others remain is detached from its sessions (they
    /// live on); the last one ending is the client's end.
    pub fn handle_eof(&mut self, at: Stamp, from: Peer) {
        if let Peer::Client(conn) = from {
            self.sessions.detach(conn);
            let (unanswered, last) = self.connections.end(conn);
            if !last || self.connections.is_hosted() {
                for (id, line) in unanswered {
                    self.ask_again(at, id, line);
                }
                return;
            }
        }
        let from = from.side();
        if from == Side::Agent {
            self.flush_stderr(at, true);
            self.agent_ended = true;
            if !self.client_ended {
                self.agent_gone(at);
            }
            self.fx.event(at, Target::Connection, Event::Eof { from });
        } else {
            self.handle_clients_gone(at);
        }
    }

    /// No client can come any more: the editor's stream ended, or a host stops. The agent's
    /// stdin is closed (a normal shutdown).
    pub fn handle_clients_gone(&mut self, at: Stamp) {
        self.end_reinit(at);
        self.client_ended = true;
        let from = Side::Client;
        self.fx.event(at, Target::Connection, Event::Eof { from });
        self.fx.push(Action::CloseAgentStdin);
    }

    /// True once the current agent answered `initialize` successfully.
    pub fn agent_answered_initialize(&self) -> bool {
        self.handshake.agent_initialized
    }

    /// A chunk of the agent's stderr. It is journaled by whole lines (a line split across
    /// writes stays one record, so redaction sees it whole); a partial line is held until its
    /// newline, 64 KiB, or the agent's end.
    pub fn handle_stderr(&mut self, at: Stamp, chunk: Bytes) {
        self.stderr.extend_from_slice(&chunk);
        self.flush_stderr(at, self.stderr.len() > 64 * 1024);
    }

    fn flush_stderr(&mut self, at: Stamp, all: bool) {
        let cut = if all {
            self.stderr.len()
        } else {
            memchr::memrchr(b'\n', &self.stderr).map_or(0, |i| i + 1)
        };
        if cut == 0 {
            return;
        }
        let rest = self.stderr.split_off(cut);
        let text = std::mem::replace(&mut self.stderr, rest);
        let text = self.fx.stderr_text(text);
        let record = self.fx.record(at, Body::Stderr(Bytes::from(text)));
        self.fx.journal(Target::Connection, record);
    }

    /// Something the shell observed, journaled with the connection.
    pub fn handle_event(&mut self, at: Stamp, event: Event) {
        self.fx.event(at, Target::Connection, event);
    }

    /// Client lines the proxy handles itself. Returns true when the line was consumed.
    fn intercept_client(&mut self, at: Stamp, peek: &Peek<'_>, line: &Bytes) -> bool {
        if let Kind::Response { id, .. } = &peek.kind
            && let Some(session) = self.handshake.dead.remove(id)
        {
            // The agent that asked is gone: journaled, never forwarded to its successor.
            let target = session.map_or(Target::Connection, Target::Session);
            self.fx.journal_client(at, target, peek, line);
            return true;
        }
        if let Some(s) = peek.session.as_deref().filter(|_| peek.method().is_some())
            && self.restore_first(at, s, peek, line)
        {
            return true;
        }
        let session = || peek.session.as_deref().map(SessionId::from);
        if self.connections.is_hosted()
            && let Kind::Request { id, method } = &peek.kind
            && let Some(s) = session()
            && self.join_or_leave(at, id, method, &s, peek, line)
        {
            return true;
        }
        match &peek.kind {
            Kind::Request { id, method } => match method.as_ref() {
                "session/load" if self.synthesizes_load() => {
                    self.start_load(at, id, peek, line, true, false);
                    true
                }
                "session/load" => {
                    self.begin_native_load(id, peek, true);
                    false
                }
                "session/resume" if self.agent.v2 && self.emulates_loading() => {
                    self.resume_v2(at, id, peek, line)
                }
                "session/resume" if !self.agent.resume && self.emulates_loading() => {
                    self.start_load(at, id, peek, line, false, false);
                    true
                }
                "session/resume" if self.emulates_loading() => {
                    self.begin_native_load(id, peek, false);
                    false
                }
                "session/fork" if !self.agent.fork && self.emulates_loading() => {
                    self.start_fork(at, id, peek, line);
                    true
                }
                "session/list" => self.start_list(at, id, peek, line),
                "session/close" if self.agent.close => {
                    // The agent closes it: a later load must bring it up again.
                    if let Some(s) = session() {
                        self.sessions.set_not_live(&s);
                    }
                    false
                }
                "session/close" => {
                    let Some(s) = session() else { return false };
                    self.close(at, &s, id, peek, line);
                    true
                }
                "session/delete" => {
                    let Some(s) = session() else { return false };
                    self.fx
                        .push(Action::Catalog(CatalogUpdate::Delete { session: s }));
                    if self.agent.delete {
                        return false;
                    }
                    self.fx.journal_client(at, Target::Connection, peek, line);
                    self.fx.answer(at, Target::Connection, id, Ok("{}"));
                    true
                }
                _ => false,
            },
            Kind::Notification { method } => {
                let op = match method.as_ref() {
                    "$/cancel_request" => envelope::request_id(peek.params).and_then(|rid| {
                        self.loads.by_request(&rid).or_else(|| {
                            let (op, list) = self.lists.of_request(&rid)?;
                            (!list.forwarded).then_some(op)
                        })
                    }),
                    // A host's live session: the cancel is for the turn, not for a client
                    // joining it.
                    "session/cancel" => session()
                        .filter(|s| !(self.connections.is_hosted() && self.sessions.is_live(s)))
                        .and_then(|s| self.loads.by_session(&s)),
                    _ => None,
                };
                let Some(op) = op else { return false };
                let why = match method.as_ref() {
                    "$/cancel_request" => "cancelled by $/cancel_request",
                    _ => "cancelled by session/cancel",
                };
                self.cancel_op(at, op, line, why)
            }
            _ => false,
        }
    }

    /// Journal and forward agent lines that were held, in order.
    fn pass_all(&mut self, at: Stamp, lines: Vec<Bytes>) {
        for line in lines {
            self.pass(at, Side::Agent, &envelope::peek(&line), &line);
        }
    }

    /// `session/close` for an agent that lacks it: cancel the session's work, answer.
    fn close(&mut self, at: Stamp, s: &SessionId, id: &RequestId, peek: &Peek<'_>, line: &Bytes) {
        let record = self.fx.client_record(at, peek, line);
        if !self.sessions.journal_open(s) {
            self.open_session(s, None, false);
        }
        self.fx.journal(Target::Session(s.clone()), record);
        // Closing cancels ongoing work, as `session/cancel` would.
        let agent_side = self.sessions.agent_id(s);
        let params = json!({"sessionId": agent_side.as_str()}).to_string();
        self.fx.send_agent(
            at,
            Target::Session(s.clone()),
            None,
            "session/cancel",
            &params,
        );
        self.sessions.set_not_live(s);
        self.fx.answer(at, Target::Session(s.clone()), id, Ok("{}"));
    }

    /// Agent lines the proxy consumes or holds. Returns true when the line was consumed.
    fn intercept_agent(&mut self, at: Stamp, peek: &Peek<'_>, line: &Bytes) -> bool {
        match &peek.kind {
            Kind::Response { id, is_error } => {
                if self.native_answered(at, id, line, *is_error) {
                    return true;
                }
                match self.ids.answered(id) {
                    Some(Purpose::Load(op, step)) => {
                        let (mut cx, loads) = self.cx();
                        let progress =
                            loads.on_response(&mut cx, at, op, step, peek, line, *is_error);
                        self.progressed(at, progress);
                        return true;
                    }
                    Some(purpose) => {
                        self.reinit_answered(at, purpose, peek, line, *is_error);
                        return true;
                    }
                    None => {}
                }
                let client_id = self.ids.client_id(id);
                let Some((op, list)) = self.lists.of_request(&client_id) else {
                    return false;
                };
                if !list.forwarded {
                    return false;
                }
                // The client gets its own id back, even if it was renumbered.
                let line = match self.ids.restore(id) {
                    Some(original) => rewrite::edit_line(line, |m| m.set("id", original.to_json()))
                        .map_or_else(|| line.clone(), Bytes::from),
                    None => line.clone(),
                };
                self.lists.answered(op, line);
                self.try_merge_list(at, op);
                true
            }
            Kind::Notification { .. } | Kind::Request { .. } => {
                let Some(session) = peek.session.as_deref() else {
                    return false;
                };
                let update = peek.method() == Some("session/update");
                if self.sessions.hides_replay(session) && update {
                    return true; // the agent's own replay under `--load journal`
                }
                if let Some(native) = self
                    .sessions
                    .native_load_mut(session)
                    .filter(|n| update && n.holds_replay())
                {
                    if native.held.hold(line, NATIVE_HOLD_BYTES) {
                        return true;
                    }
                    let held = native.held.take();
                    self.pass_all(at, held);
                    return false;
                }
                let agent = AgentRef(session);
                if self.is_starting(agent) {
                    if self.sessions.hold(agent, line, self.config.held_limit) {
                        return true;
                    }
                    // Past the bound the lines go out as they come, after those held.
                    let held = self.sessions.take_held(agent);
                    self.pass_all(at, held);
                }
                false
            }
            _ => false,
        }
    }
}

impl Setup {
    /// Only the client creates sessions.
    fn record_is_client_new(&self) -> bool {
        matches!(
            &self.record.body,
            Body::Message {
                from: Side::Client,
                ..
            }
        )
    }
}

/// The stored bytes of a message record (its wire form without line ending, as journaled).
/// Whether the store holds a session ID.
type IsStored = dyn Fn(&str) -> bool + Send;

/// The shell's test for session IDs the store holds (see [`Proxy::set_stored_check`]).
#[derive(Default)]
struct StoredCheck(Option<Box<IsStored>>);

impl std::fmt::Debug for StoredCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "StoredCheck(set)"
        } else {
            "StoredCheck(none)"
        })
    }
}
