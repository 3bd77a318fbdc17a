//! Agent lines held back on their way to the client: the agent's own replay hidden under
//! `--load journal`, a native load's replay until the agent's answer says whether it stands,
//! and a session's lines while a load brings it up (or while a load waits for the agent to
//! start a session it does not know yet). Past their bound, lines go out as they come, after
//! those held. A child session's lines are held as its root's.

use bytes::Bytes;

use super::context::Cx;
use super::load_request::NATIVE_HOLD_BYTES;
use super::loading::Loads;
use super::vocab::AgentRef;
use crate::wire::envelope::Peek;

/// What becomes of an agent line naming a session.
pub(super) enum Holding {
    /// Held (or dropped: the agent's own replay under `--load journal`).
    Taken,
    /// It goes its usual way, after the lines held before it (if any).
    Passes(Vec<Bytes>),
}

/// Hold an agent request or notification (`line`, described by `peek`) that must not reach
/// the client yet.
pub(super) fn hold_agent_line(
    cx: &mut Cx,
    loads: &Loads,
    peek: &Peek<'_>,
    line: &Bytes,
) -> Holding {
    let Some(named) = peek.session.as_deref() else {
        return Holding::Passes(Vec::new());
    };
    // A child session's lines (a subagent's) are held with its root's: in a native load's
    // replay, the agent replays its children too.
    let root = cx
        .sessions
        .is_child(named)
        .then(|| cx.sessions.agent_id(&cx.sessions.owner(named)));
    let session = root.as_ref().map_or(named, |r| r.as_str());
    let update = peek.method() == Some("session/update");
    if cx.sessions.hides_replay(session) && update {
        return Holding::Taken; // the agent's own replay under `--load journal`
    }
    if let Some(native) = cx
        .sessions
        .native_load_mut(session)
        .filter(|n| update && n.holds_replay())
    {
        if native.held.hold(line, NATIVE_HOLD_BYTES) {
            return Holding::Taken;
        }
        return Holding::Passes(native.held.take());
    }
    let agent = AgentRef(session);
    if !loads.starting(&cx.sessions, agent) {
        return Holding::Passes(Vec::new());
    }
    if cx.sessions.hold(agent, line, cx.config.held_limit) {
        return Holding::Taken;
    }
    // Past the bound the lines go out as they come, after those held.
    Holding::Passes(cx.sessions.take_held(agent))
}
