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
//!
//! Here: the connections coming, ending and leaving sessions, and what routing leaves for the
//! core. The parts, each in its own file: `state` (what is kept of the connections, and the
//! sending or holding of lines every part uses), `inbound` (client lines), `answers` (clients'
//! answers to agent requests: permission requests settled), `routing` (lines for clients),
//! `joins` (a host's connection joining a session), `waiting` (agent requests waiting for
//! someone to attach), `attach` (what a `session/attach` asks for), `client_view` (what a
//! connection declared in its `initialize`) and `lines` (the proxy's notification lines).

mod answers;
mod attach;
mod client_view;
mod inbound;
mod joins;
mod lines;
mod routing;
mod state;
mod waiting;

use bytes::Bytes;

use super::vocab::{ConnId, SessionId};
use crate::wire::envelope::RequestId;
pub(super) use attach::{Attach, HistoryPolicy};
pub(super) use inbound::Inbound;
pub(super) use routing::Route;
pub(super) use state::Connections;
#[cfg(test)]
pub(super) use waiting::WAITING_LIMIT;
use waiting::Waiting;

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

    /// Connection `conn` leaves session `s` (`session/detach`, or a `session/close` while
    /// others stay attached): what it was asked about the session and nobody else was.
    pub(super) fn detach(&mut self, conn: ConnId, s: &SessionId) -> Vec<(RequestId, Bytes)> {
        self.observers.remove(&(conn, s.clone()));
        self.drafted.remove(&(conn, s.clone()));
        self.forget_asked(|c, session| c == conn && session == Some(s))
    }

    /// Make `waiting` wait for a connection to attach to its session; false (it does not wait)
    /// when [`waiting::WAITING_LIMIT`] requests already do.
    pub(super) fn wait(&mut self, waiting: Waiting) -> bool {
        self.waiting.push(waiting)
    }

    /// When the oldest waiting request began to wait.
    pub(super) fn oldest_waiting(&self) -> Option<u64> {
        self.waiting.oldest()
    }

    /// The requests that have waited since `before` or longer, taken out.
    pub(super) fn expired(&mut self, before: u64) -> Vec<Waiting> {
        self.waiting.expired(before)
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

    /// The join `sent` (a load or resume of a live session) is served from the journal: the
    /// session's lines are held for its connection until the answer, so the history comes
    /// first and every live line once after it.
    pub(super) fn joins_live(&mut self, sent: &RequestId) {
        if let Some(join) = self.joining.get_mut(sent) {
            join.live = true;
        }
    }
}
