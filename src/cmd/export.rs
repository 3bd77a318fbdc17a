//! `export`: a session as markdown (for an issue) or as its wire messages (NDJSON), redacted.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;

use crate::cli::{ExportArgs, ExportFormat};
use crate::journal::reader::is_end_marker;
use crate::journal::{Body, Record, SegmentReader, Store};
use crate::proto::redact;
use crate::render::{Style, Transcript};

/// Redact a record again, as the proxy does when journaling.
fn redacted(mut record: Record) -> Record {
    redact::redact_record(&mut record);
    record
}

/// Write the export to `-o FILE` or stdout.
pub(super) fn run(store: &Store, args: ExportArgs) -> anyhow::Result<ExitCode> {
    let segments = store.resolve(&args.session).map_err(anyhow::Error::msg)?;
    let sink: Box<dyn Write> = match &args.output {
        Some(path) => Box::new(
            crate::journal::store::create_private_file(path)
                .with_context(|| format!("creating {} (it must not exist)", path.display()))?,
        ),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut out = std::io::BufWriter::new(sink);
    let mut transcript = None;
    for (i, path) in segments.iter().enumerate() {
        let mut reader =
            SegmentReader::open(path).with_context(|| format!("reading {}", path.display()))?;
        if args.format == ExportFormat::Markdown && i == 0 {
            let h = reader.header();
            let started = jiff::Timestamp::from_microsecond(h.started)
                .map(|t| t.to_string())
                .unwrap_or_default();
            writeln!(
                out,
                "# ACP session `{}`\n",
                h.session.as_deref().unwrap_or("?")
            )?;
            writeln!(out, "- agent: `{}`", h.argv.join(" "))?;
            writeln!(
                out,
                "- working directory: `{}`",
                h.cwd.as_deref().unwrap_or("?")
            )?;
            writeln!(out, "- recorded: {started} by {}", h.proxy)?;
            writeln!(out, "- runs: {}\n", segments.len())?;
            writeln!(out, "```text")?;
            transcript = Some(Transcript::new(Vec::new(), Style::Plain));
        }
        for record in reader.by_ref().filter(|r| !is_end_marker(r)) {
            let record = if args.no_redact {
                record
            } else {
                redacted(record)
            };
            match (&args.format, &mut transcript) {
                (ExportFormat::Markdown, Some(t)) => {
                    t.record(&record)?;
                    out.write_all(&std::mem::take(t.buffer()))?;
                }
                _ => {
                    if let Body::Message { payload, .. } = &record.body {
                        out.write_all(&payload.bytes)?;
                        out.write_all(b"\n")?;
                    }
                }
            }
        }
        if let Some(tail) = reader
            .tail()
            .filter(|t| t.is_corrupt() || matches!(t, crate::journal::Tail::Torn { .. }))
        {
            eprintln!(
                "acp-journal: {}: {tail}; exported up to there",
                path.display()
            );
        }
    }
    if let Some(t) = transcript {
        out.write_all(&t.finish()?)?;
        writeln!(out, "```")?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
