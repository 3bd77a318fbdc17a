//! `show`: a session as a readable transcript, its wire records, or NDJSON.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Context;

use crate::cli::ShowArgs;
use crate::journal::format::encode_record;
use crate::journal::reader::is_end_marker;
use crate::journal::{Body, SegmentReader, Store, Tail};
use crate::render::{Style, Transcript};

/// Print the session's segments, oldest first; damage is noted where the readable part ends.
pub(super) fn run(store: &Store, args: ShowArgs) -> anyhow::Result<ExitCode> {
    let segments = store.resolve(&args.session).map_err(anyhow::Error::msg)?;
    let stdout = std::io::stdout();
    let style = if stdout.is_terminal() && std::env::var_os("NO_COLOR").is_none() {
        Style::Color
    } else {
        Style::Plain
    };
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut transcript = (!args.raw && !args.json).then(|| Transcript::new(Vec::new(), style));
    let mut line = Vec::new();
    for path in &segments {
        let mut reader =
            SegmentReader::open(path).with_context(|| format!("reading {}", path.display()))?;
        for record in reader.by_ref() {
            if is_end_marker(&record) {
                continue;
            }
            if args.json {
                line.clear();
                encode_record(&record, &mut line);
                out.write_all(&line)?;
            } else if args.raw {
                raw(&mut out, &record)?;
            } else if let Some(t) = transcript.as_mut() {
                t.record(&record)?;
                // Stream: hand over what was rendered so far.
                let rendered = std::mem::take(t.buffer());
                out.write_all(&rendered)?;
            }
        }
        let tail = reader.tail().cloned().unwrap_or(Tail::Clean);
        if !matches!(tail, Tail::Clean | Tail::Unfinished) {
            out.flush()?;
            eprintln!(
                "acp-journal: {}: {tail}; everything before it is shown",
                path.display()
            );
        }
    }
    if let Some(t) = transcript {
        out.write_all(&t.finish()?)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn raw(out: &mut impl Write, record: &crate::journal::Record) -> std::io::Result<()> {
    let time = jiff::Timestamp::from_microsecond(record.unix_us)
        .map(|t| t.strftime("%H:%M:%S%.3f").to_string())
        .unwrap_or_default();
    match &record.body {
        Body::Message { from, payload } => {
            let arrow = match from {
                crate::journal::Side::Client => "client → agent",
                crate::journal::Side::Agent => "agent → client",
            };
            write!(out, "{time}  {arrow}  ")?;
            out.write_all(&payload.bytes)?;
            writeln!(out)
        }
        Body::Stderr(bytes) => {
            write!(
                out,
                "{time}  agent stderr    {}",
                String::from_utf8_lossy(bytes)
            )?;
            if !bytes.ends_with(b"\n") {
                writeln!(out)?;
            }
            Ok(())
        }
        Body::Event(event) => writeln!(out, "{time}  event           {event}"),
    }
}
