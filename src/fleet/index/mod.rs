//! The team's history without copying it: an index of every host's sessions kept in the store
//! itself, in open formats (Parquet), written by the hosts and read with few requests.
//!
//! ```text
//! <prefix>/index/
//!   snapshot.json                          the manifest: every part that counts (compare-and-swap)
//!   sessions/day=YYYY-MM-DD/<part>.parquet a row per session per host and change (latest `version` wins)
//!   turns/day=YYYY-MM-DD/<part>.parquet    a row per prompt turn
//!   postings/<part>.parquet                (word, session), sorted by word
//!   edits/day=YYYY-MM-DD/<part>.parquet    a row per edit of a file or command (for `blame`)
//! ```
//!
//! - [`rows`]: what a segment's records say as rows (pure); [`edits`]: its edits and commands
//!   as rows, each path placed in its repository;
//! - [`table`]: the tables' Parquet schemas, rows to bytes and back;
//! - [`bounds`]: what a part may be, checked before it is decoded (its size, footer, schema,
//!   every page), with [`thrift`], the reader of page headers those checks need, and
//!   [`columns`], the decoding of a checked part within a budget;
//! - [`snapshot`]: the manifest and its commits;
//! - [`writer`]: follows this host's segments as far as the store holds them and commits
//!   parts; [`ledger`]: what of each segment the index holds, on the host's disk;
//! - [`indexer`]: the index's own task: the writer, the ledger, the upkeep; [`inbox`]: what
//!   it is told;
//! - [`compact`]: many small parts into one, by whichever host holds the compaction lease; and
//!   the index rebuilt from the journals; [`repair`]: what the index lacks, indexed from the
//!   store's journals by the same host;
//! - [`reader`]: the manifest once, then only the parts (and row groups) a question needs,
//!   through [`cache`], a bounded local cache of the ranges read;
//! - [`view`]: what a reader believes of it, checked against the hosts' catalogs, and how far
//!   behind them it is;
//! - [`figures`]: the team's sessions, turns and tokens by agent, host and week (`stats --store`).

pub mod bounds;
pub mod cache;
pub mod columns;
pub mod compact;
pub mod edits;
pub mod figures;
pub mod inbox;
pub mod indexer;
pub mod ledger;
pub mod reader;
pub mod repair;
pub mod rows;
pub mod snapshot;
pub mod table;
pub mod thrift;
pub mod view;
pub mod writer;

#[cfg(test)]
mod bombs;
#[cfg(test)]
mod tests;
