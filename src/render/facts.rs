//! The facts of a recorded session that head an export ([`SessionFacts`]), read from its first
//! segment's header.

use super::time::utc;
use crate::journal::Header;

/// The facts of a recorded session that head an export.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionFacts {
    /// The session ID (`?` when the segment has none).
    pub session: String,
    /// The agent's command line.
    pub agent: String,
    /// The proxy's working directory.
    pub cwd: String,
    /// When the first run started, in UTC (RFC 3339).
    pub recorded: String,
    /// The proxy that recorded it (name and version).
    pub proxy: String,
    /// How many proxy runs (segments) the session spans.
    pub runs: usize,
}

impl SessionFacts {
    /// The facts from the first segment's header.
    pub fn new(header: &Header, runs: usize) -> SessionFacts {
        SessionFacts {
            session: header.session.clone().unwrap_or_else(|| "?".into()),
            agent: header.argv.join(" "),
            cwd: header.cwd.clone().unwrap_or_else(|| "?".into()),
            recorded: utc(header.started),
            proxy: header.proxy.clone(),
            runs,
        }
    }
}
