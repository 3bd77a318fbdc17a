//! What the core keeps of its client connections ([`Connections`] and the records in it: the
//! agent requests asked of connections, the turns running, the joins under way, the lines held
//! for joining connections), and what every direction of routing uses: sending a line to a
//! connection or holding it while the connection joins a session, the live connections attached
//! to a session, and who sent a request or runs a turn.

use std::collections::VecDeque;

use bytes::Bytes;

use super::super::held::HeldLines;
use super::super::sessions::SessionTable;
use super::super::vocab::{ConnId, HashMap, HashSet, SessionId};
use super::attach::Attach;
use super::client_view::ClientView;
use super::waiting::Waitlist;
use crate::wire::envelope::RequestId;

/// The connections the core has seen and the ids it renumbered for them. Until a second one
/// comes, the first is taken to be there from the start (the stdio proxy's editor).
#[derive(Debug, Default)]
pub(in crate::proto) struct Connections {
    /// Connections that came and have not ended, in the order they came.
    pub(super) live: Vec<ConnId>,
    /// A connection other than the first came (routing reads the lines from then on).
    pub(super) several: bool,
    /// Sent id → the connection that sent the request, and its own id.
    pub(super) renumbered: HashMap<RequestId, (ConnId, RequestId)>,
    /// The same, the other way (for `$/cancel_request`).
    pub(super) sent_as: HashMap<(ConnId, RequestId), RequestId>,
    /// Agent requests sent to connections and not answered yet.
    pub(super) asked: HashMap<RequestId, Asked>,
    /// Permission requests lately settled by one connection: the others' answers are dropped.
    pub(super) settled: VecDeque<RequestId>,
    /// What each connection declared in its `initialize`.
    pub(super) views: HashMap<ConnId, ClientView>,
    /// Connections attached to a session as observers (`session/attach`, role `observer`).
    pub(super) observers: HashSet<(ConnId, SessionId)>,
    /// Connections attached by `session/attach`: they take the draft's own updates.
    pub(super) drafted: HashSet<(ConnId, SessionId)>,
    /// The prompts of running turns, as the agent got them, and their sessions (the turns are
    /// the sessions': [`super::super::prompt::Turn`]).
    pub(super) prompts: HashMap<RequestId, SessionId>,
    /// Terminals a client created for the agent, and that client.
    pub(super) terminals: HashMap<String, ConnId>,
    /// A host: no session line goes to a connection that is not attached to it.
    pub(super) hosted: bool,
    /// Agent requests for sessions nobody is attached to, oldest first (a host's).
    pub(super) waiting: Waitlist,
    /// A host's load, resume or attach requests (as sent) not answered yet.
    pub(super) joining: HashMap<RequestId, Join>,
    /// A session's lines held for connections joining it while it is live, until their answer.
    pub(super) held: HashMap<ConnId, HeldLines>,
    /// Lines for connections that go out before any other line the core routes next.
    pub(super) outgoing: VecDeque<(ConnId, Bytes)>,
    /// Connections the core must end (they fell too far behind while joining a session).
    pub(super) to_end: Vec<ConnId>,
    /// Attachments that ended without the connection ending (a failed join, a detach).
    pub(super) detached: Vec<(ConnId, SessionId)>,
    /// Agent requests that lost the last connection they were asked of (a failed join).
    pub(super) orphaned: Vec<(RequestId, Bytes)>,
    /// Requests (as the agent sees their ids) whose answer creates a session for the
    /// connection that sent them (`session/new`, `session/fork`).
    pub(super) creating: HashSet<RequestId>,
    /// Sessions to attach connections to: created for them (`session/new`, `session/fork`) or
    /// joined by them.
    pub(super) created: Vec<(SessionId, ConnId)>,
}

/// An agent request sent (or held) for connections, and not answered yet.
#[derive(Debug)]
pub(super) struct Asked {
    /// The connections asked. A permission request asks every attached controller; any other
    /// request one connection.
    pub(super) conns: Vec<ConnId>,
    pub(super) line: Bytes,
    pub(super) method: String,
    pub(super) session: Option<SessionId>,
}

/// A connection joining a session: a load, resume or `session/attach` not answered yet.
#[derive(Debug)]
pub(super) struct Join {
    pub(super) conn: ConnId,
    pub(super) session: SessionId,
    /// The session is live and the core serves the join from the journal: the session's lines
    /// are held for the connection until the answer (see [`Connections::joins_live`]).
    pub(super) live: bool,
    /// A `session/attach`: its role and history policy.
    pub(super) attach: Option<Attach>,
}

/// The most a joining connection has held for it; past it the connection is ended.
const HOLD_LIMIT: usize = 16 << 20;

impl Connections {
    /// Take the connections matching `gone` (a connection, with the session asked about) out
    /// of the agent requests they were asked: those asked of nobody else, with their lines.
    pub(super) fn forget_asked(
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

    /// Send `line` to `conn` now, or hold it while the connection joins the line's session
    /// live (the line comes after the history it is being sent).
    pub(super) fn send_or_hold(&mut self, conn: ConnId, line: Bytes) {
        if !self.holds_for(conn) {
            self.outgoing.push_back((conn, line));
            return;
        }
        let held = self.held.entry(conn).or_default();
        if !held.hold(&line, HOLD_LIMIT) {
            tracing::warn!(
                "client connection {} fell {} bytes behind while joining a session: ending it",
                conn.0,
                held.bytes() + line.len()
            );
            self.held.remove(&conn);
            self.to_end.push(conn);
        }
    }

    /// True while `conn` joins a live session (its lines are held).
    pub(super) fn holds_for(&self, conn: ConnId) -> bool {
        self.joining.values().any(|j| j.live && j.conn == conn)
    }

    /// The live connections attached to session `s`.
    pub(super) fn attached_live(&self, sessions: &SessionTable, s: &str) -> Vec<ConnId> {
        sessions
            .attached(s)
            .iter()
            .copied()
            .filter(|c| self.live.contains(c))
            .collect()
    }

    /// The live connections attached to session `s` other than `conn`.
    pub(super) fn others_attached(
        &self,
        sessions: &SessionTable,
        s: &str,
        conn: ConnId,
    ) -> Vec<ConnId> {
        let mut others = self.attached_live(sessions, s);
        others.retain(|c| *c != conn);
        others
    }

    /// The connection that sent request `sent` (as the agent sees its id).
    pub(in crate::proto) fn conn_of(&self, sent: &RequestId) -> ConnId {
        self.renumbered.get(sent).map_or(ConnId::FIRST, |(c, _)| *c)
    }
}
