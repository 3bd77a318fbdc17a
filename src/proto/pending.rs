//! A request awaiting its answer, as the core keeps it: the pending table by sender and id,
//! and why the proxy sent a request of its own (a step of a load, a handshake told again).

use super::load_request::SetupParams;
use super::lookups::Lookups;
use super::sessions::Slot;
use super::vocab::{CatalogUpdate, HashMap, SessionId};
use crate::journal::format::{Body, Record};
use crate::wire::Side;
use crate::wire::envelope::RequestId;

/// What brings the agent to a live session under a synthetic load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Underneath {
    Load,
    Resume,
    New,
}

/// A step of a load the proxy asked the agent for.
#[derive(Clone, Debug)]
pub(super) enum Step {
    Setup(Underneath),
    SetMode(String),
    SetConfig,
}

/// Why the proxy sent a request to the agent.
#[derive(Clone, Debug)]
pub(super) enum Purpose {
    /// A step of load `op`.
    Load(u64, Step),
    /// The client's recorded `initialize`, to a restarted agent.
    Reinitialize,
    /// The client's recorded `authenticate`, to a restarted agent.
    Reauthenticate,
}

/// A request awaiting its response.
#[derive(Debug)]
pub(super) struct Pending {
    pub(super) method: String,
    /// Sequence number of the request's record (answers to an exited agent's requests go out
    /// in arrival order).
    pub(super) seq: u64,
    pub(super) session: Option<SessionId>,
    /// For `session/new` / `session/fork`: the request record, to copy into the new session.
    pub(super) setup: Option<Setup>,
    /// What the catalog learns should the agent do it (a vendor rename or archive).
    pub(super) index: Option<CatalogUpdate>,
}

#[derive(Debug)]
pub(super) struct Setup {
    pub(super) record: Record,
    /// Its params as sent (unredacted), to bring the session up again after a restart.
    pub(super) params: SetupParams,
    pub(super) cwd: Option<String>,
    /// The session it was already copied into (an early update opened it).
    pub(super) copied_to: Option<SessionId>,
    /// The proxy's edit of it (`--offer-history`'s event), copied after it.
    pub(super) edit: Option<Record>,
}

/// What the route resolved of a line it hands on to be relayed (`route::relay`): the slot of
/// its session, looked up once (a client request's or notification's, as it arrived; an
/// agent's answer's, the session of the request it answers), and for an answer the pending
/// entry of that request, taken out of the table; and what the session's transition as the
/// line passed left the relay's edits ([`Carried`]). The steps after the route reach the session
/// by the slot; without one (the table had no such session then, or the line was not
/// resolved: held lines handled again) they look it up by ID, as it may have been made since.
#[derive(Debug, Default)]
pub(super) struct Resolved {
    pub(super) session: Option<Slot>,
    /// Boxed: every agent line carries it on (most carry none), and a `Pending` moved by
    /// value through the calls after the route cost a copy of it each.
    pub(super) answered: Option<Box<Pending>>,
    /// What the session's transition as the line passes leaves its edits
    /// ([`super::route::relay`]).
    pub(super) carried: Option<Carried>,
}

/// What a session's transition leaves the edits of the line that made it.
#[derive(Debug)]
pub(super) enum Carried {
    /// A client's prompt carries the re-prime transcript of the load that mapped its session.
    Reprime(String),
    /// The agent's answer to `session/new` says the fresh client-facing ID its session takes
    /// ([`super::reused_ids`]).
    FreshId(SessionId),
    /// An update's title is one the agent made of a re-prime: the client is not given it.
    Untitled,
}

/// A pending request's key: its sender and id.
type Key = (Side, RequestId);

/// Requests awaiting their response, by sender and id; a test build counts its lookups by key
/// ([`PendingTable::lookups`]).
#[derive(Debug, Default)]
pub(super) struct PendingTable {
    requests: HashMap<Key, Pending>,
    lookups: Lookups,
}

impl PendingTable {
    /// Lookups by key so far (a test build's).
    #[cfg(test)]
    pub(super) fn lookups(&self) -> usize {
        self.lookups.get()
    }

    pub(super) fn get(&self, key: &Key) -> Option<&Pending> {
        self.lookups.count();
        self.requests.get(key)
    }

    pub(super) fn get_mut(&mut self, key: &Key) -> Option<&mut Pending> {
        self.lookups.count();
        self.requests.get_mut(key)
    }

    pub(super) fn contains_key(&self, key: &Key) -> bool {
        self.lookups.count();
        self.requests.contains_key(key)
    }

    pub(super) fn insert(&mut self, key: Key, pending: Pending) {
        self.lookups.count();
        self.requests.insert(key, pending);
    }

    pub(super) fn remove(&mut self, key: &Key) -> Option<Pending> {
        self.lookups.count();
        self.requests.remove(key)
    }

    /// Every request, in no order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&Key, &Pending)> {
        self.requests.iter()
    }

    /// Every request, in no order, to change.
    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut Pending> {
        self.requests.values_mut()
    }

    /// Keep only the requests `keep` says to.
    pub(super) fn retain(&mut self, keep: impl FnMut(&Key, &mut Pending) -> bool) {
        self.requests.retain(keep);
    }

    /// How many requests await their response.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.requests.len()
    }
}

impl Setup {
    /// Only the client creates sessions.
    pub(super) fn record_is_client_new(&self) -> bool {
        matches!(
            &self.record.body,
            Body::Message {
                from: Side::Client,
                ..
            }
        )
    }
}
