//! The shipper: copies the new bytes of this host's journal files into the store, as immutable
//! parts, every ship interval, on the fleet's own thread (nothing on the relay path waits for
//! it).
//!
//! It follows the segments this process writes (told by [`Note`]s as they open and close) and
//! the journal directory's catalog; at start it also picks up every segment the local disk
//! holds and the store lacks (written before a crash, or while no store was set), once their
//! writers are gone. A file's bytes are read back from the local disk when shipped: what waits
//! while the store is down or slow is a few numbers per file, never the bytes, so memory stays
//! bounded whatever the backlog. A closed file whose every byte is in the store is written
//! once to the ledger (`shipped-<store>.ndjson` in the journal directory) and forgotten; its
//! parts are first compacted into one object when there were several.

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot};

use super::layout::{self, Entry};
use super::lease::{self, Book, Holder};
use super::remote::Remote;
use super::status::Status;
use crate::journal::Store;
use crate::journal::store::{SEGMENT_SUFFIX, segments_in};

/// Largest part shipped at once; a bigger backlog goes as several.
const MAX_PART: u64 = 8 << 20;
/// Largest file compacted into one object.
const MAX_COMPACT: u64 = 64 << 20;
/// A live file with this many parts has them compacted.
const COMPACT_AT: usize = 64;
/// Uploads (and listings) in flight at once.
const IN_FLIGHT: usize = 16;

/// What the journal writers tell the shipper.
#[derive(Debug)]
pub enum Note {
    /// A segment of this process was created (absolute path).
    Opened(PathBuf),
    /// A segment of this process was closed: nothing more will be written to it.
    Closed(PathBuf),
    /// Ship what is left (until the deadline), then answer and stop.
    Finish(Instant, oneshot::Sender<()>),
}

/// A file the shipper follows.
struct Tracked {
    /// Absolute local path.
    local: PathBuf,
    /// Its name in the store.
    file: String,
    /// Bytes known to be in the store from the first on (`None`: ask the store first).
    shipped: Option<u64>,
    /// Parts known to be in the store (for compaction).
    parts: Vec<(u64, u64)>,
    /// No more bytes will come.
    closed: bool,
    /// The earliest the bytes waiting to be shipped may have been written: the start of the
    /// last round that found none waiting (so the lag reported is an upper bound).
    waiting_since: Option<Instant>,
    /// The local file's inode when last seen (a catalog rewritten in place gets a new one).
    inode: u64,
    /// A session segment this process writes: shipped only under the session's lease (its
    /// key; the session ID is read from the segment's header).
    lease: Option<String>,
    /// The lease's epoch is recorded in the segment's directory in the store.
    epoch_recorded: bool,
}

/// One request (or a few) of a round.
enum Job {
    /// Learn what the store holds of the file.
    Ask,
    /// Ship bytes `[start, end)`, first recording the lease's epoch when `epoch` is given.
    Ship {
        start: u64,
        end: u64,
        epoch: Option<u64>,
    },
    /// Replace `parts` with one object over `[start, end)`.
    Compact { start: u64, end: u64 },
    /// Take the lease of the file's session, then ship bytes `[start, end)` under it.
    Lease { start: u64, end: u64 },
    /// Renew (or give back) the lease of session key `key`.
    Renew {
        key: String,
        record: lease::Record,
        release: bool,
    },
}

/// A job's outcome.
enum Done {
    Asked(Vec<Entry>),
    Shipped {
        start: u64,
        end: u64,
    },
    Compacted {
        start: u64,
        end: u64,
    },
    /// The session's lease is another host's.
    Refused(lease::Refusal),
    Renewed(String, Option<lease::Record>),
}

/// The shipper's state; run by [`Shipper::run`].
pub struct Shipper {
    remote: Remote,
    local: Store,
    host: String,
    interval: Duration,
    tracked: HashMap<PathBuf, Tracked>,
    ledger: Ledger,
    status: Arc<Status>,
    notes: mpsc::UnboundedReceiver<Note>,
    /// The leases this process holds, shared with [`super::Fleet::acquire`].
    book: Arc<Mutex<Book>>,
    /// Who this process is in lease records.
    holder: Arc<Mutex<Holder>>,
    /// When the last look at the files began.
    last_look: Instant,
}

