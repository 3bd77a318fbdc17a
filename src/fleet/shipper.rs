//! The shipper: copies the new bytes of this host's journal files into the store, as immutable
//! parts, every ship interval, on the fleet's own thread (nothing on the relay path waits for
//! it), and keeps this process's leases renewed.
//!
//! It follows the segments this process writes (told by [`ShipperMessage`]s as they open and close) and
//! the journal directory's catalog; at start it also picks up every segment the local disk
//! holds and the store lacks (written before a crash, or while no store was set), once their
//! writers are gone. A file's bytes are read back from the local disk when shipped: what waits
//! while the store is down or slow is a few numbers per file, never the bytes, so memory stays
//! bounded whatever the backlog. A closed file whose every byte is in the store is written
//! once to the ledger (`shipped-<store>.ndjson` in the journal directory) and forgotten; its
//! parts are first compacted into one object when there were more than [`KEPT_AS_SHIPPED`].
//!
//! A session segment is shipped only under the session's lease, while this process holds it
//! and its own clock says it is good, and only under the one epoch it started under (its
//! `epoch-<n>` marker, written before its first part): a segment of a session this process
//! lost is **stranded** — its later bytes stay on the local disk, counted in `stats` and
//! written to the ledger, never called shipped.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot, watch};

use super::Error;
use super::clock::SharedClock;
use super::index::inbox::IndexerMessage;
use super::layout::{self, Entry};
use super::lease::{self, Identity, Leases, Policy, Taker};
use super::liveness::Liveness;
use super::shipped::ShippedFiles;
use super::status::{Status, Stranded};
use super::store::Store;
use crate::fleet::layout::SessionKey;
use crate::hex;
use crate::journal::JournalDir;
use crate::journal::dir::segments_in;
use crate::journal::mark::{self, Mark};

mod plan;
mod tracked;

use tracked::{FileRequest, Leased, Tracked};

/// Uploads (and listings) in flight at once.
const IN_FLIGHT: usize = 16;
/// Longest the first leases wait for the store's start-up probe.
const PROBE_WAIT: Duration = Duration::from_secs(5);
/// How often the sessions erased from the store are listed again.
const ERASED_EVERY: Duration = Duration::from_secs(30);

/// What the process tells the shipper: a segment of its journal writers opened or closed, or
/// its end.
#[derive(Debug)]
pub enum ShipperMessage {
    /// A segment of this process was created (absolute path).
    Opened(PathBuf),
    /// A segment of this process was closed: nothing more will be written to it.
    Closed(PathBuf),
    /// Ship what is left (until the deadline), give the leases back, then answer and stop.
    Finish(Duration, oneshot::Sender<()>),
}

/// The store's answer to a [`FileRequest`].
enum FileAnswer {
    Asked(Vec<Entry>),
    Shipped { start: u64, end: u64 },
    Compacted { start: u64, end: u64 },
}

/// What the shipper shares with the process it ships for.
pub struct Shared {
    /// The store.
    pub store: Store,
    /// The journal directory.
    pub local: JournalDir,
    /// This process in lease records.
    pub me: Identity,
    /// How leases are taken (the probe's finding is filled in when it comes).
    pub policy: Arc<Mutex<Policy>>,
    /// The leases this process holds.
    pub leases: Arc<Mutex<Leases>>,
    /// The clock.
    pub clock: SharedClock,
    /// Which processes of this host run.
    pub liveness: Arc<dyn Liveness>,
    /// The figures.
    pub status: Arc<Status>,
    /// Whether the start-up probe of the store has answered (its finding is in `policy`).
    pub probed: watch::Receiver<bool>,
}

impl Shared {
    /// How leases are taken now.
    pub fn policy(&self) -> Policy {
        *self.policy.lock()
    }

    /// This process as it takes leases under `policy`.
    pub fn taker<'a>(&'a self, policy: &'a Policy) -> Taker<'a> {
        Taker {
            me: &self.me,
            policy,
            clock: self.clock.as_ref(),
            liveness: self.liveness.as_ref(),
        }
    }
}

