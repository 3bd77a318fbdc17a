//! The prompt turn in flight in a session, one record its session holds ([`Turn`]): who
//! prompted, when the session has several client connections ([`Prompter`]: routing sends the
//! agent's requests of the turn to that connection, refuses another's prompt meanwhile, and
//! tells the others when it ends), and its stall watch (`--stall-timeout`, [`PromptWatch`]):
//! silent for the timeout, the prompt is cancelled; still silent for the grace period after,
//! the agent is restarted (the transitions are [`super::stalls`]'s).

use super::vocab::{ConnId, Stamp};
use crate::wire::envelope::RequestId;

/// A session's prompt turn in flight: each part set by what needs it, the turn over when both
/// are.
#[derive(Debug, Default)]
pub(super) struct Turn {
    /// Who prompted (a session of several client connections).
    pub(super) prompter: Option<Prompter>,
    /// The stall watch (with `--stall-timeout`).
    pub(super) watch: Option<PromptWatch>,
    /// ACP v2: the agent reported foreground work (`running`, `requires_action`) and not yet
    /// its end (`idle`).
    pub(super) foreground: bool,
}

/// The client connection that sent a session's prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Prompter {
    /// The connection that sent the prompt.
    pub(super) conn: ConnId,
    /// The prompt's id, as sent to the agent: its answer ends the turn for the connections.
    pub(super) sent: RequestId,
    /// Tell the other attached connections when it ends (ACP v1: nothing else does; a v2 agent
    /// reports its `idle` state itself).
    pub(super) tell_end: bool,
}

/// A prompt in flight, watched for stalls.
#[derive(Debug)]
pub(super) struct PromptWatch {
    /// The client's request id.
    id: RequestId,
    /// When the agent last sent anything for its session (monotonic microseconds).
    last: u64,
    /// When the proxy cancelled it for stalling.
    cancelled_at: Option<u64>,
    /// The proxy asked for a restart already.
    restart_asked: bool,
}

/// What a stalled prompt calls for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stall {
    /// Cancel it.
    Cancel,
    /// Its cancel went unanswered: restart the agent.
    Restart,
}

impl PromptWatch {
    /// The client's prompt `id`, sent at `at`.
    pub(super) fn new(id: RequestId, at: Stamp) -> PromptWatch {
        PromptWatch {
            id,
            last: at.mono_us,
            cancelled_at: None,
            restart_asked: false,
        }
    }

    /// True for the prompt of request `id`.
    pub(super) fn is(&self, id: &RequestId) -> bool {
        self.id == *id
    }

    /// Its session heard from the agent (or the client answered the agent in it) at `now`.
    pub(super) fn active(&mut self, now: u64) {
        self.last = now;
    }

    /// The next time [`PromptWatch::check`] can find something to do (monotonic microseconds).
    pub(super) fn next_check(&self, timeout: u64, grace: u64) -> Option<u64> {
        match self.cancelled_at {
            None => Some(self.last.saturating_add(timeout)),
            Some(at) if !self.restart_asked => Some(at.max(self.last).saturating_add(grace)),
            Some(_) => None,
        }
    }

    /// What it calls for at `now`: silent for `timeout`, a cancel; cancelled and silent for
    /// `grace` more, a restart. `waiting_on_client`: the agent waits for the client's answer in
    /// its session, so its silence is no stall.
    pub(super) fn check(
        &mut self,
        now: u64,
        timeout: u64,
        grace: u64,
        waiting_on_client: bool,
    ) -> Option<Stall> {
        if waiting_on_client {
            self.last = now;
            return None;
        }
        match self.cancelled_at {
            None if now.saturating_sub(self.last) >= timeout => {
                self.cancelled_at = Some(now);
                Some(Stall::Cancel)
            }
            Some(at) if !self.restart_asked && now.saturating_sub(at.max(self.last)) >= grace => {
                self.restart_asked = true;
                Some(Stall::Restart)
            }
            _ => None,
        }
    }
}
