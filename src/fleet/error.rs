//! What can go wrong in the fleet ([`Error`]): a request to the store, an object of the store
//! that is not what it may be (hostile or damaged input) or past a reader's bound, a local
//! file, compression, the Parquet crate, a lease refused or unanswered, an answer that did not
//! come in time.
//!
//! Each variant carries the error that caused it (`source`), and its message is the one the
//! fleet's callers have always printed: the cause's own text included, as `object_store`'s
//! errors include theirs. Print an [`Error`] with `{}`; wrapped in `anyhow`, wrap it as a
//! message (`anyhow::Error::msg`), so that `{:#}` does not say its causes twice.

use std::path::PathBuf;
use std::time::Duration;

use super::lease::{Refusal, Unanswered};
use super::store;

/// An error of the fleet.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A request to the store failed (the store's message names the object).
    #[error("{0}")]
    Store(#[from] store::Error),
    /// Something read from the store is not what it may be: an object that is hostile or
    /// damaged; why, in words (the object is named by an [`Error::At`] around it, when the
    /// message names it).
    #[error("{0}")]
    Invalid(String),
    /// Something read from the store is past one of the bounds a reader keeps (a size, a
    /// count, the bytes its rows may take); which, in words.
    #[error("{0}")]
    Bound(String),
    /// An object of the store did not decompress (`expected`: the size its name gives).
    #[error("{}", decompress_message(*expected, source))]
    Decompress {
        /// The size the object's name says its bytes decompress to, when the message says it.
        expected: Option<u64>,
        /// zstd's error.
        source: std::io::Error,
    },
    /// Bytes for the store could not be compressed.
    #[error("{0}")]
    Compress(#[source] std::io::Error),
    /// A local file could not be read or written.
    #[error("{}: {source}", path.display())]
    Local {
        /// The file or directory.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// The local journal directory could not be read or set up.
    #[error("{0}")]
    Journal(#[source] std::io::Error),
    /// The Parquet crate could not encode or decode the index's rows.
    #[error("{0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    /// Another host holds a session, or the store could not say who does: `refusal`'s message
    /// for `session`.
    #[error("{}", refusal.message(session))]
    Refused {
        /// The session asked for.
        session: String,
        /// Why it could not be taken (boxed: a lease is large, and every result of the fleet
        /// carries this type).
        refusal: Box<Refusal>,
    },
    /// A share link asked to last nothing, or longer than links may.
    #[error("{}", life_message(*max_days))]
    LinkLife {
        /// The longest a link may last, in days (`None`: it asked to last nothing).
        max_days: Option<u64>,
    },
    /// The store could not say who holds a session (to take its lease).
    #[error("{0}")]
    Unanswered(#[from] Unanswered),
    /// The store did not answer within `0`.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The fleet's runtime was shut down: nothing can be asked of the store any more.
    #[error("the store's runtime is gone")]
    Stopped,
    /// `source`, about `at` (an object of the store, a column, a footer).
    #[error("{at}: {source}")]
    At {
        /// What `source` is about, as the message names it.
        at: String,
        /// What went wrong there.
        source: Box<Error>,
    },
}

impl Error {
    /// Why something read from the store is not what it may be ([`Error::Invalid`]).
    pub fn invalid(why: impl Into<String>) -> Error {
        Error::Invalid(why.into())
    }

    /// Something read from the store past one of a reader's bounds ([`Error::Bound`]).
    pub fn bound(why: impl Into<String>) -> Error {
        Error::Bound(why.into())
    }

    /// This error, about `at` ([`Error::At`]: "`at`: this error").
    #[must_use]
    pub fn at(self, at: impl Into<String>) -> Error {
        Error::At {
            at: at.into(),
            source: Box::new(self),
        }
    }

    /// A local file's error ([`Error::Local`]).
    pub fn local(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Local {
            path: path.into(),
            source,
        }
    }

    /// The innermost error under every [`Error::At`].
    pub fn root(&self) -> &Error {
        match self {
            Error::At { source, .. } => source.root(),
            e => e,
        }
    }
}

fn decompress_message(expected: Option<u64>, source: &std::io::Error) -> String {
    match expected {
        Some(size) => format!("not a zstd frame of {size} bytes ({source})"),
        None => source.to_string(),
    }
}

fn life_message(max_days: Option<u64>) -> String {
    match max_days {
        None => "a link must last some time (--expires 7d, 12h, …)".to_string(),
        Some(days) => format!("a link lasts at most {days} days"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_where_and_what_as_they_always_did() {
        let io = || std::io::Error::other("boom");
        assert_eq!(Error::local("/x/y", io()).to_string(), "/x/y: boom");
        assert_eq!(
            Error::invalid("3 bytes").at("sessions/k/f/0-4").to_string(),
            "sessions/k/f/0-4: 3 bytes"
        );
        assert_eq!(
            Error::Decompress {
                expected: Some(9),
                source: io()
            }
            .at("n")
            .to_string(),
            "n: not a zstd frame of 9 bytes (boom)"
        );
        assert_eq!(
            Error::Timeout(Duration::from_secs(30)).to_string(),
            "no answer within 30s"
        );
        assert_eq!(
            Error::LinkLife { max_days: Some(30) }.to_string(),
            "a link lasts at most 30 days"
        );
        let inner = Error::invalid("x").at("column c").at("p");
        assert_eq!(inner.to_string(), "p: column c: x");
        assert!(matches!(inner.root(), Error::Invalid(why) if why == "x"));
    }
}
