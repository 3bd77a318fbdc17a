//! Taking a session's lease: [`acquire`] (waiting for a silent holder's lease to run out),
//! [`take_new`] (a session that never had one: two writes, no listing), [`take_all`] (the
//! shipper's sessions at once); each take completed by its epoch record and fences before
//! anything is shipped under it.

use std::time::Duration;

use futures_util::StreamExt;
use parking_lot::Mutex;

use super::epochs::highest_epoch;
use super::objects::{MAX_RECORD, json};
use super::{
    EpochRecord, Held, How, Identity, Lease, Leases, Policy, Refusal, Renewal, Seen, Standing,
    Unanswered, Verdict, fence_others, judge, read_lease, renew, shown,
};
use crate::fleet::clock::Clock;
use crate::fleet::layout;
use crate::fleet::layout::{SessionId, SessionKey};
use crate::fleet::liveness::Liveness;
use crate::fleet::store::{Error, Store, Version, Write, Written};

/// How often a host waiting for a lease looks at it again.
const POLL: Duration = Duration::from_secs(1);
/// How long after taking a lease it is read back to confirm the take (see [`take`]).
pub(super) const SETTLE: Duration = Duration::from_millis(200);
/// Leases taken at once by [`take_all`].
const TAKES_AT_ONCE: usize = 16;

/// This process as it takes leases: who it is, how it takes them, its clock, and what it can
/// tell of its host's processes (a holder on this host whose process is gone is not waited
/// for). The decisions ([`judge`]) read the time and the processes only through it.
#[derive(Clone, Copy, Debug)]
pub struct Taker<'a> {
    /// This process, as its leases name it.
    pub me: &'a Identity,
    /// How it takes leases.
    pub policy: &'a Policy,
    /// Its clock.
    pub clock: &'a dyn Clock,
    /// Which processes of its host run.
    pub liveness: &'a dyn Liveness,
}

impl Taker<'_> {
    /// The lease this run writes to hold `session` at `epoch`: new, never renewed.
    fn fresh_lease(&self, session: SessionId<'_>, epoch: u64) -> Lease {
        Lease {
            session: session.to_string(),
            epoch,
            host: self.me.host.clone(),
            run: self.me.run.clone(),
            pid: self.me.pid,
            ttl_ms: u64::try_from(self.policy.ttl.as_millis()).unwrap_or(u64::MAX),
            beat: 0,
            released: false,
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

/// Take session `session`'s lease for `taker`, waiting at most `patience` for a holder that has
/// gone silent to run out (a holder seen renewing refuses at once). Returns at once when this
/// process holds it already.
///
/// # Errors
/// The refusal.
pub async fn acquire(
    store: &Store,
    leases: &Mutex<Leases>,
    taker: &Taker<'_>,
    session: SessionId<'_>,
    patience: Duration,
) -> Result<Acquired, Refusal> {
    let Taker {
        policy,
        clock,
        liveness,
        ..
    } = *taker;
    let key = SessionKey::of(session);
    let refused = |e: Error| Refusal::Store(e.into());
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
    let alive = |l: &Lease| liveness.running(l.pid);
    for _ in 0..64 {
        let seen = read_lease(store, &key).await.map_err(refused)?;
        let now = clock.now();
        let mut watched = leases.lock().watched(&key);
        let next = judge(&seen, &mut watched, taker.me, policy, now, alive);
        if !matches!(next, Verdict::Take(_) | Verdict::Adopt) {
            leases.lock().set(&key, Standing::Watching(watched));
        }
        match next {
            Verdict::Adopt => {
                let Seen::Lease(version, lease) = seen else {
                    continue;
                };
                // Written by this run, its answer lost: when is unknown, so it is good only
                // once renewed from here (and the take completed first).
                let taken = Claim {
                    version,
                    lease,
                    sent: Duration::ZERO,
                };
                let done = complete(store, taker, session, taken, How::New, None)
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
            Verdict::Take(how) => match take(store, taker, session, &seen, how).await {
                Ok(Some(held)) => {
                    let epoch = held.lease.epoch;
                    leases.lock().set(&key, Standing::Held(held));
                    return Ok(Acquired { epoch, again });
                }
                // Another host changed it first: look again.
                Ok(None) => {}
                Err(e) => return Err(refused(e)),
            },
            Verdict::Wait { until } => {
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
            Verdict::Refuse => {
                return Err(Refusal::Held {
                    lease: seen.lease().cloned(),
                    unarbitrated: policy.conditional == Some(false) && !policy.takeover,
                });
            }
        }
    }
    Err(Refusal::Store(Unanswered::Contended))
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
    taker: &Taker<'_>,
    sessions: Vec<String>,
) -> Result<(), crate::fleet::Error> {
    let takes = sessions.into_iter().map(|session| async move {
        let got = match take_new(store, leases, taker, SessionId::new(&session)).await {
            Ok(Some(acquired)) => Ok(acquired),
            Ok(None) => {
                acquire(
                    store,
                    leases,
                    taker,
                    SessionId::new(&session),
                    Duration::ZERO,
                )
                .await
            }
            Err(e) => Err(Refusal::Store(e.into())),
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
            Err(Refusal::Store(e)) => failed = Err(e.into()),
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
    taker: &Taker<'_>,
    session: SessionId<'_>,
) -> Result<Option<Acquired>, Error> {
    let Taker { policy, clock, .. } = *taker;
    let key = SessionKey::of(session);
    if policy.conditional != Some(true) || policy.takeover || leases.lock().get(&key).is_some() {
        return Ok(None);
    }
    let lease = taker.fresh_lease(session, 1);
    let sent = clock.now();
    let version = match store
        .put_versioned(&layout::lease_object(&key), json(&lease), Write::Create)
        .await?
    {
        Written::Yes(version) => version,
        Written::Conflict => return Ok(None),
    };
    let taken = Claim {
        version,
        lease,
        sent,
    };
    let Some(held) = complete(store, taker, session, taken, How::New, None).await? else {
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
    taker: &Taker<'_>,
    session: SessionId<'_>,
    seen: &Seen,
    how: How,
) -> Result<Option<Held>, Error> {
    let Taker { policy, clock, .. } = *taker;
    let key = SessionKey::of(session);
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
    let lease = taker.fresh_lease(session, epoch);
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
            let taken = Claim {
                version,
                lease,
                sent,
            };
            complete(store, taker, session, taken, how, from).await
        }
        Written::Conflict => Ok(None),
    }
}

/// A lease this process wrote: at which version, and when it sent it (its own clock).
struct Claim {
    version: Version,
    lease: Lease,
    sent: Duration,
}

/// Finish taking the lease `taken`: record its epoch (a later one
/// when that epoch was recorded by another run already, its lease since replaced with
/// garbage) and fence every other run's segments, before anything is shipped under it. Both
/// are idempotent, so a take whose answer was lost is completed the same way.
async fn complete(
    store: &Store,
    taker: &Taker<'_>,
    session: SessionId<'_>,
    taken: Claim,
    how: How,
    from: Option<Lease>,
) -> Result<Option<Held>, Error> {
    let Taker {
        me, policy, clock, ..
    } = *taker;
    let key = SessionKey::of(session);
    let Claim {
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
