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

mod epochs;
mod judge;
mod objects;
mod refusal;
mod renew;
mod standing;
mod take;

pub use epochs::{Epochs, fence_others, history, recover};
pub use judge::{Held, Policy, Verdict, Watch, judge, margin};
pub use objects::{EpochRecord, How, Identity, Lease, MAX_TTL, Seen, read_lease};
pub use refusal::{Refusal, Unanswered, shown};
pub use renew::{Renewal, release_all, renew, renew_due};
pub use standing::{Leases, Shipping, Standing};
pub use take::{Acquired, Taker, acquire, take_all, take_new};

#[cfg(test)]
#[path = "lease_tests.rs"]
mod tests;
