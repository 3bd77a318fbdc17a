//! What of this journal directory's segments the team index holds: one line per segment whose
//! rows were committed (`{"file":…,"turns":…,"done":…}`: the turns of it in the index so far,
//! and whether the whole of it is), appended only after the commit (`O_APPEND`, one `write(2)`
//! a line, so processes sharing the directory never interleave), in
//! `indexed-<store>.ndjson`. A segment it does not list as done is indexed again by the next
//! run of the directory, from its first record, its turns already in the index left out: rows
//! a run could not commit wait on its disk, in the journal they are read from, not in memory.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

use crate::hex;
use crate::journal::JournalDir;

/// What the index holds of one segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Indexed {
    /// The highest turn number of the session whose row came from this segment.
    pub turns: u32,
    /// Every row of the segment is in the index.
    pub done: bool,
}

/// The segments of one journal directory the index of one store holds.
#[derive(Debug)]
pub struct IndexLedger {
    path: PathBuf,
    segments: HashMap<String, Indexed>,
}

impl IndexLedger {
    /// The ledger of `local` for the store at `url`, as written so far (a line that is not
    /// one of ours is skipped).
    pub fn open(local: &JournalDir, url: &str) -> IndexLedger {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(url.as_bytes());
        let path = local
            .root()
            .join(format!("indexed-{}.ndjson", hex::encode(&digest[..6])));
        let mut segments: HashMap<String, Indexed> = HashMap::new();
        for line in std::fs::read_to_string(&path).unwrap_or_default().lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let (Some(file), Some(turns)) = (v["file"].as_str(), v["turns"].as_u64()) else {
                continue;
            };
            let entry = segments.entry(file.to_string()).or_default();
            entry.turns = entry.turns.max(u32::try_from(turns).unwrap_or(u32::MAX));
            entry.done |= v["done"].as_bool().unwrap_or(false);
        }
        IndexLedger { path, segments }
    }

    /// What the index holds of segment `file` (relative to the journal directory).
    pub fn get(&self, file: &str) -> Indexed {
        self.segments.get(file).copied().unwrap_or_default()
    }

    /// The index now holds `indexed` of each segment named: written down (a failure to write
    /// only means the next run indexes those rows again; the readers take each row once).
    pub fn record(&mut self, committed: &[(String, Indexed)]) {
        let mut lines = Vec::new();
        for (file, indexed) in committed {
            if self.get(file) == *indexed {
                continue;
            }
            self.segments.insert(file.clone(), *indexed);
            let line =
                serde_json::json!({"file": file, "turns": indexed.turns, "done": indexed.done});
            lines.extend(serde_json::to_vec(&line).unwrap_or_default());
            lines.push(b'\n');
        }
        if lines.is_empty() {
            return;
        }
        use std::os::unix::fs::OpenOptionsExt;
        let appended = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&self.path)
            .and_then(|mut f| f.write_all(&lines));
        if let Err(e) = appended {
            tracing::debug!("index ledger {}: {e}", self.path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_was_recorded_is_read_back_by_the_next_run_and_garbage_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let local = JournalDir::new(dir.path());
        local.create_dirs().unwrap();
        let mut ledger = IndexLedger::open(&local, "s3://b/p");
        assert_eq!(ledger.get("sessions/s/a.acpj.zst"), Indexed::default());
        let a = "sessions/s/a.acpj.zst".to_string();
        let b = "sessions/t/b.acpj.zst".to_string();
        ledger.record(&[(
            a.clone(),
            Indexed {
                turns: 2,
                done: false,
            },
        )]);
        ledger.record(&[
            (
                a.clone(),
                Indexed {
                    turns: 5,
                    done: true,
                },
            ),
            (
                b.clone(),
                Indexed {
                    turns: 1,
                    done: false,
                },
            ),
        ]);
        let path = ledger.path.clone();
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        file.write_all(b"not json\n{\"file\":3}\n").unwrap();
        let again = IndexLedger::open(&local, "s3://b/p");
        assert_eq!(
            again.get(&a),
            Indexed {
                turns: 5,
                done: true
            }
        );
        assert_eq!(again.get(&b).turns, 1);
        assert!(
            IndexLedger::open(&local, "s3://other")
                .get(&a)
                .eq(&Indexed::default()),
            "one ledger per store"
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
