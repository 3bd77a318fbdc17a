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
//! A journal failure (disk full, store not writable) is logged once and that journal is
//! suspended; relaying never stops because of the journal.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::journal::format::{
    FORMAT_VERSION, Header, InitializeExchange, Record, SegmentKind, encode_record,
};
use crate::journal::store::{CatalogEntry, Store};
use crate::journal::writer::SegmentWriter;
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
const INLINE_BYTES: usize = 16 * 1024;

/// A segment writer shared with the compressor thread; `None` once suspended after an error.
#[derive(Clone)]
struct Shared {
    writer: Arc<Mutex<Option<SegmentWriter>>>,
    name: Arc<str>,
}

impl Shared {
    /// Compress and write `lines` (`records` records), and sync if `always`.
    fn write(&self, lines: &[u8], records: u64, always: bool) {
        let mut guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let Some(writer) = guard.as_mut() else { return };
        let result = writer
            .append_encoded(lines, records)
            .and_then(|()| writer.flush())
            .and_then(|()| if always { writer.sync() } else { Ok(()) });
        if let Err(e) = result {
            suspend(&self.name, &mut guard, &e);
        }
    }

    fn sync(&self) {
        let mut guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(writer) = guard.as_mut()
            && let Err(e) = writer.sync()
        {
            suspend(&self.name, &mut guard, &e);
        }
    }

