//! Client connections. The core serves any number of them on one agent: every client line comes
//! from a connection ([`Peer::Client`]) and every line for a client goes to one, while sessions
//! live apart from any connection (a session records the connections attached to it, and a
//! connection can end while its sessions go on). The stdio proxy is the one-connection case:
//! while one connection was ever opened nothing is read or rewritten, its lines cross as they
//! came.
//!
//! The first connection's request ids reach the agent as sent. Every later connection's
//! requests are renumbered (`"acp-journal:cN:<id>"`), so the agent never sees two requests under
//! one id, and their answers get the connection's own id back. Lines the core makes for clients
//! are routed here ([`Connections::route`]): a response to the connection that asked; a
//! session's notification to the connections attached to it; an agent request to where it can
//! be answered:
//! - `session/request_permission` to every controller attached to the session: the first answer
//!   that is not an error wins and goes to the agent, the others asked get `$/cancel_request`
//!   and every other attached connection a `session/update` (`tool_call_update` with
//!   `_meta.acpJournal.permission`) saying what was chosen, by whom; later answers are dropped;
//! - a terminal's requests to the connection that created the terminal; `fs/*` and
//!   `terminal/create` to the connection running the session's turn, else another attached one
//!   that declared the capability, else the proxy answers with an error;
//! - anything else to the turn's connection, else the first attached.
//!
//! An agent request whose connections all end before answering is asked again of another
//! connection attached to its session, or answered by the proxy ([`Connections::end`] hands it
//! back).
//!
//! A host (`acp-journal serve`, [`Connections::hosted`]) keeps sessions apart from connections
//! strictly: a session's lines go only to the connections attached to it (none attached: they
//! are journaled, not sent), and an agent request for a session nobody is attached to waits,
//! bounded in number and time, for the next connection that joins the session; it is sent right
//! after that connection's answer. A host's connection joins a session live on the agent by
//! `session/load`, `session/resume` or the multi-client draft's `session/attach`: the core
//! serves it from the journal, and the session's lines are held for the joining connection
//! ([`Connections::joins_live`]) until its answer, so it gets the history, the answer, then every
//! live line once, in order. A prompt while another connection's turn runs in the session is
//! refused (-32000, "session busy"); a prompt taken is shown to the other attached connections
//! as the user's message (ACP v1; a v2 agent echoes it itself).

use std::collections::VecDeque;

use bytes::Bytes;
use serde_json::{Value, json};

use super::sessions::SessionTable;
use super::vocab::{ConnId, HashMap, HashSet, SessionId};
use crate::wire::envelope::{self, Kind, Peek, RequestId, error_json};
use crate::wire::rewrite;

/// The connections the core has seen and the ids it renumbered for them. Until a second one
/// comes, the first is taken to be there from the start (the stdio proxy's editor).
#[derive(Debug, Default)]
pub(super) struct Connections {
    /// Connections that came and have not ended, in the order they came.
    live: Vec<ConnId>,
    /// A connection other than the first came (routing reads the lines from then on).
    several: bool,
    /// Sent id → the connection that sent the request, and its own id.
    renumbered: HashMap<RequestId, (ConnId, RequestId)>,
    /// The same, the other way (for `$/cancel_request`).
    sent_as: HashMap<(ConnId, RequestId), RequestId>,
    /// Agent requests sent to connections and not answered yet.
    asked: HashMap<RequestId, Asked>,
    /// Permission requests lately settled by one connection: the others' answers are dropped.
    settled: VecDeque<RequestId>,
    /// What each connection declared in its `initialize`.
    views: HashMap<ConnId, ClientView>,
    /// Connections attached to a session as observers (`session/attach`, role `observer`).
    observers: HashSet<(ConnId, SessionId)>,
    /// Connections attached by `session/attach`: they take the draft's own updates.
    drafted: HashSet<(ConnId, SessionId)>,
    /// The prompt turn running in each session.
    turns: HashMap<SessionId, Turn>,
    /// Terminals a client created for the agent, and that client.
    terminals: HashMap<String, ConnId>,
    /// A host: no session line goes to a connection that is not attached to it.
    hosted: bool,
    /// Agent requests for sessions nobody is attached to, oldest first (a host's).
    waiting: Vec<Waiting>,
    /// A host's load, resume or attach requests (as sent) not answered yet.
    joining: HashMap<RequestId, Join>,
    /// A session's lines held for connections joining it while it is live, until their answer.
    held: HashMap<ConnId, Held>,
    /// Lines for connections that go out before any other line the core routes next.
    outgoing: VecDeque<(ConnId, Bytes)>,
    /// Connections the core must end (they fell too far behind while joining a session).
    to_end: Vec<ConnId>,
    /// Attachments that ended without the connection ending (a failed join, a detach).
    detached: Vec<(ConnId, SessionId)>,
    /// Agent requests that lost the last connection they were asked of (a failed join).
    orphaned: Vec<(RequestId, Bytes)>,
    /// Requests (as the agent sees their ids) whose answer creates a session for the
    /// connection that sent them (`session/new`, `session/fork`).
    creating: HashSet<RequestId>,
    /// Sessions to attach connections to: created for them (`session/new`, `session/fork`) or
    /// joined by them.
    created: Vec<(SessionId, ConnId)>,
}

