//! acp-journal: a transparent recording proxy for the Agent Client Protocol.
//!
//! # Layout
//! - [`proto`]: the pure protocol core (no I/O): classifies lines, attributes them to sessions,
//!   decides what to journal and what to forward.
//! - [`journal`]: the on-disk format, the segment writer, the salvage reader, the store layout.
//! - [`render`]: readable transcripts of journal records.
//! - [`replay`]: recordings as exchanges: played as an agent, compared, bundled.
//! - [`shell`]: the I/O driver: spawns the agent, pumps lines, applies the core's actions.
//! - [`cli`] and [`cmd`]: the command line and one module per subcommand.
#![warn(missing_docs, unreachable_pub)]
#![deny(clippy::print_stdout)]

pub mod acp;
pub mod catalog;
pub mod cli;
pub mod cmd;
pub mod journal;
pub mod proto;
pub mod render;
pub mod replay;
pub mod shell;
pub mod wire;
