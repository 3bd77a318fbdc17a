//! The open segments of one proxy run: the connection segment and one per session.
//!
//! Applies the core's `OpenSession` and `Journal` actions. A journal failure (disk full, store
//! not writable) is logged once and that journal is suspended; relaying never stops because of
//! the journal.

use std::collections::HashMap;
use std::path::Path;

use crate::journal::format::{FORMAT_VERSION, Header, InitializeExchange, Record, SegmentKind};
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

/// A segment writer that may have failed.
struct Slot {
    writer: Option<SegmentWriter>,
    dirty: bool,
    name: String,
}

/// All journals of one run.
pub struct JournalSet {
    store: Store,
    info: RunInfo,
    fsync: FsyncPolicy,
    connection: Slot,
    connection_rel: Option<String>,
    sessions: HashMap<SessionId, Slot>,
}

fn raw(bytes: &Option<bytes::Bytes>) -> Option<Box<serde_json::value::RawValue>> {
    let bytes = bytes.as_ref()?;
    serde_json::from_slice::<Box<serde_json::value::RawValue>>(bytes).ok()
}

impl JournalSet {
    /// Create the store directories and the run's connection segment.
    pub fn open(store: Store, info: RunInfo, fsync: FsyncPolicy, at: Stamp) -> JournalSet {
        let mut set = JournalSet {
            connection: Slot {
                writer: None,
                dirty: false,
                name: "connection".into(),
            },
            connection_rel: None,
            store,
            info,
            fsync,
            sessions: HashMap::new(),
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
                set.connection.writer = Some(writer);
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
            Slot {
                writer,
                dirty: false,
                name: format!("session {session:?}"),
            },
        );
    }

    /// Compress a record into its journal (written at the next [`JournalSet::flush`]).
    pub fn append(&mut self, target: &Target, record: &Record) {
        let slot = match target {
            Target::Connection => &mut self.connection,
            Target::Session(s) => match self.sessions.get_mut(s) {
                Some(slot) => slot,
                None => return,
            },
        };
        if let Some(writer) = &mut slot.writer {
            match writer.append(record) {
                Ok(()) => slot.dirty = true,
                Err(e) => suspend(slot, &e),
            }
        }
    }

    /// Write every appended record to the kernel (one `write(2)` per file), and sync per the
    /// policy. Called before the lines of the batch are forwarded.
    pub fn flush(&mut self) {
        let always = self.fsync == FsyncPolicy::Always;
        for slot in std::iter::once(&mut self.connection).chain(self.sessions.values_mut()) {
            if !slot.dirty {
                continue;
            }
            slot.dirty = false;
            if let Some(writer) = &mut slot.writer {
                let result = writer
                    .flush()
                    .and_then(|()| if always { writer.sync() } else { Ok(()) });
                if let Err(e) = result {
                    suspend(slot, &e);
                }
            }
        }
    }

    /// `fdatasync` every file written since the last sync (the `interval` policy's tick).
    pub fn sync(&mut self) {
        if self.fsync == FsyncPolicy::Never {
            return;
        }
        for slot in std::iter::once(&mut self.connection).chain(self.sessions.values_mut()) {
            if let Some(writer) = &mut slot.writer
                && let Err(e) = writer.sync()
            {
                suspend(slot, &e);
            }
        }
    }

    /// Close every segment cleanly (end marker, end of frame, sync) and catalog the sessions.
    pub fn close(mut self, seq: u64, at: Stamp) {
        self.flush();
        for (_, slot) in self.sessions.drain() {
            let Some(writer) = slot.writer else { continue };
            let segment = self.store.relative(writer.path());
            match writer.close(seq, at.unix_us, at.mono_us) {
                Ok(stats) => {
                    let entry = CatalogEntry::Close {
                        segment,
                        records: stats.records,
                        bytes: stats.file_bytes,
                        t: at.unix_us,
                    };
                    if let Err(e) = self.store.append_catalog(&entry) {
                        tracing::warn!("cannot update the journal catalog: {e}");
                    }
                }
                Err(e) => tracing::error!("closing the journal of {}: {e}", slot.name),
            }
        }
        if let Some(writer) = self.connection.writer.take()
            && let Err(e) = writer.close(seq, at.unix_us, at.mono_us)
        {
            tracing::error!("closing the connection journal: {e}");
        }
    }
}

/// Stop writing a journal after an error, saying so once.
fn suspend(slot: &mut Slot, error: &std::io::Error) {
    if let Some(writer) = slot.writer.take() {
        tracing::error!(
            "journal of {} suspended after a write error ({error}); {} stays readable up to here; relaying continues",
            slot.name,
            writer.path().display()
        );
    }
}