/// An agent request sent (or held) for connections, and not answered yet.
#[derive(Debug)]
struct Asked {
    /// The connections asked. A permission request asks every attached controller; any other
    /// request one connection.
    conns: Vec<ConnId>,
    line: Bytes,
    method: String,
    session: Option<SessionId>,
}

/// A prompt turn running in a session.
#[derive(Debug)]
struct Turn {
    /// The connection that sent the prompt.
    conn: ConnId,
    /// The prompt's id, as sent to the agent.
    sent: RequestId,
    /// Tell the other attached connections when it ends (ACP v1: nothing else does; a v2 agent
    /// reports its `idle` state itself).
    tell_end: bool,
}

/// What a connection declared in its `initialize`: what it can do for the agent, who it is.
#[derive(Clone, Debug, Default)]
struct ClientView {
    read: bool,
    write: bool,
    terminal: bool,
    name: Option<String>,
    version: Option<String>,
}

impl ClientView {
    fn from_initialize(peek: &Peek<'_>) -> ClientView {
        let params: Value = peek
            .params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let caps = &params["clientCapabilities"];
        let info = &params["clientInfo"];
        ClientView {
            read: caps["fs"]["readTextFile"] == true,
            write: caps["fs"]["writeTextFile"] == true,
            terminal: caps["terminal"] == true,
            name: info["name"].as_str().map(String::from),
            version: info["version"].as_str().map(String::from),
        }
    }

    /// True when it declared what an agent request of `method` needs.
    fn can(&self, method: &str) -> bool {
        match method {
            "fs/read_text_file" => self.read,
            "fs/write_text_file" => self.write,
            m if m.starts_with("terminal/") => self.terminal,
            _ => true,
        }
    }
}

/// A connection joining a session: a load, resume or `session/attach` not answered yet.
#[derive(Debug)]
struct Join {
    conn: ConnId,
    session: SessionId,
    /// The session is live and the core serves the join from the journal: the session's lines
    /// are held for the connection until the answer (see [`Connections::joins_live`]).
    live: bool,
    /// A `session/attach`: its role and history policy.
    attach: Option<Attach>,
}

/// What a `session/attach` asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Attach {
    pub(super) observer: bool,
    pub(super) history: HistoryPolicy,
}

/// The multi-client draft's `historyPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HistoryPolicy {
    /// The whole history, as `session/load` replays it.
    Full,
    /// Only what waits for an answer (the pending permission requests).
    PendingOnly,
    /// Nothing: only what happens from now on.
    None,
}

impl Attach {
    /// The params of a `session/attach`; `Err` with the message of an invalid value.
    pub(super) fn parse(params: Option<&serde_json::value::RawValue>) -> Result<Attach, String> {
        let params: Value = params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let observer = match params["role"].as_str() {
            None | Some("controller") => false,
            Some("observer") => true,
            Some(other) => return Err(format!("unknown role {other:?}")),
        };
        let history = match params["historyPolicy"].as_str() {
            None | Some("full") => HistoryPolicy::Full,
            Some("pending_only") => HistoryPolicy::PendingOnly,
            Some("none") => HistoryPolicy::None,
            Some(other) => return Err(format!("unknown historyPolicy {other:?}")),
        };
        Ok(Attach { observer, history })
    }
}

/// Lines held for a joining connection, in order, under [`HOLD_LIMIT`].
#[derive(Debug, Default)]
struct Held {
    lines: Vec<Bytes>,
    bytes: usize,
}

/// The most a joining connection has held for it; past it the connection is ended.
pub(super) const HOLD_LIMIT: usize = 16 << 20;

/// An agent request waiting for a connection to attach to its session.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Waiting {
    pub(super) id: RequestId,
    pub(super) session: SessionId,
    pub(super) line: Bytes,
    /// When it began to wait (monotonic microseconds).
    pub(super) since_us: u64,
}

/// At most this many agent requests wait for a connection; past it they are answered at once.
pub(super) const WAITING_LIMIT: usize = 64;

/// How many settled permission requests are remembered (to drop the later answers).
const SETTLED_MEMORY: usize = 256;

/// Where a line for clients goes.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Route {
    /// To this connection, with these bytes (a renumbered id restored).
    One(ConnId, Bytes),
    /// To each of these connections.
    Each(Vec<ConnId>, Bytes),
    /// Nowhere: the connection it was for has ended.
    Dropped,
    /// An agent request for a session nobody is attached to (a host's): the core makes it wait
    /// ([`Connections::wait`]) or answers it.
    Wait(Waiting),
    /// An agent request no attached connection can answer (none declared the capability it
    /// needs, or the terminal it names is gone): the core answers it, for this reason.
    Unanswerable(RequestId, Bytes, &'static str),
}

