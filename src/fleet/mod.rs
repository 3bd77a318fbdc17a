//! Journals in an object store shared by every host (`--store`): the local journal stays the
//! crash-safe write-ahead log; the store is where every host's journals meet.
//!
//! - [`layout`]: object names, and how a file is read back from its parts (pure);
//! - [`store`]: the store, opened from its URL through the `object_store` crate;
//! - [`shipper`]: copies new journal bytes into the store, off the relay path;
//! - [`pull`]: brings a session's segments, or every host's catalog, into a journal directory;
//! - [`listing`]: the store's sessions, from the catalogs and the team index;
//! - [`parsed`]: each host's catalog as parsed, kept between readings;
//! - [`blocking`]: a reading's parsing and decoding, off the runtime's threads;
//! - [`lease`]: which host continues a session (create-only lease records, fences);
//! - [`status`]: the shipper's health and lag, logged and kept for `stats`;
//! - [`share`]: share links' records (a link to one session, its secret never stored).
//!
//! [`Fleet`] is what a proxy or `serve` holds: it owns a thread with its own runtime on which
//! the shipper and every store request run, so nothing on the relay path awaits the store.

pub mod blocking;
pub mod clock;
pub mod erase;
pub mod error;
#[cfg(test)]
pub mod faults;
pub mod index;
pub mod layout;
pub mod lease;
pub mod listing;
pub mod liveness;
pub mod parsed;
pub mod pull;
pub mod share;
pub mod shared_dir;
pub mod shipped;
pub mod shipper;
pub mod status;
pub mod store;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot, watch};

use crate::hex;
use crate::journal::JournalDir;
use clock::SharedClock;
use index::inbox::IndexerMessage;
use index::indexer::Indexer;
use layout::SessionId;
use lease::{Acquired, Identity, Leases, Policy, Refusal, Unanswered};
use liveness::ProcessTable;
use shipper::{Shared, Shipper, ShipperMessage};
use status::Status;
use store::{Put, Store, Version, Write, Written};

pub use error::Error;
pub use pull::Pulled;

/// Longest a pull for a load may take before the load goes on with what the disk has.
const PULL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a listing of the store's sessions is reused.
const LISTED_FOR: Duration = Duration::from_secs(2);

/// What the start-up probe found out about the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    /// Reachable, and create-if-absent and replace-if-unchanged are enforced.
    Enforced,
    /// Reachable, but a second create-if-absent of one object, or a replace naming a version
    /// it was not at, succeeded: the store ignores conditional writes.
    Ignored,
    /// The store refused or did not answer.
    Failed(String),
}

/// A process's link to the shared store: the shipper, the leases and the pulls.
#[derive(Clone)]
pub struct Fleet {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    runtime: Option<tokio::runtime::Runtime>,
    messages: mpsc::UnboundedSender<ShipperMessage>,
    /// The index's task, unless `--no-index`.
    indexer: Option<mpsc::UnboundedSender<IndexerMessage>>,
    /// The store's sessions as last listed.
    listed: Mutex<Option<Listed>>,
}

/// A reading of the store's sessions, and when it started and ended (the fleet's clock).
struct Listed {
    listing: Arc<listing::Listing>,
    started: Duration,
    ended: Duration,
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
    /// Write the team index (`index/` in the store) from this process's sessions.
    pub index: bool,
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
            .field("store", &self.inner.shared.store)
            .field("me", &self.inner.shared.me)
            .finish()
    }
}

impl Fleet {
    /// Open the store at `url` for the journal directory `local`, as run `run` of this
    /// process, and start the shipper (every `interval`) and the probe (its outcome is
    /// logged). Returns at once: a store that is down or refuses is said in the log, and
    /// journals wait on the local disk meanwhile.
    ///
    /// # Errors
    /// A URL that cannot be opened, or no thread for the shipper.
    pub fn start(
        url: &str,
        local: JournalDir,
        run: &str,
        options: Options,
    ) -> anyhow::Result<Fleet> {
        let store = Store::open(url)?;
        Fleet::with_store(store, local, run, options, Arc::new(clock::SystemClock))
    }

