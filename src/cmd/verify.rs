//! `verify`: check journal files and report how each ends.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::catalog::Catalog;
use crate::cli::VerifyArgs;
use crate::journal::dir::segments_in;
use crate::journal::reader::is_end_marker;
use crate::journal::{JournalDir, SegmentReader};

/// Verify the named journals (or the whole journal directory). Exit 0 when nothing is corrupt, 1
/// when a file is corrupt, 2 when a file cannot be read as a journal.
pub(super) fn run(journals: &JournalDir, args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let mut files: Vec<PathBuf> = Vec::new();
    if args.targets.is_empty() {
        files.extend(segments_in(&journals.root().join("connections")).unwrap_or_default());
        if let Ok(dirs) = std::fs::read_dir(journals.root().join("sessions")) {
            let mut dirs: Vec<PathBuf> = dirs.filter_map(|d| d.ok().map(|d| d.path())).collect();
            dirs.sort();
            for dir in dirs {
                files.extend(segments_in(&dir).unwrap_or_default());
            }
        }
    } else {
        for target in &args.targets {
            files.extend(journals.resolve(target).map_err(anyhow::Error::msg)?);
        }
    }
    let mut out = std::io::stdout().lock();
    let (mut corrupt, mut unreadable) = (0, 0);
    for path in &files {
        match SegmentReader::open(path) {
            Ok(mut reader) => {
                // Count what the segment holds; the end marker is not a record of its own.
                let records = reader.by_ref().filter(|r| !is_end_marker(r)).count();
                let tail = reader.tail().cloned().expect("set when the records end");
                let status = if tail.is_corrupt() {
                    corrupt += 1;
                    "CORRUPT"
                } else {
                    "ok"
                };
                writeln!(
                    out,
                    "{status:<7}  {}  {records} records  {tail}",
                    path.display(),
                )?;
            }
            Err(e) => {
                unreadable += 1;
                writeln!(out, "{:<7}  {e}", "ERROR")?;
            }
        }
    }
    if files.is_empty() {
        writeln!(out, "no journal files in {}", journals.root().display())?;
    }
    Ok(ExitCode::from(if unreadable > 0 {
        2
    } else if corrupt > 0 {
        1
    } else {
        0
    }))
}
