//! Which host continues a session: an owner lease per session in the store, made of
//! create-only records.
//!
//! A session's lease is the sequence `leases/<key>/<seq>`: each record is created with
//! create-if-absent, so of two hosts writing record `n + 1` exactly one succeeds — the store's
//! conditional write is the only arbiter, no clock is trusted for it. The latest record says
//! who holds the session, since which record (the **epoch**, which fences: it changes only when
//! the session changes hands) and until when. A holder renews by writing the next record
//! before its lease runs out; one whose next record is taken has lost the session and stops
//! writing it. A host taking a session whose holder's lease ran out (or was never released,
//! with `--takeover`) first writes a **fence** into each of the old holder's segments at the
//! length the store has, so no reader ever mixes that writer's later parts into the session.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use std::collections::HashMap;
use std::time::Duration;

use super::layout;
use super::remote::{Error, Put, Remote};
use crate::journal::store::{SEGMENT_SUFFIX, session_key};

/// One lease record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The session ID.
    pub session: String,
    /// This record's number.
    pub seq: u64,
    /// The record at which the holder took the session.
    pub epoch: u64,
    /// The holding host (its journal directory's name).
    pub host: String,
    /// The holding run.
    pub run: String,
    /// Unix microseconds when the lease runs out unless renewed.
    pub expires: i64,
    /// Given back: anyone may take it.
    #[serde(default)]
    pub released: bool,
}

impl Record {
    /// Whether another host may take the session at `now` without `--takeover`.
    pub fn free(&self, now: i64) -> bool {
        self.released || self.expires <= now
    }
}

/// Why a session could not be taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Another host holds it.
    Held(Record),
    /// The store could not be asked.
    Store(String),
}

impl Refusal {
    /// The message a client gets.
    pub fn message(&self, session: &str) -> String {
        match self {
            Refusal::Held(r) => {
                let until = jiff::Timestamp::from_microsecond(r.expires)
                    .map(|t| t.to_string())
                    .unwrap_or_default();
                format!(
                    "session {session:?} is being continued on host {} (run {}); its lease runs out at {until} unless renewed (start acp-journal with --takeover to take it anyway)",
                    r.host, r.run
                )
            }
            Refusal::Store(e) => {
                format!("session {session:?}: the shared store cannot say who holds it ({e})")
            }
        }
    }
}

/// The latest record of the lease of the session whose key is `key`, if any. A record removed
/// between the listing and its reading (a holder prunes the ones before its latest) means a
/// newer one exists: the listing is read again.
///
/// # Errors
/// The store's; a record that does not parse is skipped for the one before it.
pub async fn latest(remote: &Remote, key: &str) -> Result<Option<Record>, Error> {
    let dir = layout::lease_dir(key);
    'listing: for _ in 0..5 {
        let mut seqs: Vec<u64> = remote
            .list(&dir)
            .await?
            .iter()
            .filter_map(|rel| rel.rsplit_once('/'))
            .filter(|(d, _)| *d == dir)
            .filter_map(|(_, name)| layout::parse_lease_name(name))
            .collect();
        seqs.sort_unstable();
        for seq in seqs.into_iter().rev() {
            match remote
                .get(&format!("{dir}/{}", layout::lease_name(seq)))
                .await
            {
                Ok(bytes) if bytes.len() <= 64 * 1024 => {
                    if let Ok(record) = serde_json::from_slice::<Record>(&bytes)
                        && record.seq == seq
                    {
                        return Ok(Some(record));
                    }
                }
                Ok(_) => {}
                Err(Error::NotFound { .. }) => continue 'listing,
                Err(e) => return Err(e),
            }
        }
        return Ok(None);
    }
    Err(Error::Generic {
        store: "acp-journal",
        source: format!("the lease records of {key} keep changing").into(),
    })
}

/// Write `record` as record `record.seq`: `Ok(true)` when it is ours, `Ok(false)` when that
/// record was already written (someone else moved first).
///
/// # Errors
/// The store's.
pub async fn write(remote: &Remote, key: &str, record: &Record) -> Result<bool, Error> {
    let name = format!(
        "{}/{}",
        layout::lease_dir(key),
        layout::lease_name(record.seq)
    );
    let body = Bytes::from(serde_json::to_vec(record).unwrap_or_default());
    Ok(remote.put_new(&name, body).await? == Put::Created)
}

