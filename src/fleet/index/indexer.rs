//! The index's own task on the fleet's runtime, beside the shipper (which never waits for it):
//! it follows this journal directory's session segments as far as the store holds them
//! ([`super::writer`]), commits their rows every [`FLUSH`] and writes down in the ledger
//! ([`super::ledger`]) what the index holds of each; at its start it takes up every segment the
//! ledger does not call done whose writer is gone (a run killed before its last commit, or
//! one that ran out of time at its end), its turns already indexed left out; and every
//! [`UPKEEP`], whichever host holds the compaction lease compacts the index and repairs it
//! ([`super::compact`]).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::inbox::IndexerMessage;
use super::ledger::IndexLedger;
use super::repair;
use super::writer::{FLUSH, Writer};
use crate::fleet::Error;
use crate::fleet::layout::SessionId;
use crate::fleet::lease;
use crate::fleet::shipped::ShippedFiles;
use crate::fleet::shipper::{Ledger, Shared};
use crate::journal::JournalDir;
use crate::journal::dir::segments_in;

/// Between two looks at compaction (and repair), by the host holding the compaction lease.
pub const UPKEEP: Duration = Duration::from_secs(30);
/// Segments left by runs that are gone, followed at once (the rest wait their turn).
const RECOVERED_AT_ONCE: usize = 64;
/// Between two reads of what the followed segments gained.
const POLL: Duration = Duration::from_secs(1);
/// Where, in the journal directory, the repair keeps its copy of the store's catalogs.
const REPAIR_COPY: &str = "index-repair";

/// The index's task.
pub struct Indexer {
    shared: Arc<Shared>,
    shipped: Arc<ShippedFiles>,
    ledger: IndexLedger,
    writer: Writer,
    messages: mpsc::UnboundedReceiver<IndexerMessage>,
    /// Segments runs that are gone left unindexed, waiting their turn.
    recovered: VecDeque<PathBuf>,
    /// When compaction was last looked at, on the shared clock.
    upkept: Option<Duration>,
    /// A commit failed and was said (said again only once one succeeds).
    failing: bool,
}

impl Indexer {
    /// The index of `shared.local`'s sessions, following them as `shipped` says the store
    /// holds them.
    pub fn new(
        shared: Arc<Shared>,
        shipped: Arc<ShippedFiles>,
        messages: mpsc::UnboundedReceiver<IndexerMessage>,
    ) -> Indexer {
        let ledger = IndexLedger::open(&shared.local, shared.store.url());
        let writer = Writer::new(
            shared.store.clone(),
            shared.local.clone(),
            shared.me.host.clone(),
            shared.clock.clone(),
        );
        Indexer {
            shared,
            shipped,
            ledger,
            writer,
            messages,
            recovered: VecDeque::new(),
            upkept: None,
            failing: false,
        }
    }

