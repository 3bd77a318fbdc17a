//! The open segments of one proxy run: the connection segment and one per session.
//!
//! Applies the core's `OpenSession` and `Journal` actions in two steps. [`JournalSet::append`]
//! encodes a record (cheap, on the main loop). [`JournalSet::commit`] then compresses and writes
//! every segment touched by the batch, either right there (small batches with nothing queued:
//! the lowest latency) or, for big batches, on the compressor thread, which hands the batch's
//! lines back for forwarding once they are written ([`Commit::Queued`]). Jobs are done in order,
//! so records keep wire order and every line is written before it is forwarded either way; the
//! two cores then share the work of a flood.
//!
//! Relaying never stops because of the journal. A write error suspends that journal, said once
//! on stderr; when the disk is full (`ENOSPC`, `EDQUOT`) every journal stops, said once for
//! all, and no new segment is created. Each failure is handed to the core as a `journal_error`
//! event ([`JournalSet::take_failures`]), journaled with the connection when it still can be.
//! What was written stays readable: a segment ends at its last whole record or in a torn tail,
//! and a segment whose header could not be written is removed.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use crate::catalog::CatalogEntry;
use crate::fleet::Fleet;
use crate::journal::JournalDir;
use crate::journal::format::{
    Body, FORMAT_VERSION, Header, InitializeExchange, Record, SegmentKind, encode_record,
};
use crate::journal::writer::{SegmentStats, SegmentWriter};
use crate::proto::{Initialize, SessionId, Stamp, Target};

/// When to `fdatasync` journal files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FsyncPolicy {
    /// After every batch of records (slowest, survives power loss).
    Always,
    /// Once a second and at close (default: a power loss loses at most ~1 s).
    Interval,
    /// Never (the OS writes back on its own schedule).
    Never,
}

/// Facts about the run, copied into every segment header.
#[derive(Clone, Debug)]
pub struct RunInfo {
    /// Run identifier (also the segment file stem).
    pub run: String,
    /// The agent command line, already redacted if configured.
    pub argv: Vec<String>,
    /// Proxy process ID.
    pub pid: u32,
}

/// Batches up to this many encoded bytes are compressed on the main loop when nothing is
/// queued for the compressor thread.
pub(super) const INLINE_BYTES: usize = 16 * 1024;

/// A journal that stopped after a write error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalFailure {
    /// Which journal (`the connection`, `session "S"`).
    pub journal: String,
    /// The error.
    pub error: String,
    /// The disk is full: every journal stopped.
    pub store_full: bool,
}

/// The journals' health, shared with the compressor thread.
#[derive(Default)]
struct Health {
    /// The disk is full: every journal stopped, no segment is created.
    full: AtomicBool,
    /// Set while `failures` holds something (checked without the lock).
    failed: AtomicBool,
    failures: Mutex<Vec<JournalFailure>>,
}

impl Health {
    /// Report that `journal` (at `path`) failed with `error`: once on stderr, and as a failure
    /// for the core. A full disk stops every journal and is reported once.
    fn fail(&self, journal: &str, path: &Path, error: &std::io::Error) {
        let full = matches!(error.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT));
        if full {
            if self.full.swap(true, Ordering::SeqCst) {
                return;
            }
            tracing::error!(
                "the journal directory's disk is full ({error}, writing {}): journaling stopped for this run, relaying continues; the journals written so far stay readable",
                path.display()
            );
        } else {
            tracing::error!(
                "journal of {journal} suspended after a write error ({error}); {} stays readable up to here; relaying continues",
                path.display()
            );
        }
        self.failures.lock().push(JournalFailure {
            journal: journal.to_string(),
            error: error.to_string(),
            store_full: full,
        });
        self.failed.store(true, Ordering::SeqCst);
    }

    fn full(&self) -> bool {
        self.full.load(Ordering::Relaxed)
    }
}

