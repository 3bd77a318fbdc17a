//! The client requests the core handles (the route's part that hands them over) ([`Handling`], as the route decided from the method,
//! `--load` and what the agent declared), handed to their owners: a load or resume served from
//! the journal or done by the agent (its session keeps it), a v2 resume, a fork, a list, a close
//! or a delete. The route resolved the request's session: what a request changes of it, the
//! route's code writes here (the session made, its native load begun, set not live), a
//! component acts on the session handed to it ([`closing::close`]).

use crate::proto::closing;
use crate::proto::context::Cx;
use crate::proto::fork::Forks;
use crate::proto::listing::Lists;
use crate::proto::loading::Loads;
use crate::proto::native::{self, Resume};
use crate::proto::sessions::{SessionTable, Slot};
use crate::proto::vocab::{Line, SessionId};
use crate::wire::envelope::{Kind, Peek, RequestId};

/// What the core does with a client request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::proto) enum Handling {
    /// `session/load` or `session/resume` served from the journal (`replay`: the history
    /// goes first).
    FromJournal { replay: bool },
    /// A load or resume the agent does itself, kept by its session until answered.
    Native { replay: bool },
    /// An ACP v2 `session/resume` (its `replayFrom` decides).
    ResumeV2,
    /// `session/fork` made in the journal.
    Fork,
    /// `session/list`: the journal's, or merged with the agent's.
    List,
    /// `session/close` the agent does.
    CloseByAgent,
    /// `session/close` answered here.
    Close,
    /// `session/delete`.
    Delete,
    /// Nothing to do: the request passes.
    Pass,
}

/// The components a client request the core handles may be handed to.
pub(in crate::proto) struct Owners<'a> {
    pub(in crate::proto) loads: &'a mut Loads,
    pub(in crate::proto) lists: &'a mut Lists,
    pub(in crate::proto) forks: &'a mut Forks,
}

/// A client request (`msg`; the session it names in `slot` when the table has it) the core
/// handles as `handling` says (true: taken here).
pub(super) fn take_request(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    owners: Owners<'_>,
    handling: Handling,
    msg: Line<'_>,
    slot: Option<Slot>,
) -> bool {
    let Line {
        at,
        peek,
        bytes: line,
    } = msg;
    let Kind::Request { id, .. } = &peek.kind else {
        return false;
    };
    let session = || peek.session.as_deref().map(SessionId::from);
    match handling {
        Handling::FromJournal { replay } => {
            owners.loads.serve(cx, id, msg, replay, false);
            true
        }
        Handling::Native { replay } => {
            begin_native_load(cx, sessions, slot, id, peek, replay);
            false
        }
        Handling::ResumeV2 => match native::resume_v2(cx, owners.loads, id, msg) {
            Resume::Native { replay } => {
                begin_native_load(cx, sessions, slot, id, peek, replay);
                false
            }
            Resume::Passes => false,
            Resume::Served => true,
        },
        Handling::Fork => {
            owners.forks.start(cx, at, id, peek, line);
            true
        }
        Handling::List => owners.lists.start(cx, at, id, peek, line),
        Handling::CloseByAgent => {
            // A later load must bring the session up again.
            if let Some(slot) = slot {
                sessions.at_mut(slot).set_not_live();
            }
            false
        }
        Handling::Close => session().is_some_and(|s| {
            let slot = slot.unwrap_or_else(|| sessions.made(&s));
            closing::close(cx, sessions.at_mut(slot), id, msg);
            true
        }),
        Handling::Delete => session().is_some_and(|s| closing::delete(cx, at, s, id, peek, line)),
        Handling::Pass => false,
    }
}

/// The client sends the agent its own load or resume of the session `peek` names (in `slot`
/// when the table has it; request `id`; `replay`: the agent replays the history): the
/// session keeps it, if it must ([`native::native_load`]), until the agent answers.
fn begin_native_load(
    cx: &Cx,
    sessions: &mut SessionTable,
    slot: Option<Slot>,
    id: &RequestId,
    peek: &Peek<'_>,
    replay: bool,
) {
    let Some(s) = peek.session.as_deref() else {
        return;
    };
    if let Some(load) = native::native_load(cx, id, peek, replay) {
        let slot = slot.unwrap_or_else(|| sessions.made(&SessionId::from(s)));
        sessions.at_mut(slot).begin_native_load(load);
    }
}
