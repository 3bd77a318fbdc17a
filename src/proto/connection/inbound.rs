//! Client lines as the core takes them: a later connection's request under an id of the
//! proxy's (and a cancel naming one of its requests likewise); a host's joins (load, resume,
//! `session/attach`) and prompts recorded, or refused (a prompt while another connection's turn
//! runs, an observer's prompt, bad `session/attach` params); a prompt shown to the other
//! attached connections; an answer to an agent request passed to the agent, or dropped.

use bytes::Bytes;
use serde_json::{Value, json};

use super::super::prompt::Prompter;
use super::super::sessions::SessionTable;
use super::super::vocab::{ConnId, SessionId};
use super::attach::Attach;
use super::client_view::ClientView;
use super::lines::notification_line;
use super::state::{Connections, Join};
use crate::wire::envelope::{self, Kind, Peek, RequestId, error_json};
use crate::wire::rewrite;

/// What the core does with a client line.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::proto) enum Inbound {
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
    /// A client line as the core handles it: a later connection's request under an id of the
    /// proxy's (and a cancel naming one of its requests likewise), refused, or dropped.
    pub(in crate::proto) fn inbound(
        &mut self,
        conn: ConnId,
        peek: &Peek<'_>,
        line: &Bytes,
        sessions: &mut SessionTable,
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
                let Some((sent, renumbered)) = self.renumber(conn, id, line) else {
                    return Inbound::AsIs;
                };
                if creates {
                    self.creating.insert(sent.clone());
                }
                match self.enter_session(conn, method, &sent, peek, sessions, echo_prompts) {
                    Ok(()) => Inbound::Renumbered(renumbered),
                    Err(error) => Inbound::Refused(renumbered, sent, error),
                }
            }
            Kind::Notification { method } if method == "$/cancel_request" && self.several => {
                self.renumber_cancel(conn, peek, line)
            }
            Kind::Response { id, is_error } if self.several => {
                match self.answered(conn, id, *is_error, peek, sessions) {
                    true => Inbound::AsIs,
                    false => Inbound::Settled,
                }
            }
            Kind::Request { id, .. } if creates && self.several => {
                self.creating.insert(id.clone());
                Inbound::AsIs
            }
            _ => Inbound::AsIs,
        }
    }

    /// Request `id` of `conn` under an id of the proxy's (`"acp-journal:cN:<id>"`): that id and
    /// the line rewritten with it, remembered both ways; `None` when the line cannot be edited.
    fn renumber(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        line: &Bytes,
    ) -> Option<(RequestId, Bytes)> {
        let sent = RequestId::String(format!("acp-journal:c{}:{}", conn.0, id.to_json()));
        let renumbered =
            rewrite::edit_line(line, |m| m.set("id", sent.to_json())).map(Bytes::from)?;
        self.renumbered.insert(sent.clone(), (conn, id.clone()));
        self.sent_as.insert((conn, id.clone()), sent.clone());
        Some((sent, renumbered))
    }

    /// A `$/cancel_request` of `conn`: under the proxy's id when it names a request of `conn`
    /// that was renumbered.
    fn renumber_cancel(&self, conn: ConnId, peek: &Peek<'_>, line: &Bytes) -> Inbound {
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

    /// A host's request `sent` (renumbered) of `conn` in a session: a load, resume or
    /// `session/attach` begins a join, a prompt a turn. `Err` with the error (JSON) the request
    /// is refused with: bad `session/attach` params, or a prompt [`Self::prompt_refused`].
    fn enter_session(
        &mut self,
        conn: ConnId,
        method: &str,
        sent: &RequestId,
        peek: &Peek<'_>,
        sessions: &mut SessionTable,
        echo_prompts: bool,
    ) -> Result<(), String> {
        let Some(s) = peek.session.as_deref().map(SessionId::from) else {
            return Ok(());
        };
        if !self.hosted {
            return Ok(());
        }
        match method {
            "session/load" | "session/resume" | "session/attach" => {
                let attach = match method {
                    "session/attach" => Some(Attach::parse(peek.params).map_err(|why| {
                        error_json(-32602, &format!("Invalid params: {why}"), None)
                    })?),
                    _ => None,
                };
                self.created.push((s.clone(), conn));
                let join = Join {
                    conn,
                    session: s,
                    live: false,
                    attach,
                };
                self.joining.insert(sent.clone(), join);
            }
            "session/prompt" => {
                if let Some(why) = self.prompt_refused(conn, &s, sessions) {
                    return Err(error_json(-32000, why, Some(json!({"sessionId": &*s}))));
                }
                if echo_prompts {
                    self.echo_prompt(conn, &s, sessions, peek.params);
                }
                let prompter = Prompter {
                    conn,
                    sent: sent.clone(),
                    tell_end: echo_prompts,
                };
                if let Some(before) = sessions.set_prompter(&s, prompter) {
                    self.prompts.remove(&before.sent);
                }
                self.prompts.insert(sent.clone(), s);
            }
            _ => {}
        }
        Ok(())
    }

    /// Why a prompt of `conn` in session `s` is refused: it observes the session, or another
    /// connection's turn runs there (prompts are not queued: see docs/SERVING.md).
    fn prompt_refused(
        &self,
        conn: ConnId,
        s: &SessionId,
        sessions: &SessionTable,
    ) -> Option<&'static str> {
        if self.observers.contains(&(conn, s.clone())) {
            return Some("this connection observes the session: observers cannot prompt");
        }
        // The turn runs on the agent whether or not its connection is still there.
        match sessions.prompter(s) {
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
        let others = self.others_attached(sessions, s, conn);
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
}
