//! Why a session could not be taken ([`Refusal`]), in the words a client gets, with the names
//! the store gave [`shown`] safely.

use super::Lease;

/// Why a session could not be taken.
#[derive(Debug)]
pub enum Refusal {
    /// Another host holds it: its lease (`None`: the lease is unreadable), and whether it was
    /// seen renewing it.
    Held {
        /// The lease, when it could be read.
        lease: Option<Lease>,
        /// The store cannot arbitrate (it ignores conditional writes).
        unarbitrated: bool,
    },
    /// The store could not say who holds it.
    Store(Unanswered),
}

/// Why the store could not say who holds a session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Unanswered {
    /// A request failed.
    #[error("{0}")]
    Store(#[from] crate::fleet::store::Error),
    /// The lease changed every time this host tried to take it.
    #[error("the lease keeps changing")]
    Contended,
    /// No answer within this long.
    #[error("no answer within {0:?}")]
    Late(std::time::Duration),
}

/// `text` as it may be shown: a name the store gave, quoted and cut to 80 characters, with no
/// control characters (a log line or an error message cannot be forged through it).
pub fn shown(text: &str) -> String {
    let cut: String = text.chars().take(80).collect();
    let mut out = format!("{cut:?}");
    if text.chars().count() > 80 {
        out.push('…');
    }
    out
}

impl Refusal {
    /// The message a client gets.
    pub fn message(&self, session: &str) -> String {
        match self {
            Refusal::Held {
                lease: Some(l),
                unarbitrated: false,
            } => format!(
                "session {session:?} is being continued on host {} (run {}); its lease runs out {} s after that host stops renewing it (start acp-journal with --takeover to take it anyway)",
                shown(&l.host),
                shown(&l.run),
                l.ttl().as_secs_f64()
            ),
            Refusal::Held {
                lease,
                unarbitrated: true,
            } => format!(
                "session {session:?} was last continued on host {}, and the store ignores conditional writes, so it cannot say which host continues it: start acp-journal with --takeover to take it",
                lease
                    .as_ref()
                    .map_or_else(|| "(unreadable)".to_string(), |l| shown(&l.host))
            ),
            Refusal::Held { lease: None, .. } => format!(
                "session {session:?}: its lease in the store is unreadable and was changed while this host watched it; try again, or start acp-journal with --takeover"
            ),
            Refusal::Store(e) => {
                format!("session {session:?}: the shared store cannot say who holds it ({e})")
            }
        }
    }
}
