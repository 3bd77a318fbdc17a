//! Loads the client sends the agent itself (`session/load`, `session/resume`, and ACP v2's
//! `session/resume` with `replayFrom`): they pass, the session keeps them
//! ([`super::load_request::NativeLoad`]) until the agent answers, the agent's replay is forwarded
//! but not journaled again (the journal has it), and in `auto` and `journal` modes a load the
//! agent fails is served from the journal instead ([`super::loading`]).

use bytes::Bytes;
use serde_json::json;

use super::context::Cx;
use super::load_request::{LoadRequest, NativeLoad, TAIL_CURSOR};
use super::loading::Loads;
use super::sessions::SessionMut;
use super::vocab::{Line, Target};
use crate::wire::envelope::{Kind, Peek, RequestId, error_json};

/// An ACP v2 `session/resume`. `replayFrom: {type: "start"}` replays the history: the
/// agent's own (passed on, not journaled again), or the journal's should the agent fail it
/// or lack resume; `{type: "_acpJournal/tail", turns: N}` replays the journal's last N turns;
/// without `replayFrom` nothing is replayed. Another cursor type is the
/// agent's to take or refuse, never served from the journal (-32602 when the agent cannot
/// resume at all), as the schema requires.
pub(super) fn resume_v2(cx: &mut Cx, loads: &mut Loads, id: &RequestId, msg: Line<'_>) -> Resume {
    let Line {
        at,
        peek,
        bytes: line,
    } = msg;
    let replay = match replay_from(peek.params).as_deref() {
        None => false,
        Some("start") => true,
        // acp-journal's own cursor: served from the journal, whatever the agent can resume.
        Some(TAIL_CURSOR) => {
            loads.serve(cx, id, msg, true, false);
            return Resume::Served;
        }
        Some(_) if cx.peers_mut().agent.resume => return Resume::Passes,
        Some(other) => {
            cx.fx().journal_client(at, Target::Run, peek, line);
            let message =
                format!("Invalid params: acp-journal cannot replay from a {other:?} cursor");
            let error = error_json(-32602, &message, Some(json!({"replayFrom": other})));
            cx.fx().answer(at, Target::Run, id, Err(&error));
            return Resume::Served;
        }
    };
    if !cx.peers().agent.resume {
        loads.serve(cx, id, msg, replay, false);
        return Resume::Served;
    }
    Resume::Native { replay }
}

/// What becomes of an ACP v2 `session/resume` ([`resume_v2`]).
pub(super) enum Resume {
    /// Served from the journal, or refused here.
    Served,
    /// The agent's to take or refuse, as it came.
    Passes,
    /// The agent's, as a load of its own its session keeps ([`native_load`]; `replay`: the
    /// agent replays the history).
    Native { replay: bool },
}

/// The load or resume the client sends the agent itself (request `id`, `peek`; `replay`: the
/// agent replays the history) that its session keeps until the agent answers: one that
/// replays (the replay is held), or, in `auto` and `journal` modes, one the journal serves
/// should the agent fail it.
pub(super) fn native_load(
    cx: &Cx,
    id: &RequestId,
    peek: &Peek<'_>,
    replay: bool,
) -> Option<NativeLoad> {
    let fallback = LoadRequest::parse(id, peek, replay).filter(|_| cx.emulates_loading());
    (replay || fallback.is_some()).then(|| NativeLoad::new(id.clone(), replay, fallback))
}

/// The agent answered (`msg`) a load or resume the client sent it of `session`, which keeps it
/// with what serves it from the journal (as the route found): on success its held replay goes
/// out before the answer; on failure the load is served from the journal instead (the held
/// replay, which the journal's replaces, is dropped).
pub(super) fn native_answered(
    cx: &mut Cx,
    loads: &mut Loads,
    mut session: SessionMut<'_>,
    msg: Line<'_>,
) -> NativeAnswer {
    let Line {
        peek, bytes: line, ..
    } = msg;
    let Kind::Response { id, is_error } = &peek.kind else {
        return NativeAnswer::Passes(Vec::new());
    };
    let client_id = cx.ids().client_id(id);
    let Some(native) = session.native_load_mut() else {
        return NativeAnswer::Passes(Vec::new());
    };
    let Some(mut request) = native.fallback.take() else {
        return NativeAnswer::Passes(Vec::new());
    };
    let overflowed = native.held.overflowed();
    let held = native.held.take();
    if !is_error {
        // The replay goes out still marked as the agent's own (not journaled again); the
        // answer's rewrite ends the load.
        session.set_up(request.setup.clone());
        return NativeAnswer::Passes(held);
    }
    if super::load_state::refused_by_lease(line) {
        // A host refused it: another host continues the session, and nothing here may
        // continue it as a new one instead. The refusal goes to the client.
        return NativeAnswer::Passes(held);
    }
    // Served from the journal: the answer, and the pending entry the route handed on with it,
    // go no further.
    cx.ids().restore(id);
    session.end_native_load(&client_id);
    request.replay &= !overflowed;
    request.agent_failed = Some(line.clone());
    let op = cx.next_op();
    loads.start(cx, op, request);
    NativeAnswer::Served
}

/// What became of an agent's answer to a load or resume.
pub(super) enum NativeAnswer {
    /// The agent succeeded: the replay it sent meanwhile (held) goes out before the answer.
    Passes(Vec<Bytes>),
    /// The agent failed: the journal serves the load (the answer is consumed).
    Served,
}

/// A v2 `session/resume`'s `replayFrom` cursor type: `None` when there is none (absent or
/// `null`), `""` when it has no string `type`.
pub(super) fn replay_from(params: Option<crate::wire::envelope::Raw<'_>>) -> Option<String> {
    let params: serde_json::Value = serde_json::from_str(params?.get()).ok()?;
    let from = params.get("replayFrom").filter(|v| !v.is_null())?;
    Some(from["type"].as_str().unwrap_or_default().to_string())
}
