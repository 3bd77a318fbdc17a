//! The decisions, pure: what to do about a session's lease from what was seen of it and when,
//! on the observer's own clock ([`judge`]), and how long a lease taken is good ([`Held`]).

use std::time::Duration;

use super::{How, Identity, Lease, Seen};
use crate::fleet::store::Version;

/// How this process takes leases.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    /// How long its leases last unless renewed.
    pub ttl: Duration,
    /// Take sessions whoever holds them (`--takeover`).
    pub takeover: bool,
    /// What the start-up probe found: the store enforces conditional writes (`Some(true)`),
    /// ignores them (`Some(false)`), or did not answer (`None`).
    pub conditional: Option<bool>,
}

/// The margin of safety between a holder's and an observer's ends of a lease: a tenth of the
/// TTL (the clocks' rates may differ by up to 10 %), at least 200 ms.
pub fn margin(ttl: Duration) -> Duration {
    (ttl / 10).max(Duration::from_millis(200))
}

/// Two versions name the same object state.
fn same_version(a: &Version, b: &Version) -> bool {
    a.e_tag == b.e_tag && a.version == b.version
}

/// A lease version this process watches: since when (its clock) it has seen it unchanged.
#[derive(Clone, Debug)]
pub struct Watch {
    version: Version,
    since: Duration,
}

/// What to do about a session's lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Take it now.
    Take(How),
    /// It is this process's own (a write whose answer was lost): keep it as it is.
    Adopt,
    /// Held by another: not before `until` (this process's clock), unless it changes.
    Wait {
        /// When its version will have been unchanged long enough.
        until: Duration,
    },
    /// Held by a host that is alive (its lease changed while watched), or on a store that
    /// cannot arbitrate.
    Refuse,
}

/// Decide about a session's lease from what the store holds (`seen`), what this process has
/// watched of it before (`watched`, updated here) and the time (`now`). `alive` says whether a
/// run of this host is still running (a holder on this host whose process is gone is not
/// waited for).
pub fn judge(
    seen: &Seen,
    watched: &mut Option<Watch>,
    me: &Identity,
    policy: &Policy,
    now: Duration,
    alive: impl Fn(&Lease) -> bool,
) -> Verdict {
    let Some(version) = seen.version() else {
        *watched = None;
        return Verdict::Take(How::New);
    };
    let lease = seen.lease();
    if let Some(l) = lease
        && l.is(me)
        && !l.released
    {
        return Verdict::Adopt;
    }
    let foreign = lease.is_none_or(|l| l.host != me.host);
    if policy.takeover {
        return Verdict::Take(How::Takeover);
    }
    // A store that ignores conditional writes cannot say which of two hosts took a session:
    // one another host had last moves here only with --takeover.
    if policy.conditional == Some(false) && foreign {
        return Verdict::Refuse;
    }
    if let Some(l) = lease {
        if l.released {
            return Verdict::Take(How::Released);
        }
        if l.host == me.host && !alive(l) {
            return Verdict::Take(How::DeadRun);
        }
    }
    let ttl = lease.map_or(policy.ttl, Lease::ttl);
    let wait = ttl + margin(ttl);
    match watched {
        Some(w) if same_version(&w.version, version) => {
            let until = w.since + wait;
            if now >= until {
                Verdict::Take(How::Expired)
            } else {
                Verdict::Wait { until }
            }
        }
        Some(w) => {
            // It changed while watched: its holder is alive.
            *w = Watch {
                version: version.clone(),
                since: now,
            };
            Verdict::Refuse
        }
        None => {
            *watched = Some(Watch {
                version: version.clone(),
                since: now,
            });
            Verdict::Wait { until: now + wait }
        }
    }
}

/// A lease this process holds.
#[derive(Clone, Debug)]
pub struct Held {
    /// Its content as last written.
    pub lease: Lease,
    /// Its version in the store.
    pub version: Version,
    /// Until when (this process's clock) it may write the session to the store.
    pub valid_until: Duration,
    /// When to renew it.
    pub renew_at: Duration,
}

impl Held {
    pub(super) fn new(lease: Lease, version: Version, sent: Duration) -> Held {
        let ttl = Duration::from_millis(lease.ttl_ms);
        Held {
            lease,
            version,
            valid_until: sent + ttl.saturating_sub(margin(ttl)),
            renew_at: sent + ttl / 3,
        }
    }

    /// Whether the session may be written to the store at `now`.
    pub fn valid(&self, now: Duration) -> bool {
        now < self.valid_until
    }
}
