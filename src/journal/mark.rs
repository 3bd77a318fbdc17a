//! What a shared store says about a local segment, kept beside it (`<segment>.mark`, JSON):
//! the epoch it was written under — the order a session's segments go in whatever the
//! writers' clocks said — and where a fence ends it (a host that took the session over cut
//! it there: what this disk holds past that point was never part of the shared session).
//!
//! Written by pulls from the store and by the shipper; read by a load, which replays a
//! session's segments in epoch order, each up to its fence, and by the reading commands,
//! which order a session's segments the same way. A segment without a mark (never in a store)
//! sorts after every marked one, by name.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::private::create_private_file;

/// A segment's mark.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// The lease epoch the segment was written under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    /// Where the shared session's copy of the segment ends (bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<u64>,
    /// A copy pulled from the store: another host wrote it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pulled: bool,
}

/// Where `segment`'s mark is kept.
pub fn path_of(segment: &Path) -> PathBuf {
    let mut name = segment.as_os_str().to_owned();
    name.push(".mark");
    PathBuf::from(name)
}

/// `segment`'s mark (the default when it has none, or it cannot be read).
pub fn read(segment: &Path) -> Mark {
    std::fs::read(path_of(segment))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Add `mark` to `segment`'s: the epoch given replaces the one kept, the earlier fence of the
/// two is kept. Written whole (private), replacing the old mark.
///
/// # Errors
/// The disk's.
pub fn add(segment: &Path, mark: Mark) -> std::io::Result<()> {
    let old = read(segment);
    let new = Mark {
        pulled: mark.pulled || old.pulled,
        epoch: mark.epoch.or(old.epoch),
        fence: match (old.fence, mark.fence) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        },
    };
    if new == old && path_of(segment).exists() {
        return Ok(());
    }
    let target = path_of(segment);
    let tmp = PathBuf::from(format!("{}.{}.tmp", target.display(), std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut file = create_private_file(&tmp)?;
    file.write_all(&serde_json::to_vec(&new).unwrap_or_default())?;
    std::fs::rename(&tmp, &target)
}

/// Bytes of `segment` on this disk past where the shared store's copy ends (a fence: another
/// host continued the session, and these never became part of it), when there are any.
pub fn beyond_store(segment: &Path) -> Option<u64> {
    let fence = read(segment).fence?;
    let len = std::fs::metadata(segment).ok()?.len();
    (len > fence).then(|| len - fence)
}

/// Put a session's segments in the order they were written in the shared session: by epoch,
/// then by name; segments without an epoch after the others, by name.
pub fn in_epoch_order(segments: &mut [PathBuf]) {
    segments.sort_by_cached_key(|p| (read(p).epoch.unwrap_or(u64::MAX), p.clone()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_keep_the_earlier_fence_and_order_by_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            dir.path().join("20261127T100000.000000Z-1.acpj.zst"),
            dir.path().join("20261127T090000.000000Z-2.acpj.zst"),
            dir.path().join("20261127T080000.000000Z-3.acpj.zst"),
        );
        let mark = |epoch, fence| Mark {
            epoch,
            fence,
            pulled: false,
        };
        add(&a, mark(Some(1), Some(90))).unwrap();
        add(&a, mark(None, Some(120))).unwrap();
        assert_eq!(read(&a), mark(Some(1), Some(90)));
        add(&b, mark(Some(2), None)).unwrap();
        // b's writer's clock was an hour slow: its name sorts first, its epoch after a's; c was
        // never in a store.
        let mut order = vec![c.clone(), b.clone(), a.clone()];
        in_epoch_order(&mut order);
        assert_eq!(order, [a, b, c]);
    }
}
