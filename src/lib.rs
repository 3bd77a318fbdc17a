//! acp-journal: a transparent recording proxy for the Agent Client Protocol.
//!
//! # Layout
//! Layers, each using only those listed before it (`scripts/module-deps.sh` checks):
//! - [`wire`]: JSON-RPC lines as they cross the proxy: the borrowed peek (`envelope`), the
//!   byte-preserving editor (`rewrite`), [`wire::Side`].
//! - [`acp`]: ACP content helpers shared by the readers (prompt text, permission choices).
//! - [`lru`]: a cache on disk kept within its size, least recently used first.
//! - [`journal`]: the on-disk format and typed events, the segment writer, the salvage reader,
//!   the journal directory's layout and private files. Knows no ACP.
//! - [`redact`]: secrets out of what is journaled, exported or bundled (never out of what is
//!   forwarded): pure functions over lines, records, events and command lines.
//! - [`catalog`]: the journal directory's session index (`catalog.ndjson`), rebuilt from the
//!   segments, and `<session>` resolution.
//! - [`provenance`]: which session wrote a line: the edits a journal shows, lines as
//!   fingerprints, the rules giving a committed line to an agent's edit or a person.
//! - [`fleet`]: journals in an object store shared by every host (`--store`): the shipper, the
//!   pulls, the object layout, the team index (whose edits come from [`provenance`]). Reads
//!   catalogs.
//! - [`proto`]: the pure protocol core (no I/O): classifies lines, attributes them to sessions,
//!   decides what to journal and what to forward.
//! - [`render`]: readable transcripts of journal records.
//! - [`replay`]: recordings as exchanges: played as an agent, compared, bundled.
//! - [`otel`]: OpenTelemetry GenAI spans of sessions: built from records, encoded as OTLP,
//!   exported after the fact or live.
//! - [`shell`]: the I/O driver: spawns the agent, pumps lines, applies the core's actions.
//! - [`net`]: `acp-journal serve`'s ACP over HTTP and WebSocket, and the `--connect` bridge.
//! - [`cli`] and [`cmd`]: the command line and one module per subcommand.
#![warn(missing_docs, unreachable_pub)]
#![deny(clippy::print_stdout)]

pub mod acp;
#[cfg(test)]
mod allocations;
/// The test build counts what each thread allocates (tests assert bounds on memory by bytes).
#[cfg(test)]
#[global_allocator]
static COUNTING: allocations::Counting = allocations::Counting;
pub mod catalog;
pub mod cli;
pub mod cmd;
pub mod fleet;
pub mod hex;
pub mod journal;
pub mod lru;
pub mod net;
pub mod otel;
pub mod proto;
pub mod provenance;
pub mod redact;
pub mod render;
pub mod replay;
#[cfg(test)]
mod seeded;
pub mod shell;
pub mod wire;
