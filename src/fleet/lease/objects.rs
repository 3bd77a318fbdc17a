//! The lease's objects in the store: the lease ([`Lease`], naming its holder's [`Identity`])
//! and the record of each epoch ([`EpochRecord`], saying [`How`] it was taken), as JSON; what a
//! read of the lease found ([`Seen`], [`read_lease`]).

use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::fleet::layout;
use crate::fleet::layout::SessionKey;
use crate::fleet::store::{Error, Store, Version};

/// Largest lease or epoch record read.
pub(super) const MAX_RECORD: u64 = 64 * 1024;
/// Longest TTL a lease may ask others to wait (a larger one, or a garbage one, counts as
/// this much).
pub const MAX_TTL: Duration = Duration::from_secs(600);

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
    pub(super) fn is(&self, me: &Identity) -> bool {
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
    pub(super) fn version(&self) -> Option<&Version> {
        match self {
            Seen::Absent => None,
            Seen::Lease(v, _) | Seen::Garbage(v) => Some(v),
        }
    }

    pub(super) fn lease(&self) -> Option<&Lease> {
        match self {
            Seen::Lease(_, l) => Some(l),
            _ => None,
        }
    }
}

/// Read session key `key`'s lease.
///
/// # Errors
/// The store's.
pub async fn read_lease(store: &Store, key: &SessionKey) -> Result<Seen, Error> {
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
            Err(e) if crate::fleet::store::is_too_large(&e) => {
                match store.head(&layout::lease_object(key)).await? {
                    Some(version) => Seen::Garbage(version),
                    None => Seen::Absent,
                }
            }
            Err(e) => return Err(e),
        },
    )
}

/// A lease or epoch record as the store holds it (JSON).
pub(super) fn json(record: &impl Serialize) -> Bytes {
    Bytes::from(serde_json::to_vec(record).unwrap_or_default())
}
