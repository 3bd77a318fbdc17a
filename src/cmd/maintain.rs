//! Journal directory upkeep: `prune`, `repair`, and the generated `completions` and `man` page.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use clap::CommandFactory;

use crate::catalog::Catalog;
use crate::cli::{Cli, CompletionsArgs, PruneArgs, RepairArgs};
use crate::journal::reader::is_end_marker;
use crate::journal::{JournalDir, SegmentReader, SegmentWriter, Tail};

/// Remove whole sessions whose last activity is older than the age, newest `keep` excepted.
pub(super) fn prune(journals: &JournalDir, args: PruneArgs) -> anyhow::Result<ExitCode> {
    let now = jiff::Timestamp::now().as_microsecond();
    let cutoff = now.saturating_sub(i64::try_from(args.older_than.as_micros()).unwrap_or(i64::MAX));
    let mut sessions = journals.sessions_with(false)?;
    sessions.sort_by_key(|s| std::cmp::Reverse(s.updated));
    let mut out = std::io::stdout().lock();
    let (mut removed, mut bytes) = (0, 0u64);
    for s in sessions
        .iter()
        .skip(args.keep)
        .filter(|s| s.updated < cutoff)
    {
        let live = s.open && s.segments.iter().any(|seg| journals.writer_alive(seg));
        if live {
            writeln!(
                out,
                "kept     {}  (being written)",
                s.session.escape_debug()
            )?;
            continue;
        }
        let size: u64 = s
            .segments
            .iter()
            .filter_map(|seg| std::fs::metadata(journals.root().join(seg)).ok())
            .map(|m| m.len())
            .sum();
        let verb = if args.dry_run {
            "would remove"
        } else {
            "removed"
        };
        writeln!(
            out,
            "{verb:<8} {}  ({} segments, {size} bytes)",
            s.session.escape_debug(),
            s.segments.len()
        )?;
        if !args.dry_run {
            let dir = journals.session_dir(&s.session);
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        removed += 1;
        bytes += size;
    }
    let verb = if args.dry_run { "would free" } else { "freed" };
    writeln!(out, "{removed} sessions, {verb} {bytes} bytes")?;
    Ok(ExitCode::SUCCESS)
}

/// Copy the longest valid prefix of a segment into a clean new segment.
pub(super) fn repair(args: RepairArgs) -> anyhow::Result<ExitCode> {
    let mut reader = SegmentReader::open(&args.file)?;
    let output = args.output.unwrap_or_else(|| {
        let name = args
            .file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let stem = name
            .strip_suffix(crate::journal::dir::SEGMENT_SUFFIX)
            .unwrap_or(&name);
        args.file.with_file_name(format!(
            "{stem}.repaired{}",
            crate::journal::dir::SEGMENT_SUFFIX
        ))
    });
    let mut writer = SegmentWriter::create(&output, reader.header())
        .with_context(|| format!("creating {}", output.display()))?;
    let (mut kept, mut last) = (0u64, (0, 0, 0));
    for record in reader.by_ref() {
        if is_end_marker(&record) {
            continue;
        }
        last = (record.seq, record.unix_us, record.mono_us);
        writer.append(&record)?;
        kept += 1;
    }
    writer.flush()?;
    writer.close(last.0 + 1, last.1, last.2)?;
    let tail = reader.tail().cloned().unwrap_or(Tail::Clean);
    let lost = match &tail {
        Tail::Clean | Tail::Unfinished => "nothing was lost".to_string(),
        other => format!("lost: {other}"),
    };
    writeln!(
        std::io::stdout().lock(),
        "{}: kept {kept} records in {}; {lost}; the original is unchanged",
        args.file.display(),
        output.display()
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Shell completions on stdout.
pub(super) fn completions(args: CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut command = Cli::command();
    // Into memory first: clap_complete panics on a write error (`completions bash | head`).
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "acp-journal", &mut script);
    std::io::stdout().lock().write_all(&script)?;
    Ok(ExitCode::SUCCESS)
}

/// The man page (roff) on stdout.
pub(super) fn man() -> anyhow::Result<ExitCode> {
    clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout().lock())?;
    Ok(ExitCode::SUCCESS)
}
