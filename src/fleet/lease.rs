//! Which host continues a session: one lease object per session, changed only by
//! compare-and-swap, and one record per epoch.
//!
//! ```text
//! leases/<key>/lease            who continues the session now (JSON, see [`Lease`])
//! leases/<key>/epoch-<n>        who took epoch n, and from whom (JSON, see [`EpochRecord`])
//! ```
//!
//! - **One object, compare-and-swap.** The lease is created with create-if-absent and from
//!   then on only replaced on the condition that it is still at the version the writer read
//!   (`If-Match` on its ETag, or the generation on GCS): of two hosts changing it from one
//!   version exactly one succeeds. It is never deleted, so no number is ever free again.
//! - **A new epoch on every change of hands**, one past the highest the store knows of (the
//!   lease's, every epoch record's, every segment's marker). Its record is created once and
//!   never removed; each segment records the epoch it is written under, and readers replay a
//!   segment only if the epoch it names was taken by the run that wrote it.
//! - **Expiry on the observer's own clock** (the DynamoDB lock client's rule). A host that finds
//!   the session held remembers the lease's version and when it first saw it; only when that
//!   version has not changed for the holder's TTL plus a margin, by its own monotonic clock,
//!   does it take the session. Two hosts' clocks are never compared. A lease that is not JSON is
//!   a version like any other: it runs out the same way, and `--takeover` replaces it at once.
//! - **The holder stops first.** It renews every third of the TTL, reading its clock before it
//!   sends, and writes the session to the store only until `sent + TTL − margin`
//!   (`CLOCK_BOOTTIME`): an observer first sees a version after it was sent, so whenever the
//!   clocks' rates differ by less than margin/TTL the holder has stopped before anyone takes
//!   over.
//! - **Fences for what timing cannot cover** (a holder paused or cut off past its lease): a
//!   taker writes `fence-<end>` into every segment of the session that is not its own run's, at
//!   the length the store has, before it ships anything; readers stop each segment at its
//!   fence.
//!
//! The decisions are pure functions of what was seen and when ([`judge`]); [`acquire`],
//! [`renew`], [`renew_due`], [`take_all`] and [`release_all`] do the requests.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::clock::Clock;
use super::layout;
use super::store::{Error, Store, Version, Write, Written};
use crate::journal::dir::{SEGMENT_SUFFIX, session_key};

/// Largest lease or epoch record read.
const MAX_RECORD: u64 = 64 * 1024;
/// Longest TTL a lease may ask others to wait (a larger one, or a garbage one, counts as
/// this much).
pub const MAX_TTL: Duration = Duration::from_secs(600);
/// How often a host waiting for a lease looks at it again.
const POLL: Duration = Duration::from_secs(1);
/// How long after taking a lease it is read back to confirm the take (see [`take`]).
const SETTLE: Duration = Duration::from_millis(200);
/// Leases taken at once by [`take_all`].
const TAKES_AT_ONCE: usize = 16;

/// The lease object's content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The session ID.
    pub session: String,
    /// Raised on every change of hands.
    pub epoch: u64,
    /// The holding host (its journal directory's name).
    pub host: String,
    /// The holding run.
    pub run: String,
    /// The holding process on its host.
    #[serde(default)]
    pub pid: u32,
    /// How long the lease lasts unless renewed (milliseconds, by the holder's clock).
    pub ttl_ms: u64,
    /// Renewals within the epoch (each one makes a new version).
    #[serde(default)]
    pub beat: u64,
    /// Given back: anyone may take it.
    #[serde(default)]
    pub released: bool,
}

impl Lease {
    /// The TTL others wait out, bounded by [`MAX_TTL`].
    pub fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms).min(MAX_TTL)
    }

    /// Whether `me` wrote it.
    fn is(&self, me: &Identity) -> bool {
        self.host == me.host && self.run == me.run
    }
}

/// Who took an epoch (`leases/<key>/epoch-<n>`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpochRecord {
    /// The session ID.
    pub session: String,
    /// The epoch.
    pub epoch: u64,
    /// The host that took it.
    pub host: String,
    /// The run that took it (the only run whose segments may be written under it).
    pub run: String,
    /// Unix microseconds by the taker's wall clock: for people, never compared.
    pub t: i64,
    /// How it was taken.
    pub how: How,
    /// The lease it replaced, when that was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Lease>,
}