/// What the core does with a client line.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Inbound {
    /// Take it as it came.
    AsIs,
    /// Take it under the proxy's id (a later connection's request, or a cancel naming one).
    Renumbered(Bytes),
    /// Refuse the request (here under the proxy's id): answer it with this error (JSON).
    Refused(Bytes, RequestId, String),
    /// An answer to a permission request another connection answered first: not forwarded.
    Settled,
}

impl Connections {
    /// A host's connections (`acp-journal serve`): see the module's text.
    pub(super) fn hosted() -> Connections {
        Connections {
            hosted: true,
            // Every line is read and routed, whichever connection comes first.
            several: true,
            ..Connections::default()
        }
    }

    /// True for a host's connections.
    pub(super) fn is_hosted(&self) -> bool {
        self.hosted
    }

    /// A line from connection `conn`: true the first time it is seen.
    pub(super) fn arrive(&mut self, conn: ConnId) -> bool {
        if self.live.contains(&conn) {
            return false;
        }
        self.several |= conn != ConnId::FIRST || !self.live.is_empty();
        self.live.push(conn);
        true
    }

    /// Connection `conn` closed its stream: the agent requests it left unanswered, asked of no
    /// other connection (ids and lines, in no order), and whether no connection is left.
    pub(super) fn end(&mut self, conn: ConnId) -> (Vec<(RequestId, Bytes)>, bool) {
        self.live.retain(|c| *c != conn);
        self.sent_as.retain(|(c, _), _| *c != conn);
        self.views.remove(&conn);
        self.observers.retain(|(c, _)| *c != conn);
        self.drafted.retain(|(c, _)| *c != conn);
        self.terminals.retain(|_, c| *c != conn);
        self.held.remove(&conn);
        self.outgoing.retain(|(c, _)| *c != conn);
        let unanswered = self.forget_asked(|c, _| c == conn);
        (unanswered, self.live.is_empty())
    }

    /// Take the connections matching `gone` (a connection, with the session asked about) out
    /// of the agent requests they were asked: those asked of nobody else, with their lines.
    fn forget_asked(
        &mut self,
        gone: impl Fn(ConnId, Option<&SessionId>) -> bool,
    ) -> Vec<(RequestId, Bytes)> {
        let mut left = Vec::new();
        for (id, asked) in &mut self.asked {
            asked.conns.retain(|c| !gone(*c, asked.session.as_ref()));
            if asked.conns.is_empty() {
                left.push(id.clone());
            }
        }
        left.into_iter()
            .filter_map(|id| self.asked.remove_entry(&id))
            .map(|(id, asked)| (id, asked.line))
            .collect()
    }

    /// Connection `conn` leaves session `s` (`session/detach`, or a `session/close` while
    /// others stay attached): what it was asked about the session and nobody else was.
    pub(super) fn detach(&mut self, conn: ConnId, s: &SessionId) -> Vec<(RequestId, Bytes)> {
        self.observers.remove(&(conn, s.clone()));
        self.drafted.remove(&(conn, s.clone()));
        self.forget_asked(|c, session| c == conn && session == Some(s))
    }

    /// Make `waiting` wait for a connection to attach to its session; false (it does not wait)
    /// when [`WAITING_LIMIT`] requests already do.
    pub(super) fn wait(&mut self, waiting: Waiting) -> bool {
        if self.waiting.len() >= WAITING_LIMIT {
            return false;
        }
        self.waiting.push(waiting);
        true
    }

    /// When the oldest waiting request began to wait.
    pub(super) fn oldest_waiting(&self) -> Option<u64> {
        self.waiting.iter().map(|w| w.since_us).min()
    }

    /// The requests that have waited since `before` or longer, taken out.
    pub(super) fn expired(&mut self, before: u64) -> Vec<Waiting> {
        self.waiting
            .extract_if(.., |w| w.since_us <= before)
            .collect()
    }

    /// The next line to go out ahead of anything routed later (held or released lines, the
    /// notices of a settled request, prompt echoes).
    pub(super) fn pop_outgoing(&mut self) -> Option<(ConnId, Bytes)> {
        self.outgoing.pop_front()
    }

    /// Connections to end, taken out.
    pub(super) fn take_to_end(&mut self) -> Vec<ConnId> {
        std::mem::take(&mut self.to_end)
    }

    /// True when routing left something for the core (attachments, connections to end, failed
    /// joins, orphaned requests): never with one connection.
    pub(super) fn unsettled(&self) -> bool {
        !(self.created.is_empty()
            && self.to_end.is_empty()
            && self.detached.is_empty()
            && self.orphaned.is_empty())
    }

