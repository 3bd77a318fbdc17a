//! Where this process stands with each session's lease ([`Leases`], [`Standing`]), and what
//! follows for shipping a segment ([`Shipping`]).

use std::collections::HashMap;
use std::time::Duration;

use super::{Held, Lease, Watch};
use crate::fleet::layout::SessionKey;

/// Where this process stands with a session's lease.
#[derive(Clone, Debug)]
pub enum Standing {
    /// Another host holds it (or held it when last looked at).
    Watching(Option<Watch>),
    /// This process holds it.
    Held(Held),
    /// Another host took it from this process, which writes the session to the store no
    /// more: who (when the lease could be read).
    Lost(Option<Lease>),
    /// Given back.
    Released,
}

/// The leases of this process, by session key.
#[derive(Debug, Default)]
pub struct Leases {
    by_key: HashMap<SessionKey, Standing>,
}

impl Leases {
    /// Where this process stands with session key `key`.
    pub fn get(&self, key: &SessionKey) -> Option<&Standing> {
        self.by_key.get(key)
    }

    /// The lease of `key` if this process holds it.
    pub fn held(&self, key: &SessionKey) -> Option<&Held> {
        match self.by_key.get(key) {
            Some(Standing::Held(h)) => Some(h),
            _ => None,
        }
    }

    /// Every lease held, by key.
    pub fn all_held(&self) -> impl Iterator<Item = (&SessionKey, &Held)> {
        self.by_key.iter().filter_map(|(k, s)| match s {
            Standing::Held(h) => Some((k, h)),
            _ => None,
        })
    }

    /// Whether this process should try to take session key `key`'s lease: it neither holds it
    /// nor lost it nor gave it back (it is new here, or another host held it when last looked
    /// at).
    pub fn wanted(&self, key: &SessionKey) -> bool {
        matches!(self.by_key.get(key), None | Some(Standing::Watching(_)))
    }

    /// Whether a segment of this process of session key `key`, written in the store under
    /// `epoch` (`None`: nothing of it is there yet), may be shipped at `now`: only under the
    /// lease this process holds, valid by its clock, and only under the epoch it started under.
    pub fn shipping(&self, key: &SessionKey, epoch: Option<u64>, now: Duration) -> Shipping {
        match self.by_key.get(key) {
            Some(Standing::Held(held)) => match epoch {
                // Lost, then taken again in this run: this segment was fenced, and the run
                // writes the session in a new one.
                Some(e) if e != held.lease.epoch => Shipping::Stranded(String::new()),
                _ if !held.valid(now) => Shipping::NotNow,
                Some(_) => Shipping::Ship { first: None },
                None => Shipping::Ship {
                    first: Some(held.lease.epoch),
                },
            },
            Some(Standing::Lost(by)) => {
                Shipping::Stranded(by.as_ref().map(|l| l.host.clone()).unwrap_or_default())
            }
            Some(Standing::Watching(_) | Standing::Released) | None => Shipping::NotNow,
        }
    }

    pub(super) fn set(&mut self, key: &SessionKey, standing: Standing) {
        self.by_key.insert(key.clone(), standing);
    }

    pub(super) fn watched(&mut self, key: &SessionKey) -> Option<Watch> {
        match self.by_key.get(key) {
            Some(Standing::Watching(w)) => w.clone(),
            _ => None,
        }
    }
}

/// Leases standing as given: how the shipper's tests set them.
#[cfg(test)]
impl FromIterator<(SessionKey, Standing)> for Leases {
    fn from_iter<I: IntoIterator<Item = (SessionKey, Standing)>>(standings: I) -> Leases {
        Leases {
            by_key: standings.into_iter().collect(),
        }
    }
}

/// Whether a segment of this process may be shipped now (see [`Leases::shipping`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shipping {
    /// Yes; `first`: its first part, to be preceded by the marker of the epoch it starts under.
    Ship {
        /// The epoch of the marker to write first, for a segment the store has nothing of.
        first: Option<u64>,
    },
    /// Not now: the lease is not held, or no longer good by this process's clock.
    NotNow,
    /// Never again: the session is another host's now (its name, when known), or this run's
    /// again under a later epoch. Its later bytes stay on the local disk.
    Stranded(String),
}
