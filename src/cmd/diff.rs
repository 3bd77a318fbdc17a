//! `diff`: two recordings compared turn by turn.

use std::io::Write;
use std::process::ExitCode;

use crate::cli::DiffArgs;
use crate::journal::JournalDir;
use crate::replay::diff::{self, Category, Diff};

/// Print `diff` and turn it into the exit status `fail_on` asks for.
pub(super) fn report(found: &Diff, fail_on: &[Category], json: bool) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(found)?)?;
    } else {
        writeln!(out, "{found}")?;
    }
    Ok(if fail_on.iter().any(|c| found.has(*c)) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Compare the two recordings named on the command line.
pub(super) fn run(journals: &JournalDir, args: DiffArgs) -> anyhow::Result<ExitCode> {
    let a = super::sources::recording(journals, std::slice::from_ref(&args.a))?;
    let b = super::sources::recording(journals, std::slice::from_ref(&args.b))?;
    for note in a.notes.iter().chain(&b.notes) {
        eprintln!("acp-journal diff: {note}");
    }
    report(&diff::diff(&a, &b), &args.fail_on, args.json)
}
