//! `export`: a session as markdown (for an issue), NDJSON (its wire messages) or one
//! self-contained HTML page; redacted again unless `--no-redact`. Streamed: nothing is collected.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use super::records::{Step, file_name, redacted_line, walk};
use crate::catalog::Catalog;
use crate::cli::{ExportArgs, ExportFormat};
use crate::journal::{Body, Header, JournalDir, Tail, mark};
use crate::otel::http::Endpoint;
use crate::otel::otlp;
use crate::otel::span::Span;
use crate::otel::spans::SpanBuilder;
use crate::redact;
use crate::render::html::{HtmlPage, beyond_store_note};
use crate::render::{SessionFacts, Style, Transcript, utc};

/// Write the export to `-o FILE` or stdout (or, for OTLP with `--endpoint`, POST it).
pub(super) fn run(journals: &JournalDir, args: ExportArgs) -> anyhow::Result<ExitCode> {
    if args.format != ExportFormat::Otlp {
        if args.sessions.len() > 1 {
            anyhow::bail!("only --format otlp exports several sessions at once: give one");
        }
        if args.endpoint.is_some() || args.content {
            anyhow::bail!("--endpoint and --content go with --format otlp");
        }
    }
    let sessions = args
        .sessions
        .iter()
        .map(|s| journals.resolve(s).map_err(anyhow::Error::msg))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let redact = !args.no_redact;
    if let Some(url) = args.endpoint.as_deref() {
        let endpoint = Endpoint::from_process_env(Some(url)).map_err(anyhow::Error::msg)?;
        let client = endpoint.client(std::time::Duration::from_secs(30));
        let mut exported = 0;
        otlp_spans(&sessions, redact, args.content, &mut |batch| {
            exported += batch.len();
            endpoint
                .post(&client, batch)
                .map_err(|e| anyhow::anyhow!("exporting spans: {e}"))
        })?;
        eprintln!("acp-journal: exported {exported} spans to {}", endpoint.url);
        return Ok(ExitCode::SUCCESS);
    }
    let segments = &sessions[0];
    let sink: Box<dyn Write> = match &args.output {
        Some(path) => Box::new(
            crate::journal::private::create_private_file(path)
                .with_context(|| format!("creating {} (it must not exist)", path.display()))?,
        ),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut out = std::io::BufWriter::new(sink);
    match args.format {
        ExportFormat::Markdown => markdown(segments, redact, &mut out)?,
        ExportFormat::Ndjson => ndjson(segments, redact, &mut out)?,
        ExportFormat::Html => html(segments, redact, &mut out)?,
        ExportFormat::Otlp => {
            // JSON Lines, as the OpenTelemetry file exporter writes: a request per batch.
            let resource = otlp::resource(|k| std::env::var(k).ok());
            otlp_spans(&sessions, redact, args.content, &mut |batch| {
                serde_json::to_writer(&mut out, &otlp::to_json(&resource, batch))?;
                out.write_all(b"\n")?;
                Ok(())
            })?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The facts that head an export, the agent's command line redacted again with `redact`.
fn facts(header: &Header, runs: usize, redact: bool) -> SessionFacts {
    let mut facts = SessionFacts::new(header, runs);
    if redact {
        facts.agent = redact::redact_argv(&header.argv).join(" ");
    }
    facts
}

/// Say on stderr where a damaged segment's readable part ends, and what of it never reached
/// the shared store.
fn warn(path: &Path, tail: &Tail) {
    if tail.is_damaged() {
        eprintln!(
            "acp-journal: {}: {tail}; exported up to there",
            path.display()
        );
    }
    if let Some(bytes) = mark::beyond_store(path) {
        eprintln!(
            "acp-journal: {}",
            beyond_store_note(&path.display().to_string(), bytes)
        );
    }
}

fn markdown(segments: &[PathBuf], redact: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let mut transcript = Transcript::new(Vec::new(), Style::Plain);
    walk(segments, redact, &mut |step| match step {
        Step::Segment { index: 0, header } => {
            let facts = facts(header, segments.len(), redact);
            writeln!(out, "# ACP session `{}`\n", facts.session)?;
            writeln!(out, "- agent: `{}`", facts.agent)?;
            writeln!(out, "- working directory: `{}`", facts.cwd)?;
            writeln!(out, "- recorded: {} by {}", facts.recorded, facts.proxy)?;
            writeln!(out, "- runs: {}\n", facts.runs)?;
            writeln!(out, "```text")
        }
        Step::Segment { .. } => transcript.new_run(),
        Step::Record(record) => {
            transcript.record(record)?;
            let buffer = transcript.buffer();
            out.write_all(buffer)?;
            buffer.clear();
            Ok(())
        }
        Step::End { path, tail } => {
            warn(path, tail);
            Ok(())
        }
    })?;
    out.write_all(&transcript.finish()?)?;
    writeln!(out, "```")?;
    Ok(())
}

fn ndjson(segments: &[PathBuf], redact: bool, out: &mut impl Write) -> anyhow::Result<()> {
    walk(segments, redact, &mut |step| match step {
        Step::Record(record) => match &record.body {
            Body::Message { payload, .. } => {
                out.write_all(&payload.bytes)?;
                out.write_all(b"\n")
            }
            _ => Ok(()),
        },
        Step::End { path, tail } => {
            warn(path, tail);
            Ok(())
        }
        Step::Segment { .. } => Ok(()),
    })
}

/// Two passes: the timeline, then the wire view (nothing is held between them).
fn html(segments: &[PathBuf], redact: bool, out: &mut impl Write) -> anyhow::Result<()> {
    html_told(segments, redact, out, &mut warn).map(|_| ())
}

/// [`html`], telling `told` of each segment that ends other than cleanly (instead of stderr);
/// returns whether the last segment was closed by its writer (its end marker read), so
/// nothing more will be written to it.
pub(super) fn html_told(
    segments: &[PathBuf],
    redact: bool,
    out: &mut impl Write,
    told: &mut dyn FnMut(&Path, &Tail),
) -> anyhow::Result<bool> {
    let mut page: Option<HtmlPage<&mut dyn Write>> = None;
    let mut sink: Option<&mut dyn Write> = Some(out);
    let mut last_closed = true;
    walk(segments, redact, &mut |step| match (step, page.as_mut()) {
        (Step::Segment { index: 0, header }, None) => {
            if let Some(out) = sink.take() {
                let facts = facts(header, segments.len(), redact);
                page = Some(HtmlPage::start(out, &facts)?);
            }
            Ok(())
        }
        (Step::Segment { index, header }, Some(page)) => page.run(index + 1, &utc(header.started)),
        (Step::Record(record), Some(page)) => page.record(record),
        (Step::End { path, tail }, Some(page)) => {
            told(path, tail);
            if segments.last().is_some_and(|last| last == path) {
                last_closed = false;
            }
            page.damage(&file_name(path), tail)?;
            match mark::beyond_store(path) {
                Some(bytes) => page.beyond_store(&file_name(path), bytes),
                None => Ok(()),
            }
        }
        _ => Ok(()),
    })?;
    let Some(page) = page else {
        anyhow::bail!("the session has no segment to export");
    };
    let mut wire = page.wire()?;
    walk(segments, redact, &mut |step| match step {
        Step::Segment { index, header } => {
            let exchange = header.initialize.as_ref();
            let lines = [
                exchange.and_then(|e| e.request.as_deref()),
                exchange.and_then(|e| e.response.as_deref()),
            ]
            .map(|raw| raw.map(|raw| redacted_line(raw.get().as_bytes(), redact)));
            let initialize = [lines[0].as_deref(), lines[1].as_deref()];
            wire.run(index + 1, &file_name(&segments[index]), initialize)
        }
        Step::Record(record) => wire.record(record),
        Step::End { path, tail } => wire.damage(&file_name(path), tail),
    })?;
    wire.finish()?;
    Ok(last_closed)
}

/// Spans in a batch of [`otlp_spans`].
const SPAN_BATCH: usize = 512;

/// The spans of each session's segments, in order (a run's open turn ends with its segment),
/// handed to `emit` in batches of at most [`SPAN_BATCH`] as they are built (flat memory).
fn otlp_spans(
    sessions: &[Vec<PathBuf>],
    redact: bool,
    content: bool,
    emit: &mut dyn FnMut(&[Span]) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut spans = Vec::new();
    let mut failed = None;
    for segments in sessions {
        let mut builder: Option<SpanBuilder> = None;
        let walked = walk(segments, redact, &mut |step| {
            match step {
                Step::Segment { header, .. } => {
                    let b = match builder.as_mut() {
                        Some(b) => {
                            b.end_run();
                            b
                        }
                        None => builder.insert(SpanBuilder::new(
                            header.session.as_deref().unwrap_or(""),
                            content,
                        )),
                    };
                    if let Some(response) =
                        header.initialize.as_ref().and_then(|i| i.response_value())
                    {
                        b.initialize(&response);
                    }
                }
                Step::Record(record) => {
                    if let Some(b) = builder.as_mut() {
                        b.record(record);
                    }
                }
                Step::End { path, tail } => warn(path, tail),
            }
            if let Some(b) = builder.as_mut() {
                spans.extend(b.take());
            }
            if spans.len() >= SPAN_BATCH {
                if let Err(e) = emit(&spans) {
                    failed = Some(e);
                    return Err(std::io::Error::other("exporting spans"));
                }
                spans.clear();
            }
            Ok(())
        });
        if let Some(e) = failed.take() {
            return Err(e);
        }
        walked?;
        if let Some(mut b) = builder {
            b.end_run();
            spans.extend(b.take());
        }
    }
    if spans.is_empty() {
        return Ok(());
    }
    emit(&spans)
}
