//! Where a line the core sends to clients goes ([`Route`]: an answer to the connection that
//! asked, a session's notification to the connections attached to it, an agent request to
//! where it can be answered, a load's replay to its asker only; see the module's text of
//! [`super`]), what routing leaves for the core ([`Unsettled`]), and what it reads of an answer
//! or makes of it (the session it creates, the turn's end it tells the other connections).

use bytes::Bytes;
use serde_json::{Value, json};

use super::super::prompt::Prompter;
use super::super::vocab::{ConnId, SessionId};
use super::lines::notification_line;
use super::roster::Roster;
use super::waiting::Waiting;
use crate::wire::envelope::{self, RequestId};

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
    /// ([`super::Connections::wait`]) or answers it.
    Wait(Waiting),
    /// An agent request no attached connection can answer (none declared the capability it
    /// needs, or the terminal it names is gone): the core answers it, for this reason.
    Unanswerable(RequestId, Bytes, &'static str),
}

/// What routing leaves for the core, taken out at once: never anything with one connection.
#[derive(Debug, Default)]
pub(in crate::proto) struct Unsettled {
    /// Connections to attach to sessions, and to detach from them, and what else routing
    /// decided of a connection's place in a session, in the order it decided it (the one
    /// queue of session facts outside the table: routing decides an attachment before the
    /// table may have the session, see [`super::super::sessions`]; the proxy applies them to
    /// the table). An attachment: a session created for the connection (`session/new`,
    /// `session/fork`) or joined by it; a detachment: an attachment that ended without the
    /// connection ending (a failed join).
    pub(in crate::proto) attachments: Vec<(SessionId, ConnId, Attachment)>,
    /// Connections the core must end (they fell too far behind while joining a session).
    pub(in crate::proto) to_end: Vec<ConnId>,
    /// Agent requests that lost the last connection they were asked of (a failed join).
    pub(in crate::proto) orphaned: Vec<(RequestId, Bytes)>,
}

/// What becomes of a connection's place in a session (applied when the table has the
/// session by then).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::proto) enum Attachment {
    /// Attached.
    Attach,
    /// Detached.
    Detach,
    /// Joined by `session/attach` (`observer`: in that role).
    JoinDraft { observer: bool },
    /// Its prompt, sent to the agent as this id, was answered: the turn is no longer the
    /// connection's.
    PromptAnswered(RequestId),
}

impl Unsettled {
    /// True when nothing is left for the core.
    pub(super) fn is_empty(&self) -> bool {
        self.attachments.is_empty() && self.to_end.is_empty() && self.orphaned.is_empty()
    }
}

/// The line telling the other connections attached to session `s` that `turn` ended with
/// `answer` (the prompt's response, which goes only to the connection that sent it): a
/// `session_info_update` whose `_meta.acpJournal.turnEnded` says how (`stopReason`, or the
/// error's `message`) and whose turn it was.
pub(super) fn turn_end_line(
    s: &SessionId,
    turn: &Prompter,
    answer: &[u8],
    roster: &Roster,
) -> Bytes {
    let peek = envelope::peek(answer);
    let mut ended = match envelope::str_field(peek.result, "stopReason") {
        Some(reason) => json!({"stopReason": reason}),
        None => {
            let answer: Value = serde_json::from_slice(answer).unwrap_or(Value::Null);
            json!({"error": answer["error"]["message"]})
        }
    };
    ended["by"] = json!(format!("c{}", turn.conn.0));
    ended["client"] = json!(roster.view(turn.conn).and_then(|v| v.name.clone()));
    notification_line(
        "session/update",
        json!({"sessionId": &**s, "update": {
            "sessionUpdate": "session_info_update",
            "_meta": {"acpJournal": {"turnEnded": ended}},
        }}),
    )
}

/// The session a response for a client creates (`result.sessionId`), to attach its connection.
pub(super) fn created_session(line: &[u8]) -> Option<SessionId> {
    memchr::memmem::find(line, b"\"sessionId\"")?;
    let peek = envelope::peek(line);
    envelope::str_field(peek.result, "sessionId").map(SessionId::from)
}
