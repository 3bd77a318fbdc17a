//! How much of each local session segment the store holds, as the shipper knows it, shared
//! with the index: the index describes only what the store holds (a reader pulling a session
//! finds every turn its row counts; a segment stranded on this disk after another host took
//! its session says nothing past its fence).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

/// What the store holds of one file.
#[derive(Debug, Default)]
pub struct Shipped {
    /// Its first bytes, this many, are in the store.
    bytes: Arc<AtomicU64>,
    /// No more will be shipped: the file is whole in the store, or stranded (its session is
    /// another host's), or erased.
    settled: AtomicBool,
}

impl Shipped {
    /// The count of bytes in the store, shared (it only grows).
    pub fn bytes(&self) -> Arc<AtomicU64> {
        self.bytes.clone()
    }

    /// Whether no more will be shipped.
    pub fn settled(&self) -> bool {
        self.settled.load(Ordering::Acquire)
    }
}

/// The files the shipper and the index both follow, by absolute path.
#[derive(Debug, Default)]
pub struct ShippedFiles {
    by_path: Mutex<HashMap<PathBuf, Arc<Shipped>>>,
}

impl ShippedFiles {
    /// What the store holds of `path` (nothing known yet: none of it).
    pub fn of(&self, path: &Path) -> Arc<Shipped> {
        self.by_path
            .lock()
            .entry(path.to_path_buf())
            .or_default()
            .clone()
    }

    /// The store holds the first `bytes` of `path`.
    pub fn shipped(&self, path: &Path, bytes: u64) {
        self.of(path).bytes.fetch_max(bytes, Ordering::AcqRel);
    }

    /// The store holds the first `bytes` of `path` and will hold no more of it.
    pub fn settle(&self, path: &Path, bytes: u64) {
        let shipped = self.of(path);
        shipped.bytes.fetch_max(bytes, Ordering::AcqRel);
        shipped.settled.store(true, Ordering::Release);
    }

    /// `path` is done with (the index read it to its end).
    pub fn forget(&self, path: &Path) {
        self.by_path.lock().remove(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_store_holds_only_grows_and_settles_once_said() {
        let files = ShippedFiles::default();
        let path = Path::new("/j/sessions/s/r.acpj.zst");
        let seen = files.of(path);
        files.shipped(path, 100);
        files.shipped(path, 40);
        assert_eq!(seen.bytes().load(Ordering::Acquire), 100);
        assert!(!seen.settled());
        files.settle(path, 120);
        assert_eq!(seen.bytes().load(Ordering::Acquire), 120);
        assert!(seen.settled());
        files.forget(path);
        assert!(!files.of(path).settled(), "forgotten: known afresh");
    }
}
