//! Clients coming and going on a host's sessions: the core's transitions for connections, as
//! functions of [`Cx`] and [`Connections`] ([`super::connection`] routes; these act). A later
//! connection's `initialize` (`answer_initialize_again`), a host's client joining or leaving a
//! session (`join_or_leave`), what routing leaves for the core (`settle`, `deliver`, `refused`),
//! a connection's end (`ended`), and the agent requests a connection leaves unanswered: asked
//! again, made to wait for someone to attach, or answered for the client (`ask_again`,
//! `expire_waiting`, `answer_unasked`); what becomes of those ([`Asked`]) is returned, for the
//! route (or the proxy) to send in order: an answer made for the client teaches its session as
//! the client's would (`route::send_asked`).

use bytes::Bytes;
use serde_json::json;

use super::connection::{self, Connections, Route};
use super::context::Cx;
use super::loading::Loads;
use super::sessions::SessionTable;
use super::vocab::{Action, ConnId, Line, SessionId, Stamp, Target};
use crate::wire::Side;
use crate::wire::envelope::{self, Kind, RequestId, error_json};

/// What becomes of an agent request a connection left unanswered ([`ask_again`]), in order.
#[derive(Debug)]
pub(super) enum Asked {
    /// Routed again: to an attached connection, or (a host's) to wait for one.
    Again(Bytes),
    /// Answered for the client, which cannot (why), if the agent still waits for it
    /// ([`answer_unasked`]): the answer journaled as the proxy's and sent to the agent.
    ForClient(RequestId, Bytes, &'static str),
}

/// What routing left for the core besides its attachments (which the table took: see
/// [`super::Proxy::poll_action`]): connections to end, agent requests nobody is left to
/// answer (what becomes of them: returned).
pub(super) fn settle(
    cx: &mut Cx,
    sessions: &SessionTable,
    connections: &Connections,
    to_end: Vec<ConnId>,
    orphaned: Vec<(RequestId, Bytes)>,
) -> Vec<Asked> {
    for conn in to_end {
        cx.fx().push(Action::EndClient(conn));
    }
    let asked = orphaned.into_iter();
    asked
        .map(|(id, line)| ask_again(sessions, connections, id, line))
        .collect()
}

/// The `initialize` of a connection other than the first (`msg`, as the route decided) is
/// answered with the agent's recorded answer: the agent is initialized once.
pub(super) fn answer_initialize_again(cx: &mut Cx, msg: Line<'_>) {
    let Line {
        at,
        peek,
        bytes: line,
    } = msg;
    let answer = cx.peers().initialize.response.clone();
    let result = answer.as_deref().and_then(|a| envelope::peek(a).result);
    if let (Kind::Request { id, .. }, Some(result)) = (&peek.kind, result) {
        cx.fx().journal_client(at, Target::Run, peek, line);
        cx.fx().answer(at, Target::Run, id, Ok(result.get()));
    }
}

/// Deliver a line for the clients as routing says (`route`): to each connection it names,
/// ahead of what routing queued meanwhile ([`Connections::send_ahead`]); an agent request no
/// client can answer is answered for it (the answer: returned), one waiting for a client to
/// attach waits (bounded). (A line for one connection, the common case, is
/// [`super::Proxy::poll_action`]'s own.)
pub(super) fn deliver(cx: &Cx, connections: &mut Connections, route: Route) -> Option<Asked> {
    let at = cx.now();
    match route {
        Route::One(conn, line) => connections.send_ahead(vec![conn], line),
        Route::Unanswerable(id, line, why) => return Some(Asked::ForClient(id, line, why)),
        Route::Wait(mut waiting) => {
            waiting.since_us = at.mono_us;
            let (id, line) = (waiting.id.clone(), waiting.line.clone());
            if !connections.wait(waiting) {
                let why = "too many requests wait for a client";
                return Some(Asked::ForClient(id, line, why));
            }
        }
        Route::Each(conns, line) => connections.send_ahead(conns, line),
        Route::Dropped => {}
    }
    None
}

/// Client connection `conn` ended (the table detached it from its sessions, which live on:
/// [`SessionTable::detach_everywhere`]): the agent requests it left unanswered are asked
/// again (what becomes of them: returned). `None` when it was the client's last, the client's
/// end (on a host, never).
pub(super) fn ended(
    sessions: &SessionTable,
    connections: &mut Connections,
    conn: ConnId,
) -> Option<Vec<Asked>> {
    let (unanswered, last) = connections.end(conn);
    if last && !connections.is_hosted() {
        return None;
    }
    let asked = unanswered.into_iter();
    Some(
        asked
            .map(|(id, line)| ask_again(sessions, connections, id, line))
            .collect(),
    )
}

/// Journal a client line that cannot go to the agent (with its session, or the run's
/// journal when the session has none) and, if it is a request, answer it with `error`.
pub(super) fn refuse(cx: &mut Cx, sessions: &SessionTable, at: Stamp, line: &Bytes, error: &str) {
    let peek = envelope::peek(line);
    let target = match peek.session.as_deref() {
        Some(s) if sessions.journal_open(s) => Target::Session(sessions.id(s)),
        _ => Target::Run,
    };
    cx.fx().journal_client(at, target.clone(), &peek, line);
    if let Kind::Request { id, .. } = &peek.kind {
        cx.fx().answer(at, target, id, Err(error));
    }
}

/// A client line routing refused (`line`, under its renumbered id; `sent`: the id the client
/// sent): journaled with the run, answered with `error`.
pub(super) fn refused(cx: &mut Cx, at: Stamp, line: &Bytes, sent: &RequestId, error: &str) {
    let peek = envelope::peek(line);
    cx.fx().journal_client(at, Target::Run, &peek, line);
    cx.fx().answer(at, Target::Run, sent, Err(error));
}

/// An agent request whose connection ended unanswered: asked again of another connection
/// attached to its session (or, for a host, of the next to attach), else answered for the
/// client (a permission request as cancelled, anything else with an error), so the agent
/// is never left waiting.
pub(super) fn ask_again(
    sessions: &SessionTable,
    connections: &Connections,
    id: RequestId,
    line: Bytes,
) -> Asked {
    let peek = envelope::peek(&line);
    if peek.session.as_deref().is_some_and(|s| {
        connections.is_hosted()
            || sessions
                .get(s)
                .is_some_and(|x| !x.members().attached().is_empty())
    }) {
        return Asked::Again(line);
    }
    let why = "the client connection this request went to has ended";
    Asked::ForClient(id, line, why)
}

/// A host's agent requests that waited for a client longer than
/// [`Config::unattended_timeout_us`] are answered for the client (returned).
pub(super) fn expire_waiting(cx: &Cx, connections: &mut Connections, at: Stamp) -> Vec<Asked> {
    let before = at.mono_us.saturating_sub(cx.config().unattended_timeout_us);
    let why = "no client attached to the session in time to answer this request";
    let expired = connections.expired(before).into_iter();
    expired
        .map(|waiting| Asked::ForClient(waiting.id, waiting.line, why))
        .collect()
}

/// The answer to the agent's request `id` (its `line`) for the client, which cannot (`why`): a
/// permission request as cancelled, anything else with error -32603; `None` when nobody waits
/// for it (not the current agent's, or answered meanwhile).
pub(super) fn answer_unasked(cx: &Cx, id: &RequestId, line: &Bytes, why: &str) -> Option<Bytes> {
    let peek = envelope::peek(line);
    if !cx.pending().contains_key(&(Side::Agent, id.clone())) {
        return None;
    }
    let error;
    let outcome = match peek.method() {
        Some("session/request_permission") => Ok(r#"{"outcome":{"outcome":"cancelled"}}"#),
        _ => {
            error = error_json(-32603, why, None);
            Err(error.as_str())
        }
    };
    Some(envelope::response_line(id, outcome))
}

/// How a host's connection joins or leaves a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Join {
    /// A load or resume of a live session, served from the journal (`replay`: the history).
    Live { replay: bool },
    /// `session/attach` (`live`: the session is live on the agent).
    Attach { live: bool },
    /// `session/detach`, or a `session/close` while other connections stay attached.
    Leave,
}

/// A host's client joins or leaves the session its request (`msg`) names, as the route
/// decided (`join`; `None`: `msg` is no request naming a session, and passes; else what
/// becomes of the agent requests a leaving connection left unanswered). A load or resume of a
/// session live on the agent joins it: served from the
/// journal, never passed to the agent, so the other connections' turn goes on untouched; the
/// history replayed is what the journal held when the request came and every live line
/// follows it once ([`Connections::joins_live`]). `session/attach` (the multi-client draft)
/// joins likewise, bringing the session up first when it is not live, with the history its
/// `historyPolicy` asks for. `session/detach`, and `session/close` while other connections
/// stay attached, detach this connection only.
pub(super) fn join_or_leave(
    cx: &mut Cx,
    sessions: &SessionTable,
    connections: &mut Connections,
    loads: &mut Loads,
    join: Join,
    msg: Line<'_>,
) -> Option<Vec<Asked>> {
    let Line {
        at,
        peek,
        bytes: line,
    } = msg;
    let (Kind::Request { id, .. }, Some(s)) = (&peek.kind, peek.session.as_deref()) else {
        return None;
    };
    let s = &SessionId::from(s);
    let mut asked = Vec::new();
    match join {
        Join::Live { replay } => {
            connections.joins_live(id);
            loads.serve(cx, id, msg, replay, true);
        }
        Join::Attach { live } => {
            let full = connection::Attach::parse(peek.params)
                .is_ok_and(|a| a.history == connection::HistoryPolicy::Full);
            if live {
                connections.joins_live(id);
            }
            loads.serve(cx, id, msg, full, live);
        }
        Join::Leave => {
            // The route detached the connection from the session.
            let conn = connections.conn_of(id);
            cx.fx().journal_client(at, Target::Run, peek, line);
            let unanswered = connections.detach(conn, s);
            let answer = match peek.method() {
                Some("session/detach") => json!({"sessionId": &**s, "status": "detached"}),
                _ => json!({}),
            };
            cx.fx().answer(at, Target::Run, id, Ok(&answer.to_string()));
            let unanswered = unanswered.into_iter();
            let again = |(id, line)| ask_again(sessions, connections, id, line);
            asked = unanswered.map(again).collect();
        }
    }
    Some(asked)
}