impl Shipper {
    /// A shipper of `local`'s files to `remote`, as host `host`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        remote: Remote,
        local: Store,
        host: String,
        interval: Duration,
        status: Arc<Status>,
        notes: mpsc::UnboundedReceiver<Note>,
        book: Arc<Mutex<Book>>,
        holder: Arc<Mutex<Holder>>,
    ) -> Shipper {
        let ledger = Ledger::open(&local, remote.url());
        Shipper {
            remote,
            local,
            host,
            interval,
            tracked: HashMap::new(),
            ledger,
            status,
            notes,
            book,
            holder,
            last_look: Instant::now(),
        }
    }

    /// Ship until told to finish (or every sender is gone).
    pub async fn run(mut self) {
        self.recover();
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                note = self.notes.recv() => match note {
                    Some(Note::Opened(path)) => self.follow(path, Some(0), true),
                    Some(Note::Closed(path)) => {
                        if let Some(t) = self.tracked.get_mut(&path) {
                            t.closed = true;
                        }
                    }
                    Some(Note::Finish(deadline, done)) => {
                        self.finish(deadline).await;
                        let _ = done.send(());
                        return;
                    }
                    None => return,
                },
                _ = tick.tick() => {
                    self.round().await;
                }
            }
        }
    }

    /// Ship until nothing is left or `deadline` passes.
    async fn finish(&mut self, deadline: Instant) {
        while let Ok(note) = self.notes.try_recv() {
            match note {
                Note::Opened(path) => self.follow(path, Some(0), true),
                Note::Closed(path) => {
                    if let Some(t) = self.tracked.get_mut(&path) {
                        t.closed = true;
                    }
                }
                Note::Finish(_, done) => {
                    let _ = done.send(());
                }
            }
        }
        // The process ends: nothing more will be written to its files.
        for t in self.tracked.values_mut() {
            t.closed = true;
        }
        while Instant::now() < deadline {
            match tokio::time::timeout_at(deadline.into(), self.round()).await {
                Ok(true) if self.status.failing() => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Ok(true) => {}
                Ok(false) | Err(_) => break,
            }
        }
        // Then the sessions are given back, so any host may continue them at once.
        let releases = self.lease_jobs(true);
        let gives = releases.into_iter().map(|(_, job)| {
            let remote = self.remote.clone();
            async move {
                if let Job::Renew { key, record, .. } = job {
                    let _ = lease::renew(&remote, &key, &record, Duration::ZERO, true).await;
                }
            }
        });
        let _ = tokio::time::timeout_at(
            deadline.max(Instant::now() + Duration::from_secs(1)).into(),
            futures_util::stream::iter(gives)
                .buffer_unordered(IN_FLIGHT)
                .collect::<Vec<()>>(),
        )
        .await;
        self.status.write_file(&self.local, self.remote.url());
    }

    /// Follow `path` (absolute, under the journal directory); `mine`: a segment this process
    /// writes, so a session's is shipped under its lease.
    fn follow(&mut self, path: PathBuf, shipped: Option<u64>, mine: bool) {
        let rel = self.local.relative(&path);
        let lease = rel
            .strip_prefix("sessions/")
            .and_then(|r| r.split_once('/'))
            .filter(|_| mine)
            .map(|(key, _)| key.to_string());
        let file = if rel == "catalog.ndjson" {
            layout::host_catalog(&self.host)
        } else {
            rel
        };
        self.tracked.entry(path.clone()).or_insert(Tracked {
            local: path,
            file,
            shipped,
            parts: Vec::new(),
            closed: false,
            waiting_since: None,
            inode: 0,
            lease,
            epoch_recorded: false,
        });
    }

    /// Follow the catalog, and every segment on the local disk that the ledger does not list as
    /// shipped and whose writer is gone (the store is asked what it has of them).
    fn recover(&mut self) {
        self.follow(self.local.root().join("catalog.ndjson"), None, false);
        let mut dirs = vec![self.local.root().join("connections")];
        if let Ok(sessions) = std::fs::read_dir(self.local.root().join("sessions")) {
            dirs.extend(sessions.flatten().map(|e| e.path()));
        }
        for dir in dirs {
            for path in segments_in(&dir).unwrap_or_default() {
                let rel = self.local.relative(&path);
                let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                if self.ledger.has(&rel, len) || self.local.writer_alive(&rel) {
                    continue;
                }
                self.follow(path.clone(), None, false);
                if let Some(t) = self.tracked.get_mut(&path) {
                    t.closed = true;
                }
            }
        }
    }

    /// One round: ask, ship and compact what needs it, take and renew leases, at most
    /// [`IN_FLIGHT`] requests at once. Returns whether there was anything to do.
    async fn round(&mut self) -> bool {
        let mut jobs = self.lease_jobs(false);
        jobs.extend(self.file_jobs());
        if jobs.is_empty() {
            self.status
                .write_file_if_changed(&self.local, self.remote.url());
            return false;
        }
        let (ttl, holder) = {
            let holder = self.holder.lock().unwrap_or_else(|p| p.into_inner());
            (holder.ttl, holder.clone())
        };
        let work = jobs.into_iter().filter_map(|(path, job)| {
            let t = path.as_ref().and_then(|p| self.tracked.get(p));
            let (local, file, parts) = match t {
                Some(t) => (t.local.clone(), t.file.clone(), t.parts.clone()),
                None if path.is_none() => (PathBuf::new(), String::new(), Vec::new()),
                None => return None,
            };
            let (remote, book, holder) = (self.remote.clone(), self.book.clone(), holder.clone());
            Some(async move {
                let outcome = match job {
                    Job::Lease { start, end } => match session_of(&local) {
                        Some(session) => {
                            match lease::acquire(&remote, &book, &holder, &session).await {
                                Ok(record) => {
                                    let epoch = Some(record.epoch);
                                    let ship = Job::Ship { start, end, epoch };
                                    run_job(&remote, &local, &file, &parts, ship).await
                                }
                                Err(refusal) => Ok(Done::Refused(refusal)),
                            }
                        }
                        None => Err(format!("{}: no session in its header yet", local.display())),
                    },
                    Job::Renew {
                        key,
                        record,
                        release,
                    } => lease::renew(&remote, &key, &record, ttl, release)
                        .await
                        .map(|r| Done::Renewed(key, r))
                        .map_err(|e| e.to_string()),
                    job => run_job(&remote, &local, &file, &parts, job).await,
                };
                (path, outcome)
            })
        });
        let results: Vec<_> = futures_util::stream::iter(work)
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        let done_at = Instant::now();
        let mut failed = None;
        for (path, outcome) in results {
            match outcome {
                Ok(Done::Renewed(key, renewed)) => self.renewed(&key, renewed),
                Ok(done) => {
                    if let Some(path) = path {
                        self.apply(&path, done, done_at).await;
                    }
                }
                Err(e) => failed = Some(e),
            }
        }
        match failed {
            Some(e) => self.status.failed(self.remote.url(), &e),
            None => self.status.recovered(self.remote.url()),
        }
        // What waits now, written while the round went included.
        let (mut bytes, mut files) = (0, 0);
        for t in self.tracked.values() {
            let len = std::fs::metadata(&t.local).map_or(0, |m| m.len());
            let shipped = t.shipped.unwrap_or(0);
            if len > shipped {
                bytes += len - shipped;
                files += 1;
            }
        }
        self.status.set_behind(bytes, files);
        self.status
            .write_file_if_changed(&self.local, self.remote.url());
        true
    }

    /// Renewals of the leases held that are a third through, or every one's release.
    fn lease_jobs(&self, release: bool) -> Vec<(Option<PathBuf>, Job)> {
        let ttl = self.holder.lock().unwrap_or_else(|p| p.into_inner()).ttl;
        let due = lease::now_us() + i64::try_from((ttl * 2 / 3).as_micros()).unwrap_or(0);
        let book = self.book.lock().unwrap_or_else(|p| p.into_inner());
        book.live()
            .filter(|(_, r)| release || r.expires <= due)
            .map(|(key, record)| {
                (
                    None,
                    Job::Renew {
                        key: key.clone(),
                        record: record.clone(),
                        release,
                    },
                )
            })
            .collect()
    }

    /// What the files need: asking the store, shipping, compacting, a lease. Files done are
    /// written to the ledger and forgotten.
    fn file_jobs(&mut self) -> Vec<(Option<PathBuf>, Job)> {
        let since = std::mem::replace(&mut self.last_look, Instant::now());
        let mut jobs = Vec::new();
        let mut behind = 0u64;
        let mut behind_files = 0u64;
        let mut gone = Vec::new();
        let book = self.book.lock().unwrap_or_else(|p| p.into_inner());
        let ttl = self.holder.lock().unwrap_or_else(|p| p.into_inner()).ttl;
        // A lease this close to running out is not shipped under until renewed.
        let margin = i64::try_from((ttl / 6).as_micros()).unwrap_or(0);
        for (path, t) in &mut self.tracked {
            let Some(shipped) = t.shipped else {
                jobs.push((Some(path.clone()), Job::Ask));
                continue;
            };
            let Ok(meta) = std::fs::metadata(&t.local) else {
                // Removed (pruned) or not made yet (the catalog): nothing to ship now.
                if t.closed {
                    gone.push(path.clone());
                }
                continue;
            };
            let len = meta.len();
            if t.inode != 0 && (meta.ino() != t.inode || len < shipped) {
                // Rewritten in place (`list --rebuild-catalog`): shipped again from the start;
                // readers take the longest chain, so the old parts are removed first.
                t.shipped = None;
                t.inode = meta.ino();
                jobs.push((Some(path.clone()), Job::Ask));
                continue;
            }
            t.inode = meta.ino();
            if len > shipped {
                t.waiting_since.get_or_insert(since);
                behind += len - shipped;
                behind_files += 1;
                let mut epoch = None;
                if let Some(key) = &t.lease {
                    match book.get(key) {
                        None => {
                            let end = len.min(shipped + MAX_PART);
                            let start = shipped;
                            jobs.push((Some(path.clone()), Job::Lease { start, end }));
                            continue;
                        }
                        // Another host continues the session: this one writes it no more.
                        Some(h) if h.lost => {
                            gone.push(path.clone());
                            continue;
                        }
                        Some(h) if h.record.expires - margin <= lease::now_us() => continue,
                        Some(h) => {
                            epoch = (!t.epoch_recorded).then_some(h.record.epoch);
                        }
                    }
                }
                jobs.push((
                    Some(path.clone()),
                    Job::Ship {
                        start: shipped,
                        end: len.min(shipped + MAX_PART),
                        epoch,
                    },
                ));
            } else if (t.closed && t.parts.len() > 1 || t.parts.len() >= COMPACT_AT)
                && shipped <= MAX_COMPACT
                && !self.status.failing()
            {
                let start = t.parts.iter().map(|p| p.0).min().unwrap_or(0);
                jobs.push((
                    Some(path.clone()),
                    Job::Compact {
                        start,
                        end: shipped,
                    },
                ));
            } else if t.closed {
                let rel = self.local.relative(&t.local);
                if rel.ends_with(SEGMENT_SUFFIX) {
                    self.ledger.add(&rel, shipped);
                }
                gone.push(path.clone());
            }
        }
        drop(book);
        for path in gone {
            self.tracked.remove(&path);
        }
        self.status.set_behind(behind, behind_files);
        jobs
    }

    /// A lease renewed (or given back), or lost to another host.
    fn renewed(&mut self, key: &str, renewed: Option<lease::Record>) {
        let mut book = self.book.lock().unwrap_or_else(|p| p.into_inner());
        match renewed {
            Some(record) if record.released => book.lose(key),
            Some(record) => book.keep(key, record),
            None => {
                let session = book
                    .get(key)
                    .map(|h| h.record.session.clone())
                    .unwrap_or_default();
                book.lose(key);
                tracing::error!(
                    "session {session:?} was taken over by another host while this one could not \
                     reach the store: this host writes it to the store no more"
                );
            }
        }
    }

    /// What a file's job did.
    async fn apply(&mut self, path: &Path, done: Done, done_at: Instant) {
        let Some(t) = self.tracked.get_mut(path) else {
            return;
        };
        match done {
            Done::Asked(entries) => {
                let (_, end) = layout::chain(&entries, 0);
                t.parts = entries
                    .iter()
                    .filter_map(|e| match e {
                        Entry::Part { start, end } => Some((*start, *end)),
                        _ => None,
                    })
                    .collect();
                let len = std::fs::metadata(&t.local).map(|m| m.len()).unwrap_or(0);
                if end > len {
                    // The store holds more than the disk: a catalog rewritten shorter. Its old
                    // parts go, and it is shipped again from the start.
                    for (start, end) in std::mem::take(&mut t.parts) {
                        let name = format!("{}/{}", t.file, layout::part_name(start, end));
                        let _ = self.remote.delete(&name).await;
                    }
                    t.shipped = Some(0);
                } else {
                    t.shipped = Some(end);
                }
            }
            Done::Shipped { start, end } => {
                t.parts.push((start, end));
                t.epoch_recorded = true;
                t.shipped = Some(end);
                let len = std::fs::metadata(&t.local).map_or(end, |m| m.len());
                if let Some(since) = t.waiting_since {
                    self.status
                        .shipped(end - start, done_at.duration_since(since));
                    if end >= len {
                        t.waiting_since = None;
                    }
                }
            }
            Done::Compacted { start, end } => {
                t.parts.retain(|p| p.0 < start || p.1 > end);
                t.parts.push((start, end));
            }
            Done::Refused(refusal) => {
                let session = session_of(&t.local).unwrap_or_default();
                tracing::error!("{}: not shipped to the store", refusal.message(&session));
                if matches!(refusal, lease::Refusal::Held(_)) {
                    self.tracked.remove(path);
                }
            }
            Done::Renewed(..) => {}
        }
    }
}

