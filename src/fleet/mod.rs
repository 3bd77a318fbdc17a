//! Journals in an object store shared by every host (`--store`): the local journal stays the
//! crash-safe write-ahead log; the store is where every host's journals meet.
//!
//! - [`layout`]: object names, and how a file is read back from its parts (pure);
//! - [`remote`]: the store, opened from its URL through the `object_store` crate;
//! - [`shipper`]: copies new journal bytes into the store, off the relay path;
//! - [`pull`]: brings a session's segments, or every host's catalog, into a journal directory;
//! - [`lease`]: which host continues a session (create-only lease records, fences);
//! - [`status`]: the shipper's health and lag, logged and kept for `stats`.
//!
//! [`Fleet`] is what a proxy or `serve` holds: it owns a thread with its own runtime on which
//! the shipper and every store request run, so nothing on the relay path awaits the store.

pub mod layout;
pub mod lease;
pub mod pull;
pub mod remote;
pub mod shipper;
pub mod status;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use crate::catalog::{Catalog, SessionSummary};
use crate::journal::Store;
use lease::{Book, Holder};
use remote::{Put, Remote};
use shipper::{Note, Shipper};
use status::Status;

pub use pull::Pulled;

/// Longest a pull for a load may take before the load goes on with what the disk has.
const PULL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a listing of the store's sessions is reused.
const LISTED_FOR: Duration = Duration::from_secs(2);

/// What the start-up probe found out about the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    /// Reachable, and create-if-absent is enforced.
    Enforced,
    /// Reachable, but a second create-if-absent of one object succeeded: the store ignores
    /// conditional writes.
    Ignored,
    /// The store refused or did not answer.
    Failed(String),
}

/// A process's link to the shared store: the shipper and the pulls.
#[derive(Clone)]
pub struct Fleet {
    inner: Arc<Inner>,
}

struct Inner {
    remote: Remote,
    local: Store,
    host: String,
    runtime: Option<tokio::runtime::Runtime>,
    notes: mpsc::UnboundedSender<Note>,
    book: Arc<Mutex<Book>>,
    holder: Arc<Mutex<Holder>>,
    /// The store's sessions as last listed, and when.
    listed: Mutex<Option<(Instant, Vec<SessionSummary>)>>,
}

/// How a process uses the store.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Between shipments.
    pub ship_interval: Duration,
    /// How long a session's lease lasts unless renewed.
    pub lease_ttl: Duration,
    /// Take sessions whoever holds them.
    pub takeover: bool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("store", &self.inner.remote)
            .field("host", &self.inner.host)
            .finish()
    }
}

impl Fleet {
    /// Open the store at `url` for the journal directory `local`, start the shipper (every
    /// `interval`) and the probe (its outcome is logged). Returns at once: a store that is
    /// down or refuses is said in the log, and journals wait on the local disk meanwhile.
    ///
    /// # Errors
    /// A URL that cannot be opened, or no thread for the shipper.
    pub fn start(url: &str, local: Store, options: Options) -> anyhow::Result<Fleet> {
        let remote = Remote::open(url)?;
        local.create_dirs()?;
        let host = host_id(&local)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("acp-journal-store")
            .enable_all()
            .build()?;
        let (notes, rx) = mpsc::unbounded_channel();
        let status = Arc::new(Status::default());
        let book = Arc::new(Mutex::new(Book::default()));
        let holder = Arc::new(Mutex::new(Holder {
            host: host.clone(),
            run: String::new(),
            ttl: options.lease_ttl,
            takeover: options.takeover,
            conditional: None,
            probed: false,
        }));
        let shipper = Shipper::new(
            remote.clone(),
            local.clone(),
            host.clone(),
            options.ship_interval,
            status.clone(),
            rx,
            book.clone(),
            holder.clone(),
        );
        runtime.spawn(shipper.run());
        let (probe_remote, probe_host, probed) = (remote.clone(), host.clone(), holder.clone());
        runtime.spawn(async move {
            let found = probe(&probe_remote, &probe_host).await;
            {
                let mut holder = probed.lock().unwrap_or_else(|p| p.into_inner());
                holder.conditional = match found {
                    Probe::Enforced => Some(true),
                    Probe::Ignored => Some(false),
                    Probe::Failed(_) => None,
                };
                holder.probed = true;
            }
            match found {
                Probe::Enforced => tracing::info!(
                    "object store {}: reachable, conditional writes enforced (this host is {probe_host})",
                    probe_remote.url()
                ),
                Probe::Ignored => tracing::warn!(
                    "object store {} ignores conditional writes (a second create-if-absent of one \
                     object succeeded): it cannot arbitrate which host continues a session, so a \
                     session another host had moves here only with --takeover",
                    probe_remote.url()
                ),
                Probe::Failed(e) => tracing::error!(
                    "object store {} refused acp-journal at start: {e}. Journals are kept on the \
                     local disk and shipped once it accepts them",
                    probe_remote.url()
                ),
            }
        });
        Ok(Fleet {
            inner: Arc::new(Inner {
                remote,
                local,
                host,
                runtime: Some(runtime),
                notes,
                book,
                holder,
                listed: Mutex::new(None),
            }),
        })
    }

