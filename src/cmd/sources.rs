//! The recordings named on a command line (session IDs, prefixes, files, bundles), read as one
//! [`Recording`]: what `replay`, `rerun` and `diff` take.

use crate::catalog::Catalog;
use crate::journal::JournalDir;
use crate::replay::Recording;

/// Read recordings named on the command line (session IDs, prefixes, files, bundles) as one.
pub(super) fn recording(journals: &JournalDir, sources: &[String]) -> anyhow::Result<Recording> {
    let mut segments = Vec::new();
    for source in sources {
        segments.extend(journals.resolve(source).map_err(anyhow::Error::msg)?);
    }
    Recording::read(&sources.join(" "), &segments)
}