/// The shipper's state; run by [`Shipper::run`].
pub struct Shipper {
    shared: Arc<Shared>,
    interval: Duration,
    tracked: HashMap<PathBuf, Tracked>,
    ledger: Ledger,
    messages: mpsc::UnboundedReceiver<ShipperMessage>,
    /// When the last look at the files began, on the fleet's clock.
    last_look: Duration,
    /// The team index (unless `--no-index`): told of erasures, and what the store holds of
    /// each session segment, which it indexes.
    index: Option<(mpsc::UnboundedSender<IndexerMessage>, Arc<ShippedFiles>)>,
    /// The sessions of this journal directory erased from the store (nothing of them is
    /// shipped), and when last listed.
    erased: Arc<HashSet<SessionKey>>,
    erased_at: Option<Duration>,
    /// The erasure markers refused, and said.
    refused: HashSet<SessionKey>,
}

impl Shipper {
    /// A shipper of `shared.local`'s files to `shared.store`, every `interval`.
    pub fn new(
        shared: Arc<Shared>,
        interval: Duration,
        messages: mpsc::UnboundedReceiver<ShipperMessage>,
        index: Option<(mpsc::UnboundedSender<IndexerMessage>, Arc<ShippedFiles>)>,
    ) -> Shipper {
        let ledger = Ledger::open(&shared.local, shared.store.url());
        let last_look = shared.clock.now();
        Shipper {
            shared,
            interval,
            tracked: HashMap::new(),
            ledger,
            messages,
            last_look,
            index,
            erased: Default::default(),
            erased_at: None,
            refused: HashSet::new(),
        }
    }

