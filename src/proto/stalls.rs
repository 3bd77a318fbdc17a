//! The stall watch (`--stall-timeout`): a prompt the agent has been silent on for that long is
//! cancelled, and if the agent stays silent for the grace period after, it is restarted. Each
//! session's prompt in flight carries its watch ([`super::prompt::PromptWatch`]); what the
//! agent sends for a session, or the client answers it, counts as activity.

use serde_json::json;

use super::context::Cx;
use super::prompt::{PromptWatch, Stall};
use super::sessions::SessionTable;
use super::vocab::{Action, AgentRef, SessionId, Stamp, Target, secs};
use crate::journal::Event;
use crate::wire::Side;
use crate::wire::envelope::{Kind, Peek, RequestId};

/// When the next prompt stalls (monotonic microseconds), with `--stall-timeout`.
pub(super) fn next_check(cx: &Cx, sessions: &SessionTable) -> Option<u64> {
    let timeout = cx.config().stall_timeout_us?;
    if !sessions.prompting() {
        return None;
    }
    let grace = cx.config().stall_grace_us;
    let watches = sessions.iter().filter_map(|(_, session)| session.watch());
    watches.filter_map(|w| w.next_check(timeout, grace)).min()
}

/// The prompt a client line (`peek`, from `from`) starts its session's watch with, with
/// `--stall-timeout`: a `session/prompt` (its id, and the session it names).
pub(super) fn watched_prompt<'p>(
    cx: &Cx,
    from: Side,
    peek: &'p Peek<'_>,
) -> Option<(&'p RequestId, &'p str)> {
    if cx.config().stall_timeout_us.is_none() || from != Side::Client {
        return None;
    }
    match &peek.kind {
        Kind::Request { id, method } if method == "session/prompt" => {
            Some((id, peek.session.as_deref()?))
        }
        _ => None,
    }
}

/// The session whose prompt in flight a line (`peek`, from `from`) is activity of, resetting
/// its watch: the agent's (naming the session's own ID, or a child session of it: a
/// subagent's work is its parent's), or the client's answer to the agent's request.
pub(super) fn active_session(
    cx: &Cx,
    sessions: &SessionTable,
    from: Side,
    peek: &Peek<'_>,
) -> Option<SessionId> {
    match (from, &peek.kind) {
        (Side::Agent, _) => peek.session.as_deref().map(|s| match sessions.root_of(s) {
            Some(root) => root.clone(),
            None => sessions.client_of(AgentRef(s)),
        }),
        (Side::Client, Kind::Response { id, .. }) => cx
            .pending()
            .get(&(Side::Agent, id.clone()))
            .and_then(|p| p.session.clone()),
        (Side::Client, _) => None,
    }
}

/// Time passed (`at`): with `--stall-timeout`, the watches (`watches`: every prompt in
/// flight's, by its session) that stall, by session in order of ID ([`PromptWatch::check`]).
pub(super) fn stalled<'a>(
    cx: &Cx,
    watches: impl Iterator<Item = (&'a SessionId, &'a mut PromptWatch)>,
    at: Stamp,
) -> Vec<(SessionId, Stall)> {
    let Some(timeout) = cx.config().stall_timeout_us else {
        return Vec::new();
    };
    let pending = cx.pending();
    let waiting = |s: &str| {
        pending
            .iter()
            .any(|((side, _), p)| *side == Side::Agent && p.session.as_deref() == Some(s))
    };
    let (now, grace) = (at.mono_us, cx.config().stall_grace_us);
    let mut stalls: Vec<(SessionId, Stall)> = watches
        .filter_map(|(s, watch)| {
            let stall = watch.check(now, timeout, grace, waiting(s))?;
            Some((s.clone(), stall))
        })
        .collect();
    stalls.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    stalls
}

/// The prompts that stalled (`stalls`, [`stalled`]): one the agent has been silent on for
/// `--stall-timeout` is cancelled, and if the agent stays silent for the grace period after,
/// it is restarted ([`Action::RestartAgent`]).
pub(super) fn act(
    cx: &mut Cx,
    sessions: &SessionTable,
    at: Stamp,
    stalls: Vec<(SessionId, Stall)>,
) {
    let Some(timeout) = cx.config().stall_timeout_us else {
        return;
    };
    let mut restart = false;
    for (s, stall) in stalls {
        let action = match stall {
            Stall::Cancel => "cancel",
            Stall::Restart => "restart",
        };
        let event = Event::PromptStalled {
            action: action.into(),
        };
        cx.fx().event(at, Target::Session(s.clone()), event);
        match stall {
            Stall::Cancel => {
                cx.fx().push(Action::Log(format!(
                    "the agent sent nothing for session {s} for {} s: cancelling the prompt",
                    secs(timeout)
                )));
                let params = json!({"sessionId": sessions.agent_id(&s).as_str()}).to_string();
                cx.fx()
                    .send_agent(at, Target::Session(s), None, "session/cancel", &params);
            }
            Stall::Restart => {
                cx.fx().push(Action::Log(format!(
                    "the agent did not answer the cancelled prompt of session {s}: restarting it"
                )));
                restart = true;
            }
        }
    }
    if restart {
        cx.fx().push(Action::RestartAgent);
    }
}