/// A segment writer shared with the compressor thread; `None` once suspended after an error.
#[derive(Clone)]
struct Shared {
    writer: Arc<Mutex<Option<SegmentWriter>>>,
    name: Arc<str>,
    health: Arc<Health>,
}

impl Shared {
    /// Compress and write `lines` (`records` records), and sync if `always`.
    fn write(&self, lines: &[u8], records: u64, always: bool) {
        self.with_writer(|writer| {
            writer
                .append_encoded(lines, records)
                .and_then(|()| writer.flush())
                .and_then(|()| if always { writer.sync() } else { Ok(()) })
        });
    }

    /// A handle to `fdatasync` the segment off the main loop, when it has unsynced writes.
    fn sync_handle(&self) -> Option<std::fs::File> {
        let mut handle = None;
        self.with_writer(|writer| match writer.sync_handle() {
            Some(Ok(file)) => {
                handle = Some(file);
                Ok(())
            }
            Some(Err(e)) => Err(e),
            None => Ok(()),
        });
        handle
    }

    /// An `fdatasync` of the segment failed: suspend it, as after a write error.
    fn sync_failed(&self, error: &std::io::Error) {
        self.with_writer(|_| Err(std::io::Error::new(error.kind(), error.to_string())));
    }

    /// Run `op` on the writer unless it is suspended; suspend it after an error, or when the
    /// disk is full (the file stays as it is: readers see its last whole record).
    fn with_writer(&self, op: impl FnOnce(&mut SegmentWriter) -> std::io::Result<()>) {
        let mut guard = self.writer.lock();
        if self.health.full() {
            guard.take();
            return;
        }
        let Some(writer) = guard.as_mut() else { return };
        if let Err(e) = op(writer) {
            let path = writer.path().to_path_buf();
            guard.take();
            self.health.fail(&self.name, &path, &e);
        }
    }

    /// Close the segment cleanly (unless suspended or the disk is full); returns its path
    /// and statistics.
    fn close(&self, seq: u64, at: Stamp) -> Option<(std::path::PathBuf, SegmentStats)> {
        let writer = self.writer.lock().take()?;
        if self.health.full() {
            return None;
        }
        let path = writer.path().to_path_buf();
        match writer.close(seq, at.unix_us, at.mono_us) {
            Ok(stats) => Some((path, stats)),
            Err(e) => {
                self.health.fail(&self.name, &path, &e);
                None
            }
        }
    }
}

/// A segment and the records encoded for it but not yet committed.
struct Slot {
    shared: Option<Shared>,
    pending: Vec<u8>,
    records: u64,
    /// Prompt turns journaled (for the catalog).
    turns: u64,
    /// A session segment's header (a new segment of the session starts with it again).
    header: Option<Header>,
}

impl Slot {
    fn new(writer: Option<SegmentWriter>, name: String, health: &Arc<Health>) -> Slot {
        Slot {
            shared: writer.map(|w| Shared {
                writer: Arc::new(Mutex::new(Some(w))),
                name: name.into(),
                health: health.clone(),
            }),
            pending: Vec::new(),
            records: 0,
            turns: 0,
            header: None,
        }
    }
}

/// A session segment replaced by a new one, closed once the batches queued before the
/// replacement are written to it.
struct Retiring {
    shared: Shared,
    turns: u64,
    seq: u64,
    at: Stamp,
}

/// Work for the compressor thread: segments to write, then what to hand back.
struct Job<T> {
    writes: Vec<(Shared, Vec<u8>, u64)>,
    always: bool,
    then: T,
}

/// Batches the compressor has written: what each releases, and its buffers for reuse.
type Finished<T> = tokio::sync::mpsc::UnboundedReceiver<(T, Vec<Vec<u8>>)>;

/// How a batch was committed.
pub enum Commit<T> {
    /// Written already: forward now.
    Done(T),
    /// Queued for the compressor thread: `T` comes back from [`JournalSet::finished`].
    Queued,
}

