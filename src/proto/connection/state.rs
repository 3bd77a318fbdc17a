//! What the core keeps of its client connections ([`Connections`]): its parts, each in its own
//! file, and what needs more than one of them: a client line taken, a line for clients routed,
//! a join answered, a line sent to a connection or held while the connection joins a session.

use std::collections::VecDeque;

use bytes::Bytes;
use serde_json::json;

use super::super::prompt::Prompter;
use super::super::sessions::SessionTable;
use super::super::vocab::{ClientSupport, ConnId, SessionId};
use super::answers::{Asked, Asks};
use super::attach::{Attach, HistoryPolicy};
use super::client_view::ClientView;
use super::inbound::{Forwarded, Inbound, prompt_echo};
use super::joins::{Joins, PendingJoin};
use super::roster::Roster;
use super::routing::{Attachment, Route, Unsettled, created_session, turn_end_line};
use super::waiting::{Waiting, Waitlist};
use crate::wire::envelope::{self, Kind, Peek, RequestId, error_json};
use crate::wire::rewrite;

/// The client connections and what the core keeps for them.
#[derive(Debug, Default)]
pub(in crate::proto) struct Connections {
    /// Whether routing reads the lines: not while one connection ever came.
    mode: Mode,
    /// The connections themselves.
    roster: Roster,
    /// The client requests forwarded to the agent, until their answer.
    forwarded: Forwarded,
    /// The agent requests asked of connections.
    asks: Asks,
    /// A host's joins under way, and the lines held for them.
    joins: Joins,
    /// Agent requests for sessions nobody is attached to, oldest first (a host's).
    waiting: Waitlist,
    /// Lines for connections that go out before any other line the core routes next.
    outgoing: VecDeque<(ConnId, Bytes)>,
    /// What routing left for the core.
    unsettled: Unsettled,
}

/// Whether routing reads the lines for and from clients.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Mode {
    /// One connection: the stdio proxy's editor, there from the start ([`Connections::editor`]);
    /// its lines cross as they came.
    #[default]
    One,
    /// A connection other than the first came: lines are read and routed from then on.
    Several,
    /// A host's: every line is read and routed, whichever connection comes first, and no
    /// session line goes to a connection that is not attached to it.
    Hosted,
}

impl Mode {
    /// True once routing reads the lines (a second connection came, or a host's).
    fn several(self) -> bool {
        !matches!(self, Mode::One)
    }
}

impl Connections {
    /// The stdio proxy's connections: its editor ([`ConnId::FIRST`]), whose stdin is the
    /// proxy's from the first byte, is there from the start; it never arrives.
    pub(in crate::proto) fn editor() -> Connections {
        let mut roster = Roster::default();
        roster.arrive(ConnId::FIRST);
        Connections {
            roster,
            ..Connections::default()
        }
    }

    /// A host's connections (`acp-journal serve`): see the module's text of [`super`]. They
    /// arrive with their first line.
    pub(in crate::proto) fn hosted() -> Connections {
        Connections {
            mode: Mode::Hosted,
            ..Connections::default()
        }
    }

    /// What connection `conn` takes of a replay, as its `initialize` declared it (`None`
    /// before it did).
    pub(in crate::proto) fn support(&self, conn: ConnId) -> Option<ClientSupport> {
        self.roster.view(conn).map(|v| v.support)
    }

    /// True for a host's connections.
    pub(in crate::proto) fn is_hosted(&self) -> bool {
        matches!(self.mode, Mode::Hosted)
    }

    /// A line from connection `conn`: one other than the editor, seen for the first time,
    /// arrives (and lines are read and routed from then on). The editor's lines, while it is
    /// the one connection, need nothing looked up.
    pub(in crate::proto) fn arrive(&mut self, conn: ConnId) {
        if self.mode == Mode::One && conn == ConnId::FIRST {
            return;
        }
        if self.roster.arrive(conn) && self.mode == Mode::One {
            self.mode = Mode::Several;
        }
    }

