//! Agent lines held back on their way to the client: the agent's own replay hidden under
//! `--load journal`, a native load's replay until the agent's answer says whether it stands,
//! and a session's lines while a load brings it up (or while a load waits for the agent to
//! start a session it does not know yet). Past their bound, lines go out as they come, after
//! those held. A child session's lines are held as its root's. The route decides a hold
//! ([`Hold`]) and applies it: a native load's replay to the load's session
//! ([`hold_native_replay`]), a starting session's lines to the table's held lines.

use bytes::Bytes;

use super::load_request::NATIVE_HOLD_BYTES;
use super::sessions::{SessionMut, Slot};
use super::vocab::AgentSessionId;

/// Why an agent line is held, and the agent-side session it is held with (a child's root's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Hold {
    /// The agent's own replay under `--load journal`: dropped.
    Hidden,
    /// A native load's replay, until the agent's answer says whether it stands (the load's
    /// session, in its slot).
    NativeReplay(Slot),
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

/// Hold a line of a native load's replay (`line`) in its session's load, until the agent's
/// answer says whether the replay stands.
pub(super) fn hold_native_replay(mut session: SessionMut<'_>, line: &Bytes) -> Holding {
    let Some(native) = session.native_load_mut() else {
        return Holding::Passes(Vec::new());
    };
    if native.held.hold(line, NATIVE_HOLD_BYTES) {
        return Holding::Taken;
    }
    Holding::Passes(native.held.take())
}