    /// As [`Fleet::start`], on a store already opened and with `clock`.
    ///
    /// # Errors
    /// No journal directory, or no thread for the shipper.
    pub fn with_store(
        store: Store,
        local: JournalDir,
        run: &str,
        options: Options,
        clock: SharedClock,
    ) -> anyhow::Result<Fleet> {
        local.create_dirs()?;
        let me = Identity {
            host: host_id(&local)?,
            run: run.to_string(),
            pid: std::process::id(),
        };
        // Two workers: the shipper and the index's task, neither waiting on the other.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("acp-journal-store")
            .enable_all()
            .build()?;
        let (messages, rx) = mpsc::unbounded_channel();
        let policy = Arc::new(Mutex::new(Policy {
            ttl: options.lease_ttl,
            takeover: options.takeover,
            conditional: None,
        }));
        let (probed_tx, probed) = watch::channel(false);
        let shared = Arc::new(Shared {
            store,
            local,
            me,
            policy: policy.clone(),
            leases: Arc::new(Mutex::new(Leases::default())),
            clock,
            liveness: Arc::new(ProcessTable),
            status: Arc::new(Status::default()),
            probed,
        });
        let (indexer, index) = if options.index {
            let (tx, rx) = mpsc::unbounded_channel();
            let shipped = Arc::new(shipped::ShippedFiles::default());
            runtime.spawn(Indexer::new(shared.clone(), shipped.clone(), rx).run());
            (Some(tx.clone()), Some((tx, shipped)))
        } else {
            (None, None)
        };
        runtime.spawn(Shipper::new(shared.clone(), options.ship_interval, rx, index).run());
        let prober = shared.clone();
        runtime.spawn(async move {
            let (store, host) = (&prober.store, &prober.me.host);
            let found = probe(store, host).await;
            policy.lock().conditional = match found {
                Probe::Enforced => Some(true),
                Probe::Ignored => Some(false),
                Probe::Failed(_) => None,
            };
            let _ = probed_tx.send(true);
            match found {
                Probe::Enforced => tracing::info!(
                    "object store {}: reachable, conditional writes enforced (this host is {host})",
                    store.url()
                ),
                Probe::Ignored => tracing::warn!(
                    "object store {} ignores conditional writes (a second create-if-absent of one \
                     object, or a replace of a version it was not at, succeeded): it cannot \
                     arbitrate which host continues a session, so a session another host had \
                     moves here only with --takeover",
                    store.url()
                ),
                Probe::Failed(e) => tracing::error!(
                    "object store {} refused acp-journal at start: {e}. Journals are kept on the \
                     local disk and shipped once it accepts them",
                    store.url()
                ),
            }
        });
        Ok(Fleet {
            inner: Arc::new(Inner {
                shared,
                runtime: Some(runtime),
                messages,
                indexer,
                listed: Mutex::new(None),
            }),
        })
    }

    /// The store's URL.
    pub fn url(&self) -> &str {
        self.inner.shared.store.url()
    }

    /// How long a load may wait for a session whose holder went silent: its lease's time
    /// plus the margin, and a few seconds for the requests.
    pub fn patience(&self) -> Duration {
        let ttl = self.inner.shared.policy().ttl.min(lease::MAX_TTL);
        ttl + lease::margin(ttl) + Duration::from_secs(3)
    }

    /// Take the lease of `session` for this process, before continuing it: at once when it is
    /// free (new, given back, its holder's process on this host gone), after the holder's
    /// lease runs out when that holder has gone silent (waiting at most [`Fleet::patience`]),
    /// refused when the holder is seen renewing it. Blocking: for a blocking thread, never the
    /// runtime's.
    ///
    /// # Errors
    /// [`Error::Refused`], whose message is the client's: who holds it, or why the store
    /// could not tell; [`Error::Stopped`].
    pub fn acquire(&self, session: SessionId<'_>) -> Result<Acquired, Error> {
        let Some(runtime) = &self.inner.runtime else {
            return Err(Error::Stopped);
        };
        let s = &self.inner.shared;
        let patience = self.patience();
        runtime
            .block_on(async {
                // What the store does with conditional writes decides how a session may move:
                // the probe, started with the process, is waited for.
                let mut probed = s.probed.clone();
                let _ = within(PULL_TIMEOUT, probed.wait_for(|done| *done)).await;
                let policy = self.inner.shared.policy();
                let taker = s.taker(&policy);
                let acquire = lease::acquire(&s.store, &s.leases, &taker, session, patience);
                let limit = patience + PULL_TIMEOUT;
                tokio::time::timeout(limit, acquire)
                    .await
                    .unwrap_or(Err(Refusal::Store(Unanswered::Late(limit))))
            })
            .map_err(|refusal| Error::Refused {
                session: session.as_str().to_string(),
                refusal: Box::new(refusal),
            })
    }

    /// The store's sessions, every host's ([`listing`]: pulled into `store-copy/` in the journal
    /// directory). A reading started less than two seconds before, or under way when asked (it
    /// is waited for), is shared: the host's `session/list` and the team page's list, asked at
    /// once, make one. Blocking: for a blocking thread.
    ///
    /// # Errors
    /// The store's listing, or the local disk's.
    pub fn listing(&self) -> Result<Arc<listing::Listing>, Error> {
        let Some(runtime) = &self.inner.runtime else {
            return Err(Error::Stopped);
        };
        let clock = &self.inner.shared.clock;
        let asked = clock.now();
        let mut cached = self.inner.listed.lock();
        if let Some(listed) = &*cached
            && (listed.ended >= asked || asked.saturating_sub(listed.started) < LISTED_FOR)
        {
            return Ok(listed.listing.clone());
        }
        let s = &self.inner.shared;
        let copy = JournalDir::mirror(s.local.root().join("store-copy"));
        let started = clock.now();
        let listing = Arc::new(runtime.block_on(within(
            PULL_TIMEOUT,
            listing::read(&s.store, &copy, clock.wall_us()),
        ))??);
        *cached = Some(Listed {
            listing: listing.clone(),
            started,
            ended: clock.now(),
        });
        Ok(listing)
    }

