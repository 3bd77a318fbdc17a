//! The proxy state machine: [`Proxy`] takes every input, hands each line to the component
//! that owns it, and lets every effect out through [`Proxy::poll_action`].

use bytes::Bytes;

use super::clients;
use super::connection::{Attachment, Connections, Inbound, Route, Unsettled};
use super::context::Cx;
use super::edits::Relaying;
use super::effects::Queued;
use super::fork::Forks;
use super::listing::Lists;
use super::load_state::Progress;
use super::loading::Loads;
use super::pending::Resolved;
use super::restart::{self, Handshake};
use super::reused_ids::ReusedIds;
use super::route::{self, Arrival, ClientRoute, Owners, Taken};
use super::sessions::SessionTable;
use super::stalls;
use super::stderr::StderrLines;
use super::update_facts;
use super::vocab::{
    Action, Config, ConnId, HistoryChunk, Line, ListedSession, Peer, SessionId, Stamp, Target,
};
use crate::journal::Event;
use crate::wire::Side;
use crate::wire::envelope::{self, Kind, Peek};

/// The proxy state machine: one agent, its client connections, their sessions.
///
/// Its methods are of four kinds, as quinn's `Connection`'s are:
/// - **inputs** (`handle_*`): a whole line from a peer ([`Proxy::handle_line`]), a peer's end
///   ([`Proxy::handle_eof`], [`Proxy::handle_clients_gone`]), the agent's stderr, what the
///   shell observed ([`Proxy::handle_event`], [`Proxy::handle_agent_restart`]), and the answers
///   to what it asked of the journals: history, sessions, forks, free IDs
///   ([`Proxy::handle_history`], [`Proxy::handle_sessions`], [`Proxy::handle_forked`],
///   [`Proxy::handle_free_id`], [`Proxy::handle_journals_changed`], [`Proxy::handle_facts_due`]);
/// - **outputs**: [`Proxy::poll_action`], drained after every input, the only way out;
/// - **timers**: [`Proxy::poll_timeout`] says when [`Proxy::handle_tick`] is due;
/// - **queries**: [`Proxy::reads_client`] (backpressure), [`Proxy::can_restart`],
///   [`Proxy::agent_answered_initialize`], [`Proxy::wants_list_changes`],
///   [`Proxy::next_seq`].
///
/// A line is handled once by the component that owns what it names; each is called with
/// [`Cx`] (`context.rs`: the output, the session and pending tables, the time) and its own
/// state: client connections and routing (`connection/`, `clients.rs`), loads and restores
/// (`loading.rs`, `load_state.rs`, `native.rs`), lists (`listing.rs`), forks (`fork.rs`), the
/// handshake a restarted agent is told again (`restart.rs`), stalls (`stalls.rs`), held lines
/// (`holding.rs`), the journal each record goes to (`attribution.rs`), the edits on the way
/// (`edits.rs`), what the catalog learns (`update_facts.rs`, `turn_facts.rs`), session IDs used again
/// (`reused_ids.rs`).
#[derive(Debug)]
pub struct Proxy {
    /// What every component shares: the output, the pending table, the time.
    cx: Cx,
    /// Every session of the connection: the route resolves a line's session in it, and hands
    /// the table (or the session) to the component that owns the line.
    sessions: SessionTable,
    /// The client connections, and the ids of their requests.
    connections: Connections,
    /// Agent stderr not yet journaled (journaled by whole lines).
    stderr: StderrLines,
    /// Loads served from the journal, restores and forks being brought up.
    loads: Loads,
    /// `session/list`s in progress and the working directories watched for changes.
    lists: Lists,
    /// The handshake a restarted agent is told again, and where the current agent's stands.
    handshake: Handshake,
    /// Session IDs the agent uses again, and what the journals said of them.
    reused: ReusedIds,
    /// Forks waiting for their journal copy.
    forks: Forks,
    /// The agent's output ended: client requests are answered by the proxy from now on.
    agent_ended: bool,
    /// The client closed its stream: it expects no more answers.
    client_ended: bool,
}

impl Proxy {
    /// A fresh core for one connection.
    pub fn new(config: Config) -> Proxy {
        Proxy {
            cx: Cx::new(config),
            sessions: SessionTable::default(),
            connections: match config.hosted {
                true => Connections::hosted(),
                false => Connections::editor(),
            },
            stderr: StderrLines::default(),
            loads: Loads::default(),
            lists: Lists::default(),
            handshake: Handshake::default(),
            reused: ReusedIds::default(),
            forks: Forks::default(),
            agent_ended: false,
            client_ended: false,
        }
    }