/// All journals of one run.
pub struct JournalSet<T> {
    dir: JournalDir,
    info: RunInfo,
    fsync: FsyncPolicy,
    connection: Slot,
    connection_rel: Option<String>,
    /// Looked up for every record: foldhash, as the core's maps (session IDs come from the
    /// peers, and the hasher is seeded per map).
    sessions: HashMap<SessionId, Slot, foldhash::fast::RandomState>,
    jobs: std::sync::mpsc::Sender<Job<T>>,
    done: Finished<T>,
    queued: usize,
    /// Buffers back from the compressor, reused so a flood does not allocate per batch.
    spare: Vec<Vec<u8>>,
    health: Arc<Health>,
    /// An `interval` sync is running on a blocking thread.
    syncing: Arc<AtomicBool>,
    /// Told of every segment made and closed, when journals are shipped to a store.
    fleet: Option<Fleet>,
    /// Segments replaced ([`JournalSet::next_segment`]), to close when the queue is empty.
    retiring: Vec<Retiring>,
    /// Catalog entries of segments closed since [`JournalSet::take_closed`].
    closed: Vec<CatalogEntry>,
}

fn raw(bytes: &Option<bytes::Bytes>) -> Option<Box<serde_json::value::RawValue>> {
    let bytes = bytes.as_ref()?;
    serde_json::from_slice::<Box<serde_json::value::RawValue>>(bytes).ok()
}