    /// Index until told to finish (or every sender is gone).
    pub async fn run(mut self) {
        self.recover();
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                message = self.messages.recv() => match message {
                    Some(IndexerMessage::Follow(path)) => self.follow(path),
                    Some(IndexerMessage::Erased(keys)) => self.writer.set_erased(keys),
                    Some(IndexerMessage::Finish(deadline, done)) => {
                        self.finish(deadline).await;
                        let _ = done.send(());
                        return;
                    }
                    None => return,
                },
                _ = tick.tick() => self.round().await,
            }
        }
    }

    fn follow(&mut self, path: PathBuf) {
        let indexed = self.ledger.get(&self.shared.local.relative(&path));
        let shipped = self.shipped.of(&path);
        self.writer.follow(&path, indexed, shipped);
    }

    /// Every session segment on the disk that the ledger does not call done and whose writer
    /// is gone, queued to be followed; what the shipper's ledger says the store holds of them
    /// (for those it is done with) is known at once.
    fn recover(&mut self) {
        let local = &self.shared.local;
        let in_store = Ledger::in_store(local, self.shared.store.url());
        let Ok(sessions) = std::fs::read_dir(local.root().join("sessions")) else {
            return;
        };
        for dir in sessions.flatten() {
            for path in segments_in(&dir.path()).unwrap_or_default() {
                let rel = local.relative(&path);
                let running = |pid| self.shared.liveness.running(pid);
                if self.ledger.get(&rel).done || local.writer_alive_by(&rel, running) {
                    continue;
                }
                if let Some(&bytes) = in_store.get(&rel) {
                    self.shipped.settle(&path, bytes);
                }
                self.recovered.push_back(path);
            }
        }
        if !self.recovered.is_empty() {
            tracing::info!(
                "index: {} segments of earlier runs are not all in the team index yet: indexing them",
                self.recovered.len()
            );
        }
    }

    /// One round: take up recovered segments while few are followed, read what the followed
    /// ones gained, commit when due, and look at compaction every [`UPKEEP`].
    async fn round(&mut self) {
        while self.writer.following() < RECOVERED_AT_ONCE
            && let Some(path) = self.recovered.pop_front()
        {
            if !self.writer.follows(&path) {
                self.follow(path);
            }
        }
        self.writer.poll();
        if self.writer.due(false) {
            self.flush().await;
        }
        let now = self.shared.clock.now();
        if self
            .upkept
            .is_none_or(|at| now.saturating_sub(at) >= UPKEEP)
        {
            self.upkept = Some(now);
            if let Err(e) = self.upkeep().await {
                tracing::debug!("index upkeep: {e}");
            }
        }
    }

    /// Commit what was kept; the ledger says so. A failure is said once (unless the shipper
    /// already says the store fails) and tried again at the next flush.
    async fn flush(&mut self) -> bool {
        match self.writer.flush().await {
            Ok(committed) => {
                self.ledger.record(&committed.indexed);
                for path in &committed.done {
                    self.shipped.forget(path);
                }
                if std::mem::take(&mut self.failing) {
                    tracing::info!("index: written to {} again", self.shared.store.url());
                }
                true
            }
            Err(e) => {
                if !self.failing && !self.shared.status.failing() {
                    tracing::warn!(
                        "index: {} did not take this host's rows ({e}); they wait on this disk and are tried again every {} s",
                        self.shared.store.url(),
                        FLUSH.as_secs()
                    );
                }
                self.failing = true;
                false
            }
        }
    }

    /// When this host holds (or takes) the compaction lease: a compaction when the index has
    /// parts to merge or to delete, the parts the manifest lost taken in, then a repair of
    /// what the index lacks.
    async fn upkeep(&mut self) -> Result<(), Error> {
        let s = &self.shared;
        // The lease first: a host that does not hold it asks the store nothing more.
        let policy = s.policy();
        let mine = lease::acquire(
            &s.store,
            &s.leases,
            &s.taker(&policy),
            SessionId::new(super::compact::LEASE),
            Duration::ZERO,
        )
        .await;
        if mine.is_err() {
            return Ok(());
        }
        let now = s.clock.wall_us();
        let snapshot = match super::reader::open(&s.store).await? {
            super::reader::Found::Index(snapshot) => snapshot,
            // Nothing indexed yet: a repair may begin it.
            super::reader::Found::Missing => Default::default(),
            // The next writer starts it afresh.
            super::reader::Found::Unreadable(_) => return Ok(()),
        };
        if super::compact::needed(&snapshot, now) {
            super::compact::compact(&s.store, &s.me.host, now).await?;
        }
        let adopted = super::compact::adopt(&s.store, &snapshot, now).await?;
        if adopted > 0 {
            tracing::info!(
                "index: {adopted} parts in the store that its manifest did not list taken in"
            );
        }
        let copy = JournalDir::mirror(s.local.root().join(REPAIR_COPY));
        let repaired = repair::repair(&s.store, &copy, &snapshot, &s.me.host, now).await?;
        if repaired.sessions > 0 {
            tracing::info!(
                "index: {} sessions the team index lacked indexed from the store's journals{}",
                repaired.sessions,
                if repaired.left > 0 {
                    format!(" ({} more at the next pass)", repaired.left)
                } else {
                    String::new()
                }
            );
        }
        Ok(())
    }

    /// At the end of the run: read this run's segments as far as the store comes to hold them
    /// while the shipper ships their last bytes, then commit, all before `deadline`. What
    /// cannot be committed in time waits on this disk for the next run of the directory.
    async fn finish(&mut self, deadline: Duration) {
        while let Ok(message) = self.messages.try_recv() {
            match message {
                IndexerMessage::Follow(path) => self.follow(path),
                IndexerMessage::Erased(keys) => self.writer.set_erased(keys),
                IndexerMessage::Finish(_, done) => {
                    let _ = done.send(());
                }
            }
        }
        // The commit's share of what is left: two fifths, at most 2 s.
        let clock = self.shared.clock.clone();
        let left = deadline.saturating_sub(clock.now());
        let read_until = deadline - (left * 2 / 5).min(Duration::from_secs(2));
        loop {
            self.writer.poll();
            if self.writer.caught_up() || clock.now() >= read_until {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let committed = !self.writer.due(true)
            || tokio::time::timeout(deadline.saturating_sub(clock.now()), self.flush())
                .await
                .unwrap_or_default();
        if !committed || !self.writer.caught_up() {
            tracing::info!(
                "index: this run ended before all of its rows reached the team index; they wait on this disk, and the next run of {} writes them (as does the repair of any host holding the compaction lease)",
                self.shared.local.root().display()
            );
        }
    }
}

#[cfg(test)]
#[path = "indexer_tests.rs"]
mod tests;
