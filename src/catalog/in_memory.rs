//! [`CatalogIndex`]: the catalog kept in memory, brought up to date by what was appended.

use std::fs;
use std::io::{self, Read, Seek};
use std::path::PathBuf;

use super::SessionSummary;
use super::summary::Summaries;
use crate::journal::JournalDir;

/// The catalog kept in memory and brought up to date by reading only what was appended since
/// (a proxy answering `session/list` over thousands of sessions in milliseconds). Summaries
/// here skip what needs the segments themselves (records and turns of unclosed segments, and
/// whether a pruned segment is gone).
#[derive(Debug)]
pub struct CatalogIndex {
    path: PathBuf,
    /// Bytes of the catalog applied so far (a partial last line is left for the next read).
    offset: u64,
    summaries: Summaries,
}

impl CatalogIndex {
    /// The index of `journals`' catalog (empty until [`CatalogIndex::refresh`]).
    pub fn new(journals: &JournalDir) -> CatalogIndex {
        CatalogIndex {
            path: journals.root().join("catalog.ndjson"),
            offset: 0,
            summaries: Summaries::default(),
        }
    }

    /// Read what was appended since the last refresh (everything again when the catalog was
    /// rewritten); returns the sessions that changed.
    ///
    /// # Errors
    /// I/O errors other than a missing catalog.
    pub fn refresh(&mut self) -> io::Result<Vec<String>> {
        let mut file = match fs::File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(e),
        };
        let len = file.metadata()?.len();
        if len < self.offset {
            // Rewritten (`list --rebuild-catalog`): start over.
            self.offset = 0;
            self.summaries = Summaries::default();
        }
        if len == self.offset {
            return Ok(vec![]);
        }
        file.seek(io::SeekFrom::Start(self.offset))?;
        let mut bytes = Vec::with_capacity((len - self.offset) as usize);
        file.take(len - self.offset).read_to_end(&mut bytes)?;
        let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        self.offset += whole as u64;
        let mut changed = self.summaries.apply_lines(&bytes[..whole]);
        changed.sort_unstable();
        changed.dedup();
        Ok(changed)
    }

    /// Every session, in no particular order.
    pub fn sessions(&self) -> impl Iterator<Item = &SessionSummary> {
        self.summaries.by_id.values()
    }

    /// One session.
    pub fn get(&self, session: &str) -> Option<&SessionSummary> {
        self.summaries.by_id.get(session)
    }
}