/// The session a segment's header names.
fn session_of(path: &Path) -> Option<String> {
    crate::journal::SegmentReader::open(path)
        .ok()?
        .header()
        .session
        .clone()
}

/// Do one file job against the store.
async fn run_job(
    remote: &Remote,
    local: &Path,
    file: &str,
    parts: &[(u64, u64)],
    job: Job,
) -> Result<Done, String> {
    match job {
        Job::Ask => remote
            .entries(file)
            .await
            .map(Done::Asked)
            .map_err(|e| e.to_string()),
        Job::Ship { start, end, epoch } => {
            if let Some(epoch) = epoch {
                remote
                    .put_new(
                        &format!("{file}/{}", layout::epoch_name(epoch)),
                        Bytes::new(),
                    )
                    .await
                    .map_err(|e| e.to_string())?;
            }
            let bytes = read_range(local, start, end, layout::compressed(file))?;
            remote
                .put_new(&format!("{file}/{}", layout::part_name(start, end)), bytes)
                .await
                .map_err(|e| e.to_string())?;
            Ok(Done::Shipped { start, end })
        }
        Job::Compact { start, end } => {
            let bytes = read_range(local, start, end, layout::compressed(file))?;
            remote
                .put_new(&format!("{file}/{}", layout::part_name(start, end)), bytes)
                .await
                .map_err(|e| e.to_string())?;
            for &(s, e) in parts.iter().filter(|p| p.0 >= start && p.1 <= end) {
                if (s, e) != (start, end) {
                    remote
                        .delete(&format!("{file}/{}", layout::part_name(s, e)))
                        .await
                        .map_err(|e| e.to_string())?;
                }
            }
            Ok(Done::Compacted { start, end })
        }
        Job::Lease { .. } | Job::Renew { .. } => Err("not a file job".into()),
    }
}

