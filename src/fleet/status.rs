//! What the shipper reports: how far behind the store is, how long shipping takes, whether the
//! store answers. Logged once on each change of health, and kept in a small file per process
//! (`shipping/<pid>.json` in the journal directory) for `acp-journal stats`.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::journal::JournalDir;

/// Lag samples kept for the percentiles.
const SAMPLES: usize = 4096;

/// How the store has been answering.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Health {
    /// Every request went through.
    #[default]
    Up,
    /// Requests fail: the backlog waits on the local disk.
    Down,
    /// Back after an outage, with a backlog still to ship.
    CatchingUp,
}

/// The shipper's figures, shared with the process that runs it.
#[derive(Debug, Default)]
pub struct Status {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    health: Health,
    error: Option<String>,
    behind_bytes: u64,
    behind_files: u64,
    shipped_bytes: u64,
    parts: u64,
    lags_ms: VecDeque<u32>,
    stranded: Vec<Stranded>,
    changed: bool,
}

/// A file this process shipped part of and ships no more: another host continued its session.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stranded {
    /// Relative to the journal directory.
    pub file: String,
    /// Bytes of it that are not in the store, and will not be.
    pub bytes: u64,
    /// The host that continued the session, when known.
    pub by: String,
}

/// The status file's content.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Report {
    /// The store's URL.
    pub store: String,
    /// The process shipping.
    pub pid: u32,
    /// When written (Unix microseconds).
    pub t: i64,
    /// Bytes on the local disk not in the store yet.
    pub behind_bytes: u64,
    /// Files with bytes waiting.
    pub behind_files: u64,
    /// The store's last error while it fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Bytes shipped by this process.
    pub shipped_bytes: u64,
    /// Parts written by this process.
    pub parts: u64,
    /// Time from bytes being written to the local disk (at the earliest: the start of the last
    /// look that found none waiting) to their being in the store, over the last shipments:
    /// median, 99th percentile, worst (milliseconds).
    pub lag_ms: [u32; 3],
    /// Files shipped no more (their sessions went on on another host), with what of them is
    /// not in the store.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stranded: Vec<Stranded>,
}

impl Status {
    /// The store's requests fail.
    pub fn failing(&self) -> bool {
        self.inner.lock().health == Health::Down
    }

    /// What waits after a round's look at the files.
    pub(super) fn set_behind(&self, bytes: u64, files: u64) {
        let mut s = self.inner.lock();
        if (s.behind_bytes, s.behind_files) != (bytes, files) {
            s.changed = true;
        }
        s.behind_bytes = bytes;
        s.behind_files = files;
        if bytes == 0 && s.health == Health::CatchingUp {
            s.health = Health::Up;
            tracing::info!("the object store has every journal byte again");
        }
    }

    /// The files shipped no more, as a round found them.
    pub(super) fn set_stranded(&self, stranded: Vec<Stranded>) {
        let mut s = self.inner.lock();
        if s.stranded != stranded {
            s.changed = true;
            s.stranded = stranded;
        }
    }

    /// `bytes` were shipped, `lag` after they were (at the earliest) written.
    pub(super) fn shipped(&self, bytes: u64, lag: Duration) {
        let mut s = self.inner.lock();
        s.shipped_bytes += bytes;
        s.parts += 1;
        if s.lags_ms.len() == SAMPLES {
            s.lags_ms.pop_front();
        }
        s.lags_ms
            .push_back(u32::try_from(lag.as_millis()).unwrap_or(u32::MAX));
        s.changed = true;
    }

    /// A round had a failed request: said once, when the store starts failing.
    pub(super) fn failed(&self, url: &str, error: &str) {
        let mut s = self.inner.lock();
        if s.health != Health::Down {
            tracing::warn!(
                "the object store {url} fails ({error}): journals wait on the local disk and are \
                 shipped when it answers again"
            );
        }
        s.health = Health::Down;
        s.error = Some(error.to_string());
        s.changed = true;
    }

    /// A round went through: said once, when the store is back.
    pub(super) fn recovered(&self, url: &str) {
        let mut s = self.inner.lock();
        if s.health == Health::Down {
            tracing::info!("the object store {url} answers again: shipping what waited");
            s.health = Health::CatchingUp;
            s.error = None;
            s.changed = true;
        }
    }

    /// The figures now.
    pub fn report(&self, url: &str) -> Report {
        let s = self.inner.lock();
        let mut lags: Vec<u32> = s.lags_ms.iter().copied().collect();
        lags.sort_unstable();
        let at = |q: f64| {
            lags.get(((lags.len() as f64 - 1.0) * q).round() as usize)
                .copied()
                .unwrap_or(0)
        };
        Report {
            store: url.to_string(),
            pid: std::process::id(),
            t: jiff::Timestamp::now().as_microsecond(),
            behind_bytes: s.behind_bytes,
            behind_files: s.behind_files,
            error: s.error.clone(),
            shipped_bytes: s.shipped_bytes,
            parts: s.parts,
            lag_ms: [at(0.5), at(0.99), lags.last().copied().unwrap_or(0)],
            stranded: s.stranded.clone(),
        }
    }

    /// Write the status file when something changed since the last write.
    pub(super) fn write_file_if_changed(&self, local: &JournalDir, url: &str) {
        let changed = std::mem::take(&mut self.inner.lock().changed);
        if changed {
            self.write_file(local, url);
        }
    }

    /// Write the status file (`shipping/<pid>.json`, private, replaced whole).
    pub(super) fn write_file(&self, local: &JournalDir, url: &str) {
        let dir = local.root().join("shipping");
        let report = self.report(url);
        let write = || -> std::io::Result<()> {
            crate::journal::private::create_private_dir(&dir)?;
            let tmp = dir.join(format!("{}.json.tmp", report.pid));
            let mut file = crate::journal::private::create_private_file(&tmp).or_else(|_| {
                std::fs::remove_file(&tmp)?;
                crate::journal::private::create_private_file(&tmp)
            })?;
            std::io::Write::write_all(&mut file, &serde_json::to_vec(&report)?)?;
            std::fs::rename(&tmp, dir.join(format!("{}.json", report.pid)))
        };
        if let Err(e) = write() {
            tracing::debug!("shipping status {}: {e}", dir.display());
        }
    }
}

/// The status files of the processes shipping from `local` now (files of gone processes are
/// left out).
pub fn reports(local: &JournalDir) -> Vec<Report> {
    let Ok(dir) = std::fs::read_dir(local.root().join("shipping")) else {
        return Vec::new();
    };
    let mut out: Vec<Report> = dir
        .flatten()
        .filter_map(|e| std::fs::read(e.path()).ok())
        .filter_map(|b| serde_json::from_slice::<Report>(&b).ok())
        .filter(|r| crate::journal::dir::acp_journal_running(r.pid))
        .collect();
    out.sort_by_key(|r| r.pid);
    out
}
