//! Least recently used first: what keeps a cache on disk within its size. Its entries (files or
//! directories) say when each was last used and how many bytes it holds; [`trim`] removes the
//! least recently used until the cache is within its limit. The index's cache of part ranges
//! (`fleet::index::cache`) and the local copy of a shared store (`cmd::from_store`) both keep
//! theirs this way.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// One entry of a cache on disk.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    /// When it was last used.
    pub used: SystemTime,
    /// The bytes it holds.
    pub bytes: u64,
    /// Where it is.
    pub path: PathBuf,
}

/// Remove `entries`, least recently used first (then the smaller, then by path), until `total`
/// bytes (the entries' and whatever else the cache counts) are within `limit`. An entry `keep`
/// names stays; one `remove` fails to remove counts on. Returns the bytes left.
pub fn trim(
    mut entries: Vec<Entry>,
    mut total: u64,
    limit: u64,
    keep: impl Fn(&Path) -> bool,
    mut remove: impl FnMut(&Path) -> bool,
) -> u64 {
    entries.sort();
    for entry in entries {
        if total <= limit {
            break;
        }
        if keep(&entry.path) {
            continue;
        }
        if remove(&entry.path) {
            total = total.saturating_sub(entry.bytes);
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn entry(used_s: u64, bytes: u64, path: &str) -> Entry {
        Entry {
            used: UNIX_EPOCH + Duration::from_secs(used_s),
            bytes,
            path: PathBuf::from(path),
        }
    }

    fn removed(entries: Vec<Entry>, total: u64, limit: u64, keep: &[&str]) -> (Vec<String>, u64) {
        let mut gone = vec![];
        let left = trim(
            entries,
            total,
            limit,
            |p| keep.iter().any(|k| Path::new(k) == p),
            |p| {
                gone.push(p.display().to_string());
                true
            },
        );
        (gone, left)
    }

    #[test]
    fn the_least_recently_used_go_first_until_within_the_limit() {
        let entries = vec![entry(3, 10, "c"), entry(1, 10, "a"), entry(2, 10, "b")];
        assert_eq!(removed(entries.clone(), 30, 30, &[]), (vec![], 30));
        assert_eq!(
            removed(entries.clone(), 30, 25, &[]),
            (vec!["a".into()], 20)
        );
        assert_eq!(
            removed(entries, 30, 0, &[]),
            (vec!["a".into(), "b".into(), "c".into()], 0)
        );
    }

    #[test]
    fn kept_entries_stay_and_what_else_the_cache_counts_is_never_removed() {
        let entries = vec![entry(1, 10, "a"), entry(2, 10, "b"), entry(3, 10, "c")];
        assert_eq!(
            removed(entries, 35, 15, &["a"]),
            (vec!["b".into(), "c".into()], 15)
        );
    }

    #[test]
    fn an_entry_that_cannot_be_removed_still_counts() {
        let entries = vec![entry(1, 10, "a"), entry(2, 10, "b")];
        let left = trim(entries, 20, 10, |_| false, |p| p != Path::new("a"));
        assert_eq!(left, 10, "b went in a's stead");
    }
}