    /// The next action to apply, in order.
    #[must_use]
    pub fn poll_action(&mut self) -> Option<Action> {
        loop {
            if let Some((conn, line)) = self.connections.pop_outgoing() {
                return Some(Action::Forward {
                    to: Peer::Client(conn),
                    line,
                });
            }
            if self.connections.unsettled() {
                self.settle();
            }
            let routed = match self.cx.fx().pop()? {
                Queued::Action(action @ (Action::FetchSessions { .. } | Action::Catalog(_))) => {
                    let facts = self.sessions.take_facts();
                    return Some(update_facts::facts_before(facts, self.cx.fx(), action));
                }
                Queued::Action(action) => return Some(action),
                Queued::ToClients(line) => self.connections.route(line, &self.sessions),
                Queued::ToAsker(id, line) => self.connections.route_reply(&id, line),
            };
            match routed {
                Route::One(conn, line) => {
                    let to = Peer::Client(conn);
                    return Some(Action::Forward { to, line });
                }
                routed => {
                    if let Some(asked) = clients::deliver(&self.cx, &mut self.connections, routed) {
                        let at = self.cx.now();
                        route::send_asked(&mut self.cx, &mut self.sessions, at, [asked]);
                    }
                }
            }
        }
    }

    /// What routing left unsettled: its attachments (a session created for a connection, a
    /// connection joining one, a join that failed, a prompt's turn that ended) applied in
    /// order to the sessions the table has by now, then the rest ([`clients::settle`]).
    fn settle(&mut self) {
        let Unsettled {
            attachments,
            to_end,
            orphaned,
        } = self.connections.take_unsettled();
        for (s, conn, attachment) in attachments {
            if let Some(session) = self.sessions.get_mut(&s) {
                match attachment {
                    Attachment::Attach => session.attach(conn),
                    Attachment::Detach => session.detach(conn),
                    Attachment::JoinDraft { observer } => session.join_draft(conn, observer),
                    Attachment::PromptAnswered(sent) => {
                        session.end_prompter(&sent);
                    }
                }
            }
        }
        let (cx, sessions, connections) = (&mut self.cx, &mut self.sessions, &self.connections);
        let asked = clients::settle(cx, sessions, connections, to_end, orphaned);
        let at = cx.now();
        route::send_asked(cx, sessions, at, asked);
    }

    /// The session table, for tests of the core.
    #[cfg(test)]
    pub(super) fn sessions(&self) -> &super::sessions::SessionTable {
        &self.sessions
    }

    /// The agent lines held while loads bring their sessions up, for tests of the core.
    #[cfg(test)]
    pub(super) fn held(&self) -> &super::held::HeldWhileStarting {
        self.sessions.held()
    }

    /// Requests still awaiting a response (both directions), for tests of the core.
    #[cfg(test)]
    pub(super) fn pending_requests(&self) -> usize {
        self.cx.pending().len()
    }

    /// Lookups of the pending table by key so far, for tests of the core.
    #[cfg(test)]
    pub(super) fn pending_lookups(&self) -> usize {
        self.cx.pending().lookups()
    }

    /// Time to write what the catalog learned with the turns (about once a second, and at the
    /// end): it leaves as [`Action::TurnFacts`].
    pub fn handle_facts_due(&mut self) {
        let facts = self.sessions.take_facts();
        if !facts.is_empty() {
            self.cx.fx().push(Action::TurnFacts(facts));
        }
    }

    /// Sequence number of the next record.
    pub fn next_seq(&self) -> u64 {
        self.cx.next_seq()
    }