/// Remove the records before the one before `seq` (the latest is what counts; the old ones
/// only take room).
pub async fn prune(remote: &Remote, key: &str, seq: u64) {
    let dir = layout::lease_dir(key);
    let Ok(listed) = remote.list(&dir).await else {
        return;
    };
    for rel in listed {
        if let Some((_, name)) = rel.rsplit_once('/')
            && layout::parse_lease_name(name).is_some_and(|n| n + 1 < seq)
        {
            let _ = remote.delete(&rel).await;
        }
    }
}

/// Fence the segments of the session `key` written by `run`: each ends, for readers, where
/// the store has it now.
///
/// # Errors
/// The store's.
pub async fn fence(remote: &Remote, key: &str, run: &str) -> Result<(), Error> {
    let dir = format!("sessions/{key}");
    let listed = remote.list(&dir).await?;
    let mut files: std::collections::BTreeMap<&str, Vec<layout::Entry>> = Default::default();
    for rel in &listed {
        if let Some((file, entry)) = layout::split_object(rel) {
            files.entry(file).or_default().push(entry);
        }
    }
    for (file, entries) in files {
        let name = file.rsplit('/').next().unwrap_or(file);
        let stem = name.strip_suffix(SEGMENT_SUFFIX).unwrap_or(name);
        // `<run>.acpj.zst`, or `<run>.<n>.acpj.zst` when the name was taken.
        if stem != run && !stem.strip_prefix(run).is_some_and(|n| n.starts_with('.')) {
            continue;
        }
        let (_, end) = layout::chain(&entries, 0);
        remote
            .put_new(&format!("{file}/{}", layout::fence_name(end)), Bytes::new())
            .await?;
    }
    Ok(())
}

/// The leases this process holds, by session key.
#[derive(Debug, Default)]
pub struct Book {
    held: HashMap<String, Holding>,
}

/// A lease this process took.
#[derive(Clone, Debug)]
pub struct Holding {
    /// Its latest record.
    pub record: Record,
    /// Another host took it: this process writes the session no more.
    pub lost: bool,
}

impl Book {
    /// The lease of session key `key`, if this process took it.
    pub fn get(&self, key: &str) -> Option<&Holding> {
        self.held.get(key)
    }

    /// Every lease held and not lost.
    pub fn live(&self) -> impl Iterator<Item = (&String, &Record)> {
        self.held
            .iter()
            .filter(|(_, h)| !h.lost)
            .map(|(k, h)| (k, &h.record))
    }

    /// Keep `record` as the latest of `key`'s lease.
    pub fn keep(&mut self, key: &str, record: Record) {
        self.held.insert(
            key.to_string(),
            Holding {
                record,
                lost: false,
            },
        );
    }

    /// `key`'s lease was taken by another host.
    pub fn lose(&mut self, key: &str) {
        if let Some(h) = self.held.get_mut(key) {
            h.lost = true;
        }
    }
}

/// Who this process is, for its lease records.
#[derive(Clone, Debug)]
pub struct Holder {
    /// This journal directory's host name.
    pub host: String,
    /// This process's run.
    pub run: String,
    /// How long a lease lasts unless renewed.
    pub ttl: Duration,
    /// Take sessions whoever holds them (`--takeover`).
    pub takeover: bool,
    /// The store enforces create-if-absent: the probe's finding, `None` until it has one or
    /// when the store did not answer it.
    pub conditional: Option<bool>,
    /// The probe is over (whatever it found).
    pub probed: bool,
}

/// Now, in Unix microseconds.
pub fn now_us() -> i64 {
    jiff::Timestamp::now().as_microsecond()
}

