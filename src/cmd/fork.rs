//! `fork`: a new session holding a session's history, whole or up to a turn.

use std::io::{Read, Write};
use std::process::ExitCode;

use anyhow::Context;

use crate::catalog::Catalog;
use crate::cli::ForkArgs;
use crate::hex;
use crate::journal::JournalDir;
use crate::replay::fork::{ForkPoint, fork_session};

/// Fork the session; print the new ID on stdout and what it holds on stderr. With a shared
/// store (`shared`), the parent comes from it and the fork goes to it.
pub(super) fn run(
    journals: &JournalDir,
    args: ForkArgs,
    shared: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let parent = match shared {
        Some(url) => {
            let parent = session_id(&super::from_store::catalog_copy(url)?, &args.session)?;
            super::from_store::pull_session(url, journals, &parent)?;
            parent
        }
        None => session_id(journals, &args.session)?,
    };
    let point = match (args.at_turn, args.at_message) {
        (Some(n), _) => ForkPoint::Turns(n),
        (None, Some(id)) => ForkPoint::Message(id),
        (None, None) => ForkPoint::All,
    };
    let fork_id = new_session_id()?;
    let now = jiff::Timestamp::now().as_microsecond();
    let report = fork_session(journals, &parent, point, &fork_id, now)?;
    if let Some(url) = shared {
        super::from_store::publish(url, journals, &fork_id, std::time::Duration::from_secs(30))?;
    }
    writeln!(std::io::stdout().lock(), "{fork_id}")?;
    let s = if report.turns == 1 { "" } else { "s" };
    writeln!(
        std::io::stderr().lock(),
        "acp-journal: forked session {parent} into {fork_id}: {} turn{s}, {} records",
        report.turns,
        report.records
    )?;
    Ok(ExitCode::SUCCESS)
}

/// The session a command-line argument names: an ID, else a unique prefix of one.
fn session_id(journals: &JournalDir, arg: &str) -> anyhow::Result<String> {
    let sessions = journals.sessions_with(false).with_context(|| {
        format!(
            "reading the journal directory {}",
            journals.root().display()
        )
    })?;
    if sessions.iter().any(|s| s.session == arg) {
        return Ok(arg.to_string());
    }
    let matches: Vec<&str> = sessions
        .iter()
        .map(|s| s.session.as_str())
        .filter(|s| s.starts_with(arg))
        .collect();
    match matches.as_slice() {
        [one] => Ok((*one).to_string()),
        [] => anyhow::bail!(
            "no session {arg:?} in {} (see `acp-journal list`)",
            journals.root().display()
        ),
        many => anyhow::bail!(
            "session prefix {arg:?} is ambiguous ({} matches: {}); use more characters",
            many.len(),
            many.join(", ")
        ),
    }
}

/// 32 lowercase hex digits from the system's random source.
fn new_session_id() -> anyhow::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("reading /dev/urandom for a new session ID")?;
    Ok(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    #[test]
    fn new_ids_are_32_lowercase_hex_digits_and_differ() {
        let a = super::new_session_id().unwrap();
        let b = super::new_session_id().unwrap();
        assert_eq!(a.len(), 32);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
        );
        assert_ne!(a, b);
    }
}