    /// A whole line from `from` (terminator included; a final line at EOF may lack it).
    pub fn handle_line(&mut self, at: Stamp, from: Peer, line: Bytes) {
        let peek = envelope::peek(&line);
        let Peer::Client(conn) = from else {
            self.dispatch(at, Side::Agent, &peek, &line, None);
            return;
        };
        self.connections.arrive(conn);
        // The session a request or notification names, looked up once: its membership, the
        // route and the relay reach it by its slot.
        let slot = match (peek.session.as_deref(), peek.method()) {
            (Some(s), Some(_)) => self.sessions.slot(s),
            _ => None,
        };
        if let Some(slot) = slot {
            self.sessions[slot].attach(conn);
        }
        let echo_prompts = !self.cx.peers().agent.v2;
        match self
            .connections
            .inbound(conn, &peek, &line, &self.sessions, echo_prompts)
        {
            Inbound::AsIs => {
                let arrival = Arrival { later: false, slot };
                self.dispatch(at, Side::Client, &peek, &line, Some(arrival));
            }
            Inbound::Renumbered(renumbered, prompter) => {
                // A host's prompt: the connection prompts the session's turn (the session made
                // if the table has none), in place of the prompt before.
                if let Some((s, prompter)) = prompter
                    && let Some(before) = self.sessions.entry(&s).set_prompter(prompter)
                {
                    self.connections.prompt_replaced(&before.sent);
                }
                // A request of a later connection, under the id it is renumbered to (its
                // answer gets the connection's own id back when routed).
                let peek = envelope::peek(&renumbered);
                let later = conn != ConnId::FIRST;
                // A load or attach replays what this connection declared it takes.
                self.cx.peers_mut().joining(self.connections.support(conn));
                let arrival = Arrival { later, slot };
                self.dispatch(at, Side::Client, &peek, &renumbered, Some(arrival));
                self.cx.peers_mut().joined();
            }
            Inbound::Refused(renumbered, sent, error) => {
                clients::refused(&mut self.cx, at, &renumbered, &sent, &error);
            }
            Inbound::Settled => {
                // Another connection answered first; this answer has nobody to go to.
                tracing::debug!("dropped a late answer of connection {}", conn.0);
            }
        }
    }

    /// The journals' answer to [`Action::FindFreeId`] `ask`: the first of the candidate IDs they
    /// do not hold. The agent's answer that named the session goes on under that ID (mapped
    /// to the agent's when it is another), then the agent lines that waited.
    pub fn handle_free_id(&mut self, at: Stamp, ask: u64, free: SessionId) {
        let lines = self.reused.answered(ask, Some(free));
        for line in lines.unwrap_or_default() {
            self.handle_line(at, Peer::Agent, line);
        }
    }

    /// The context, the session table, and the components a line may be handed to.
    fn owners(&mut self) -> (&mut Cx, &mut SessionTable, Owners<'_>) {
        let owners = Owners {
            handshake: &mut self.handshake,
            reused: &mut self.reused,
            loads: &mut self.loads,
            lists: &mut self.lists,
            connections: &mut self.connections,
            forks: &mut self.forks,
        };
        (&mut self.cx, &mut self.sessions, owners)
    }

    /// A whole line from one side, as the core handles it, described by `peek` (a client
    /// line's `arrival`: whether a later connection sent it, its session's slot as it was
    /// looked up then): routed once ([`route`]) to the component that owns it, which takes it
    /// or gives it back to be relayed ([`route::relay`], with what the route resolved:
    /// [`Resolved`]). A line of a session whose prompt the stall watch follows is activity
    /// ([`stalls::active_session`]); with no watch running (no `--stall-timeout`, or no prompt in
    /// flight) nothing is looked up.
    fn dispatch(
        &mut self,
        at: Stamp,
        from: Side,
        peek: &Peek<'_>,
        line: &Bytes,
        arrival: Option<Arrival>,
    ) {
        self.cx.arrived(at);
        let msg = Line {
            at,
            peek,
            bytes: line,
        };
        let (taken, resolved) = match from {
            Side::Client => match self.take_client(msg, arrival) {
                Some(taken) => taken,
                None => return,
            },
            Side::Agent => self.take_agent(msg),
        };
        let relay = match taken {
            Taken::Relay => true,
            Taken::Done => false,
            Taken::Load(progress) => {
                self.progressed(at, progress);
                false
            }
            Taken::Again { from, lines } => {
                self.dispatch_all(at, from, lines);
                false
            }
        };
        if relay {
            let mut with = Relaying {
                handshake: &mut self.handshake,
                lists: &self.lists,
                reused: &mut self.reused,
                hosted: self.connections.is_hosted(),
            };
            let (cx, sessions) = (&mut self.cx, &mut self.sessions);
            route::relay(cx, sessions, &mut with, from, msg, resolved);
        }
        if from == Side::Agent && matches!(peek.kind, Kind::Response { .. }) {
            // An answer may have brought up a session whose early lines wait unclaimed (or
            // followed a client line that did): they go where its later lines go (its
            // session's held lines while a load brings it up, else out), ahead of them.
            if self.sessions.holds_unclaimed() {
                let lines = self.sessions.take_unclaimed();
                self.dispatch_all(at, Side::Agent, lines);
            }
        } else if relay && from == Side::Client && self.agent_ended {
            // Nobody will answer it: say so at once.
            self.drop_agent(at, restart::agent_exited);
            self.handshake.refuse_held(&mut self.cx, &self.sessions, at);
        }
    }