/// Bytes `[start, end)` of the local file, compressed for the store when its kind is.
fn read_range(path: &Path, start: u64, end: u64, compress: bool) -> Result<Bytes, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut buf = vec![0u8; usize::try_from(end - start).unwrap_or(0)];
    file.read_exact_at(&mut buf, start)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if compress {
        buf = zstd::bulk::compress(&buf, 3).map_err(|e| e.to_string())?;
    }
    Ok(Bytes::from(buf))
}

/// The files of the journal directory shipped whole to one store: one line per closed file,
/// `{"file":…,"bytes":…}`, appended (`O_APPEND`, one `write(2)` a line) so several processes
/// sharing the directory never interleave.
struct Ledger {
    path: PathBuf,
    shipped: HashMap<String, u64>,
}

impl Ledger {
    fn open(local: &Store, url: &str) -> Ledger {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(url.as_bytes());
        let tag: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
        let path = local.root().join(format!("shipped-{tag}.ndjson"));
        let mut shipped = HashMap::new();
        if let Ok(text) = std::fs::read_to_string(&path) {
            for line in text.lines() {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(line)
                    && let (Some(file), Some(bytes)) = (v["file"].as_str(), v["bytes"].as_u64())
                {
                    shipped.insert(file.to_string(), bytes);
                }
            }
        }
        Ledger { path, shipped }
    }

    fn has(&self, file: &str, len: u64) -> bool {
        self.shipped.get(file).is_some_and(|&n| n >= len)
    }

    fn add(&mut self, file: &str, bytes: u64) {
        if self.has(file, bytes) {
            return;
        }
        self.shipped.insert(file.to_string(), bytes);
        let mut line = serde_json::to_vec(&serde_json::json!({"file": file, "bytes": bytes}))
            .unwrap_or_default();
        line.push(b'\n');
        use std::os::unix::fs::OpenOptionsExt;
        let appended = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&self.path)
            .and_then(|mut f| f.write_all(&line));
        if let Err(e) = appended {
            tracing::debug!("ledger {}: {e}", self.path.display());
        }
    }
}
