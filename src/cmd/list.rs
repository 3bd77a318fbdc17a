//! `list`: the sessions in the store.

use std::io::Write;
use std::process::ExitCode;

use crate::cli::ListArgs;
use crate::journal::Store;

/// Print the sessions, newest first, as a table or JSON.
pub(super) fn run(store: &Store, args: ListArgs) -> anyhow::Result<ExitCode> {
    let mut sessions = store.sessions()?;
    if let Some(cwd) = &args.cwd {
        sessions.retain(|s| s.cwd.as_deref() == Some(cwd.as_str()));
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &sessions)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    if sessions.is_empty() {
        writeln!(out, "no sessions recorded in {}", store.root().display())?;
        return Ok(ExitCode::SUCCESS);
    }
    let width = sessions
        .iter()
        .map(|s| display_id(&s.session).len())
        .max()
        .unwrap_or(7)
        .max(7);
    writeln!(
        out,
        "{:<width$}  {:<20}  {:>8}  {:>9}  CWD",
        "SESSION", "STARTED (UTC)", "RECORDS", "BYTES"
    )?;
    for s in &sessions {
        let started = jiff::Timestamp::from_microsecond(s.started)
            .map(|t| t.strftime("%Y-%m-%d %H:%M:%S").to_string())
            .unwrap_or_default();
        let live = if s.open { " (open)" } else { "" };
        writeln!(
            out,
            "{:<width$}  {:<20}  {:>8}  {:>9}  {}{live}",
            display_id(&s.session),
            started,
            s.records,
            s.bytes,
            s.cwd.as_deref().unwrap_or("-"),
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A session ID made safe for one terminal line (control characters escaped, long IDs cut).
fn display_id(id: &str) -> String {
    let escaped: String = id.escape_debug().collect();
    let shown = if escaped.is_empty() {
        "\"\"".to_string()
    } else {
        escaped
    };
    if shown.chars().count() > 60 {
        format!("{}…", shown.chars().take(59).collect::<String>())
    } else {
        shown
    }
}