    /// A client line (`msg`, as it `arrival`ed), routed once ([`route::client`]) and handed to
    /// its owner: what the owner did with it, and what the route resolved of it for the relay.
    /// `None`: it waits for the restarted agent.
    fn take_client(
        &mut self,
        msg: Line<'_>,
        arrival: Option<Arrival>,
    ) -> Option<(Taken, Resolved)> {
        let (cx, sessions, owners) = self.owners();
        let (owner, slot) = route::client(cx, sessions, &owners, msg.peek, arrival);
        if owner == ClientRoute::AwaitAgent {
            if let Some(reinit) = &mut owners.handshake.reinit {
                // Messages wait for the restarted agent.
                reinit.hold(msg.at, msg.peek, msg.bytes.clone());
            }
            return None;
        }
        stall_activity(cx, sessions, Side::Client, msg);
        let taken = route::take_client(cx, sessions, owners, owner, msg, slot);
        let resolved = Resolved {
            session: slot,
            ..Resolved::default()
        };
        Some((taken, resolved))
    }

    /// An agent line (`msg`), routed once ([`route::agent`]) and handed to its owner: what the
    /// owner did with it, and what the route resolved of it (its session's slot, an answer's
    /// pending entry) for the relay.
    fn take_agent(&mut self, msg: Line<'_>) -> (Taken, Resolved) {
        let (cx, sessions, owners) = self.owners();
        let (owner, resolved) = route::agent(cx, sessions, &owners, msg.peek);
        stall_activity(cx, sessions, Side::Agent, msg);
        let taken = route::take_agent(cx, sessions, owners, owner, msg, resolved.session);
        (taken, resolved)
    }

    /// A peer closed its stream. When the agent's ends while the client is still there, every
    /// client request still waiting for an answer (and any the client sends later) is answered
    /// with error -32603 ("the agent exited"), journaled as a line the proxy made. After the
    /// client closed its stream (a normal shutdown) nothing is answered.
    /// A client connection that ends while others remain is detached from its sessions (they
    /// live on); the last one ending is the client's end.
    pub fn handle_eof(&mut self, at: Stamp, from: Peer) {
        if let Peer::Client(conn) = from {
            self.sessions.detach_everywhere(conn);
        }
        if let Peer::Client(conn) = from
            && let Some(asked) = clients::ended(&self.sessions, &mut self.connections, conn)
        {
            // Others remain (or it is a host's): what they left unanswered goes on.
            route::send_asked(&mut self.cx, &mut self.sessions, at, asked);
            return;
        }
        let from = from.side();
        if from == Side::Agent {
            let waited = self.reused.give_up();
            for line in waited.unwrap_or_default() {
                self.handle_line(at, Peer::Agent, line);
            }
            self.stderr.flush(self.cx.fx(), at, true);
            self.agent_ended = true;
            if !self.client_ended {
                // Answer every client request still waiting on the agent, whether the proxy
                // was serving it (loads, merged lists) or the agent was, in arrival order, then
                // those held for a restarted agent that never answered `initialize` (what else
                // was held is journaled and dropped).
                self.drop_agent(at, restart::agent_exited);
                self.handshake.refuse_held(&mut self.cx, &self.sessions, at);
            }
            self.cx.fx().event(at, Target::Run, Event::Eof { from });
        } else {
            self.handle_clients_gone(at);
        }
    }

    /// No client can come any more: the editor's stream ended, or a host stops. The agent's
    /// stdin is closed (a normal shutdown).
    pub fn handle_clients_gone(&mut self, at: Stamp) {
        let held = self.handshake.end_reinit();
        self.dispatch_all(at, Side::Client, held);
        self.client_ended = true;
        let from = Side::Client;
        self.cx.fx().event(at, Target::Run, Event::Eof { from });
        self.cx.fx().push(Action::CloseAgentStdin);
    }

    /// True once the current agent answered `initialize` successfully.
    pub fn agent_answered_initialize(&self) -> bool {
        self.handshake.agent_initialized
    }

    /// A chunk of the agent's stderr. It is journaled by whole lines (a line split across
    /// writes stays one record, so redaction sees it whole); a partial line is held until its
    /// newline, 64 KiB, or the agent's end.
    pub fn handle_stderr(&mut self, at: Stamp, chunk: Bytes) {
        self.stderr.push(self.cx.fx(), at, &chunk);
    }