/// How a session changed hands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum How {
    /// It had no lease.
    New,
    /// Its holder gave it back.
    Released,
    /// Its lease ran out (by the taker's clock).
    Expired,
    /// Its holder's process on this host is gone.
    DeadRun,
    /// `--takeover`.
    Takeover,
    /// A segment left by a run that ended before it took a lease (a crash within its first
    /// shipment), shipped by a later start of its host.
    Recovered,
}

/// This process, as its leases name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The journal directory's host name.
    pub host: String,
    /// The run.
    pub run: String,
    /// The process.
    pub pid: u32,
}

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

/// What the store holds as a session's lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Nothing.
    Absent,
    /// A lease, at a version.
    Lease(Version, Lease),
    /// Something that is not a lease, at a version.
    Garbage(Version),
}

impl Seen {
    fn version(&self) -> Option<&Version> {
        match self {
            Seen::Absent => None,
            Seen::Lease(v, _) | Seen::Garbage(v) => Some(v),
        }
    }

    fn lease(&self) -> Option<&Lease> {
        match self {
            Seen::Lease(_, l) => Some(l),
            _ => None,
        }
    }
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
pub enum Next {
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
) -> Next {
    let Some(version) = seen.version() else {
        *watched = None;
        return Next::Take(How::New);
    };
    let lease = seen.lease();
    if let Some(l) = lease
        && l.is(me)
        && !l.released
    {
        return Next::Adopt;
    }
    let foreign = lease.is_none_or(|l| l.host != me.host);
    if policy.takeover {
        return Next::Take(How::Takeover);
    }
    // A store that ignores conditional writes cannot say which of two hosts took a session:
    // one another host had last moves here only with --takeover.
    if policy.conditional == Some(false) && foreign {
        return Next::Refuse;
    }
    if let Some(l) = lease {
        if l.released {
            return Next::Take(How::Released);
        }
        if l.host == me.host && !alive(l) {
            return Next::Take(How::DeadRun);
        }
    }
    let ttl = lease.map_or(policy.ttl, Lease::ttl);
    let wait = ttl + margin(ttl);
    match watched {
        Some(w) if same_version(&w.version, version) => {
            let until = w.since + wait;
            if now >= until {
                Next::Take(How::Expired)
            } else {
                Next::Wait { until }
            }
        }
        Some(w) => {
            // It changed while watched: its holder is alive.
            *w = Watch {
                version: version.clone(),
                since: now,
            };
            Next::Refuse
        }
        None => {
            *watched = Some(Watch {
                version: version.clone(),
                since: now,
            });
            Next::Wait { until: now + wait }
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
    fn new(lease: Lease, version: Version, sent: Duration) -> Held {
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
    by_key: HashMap<String, Standing>,
}

impl Leases {
    /// Where this process stands with session key `key`.
    pub fn get(&self, key: &str) -> Option<&Standing> {
        self.by_key.get(key)
    }

    /// The lease of `key` if this process holds it.
    pub fn held(&self, key: &str) -> Option<&Held> {
        match self.by_key.get(key) {
            Some(Standing::Held(h)) => Some(h),
            _ => None,
        }
    }

    /// Every lease held, by key.
    pub fn all_held(&self) -> impl Iterator<Item = (&String, &Held)> {
        self.by_key.iter().filter_map(|(k, s)| match s {
            Standing::Held(h) => Some((k, h)),
            _ => None,
        })
    }

    /// Whether this process should try to take session key `key`'s lease: it neither holds it
    /// nor lost it nor gave it back (it is new here, or another host held it when last looked
    /// at).
    pub fn wanted(&self, key: &str) -> bool {
        matches!(self.by_key.get(key), None | Some(Standing::Watching(_)))
    }

    /// Whether a segment of this process of session key `key`, written in the store under
    /// `epoch` (`None`: nothing of it is there yet), may be shipped at `now`: only under the
    /// lease this process holds, valid by its clock, and only under the epoch it started under.
    pub fn shipping(&self, key: &str, epoch: Option<u64>, now: Duration) -> Shipping {
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

    fn set(&mut self, key: &str, standing: Standing) {
        self.by_key.insert(key.to_string(), standing);
    }

    fn watched(&mut self, key: &str) -> Option<Watch> {
        match self.by_key.get(key) {
            Some(Standing::Watching(w)) => w.clone(),
            _ => None,
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

/// Why a session could not be taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Another host holds it: its lease (`None`: the lease is unreadable), and whether it was
    /// seen renewing it.
    Held {
        /// The lease, when it could be read.
        lease: Option<Lease>,
        /// The store cannot arbitrate (it ignores conditional writes).
        unarbitrated: bool,
    },
    /// The store could not be asked.
    Store(String),
}

/// `text` as it may be shown: a name the store gave, quoted and cut to 80 characters, with no
/// control characters (a log line or an error message cannot be forged through it).
pub fn shown(text: &str) -> String {
    let cut: String = text.chars().take(80).collect();
    let mut out = format!("{cut:?}");
    if text.chars().count() > 80 {
        out.push('…');
    }
    out
}

impl Refusal {
    /// The message a client gets.
    pub fn message(&self, session: &str) -> String {
        match self {
            Refusal::Held {
                lease: Some(l),
                unarbitrated: false,
            } => format!(
                "session {session:?} is being continued on host {} (run {}); its lease runs out {} s after that host stops renewing it (start acp-journal with --takeover to take it anyway)",
                shown(&l.host),
                shown(&l.run),
                l.ttl().as_secs_f64()
            ),
            Refusal::Held {
                lease,
                unarbitrated: true,
            } => format!(
                "session {session:?} was last continued on host {}, and the store ignores conditional writes, so it cannot say which host continues it: start acp-journal with --takeover to take it",
                lease
                    .as_ref()
                    .map_or_else(|| "(unreadable)".to_string(), |l| shown(&l.host))
            ),
            Refusal::Held { lease: None, .. } => format!(
                "session {session:?}: its lease in the store is unreadable and was changed while this host watched it; try again, or start acp-journal with --takeover"
            ),
            Refusal::Store(e) => {
                format!("session {session:?}: the shared store cannot say who holds it ({e})")
            }
        }
    }
}

/// What [`acquire`] got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acquired {
    /// The epoch held.
    pub epoch: u64,
    /// This run held the session before and lost or gave it back: its segment of the session
    /// was fenced, and what it writes from now on goes to a new one.
    pub again: bool,
}

/// Read session key `key`'s lease.
///
/// # Errors
/// The store's.
pub async fn read_lease(store: &Store, key: &str) -> Result<Seen, Error> {
    Ok(
        match store
            .get_versioned(&layout::lease_object(key), MAX_RECORD)
            .await
        {
            Ok(None) => Seen::Absent,
            Ok(Some((version, bytes))) => match serde_json::from_slice::<Lease>(&bytes) {
                Ok(lease) => Seen::Lease(version, lease),
                Err(_) => Seen::Garbage(version),
            },
            // Too large to be a lease: garbage, at a version the listing gives.
            Err(e) if super::store::is_too_large(&e) => {
                match store.head(&layout::lease_object(key)).await? {
                    Some(version) => Seen::Garbage(version),
                    None => Seen::Absent,
                }
            }
            Err(e) => return Err(e),
        },
    )
}

/// Take session `session`'s lease for `me`, waiting at most `patience` for a holder that has
/// gone silent to run out (a holder seen renewing refuses at once). Returns at once when this
/// process holds it already.
///
/// # Errors
/// The refusal.
pub async fn acquire(
    store: &Store,
    leases: &Mutex<Leases>,
    clock: &dyn Clock,
    me: &Identity,
    policy: &Policy,
    session: &str,
    patience: Duration,
) -> Result<Acquired, Refusal> {
    let key = session_key(session);
    let refused = |e: Error| Refusal::Store(e.to_string());
    let deadline = clock.now() + patience;
    let again = match leases.lock().get(&key) {
        Some(Standing::Held(h)) => {
            return Ok(Acquired {
                epoch: h.lease.epoch,
                again: false,
            });
        }
        Some(Standing::Lost(_) | Standing::Released) => true,
        Some(Standing::Watching(_)) | None => false,
    };
    let alive = |l: &Lease| crate::journal::dir::acp_journal_running(l.pid) && l.pid != 0;
    for _ in 0..64 {
        let seen = read_lease(store, &key).await.map_err(refused)?;
        let now = clock.now();
        let mut watched = leases.lock().watched(&key);
        let next = judge(&seen, &mut watched, me, policy, now, alive);
        if !matches!(next, Next::Take(_) | Next::Adopt) {
            leases.lock().set(&key, Standing::Watching(watched));
        }
        match next {
            Next::Adopt => {
                let Seen::Lease(version, lease) = seen else {
                    continue;
                };
                // Written by this run, its answer lost: when is unknown, so it is good only
                // once renewed from here (and the take completed first).
                let taken = Taken {
                    version,
                    lease,
                    sent: Duration::ZERO,
                };
                let done = complete(store, clock, me, policy, session, taken, How::New, None)
                    .await
                    .map_err(refused)?;
                let Some(held) = done else { continue };
                match renew(store, clock, &key, &held, false)
                    .await
                    .map_err(refused)?
                {
                    Renewal::Renewed(held) => {
                        let epoch = held.lease.epoch;
                        leases.lock().set(&key, Standing::Held(held));
                        return Ok(Acquired { epoch, again });
                    }
                    Renewal::Lost(_) => {}
                }
            }
            Next::Take(how) => match take(store, clock, me, policy, session, &seen, how).await {
                Ok(Some(held)) => {
                    let epoch = held.lease.epoch;
                    leases.lock().set(&key, Standing::Held(held));
                    return Ok(Acquired { epoch, again });
                }
                // Another host changed it first: look again.
                Ok(None) => {}
                Err(e) => return Err(refused(e)),
            },
            Next::Wait { until } => {
                if until > deadline {
                    return Err(Refusal::Held {
                        lease: seen.lease().cloned(),
                        unarbitrated: false,
                    });
                }
                let pause = POLL
                    .min(until.saturating_sub(now))
                    .max(Duration::from_millis(10));
                tokio::time::sleep(pause).await;
            }
            Next::Refuse => {
                return Err(Refusal::Held {
                    lease: seen.lease().cloned(),
                    unarbitrated: policy.conditional == Some(false) && !policy.takeover,
                });
            }
        }
    }
    Err(Refusal::Store("the lease keeps changing".into()))
}

/// Take the leases of `sessions` (session IDs) without waiting for a silent holder, at most
/// [`TAKES_AT_ONCE`] at a time. A session this process never looked at before is first tried
/// as a new one ([`take_new`]: two writes, no listing); a session another host holds is left
/// (said in the debug log): it is looked at again next time.
///
/// # Errors
/// The store's, when it could not be asked about one of them.
pub async fn take_all(
    store: &Store,
    leases: &Mutex<Leases>,
    clock: &dyn Clock,
    me: &Identity,
    policy: &Policy,
    sessions: Vec<String>,
) -> Result<(), String> {
    let takes = sessions.into_iter().map(|session| async move {
        let got = match take_new(store, leases, clock, me, policy, &session).await {
            Ok(Some(acquired)) => Ok(acquired),
            Ok(None) => acquire(store, leases, clock, me, policy, &session, Duration::ZERO).await,
            Err(e) => Err(Refusal::Store(e.to_string())),
        };
        (session, got)
    });
    let mut failed = Ok(());
    for (session, got) in futures_util::stream::iter(takes)
        .buffer_unordered(TAKES_AT_ONCE)
        .collect::<Vec<_>>()
        .await
    {
        match got {
            Ok(_) => {}
            Err(Refusal::Store(e)) => failed = Err(e),
            Err(refusal) => tracing::debug!("{}: not shipped yet", refusal.message(&session)),
        }
    }
    failed
}

/// Take the lease of a session that never had one, as its first epoch, in two requests and
/// no listing: the lease created only if absent (a store that enforces it decides who is
/// first), then the record of epoch 1. `Ok(None)` when this cannot be used, and nothing was
/// written that [`acquire`] would not have: the process looked at the session before, the
/// store does not (or may not) enforce create-if-absent, `--takeover`, or a lease exists (the
/// session moved here from another host, or came back). Nothing needs fencing: every segment
/// of a session in the store was shipped under its lease, and there was none.
///
/// # Errors
/// The store's.
pub async fn take_new(
    store: &Store,
    leases: &Mutex<Leases>,
    clock: &dyn Clock,
    me: &Identity,
    policy: &Policy,
    session: &str,
) -> Result<Option<Acquired>, Error> {
    let key = session_key(session);
    if policy.conditional != Some(true) || policy.takeover || leases.lock().get(&key).is_some() {
        return Ok(None);
    }
    let lease = Lease {
        session: session.to_string(),
        epoch: 1,
        host: me.host.clone(),
        run: me.run.clone(),
        pid: me.pid,
        ttl_ms: u64::try_from(policy.ttl.as_millis()).unwrap_or(u64::MAX),
        beat: 0,
        released: false,
    };
    let sent = clock.now();
    let version = match store
        .put_versioned(&layout::lease_object(&key), json(&lease), Write::Create)
        .await?
    {
        Written::Yes(version) => version,
        Written::Conflict => return Ok(None),
    };
    let taken = Taken {
        version,
        lease,
        sent,
    };
    let Some(held) = complete(store, clock, me, policy, session, taken, How::New, None).await?
    else {
        return Ok(None);
    };
    let epoch = held.lease.epoch;
    leases.lock().set(&key, Standing::Held(held));
    Ok(Some(Acquired {
        epoch,
        again: false,
    }))
}

/// Take the lease from `seen` (`how` says why it may be taken): a new epoch, then
/// [`complete`]. `Ok(None)` when another host changed the lease first.
async fn take(
    store: &Store,
    clock: &dyn Clock,
    me: &Identity,
    policy: &Policy,
    session: &str,
    seen: &Seen,
    how: How,
) -> Result<Option<Held>, Error> {
    let key = session_key(session);
    // No lease, no history (its epoch records follow it): the first epoch, and [`complete`]
    // goes past any record found in the way. Else past every epoch the store knows of.
    let known = match seen {
        Seen::Absent => 0,
        _ => highest_epoch(store, &key).await?,
    };
    let epoch = known
        .max(seen.lease().map_or(0, |l| l.epoch))
        .saturating_add(1);
    let write = match (seen.version(), policy.conditional) {
        (_, Some(false)) => Write::Overwrite,
        (None, _) => Write::Create,
        (Some(v), _) => Write::Replace(v.clone()),
    };
    let lease = Lease {
        session: session.to_string(),
        epoch,
        host: me.host.clone(),
        run: me.run.clone(),
        pid: me.pid,
        ttl_ms: u64::try_from(policy.ttl.as_millis()).unwrap_or(u64::MAX),
        beat: 0,
        released: false,
    };
    let sent = clock.now();
    match store
        .put_versioned(&layout::lease_object(&key), json(&lease), write)
        .await?
    {
        Written::Yes(_) => {
            // Some stores check a condition, then write (s3s-fs does, so two racing writers
            // can both be told yes): the lease read back a moment later says who won.
            tokio::time::sleep(SETTLE).await;
            let version = match read_lease(store, &key).await? {
                Seen::Lease(now_at, now) if now == lease => now_at,
                _ => return Ok(None),
            };
            let from = seen.lease().cloned();
            let taken = Taken {
                version,
                lease,
                sent,
            };
            complete(store, clock, me, policy, session, taken, how, from).await
        }
        Written::Conflict => Ok(None),
    }
}

/// A lease this process wrote: at which version, and when it sent it (its own clock).
struct Taken {
    version: Version,
    lease: Lease,
    sent: Duration,
}

/// Finish taking the lease `taken`: record its epoch (a later one
/// when that epoch was recorded by another run already, its lease since replaced with
/// garbage) and fence every other run's segments, before anything is shipped under it. Both
/// are idempotent, so a take whose answer was lost is completed the same way.
#[allow(clippy::too_many_arguments)]
async fn complete(
    store: &Store,
    clock: &dyn Clock,
    me: &Identity,
    policy: &Policy,
    session: &str,
    taken: Taken,
    how: How,
    from: Option<Lease>,
) -> Result<Option<Held>, Error> {
    let key = session_key(session);
    let Taken {
        mut version,
        mut lease,
        mut sent,
    } = taken;
    // Whether another run's epoch record was found in the way: the session had a history
    // its lease did not show (a lease the store lost), so its other segments are fenced.
    let mut crowded = false;
    for _ in 0..4 {
        let record = EpochRecord {
            session: session.to_string(),
            epoch: lease.epoch,
            host: me.host.clone(),
            run: me.run.clone(),
            t: clock.wall_us(),
            how,
            from: from.clone(),
        };
        let at = layout::epoch_record(&key, lease.epoch);
        let created = store
            .put_versioned(&at, json(&record), Write::Create)
            .await?;
        let ours = match created {
            Written::Yes(_) => true,
            Written::Conflict => store
                .get_versioned(&at, MAX_RECORD)
                .await?
                .and_then(|(_, b)| serde_json::from_slice::<EpochRecord>(&b).ok())
                .is_some_and(|r| r.run == me.run && r.host == me.host),
        };
        if !ours {
            // Past every epoch the store knows of, from the version this process now holds.
            crowded = true;
            let known = highest_epoch(store, &key).await?;
            lease.epoch = lease.epoch.max(known).saturating_add(1);
            let write = match policy.conditional {
                Some(false) => Write::Overwrite,
                _ => Write::Replace(version.clone()),
            };
            sent = clock.now();
            match store
                .put_versioned(&layout::lease_object(&key), json(&lease), write)
                .await?
            {
                Written::Yes(v) => version = v,
                Written::Conflict => return Ok(None),
            }
            continue;
        }
        // A session that had no lease and no other epoch has no segment of another run:
        // each was shipped under a lease.
        if how != How::New || crowded {
            fence_others(store, &key, &me.run).await?;
        }
        if how != How::New {
            tracing::info!(
                "session {session:?}: taken (epoch {}, {how:?}){}",
                lease.epoch,
                from.as_ref()
                    .map(|l| format!(" from host {} (run {})", shown(&l.host), shown(&l.run)))
                    .unwrap_or_default()
            );
        }
        return Ok(Some(Held::new(lease, version, sent)));
    }
    Err(Error::Generic {
        store: "acp-journal",
        source: format!("session {session:?}: no free epoch after {}", lease.epoch).into(),
    })
}

/// A lease or epoch record as the store holds it (JSON).
fn json(record: &impl Serialize) -> Bytes {
    Bytes::from(serde_json::to_vec(record).unwrap_or_default())
}

/// The highest epoch the store knows of for session key `key`: its epoch records, its
/// segments' markers, and the records of the earlier layout (`leases/<key>/<seq>`).
async fn highest_epoch(store: &Store, key: &str) -> Result<u64, Error> {
    let mut highest = 0;
    for rel in store.list(&layout::lease_dir(key)).await? {
        let name = rel.rsplit('/').next().unwrap_or(&rel);
        if let Some(n) = layout::parse_epoch_record(name).or_else(|| layout::parse_lease_name(name))
        {
            highest = highest.max(n);
        }
    }
    for rel in store.list(&format!("sessions/{key}")).await? {
        let name = rel.rsplit('/').next().unwrap_or(&rel);
        if let Some(n) = layout::parse_epoch_marker(name) {
            highest = highest.max(n);
        }
    }
    Ok(highest)
}

/// The epochs of session key `key` and the runs that took them (readers keep only segments
/// written under one of these by its run).
///
/// # Errors
/// The store's listing (a record that cannot be read is left out).
pub async fn history(store: &Store, key: &str) -> Result<History, Error> {
    let mut history = History::default();
    for rel in store.list(&layout::lease_dir(key)).await? {
        let name = rel.rsplit('/').next().unwrap_or(&rel);
        if name == layout::LEASE_OBJECT {
            history.leased = true;
        }
        if let Some(epoch) = layout::parse_epoch_record(name) {
            history.leased = true;
            if let Ok(Some((_, bytes))) = store.get_versioned(&rel, MAX_RECORD).await
                && let Ok(record) = serde_json::from_slice::<EpochRecord>(&bytes)
                && record.epoch == epoch
            {
                history.runs.insert(epoch, record.run);
                history.hosts.insert(epoch, record.host);
            }
        }
    }
    Ok(history)
}

/// Which run took each epoch of a session.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    /// The session has a lease in this layout (else its segments predate it, or were never
    /// leased: they are read as written).
    pub leased: bool,
    /// Epoch → the run that took it.
    pub runs: std::collections::BTreeMap<u64, String>,
    /// Epoch → the host that took it.
    pub hosts: std::collections::BTreeMap<u64, String>,
}

impl History {
    /// Whether `host`'s run `run` took an epoch of the session (or the session predates
    /// leases: anyone's word stands).
    pub fn took(&self, host: &str, run: &str) -> bool {
        !self.leased
            || self
                .runs
                .iter()
                .any(|(e, r)| r == run && self.hosts.get(e).is_some_and(|h| h == host))
    }

    /// Whether a segment of run `run` marked with `epochs` may be replayed.
    pub fn admits(&self, run: &str, epochs: &[u64]) -> bool {
        !self.leased
            || epochs
                .iter()
                .any(|e| self.runs.get(e).is_some_and(|r| r == run))
    }
}

/// Fence every segment of session key `key` not written by run `mine`, where the store has it
/// now (one already fenced is left as it is).
///
/// # Errors
/// The store's.
pub async fn fence_others(store: &Store, key: &str, mine: &str) -> Result<(), Error> {
    let listed = store.list(&format!("sessions/{key}")).await?;
    let mut files: std::collections::BTreeMap<&str, Vec<layout::Entry>> = Default::default();
    for rel in &listed {
        if let Some((file, entry)) = layout::split_object(rel) {
            files.entry(file).or_default().push(entry);
        }
    }
    for (file, entries) in files {
        let name = file.rsplit('/').next().unwrap_or(file);
        if layout::run_of_segment(name) == Some(mine)
            || entries
                .iter()
                .any(|e| matches!(e, layout::Entry::Fence { .. }))
            || !name.ends_with(SEGMENT_SUFFIX)
        {
            continue;
        }
        let (_, end) = layout::parts_to_read(&entries, 0);
        store
            .put_new(&format!("{file}/{}", layout::fence_name(end)), Bytes::new())
            .await?;
    }
    Ok(())
}

/// The epoch under which to ship a segment that a run of this host (`host`) left and that
/// never reached the store (the run ended, killed, before its first shipment): the epoch its
/// run took, if it took one (by its epoch record, or by the lease itself when the run was
/// killed between the two writes of a take); else, when the session has no lease at all, a new epoch made for
/// that run (its lease written given back at once). `None` when another run continued the
/// session: the store never had these bytes, so they are a branch nobody continued.
///
/// # Errors
/// The store's; a segment whose header cannot be read.
pub async fn recover(
    store: &Store,
    clock: &dyn Clock,
    host: &str,
    key: &str,
    segment: &std::path::Path,
) -> Result<Option<u64>, Error> {
    let header = crate::journal::SegmentReader::open(segment)
        .map_err(|e| Error::Generic {
            store: "acp-journal",
            source: e.to_string().into(),
        })?
        .header()
        .clone();
    let Some(session) = header.session.clone().filter(|s| session_key(s) == key) else {
        return Ok(None);
    };
    let history = history(store, key).await?;
    if let Some((&epoch, _)) = history.runs.iter().rev().find(|(_, r)| **r == header.run) {
        return Ok(Some(epoch));
    }
    let epoch = match read_lease(store, key).await? {
        // The run took the lease and was killed before its epoch record (written second)
        // reached the store: the epoch is the lease's, and its record is written now.
        Seen::Lease(_, lease) if lease.run == header.run && lease.host == host => lease.epoch,
        Seen::Absent => {
            let epoch = highest_epoch(store, key).await?.saturating_add(1);
            let lease = Lease {
                session: session.clone(),
                epoch,
                host: host.to_string(),
                run: header.run.clone(),
                pid: header.pid,
                ttl_ms: 0,
                beat: 0,
                released: true,
            };
            if let Written::Conflict = store
                .put_versioned(&layout::lease_object(key), json(&lease), Write::Create)
                .await?
            {
                return Ok(None);
            }
            epoch
        }
        _ => return Ok(None),
    };
    let record = EpochRecord {
        session,
        epoch,
        host: host.to_string(),
        run: header.run,
        t: clock.wall_us(),
        how: How::Recovered,
        from: None,
    };
    store
        .put_versioned(
            &layout::epoch_record(key, epoch),
            json(&record),
            Write::Create,
        )
        .await?;
    Ok(Some(epoch))
}

/// What a renewal found.
#[derive(Clone, Debug)]
pub enum Renewal {
    /// Renewed (or given back): the lease as now held.
    Renewed(Held),
    /// Another host took it: its lease, when readable.
    Lost(Option<Lease>),
}

/// Renew `held` (or give it back, with `release`), as session key `key`'s lease.
///
/// # Errors
/// The store's: the outcome is unknown, and `held` stays good only until it runs out.
pub async fn renew(
    store: &Store,
    clock: &dyn Clock,
    key: &str,
    held: &Held,
    release: bool,
) -> Result<Renewal, Error> {
    let next = Lease {
        beat: held.lease.beat.saturating_add(1),
        released: release,
        ..held.lease.clone()
    };
    let sent = clock.now();
    let write = Write::Replace(held.version.clone());
    match store
        .put_versioned(&layout::lease_object(key), json(&next), write)
        .await?
    {
        Written::Yes(version) => Ok(Renewal::Renewed(Held::new(next, version, sent))),
        Written::Conflict => {
            // Changed since this process wrote it: by another host, or by this process in a
            // renewal whose answer was lost (then the lease there is this epoch's, this run's).
            match read_lease(store, key).await? {
                Seen::Lease(version, lease)
                    if lease.epoch == held.lease.epoch
                        && lease.run == held.lease.run
                        && lease.host == held.lease.host =>
                {
                    Ok(Renewal::Renewed(Held {
                        lease,
                        version,
                        // Not renewed by this: good as long as it was, renewed again at once.
                        valid_until: held.valid_until,
                        renew_at: clock.now(),
                    }))
                }
                Seen::Lease(_, lease) => Ok(Renewal::Lost(Some(lease))),
                Seen::Garbage(_) | Seen::Absent => Ok(Renewal::Lost(None)),
            }
        }
    }
}

/// Give back every lease this process holds (at the end of a run), within `within`.
pub async fn release_all(
    store: &Store,
    clock: &dyn Clock,
    leases: &Mutex<Leases>,
    within: Duration,
) {
    let held: Vec<(String, Held)> = leases
        .lock()
        .all_held()
        .map(|(k, h)| (k.clone(), h.clone()))
        .collect();
    let gives = held.into_iter().map(|(key, held)| async move {
        let outcome = renew(store, clock, &key, &held, true).await;
        (key, outcome)
    });
    let done = tokio::time::timeout(within, futures_util::future::join_all(gives))
        .await
        .unwrap_or_default();
    let mut leases = leases.lock();
    for (key, outcome) in done {
        if let Ok(Renewal::Renewed(_)) = outcome {
            leases.set(&key, Standing::Released);
        }
    }
}

/// Renew the leases due at `now`: the renewed are kept, the lost are marked lost (and said).
pub async fn renew_due(
    store: &Store,
    clock: &dyn Clock,
    leases: &Mutex<Leases>,
) -> Result<(), String> {
    let now = clock.now();
    let due: Vec<(String, Held)> = leases
        .lock()
        .all_held()
        .filter(|(_, h)| h.renew_at <= now)
        .map(|(k, h)| (k.clone(), h.clone()))
        .collect();
    let renewals = due.into_iter().map(|(key, held)| async move {
        let outcome = renew(store, clock, &key, &held, false).await;
        (key, held, outcome)
    });
    let mut failed = None;
    for (key, held, outcome) in futures_util::future::join_all(renewals).await {
        match outcome {
            Ok(Renewal::Renewed(h)) => leases.lock().set(&key, Standing::Held(h)),
            Ok(Renewal::Lost(by)) => {
                let what = match &by {
                    Some(l) => format!(
                        "was taken over by another host, {} (epoch {}), while this one could not renew its lease",
                        shown(&l.host),
                        l.epoch
                    ),
                    None => "lost its lease: the lease is gone from the store, or is no lease any more (erased, or lost or damaged by the store)".to_string(),
                };
                tracing::error!(
                    "session {:?} {what}: this host writes it to the store no more (what it journals from here stays on this disk; `acp-journal stats` counts it)",
                    held.lease.session,
                );
                leases.lock().set(&key, Standing::Lost(by));
            }
            Err(e) => failed = Some(e.to_string()),
        }
    }
    failed.map_or(Ok(()), Err)
}

#[cfg(test)]
#[path = "lease_tests.rs"]
mod tests;