    /// Ship until told to finish (or every sender is gone).
    pub async fn run(mut self) {
        self.recover();
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                message = self.messages.recv() => match message {
                    Some(ShipperMessage::Opened(path)) => self.follow(path, Some(0), true),
                    Some(ShipperMessage::Closed(path)) => self.closed(&path),
                    Some(ShipperMessage::Finish(deadline, done)) => {
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

    fn closed(&mut self, path: &Path) {
        if let Some(t) = self.tracked.get_mut(path) {
            t.closed = true;
        }
    }

    /// Ship until nothing is left or `deadline` (on the shared clock) passes, then give the
    /// leases back.
    async fn finish(&mut self, deadline: Duration) {
        while let Ok(message) = self.messages.try_recv() {
            match message {
                ShipperMessage::Opened(path) => self.follow(path, Some(0), true),
                ShipperMessage::Closed(path) => self.closed(&path),
                ShipperMessage::Finish(_, done) => {
                    let _ = done.send(());
                }
            }
        }
        // The process ends: nothing more will be written to its files.
        for t in self.tracked.values_mut() {
            t.closed = true;
        }
        let clock = self.shared.clock.clone();
        while clock.now() < deadline {
            let left = deadline.saturating_sub(clock.now());
            match tokio::time::timeout(left, self.round()).await {
                Ok(true) if self.shared.status.failing() => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Ok(true) => {}
                Ok(false) | Err(_) => break,
            }
        }
        // Then the sessions are given back, so any host may continue them at once.
        let within = deadline
            .saturating_sub(clock.now())
            .max(Duration::from_secs(1));
        let s = &self.shared;
        lease::release_all(&s.store, s.clock.as_ref(), &s.leases, within).await;
        s.status.write_file(&s.local, s.store.url());
    }

    /// Follow `path` (absolute, under the journal directory); `mine`: a segment this process
    /// writes (else one a run that is gone left).
    fn follow(&mut self, path: PathBuf, shipped: Option<u64>, mine: bool) {
        let rel = self.shared.local.relative(&path);
        let key = rel
            .strip_prefix("sessions/")
            .and_then(|r| r.split_once('/'))
            .map(|(key, _)| SessionKey::named(key));
        let leased = match key {
            Some(key) if mine => Leased::Mine(key),
            Some(key) => Leased::Left(key),
            None => Leased::No,
        };
        let file = if rel == "catalog.ndjson" {
            layout::host_catalog(&self.shared.me.host)
        } else {
            rel
        };
        self.tracked
            .entry(path.clone())
            .or_insert_with(|| Tracked::new(path, file, shipped, leased));
    }

    /// Follow the catalog, and every segment on the local disk that the ledger does not list as
    /// shipped and whose writer is gone (the store is asked what it has of them).
    fn recover(&mut self) {
        let root = self.shared.local.root().to_path_buf();
        self.follow(root.join("catalog.ndjson"), None, false);
        let mut dirs = vec![root.join("connections")];
        if let Ok(sessions) = std::fs::read_dir(root.join("sessions")) {
            dirs.extend(sessions.flatten().map(|e| e.path()));
        }
        for dir in dirs {
            for path in segments_in(&dir).unwrap_or_default() {
                let rel = self.shared.local.relative(&path);
                let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                let running = |pid| self.shared.liveness.running(pid);
                if self.ledger.has(&rel, len) || self.shared.local.writer_alive_by(&rel, running) {
                    continue;
                }
                self.follow(path.clone(), None, false);
                self.closed(&path);
            }
        }
    }

    /// The erasures of this journal directory's sessions, listed again every
    /// [`ERASED_EVERY`]: a marker is honoured only once the session's lease is gone from the
    /// store (see [`super::erase::honoured`]); one refused is said, once.
    async fn look_at_erasures(&mut self) {
        let now = self.shared.clock.now();
        if self
            .erased_at
            .is_some_and(|at| now.saturating_sub(at) < ERASED_EVERY)
        {
            return;
        }
        self.erased_at = Some(now);
        let s = self.shared.clone();
        let Ok(keys) = super::erase::erased_keys(&s.store).await else {
            return;
        };
        let sessions = s.local.root().join("sessions");
        let mine = keys
            .into_iter()
            .filter(|k| sessions.join(k.as_str()).is_dir());
        let Ok((honoured, refused)) = super::erase::honoured(&s.store, mine, &self.erased).await
        else {
            return;
        };
        for key in honoured.difference(&self.erased) {
            tracing::warn!(
                "{}: session {key:?} was erased from the store (`acp-journal erase`): nothing of it is shipped there again; its journal stays on this disk",
                s.store.url()
            );
        }
        for key in refused {
            if self.refused.insert(key.clone()) {
                tracing::error!(
                    "{}: erased/{key} marks a session of this host erased, but its lease is still in the store: `acp-journal erase` deletes the lease before it writes the marker, so none wrote this one. The session goes on being shipped (a bucket writer may have planted it)",
                    s.store.url()
                );
            }
        }
        self.erased = Arc::new(honoured);
        if let Some((indexer, _)) = &self.index {
            let _ = indexer.send(IndexerMessage::Erased(self.erased.clone()));
        }
    }

    /// One round: renew the leases due, take the leases of new sessions, then ask, ship and
    /// compact what needs it, at most [`IN_FLIGHT`] requests at once, then the index. Returns
    /// whether there were files to ship.
    async fn round(&mut self) -> bool {
        let s = self.shared.clone();
        self.look_at_erasures().await;
        let mut failed = lease::renew_due(&s.store, s.clock.as_ref(), &s.leases)
            .await
            .err();
        if let Err(e) = self.take_leases().await {
            failed = Some(e);
        }
        let requests = self.file_requests();
        let worked = !requests.is_empty();
        let work = requests.into_iter().filter_map(|(path, request)| {
            let t = self.tracked.get(&path)?;
            let (local, file, parts) = (t.local.clone(), t.file.clone(), t.parts.clone());
            let (store, erased) = (s.store.clone(), self.erased.clone());
            Some(async move {
                let answer = send_request(&store, &local, &file, &parts, request, &erased).await;
                (path, answer)
            })
        });
        let results: Vec<_> = futures_util::stream::iter(work)
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        let answered_at = s.clock.now();
        for (path, answer) in results {
            match answer {
                Ok(answer) => self.apply(&path, answer, answered_at).await,
                Err(e) => failed = Some(e),
            }
        }
        self.report_failure(failed);
        self.count_behind();
        s.status.write_file_if_changed(&s.local, s.store.url());
        worked
    }

    fn report_failure(&self, failed: Option<Error>) {
        let s = &self.shared;
        match failed {
            Some(e) => s.status.failed(s.store.url(), &e.to_string()),
            None => s.status.recovered(s.store.url()),
        }
    }

    /// What waits now (written while the round went included), and what is stranded.
    fn count_behind(&self) {
        let (mut bytes, mut files) = (0, 0);
        let mut stranded = Vec::new();
        for t in self.tracked.values() {
            let len = std::fs::metadata(&t.local).map_or(0, |m| m.len());
            let shipped = t.shipped.unwrap_or(0);
            if len <= shipped {
                continue;
            }
            match &t.stranded {
                Some(by) => stranded.push(Stranded {
                    file: self.shared.local.relative(&t.local),
                    bytes: len - shipped,
                    by: by.clone(),
                }),
                None => {
                    bytes += len - shipped;
                    files += 1;
                }
            }
        }
        self.shared.status.set_behind(bytes, files);
        self.shared.status.set_stranded(stranded);
    }

    /// Take the lease of each session whose segment of this process has bytes to ship and
    /// whose lease this process does not hold (a new session; a session whose holder is gone).
    /// A lease another host holds is looked at again next round.
    async fn take_leases(&mut self) -> Result<(), Error> {
        let s = &self.shared;
        let sessions = self.leases_wanted();
        if sessions.is_empty() {
            return Ok(());
        }
        // A new session's lease takes two writes once the probe says the store enforces
        // create-if-absent, and four requests and a pause more before it answers: the probe,
        // started with the process and a few round trips long, is waited for.
        let mut probed = s.probed.clone();
        let _ = tokio::time::timeout(PROBE_WAIT, probed.wait_for(|done| *done)).await;
        let policy = s.policy();
        lease::take_all(&s.store, &s.leases, &s.taker(&policy), sessions).await
    }

    /// The sessions whose segment of this process has bytes to ship and whose lease this process
    /// does not hold (their IDs, from a segment's header).
    fn leases_wanted(&self) -> Vec<String> {
        let leases = self.shared.leases.lock();
        let mut wanted: Vec<(&SessionKey, &Path)> = Vec::new();
        for (path, t) in &self.tracked {
            let Leased::Mine(key) = &t.leased else {
                continue;
            };
            let waiting = t.shipped.is_some_and(|shipped| {
                std::fs::metadata(&t.local).is_ok_and(|m| m.len() > shipped)
            });
            if t.stranded.is_none()
                && waiting
                && leases.wanted(key)
                && !wanted.iter().any(|(k, _)| *k == key)
            {
                wanted.push((key, path));
            }
        }
        wanted
            .into_iter()
            .filter_map(|(_, path)| session_of(path))
            .collect()
    }

    /// What the files need: asking the store, shipping, compacting ([`plan::plan`], from each
    /// file's length and inode on the disk now). Its marks are added beside the segments, the
    /// files done with written to the ledger (the closed segments) and settled in the index.
    fn file_requests(&mut self) -> Vec<(PathBuf, FileRequest)> {
        let s = self.shared.clone();
        let now = s.clock.now();
        let on_disk = self
            .tracked
            .iter()
            .filter_map(|(path, t)| {
                let meta = std::fs::metadata(&t.local).ok()?;
                let (len, inode) = (meta.len(), meta.ino());
                Some((path.clone(), plan::OnDisk { len, inode }))
            })
            .collect();
        let leases = s.leases.lock();
        let round = plan::Round {
            now,
            last_look: std::mem::replace(&mut self.last_look, now),
            failing: s.status.failing(),
            leases: &leases,
            erased: &self.erased,
            local: &s.local,
        };
        let plan = plan::plan(&mut self.tracked, &on_disk, &round);
        drop(leases);
        for (segment, mark) in plan.marks {
            if let Err(e) = mark::add(&segment, mark) {
                tracing::debug!("{}: {e}", segment.display());
            }
        }
        for line in plan.ledger {
            self.ledger
                .add(&line.file, line.bytes, line.stranded.as_deref());
        }
        if let Some((_, shipped)) = &self.index {
            for (path, bytes) in plan.settled {
                shipped.settle(&path, bytes);
            }
        }
        plan.requests
    }

    /// What the store's answer about a file means for it.
    async fn apply(&mut self, path: &Path, answer: FileAnswer, answered_at: Duration) {
        let Some(t) = self.tracked.get_mut(path) else {
            return;
        };
        match answer {
            FileAnswer::Asked(entries) => {
                let (_, end) = layout::parts_to_read(&entries, 0);
                t.parts = entries
                    .iter()
                    .filter_map(|e| match e {
                        Entry::Part { start, end } => Some((*start, *end)),
                        _ => None,
                    })
                    .collect();
                t.epoch = entries
                    .iter()
                    .filter_map(|e| match e {
                        Entry::Epoch { epoch } => Some(*epoch),
                        _ => None,
                    })
                    .max();
                let len = std::fs::metadata(&t.local).map(|m| m.len()).unwrap_or(0);
                if end > len {
                    // The store holds more than the disk: a catalog rewritten shorter. Its old
                    // parts go, and it is shipped again from the start.
                    for (start, end) in std::mem::take(&mut t.parts) {
                        let name = format!("{}/{}", t.file, layout::part_name(start, end));
                        let _ = self.shared.store.delete(&name).await;
                    }
                    t.shipped = Some(0);
                } else {
                    t.shipped = Some(end);
                    if let (Some((_, shipped)), false) = (&self.index, t.leased == Leased::No) {
                        shipped.shipped(path, end);
                    }
                }
                if let Leased::Left(key) = t.leased.clone()
                    && t.epoch.is_none()
                    && end < len
                {
                    // Never shipped before its run ended: under the epoch its run took, or a
                    // lease made for it now; else another host continued the session from
                    // what the store had, and these bytes are a branch it never saw.
                    let s = &self.shared;
                    match lease::recover(&s.store, s.clock.as_ref(), &s.me.host, &key, &t.local)
                        .await
                    {
                        Ok(Some(epoch)) => {
                            t.epoch = Some(epoch);
                            t.unmarked = true;
                        }
                        Ok(None) => {
                            t.stranded = Some(String::new());
                            let fence = Some(end);
                            let _ = mark::add(
                                &t.local,
                                Mark {
                                    fence,
                                    ..Mark::default()
                                },
                            );
                        }
                        Err(e) => {
                            // Asked again next round.
                            tracing::debug!("{}: {e}", t.local.display());
                            t.shipped = None;
                        }
                    }
                }
            }
            FileAnswer::Shipped { start, end } => {
                t.parts.push((start, end));
                t.shipped = Some(end);
                if let (Some((_, shipped)), false) = (&self.index, t.leased == Leased::No) {
                    shipped.shipped(path, end);
                }
                let len = std::fs::metadata(&t.local).map_or(end, |m| m.len());
                if let Some(since) = t.waiting_since {
                    self.shared
                        .status
                        .shipped(end - start, answered_at.saturating_sub(since));
                    if end >= len {
                        t.waiting_since = None;
                    }
                }
            }
            FileAnswer::Compacted { start, end } => {
                t.parts.retain(|p| p.0 < start || p.1 > end);
                t.parts.push((start, end));
            }
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

/// Send one file's request to the store.
async fn send_request(
    store: &Store,
    local: &Path,
    file: &str,
    parts: &[(u64, u64)],
    request: FileRequest,
    erased: &HashSet<SessionKey>,
) -> Result<FileAnswer, Error> {
    match request {
        FileRequest::Ask => Ok(FileAnswer::Asked(store.entries(file).await?)),
        FileRequest::Ship { start, end, epoch } => {
            if let Some(epoch) = epoch {
                store
                    .put_new(
                        &format!("{file}/{}", layout::epoch_name(epoch)),
                        Bytes::new(),
                    )
                    .await?;
            }
            let bytes = read_range(local, start, end, layout::compressed(file), erased)?;
            store
                .put_new(&format!("{file}/{}", layout::part_name(start, end)), bytes)
                .await?;
            Ok(FileAnswer::Shipped { start, end })
        }
        FileRequest::Compact { start, end } => {
            let bytes = read_range(local, start, end, layout::compressed(file), erased)?;
            store
                .put_new(&format!("{file}/{}", layout::part_name(start, end)), bytes)
                .await?;
            let replaced: Vec<String> = parts
                .iter()
                .filter(|p| p.0 >= start && p.1 <= end && **p != (start, end))
                .map(|&(s, e)| format!("{file}/{}", layout::part_name(s, e)))
                .collect();
            store.delete_many(&replaced).await?;
            Ok(FileAnswer::Compacted { start, end })
        }
    }
}

/// Bytes `[start, end)` of the local file, compressed for the store when its kind is (the
/// catalog, whose lines about `erased` sessions are blanked first).
fn read_range(
    path: &Path,
    start: u64,
    end: u64,
    compress: bool,
    erased: &HashSet<SessionKey>,
) -> Result<Bytes, Error> {
    let file = std::fs::File::open(path).map_err(|e| Error::local(path, e))?;
    let mut buf = vec![0u8; usize::try_from(end - start).unwrap_or(0)];
    file.read_exact_at(&mut buf, start)
        .map_err(|e| Error::local(path, e))?;
    if compress {
        super::erase::blank_lines(&mut buf, erased);
        buf = zstd::bulk::compress(&buf, 3).map_err(Error::Compress)?;
    }
    Ok(Bytes::from(buf))
}

/// The files of the journal directory done with for one store: one line per closed file,
/// `{"file":…,"bytes":…}` (whole in the store), or with `"stranded"` (the store has `bytes` of
/// it; the rest stays on this disk, the session having gone on on another host, named when
/// known), appended (`O_APPEND`, one `write(2)` a line) so several processes sharing the
/// directory never interleave.
pub struct Ledger {
    path: PathBuf,
    shipped: HashMap<String, u64>,
}

/// A file of the ledger that was stranded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StrandedFile {
    /// Relative to the journal directory.
    pub file: String,
    /// Bytes in the store.
    pub shipped: u64,
    /// The host that continued the session, when known.
    pub by: String,
}

impl Ledger {
    fn path(local: &JournalDir, url: &str) -> PathBuf {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(url.as_bytes());
        let tag = hex::encode(&digest[..6]);
        local.root().join(format!("shipped-{tag}.ndjson"))
    }

    fn lines(path: &Path) -> Vec<serde_json::Value> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    fn open(local: &JournalDir, url: &str) -> Ledger {
        let path = Ledger::path(local, url);
        let mut shipped = HashMap::new();
        for v in Ledger::lines(&path) {
            if let (Some(file), Some(bytes)) = (v["file"].as_str(), v["bytes"].as_u64()) {
                // A stranded file is done with: its length on disk counts as handled.
                let bytes = if v.get("stranded").is_some() {
                    u64::MAX
                } else {
                    bytes
                };
                shipped.insert(file.to_string(), bytes);
            }
        }
        Ledger { path, shipped }
    }

    /// Every file of `local` stranded for the store at `url`.
    pub fn stranded(local: &JournalDir, url: &str) -> Vec<StrandedFile> {
        Ledger::lines(&Ledger::path(local, url))
            .into_iter()
            .filter_map(|v| {
                Some(StrandedFile {
                    file: v["file"].as_str()?.to_string(),
                    shipped: v["bytes"].as_u64()?,
                    by: v.get("stranded")?.as_str().unwrap_or_default().to_string(),
                })
            })
            .collect()
    }

    /// How much of each file of `local` the ledger for the store at `url` says the store
    /// holds (a stranded file's bytes included): the files the shipper is done with.
    pub fn in_store(local: &JournalDir, url: &str) -> HashMap<String, u64> {
        Ledger::lines(&Ledger::path(local, url))
            .into_iter()
            .filter_map(|v| Some((v["file"].as_str()?.to_string(), v["bytes"].as_u64()?)))
            .collect()
    }

    fn has(&self, file: &str, len: u64) -> bool {
        self.shipped.get(file).is_some_and(|&n| n >= len)
    }

    fn add(&mut self, file: &str, bytes: u64, stranded: Option<&str>) {
        if self.has(file, bytes) && stranded.is_none() {
            return;
        }
        self.shipped.insert(
            file.to_string(),
            if stranded.is_some() { u64::MAX } else { bytes },
        );
        let mut entry = serde_json::json!({"file": file, "bytes": bytes});
        if let Some(by) = stranded {
            entry["stranded"] = serde_json::Value::from(by);
        }
        let mut line = serde_json::to_vec(&entry).unwrap_or_default();
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

#[cfg(test)]
#[path = "shipper_tests.rs"]
pub(super) mod tests;