    /// Sessions to attach connections to, taken out.
    pub(super) fn take_created(&mut self) -> Vec<(SessionId, ConnId)> {
        std::mem::take(&mut self.created)
    }

    /// Attachments that ended without their connection ending, taken out.
    pub(super) fn take_detached(&mut self) -> Vec<(ConnId, SessionId)> {
        std::mem::take(&mut self.detached)
    }

    /// Agent requests left without anyone to answer them, taken out.
    pub(super) fn take_orphaned(&mut self) -> Vec<(RequestId, Bytes)> {
        std::mem::take(&mut self.orphaned)
    }

    /// True while connection `conn` has not ended.
    pub(super) fn is_live(&self, conn: ConnId) -> bool {
        self.live.contains(&conn)
    }

    /// The connection that sent request `sent` (as the agent sees its id).
    pub(super) fn conn_of(&self, sent: &RequestId) -> ConnId {
        self.renumbered.get(sent).map_or(ConnId::FIRST, |(c, _)| *c)
    }

    /// The connection running the current prompt turn of session `s`, if any.
    pub(super) fn turn_of(&self, s: &str) -> Option<ConnId> {
        self.turns.get(s).map(|t| t.conn)
    }

    /// The join `sent` (a load or resume of a live session) is served from the journal: the
    /// session's lines are held for its connection until the answer, so the history comes
    /// first and every live line once after it.
    pub(super) fn joins_live(&mut self, sent: &RequestId) {
        if let Some(join) = self.joining.get_mut(sent) {
            join.live = true;
        }
    }

    /// A client line as the core handles it: a later connection's request under an id of the
    /// proxy's (and a cancel naming one of its requests likewise), refused, or dropped.
    pub(super) fn inbound(
        &mut self,
        conn: ConnId,
        peek: &Peek<'_>,
        line: &Bytes,
        sessions: &SessionTable,
        echo_prompts: bool,
    ) -> Inbound {
        if let Kind::Request { method, .. } = &peek.kind
            && method == "initialize"
        {
            self.views.insert(conn, ClientView::from_initialize(peek));
        }
        let creates = matches!(&peek.kind, Kind::Request { method, .. }
            if matches!(method.as_ref(), "session/new" | "session/fork"));
        match &peek.kind {
            // The first connection's ids pass as sent, unless one names another's request.
            Kind::Request { id, method }
                if conn != ConnId::FIRST || self.renumbered.contains_key(id) =>
            {
                let sent = RequestId::String(format!("acp-journal:c{}:{}", conn.0, id.to_json()));
                let Some(renumbered) =
                    rewrite::edit_line(line, |m| m.set("id", sent.to_json())).map(Bytes::from)
                else {
                    return Inbound::AsIs;
                };
                self.renumbered.insert(sent.clone(), (conn, id.clone()));
                self.sent_as.insert((conn, id.clone()), sent.clone());
                if creates {
                    self.creating.insert(sent.clone());
                }
                let session = peek.session.as_deref().map(SessionId::from);
                match (method.as_ref(), session) {
                    ("session/load" | "session/resume", Some(s)) if self.hosted => {
                        self.created.push((s.clone(), conn));
                        let join = Join {
                            conn,
                            session: s,
                            live: false,
                            attach: None,
                        };
                        self.joining.insert(sent, join);
                    }
                    ("session/attach", Some(s)) if self.hosted => {
                        let attach = match Attach::parse(peek.params) {
                            Ok(attach) => attach,
                            Err(why) => {
                                let error =
                                    error_json(-32602, &format!("Invalid params: {why}"), None);
                                return Inbound::Refused(renumbered, sent, error);
                            }
                        };
                        self.created.push((s.clone(), conn));
                        let join = Join {
                            conn,
                            session: s,
                            live: false,
                            attach: Some(attach),
                        };
                        self.joining.insert(sent, join);
                    }
                    ("session/prompt", Some(s)) if self.hosted => {
                        if let Some(why) = self.prompt_refused(conn, &s) {
                            let error = error_json(-32000, why, Some(json!({"sessionId": &*s})));
                            return Inbound::Refused(renumbered, sent, error);
                        }
                        if echo_prompts {
                            self.echo_prompt(conn, &s, sessions, peek.params);
                        }
                        let turn = Turn {
                            conn,
                            sent,
                            tell_end: echo_prompts,
                        };
                        self.turns.insert(s, turn);
                    }
                    _ => {}
                }
                Inbound::Renumbered(renumbered)
            }
            Kind::Notification { method } if method == "$/cancel_request" && self.several => {
                let Some(sent) = envelope::request_id(peek.params)
                    .and_then(|cancelled| self.sent_as.get(&(conn, cancelled)).cloned())
                else {
                    return Inbound::AsIs;
                };
                rewrite::edit_line(line, |m| {
                    m.edit("params", |p| p.set("requestId", sent.to_json()));
                })
                .map_or(Inbound::AsIs, |l| Inbound::Renumbered(Bytes::from(l)))
            }
            Kind::Response { id, is_error } if self.several => {
                self.answered(conn, id, *is_error, peek, sessions)
            }
            Kind::Request { id, .. } if creates && self.several => {
                self.creating.insert(id.clone());
                Inbound::AsIs
            }
            _ => Inbound::AsIs,
        }
    }

