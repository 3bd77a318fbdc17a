//! Where a line the core sends to clients goes: an answer to the connection that asked (its
//! own id restored; a join's answer attaches the connection, a prompt's ends its turn), a
//! session's notification to the connections attached to it, an agent request to where it can
//! be answered (see the module's text of [`super`]), a load's replay to its asker only.

use bytes::Bytes;
use serde_json::{Value, json};

use super::super::prompt::Prompter;
use super::super::sessions::SessionTable;
use super::super::vocab::{ConnId, SessionId};
use super::lines::{notification_line, terminal_of};
use super::state::{Asked, Connections};
use super::waiting::Waiting;
use crate::wire::envelope::{self, Kind, RequestId};
use crate::wire::rewrite;

/// Where a line for clients goes.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::proto) enum Route {
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

impl Connections {
    /// A line addressed to the asker of request `sent` (a load's replay): its connection.
    pub(in crate::proto) fn route_reply(&self, sent: &RequestId, line: Bytes) -> Route {
        if !self.several {
            return Route::One(ConnId::FIRST, line);
        }
        let conn = self.conn_of(sent);
        match self.live.contains(&conn) {
            true => Route::One(conn, line),
            false => Route::Dropped,
        }
    }

    /// Where a line the core sends to clients goes (see the module's text of [`super`]).
    pub(in crate::proto) fn route(&mut self, line: Bytes, sessions: &mut SessionTable) -> Route {
        if !self.several {
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
                    return Route::Each(self.live.clone(), line);
                };
                let attached = self.attached_live(sessions, &s);
                if attached.is_empty() {
                    // Nobody is attached: a host journals it only; else it goes to everyone.
                    return match self.hosted {
                        true => Route::Dropped,
                        false => Route::Each(self.live.clone(), line),
                    };
                }
                self.each_or_hold(&attached, line)
            }
            Kind::OtherJson | Kind::Invalid => Route::Each(self.live.clone(), line),
        }
    }

    /// `line` to each of `conns`: held for those joining a session live, sent to the others.
    fn each_or_hold(&mut self, conns: &[ConnId], line: Bytes) -> Route {
        let mut now = Vec::with_capacity(conns.len());
        for c in conns {
            match self.holds_for(*c) {
                true => self.send_or_hold(*c, line.clone()),
                false => now.push(*c),
            }
        }
        Route::Each(now, line)
    }

    /// An answer for a client: to the connection that asked, its own id restored. A join's
    /// answer attaches the connection: what was held for it, and what waits for someone to
    /// answer in the session, follow it.
    fn route_response(
        &mut self,
        id: &RequestId,
        is_error: bool,
        line: &Bytes,
        sessions: &mut SessionTable,
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
        if let Some(s) = self.prompts.remove(id)
            && let Some(prompter) = sessions.end_prompter(&s, id)
            && prompter.tell_end
        {
            self.tell_turn_end(&s, &prompter, line, sessions);
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
        turn: &Prompter,
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
        for c in self.others_attached(sessions, s, turn.conn) {
            self.send_or_hold(c, line.clone());
        }
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
            let route = self.each_or_hold(&controllers, line.clone());
            self.asked.insert(id.clone(), asked(controllers));
            return route;
        }
        let turn = session
            .as_deref()
            .and_then(|s| sessions.prompter(s))
            .map(|p| p.conn);
        let chosen = match self.answerer(method, turn, &line, &controllers) {
            Ok(chosen) => chosen,
            Err(why) => return Route::Unanswerable(id.clone(), line, why),
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

    /// The connection to ask an agent request of `method` (not a permission request) that
    /// `line` is, among the `controllers` of its session (`turn`: the connection whose prompt
    /// runs there): a terminal's request the connection that created the terminal; an fs or
    /// `terminal/create` request the turn's connection, else one that declared the capability;
    /// anything else the turn's connection, else the first attached. `None` when none of them is ready (all are joining, or none is
    /// attached); `Err` with why no connection can answer it.
    fn answerer(
        &self,
        method: &str,
        turn: Option<ConnId>,
        line: &[u8],
        controllers: &[ConnId],
    ) -> Result<Option<ConnId>, &'static str> {
        let ready: Vec<ConnId> = controllers
            .iter()
            .copied()
            .filter(|c| !self.holds_for(*c))
            .collect();
        let turn = turn.filter(|c| ready.contains(c));
        let can = |c: &ConnId| self.views.get(c).is_none_or(|v| v.can(method));
        if let Some(terminal) = terminal_of(line).filter(|_| method != "terminal/create") {
            return match self.terminals.get(&terminal) {
                Some(c) if self.live.contains(c) => Ok(Some(*c)),
                _ => Err("the client connection that created this terminal has ended"),
            };
        }
        if method.starts_with("fs/") || method.starts_with("terminal/") {
            return match turn.filter(can).or_else(|| ready.iter().copied().find(can)) {
                Some(c) => Ok(Some(c)),
                None if !ready.is_empty() => Err(
                    "no client connection attached to the session declared the capability this request needs",
                ),
                None => Ok(None),
            };
        }
        Ok(turn.or_else(|| ready.first().copied()))
    }
}

/// The session a response for a client creates (`result.sessionId`), to attach its connection.
fn created_session(line: &[u8]) -> Option<SessionId> {
    memchr::memmem::find(line, b"\"sessionId\"")?;
    let peek = envelope::peek(line);
    envelope::str_field(peek.result, "sessionId").map(SessionId::from)
}