    /// True while connection `conn` has not ended.
    pub(in crate::proto) fn is_live(&self, conn: ConnId) -> bool {
        self.roster.is_live(conn)
    }

    /// The connection that sent request `sent` (as the agent sees its id).
    pub(in crate::proto) fn conn_of(&self, sent: &RequestId) -> ConnId {
        self.forwarded.conn_of(sent)
    }

    /// Connection `conn` closed its stream: the agent requests it left unanswered, asked of no
    /// other connection (ids and lines, in no order), and whether no connection is left.
    pub(in crate::proto) fn end(&mut self, conn: ConnId) -> (Vec<(RequestId, Bytes)>, bool) {
        let last = self.roster.end(conn);
        self.forwarded.end(conn);
        self.joins.drop_held(conn);
        self.outgoing.retain(|(c, _)| *c != conn);
        (self.asks.end(conn), last)
    }

    /// Connection `conn` leaves session `s` (`session/detach`, or a `session/close` while
    /// others stay attached): what it was asked about the session and nobody else was.
    pub(in crate::proto) fn detach(
        &mut self,
        conn: ConnId,
        s: &SessionId,
    ) -> Vec<(RequestId, Bytes)> {
        self.asks
            .forget(|c, session| c == conn && session == Some(s))
    }

    /// Make `waiting` wait for a connection to attach to its session; false (it does not wait)
    /// when [`super::WAITING_LIMIT`] requests already do.
    pub(in crate::proto) fn wait(&mut self, waiting: Waiting) -> bool {
        self.waiting.push(waiting)
    }

    /// When the oldest waiting request began to wait.
    pub(in crate::proto) fn oldest_waiting(&self) -> Option<u64> {
        self.waiting.oldest()
    }

    /// The requests that have waited since `before` or longer, taken out.
    pub(in crate::proto) fn expired(&mut self, before: u64) -> Vec<Waiting> {
        self.waiting.expired(before)
    }

    /// A line routed to each of `conns`: it goes out before the lines queued while it was
    /// routed (a settled request's notices, a turn's end told to the other connections).
    pub(in crate::proto) fn send_ahead(&mut self, conns: Vec<ConnId>, line: Bytes) {
        for conn in conns.into_iter().rev() {
            self.outgoing.push_front((conn, line.clone()));
        }
    }

    /// The next line to go out ahead of anything routed later (held or released lines, the
    /// notices of a settled request, prompt echoes).
    pub(in crate::proto) fn pop_outgoing(&mut self) -> Option<(ConnId, Bytes)> {
        self.outgoing.pop_front()
    }

    /// True when routing left something for the core (attachments, connections to end, failed
    /// joins, orphaned requests): never with one connection.
    pub(in crate::proto) fn unsettled(&self) -> bool {
        self.mode.several() && !self.unsettled.is_empty()
    }

    /// What routing left for the core, taken out.
    pub(in crate::proto) fn take_unsettled(&mut self) -> Unsettled {
        std::mem::take(&mut self.unsettled)
    }

    /// The join `sent` (a load or resume of a live session) is served from the journal: the
    /// session's lines are held for its connection until the answer, so the history comes
    /// first and every live line once after it.
    pub(in crate::proto) fn joins_live(&mut self, sent: &RequestId) {
        self.joins.joins_live(sent);
    }

