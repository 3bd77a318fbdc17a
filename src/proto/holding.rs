//! Agent lines held back on their way to the client: the agent's own replay hidden under
//! `--load journal`, a native load's replay until the agent's answer says whether it stands,
//! and a session's lines while a load brings it up (or while a load waits for the agent to
//! start a session it does not know yet). Past their bound, lines go out as they come, after
//! those held. A child session's lines are held as its root's.

use bytes::Bytes;

use super::context::Cx;
use super::load_request::NATIVE_HOLD_BYTES;
use super::loading::Loads;
use super::sessions::{Session, SessionTable, Slot};
use super::vocab::{AgentRef, AgentSessionId, SessionId};

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

/// Why an agent line naming `named` (in `slot` when the table has it; `update`: a
/// `session/update`) is held, if it is: its
/// session (a child's root: in a native load's replay the agent replays its children too)
/// hides the agent's own replay, a native load holds its replay, or a load is bringing the
/// session up.
pub(super) fn hold_of(
    sessions: &SessionTable,
    loads: &Loads,
    named: &str,
    slot: Option<Slot>,
    update: bool,
) -> Option<Hold> {
    let root = slot.and_then(|slot| sessions.root_at(slot));
    let root = root.map(|root| sessions.agent_id(root));
    let s = root.as_ref().map_or(named, |r| r.as_str());
    let session = match (&root, slot) {
        (None, Some(slot)) => Some(&sessions[slot]),
        (None, None) => None,
        (Some(_), _) => sessions.get(s),
    };
    // The agent-side session a load brings up natively may be another than the session's
    // own ID (the one of the agent's copies that holds every turn): its replay is the
    // session's, hidden too.
    let mapped_from = || {
        sessions
            .mapping_of_agent(AgentRef(s))
            .and_then(|(client, _)| sessions.get(client))
    };
    if update && (session.or_else(mapped_from)).is_some_and(Session::hides_replay) {
        Some(Hold::Hidden)
    } else if update
        && session
            .and_then(|x| x.native_load())
            .is_some_and(|n| n.holds_replay())
    {
        Some(Hold::NativeReplay(AgentSessionId::native(
            &SessionId::from(s),
        )))
    } else if sessions.starting_as(AgentRef(s))
        || (!session.is_some_and(|x| x.journal_open())
            && !sessions.knows(AgentRef(s))
            && loads.awaiting_new_session())
    {
        // A load is bringing the session up, or waits for the agent to start one it does not
        // know yet.
        Some(Hold::Starting(AgentSessionId::native(&SessionId::from(s))))
    } else {
        None
    }
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