    /// Something the shell observed, journaled with the connection.
    pub fn handle_event(&mut self, at: Stamp, event: Event) {
        self.cx.fx().event(at, Target::Run, event);
    }

    /// A chunk of a session's history, answering [`Action::FetchHistory`]: handed to its load,
    /// with the load's session; the session tree goes on with the children the history's end
    /// announced.
    pub fn handle_history(&mut self, at: Stamp, load: u64, chunk: HistoryChunk) {
        let session = self.loads.session(load);
        if let (Some(_), HistoryChunk::End(summary)) = (&session, &chunk) {
            for (child, parent) in &summary.children {
                (self.sessions).announce_child(&SessionId::from(parent.as_str()), child);
            }
        }
        let session = session.map(|s| self.sessions.scoped(s));
        let progress = self.loads.history(&mut self.cx, session, at, load, chunk);
        self.progressed(at, progress);
    }

    /// After a step of a load: once it ended, send on (or answer) the client lines that waited
    /// for a restore, then forward the agent lines held by sessions no load brings up any more,
    /// through the normal path.
    fn progressed(&mut self, at: Stamp, progress: Progress) {
        match progress {
            Progress::Going => return,
            Progress::Done => {}
            Progress::Restored(lines) => self.dispatch_all(at, Side::Client, lines),
            Progress::Unrestored { lines, error } => {
                for line in lines {
                    clients::refuse(&mut self.cx, &self.sessions, at, &line, &error);
                }
            }
        }
        let lines = self.sessions.release_held();
        self.dispatch_all(at, Side::Agent, lines);
    }

    /// True when the agent could be restarted should it die now: the proxy is not a pure
    /// recorder (`--load off`), the current agent answered `initialize`, and the client is
    /// connected.
    pub fn can_restart(&self) -> bool {
        self.handshake.can_restart(self.cx.config()) && !self.client_ended
    }

    /// False while the client lines held for the agent (a restarted agent being initialized,
    /// lost sessions being restored) reach [`Config::held_limit`] bytes: the shell then stops
    /// reading the client until they have gone on, as a full pipe would.
    pub fn reads_client(&self) -> bool {
        self.handshake.held_bytes() + self.loads.held_bytes() < self.cx.config().held_limit
    }

