//! `show`: a session as a readable transcript, its wire records, or NDJSON.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use super::records::{Step, walk};
use crate::catalog::Catalog;
use crate::cli::ShowArgs;
use crate::journal::format::encode_record;
use crate::journal::{Body, JournalDir, Record, Tail};
use crate::render::{Style, Transcript, arrow, clock};

/// Print the session's segments, oldest first; damage is noted where the readable part ends.
pub(super) fn run(journals: &JournalDir, args: ShowArgs) -> anyhow::Result<ExitCode> {
    let segments = journals
        .resolve(&args.session)
        .map_err(anyhow::Error::msg)?;
    let stdout = std::io::stdout();
    let style = if stdout.is_terminal() && std::env::var_os("NO_COLOR").is_none() {
        Style::Color
    } else {
        Style::Plain
    };
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut transcript = (!args.raw && !args.json).then(|| Transcript::new(Vec::new(), style));
    let mut line = Vec::new();
    walk(&segments, false, &mut |step| match step {
        Step::Record(record) if args.json => {
            line.clear();
            encode_record(record, &mut line);
            out.write_all(&line)
        }
        Step::Record(record) if args.raw => raw(&mut out, record),
        Step::Record(record) => match transcript.as_mut() {
            Some(t) => {
                t.record(record)?;
                // Stream: hand over what was rendered so far (the buffer is kept for the next).
                let buffer = t.buffer();
                out.write_all(buffer)?;
                buffer.clear();
                Ok(())
            }
            None => Ok(()),
        },
        Step::End { path, tail } if *tail != Tail::Unfinished => {
            out.flush()?;
            eprintln!(
                "acp-journal: {}: {tail}; everything before it is shown",
                path.display()
            );
            Ok(())
        }
        Step::Segment { index, .. } if index > 0 => match transcript.as_mut() {
            Some(t) => t.new_run(),
            None => Ok(()),
        },
        Step::End { .. } | Step::Segment { .. } => Ok(()),
    })?;
    if let Some(t) = transcript {
        out.write_all(&t.finish()?)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// A record as `--raw` prints it: time, direction, the wire line (or stderr, or an event).
pub(super) fn raw(out: &mut impl Write, record: &Record) -> std::io::Result<()> {
    let time = clock(record.unix_us);
    match &record.body {
        Body::Message { from, payload } => {
            write!(out, "{time}  {}  ", arrow(*from))?;
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
