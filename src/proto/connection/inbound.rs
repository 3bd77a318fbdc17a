//! Client lines as the core takes them ([`Inbound`]), and what it keeps of the client requests
//! it forwarded until their answer ([`Forwarded`]): a later connection's request under an id of
//! the proxy's (and a cancel naming one of its requests likewise), the prompts whose answer ends
//! a turn, the requests whose answer creates a session; and a prompt shown to the other attached
//! connections as the user's message.

use bytes::Bytes;
use serde_json::{Value, json};

use super::super::prompt::Prompter;
use super::super::vocab::{ConnId, HashMap, HashSet, SessionId};
use super::lines::notification_line;
use crate::wire::envelope::{self, Peek, RequestId};
use crate::wire::rewrite;

/// What the core does with a client line.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::proto) enum Inbound {
    /// Take it as it came.
    AsIs,
    /// Take it under the proxy's id (a later connection's request, or a cancel naming one);
    /// for a host's prompt, the connection prompts the session's turn now (the session, and
    /// the prompter it takes).
    Renumbered(Bytes, Option<(SessionId, Prompter)>),
    /// Refuse the request (here under the proxy's id): answer it with this error (JSON).
    Refused(Bytes, RequestId, String),
    /// An answer to a permission request another connection answered first: not forwarded.
    Settled,
}

/// The client requests the core forwarded to the agent, until their answer: the ids it
/// renumbered, the prompts of running turns, the requests whose answer creates a session.
#[derive(Debug, Default)]
pub(super) struct Forwarded {
    /// Sent id → the connection that sent the request, and its own id.
    renumbered: HashMap<RequestId, (ConnId, RequestId)>,
    /// The same, the other way (for `$/cancel_request`).
    sent_as: HashMap<(ConnId, RequestId), RequestId>,
    /// The prompts of running turns, as the agent got them, and their sessions (the turns are
    /// the sessions': [`super::super::prompt::Turn`]).
    prompts: HashMap<RequestId, SessionId>,
    /// Requests (as the agent sees their ids) whose answer creates a session for the
    /// connection that sent them (`session/new`, `session/fork`).
    creating: HashSet<RequestId>,
}

impl Forwarded {
    /// True when request `id` (as the agent sees it) is one the proxy renumbered.
    pub(super) fn is_renumbered(&self, id: &RequestId) -> bool {
        self.renumbered.contains_key(id)
    }

    /// Request `id` of `conn` under an id of the proxy's (`"acp-journal:cN:<id>"`): that id and
    /// the line rewritten with it, remembered both ways; `None` when the line cannot be edited.
    pub(super) fn renumber(
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
    pub(super) fn renumber_cancel(&self, conn: ConnId, peek: &Peek<'_>, line: &Bytes) -> Inbound {
        let Some(sent) = envelope::request_id(peek.params)
            .and_then(|cancelled| self.sent_as.get(&(conn, cancelled)).cloned())
        else {
            return Inbound::AsIs;
        };
        rewrite::edit_line(line, |m| {
            m.edit("params", |p| p.set("requestId", sent.to_json()));
        })
        .map_or(Inbound::AsIs, |l| Inbound::Renumbered(Bytes::from(l), None))
    }

    /// The connection that sent request `sent` (as the agent sees its id).
    pub(super) fn conn_of(&self, sent: &RequestId) -> ConnId {
        self.renumbered.get(sent).map_or(ConnId::FIRST, |(c, _)| *c)
    }

    /// The answer to request `sent` came: the connection that sent it and its own id, when the
    /// proxy renumbered it (forgotten both ways).
    pub(super) fn answered(&mut self, sent: &RequestId) -> Option<(ConnId, RequestId)> {
        let (conn, own) = self.renumbered.remove(sent)?;
        self.sent_as.remove(&(conn, own.clone()));
        Some((conn, own))
    }

    /// Request `sent` creates a session for its connection when answered.
    pub(super) fn creates(&mut self, sent: RequestId) {
        self.creating.insert(sent);
    }

    /// True (once) when the answer to request `sent` creates a session for its connection.
    pub(super) fn take_creating(&mut self, sent: &RequestId) -> bool {
        self.creating.remove(sent)
    }

    /// Prompt `sent` runs a turn in session `s`.
    pub(super) fn prompted(&mut self, sent: RequestId, s: SessionId) {
        self.prompts.insert(sent, s);
    }

    /// The session whose turn prompt `sent` ran, forgotten.
    pub(super) fn take_prompt(&mut self, sent: &RequestId) -> Option<SessionId> {
        self.prompts.remove(sent)
    }

    /// Connection `conn` ended: its ids are not asked about again.
    pub(super) fn end(&mut self, conn: ConnId) {
        self.sent_as.retain(|(c, _), _| *c != conn);
    }
}

/// A prompt (its `params`) shown in session `s` as the user's message: a `user_message_chunk`
/// line for each of its blocks (ACP v1: agents do not echo prompts; v2 agents send
/// `user_message` themselves).
pub(super) fn prompt_echo(
    s: &SessionId,
    params: Option<crate::wire::envelope::Raw<'_>>,
) -> Vec<Bytes> {
    let Some(Value::Array(blocks)) = params
        .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
        .map(|mut p| p["prompt"].take())
    else {
        return Vec::new();
    };
    blocks
        .into_iter()
        .map(|block| {
            notification_line(
                "session/update",
                json!({"sessionId": &**s, "update": {"sessionUpdate": "user_message_chunk", "content": block}}),
            )
        })
        .collect()
}
