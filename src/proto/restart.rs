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

use super::{SessionId, Stamp};
use crate::wire::envelope::RequestId;

/// A restarted agent being initialized.
#[derive(Debug)]
pub(super) struct Reinit {
    /// When the recorded `initialize` was sent again (monotonic microseconds): past
    /// `Config::reinit_timeout_us` without an answer the agent is taken for failed.
    pub(super) since: u64,
    /// Client lines that arrived meanwhile, in order.
    pub(super) held: Vec<Bytes>,
    /// Their bytes.
    pub(super) held_bytes: usize,
    /// The proxy gave up on this agent (it asked the shell to restart it).
    pub(super) timed_out: bool,
}

impl Reinit {
    pub(super) fn new(at: Stamp) -> Reinit {
        Reinit {
            since: at.mono_us,
            held: Vec::new(),
            held_bytes: 0,
            timed_out: false,
        }
    }

    /// Hold a client line until the agent is ready.
    pub(super) fn hold(&mut self, line: Bytes) {
        self.held_bytes += line.len();
        self.held.push(line);
    }

    /// When the agent's silence on `initialize` becomes a failure (monotonic microseconds),
    /// unless the proxy already gave up on it.
    pub(super) fn deadline(&self, timeout: u64) -> Option<u64> {
        (!self.timed_out).then(|| self.since.saturating_add(timeout))
    }
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

/// A line of (client-facing) session `s` from the agent, or the client's answer to the agent's
/// request in it: the prompt of that session is alive.
pub(super) fn prompt_active(
    prompts: &mut std::collections::HashMap<SessionId, PromptWatch>,
    s: &SessionId,
    at: Stamp,
) {
    if let Some(watch) = prompts.get_mut(s) {
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

/// The next time [`stalls`] can find something to do (monotonic microseconds).
pub(super) fn next_stall_check(
    prompts: &std::collections::HashMap<SessionId, PromptWatch>,
    timeout: u64,
    grace: u64,
) -> Option<u64> {
    prompts
        .values()
        .filter_map(|watch| match watch.cancelled_at {
            None => Some(watch.last.saturating_add(timeout)),
            Some(at) if !watch.restart_asked => Some(at.max(watch.last).saturating_add(grace)),
            Some(_) => None,
        })
        .min()
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