    /// The store's URL.
    pub fn url(&self) -> &str {
        self.inner.remote.url()
    }

    /// This process's run (its lease records name it; a host that takes a session over fences
    /// the segments of the run that held it).
    pub fn set_run(&self, run: &str) {
        self.inner
            .holder
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .run = run.to_string();
    }

    /// Take the lease of `session` for this process, before continuing it. Blocking: for a
    /// blocking thread, never the runtime's.
    ///
    /// # Errors
    /// The message for the client: who holds it and until when, or why the store could not
    /// tell.
    pub fn acquire(&self, session: &str) -> Result<(), String> {
        let Some(runtime) = &self.inner.runtime else {
            return Err("the store's runtime is gone".into());
        };
        // What the store does with conditional writes decides how a session may move: the
        // probe, started with the process, is waited for (briefly).
        let waited = Instant::now();
        let holder = loop {
            let holder = self
                .inner
                .holder
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            if holder.probed || waited.elapsed() > PULL_TIMEOUT {
                break holder;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let acquired = runtime.block_on(async {
            tokio::time::timeout(
                PULL_TIMEOUT,
                lease::acquire(&self.inner.remote, &self.inner.book, &holder, session),
            )
            .await
            .unwrap_or_else(|_| {
                Err(lease::Refusal::Store(format!(
                    "no answer within {PULL_TIMEOUT:?}"
                )))
            })
        });
        acquired
            .map(|_| ())
            .map_err(|refusal| refusal.message(session))
    }

    /// Every host's sessions as the store's catalogs list them (pulled into `store-copy/` in the
    /// journal directory at most every two seconds). Blocking: for a blocking thread.
    ///
    /// # Errors
    /// The store's listing, or the local disk's.
    pub fn shared_sessions(&self) -> Result<Vec<SessionSummary>, String> {
        let Some(runtime) = &self.inner.runtime else {
            return Err("the store's runtime is gone".into());
        };
        let mut cached = self.inner.listed.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, sessions)) = &*cached
            && at.elapsed() < LISTED_FOR
        {
            return Ok(sessions.clone());
        }
        let copy = Store::mirror(self.inner.local.root().join("store-copy"));
        let remote = &self.inner.remote;
        let skipped = runtime.block_on(async {
            tokio::time::timeout(PULL_TIMEOUT, pull::catalogs(remote, &copy))
                .await
                .unwrap_or_else(|_| Err(format!("no answer within {PULL_TIMEOUT:?}")))
        })?;
        for why in skipped {
            tracing::warn!("{}: {why}", self.url());
        }
        let sessions = copy.sessions_with(false).map_err(|e| e.to_string())?;
        *cached = Some((Instant::now(), sessions.clone()));
        Ok(sessions)
    }

