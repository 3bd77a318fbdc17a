//! Each host's catalog as a reader parsed it, kept between readings in this process: a local
//! copy of a catalog that has not changed since (the same file, length and modification time)
//! is not parsed again. A `serve --store` host lists the store for its `session/list` and its
//! team page every few seconds; what changes between two readings is a few hosts' catalogs.
//!
//! What is kept is what parsing the file gives, the same checks applied ([`HostScope`]): a
//! line that does not parse, or that speaks for what its host never opened, is left out as
//! before. At most [`MAX_KEPT`] bytes of catalogs are kept, those read longest ago dropped
//! first.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;

use crate::catalog::{CatalogEntry, HostScope};

/// Most bytes of catalog files whose lines are kept.
const MAX_KEPT: u64 = 64 << 20;

/// One host's catalog, parsed: the lines it may say, in its order.
#[derive(Debug, Default)]
pub struct HostLines {
    /// Each line.
    pub lines: Vec<HostLine>,
}

/// A line of a host's catalog, parsed.
#[derive(Debug)]
pub struct HostLine {
    /// As written.
    pub line: Vec<u8>,
    /// Its entry.
    pub entry: CatalogEntry,
    /// The session it speaks of (of a `Close`, its segment's).
    pub session: Option<String>,
}

/// What identifies a version of a local file: its device, inode, length and modification time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    modified_ns: i128,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            modified_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        }
    }
}

/// A catalog kept, and when it was last asked for (a counter).
struct Kept {
    stamp: Stamp,
    parsed: Arc<HostLines>,
    used: u64,
}

#[derive(Default)]
struct Memo {
    files: HashMap<PathBuf, Kept>,
    uses: u64,
}

static MEMO: LazyLock<Mutex<Memo>> = LazyLock::new(Mutex::default);

/// The catalog at `path` (a local copy of one host's), parsed: from what was kept when the
/// file is unchanged. `None` when it cannot be read.
pub fn host_catalog(path: &Path) -> Option<Arc<HostLines>> {
    // Stamped before it is read: a file changed in between is parsed again next time.
    let stamp = Stamp::of(&std::fs::metadata(path).ok()?);
    {
        let mut memo = MEMO.lock();
        memo.uses += 1;
        let uses = memo.uses;
        if let Some(kept) = memo.files.get_mut(path)
            && kept.stamp == stamp
        {
            kept.used = uses;
            return Some(kept.parsed.clone());
        }
    }
    let text = std::fs::read(path).ok()?;
    let parsed = Arc::new(parse(&text));
    let mut memo = MEMO.lock();
    memo.uses += 1;
    let used = memo.uses;
    memo.files.insert(
        path.to_path_buf(),
        Kept {
            stamp,
            parsed: parsed.clone(),
            used,
        },
    );
    let mut kept: u64 = memo.files.values().map(|k| k.stamp.len).sum();
    while kept > MAX_KEPT {
        let Some(oldest) = memo
            .files
            .iter()
            .min_by_key(|(_, k)| k.used)
            .map(|(p, _)| p.clone())
        else {
            break;
        };
        if let Some(dropped) = memo.files.remove(&oldest) {
            kept -= dropped.stamp.len;
        }
    }
    Some(parsed)
}

/// The lines of one host's catalog `text` it may say ([`HostScope`]), parsed, in order.
fn parse(text: &[u8]) -> HostLines {
    let mut scope = HostScope::default();
    let mut lines = Vec::new();
    for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let Ok(entry) = serde_json::from_slice::<CatalogEntry>(line) else {
            continue;
        };
        if !scope.admits(&entry) {
            continue;
        }
        let session = scope.session_of(&entry).map(str::to_string);
        lines.push(HostLine {
            line: line.to_vec(),
            entry,
            session,
        });
    }
    HostLines { lines }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_catalog_is_parsed_again_once_changed_and_what_its_host_may_not_say_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("catalog.ndjson");
        let key = crate::journal::dir::session_key("s");
        let open =
            format!(r#"{{"ev":"open","session":"s","segment":"sessions/{key}/r.acpj.zst","t":1}}"#);
        let foreign = r#"{"ev":"prompt","session":"other","title":"x","t":2}"#;
        std::fs::write(&path, format!("{open}\n{foreign}\nnot json\n")).unwrap();
        let first = host_catalog(&path).unwrap();
        assert_eq!(first.lines.len(), 1, "{:?}", first.lines);
        assert!(Arc::ptr_eq(&first, &host_catalog(&path).unwrap()), "kept");
        let prompt = r#"{"ev":"prompt","session":"s","title":"x","t":3}"#;
        std::fs::write(&path, format!("{open}\n{prompt}\n")).unwrap();
        let second = host_catalog(&path).unwrap();
        assert_eq!(second.lines.len(), 2);
        assert_eq!(second.lines[1].session.as_deref(), Some("s"));
    }
}
