//! The agent process's life as the main loop follows it. Its stdout's end, its stderr's end and
//! its exit status arrive in any order; the proxy is done with an agent once it has all three.
//! Around them run two timers: after the client leaves, SIGTERM then SIGKILL if the agent stays
//! (`--grace` each); after the agent exits, how long its output may stay open (a process it
//! started may hold it) before the loop stops reading it. An agent whose output ended while it
//! may be restarted is *dying*: the loop restarts it, or not, once its exit status is known.

use std::time::Duration;

use tokio::time::Instant;

/// What the loop knows of the current agent process.
#[derive(Debug)]
pub(super) struct AgentLife {
    grace: Duration,
    out_open: bool,
    err_open: bool,
    status: Option<i32>,
    /// Its output ended and it may be restarted: decided once its status is known.
    dying: bool,
    /// It was asked to stop (a signal forwarded to it): its end is no crash to recover from.
    stopping: bool,
    /// After the client left: when to send which signal, unless it exits first.
    terminate_at: Option<(Instant, i32)>,
    /// After it exited: until when its output may stay open.
    drain_until: Option<Instant>,
}

impl AgentLife {
    /// A just-started agent; `grace` is `--grace`.
    pub(super) fn new(grace: Duration) -> AgentLife {
        AgentLife {
            grace,
            out_open: true,
            err_open: true,
            status: None,
            dying: false,
            stopping: false,
            terminate_at: None,
            drain_until: None,
        }
    }

    /// Its exit status, once it exited.
    pub(super) fn status(&self) -> Option<i32> {
        self.status
    }

    /// It has not exited yet.
    pub(super) fn running(&self) -> bool {
        self.status.is_none()
    }

    /// Its stdout is still read.
    pub(super) fn reads_out(&self) -> bool {
        self.out_open
    }

    /// Its stderr is still read.
    pub(super) fn reads_err(&self) -> bool {
        self.err_open
    }

    /// It exited and both its streams ended.
    pub(super) fn over(&self) -> bool {
        self.status.is_some() && !self.out_open && !self.err_open
    }

    /// It may be restarted if it dies now: restarts are on and it was not asked to stop.
    pub(super) fn restartable(&self, respawn: bool) -> bool {
        respawn && !self.stopping
    }

    /// It was sent a signal to stop.
    pub(super) fn stop(&mut self) {
        self.stopping = true;
    }

    /// It was asked to stop (see [`AgentLife::stop`]).
    pub(super) fn stopping(&self) -> bool {
        self.stopping
    }

    /// Its stdout ended; `dying`: it may be restarted, decided once its status is known.
    pub(super) fn output_ended(&mut self, dying: bool) {
        self.out_open = false;
        self.dying = dying;
    }

    /// Its stderr ended.
    pub(super) fn errors_ended(&mut self) {
        self.err_open = false;
    }

    /// It exited with `code` at `now`: its output gets the grace period to end.
    pub(super) fn exited(&mut self, code: i32, now: Instant) {
        self.status = Some(code);
        self.drain_until = Some(now + self.grace);
    }

    /// The client left (or its stdin was closed): SIGTERM after the grace period, unless a
    /// termination is under way already.
    pub(super) fn terminate_after_grace(&mut self, now: Instant) {
        if self.terminate_at.is_none() {
            self.terminate_at = Some((now + self.grace, libc::SIGTERM));
        }
    }

    /// When the next termination signal is due, while it runs.
    pub(super) fn terminate_due(&self) -> Option<Instant> {
        self.terminate_at
            .filter(|_| self.running())
            .map(|(at, _)| at)
    }

    /// The termination signal due now; after SIGTERM, SIGKILL is due after the grace period.
    pub(super) fn terminate_now(&mut self, now: Instant) -> Option<i32> {
        let (_, signal) = self.terminate_at.take()?;
        if signal == libc::SIGTERM {
            self.terminate_at = Some((now + self.grace, libc::SIGKILL));
        }
        Some(signal)
    }

    /// When the loop stops waiting for its output to end, once it exited.
    pub(super) fn drain_due(&self) -> Option<Instant> {
        self.drain_until
    }

    /// Its output did not end in time: stop reading it. True when stdout was still open (the
    /// caller ends it as at EOF, then calls [`AgentLife::output_ended`]).
    pub(super) fn stop_draining(&mut self) -> bool {
        self.drain_until = None;
        self.err_open = false;
        self.out_open
    }

    /// Its output ended while it may be restarted, and it has exited: its exit code, once (the
    /// loop restarts it or ends).
    pub(super) fn take_death(&mut self) -> Option<i32> {
        let code = self.status.filter(|_| self.dying)?;
        self.dying = false;
        Some(code)
    }

    /// A new agent process took its place: streams open, no status, no drain; a termination
    /// under way goes on against the new one.
    pub(super) fn restarted(&mut self) {
        self.out_open = true;
        self.err_open = true;
        self.status = None;
        self.drain_until = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_secs(5);

    #[test]
    fn over_once_it_exited_and_both_streams_ended_in_any_order() {
        let now = Instant::now();
        let mut life = AgentLife::new(GRACE);
        life.errors_ended();
        life.exited(0, now);
        assert!(!life.over(), "stdout still open");
        assert_eq!(life.drain_due(), Some(now + GRACE));
        life.output_ended(false);
        assert!(life.over());
        assert_eq!(life.take_death(), None, "not dying: no restart to decide");
    }

    #[test]
    fn a_dying_agent_is_decided_once_when_its_status_is_known() {
        let now = Instant::now();
        let mut life = AgentLife::new(GRACE);
        life.output_ended(true);
        assert_eq!(life.take_death(), None, "no status yet");
        life.exited(137, now);
        assert_eq!(life.take_death(), Some(137));
        assert_eq!(life.take_death(), None, "once");
        life.restarted();
        assert!(life.running() && life.reads_out() && life.reads_err());
        assert_eq!(life.drain_due(), None);
    }

    #[test]
    fn termination_is_sigterm_then_sigkill_each_after_the_grace_while_it_runs() {
        let now = Instant::now();
        let mut life = AgentLife::new(GRACE);
        assert_eq!(life.terminate_due(), None);
        life.terminate_after_grace(now);
        life.terminate_after_grace(now + Duration::from_secs(3));
        assert_eq!(
            life.terminate_due(),
            Some(now + GRACE),
            "the first one counts"
        );
        assert_eq!(life.terminate_now(now + GRACE), Some(libc::SIGTERM));
        assert_eq!(life.terminate_due(), Some(now + 2 * GRACE));
        assert_eq!(life.terminate_now(now + 2 * GRACE), Some(libc::SIGKILL));
        assert_eq!(life.terminate_due(), None);
        life.terminate_after_grace(now);
        life.exited(0, now);
        assert_eq!(
            life.terminate_due(),
            None,
            "nothing to terminate once it exited"
        );
    }

    #[test]
    fn an_output_held_open_is_given_up_after_the_grace() {
        let now = Instant::now();
        let mut life = AgentLife::new(GRACE);
        life.exited(0, now);
        assert!(life.stop_draining(), "stdout was still open");
        life.output_ended(false);
        assert!(life.over());
        assert_eq!(life.drain_due(), None);
    }

    #[test]
    fn an_agent_asked_to_stop_is_not_restarted() {
        let mut life = AgentLife::new(GRACE);
        assert!(life.restartable(true));
        assert!(!life.restartable(false));
        life.stop();
        assert!(life.stopping());
        assert!(!life.restartable(true));
    }
}