    /// A segment of this process was created at `path`.
    pub fn opened(&self, path: &Path) {
        let _ = self.inner.notes.send(Note::Opened(path.to_path_buf()));
    }

    /// A segment of this process was closed.
    pub fn closed(&self, path: &Path) {
        let _ = self.inner.notes.send(Note::Closed(path.to_path_buf()));
    }

    /// Ship what is left, waiting at most `within` (a store that is down does not hold up the
    /// end of a run: the next start ships the rest).
    pub async fn finish(&self, within: Duration) {
        let (tx, rx) = oneshot::channel();
        let deadline = Instant::now() + within;
        if self.inner.notes.send(Note::Finish(deadline, tx)).is_ok() {
            let _ = tokio::time::timeout(within + Duration::from_millis(500), rx).await;
        }
    }

    /// Bring what the store holds of `session` and the local disk lacks into the journal
    /// directory. Blocking: for a blocking thread, never the runtime's.
    ///
    /// # Errors
    /// The store's or the disk's, or no answer within 30 s.
    pub fn pull_session(&self, session: &str) -> Result<Pulled, String> {
        let Some(runtime) = &self.inner.runtime else {
            return Err("the store's runtime is gone".into());
        };
        let (remote, local) = (&self.inner.remote, &self.inner.local);
        runtime.block_on(async {
            tokio::time::timeout(PULL_TIMEOUT, pull::session(remote, local, session))
                .await
                .unwrap_or_else(|_| Err(format!("no answer within {PULL_TIMEOUT:?}")))
        })
    }
}

/// Create the same probe object twice: the second must find it there.
async fn probe(remote: &Remote, host: &str) -> Probe {
    let mut nonce = [0u8; 8];
    let _ = getrandom::fill(&mut nonce);
    let nonce: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
    let name = format!("probe/{host}-{nonce}");
    let outcome = match remote.put_new(&name, bytes::Bytes::from_static(b"1")).await {
        Err(e) => return Probe::Failed(e.to_string()),
        Ok(_) => match remote.put_new(&name, bytes::Bytes::from_static(b"2")).await {
            Ok(Put::Existed) => Probe::Enforced,
            Ok(Put::Created) => Probe::Ignored,
            Err(e) => Probe::Failed(e.to_string()),
        },
    };
    let _ = remote.delete(&name).await;
    outcome
}

/// This journal directory's name among the hosts: `host-id` in it, made once
/// (`<hostname>-<8 random hex digits>`, lower-case, private).
fn host_id(local: &Store) -> std::io::Result<String> {
    let path = local.root().join("host-id");
    let valid = |s: &str| {
        !s.is_empty()
            && s.len() <= 80
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    if let Ok(text) = std::fs::read_to_string(&path)
        && valid(text.trim())
    {
        return Ok(text.trim().to_string());
    }
    let mut name = [0u8; 64];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it or
    // truncates, and the last byte is forced to NUL below.
    let ok = unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len() - 1) } == 0;
    let hostname: String = if ok {
        let end = name.iter().position(|&b| b == 0).unwrap_or(0);
        String::from_utf8_lossy(&name[..end])
            .to_ascii_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .take(40)
            .collect()
    } else {
        String::new()
    };
    let mut random = [0u8; 4];
    getrandom::fill(&mut random).map_err(std::io::Error::other)?;
    let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let id = match hostname.trim_matches('-') {
        "" => format!("host-{hex}"),
        h => format!("{h}-{hex}"),
    };
    match crate::journal::private::create_private_file(&path) {
        Ok(mut file) => {
            std::io::Write::write_all(&mut file, format!("{id}\n").as_bytes())?;
            Ok(id)
        }
        // Another process made it first: theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let text = std::fs::read_to_string(&path)?;
            if valid(text.trim()) {
                Ok(text.trim().to_string())
            } else {
                Err(std::io::Error::other(format!(
                    "{} holds no host name",
                    path.display()
                )))
            }
        }
        Err(e) => Err(e),
    }
}