    fn take(&self) -> Option<SegmentWriter> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// A segment and the records encoded for it but not yet committed.
struct Slot {
    shared: Option<Shared>,
    pending: Vec<u8>,
    records: u64,
    /// Prompt turns journaled (for the catalog).
    turns: u64,
}

impl Slot {
    fn new(writer: Option<SegmentWriter>, name: String) -> Slot {
        Slot {
            shared: writer.map(|w| Shared {
                writer: Arc::new(Mutex::new(Some(w))),
                name: name.into(),
            }),
            pending: Vec::new(),
            records: 0,
            turns: 0,
        }
    }
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
    store: Store,
    info: RunInfo,
    fsync: FsyncPolicy,
    connection: Slot,
    connection_rel: Option<String>,
    sessions: HashMap<SessionId, Slot>,
    jobs: std::sync::mpsc::Sender<Job<T>>,
    done: Finished<T>,
    queued: usize,
    /// Buffers back from the compressor, reused so a flood does not allocate per batch.
    spare: Vec<Vec<u8>>,
}

fn raw(bytes: &Option<bytes::Bytes>) -> Option<Box<serde_json::value::RawValue>> {
    let bytes = bytes.as_ref()?;
    serde_json::from_slice::<Box<serde_json::value::RawValue>>(bytes).ok()
}

impl<T: Send + 'static> JournalSet<T> {
    /// Create the store directories and the run's connection segment, and start the
    /// compressor thread.
    pub fn open(store: Store, info: RunInfo, fsync: FsyncPolicy, at: Stamp) -> JournalSet<T> {
        let (jobs, done) = spawn_compressor();
        let mut set = JournalSet {
            connection: Slot::new(None, "the connection".into()),
            connection_rel: None,
            store,
            info,
            fsync,
            sessions: HashMap::new(),
            jobs,
            done,
            queued: 0,
            spare: Vec::new(),
        };
        if let Err(e) = set.store.create_dirs() {
            tracing::error!(
                "journal store {} is not usable ({e}); relaying without a journal",
                set.store.root().display()
            );
            return set;
        }
        let header = set.header(SegmentKind::Connection, None, None, None, at);
        let dir = set.store.root().join("connections");
        match set.create(&dir, &header) {
            Ok(writer) => {
                set.connection_rel = Some(set.store.relative(writer.path()));
                tracing::info!("connection journal: {}", writer.path().display());
                set.connection = Slot::new(Some(writer), "the connection".into());
            }
            Err(e) => tracing::error!(
                "cannot create the connection journal in {}: {e}",
                dir.display()
            ),
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

    fn create(&self, dir: &Path, header: &Header) -> std::io::Result<SegmentWriter> {
        let (path, file) = self.store.create_segment(dir, &self.info.run)?;
        SegmentWriter::with_file(file, &path, header)
    }

    /// Create a session's segment and catalog it.
    pub fn open_session(
        &mut self,
        session: &SessionId,
        cwd: Option<String>,
        initialize: &Initialize,
        at: Stamp,
    ) {
        let header = self.header(
            SegmentKind::Session,
            Some(session.to_string()),
            cwd.clone(),
            Some(initialize),
            at,
        );
        let dir = self.store.session_dir(session);
        let writer = match self.create(&dir, &header) {
            Ok(writer) => {
                let entry = CatalogEntry::Open {
                    session: session.to_string(),
                    segment: self.store.relative(writer.path()),
                    cwd,
                    agent: Some(self.info.argv.join(" ")),
                    t: at.unix_us,
                };
                if let Err(e) = self.store.append_catalog(&entry) {
                    tracing::warn!("cannot update the journal catalog: {e}");
                }
                Some(writer)
            }
            Err(e) => {
                tracing::error!(
                    "cannot create a journal for session {session:?} in {}: {e}",
                    dir.display()
                );
                None
            }
        };
        self.sessions.insert(
            session.clone(),
            Slot::new(writer, format!("session {session:?}")),
        );
    }

    /// Encode a record for its journal (written at the next [`JournalSet::commit`]).
    pub fn append(&mut self, target: &Target, record: &Record) {
        let slot = match target {
            Target::Connection => &mut self.connection,
            Target::Session(s) => match self.sessions.get_mut(s) {
                Some(slot) => slot,
                None => return,
            },
        };
        if slot.shared.is_some() {
            if let crate::journal::Body::Message {
                from: crate::journal::Side::Client,
                payload,
            } = &record.body
                && !payload.proxy
                && crate::proto::envelope::peek(&payload.bytes).method() == Some("session/prompt")
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
        for slot in self.slots_mut() {
            if let Some(shared) = &slot.shared
                && slot.records > 0
            {
                writes.push((
                    shared.clone(),
                    std::mem::take(&mut slot.pending),
                    slot.records,
                ));
            }
            slot.pending.clear();
            slot.records = 0;
        }
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

    /// `fdatasync` every file written since the last sync (the `interval` policy's tick).
    pub fn sync(&mut self) {
        if self.fsync == FsyncPolicy::Never {
            return;
        }
        for shared in self.slots().filter_map(|s| s.shared.as_ref()) {
            shared.sync();
        }
    }

    /// Close every segment cleanly (end marker, end of frame, sync) and catalog the sessions.
    /// Batches still queued are written first; what they carry is dropped.
    pub async fn close(mut self, seq: u64, at: Stamp) {
        while self.queued > 0 && self.finished().await.is_some() {}
        self.write_pending();
        for (_, slot) in self.sessions.drain() {
            let Some(shared) = slot.shared else { continue };
            let Some(writer) = shared.take() else {
                continue;
            };
            let segment = self.store.relative(writer.path());
            match writer.close(seq, at.unix_us, at.mono_us) {
                Ok(stats) => {
                    let entry = CatalogEntry::Close {
                        segment,
                        records: stats.records,
                        bytes: stats.file_bytes,
                        turns: slot.turns,
                        t: at.unix_us,
                    };
                    if let Err(e) = self.store.append_catalog(&entry) {
                        tracing::warn!("cannot update the journal catalog: {e}");
                    }
                }
                Err(e) => tracing::error!("closing the journal of {}: {e}", shared.name),
            }
        }
        if let Some(writer) = self.connection.shared.as_ref().and_then(Shared::take)
            && let Err(e) = writer.close(seq, at.unix_us, at.mono_us)
        {
            tracing::error!("closing the connection journal: {e}");
        }
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

/// Stop writing a journal after an error, saying so once.
fn suspend(name: &str, writer: &mut Option<SegmentWriter>, error: &std::io::Error) {
    if let Some(writer) = writer.take() {
        tracing::error!(
            "journal of {name} suspended after a write error ({error}); {} stays readable up to here; relaying continues",
            writer.path().display()
        );
    }
}
