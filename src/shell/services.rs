//! [`Services`]: the journal-side work the core asks for, off the main loop: history reads (and
//! their cancelling), forks, the catalog service.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{mpsc, oneshot};

use super::catalog_service::{self, catalog_entry};
use super::history::{self, HistoryRequest};
use crate::fleet::Fleet;
use crate::fleet::layout::SessionId;
use crate::journal::JournalDir;
use crate::proto::{CatalogUpdate, HistoryChunk};
use crate::replay::fork::{ForkPoint, fork_session};

/// The journal directory's services the core asks for: history reads, the catalog, forks.
pub(super) struct Services {
    pub(super) journals: JournalDir,
    /// When this run started (Unix microseconds).
    pub(super) run_started_us: i64,
    /// Forks made in the journal directory, answered to the main loop.
    pub(super) fork_tx: mpsc::Sender<(u64, Result<(), String>)>,
    /// Catalog appends and reads (`session/list`, its change notifications), on their thread.
    pub(super) catalog: catalog_service::CatalogService,
    pub(super) history_tx: mpsc::Sender<(u64, HistoryChunk)>,
    /// Running history reads and their cancel flags.
    pub(super) fetches: HashMap<u64, Arc<AtomicBool>>,
    /// The shared store a session's history is pulled from first (`--store`).
    pub(super) fleet: Option<Fleet>,
    /// Sessions whose journal goes on in a new segment before their load is read (their
    /// lease was lost and is held again), each answered once the segment is made.
    pub(super) next_segment_tx: mpsc::UnboundedSender<(String, oneshot::Sender<()>)>,
}

/// Bring what the store holds of `session` into the journal directory before it is read.
fn pull_first(fleet: &Fleet, session: &str) {
    match fleet.pull_session(SessionId::new(session)) {
        Ok(pulled) => {
            for why in &pulled.skipped {
                tracing::warn!("session {session:?}: {why}");
            }
            if pulled.files > 0 {
                tracing::info!(
                    "session {session:?}: {} bytes of {} segments pulled from {}",
                    pulled.bytes,
                    pulled.files,
                    fleet.url()
                );
            }
        }
        Err(e) => tracing::warn!(
            "session {session:?}: not pulled from {} ({e}); loading what this disk holds",
            fleet.url()
        ),
    }
}

impl Services {
    pub(super) fn fetch_history(&mut self, request: HistoryRequest) {
        let cancel = Arc::new(AtomicBool::new(false));
        self.fetches.insert(request.load, cancel.clone());
        let journals = self.journals.clone();
        let tx = self.history_tx.clone();
        let fleet = self.fleet.clone();
        let next_segment = self.next_segment_tx.clone();
        tokio::task::spawn_blocking(move || {
            if let Some(fleet) = fleet {
                // One host continues a session at a time: its lease first (waiting for a
                // silent holder's to run out), then what the store holds of it, which no
                // other host can add to from then on.
                let acquired = match fleet.acquire(SessionId::new(&request.session)) {
                    Ok(acquired) => acquired,
                    Err(why) => {
                        tracing::warn!("{why}");
                        let _ = tx
                            .blocking_send((request.load, HistoryChunk::Refused(why.to_string())));
                        return;
                    }
                };
                if acquired.again {
                    // This run's segment of the session was fenced when another host took it:
                    // what it journals from here goes to a new one.
                    let (done, made) = oneshot::channel();
                    if next_segment.send((request.session.clone(), done)).is_ok() {
                        let _ = made.blocking_recv();
                    }
                }
                pull_first(&fleet, &request.session);
            }
            history::read(&journals, request, cancel, tx)
        });
    }

    pub(super) fn cancel_history(&mut self, load: u64) {
        if let Some(flag) = self.fetches.remove(&load) {
            flag.store(true, Ordering::Relaxed);
        }
    }

    /// Fork `parent` into a new session `fork` in the journal directory (through the turn of
    /// `message`, or all of it) on a blocking thread; the outcome goes to the main loop. The copy is
    /// stamped just before this run started, so it comes before the fork's own segment of this
    /// run, wherever segments are read in order.
    pub(super) fn fork(&self, op: u64, parent: &str, fork: &str, message: Option<String>) {
        let unix_us = self.run_started_us - 1;
        let (journals, tx) = (self.journals.clone(), self.fork_tx.clone());
        let (parent, fork) = (parent.to_string(), fork.to_string());
        tokio::task::spawn_blocking(move || {
            let point = message.map_or(ForkPoint::All, ForkPoint::Message);
            let outcome = fork_session(&journals, &parent, point, &fork, unix_us)
                .map(|_| ())
                .map_err(|e| format!("{e:#}"));
            let _ = tx.blocking_send((op, outcome));
        });
    }

    /// Write what the core learned with the turns (before anything else it asks of the
    /// catalog), unless the journal directory's disk is full.
    pub(super) fn turn_facts(&mut self, facts: Vec<(CatalogUpdate, i64)>, store_full: bool) {
        if !facts.is_empty() && !store_full {
            let entries = facts
                .into_iter()
                .map(|(u, t)| catalog_entry(u, t))
                .collect();
            self.catalog.write(entries);
        }
    }
}
