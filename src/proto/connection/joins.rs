//! A host's connections joining sessions (`session/load`, `session/resume`, `session/attach`)
//! until their answer, and the session's lines held for a connection that joins a session live
//! (the history comes first, then every live line once); a `session/attach` answer says the
//! draft's role and connected clients.

use bytes::Bytes;
use serde_json::Value;

use super::super::held::HeldLines;
use super::super::sessions::SessionTable;
use super::super::vocab::{ConnId, HashMap, SessionId};
use super::attach::Attach;
use super::roster::{Roster, role};
use crate::wire::envelope::RequestId;
use crate::wire::rewrite;

/// The most a joining connection has held for it; past it the connection is ended.
const HOLD_LIMIT: usize = 16 << 20;

/// A host's joins under way, and the lines held for the connections joining live.
#[derive(Debug, Default)]
pub(super) struct Joins {
    /// A host's load, resume or attach requests (as sent) not answered yet.
    joining: HashMap<RequestId, PendingJoin>,
    /// A session's lines held for connections joining it while it is live, until their answer.
    held: HashMap<ConnId, HeldLines>,
}

/// A connection joining a session: a load, resume or `session/attach` not answered yet.
#[derive(Debug)]
pub(super) struct PendingJoin {
    pub(super) conn: ConnId,
    pub(super) session: SessionId,
    /// The session is live and the core serves the join from the journal: the session's lines
    /// are held for the connection until the answer (see [`Joins::joins_live`]).
    pub(super) live: bool,
    /// A `session/attach`: its role and history policy.
    pub(super) attach: Option<Attach>,
}

impl Joins {
    /// Request `sent` begins `join`.
    pub(super) fn begin(&mut self, sent: RequestId, join: PendingJoin) {
        self.joining.insert(sent, join);
    }

    /// The join `sent` (a load or resume of a live session) is served from the journal: the
    /// session's lines are held for its connection until the answer, so the history comes
    /// first and every live line once after it.
    pub(super) fn joins_live(&mut self, sent: &RequestId) {
        if let Some(join) = self.joining.get_mut(sent) {
            join.live = true;
        }
    }

    /// The join request `sent` was answered: that join, taken out.
    pub(super) fn answered(&mut self, sent: &RequestId) -> Option<PendingJoin> {
        self.joining.remove(sent)
    }

    /// True while `conn` joins a live session (its lines are held).
    pub(super) fn holds_for(&self, conn: ConnId) -> bool {
        self.joining.values().any(|j| j.live && j.conn == conn)
    }

    /// Hold `line` for `conn`; false when the connection fell too far behind (nothing is held
    /// for it any more: it is to be ended).
    pub(super) fn hold(&mut self, conn: ConnId, line: &Bytes) -> bool {
        let held = self.held.entry(conn).or_default();
        if held.hold(line, HOLD_LIMIT) {
            return true;
        }
        tracing::warn!(
            "client connection {} fell {} bytes behind while joining a session: ending it",
            conn.0,
            held.bytes() + line.len()
        );
        self.held.remove(&conn);
        false
    }

    /// The lines held for `conn`, taken out, in order.
    pub(super) fn release(&mut self, conn: ConnId) -> Vec<Bytes> {
        self.held
            .remove(&conn)
            .map(|mut held| held.take())
            .unwrap_or_default()
    }

    /// What is held for `conn` is never sent (its join failed, or it ended).
    pub(super) fn drop_held(&mut self, conn: ConnId) {
        self.held.remove(&conn);
    }
}

impl PendingJoin {
    /// The answer to a `session/attach` (`None` for another join): the load's answer with the
    /// draft's `sessionId`, `role` and `connectedClients`.
    pub(super) fn attach_answer(
        &self,
        answer: &[u8],
        roster: &Roster,
        sessions: &SessionTable,
    ) -> Option<Bytes> {
        let attach = self.attach?;
        let clients = roster.connected_clients(self.conn, &self.session, sessions);
        rewrite::edit_line(answer, |m| {
            m.edit("result", |r| {
                r.set("sessionId", rewrite::json_string(&self.session));
                r.set("role", rewrite::json_string(role(attach.observer)));
                r.set("connectedClients", Value::Array(clients).to_string());
            });
        })
        .map(Bytes::from)
    }
}
