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
//!
//! A host (`acp-journal serve`, [`Connections::hosted`]) keeps sessions apart from connections
//! strictly: a session's lines go only to the connections attached to it (none attached: they
//! are journaled, not sent), and an agent request for a session nobody is attached to waits,
//! bounded in number and time, for the next connection that loads or resumes the session; it is
//! sent right after that connection's answer.

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
    /// A host: no session line goes to a connection that is not attached to it.
    hosted: bool,
    /// Agent requests for sessions nobody is attached to, oldest first (a host's).
    waiting: Vec<Waiting>,
    /// A host's load or resume requests (as sent), with the session they attach.
    joining: HashMap<RequestId, SessionId>,
    /// Waiting requests released to a connection, to go out after the line that released them.
    released: Vec<(ConnId, Bytes)>,
}

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

    /// Send the requests waiting for session `s` to `conn`, which attached to it.
    fn release(&mut self, s: &str, conn: ConnId) {
        for w in self.waiting.extract_if(.., |w| *w.session == *s) {
            self.asked.insert(w.id, (conn, w.line.clone()));
            self.released.push((conn, w.line));
        }
    }

    /// Lines released by the last routed one, to go out after it.
    pub(super) fn take_released(&mut self) -> Vec<(ConnId, Bytes)> {
        std::mem::take(&mut self.released)
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
            Kind::Request { id, method }
                if conn != ConnId::FIRST || self.renumbered.contains_key(id) =>
            {
                let sent = RequestId::String(format!("acp-journal:c{}:{}", conn.0, id.to_json()));
                if self.hosted
                    && matches!(method.as_ref(), "session/load" | "session/resume")
                    && let Some(s) = peek.session.as_deref()
                {
                    self.joining.insert(sent.clone(), SessionId::from(s));
                }
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
                let joined = self.joining.remove(id);
                if !live(&conn) {
                    return Route::Dropped;
                }
                if let Some(s) = joined
                    && matches!(
                        peek.kind,
                        Kind::Response {
                            is_error: false,
                            ..
                        }
                    )
                {
                    self.release(&s, conn);
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
                if self.hosted
                    && let Some(s) = peek.session.as_deref()
                    && session.is_empty()
                {
                    // Nobody is attached: journaled only; a request waits for someone.
                    if let Kind::Request { id, .. } = &peek.kind {
                        return Route::Wait(Waiting {
                            id: id.clone(),
                            session: SessionId::from(s),
                            line,
                            since_us: 0,
                        });
                    }
                    return Route::Dropped;
                }
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
