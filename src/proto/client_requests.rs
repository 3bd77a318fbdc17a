//! How the core handles a client request, decided once from its method, the mode
//! (`--load`) and what the agent declared: served from the journal, passed on with what
//! serves it should the agent fail it, answered here, or passed as it came.

use super::context::Cx;
use super::listing::Lists;
use super::load_request::tail_turns;
use super::loading::Loads;
use super::vocab::SessionId;
use crate::wire::envelope::{self, Peek};

/// What the core does with a client request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Handling {
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

/// The handling of a client request of `method` (`peek`): a `session/load` that asks for the
/// tail of the history only is served from the journal, whatever the agent can load.
pub(super) fn handling(cx: &Cx, method: &str, peek: &Peek<'_>) -> Handling {
    let emulates = cx.emulates_loading();
    let agent = &cx.agent;
    match method {
        "session/load" if cx.synthesizes_load() || (emulates && asks_tail(peek)) => {
            Handling::FromJournal { replay: true }
        }
        "session/load" => Handling::Native { replay: true },
        "session/resume" if agent.v2 && emulates => Handling::ResumeV2,
        "session/resume" if !agent.resume && emulates => Handling::FromJournal { replay: false },
        "session/resume" if emulates => Handling::Native { replay: false },
        "session/fork" if !agent.fork && emulates => Handling::Fork,
        "session/list" => Handling::List,
        "session/close" if agent.close => Handling::CloseByAgent,
        "session/close" => Handling::Close,
        "session/delete" => Handling::Delete,
        _ => Handling::Pass,
    }
}

/// A `session/load` that asks for the tail of the history only
/// ([`super::load_request::tail_turns`]).
fn asks_tail(peek: &Peek<'_>) -> bool {
    peek.params
        .filter(|p| p.get().contains("\"tail\""))
        .and_then(|p| serde_json::from_str(p.get()).ok())
        .is_some_and(|params| tail_turns(&params).is_some())
}

/// The operation a client's `$/cancel_request` or `session/cancel` notification (`method`)
/// cancels, and why: a load or restore served from the journal, or a list served here. On a
/// host's live session a `session/cancel` is for the turn, not for a client joining it.
pub(super) fn cancelled(
    cx: &Cx,
    loads: &Loads,
    lists: &Lists,
    hosted: bool,
    method: &str,
    peek: &Peek<'_>,
) -> Option<(u64, &'static str)> {
    match method {
        "$/cancel_request" => {
            let rid = envelope::request_id(peek.params)?;
            let op = loads.by_request(&rid).or_else(|| {
                let (op, list) = lists.of_request(&rid)?;
                (!list.forwarded).then_some(op)
            })?;
            Some((op, "cancelled by $/cancel_request"))
        }
        "session/cancel" => {
            let s = peek.session.as_deref().map(SessionId::from)?;
            if hosted && cx.sessions.is_live(&s) {
                return None;
            }
            Some((cx.sessions.get(&s)?.load?, "cancelled by session/cancel"))
        }
        _ => None,
    }
}
