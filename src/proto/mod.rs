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
//! Every record goes to the journal of the session it belongs to, else to the run's ([`Target::Run`]):
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
mod vocab;

use bytes::Bytes;
use serde_json::json;

use crate::journal::Event;
use crate::journal::format::{Body, Record};
use crate::wire::Side;
use crate::wire::envelope::{self, Kind, Peek, RequestId};
use crate::wire::rewrite;
use capabilities::{AgentCaps, ClientCaps};
use connection::{Connections, Inbound, Route};
use effects::{Effects, Queued};
use fork::Forks;
use ids::OwnIds;
use listing::Lists;
use load_request::{NATIVE_HOLD_BYTES, SetupParams};
use loading::{Loads, Step};
use restart::Handshake;
use sessions::SessionTable;
use turn_facts::TurnFacts;
pub use vocab::{
    Action, AgentSessionId, CatalogUpdate, ClientSupport, Config, ConnId, HistoryChunk, Initialize,
    ListedSession, LoadMode, Peer, SessionId, Stamp, Summary, Target,
};
use vocab::{AgentRef, HashMap};

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
                self.fx.journal_client(at, Target::Run, &peek, &renumbered);
                self.fx.answer(at, Target::Run, &sent, Err(&error));
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
            self.fx.event(at, Target::Run, Event::Eof { from });
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
        self.fx.event(at, Target::Run, Event::Eof { from });
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
        self.fx.journal(Target::Run, record);
    }

    /// Something the shell observed, journaled with the connection.
    pub fn handle_event(&mut self, at: Stamp, event: Event) {
        self.fx.event(at, Target::Run, event);
    }

    /// Client lines the proxy handles itself. Returns true when the line was consumed.
    fn intercept_client(&mut self, at: Stamp, peek: &Peek<'_>, line: &Bytes) -> bool {
        if let Kind::Response { id, .. } = &peek.kind
            && let Some(session) = self.handshake.dead.remove(id)
        {
            // The agent that asked is gone: journaled, never forwarded to its successor.
            let target = session.map_or(Target::Run, Target::Session);
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
                    self.fx.journal_client(at, Target::Run, peek, line);
                    self.fx.answer(at, Target::Run, id, Ok("{}"));
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
