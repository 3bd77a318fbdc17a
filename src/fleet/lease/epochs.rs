//! A session's epochs in the store: the highest known, which run took each ([`history`]),
//! fences on every other run's segments ([`fence_others`]), and the epoch a dead run's
//! never-shipped segment goes under ([`recover`]).

use bytes::Bytes;

use super::objects::{MAX_RECORD, json};
use super::{EpochRecord, How, Lease, Seen, read_lease};
use crate::fleet::clock::Clock;
use crate::fleet::layout;
use crate::fleet::layout::{SessionId, SessionKey};
use crate::fleet::store::{Error, Store, Write, Written};
use crate::journal::dir::SEGMENT_SUFFIX;

/// The highest epoch the store knows of for session key `key`: its epoch records, its
/// segments' markers, and the records of the earlier layout (`leases/<key>/<seq>`).
pub(super) async fn highest_epoch(store: &Store, key: &SessionKey) -> Result<u64, Error> {
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
pub async fn history(store: &Store, key: &SessionKey) -> Result<Epochs, Error> {
    let mut history = Epochs::default();
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
pub struct Epochs {
    /// The session has a lease in this layout (else its segments predate it, or were never
    /// leased: they are read as written).
    pub leased: bool,
    /// Epoch → the run that took it.
    pub runs: std::collections::BTreeMap<u64, String>,
    /// Epoch → the host that took it.
    pub hosts: std::collections::BTreeMap<u64, String>,
}

impl Epochs {
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
pub async fn fence_others(store: &Store, key: &SessionKey, mine: &str) -> Result<(), Error> {
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
    key: &SessionKey,
    segment: &std::path::Path,
) -> Result<Option<u64>, Error> {
    let header = crate::journal::SegmentReader::open(segment)
        .map_err(|e| Error::Generic {
            store: "acp-journal",
            source: e.to_string().into(),
        })?
        .header()
        .clone();
    let Some(session) = header
        .session
        .clone()
        .filter(|s| SessionKey::of(SessionId::new(s)) == *key)
    else {
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
