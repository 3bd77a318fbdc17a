//! `session/close` and `session/delete` answered here for an agent that lacks them; with
//! one that has them, what the core learns as they pass.

use bytes::Bytes;
use serde_json::json;

use super::context::Cx;
use super::sessions::SessionMut;
use super::vocab::{Action, CatalogUpdate, Line, SessionId, Stamp, Target};
use crate::wire::envelope::{Peek, RequestId};

/// `session/close` (request `id`, `msg`) of `session` for an agent that lacks it: cancel the
/// session's work, answer.
pub(super) fn close(cx: &mut Cx, mut session: SessionMut<'_>, id: &RequestId, msg: Line<'_>) {
    let Line {
        at,
        peek,
        bytes: line,
    } = msg;
    let record = cx.fx().client_record(at, peek, line);
    if session.open_journal() {
        cx.open_journal(session.id().clone(), None);
    }
    let s = session.id().clone();
    cx.fx().journal(Target::Session(s.clone()), record);
    // Closing cancels ongoing work, as `session/cancel` would.
    let agent_side = session.agent_id(&s);
    let params = json!({"sessionId": agent_side.as_str()}).to_string();
    cx.fx().send_agent(
        at,
        Target::Session(s.clone()),
        None,
        "session/cancel",
        &params,
    );
    session.set_not_live();
    cx.fx().answer(at, Target::Session(s), id, Ok("{}"));
}

/// `session/delete`: the catalog forgets the session; for an agent that lacks it, answered
/// here (true: taken).
pub(super) fn delete(
    cx: &mut Cx,
    at: Stamp,
    s: SessionId,
    id: &RequestId,
    peek: &Peek<'_>,
    line: &Bytes,
) -> bool {
    cx.fx()
        .push(Action::Catalog(CatalogUpdate::Delete { session: s }));
    if cx.peers().agent.delete {
        return false;
    }
    cx.fx().journal_client(at, Target::Run, peek, line);
    cx.fx().answer(at, Target::Run, id, Ok("{}"));
    true
}