impl<T: Send + 'static> JournalSet<T> {
    /// Create the journal directories and the run's connection segment, and start the
    /// compressor thread.
    pub fn open(
        dir: JournalDir,
        info: RunInfo,
        fsync: FsyncPolicy,
        at: Stamp,
        fleet: Option<Fleet>,
    ) -> JournalSet<T> {
        let (jobs, done) = spawn_compressor();
        let health = Arc::new(Health::default());
        let mut set = JournalSet {
            connection: Slot::new(None, "the connection".into(), &health),
            connection_rel: None,
            dir,
            info,
            fsync,
            sessions: HashMap::default(),
            jobs,
            done,
            queued: 0,
            spare: Vec::new(),
            health,
            syncing: Arc::new(AtomicBool::new(false)),
            fleet,
            retiring: Vec::new(),
            closed: Vec::new(),
        };
        if let Err(e) = set.dir.create_dirs() {
            tracing::error!(
                "journal directory {} is not usable ({e}); relaying without a journal",
                set.dir.root().display()
            );
            return set;
        }
        let header = set.header(SegmentKind::Connection, None, None, None, at);
        let dir = set.dir.root().join("connections");
        match set.create(&dir, &header) {
            Ok(writer) => {
                set.connection_rel = Some(set.dir.relative(writer.path()));
                tracing::info!("connection journal: {}", writer.path().display());
                set.connection = Slot::new(Some(writer), "the connection".into(), &set.health);
            }
            Err(e) => set.health.fail("the connection", &dir, &e),
        }
        set
    }

    fn header(
        &self,
        kind: SegmentKind,
        session: Option<String>,
        cwd: Option<String>,
        initialize: Option<&Initialize>,
        at: Stamp,
    ) -> Header {
        Header {
            acpj: FORMAT_VERSION,
            kind,
            session,
            run: self.info.run.clone(),
            proxy: concat!("acp-journal ", env!("CARGO_PKG_VERSION")).into(),
            started: at.unix_us,
            pid: self.info.pid,
            argv: self.info.argv.clone(),
            cwd,
            connection: self.connection_rel.clone(),
            initialize: initialize.map(|i| InitializeExchange {
                request: raw(&i.request),
                response: raw(&i.response),
            }),
        }
    }

    /// A new segment with its header written (never an empty or headless file, even when the
    /// proxy is killed or the disk is full).
    fn create(&self, dir: &Path, header: &Header) -> std::io::Result<SegmentWriter> {
        let writer = self
            .dir
            .create_segment_writer(dir, &self.info.run, header)?;
        if let Some(fleet) = &self.fleet {
            fleet.opened(writer.path());
        }
        Ok(writer)
    }

    /// Create a session's segment; returns its catalog entry (without the Git branch, which
    /// the catalog thread looks up), none when the segment could not be created.
    pub fn open_session(
        &mut self,
        session: &SessionId,
        cwd: Option<String>,
        initialize: &Initialize,
        at: Stamp,
    ) -> Option<CatalogEntry> {
        let name = format!("session {session:?}");
        if self.health.full() {
            self.sessions
                .insert(session.clone(), Slot::new(None, name, &self.health));
            return None;
        }
        let header = self.header(
            SegmentKind::Session,
            Some(session.to_string()),
            cwd,
            Some(initialize),
            at,
        );
        let (slot, entry) = self.session_slot(session, header, at);
        self.sessions.insert(session.clone(), slot);
        entry
    }

    /// A new segment of `session` starting with `header`, and its catalog entry.
    fn session_slot(
        &self,
        session: &SessionId,
        header: Header,
        at: Stamp,
    ) -> (Slot, Option<CatalogEntry>) {
        let name = format!("session {session:?}");
        let dir = self.dir.session_dir(session);
        let (writer, entry) = match self.create(&dir, &header) {
            Ok(writer) => {
                let response: Option<serde_json::Value> = header
                    .initialize
                    .as_ref()
                    .and_then(|i| i.response.as_deref())
                    .and_then(|r| serde_json::from_str(r.get()).ok());
                let entry = CatalogEntry::Open {
                    session: session.to_string(),
                    segment: self.dir.relative(writer.path()),
                    git_branch: None,
                    cwd: header.cwd.clone(),
                    agent: Some(self.info.argv.join(" ")),
                    agent_name: response.as_ref().and_then(crate::acp::agent_title),
                    t: at.unix_us,
                    agent_info: response.as_ref().and_then(crate::catalog::AgentInfo::of),
                };
                (Some(writer), Some(entry))
            }
            Err(e) => {
                self.health.fail(&name, &dir, &e);
                (None, None)
            }
        };
        let mut slot = Slot::new(writer, name, &self.health);
        slot.header = Some(header);
        (slot, entry)
    }

    /// Go on with `session` in a new segment (its lease was lost and is held again: the old
    /// segment was fenced in the shared store); the old one is closed once what was queued for
    /// it is written (its entry then comes from [`JournalSet::take_closed`]). Returns the new
    /// segment's catalog entry.
    pub fn next_segment(
        &mut self,
        session: &SessionId,
        seq: u64,
        at: Stamp,
    ) -> Option<CatalogEntry> {
        let header = self.sessions.get(session)?.header.clone()?;
        if self.health.full() {
            return None;
        }
        let header = Header {
            started: at.unix_us,
            ..header
        };
        let (slot, entry) = self.session_slot(session, header, at);
        let old = self.sessions.insert(session.clone(), slot)?;
        if let Some(shared) = old.shared {
            self.retiring.push(Retiring {
                shared,
                turns: old.turns,
                seq,
                at,
            });
        }
        self.close_retired();
        entry
    }

    /// Close the replaced segments once nothing is queued for them.
    fn close_retired(&mut self) {
        if self.queued > 0 {
            return;
        }
        for r in std::mem::take(&mut self.retiring) {
            let Some((segment, stats)) = r.shared.close(r.seq, r.at) else {
                continue;
            };
            if let Some(fleet) = &self.fleet {
                fleet.closed(&segment);
            }
            self.closed.push(CatalogEntry::Close {
                segment: self.dir.relative(&segment),
                records: stats.records,
                bytes: stats.file_bytes,
                turns: r.turns,
                t: r.at.unix_us,
            });
        }
    }

    /// Catalog entries of the segments closed since the last call.
    pub fn take_closed(&mut self) -> Vec<CatalogEntry> {
        std::mem::take(&mut self.closed)
    }

    /// Journals that stopped since the last call (for the core's `journal_error` events).
    pub fn take_failures(&self) -> Vec<JournalFailure> {
        if !self.health.failed.swap(false, Ordering::SeqCst) {
            return Vec::new();
        }
        std::mem::take(&mut *self.health.failures.lock())
    }

    /// This run's identifier (every segment's `run`; record numbers count within it).
    pub fn run(&self) -> &str {
        &self.info.run
    }

    /// The agent of this run, as its segments' headers tell it, given its `initialize`
    /// response.
    pub fn agent(&self, response: Option<&[u8]>) -> crate::acp::AgentId {
        let response = response.and_then(|r| serde_json::from_slice(r).ok());
        crate::acp::AgentId::of(response.as_ref(), Some(self.info.argv.join(" ")))
    }

    /// True when the journal directory holds a session of this ID (its directory exists).
    pub fn holds(&self, session: &str) -> bool {
        self.dir.session_dir(session).exists()
    }

    /// True once the disk is full: journaling has stopped for this run.
    pub fn store_full(&self) -> bool {
        self.health.full()
    }

    /// Encode a record for its journal (written at the next [`JournalSet::commit`]).
    pub fn append(&mut self, target: &Target, record: &Record) {
        let slot = match target {
            Target::Run => &mut self.connection,
            Target::Session(s) => match self.sessions.get_mut(s) {
                Some(slot) => slot,
                None => return,
            },
        };
        if slot.shared.is_some() {
            if let Body::Message { from, payload } = &record.body
                && crate::wire::envelope::is_prompt_turn(*from, payload.proxy, &payload.bytes)
            {
                slot.turns += 1;
            }
            encode_record(record, &mut slot.pending);
            slot.records += 1;
        }
    }

    /// Write every record appended since the last commit, then release `then` (the batch's
    /// lines; `empty` when it releases nothing): at once when the batch is small and nothing is
    /// queued, else through the compressor thread, behind the batches queued before it.
    pub fn commit(&mut self, then: T, empty: bool) -> Commit<T> {
        let always = self.fsync == FsyncPolicy::Always;
        let pending: usize = self.slots().map(|s| s.pending.len()).sum();
        if pending == 0 && empty {
            return Commit::Done(then); // nothing to write, nothing to release
        }
        if self.queued == 0 && pending <= INLINE_BYTES {
            self.write_pending();
            return Commit::Done(then);
        }
        let mut writes = Vec::new();
        let mut spare = std::mem::take(&mut self.spare);
        for slot in self.slots_mut() {
            if let Some(shared) = &slot.shared
                && slot.records > 0
            {
                let fresh = spare.pop().unwrap_or_default();
                writes.push((
                    shared.clone(),
                    std::mem::replace(&mut slot.pending, fresh),
                    slot.records,
                ));
            }
            slot.pending.clear();
            slot.records = 0;
        }
        self.spare = spare;
        match self.jobs.send(Job {
            writes,
            always,
            then,
        }) {
            Ok(()) => {
                self.queued += 1;
                Commit::Queued
            }
            Err(std::sync::mpsc::SendError(job)) => {
                // The compressor thread is gone (it panicked): write here instead.
                for (shared, lines, records) in &job.writes {
                    shared.write(lines, *records, always);
                }
                Commit::Done(job.then)
            }
        }
    }

    /// Batches waiting on the compressor thread.
    pub fn queued(&self) -> usize {
        self.queued
    }

    /// The next batch the compressor thread has written, in commit order.
    pub async fn finished(&mut self) -> Option<T> {
        let Some((then, buffers)) = self.done.recv().await else {
            // The compressor thread is gone (it panicked): its queued batches with it.
            tracing::error!(
                "the journal compressor stopped; {} batches were lost",
                self.queued
            );
            self.queued = 0;
            return None;
        };
        self.queued -= 1;
        self.close_retired();
        for mut buffer in buffers {
            if self.spare.len() < 8 {
                buffer.clear();
                self.spare.push(buffer);
            }
        }
        Some(then)
    }

    fn slots(&self) -> impl Iterator<Item = &Slot> {
        std::iter::once(&self.connection).chain(self.sessions.values())
    }

    fn slots_mut(&mut self) -> impl Iterator<Item = &mut Slot> {
        std::iter::once(&mut self.connection).chain(self.sessions.values_mut())
    }

    /// `fdatasync` every file written since the last sync (the `interval` policy's tick), on a
    /// blocking thread: the main loop never waits for the disk. A sync still running when the
    /// next tick comes makes that tick a no-op.
    pub fn sync(&mut self) {
        if self.fsync == FsyncPolicy::Never || self.syncing.load(Ordering::Acquire) {
            return;
        }
        let files: Vec<(Shared, std::fs::File)> = self
            .slots()
            .filter_map(|s| s.shared.as_ref())
            .filter_map(|shared| Some((shared.clone(), shared.sync_handle()?)))
            .collect();
        if files.is_empty() {
            return;
        }
        self.syncing.store(true, Ordering::Release);
        let syncing = self.syncing.clone();
        tokio::task::spawn_blocking(move || {
            for (shared, file) in files {
                if let Err(e) = file.sync_data() {
                    shared.sync_failed(&e);
                }
            }
            syncing.store(false, Ordering::Release);
        });
    }

    /// Close every segment cleanly (end marker, end of frame, sync); returns the sessions'
    /// catalog entries. Batches still queued are written first; what they carry is dropped.
    pub async fn close(mut self, seq: u64, at: Stamp) -> Vec<CatalogEntry> {
        while self.queued > 0 && self.finished().await.is_some() {}
        self.write_pending();
        self.close_retired();
        let mut entries = std::mem::take(&mut self.closed);
        for (_, slot) in self.sessions.drain() {
            let Some(shared) = slot.shared else { continue };
            let Some((segment, stats)) = shared.close(seq, at) else {
                continue;
            };
            if let Some(fleet) = &self.fleet {
                fleet.closed(&segment);
            }
            entries.push(CatalogEntry::Close {
                segment: self.dir.relative(&segment),
                records: stats.records,
                bytes: stats.file_bytes,
                turns: slot.turns,
                t: at.unix_us,
            });
        }
        if let Some(shared) = &self.connection.shared
            && let Some((segment, _)) = shared.close(seq, at)
            && let Some(fleet) = &self.fleet
        {
            fleet.closed(&segment);
        }
        entries
    }

    /// Write what is pending on this thread.
    fn write_pending(&mut self) {
        let always = self.fsync == FsyncPolicy::Always;
        for slot in self.slots_mut() {
            if let Some(shared) = &slot.shared
                && slot.records > 0
            {
                shared.write(&slot.pending, slot.records, always);
            }
            slot.pending.clear();
            slot.records = 0;
        }
    }
}

/// The compressor thread: does jobs in order and hands back what each releases.
fn spawn_compressor<T: Send + 'static>() -> (std::sync::mpsc::Sender<Job<T>>, Finished<T>) {
    let (jobs_tx, jobs) = std::sync::mpsc::channel::<Job<T>>();
    let (done, done_rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::Builder::new()
        .name("compressor".into())
        .spawn(move || {
            for job in jobs {
                for (shared, lines, records) in &job.writes {
                    shared.write(lines, *records, job.always);
                }
                let buffers = job.writes.into_iter().map(|(_, lines, _)| lines).collect();
                if done.send((job.then, buffers)).is_err() {
                    return;
                }
            }
        })
        .expect("spawning the compressor thread");
    (jobs_tx, done_rx)
}
