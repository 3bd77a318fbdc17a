//! A host's agent requests for sessions nobody is attached to: they wait, bounded in number
//! ([`WAITING_LIMIT`]) and in time (the core expires them), for the next connection that joins
//! their session.

use bytes::Bytes;

use super::super::vocab::SessionId;
use crate::wire::envelope::RequestId;

/// An agent request waiting for a connection to attach to its session.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::proto) struct Waiting {
    pub(in crate::proto) id: RequestId,
    pub(in crate::proto) session: SessionId,
    pub(in crate::proto) line: Bytes,
    /// When it began to wait (monotonic microseconds).
    pub(in crate::proto) since_us: u64,
}

/// At most this many agent requests wait for a connection; past it they are answered at once.
pub(in crate::proto) const WAITING_LIMIT: usize = 64;

/// The agent requests waiting for a connection, oldest first.
#[derive(Debug, Default)]
pub(super) struct Waitlist(Vec<Waiting>);

impl Waitlist {
    /// Make `waiting` wait; false (it does not wait) when [`WAITING_LIMIT`] requests already do.
    pub(super) fn push(&mut self, waiting: Waiting) -> bool {
        if self.0.len() >= WAITING_LIMIT {
            return false;
        }
        self.0.push(waiting);
        true
    }

    /// When the oldest waiting request began to wait.
    pub(super) fn oldest(&self) -> Option<u64> {
        self.0.iter().map(|w| w.since_us).min()
    }

    /// The requests that have waited since `before` or longer, taken out.
    pub(super) fn expired(&mut self, before: u64) -> Vec<Waiting> {
        self.0.extract_if(.., |w| w.since_us <= before).collect()
    }

    /// The requests waiting for session `s`, taken out, oldest first.
    pub(super) fn take_session(&mut self, s: &SessionId) -> impl Iterator<Item = Waiting> {
        self.0.extract_if(.., move |w| w.session == *s)
    }
}
