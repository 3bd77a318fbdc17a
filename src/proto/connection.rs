//! Client connections. The core serves any number of them on one agent: every client line comes
//! from a connection ([`Peer::Client`]) and every line for a client goes to one, while sessions
//! live apart from any connection (a session records the connections attached to it, and a
//! connection can end while its sessions go on). The stdio proxy is the one-connection case.
//!
//! The first connection's request ids reach the agent as sent. Every later connection's
//! requests are renumbered (`"acp-journal:cN:<id>"`), so the agent never sees two requests under
//! one id, and their answers get the connection's own id back. Lines the core makes for clients
//! are routed here ([`Connections::route`]): a response to the connection that asked, a session's
//! notification to the connections attached to it, an agent request to the first of them (one
//! answer), anything else to every connection. An agent request whose connection ends before
//! answering is asked again of another connection attached to its session, or answered by the
//! proxy ([`Connections::end`] hands it back). While one connection was ever opened nothing is
//! read or rewritten: its lines cross as they came.

use std::collections::HashMap;

use bytes::Bytes;

use super::SessionId;
use crate::wire::Side;
use crate::wire::envelope::{self, Kind, Peek, RequestId};
use crate::wire::rewrite;

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
    /// Agent requests routed to one connection and not answered yet, with their lines.
    asked: HashMap<RequestId, (ConnId, Bytes)>,
}

/// Where a line for clients goes.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Route {
    /// To this connection, with these bytes (a renumbered id restored).
    One(ConnId, Bytes),
    /// To each of these connections.
    Each(Vec<ConnId>, Bytes),
    /// Nowhere: the connection it was for has ended.
    Dropped,
}

impl Connections {
    /// A line from connection `conn`: true the first time it is seen.
    pub(super) fn arrive(&mut self, conn: ConnId) -> bool {
        if self.live.contains(&conn) {
            return false;
        }
        self.several |= conn != ConnId::FIRST || !self.live.is_empty();
        self.live.push(conn);
        true
    }

    /// Connection `conn` closed its stream: the agent requests it left unanswered (ids and
    /// lines, in no order), and whether no connection is left.
    pub(super) fn end(&mut self, conn: ConnId) -> (Vec<(RequestId, Bytes)>, bool) {
        self.live.retain(|c| *c != conn);
        self.sent_as.retain(|(c, _), _| *c != conn);
        let unanswered = self
            .asked
            .extract_if(|_, (c, _)| *c == conn)
            .map(|(id, (_, line))| (id, line))
            .collect();
        (unanswered, self.live.is_empty())
    }

    /// True once a connection other than the first came.
    pub(super) fn several(&self) -> bool {
        self.several
    }

    /// A client line as the core handles it: a later connection's request under an id of the
    /// proxy's (and a cancel naming one of its requests likewise); `None` to take it as it is.
    pub(super) fn inbound(&mut self, conn: ConnId, peek: &Peek<'_>, line: &Bytes) -> Option<Bytes> {
        match &peek.kind {
            // The first connection's ids pass as sent, unless one names another's request.
            Kind::Request { id, .. }
                if conn != ConnId::FIRST || self.renumbered.contains_key(id) =>
            {
                let sent = RequestId::String(format!("acp-journal:c{}:{}", conn.0, id.to_json()));
                self.renumbered.insert(sent.clone(), (conn, id.clone()));
                self.sent_as.insert((conn, id.clone()), sent.clone());
                rewrite::edit_line(line, |m| m.set("id", sent.to_json())).map(Bytes::from)
            }
            Kind::Notification { method } if method == "$/cancel_request" && self.several => {
                let cancelled = envelope::request_id(peek.params)?;
                let sent = self.sent_as.get(&(conn, cancelled))?.clone();
                rewrite::edit_line(line, |m| {
                    m.edit("params", |p| p.set("requestId", sent.to_json()));
                })
                .map(Bytes::from)
            }
            Kind::Response { id, .. } if self.several => {
                self.asked.remove(id);
                None
            }
            _ => None,
        }
    }

    /// Where a line the core sends to clients goes. `attached` gives the connections attached
    /// to a session (the first attached answers the agent's requests).
    pub(super) fn route<'a>(
        &mut self,
        line: Bytes,
        attached: impl Fn(&str) -> &'a [ConnId],
    ) -> Route {
        if !self.several {
            // The one connection (the stdio proxy's editor, there before its first line).
            return Route::One(ConnId::FIRST, line);
        }
        let peek = envelope::peek(&line);
        let live = |c: &ConnId| self.live.contains(c);
        match &peek.kind {
            Kind::Response { id, .. } => {
                let Some((conn, own)) = self.renumbered.remove(id) else {
                    // Not renumbered: the first connection's.
                    return match live(&ConnId::FIRST) {
                        true => Route::One(ConnId::FIRST, line),
                        false => Route::Dropped,
                    };
                };
                self.sent_as.remove(&(conn, own.clone()));
                if !live(&conn) {
                    return Route::Dropped;
                }
                let restored = rewrite::edit_line(&line, |m| m.set("id", own.to_json()))
                    .map_or(line, Bytes::from);
                Route::One(conn, restored)
            }
            Kind::Request { .. } | Kind::Notification { .. } => {
                let session: Vec<ConnId> = peek
                    .session
                    .as_deref()
                    .map(|s| attached(s).iter().copied().filter(live).collect())
                    .unwrap_or_default();
                match (&peek.kind, session.first().or(self.live.first()).copied()) {
                    (Kind::Request { id, .. }, Some(first)) => {
                        self.asked.insert(id.clone(), (first, line.clone()));
                        Route::One(first, line)
                    }
                    (Kind::Request { .. }, None) => Route::Dropped,
                    (_, _) if !session.is_empty() => Route::Each(session, line),
                    (_, _) => Route::Each(self.live.clone(), line),
                }
            }
            Kind::OtherJson | Kind::Invalid => Route::Each(self.live.clone(), line),
        }
    }
}

/// The session a response for a client creates (`result.sessionId`), to attach its connection.
pub(super) fn created_session(line: &[u8]) -> Option<SessionId> {
    memchr::memmem::find(line, b"\"sessionId\"")?;
    let peek = envelope::peek(line);
    envelope::str_field(peek.result, "sessionId").map(SessionId::from)
}