    /// A segment of this process was created at `path`: the shipper ships it, and the index
    /// follows it when it is a session's (told in the same order as the end of the run, so the
    /// index knows every segment of the run before it finishes).
    pub fn opened(&self, path: &Path) {
        let _ = self
            .inner
            .messages
            .send(ShipperMessage::Opened(path.to_path_buf()));
        if let Some(indexer) = &self.inner.indexer
            && self
                .inner
                .shared
                .local
                .relative(path)
                .starts_with("sessions/")
        {
            let _ = indexer.send(IndexerMessage::Follow(path.to_path_buf()));
        }
    }

    /// A segment of this process was closed.
    pub fn closed(&self, path: &Path) {
        let _ = self
            .inner
            .messages
            .send(ShipperMessage::Closed(path.to_path_buf()));
    }

    /// Ship what is left and give the leases back, and, at the same time, commit the index's
    /// last rows, waiting at most `within` (a store that is down does not hold up the end of a
    /// run: the next start ships and indexes the rest).
    pub async fn finish(&self, within: Duration) {
        let deadline = self.inner.shared.clock.now() + within;
        let (shipped, shipping) = oneshot::channel();
        let _ = self
            .inner
            .messages
            .send(ShipperMessage::Finish(deadline, shipped));
        let (indexed, indexing) = oneshot::channel();
        if let Some(indexer) = &self.inner.indexer {
            let _ = indexer.send(IndexerMessage::Finish(deadline, indexed));
        } else {
            drop(indexed);
        }
        let both = futures_util::future::join(shipping, indexing);
        let _ = tokio::time::timeout(within + Duration::from_secs(2), both).await;
    }

    /// Bring what the store holds of `session` and the local disk lacks into the journal
    /// directory. Blocking: for a blocking thread, never the runtime's.
    ///
    /// # Errors
    /// The store's or the disk's, or no answer within 30 s.
    pub fn pull_session(&self, session: SessionId<'_>) -> Result<Pulled, Error> {
        let Some(runtime) = &self.inner.runtime else {
            return Err(Error::Stopped);
        };
        let s = &self.inner.shared;
        runtime.block_on(within(
            PULL_TIMEOUT,
            pull::session(&s.store, &s.local, session),
        ))?
    }
}

/// What `request` comes to, or [`Error::Timeout`] when it takes longer than `limit`.
async fn within<T>(limit: Duration, request: impl Future<Output = T>) -> Result<T, Error> {
    tokio::time::timeout(limit, request)
        .await
        .map_err(|_| Error::Timeout(limit))
}

/// Create the same probe object twice (the second must find it there), then replace it naming
/// a version it is not at (which must fail).
async fn probe(store: &Store, host: &str) -> Probe {
    let mut nonce = [0u8; 8];
    let _ = getrandom::fill(&mut nonce);
    let nonce = hex::encode(nonce);
    let name = format!("probe/{host}-{nonce}");
    let outcome = match store.put_new(&name, bytes::Bytes::from_static(b"1")).await {
        Err(e) => return Probe::Failed(e.to_string()),
        Ok(_) => match store.put_new(&name, bytes::Bytes::from_static(b"2")).await {
            Ok(Put::Existed) => {
                let stale = Version {
                    e_tag: Some("\"acp-journal-probe\"".into()),
                    version: Some("1".into()),
                };
                let replace = Write::Replace(stale);
                match store
                    .put_versioned(&name, bytes::Bytes::from_static(b"3"), replace)
                    .await
                {
                    Ok(Written::Conflict) => Probe::Enforced,
                    // A store that cannot replace conditionally arbitrates nothing either.
                    Ok(Written::Yes(_)) | Err(object_store::Error::NotImplemented { .. }) => {
                        Probe::Ignored
                    }
                    Err(e) => Probe::Failed(format!("a conditional replace failed: {e}")),
                }
            }
            Ok(Put::Created) => Probe::Ignored,
            Err(e) => Probe::Failed(e.to_string()),
        },
    };
    let _ = store.delete(&name).await;
    outcome
}

/// This journal directory's name among the hosts: `host-id` in it, made once
/// (`<hostname>-<8 random hex digits>`, lower-case, private).
pub fn host_id(local: &JournalDir) -> std::io::Result<String> {
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
    let suffix = hex::encode(random);
    let id = match hostname.trim_matches('-') {
        "" => format!("host-{suffix}"),
        h => format!("{h}-{suffix}"),
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
