//! Sessions that outlive their agent: what the core keeps to restart an agent (the client lines
//! that wait while the new agent is initialized) and to notice a stalled prompt
//! (`--stall-timeout`).
//!
//! When the agent dies while the client is connected, the shell starts it again and calls
//! [`super::Proxy::handle_agent_restart`]: every client request still waiting is answered with an
//! error that says so (a prompt is never retried: tools may have run), requests of the dead agent
//! still open at the client are answered into the journal only, the recorded `initialize` (and
//! `authenticate`) go to the new agent, and every live session becomes lost: the next client
//! request that names it brings it up again ([`super::loading`], a restore) before it is sent.

use bytes::Bytes;

use super::sessions::SessionTable;
use super::{SessionId, Stamp};
use crate::wire::envelope::{Peek, RequestId};

/// A restarted agent being initialized.
#[derive(Debug, Default)]
pub(super) struct Reinit {
    /// Client lines that arrived meanwhile, in order.
    pub(super) held: Vec<Bytes>,
}

/// A prompt in flight, watched for stalls.
#[derive(Debug)]
pub(super) struct PromptWatch {
    /// The client's request id.
    pub(super) id: RequestId,
    /// When the agent last sent anything for its session (monotonic microseconds).
    pub(super) last: u64,
    /// When the proxy cancelled it for stalling.
    pub(super) cancelled_at: Option<u64>,
    /// The proxy asked for a restart already.
    pub(super) restart_asked: bool,
}

impl PromptWatch {
    pub(super) fn new(id: RequestId, at: Stamp) -> PromptWatch {
        PromptWatch {
            id,
            last: at.mono_us,
            cancelled_at: None,
            restart_asked: false,
        }
    }
}

/// What a stalled prompt calls for.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Stall {
    /// Cancel the prompt of this session.
    Cancel(SessionId),
    /// Its cancel went unanswered: restart the agent (for this session).
    Restart(SessionId),
}

/// An agent line: the prompt of the session it names is alive.
pub(super) fn agent_active(
    prompts: &mut std::collections::HashMap<SessionId, PromptWatch>,
    sessions: &SessionTable,
    peek: &Peek<'_>,
    at: Stamp,
) {
    let Some(s) = peek.session.as_deref() else {
        return;
    };
    let client = sessions.client_id(s).map_or(s, |c| &**c);
    if let Some(watch) = prompts.get_mut(client) {
        watch.last = at.mono_us;
    }
}

/// The prompt of session `s` with request id `id` was answered.
pub(super) fn prompt_answered(
    prompts: &mut std::collections::HashMap<SessionId, PromptWatch>,
    s: &str,
    id: &RequestId,
) {
    if prompts.get(s).is_some_and(|w| &w.id == id) {
        prompts.remove(s);
    }
}

/// The stalls at `now`: prompts silent for `timeout` get a cancel, cancelled ones silent for
/// `grace` more a restart. `waiting_on_client` says the agent is waiting for the client's answer
/// in a session (its silence is then no stall).
pub(super) fn stalls(
    prompts: &mut std::collections::HashMap<SessionId, PromptWatch>,
    now: u64,
    timeout: u64,
    grace: u64,
    waiting_on_client: impl Fn(&str) -> bool,
) -> Vec<Stall> {
    let mut out = Vec::new();
    let mut sessions: Vec<&SessionId> = prompts.keys().collect();
    sessions.sort_unstable();
    let sessions: Vec<SessionId> = sessions.into_iter().cloned().collect();
    for s in sessions {
        let Some(watch) = prompts.get_mut(&s) else {
            continue;
        };
        if waiting_on_client(&s) {
            watch.last = now;
            continue;
        }
        match watch.cancelled_at {
            None if now.saturating_sub(watch.last) >= timeout => {
                watch.cancelled_at = Some(now);
                out.push(Stall::Cancel(s));
            }
            Some(at) if !watch.restart_asked && now.saturating_sub(at.max(watch.last)) >= grace => {
                watch.restart_asked = true;
                out.push(Stall::Restart(s));
            }
            _ => {}
        }
    }
    out
}
