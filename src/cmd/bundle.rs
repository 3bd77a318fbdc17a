//! `bundle`: one session as a redacted, self-contained file for a bug report.

use std::io::Write;
use std::process::ExitCode;

use crate::catalog::Catalog;
use crate::cli::BundleArgs;
use crate::journal::JournalDir;
use crate::replay::bundle::{self, Options};

/// Write the bundle and say what is in it.
pub(super) fn run(journals: &JournalDir, args: BundleArgs) -> anyhow::Result<ExitCode> {
    let segments = journals
        .resolve(&args.session)
        .map_err(anyhow::Error::msg)?;
    let options = Options {
        upto_turn: args.upto_turn,
        include_stderr: args.include_stderr,
    };
    let report = bundle::write(journals.root(), &segments, &args.output, &options)?;
    let m = &report.manifest;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "wrote {}: session {}, {} of {} turns, {} records",
        args.output.display(),
        m["session"].as_str().unwrap_or("?"),
        m["turns"],
        m["turns_recorded"],
        report.records
    )?;
    let redacted = m["redacted"].as_array().map_or(&[][..], Vec::as_slice);
    writeln!(out, "redacted: {} value(s)", redacted.len())?;
    for r in redacted {
        writeln!(out, "  {}", r.as_str().unwrap_or_default())?;
    }
    for d in m["dropped"].as_array().into_iter().flatten() {
        writeln!(out, "left out: {}", d.as_str().unwrap_or_default())?;
    }
    Ok(ExitCode::SUCCESS)
}
