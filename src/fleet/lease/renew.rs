//! Keeping a lease: [`renew`] (or give it back), [`renew_due`] for every lease due, and
//! [`release_all`] at the end of a run.

use std::time::Duration;

use parking_lot::Mutex;

use super::objects::json;
use super::{Held, Lease, Leases, Seen, Standing, read_lease, shown};
use crate::fleet::clock::Clock;
use crate::fleet::layout;
use crate::fleet::layout::SessionKey;
use crate::fleet::store::{Error, Store, Write, Written};

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
    key: &SessionKey,
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
    let held: Vec<(SessionKey, Held)> = leases
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
) -> Result<(), crate::fleet::Error> {
    let now = clock.now();
    let due: Vec<(SessionKey, Held)> = leases
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
            Err(e) => failed = Some(e.into()),
        }
    }
    failed.map_or(Ok(()), Err)
}
