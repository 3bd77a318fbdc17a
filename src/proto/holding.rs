//! Agent lines held back on their way to the client: the agent's own replay hidden under
//! `--load journal`, a native load's replay until the agent's answer says whether it stands,
//! and a session's lines while a load brings it up (or while a load waits for the agent to
//! start a session it does not know yet). Past their bound, lines go out as they come, after
//! those held. A child session's lines are held as its root's.

use bytes::Bytes;

use super::context::Cx;
use super::load_request::NATIVE_HOLD_BYTES;
use super::sessions::SessionTable;
use super::vocab::{AgentRef, AgentSessionId};

/// Why an agent line is held, and the agent-side session it is held with (a child's root's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Hold {
    /// The agent's own replay under `--load journal`: dropped.
    Hidden,
    /// A native load's replay, until the agent's answer says whether it stands.
    NativeReplay(AgentSessionId),
    /// A load brings the session up (or waits for the agent to start one it does not know).
    Starting(AgentSessionId),
}

/// What becomes of a held agent line.
pub(super) enum Holding {
    /// Held (or dropped: the agent's own replay under `--load journal`).
    Taken,
    /// It goes its usual way, after the lines held before it (if any).
    Passes(Vec<Bytes>),
}

/// Hold an agent request or notification (`line`) as [`Hold`] says (the route decided it).
pub(super) fn hold_agent_line(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    hold: &Hold,
    line: &Bytes,
) -> Holding {
    match hold {
        Hold::Hidden => Holding::Taken,
        Hold::NativeReplay(session) => {
            let native = sessions.get_mut(session.as_str());
            let Some(native) = native.and_then(|x| x.native_load_mut()) else {
                return Holding::Passes(Vec::new());
            };
            if native.held.hold(line, NATIVE_HOLD_BYTES) {
                return Holding::Taken;
            }
            Holding::Passes(native.held.take())
        }
        Hold::Starting(session) => {
            let agent = AgentRef(session.as_str());
            let limit = cx.config.held_limit;
            if sessions.hold_starting(agent, line, limit) {
                return Holding::Taken;
            }
            // Past the bound the lines go out as they come, after those held.
            Holding::Passes(sessions.take_starting(agent))
        }
    }
}