    /// A client line as the core handles it: a later connection's request under an id of the
    /// proxy's (and a cancel naming one of its requests likewise), refused, or dropped.
    pub(in crate::proto) fn inbound(
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
            self.roster.declare(conn, ClientView::from_initialize(peek));
        }
        let creates = matches!(&peek.kind, Kind::Request { method, .. }
            if matches!(method.as_ref(), "session/new" | "session/fork"));
        let several = self.mode.several();
        match &peek.kind {
            // The first connection's ids pass as sent, unless one names another's request.
            Kind::Request { id, method }
                if conn != ConnId::FIRST || (several && self.forwarded.is_renumbered(id)) =>
            {
                let Some((sent, renumbered)) = self.forwarded.renumber(conn, id, line) else {
                    return Inbound::AsIs;
                };
                if creates {
                    self.forwarded.creates(sent.clone());
                }
                match self.enter_session(conn, method, &sent, peek, sessions, echo_prompts) {
                    Ok(prompter) => Inbound::Renumbered(renumbered, prompter),
                    Err(error) => Inbound::Refused(renumbered, sent, error),
                }
            }
            Kind::Notification { method } if method == "$/cancel_request" && several => {
                self.forwarded.renumber_cancel(conn, peek, line)
            }
            Kind::Response { id, is_error } if several => {
                let answered =
                    self.asks
                        .answered(conn, id, *is_error, peek, &self.roster, sessions);
                let Some(notices) = answered else {
                    return Inbound::Settled;
                };
                for (c, notice) in notices {
                    self.send_or_hold(c, notice);
                }
                Inbound::AsIs
            }
            Kind::Request { id, .. } if creates && several => {
                self.forwarded.creates(id.clone());
                Inbound::AsIs
            }
            _ => Inbound::AsIs,
        }
    }

    /// A host's request `sent` (renumbered) of `conn` in a session: a load, resume or
    /// `session/attach` begins a join, a prompt a turn (shown to the other attached connections
    /// when `echo_prompts`; the session and its new prompter returned, for the table to keep:
    /// the prompt the prompter replaces is told to [`Connections::prompt_replaced`]). `Err`
    /// with the error (JSON) the request is refused with: bad `session/attach` params, or a
    /// prompt [`Roster::prompt_refused`].
    fn enter_session(
        &mut self,
        conn: ConnId,
        method: &str,
        sent: &RequestId,
        peek: &Peek<'_>,
        sessions: &SessionTable,
        echo_prompts: bool,
    ) -> Result<Option<(SessionId, Prompter)>, String> {
        let Some(s) = peek.session.as_deref().map(SessionId::from) else {
            return Ok(None);
        };
        if !self.is_hosted() {
            return Ok(None);
        }
        match method {
            "session/load" | "session/resume" | "session/attach" => {
                let attach = match method {
                    "session/attach" => Some(Attach::parse(peek.params).map_err(|why| {
                        error_json(-32602, &format!("Invalid params: {why}"), None)
                    })?),
                    _ => None,
                };
                self.unsettled
                    .attachments
                    .push((s.clone(), conn, Attachment::Attach));
                let join = PendingJoin {
                    conn,
                    session: s,
                    live: false,
                    attach,
                };
                self.joins.begin(sent.clone(), join);
            }
            "session/prompt" => {
                if let Some(why) = self.roster.prompt_refused(conn, &s, sessions) {
                    return Err(error_json(-32000, why, Some(json!({"sessionId": &*s}))));
                }
                if echo_prompts {
                    let others = self.roster.others_attached(sessions, &s, conn);
                    for line in prompt_echo(&s, peek.params) {
                        for c in &others {
                            self.send_or_hold(*c, line.clone());
                        }
                    }
                }
                let prompter = Prompter {
                    conn,
                    sent: sent.clone(),
                    tell_end: echo_prompts,
                };
                self.forwarded.prompted(sent.clone(), s.clone());
                return Ok(Some((s, prompter)));
            }
            _ => {}
        }
        Ok(None)
    }

    /// The prompt sent to the agent as `sent` no longer runs its session's turn: another
    /// prompt of the session took its place ([`Connections::inbound`]).
    pub(in crate::proto) fn prompt_replaced(&mut self, sent: &RequestId) {
        self.forwarded.take_prompt(sent);
    }

    /// A line addressed to the asker of request `sent` (a load's replay): its connection.
    pub(in crate::proto) fn route_reply(&self, sent: &RequestId, line: Bytes) -> Route {
        if !self.mode.several() {
            return Route::One(ConnId::FIRST, line);
        }
        let conn = self.forwarded.conn_of(sent);
        match self.roster.is_live(conn) {
            true => Route::One(conn, line),
            false => Route::Dropped,
        }
    }

    /// Where a line the core sends to clients goes (see the module's text of [`super`]).
    pub(in crate::proto) fn route(&mut self, line: Bytes, sessions: &SessionTable) -> Route {
        if !self.mode.several() {
            // The one connection (the stdio proxy's editor, there before its first line).
            return Route::One(ConnId::FIRST, line);
        }
        let peek = envelope::peek(&line);
        match &peek.kind {
            Kind::Response { id, is_error } => self.route_response(id, *is_error, &line, sessions),
            // A child session's lines (a subagent's) go where its root's go.
            Kind::Request { id, method } => {
                let session = peek.session.as_deref().map(|s| sessions.owner(s));
                self.route_request(id, method, session, line.clone(), sessions)
            }
            Kind::Notification { .. } => {
                let Some(s) = peek.session.as_deref().map(|s| sessions.owner(s)) else {
                    return Route::Each(self.roster.live().to_vec(), line);
                };
                let attached = self.roster.attached_live(sessions, &s);
                if attached.is_empty() {
                    // Nobody is attached: a host journals it only; else it goes to everyone.
                    return match self.is_hosted() {
                        true => Route::Dropped,
                        false => Route::Each(self.roster.live().to_vec(), line),
                    };
                }
                self.each_or_hold(&attached, line)
            }
            Kind::OtherJson | Kind::Invalid => Route::Each(self.roster.live().to_vec(), line),
        }
    }

    /// An answer for a client: to the connection that asked, its own id restored. A prompt's
    /// answer ends its turn (told to the other attached connections); a join's attaches the
    /// connection: what was held for it, and what waits for someone to answer in the session,
    /// follow it.
    fn route_response(
        &mut self,
        id: &RequestId,
        is_error: bool,
        line: &Bytes,
        sessions: &SessionTable,
    ) -> Route {
        if self.forwarded.take_creating(id)
            && let Some(s) = created_session(line)
        {
            let conn = self.forwarded.conn_of(id);
            self.unsettled
                .attachments
                .push((s, conn, Attachment::Attach));
        }
        let Some((conn, own)) = self.forwarded.answered(id) else {
            // Not renumbered: the first connection's.
            return match self.roster.is_live(ConnId::FIRST) {
                true => Route::One(ConnId::FIRST, line.clone()),
                false => Route::Dropped,
            };
        };
        // A prompt's answer ends the turn of the connection that prompted it, if it still runs
        // the session's.
        if let Some(s) = self.forwarded.take_prompt(id)
            && let Some(prompter) =
                (sessions.get(&s).and_then(|x| x.prompter())).filter(|p| p.sent == *id)
        {
            if prompter.tell_end {
                let ended = turn_end_line(&s, prompter, line, &self.roster);
                for c in self.roster.others_attached(sessions, &s, prompter.conn) {
                    self.send_or_hold(c, ended.clone());
                }
            }
            let answered = Attachment::PromptAnswered(id.clone());
            self.unsettled
                .attachments
                .push((s, prompter.conn, answered));
        }
        let join = self.joins.answered(id);
        if !self.roster.is_live(conn) {
            return Route::Dropped;
        }
        let mut answer = rewrite::edit_line(line, |m| m.set("id", own.to_json()))
            .map_or_else(|| line.clone(), Bytes::from);
        if let Some(join) = join {
            match is_error {
                true => self.join_failed(&join),
                false => {
                    if let Some(edited) = join.attach_answer(&answer, &self.roster, sessions) {
                        answer = edited;
                    }
                    self.joined(&join);
                }
            }
        }
        Route::One(conn, answer)
    }

    /// A join failed: nothing held is sent, and the connection is not attached.
    fn join_failed(&mut self, join: &PendingJoin) {
        self.joins.drop_held(join.conn);
        self.unsettled
            .attachments
            .push((join.session.clone(), join.conn, Attachment::Detach));
        let orphaned = self
            .asks
            .forget(|c, s| c == join.conn && s == Some(&join.session));
        self.unsettled.orphaned.extend(orphaned);
    }

    /// Connection `join.conn` is attached to `join.session`: the lines held for it, then the
    /// requests waiting for someone to attach, then the permission requests others were asked
    /// and have not answered (unless it observes, or asked for no history).
    fn joined(&mut self, join: &PendingJoin) {
        let conn = join.conn;
        let s = &join.session;
        // The session is known now (a load brought it up): the connection is attached to it.
        self.unsettled
            .attachments
            .push((s.clone(), conn, Attachment::Attach));
        for line in self.joins.release(conn) {
            let still_asked = match envelope::peek(&line).kind {
                Kind::Request { id, .. } => self.asks.is_asked(&id),
                _ => true,
            };
            if still_asked {
                self.outgoing.push_back((conn, line));
            }
        }
        if let Some(attach) = join.attach {
            let observer = attach.observer;
            (self.unsettled.attachments).push((
                s.clone(),
                conn,
                Attachment::JoinDraft { observer },
            ));
        }
        if join.attach.is_some_and(|a| a.observer) {
            return;
        }
        for w in self.waiting.take_session(s) {
            let asked = Asked {
                conns: vec![conn],
                line: w.line.clone(),
                method: envelope::peek(&w.line)
                    .method()
                    .unwrap_or_default()
                    .to_string(),
                session: Some(w.session),
            };
            self.asks.ask(w.id, asked);
            self.outgoing.push_back((conn, w.line));
        }
        if join
            .attach
            .is_some_and(|a| a.history == HistoryPolicy::None)
        {
            return;
        }
        for line in self.asks.ask_joiner(conn, s) {
            self.outgoing.push_back((conn, line));
        }
    }

    /// An agent request for clients. A permission request goes to every controller attached
    /// to its session (held for those joining); any other to the connection
    /// [`Asks::answerer`] chooses, else the first attached (else the first connection).
    fn route_request(
        &mut self,
        id: &RequestId,
        method: &str,
        session: Option<SessionId>,
        line: Bytes,
        sessions: &SessionTable,
    ) -> Route {
        let controllers: Vec<ConnId> = session
            .as_deref()
            .map_or_else(Vec::new, |s| self.roster.controllers(sessions, s));
        if self.is_hosted()
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
            let route = self.each_or_hold(&controllers, line.clone());
            self.asks.ask(id.clone(), asked(controllers));
            return route;
        }
        let turn = session
            .as_deref()
            .and_then(|s| sessions.get(s)?.prompter())
            .map(|p| p.conn);
        let ready: Vec<ConnId> = controllers
            .iter()
            .copied()
            .filter(|c| !self.joins.holds_for(*c))
            .collect();
        let chosen = match self
            .asks
            .answerer(method, turn, &line, &ready, &self.roster)
        {
            Ok(chosen) => chosen,
            Err(why) => return Route::Unanswerable(id.clone(), line, why),
        };
        match chosen
            .or_else(|| controllers.first().copied())
            .or_else(|| self.roster.live().first().copied())
        {
            Some(c) => {
                self.asks.ask(id.clone(), asked(vec![c]));
                match self.joins.holds_for(c) {
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

    /// `line` to each of `conns`: held for those joining a session live, sent to the others.
    fn each_or_hold(&mut self, conns: &[ConnId], line: Bytes) -> Route {
        let mut now = Vec::with_capacity(conns.len());
        for c in conns {
            match self.joins.holds_for(*c) {
                true => self.send_or_hold(*c, line.clone()),
                false => now.push(*c),
            }
        }
        Route::Each(now, line)
    }

    /// Send `line` to `conn` now, or hold it while the connection joins the line's session
    /// live (the line comes after the history it is being sent); a connection that falls too
    /// far behind is to be ended.
    fn send_or_hold(&mut self, conn: ConnId, line: Bytes) {
        if !self.joins.holds_for(conn) {
            self.outgoing.push_back((conn, line));
        } else if !self.joins.hold(conn, &line) {
            self.unsettled.to_end.push(conn);
        }
    }
}