    /// When the core next needs [`Proxy::handle_tick`] (monotonic microseconds, as in
    /// [`Stamp::mono_us`]): a restarted agent's `initialize` running out of time, a request
    /// held for it waiting its longest, a host's client to be told it is unreachable, a prompt
    /// stalling (`--stall-timeout`), an agent request waiting for a client to attach running
    /// out of time, or a `session/list_changed` watch ending. `None`: no timer runs.
    pub fn poll_timeout(&self) -> Option<u64> {
        let config = self.cx.config();
        let waiting = self.connections.oldest_waiting();
        [
            self.handshake.next_timer(config),
            stalls::next_check(&self.cx, &self.sessions),
            waiting.map(|since| since.saturating_add(config.unattended_timeout_us)),
            self.lists.watch_end(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Time passed: with `--stall-timeout`, a prompt the agent has been silent on for that long
    /// is cancelled, and if the agent stays silent for the grace period after, it is restarted
    /// ([`Action::RestartAgent`]); so is a restarted agent that does not answer `initialize` in
    /// time; agent requests nobody attached to answer in time are answered; list watches over
    /// end. Call when [`Proxy::poll_timeout`] says (calling more often does no harm).
    pub fn handle_tick(&mut self, at: Stamp) {
        self.cx.passed(at.mono_us);
        self.handshake.check(&mut self.cx, &self.sessions, at);
        let asked = clients::expire_waiting(&self.cx, &mut self.connections, at);
        route::send_asked(&mut self.cx, &mut self.sessions, at, asked);
        self.lists.end_watches(at.mono_us);
        if self.sessions.prompting() {
            let stalled = stalls::stalled(&self.cx, self.sessions.watches_mut(), at);
            stalls::act(&mut self.cx, &self.sessions, at, stalled);
        }
    }

    /// The agent died (exit `code`) while the client was connected, and the shell started it
    /// again (for a host: the connection dropped, and the bridge connects again): forwards go
    /// to the new agent from now on. Every client request still waiting is answered with an
    /// error that says what happened (a prompt is never retried: tools may have run);
    /// requests of the dead agent the client may still answer are journaled and dropped when
    /// it does; every live session is lost, restored on its next request; the client's
    /// `initialize` (and `authenticate`) go to the new agent, and client lines wait until it
    /// has answered (those that waited for an agent that died before it answered wait on for
    /// this one, each request at most `--init-timeout` in all). The client is told of a
    /// restarted process at once, of a host when it has been unreachable for a few seconds
    /// (on a [`Proxy::handle_tick`]).
    pub fn handle_agent_restart(&mut self, at: Stamp, code: i32) {
        let waited = self.reused.give_up();
        for line in waited.unwrap_or_default() {
            self.handle_line(at, Peer::Agent, line);
        }
        self.stderr.flush(self.cx.fx(), at, true);
        let lost = self.sessions.lose_live(self.handshake.count_restart());
        let waiting = self.handshake.agent_lost(&mut self.cx, &lost, at, code);
        self.drop_agent(at, restart::lost_error(self.cx.config().remote));
        self.handshake.restart(&mut self.cx, at, waiting);
    }

    /// The agent is gone: every client request still waiting on it is answered with
    /// `error(method)` ([`restart::drop_agent`]), the sessions it was busy in are told they
    /// are not ([`restart::turns_ended`]); the agent lines held for sessions no load brings up
    /// any more go out.
    fn drop_agent(&mut self, at: Stamp, error: fn(&str) -> String) {
        for op in self.loads.ops() {
            let session = self.loads.session(op).map(|s| self.sessions.scoped(s));
            let progress = self.loads.agent_gone(&mut self.cx, session, at, op, error);
            if let Progress::Unrestored { lines, error } = progress {
                for line in lines {
                    clients::refuse(&mut self.cx, &self.sessions, at, &line, &error);
                }
            }
        }
        restart::drop_agent(&mut self.cx, &self.sessions, &mut self.lists, at, error);
        let busy = self.sessions.agent_gone();
        restart::turns_ended(&mut self.cx, at, &busy, error);
        self.handshake.auth_pending = None;
        self.progressed(at, Progress::Done);
    }

    /// Handle lines from one side again, in order (held and restored lines: their sessions
    /// are looked up as they are needed).
    fn dispatch_all(&mut self, at: Stamp, from: Side, lines: Vec<Bytes>) {
        for line in lines {
            self.dispatch(at, from, &envelope::peek(&line), &line, None);
        }
    }

    /// True while the client wants `session/list_changed` for some working directory (it
    /// declared `session.listChanged` and listed one in the last 10 minutes: a watch's end is a
    /// [`Proxy::poll_timeout`], its tick ends it): the shell then watches the journals and calls
    /// [`Proxy::handle_journals_changed`].
    pub fn wants_list_changes(&self) -> bool {
        self.lists.watching()
    }

    /// Sessions of these working directories changed in the journals (this proxy or another
    /// started, updated or ended one): tell the client, for each it watches.
    pub fn handle_journals_changed(&mut self, at: Stamp, cwds: &[String]) {
        self.cx.passed(at.mono_us);
        self.lists.journals_changed(&mut self.cx, at, cwds);
    }

    /// The journals' sessions, answering [`Action::FetchSessions`].
    pub fn handle_sessions(&mut self, at: Stamp, request: u64, sessions: Vec<ListedSession>) {
        let hosted = self.connections.is_hosted();
        if let Some(line) = self.lists.listed(
            &mut self.cx,
            &mut self.sessions,
            hosted,
            at,
            request,
            sessions,
        ) {
            route::forward_as_agent(&mut self.cx, &mut self.sessions, at, line);
        }
    }

    /// The answer to [`Action::ForkJournal`]: the fork is in the journal (bring it up on the
    /// agent and answer), or it could not be made (`error`: answer that).
    pub fn handle_forked(&mut self, at: Stamp, op: u64, outcome: Result<(), String>) {
        self.forks
            .forked(&mut self.cx, &mut self.loads, at, op, outcome);
    }
}

/// A line (`msg`, from `from`) of a session with a prompt in flight resets its watch
/// ([`stalls::active_session`]); with no watch running (no `--stall-timeout`, or no prompt in
/// flight) nothing is looked up.
fn stall_activity(cx: &Cx, sessions: &mut SessionTable, from: Side, msg: Line<'_>) {
    if !sessions.prompting() {
        return;
    }
    let active = stalls::active_session(cx, sessions, from, msg.peek);
    if let Some(session) = active.and_then(|s| sessions.get_mut(&s)) {
        session.prompt_active(msg.at.mono_us);
    }
}
