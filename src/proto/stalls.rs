//! The stall watch (`--stall-timeout`): a prompt the agent has been silent on for that long is
//! cancelled, and if the agent stays silent for the grace period after, it is restarted. Each
//! session's prompt in flight carries its watch ([`super::prompt::PromptWatch`]); what the
//! agent sends for a session, or the client answers it, counts as activity.

use serde_json::json;

use super::context::Cx;
use super::prompt::Stall;
use super::sessions::{SessionTable, Slot};
use super::vocab::{Action, AgentRef, SessionId, Stamp, Target, secs};
use crate::journal::Event;
use crate::wire::Side;
use crate::wire::envelope::{Kind, Peek};

/// When the next prompt stalls (monotonic microseconds), with `--stall-timeout`.
pub(super) fn next_check(cx: &Cx, sessions: &SessionTable) -> Option<u64> {
    let timeout = cx.config.stall_timeout_us?;
    if !sessions.prompting() {
        return None;
    }
    let grace = cx.config.stall_grace_us;
    let watches = sessions.iter().filter_map(|(_, session)| session.watch());
    watches.filter_map(|w| w.next_check(timeout, grace)).min()
}

/// A client's `session/prompt` starts its session's watch (the session in `slot` when the
/// route resolved it).
pub(super) fn prompt_sent(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    from: Side,
    peek: &Peek<'_>,
    at: Stamp,
    slot: Option<Slot>,
) {
    if cx.config.stall_timeout_us.is_some()
        && from == Side::Client
        && let Kind::Request { id, method } = &peek.kind
        && method == "session/prompt"
        && let Some(s) = peek.session.as_deref()
    {
        let slot = slot.unwrap_or_else(|| {
            let s = sessions.id(s);
            sessions.made(&s)
        });
        sessions.start_prompt(slot, id.clone(), at);
    }
}

/// A line of a session with a prompt in flight: the agent's (naming its own ID, or a child
/// session of it: a subagent's work is its parent's), or the client's answer to the agent's
/// request, is activity that resets the watch.
pub(super) fn activity(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    from: Side,
    peek: &Peek<'_>,
    at: Stamp,
) {
    let session = match (from, &peek.kind) {
        (Side::Agent, _) => peek.session.as_deref().map(|s| match sessions.root_of(s) {
            Some(root) => root.clone(),
            None => sessions.client_of(AgentRef(s)),
        }),
        (Side::Client, Kind::Response { id, .. }) => cx
            .pending
            .get(&(Side::Agent, id.clone()))
            .and_then(|p| p.session.clone()),
        (Side::Client, _) => None,
    };
    if let Some(session) = session.and_then(|s| sessions.get_mut(&s)) {
        session.prompt_active(at.mono_us);
    }
}

/// Time passed: with `--stall-timeout`, a prompt the agent has been silent on for that long
/// is cancelled, and if the agent stays silent for the grace period after, it is restarted
/// ([`Action::RestartAgent`]).
pub(super) fn check(cx: &mut Cx, sessions: &mut SessionTable, at: Stamp) {
    let Some(timeout) = cx.config.stall_timeout_us else {
        return;
    };
    if !sessions.prompting() {
        return;
    }
    let pending = &cx.pending;
    let waiting = |s: &str| {
        pending
            .iter()
            .any(|((side, _), p)| *side == Side::Agent && p.session.as_deref() == Some(s))
    };
    // The stalls at `now`, by session in order of ID (`PromptWatch::check`).
    let mut watched: Vec<SessionId> = (sessions.iter())
        .filter(|(_, session)| session.watch().is_some())
        .map(|(s, _)| s.clone())
        .collect();
    watched.sort_unstable();
    let (now, grace) = (at.mono_us, cx.config.stall_grace_us);
    let stalls: Vec<(SessionId, Stall)> = watched
        .into_iter()
        .filter_map(|s| {
            let waiting = waiting(&s);
            let watch = sessions.get_mut(&s)?.watch_mut()?;
            let stall = watch.check(now, timeout, grace, waiting)?;
            Some((s, stall))
        })
        .collect();
    let mut restart = false;
    for (s, stall) in stalls {
        let action = match stall {
            Stall::Cancel => "cancel",
            Stall::Restart => "restart",
        };
        let event = Event::PromptStalled {
            action: action.into(),
        };
        cx.fx.event(at, Target::Session(s.clone()), event);
        match stall {
            Stall::Cancel => {
                cx.fx.push(Action::Log(format!(
                    "the agent sent nothing for session {s} for {} s: cancelling the prompt",
                    secs(timeout)
                )));
                let params = json!({"sessionId": sessions.agent_id(&s).as_str()}).to_string();
                cx.fx
                    .send_agent(at, Target::Session(s), None, "session/cancel", &params);
            }
            Stall::Restart => {
                cx.fx.push(Action::Log(format!(
                    "the agent did not answer the cancelled prompt of session {s}: restarting it"
                )));
                restart = true;
            }
        }
    }
    if restart {
        cx.fx.push(Action::RestartAgent);
    }
}