/// Take the lease of `session` for `holder`: a new epoch, unless this process holds it
/// already. Refused while another host holds it (unless `--takeover`), or — on a store that
/// ignores conditional writes — whenever another host had it last (unless `--takeover`).
/// A previous holder that did not give it back is fenced first.
///
/// # Errors
/// The refusal.
pub async fn acquire(
    remote: &Remote,
    book: &std::sync::Mutex<Book>,
    holder: &Holder,
    session: &str,
) -> Result<Record, Refusal> {
    let key = session_key(session);
    if let Some(h) = book.lock().unwrap_or_else(|p| p.into_inner()).get(&key)
        && !h.lost
    {
        return Ok(h.record.clone());
    }
    let store = |e: Error| Refusal::Store(e.to_string());
    let ttl_us = i64::try_from(holder.ttl.as_micros()).unwrap_or(i64::MAX);
    // A session never leased (a new one): its first record in one request, where the store
    // is known to refuse a second create.
    let first = Record {
        session: session.to_string(),
        seq: 1,
        epoch: 1,
        host: holder.host.clone(),
        run: holder.run.clone(),
        expires: now_us() + ttl_us,
        released: false,
    };
    if holder.conditional == Some(true) && write(remote, &key, &first).await.map_err(store)? {
        book.lock()
            .unwrap_or_else(|p| p.into_inner())
            .keep(&key, first.clone());
        return Ok(first);
    }
    for _ in 0..3 {
        let latest = latest(remote, &key).await.map_err(store)?;
        let now = now_us();
        if let Some(r) = &latest
            && r.host != holder.host
            && !holder.takeover
            && (!r.free(now) || holder.conditional == Some(false))
        {
            return Err(Refusal::Held(r.clone()));
        }
        if let Some(r) = &latest
            && !r.released
            && r.run != holder.run
        {
            if r.host != holder.host {
                tracing::warn!(
                    "session {session:?}: taking it from host {} (run {}), which did not give it back",
                    r.host,
                    r.run
                );
            }
            fence(remote, &key, &r.run).await.map_err(store)?;
        }
        let seq = latest.as_ref().map_or(1, |r| r.seq + 1);
        let record = Record {
            session: session.to_string(),
            seq,
            epoch: seq,
            host: holder.host.clone(),
            run: holder.run.clone(),
            expires: now + ttl_us,
            released: false,
        };
        if write(remote, &key, &record).await.map_err(store)? {
            book.lock()
                .unwrap_or_else(|p| p.into_inner())
                .keep(&key, record.clone());
            return Ok(record);
        }
        // Another host wrote that record first: look again.
    }
    match latest(remote, &key).await.map_err(store)? {
        Some(r) => Err(Refusal::Held(r)),
        None => Err(Refusal::Store("the lease keeps changing".into())),
    }
}

/// Renew (or, with `released`, give back) the lease `record` of `key`: `Ok(Some)` with the new
/// record, `Ok(None)` when another host took it meanwhile.
///
/// # Errors
/// The store's.
pub async fn renew(
    remote: &Remote,
    key: &str,
    record: &Record,
    ttl: Duration,
    released: bool,
) -> Result<Option<Record>, Error> {
    let next = Record {
        seq: record.seq + 1,
        expires: now_us() + i64::try_from(ttl.as_micros()).unwrap_or(i64::MAX),
        released,
        ..record.clone()
    };
    if write(remote, key, &next).await? {
        prune(remote, key, next.seq).await;
        Ok(Some(next))
    } else {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(expires: i64, released: bool) -> Record {
        Record {
            session: "s".into(),
            seq: 3,
            epoch: 2,
            host: "h".into(),
            run: "r".into(),
            expires,
            released,
        }
    }

    #[test]
    fn a_lease_is_free_once_released_or_run_out() {
        assert!(!record(100, false).free(99));
        assert!(record(100, false).free(100));
        assert!(record(100, true).free(0));
    }

    #[test]
    fn a_refusal_names_the_holder_and_when_it_runs_out() {
        let held = Refusal::Held(record(1_795_297_313_000_000, false));
        let text = held.message("sess_1");
        assert!(text.contains("host h") && text.contains("run r"), "{text}");
        assert!(text.contains("2026-11-21T"), "{text}");
        assert!(text.contains("--takeover"), "{text}");
    }
}