    /// Why a prompt of `conn` in session `s` is refused: it observes the session, or another
    /// connection's turn runs there (prompts are not queued: see docs/SERVING.md).
    fn prompt_refused(&self, conn: ConnId, s: &SessionId) -> Option<&'static str> {
        if self.observers.contains(&(conn, s.clone())) {
            return Some("this connection observes the session: observers cannot prompt");
        }
        // The turn runs on the agent whether or not its connection is still there.
        match self.turns.get(s) {
            Some(turn) if turn.conn != conn => Some(
                "session busy: a turn another client started is running; cancel it (session/cancel) or wait for it to end",
            ),
            _ => None,
        }
    }

    /// Show a prompt of `conn` to the other connections attached to session `s` as the user's
    /// message (ACP v1: agents do not echo prompts; v2 agents send `user_message` themselves).
    fn echo_prompt(
        &mut self,
        conn: ConnId,
        s: &SessionId,
        sessions: &SessionTable,
        params: Option<&serde_json::value::RawValue>,
    ) {
        let others: Vec<ConnId> = self
            .attached_live(sessions, s)
            .into_iter()
            .filter(|c| *c != conn)
            .collect();
        if others.is_empty() {
            return;
        }
        let Some(Value::Array(blocks)) = params
            .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
            .map(|mut p| p["prompt"].take())
        else {
            return;
        };
        for block in blocks {
            let line = notification_line(
                "session/update",
                json!({"sessionId": &**s, "update": {"sessionUpdate": "user_message_chunk", "content": block}}),
            );
            for c in &others {
                self.send_or_hold(*c, line.clone());
            }
        }
    }

    /// Send `line` to `conn` now, or hold it while the connection joins the line's session
    /// live (the line comes after the history it is being sent).
    fn send_or_hold(&mut self, conn: ConnId, line: Bytes) {
        if !self.holds_for(conn) {
            self.outgoing.push_back((conn, line));
            return;
        }
        let held = self.held.entry(conn).or_default();
        held.bytes += line.len();
        held.lines.push(line);
        if held.bytes > HOLD_LIMIT {
            tracing::warn!(
                "client connection {} fell {} bytes behind while joining a session: ending it",
                conn.0,
                held.bytes
            );
            self.held.remove(&conn);
            self.to_end.push(conn);
        }
    }

    /// True while `conn` joins a live session (its lines are held).
    fn holds_for(&self, conn: ConnId) -> bool {
        self.joining.values().any(|j| j.live && j.conn == conn)
    }

    /// A client's answer to an agent request. A permission request's first answer (not an
    /// error) wins: the others asked are told it is settled. A later answer is dropped.
    fn answered(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        is_error: bool,
        peek: &Peek<'_>,
        sessions: &SessionTable,
    ) -> Inbound {
        let Some(asked) = self.asked.get_mut(id) else {
            return match self.settled.contains(id) {
                true => Inbound::Settled,
                false => Inbound::AsIs,
            };
        };
        if is_error && asked.conns.len() > 1 && asked.conns.contains(&conn) {
            // Wait for another connection's answer.
            asked.conns.retain(|c| *c != conn);
            return Inbound::Settled;
        }
        let Some(asked) = self.asked.remove(id) else {
            return Inbound::AsIs;
        };
        match asked.method.as_str() {
            "session/request_permission" => self.settle(conn, id, &asked, peek, sessions),
            "terminal/create" => {
                if let Some(terminal) = envelope::str_field(peek.result, "terminalId") {
                    self.terminals.insert(terminal.to_string(), conn);
                }
            }
            "terminal/release" => {
                if let Some(terminal) = terminal_of(&asked.line) {
                    self.terminals.remove(&terminal);
                }
            }
            _ => {}
        }
        Inbound::AsIs
    }

    /// Connection `winner` answered permission request `id`: the others asked get
    /// `$/cancel_request` for it, and every other connection attached to its session a
    /// `session/update` with the outcome (a `tool_call_update` whose
    /// `_meta.acpJournal.permission` says what was chosen and by whom; `session/attach`ed
    /// connections also the draft's `permission_resolved`).
    fn settle(
        &mut self,
        winner: ConnId,
        id: &RequestId,
        asked: &Asked,
        peek: &Peek<'_>,
        sessions: &SessionTable,
    ) {
        if self.settled.len() >= SETTLED_MEMORY {
            self.settled.pop_front();
        }
        self.settled.push_back(id.clone());
        let cancel = notification_line("$/cancel_request", json!({"requestId": id_value(id)}));
        for c in asked.conns.iter().filter(|c| **c != winner) {
            self.send_or_hold(*c, cancel.clone());
        }
        let Some(s) = &asked.session else { return };
        let request: Value = envelope::peek(&asked.line)
            .params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let Some(tool) = request["toolCall"]["toolCallId"].as_str() else {
            return;
        };
        let result: Value = peek
            .result
            .and_then(|r| serde_json::from_str(r.get()).ok())
            .unwrap_or(Value::Null);
        let outcome = &result["outcome"];
        let by = format!("c{}", winner.0);
        let client = self.views.get(&winner).and_then(|v| v.name.clone());
        let permission = json!({
            "outcome": outcome["outcome"],
            "optionId": outcome["optionId"],
            "by": by,
            "client": client,
        });
        let update = notification_line(
            "session/update",
            json!({"sessionId": &**s, "update": {
                "sessionUpdate": "tool_call_update",
                "toolCallId": tool,
                "_meta": {"acpJournal": {"permission": permission}},
            }}),
        );
        let resolved = notification_line(
            "session/update",
            json!({"sessionId": &**s, "update": {
                "sessionUpdate": "permission_resolved",
                "toolCallId": tool,
                "chosenOptionId": outcome["optionId"],
                "resolvedBy": {"name": client, "version": self.views.get(&winner).and_then(|v| v.version.clone())},
            }}),
        );
        let others: Vec<ConnId> = self
            .attached_live(sessions, s)
            .into_iter()
            .filter(|c| *c != winner)
            .collect();
        for c in others {
            self.send_or_hold(c, update.clone());
            if self.drafted.contains(&(c, s.clone())) {
                self.send_or_hold(c, resolved.clone());
            }
        }
    }

    /// The live connections attached to session `s`.
    fn attached_live(&self, sessions: &SessionTable, s: &str) -> Vec<ConnId> {
        sessions
            .attached(s)
            .iter()
            .copied()
            .filter(|c| self.live.contains(c))
            .collect()
    }

    /// A line addressed to the asker of request `sent` (a load's replay): its connection.
    pub(super) fn route_reply(&self, sent: &RequestId, line: Bytes) -> Route {
        if !self.several {
            return Route::One(ConnId::FIRST, line);
        }
        let conn = self.conn_of(sent);
        match self.live.contains(&conn) {
            true => Route::One(conn, line),
            false => Route::Dropped,
        }
    }

    /// Where a line the core sends to clients goes (see the module's text).
    pub(super) fn route(&mut self, line: Bytes, sessions: &SessionTable) -> Route {
        if !self.several {
            // The one connection (the stdio proxy's editor, there before its first line).
            return Route::One(ConnId::FIRST, line);
        }
        let peek = envelope::peek(&line);
        match &peek.kind {
            Kind::Response { id, is_error } => self.route_response(id, *is_error, &line, sessions),
            Kind::Request { id, method } => {
                let session = peek.session.as_deref().map(SessionId::from);
                self.route_request(id, method, session, line.clone(), sessions)
            }
            Kind::Notification { .. } => {
                let Some(s) = peek.session.as_deref() else {
                    return Route::Each(self.live.clone(), line);
                };
                let attached = self.attached_live(sessions, s);
                if attached.is_empty() {
                    // Nobody is attached: a host journals it only; else it goes to everyone.
                    return match self.hosted {
                        true => Route::Dropped,
                        false => Route::Each(self.live.clone(), line),
                    };
                }
                let mut now = Vec::with_capacity(attached.len());
                for c in attached {
                    match self.holds_for(c) {
                        true => self.send_or_hold(c, line.clone()),
                        false => now.push(c),
                    }
                }
                Route::Each(now, line)
            }
            Kind::OtherJson | Kind::Invalid => Route::Each(self.live.clone(), line),
        }
    }

    /// An answer for a client: to the connection that asked, its own id restored. A join's
    /// answer attaches the connection: what was held for it, and what waits for someone to
    /// answer in the session, follow it.
    fn route_response(
        &mut self,
        id: &RequestId,
        is_error: bool,
        line: &Bytes,
        sessions: &SessionTable,
    ) -> Route {
        if self.creating.remove(id)
            && let Some(s) = created_session(line)
        {
            let conn = self.renumbered.get(id).map_or(ConnId::FIRST, |(c, _)| *c);
            self.created.push((s, conn));
        }
        let Some((conn, own)) = self.renumbered.remove(id) else {
            // Not renumbered: the first connection's.
            return match self.live.contains(&ConnId::FIRST) {
                true => Route::One(ConnId::FIRST, line.clone()),
                false => Route::Dropped,
            };
        };
        self.sent_as.remove(&(conn, own.clone()));
        if let Some(s) = self
            .turns
            .iter()
            .find_map(|(s, t)| (t.sent == *id).then(|| s.clone()))
            && let Some(turn) = self.turns.remove(&s)
            && turn.tell_end
        {
            self.tell_turn_end(&s, &turn, line, sessions);
        }
        let join = self.joining.remove(id);
        if !self.live.contains(&conn) {
            return Route::Dropped;
        }
        let mut answer = rewrite::edit_line(line, |m| m.set("id", own.to_json()))
            .map_or_else(|| line.clone(), Bytes::from);
        if let Some(join) = join {
            match is_error {
                true => self.join_failed(&join),
                false => {
                    if let Some(attach) = join.attach
                        && let Some(edited) = self.attach_answer(&answer, &join, attach)
                    {
                        answer = edited;
                    }
                    self.joined(&join);
                }
            }
        }
        Route::One(conn, answer)
    }

    /// The turn `turn` of session `s` ended with `answer` (the prompt's response): the other
    /// connections attached to the session get a `session_info_update` whose
    /// `_meta.acpJournal.turnEnded` says how (`stopReason`, or the error's `message`) and whose
    /// turn it was, since the prompt's answer goes only to the connection that sent it.
    fn tell_turn_end(
        &mut self,
        s: &SessionId,
        turn: &Turn,
        answer: &[u8],
        sessions: &SessionTable,
    ) {
        let peek = envelope::peek(answer);
        let mut ended = match envelope::str_field(peek.result, "stopReason") {
            Some(reason) => json!({"stopReason": reason}),
            None => {
                let answer: Value = serde_json::from_slice(answer).unwrap_or(Value::Null);
                json!({"error": answer["error"]["message"]})
            }
        };
        ended["by"] = json!(format!("c{}", turn.conn.0));
        ended["client"] = json!(self.views.get(&turn.conn).and_then(|v| v.name.clone()));
        let line = notification_line(
            "session/update",
            json!({"sessionId": &**s, "update": {
                "sessionUpdate": "session_info_update",
                "_meta": {"acpJournal": {"turnEnded": ended}},
            }}),
        );
        let others: Vec<ConnId> = self
            .attached_live(sessions, s)
            .into_iter()
            .filter(|c| *c != turn.conn)
            .collect();
        for c in others {
            self.send_or_hold(c, line.clone());
        }
    }

    /// A join failed: nothing held is sent, and the connection is not attached.
    fn join_failed(&mut self, join: &Join) {
        self.held.remove(&join.conn);
        self.detached.push((join.conn, join.session.clone()));
        let orphaned = self.forget_asked(|c, s| c == join.conn && s == Some(&join.session));
        self.orphaned.extend(orphaned);
    }

    /// Connection `join.conn` is attached to `join.session`: the lines held for it, then the
    /// requests waiting for someone to attach, then the permission requests others were asked
    /// and have not answered (unless it asked for no history).
    fn joined(&mut self, join: &Join) {
        let conn = join.conn;
        let s = &join.session;
        // The session is known now (a load brought it up): the connection is attached to it.
        self.created.push((s.clone(), conn));
        if let Some(held) = self.held.remove(&conn) {
            for line in held.lines {
                let still_asked = match envelope::peek(&line).kind {
                    Kind::Request { id, .. } => self.asked.contains_key(&id),
                    _ => true,
                };
                if still_asked {
                    self.outgoing.push_back((conn, line));
                }
            }
        }
        let observer = join.attach.is_some_and(|a| a.observer);
        if observer {
            self.observers.insert((conn, s.clone()));
        }
        if join.attach.is_some() {
            self.drafted.insert((conn, s.clone()));
        }
        if observer {
            return;
        }
        for w in self.waiting.extract_if(.., |w| w.session == *s) {
            self.asked.insert(
                w.id,
                Asked {
                    conns: vec![conn],
                    line: w.line.clone(),
                    method: envelope::peek(&w.line)
                        .method()
                        .unwrap_or_default()
                        .to_string(),
                    session: Some(w.session),
                },
            );
            self.outgoing.push_back((conn, w.line));
        }
        if join
            .attach
            .is_some_and(|a| a.history == HistoryPolicy::None)
        {
            return;
        }
        let mut pending: Vec<(&RequestId, &mut Asked)> = self
            .asked
            .iter_mut()
            .filter(|(_, a)| {
                a.method == "session/request_permission"
                    && a.session.as_ref() == Some(s)
                    && !a.conns.contains(&conn)
            })
            .collect();
        pending.sort_by_key(|(id, _)| id.to_json());
        for (_, asked) in pending {
            asked.conns.push(conn);
            self.outgoing.push_back((conn, asked.line.clone()));
        }
    }

    /// The answer to a `session/attach`: the load's answer with the draft's `sessionId`,
    /// `role` and `connectedClients`.
    fn attach_answer(&self, answer: &[u8], join: &Join, attach: Attach) -> Option<Bytes> {
        let role = |observer: bool| if observer { "observer" } else { "controller" };
        let clients: Vec<Value> = self
            .live
            .iter()
            .filter(|c| **c != join.conn)
            .filter_map(|c| {
                let view = self.views.get(c)?;
                let observer = self.observers.contains(&(*c, join.session.clone()));
                Some(json!({"name": view.name, "version": view.version, "role": role(observer)}))
            })
            .collect();
        rewrite::edit_line(answer, |m| {
            m.edit("result", |r| {
                r.set("sessionId", rewrite::json_string(&join.session));
                r.set("role", rewrite::json_string(role(attach.observer)));
                r.set("connectedClients", Value::Array(clients).to_string());
            });
        })
        .map(Bytes::from)
    }

    /// An agent request for clients. A permission request goes to every controller attached
    /// to its session (held for those joining); a terminal's request to the connection that
    /// created the terminal; an fs or `terminal/create` request to the connection running the
    /// turn, else another attached one that declared the capability; anything else to the
    /// turn's connection, else the first attached (else the first connection).
    fn route_request(
        &mut self,
        id: &RequestId,
        method: &str,
        session: Option<SessionId>,
        line: Bytes,
        sessions: &SessionTable,
    ) -> Route {
        let controllers: Vec<ConnId> = session.as_deref().map_or_else(Vec::new, |s| {
            self.attached_live(sessions, s)
                .into_iter()
                .filter(|c| !self.observers.contains(&(*c, SessionId::from(s))))
                .collect()
        });
        if self.hosted
            && let Some(s) = &session
            && controllers.is_empty()
        {
            // Nobody can answer: it waits for someone to attach.
            return Route::Wait(Waiting {
                id: id.clone(),
                session: s.clone(),
                line,
                since_us: 0,
            });
        }
        let asked = |conns: Vec<ConnId>| Asked {
            conns,
            line: line.clone(),
            method: method.to_string(),
            session: session.clone(),
        };
        if method == "session/request_permission" && !controllers.is_empty() {
            let mut now = Vec::with_capacity(controllers.len());
            for c in &controllers {
                match self.holds_for(*c) {
                    true => self.send_or_hold(*c, line.clone()),
                    false => now.push(*c),
                }
            }
            self.asked.insert(id.clone(), asked(controllers));
            return Route::Each(now, line);
        }
        let ready: Vec<ConnId> = controllers
            .iter()
            .copied()
            .filter(|c| !self.holds_for(*c))
            .collect();
        let turn = session
            .as_deref()
            .and_then(|s| self.turn_of(s))
            .filter(|c| ready.contains(c));
        let can = |c: &ConnId| self.views.get(c).is_none_or(|v| v.can(method));
        let chosen = if let Some(terminal) =
            terminal_of(&line).filter(|_| method != "terminal/create")
        {
            match self.terminals.get(&terminal) {
                Some(c) if self.live.contains(c) => Some(*c),
                _ => {
                    return Route::Unanswerable(
                        id.clone(),
                        line,
                        "the client connection that created this terminal has ended",
                    );
                }
            }
        } else if method.starts_with("fs/") || method.starts_with("terminal/") {
            match turn.filter(can).or_else(|| ready.iter().copied().find(can)) {
                Some(c) => Some(c),
                None if !ready.is_empty() => {
                    return Route::Unanswerable(
                        id.clone(),
                        line,
                        "no client connection attached to the session declared the capability this request needs",
                    );
                }
                None => None,
            }
        } else {
            turn.or_else(|| ready.first().copied())
        };
        match chosen
            .or_else(|| controllers.first().copied())
            .or_else(|| self.live.first().copied())
        {
            Some(c) => {
                self.asked.insert(id.clone(), asked(vec![c]));
                match self.holds_for(c) {
                    true => {
                        self.send_or_hold(c, line);
                        Route::Dropped
                    }
                    false => Route::One(c, line),
                }
            }
            None => Route::Dropped,
        }
    }
}

/// A notification line of the proxy's.
fn notification_line(method: &str, params: Value) -> Bytes {
    let mut line = json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string();
    line.push('\n');
    Bytes::from(line)
}

/// A request id as a JSON value.
fn id_value(id: &RequestId) -> Value {
    serde_json::from_str(&id.to_json()).unwrap_or(Value::Null)
}

/// The `terminalId` an agent request names.
fn terminal_of(line: &[u8]) -> Option<String> {
    memchr::memmem::find(line, b"\"terminalId\"")?;
    envelope::str_field(envelope::peek(line).params, "terminalId")
}

/// The session a response for a client creates (`result.sessionId`), to attach its connection.
fn created_session(line: &[u8]) -> Option<SessionId> {
    memchr::memmem::find(line, b"\"sessionId\"")?;
    let peek = envelope::peek(line);
    envelope::str_field(peek.result, "sessionId").map(SessionId::from)
}
