//! `session/close` and `session/delete` answered here for an agent that lacks them; with
//! one that has them, what the core learns as they pass.

use bytes::Bytes;
use serde_json::json;

use super::attribution;
use super::context::Cx;
use super::vocab::{Action, CatalogUpdate, SessionId, Stamp, Target};
use crate::wire::envelope::{Peek, RequestId};

/// `session/close` for an agent that lacks it: cancel the session's work, answer.
pub(super) fn close(
    cx: &mut Cx,
    at: Stamp,
    s: &SessionId,
    id: &RequestId,
    peek: &Peek<'_>,
    line: &Bytes,
) {
    let record = cx.fx.client_record(at, peek, line);
    if !cx.sessions.journal_open(s) {
        attribution::open_session(cx, s, None, false);
    }
    cx.fx.journal(Target::Session(s.clone()), record);
    // Closing cancels ongoing work, as `session/cancel` would.
    let agent_side = cx.sessions.agent_id(s);
    let params = json!({"sessionId": agent_side.as_str()}).to_string();
    cx.fx.send_agent(
        at,
        Target::Session(s.clone()),
        None,
        "session/cancel",
        &params,
    );
    if let Some(session) = cx.sessions.get_mut(s) {
        session.set_not_live();
    }
    cx.fx.answer(at, Target::Session(s.clone()), id, Ok("{}"));
}

/// `session/close` the agent does: a later load must bring the session up again.
pub(super) fn closed_by_agent(cx: &mut Cx, s: &SessionId) {
    if let Some(session) = cx.sessions.get_mut(s) {
        session.set_not_live();
    }
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
    cx.fx
        .push(Action::Catalog(CatalogUpdate::Delete { session: s }));
    if cx.agent.delete {
        return false;
    }
    cx.fx.journal_client(at, Target::Run, peek, line);
    cx.fx.answer(at, Target::Run, id, Ok("{}"));
    true
}
