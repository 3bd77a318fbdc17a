//! The team's history without copying it: an index of every host's sessions kept in the store
//! itself, in open formats (Parquet), written by the hosts and read with few requests.
//!
//! ```text
//! <prefix>/index/
//!   snapshot.json                          the manifest: every part that counts (compare-and-swap)
//!   sessions/day=YYYY-MM-DD/<part>.parquet a row per session per host and change (latest `version` wins)
//!   turns/day=YYYY-MM-DD/<part>.parquet    a row per prompt turn
//!   postings/<part>.parquet                (word, session), sorted by word
//! ```
//!
//! - [`rows`]: what a segment's records say as rows (pure);
//! - [`table`]: the tables' Parquet schemas, rows to bytes and back;
//! - [`bounds`]: what a part may be, checked before it is decoded (its size, footer, schema,
//!   every page), with [`thrift`], the reader of page headers those checks need, and
//!   [`columns`], the decoding of a checked part within a budget;
//! - [`snapshot`]: the manifest and its commits;
//! - [`writer`]: follows this host's segments as far as the store holds them and commits
//!   parts; [`ledger`]: what of each segment the index holds, on the host's disk;
//! - [`indexer`]: the index's own task: the writer, the ledger, the upkeep;
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
pub mod figures;
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

use crate::catalog::{AgentInfo, CatalogEntry};
use crate::journal::dir::session_key;
use rows::SessionRow;

/// The catalog entries that list `rows` as `list` shows them (a reader's copy of the store
/// whose catalog is the index's): each session opened, titled, with its turns, closed when its
/// last segment was, hidden when deleted. The segment they name is the session's own
/// (`sessions/<key>/index.acpj.zst`), never read: what a session holds is pulled by the
/// commands that read it.
pub fn catalog_entries(rows: &[SessionRow]) -> Vec<CatalogEntry> {
    let mut entries = Vec::new();
    for r in rows {
        let segment = format!("sessions/{}/index.acpj.zst", session_key(&r.session));
        // `agent` is the agent's title, else its command line; rows written before issue 51
        // have no command of their own: what they say is shown as the agent's name.
        let title = match &r.agent_command {
            Some(command) => r.agent.clone().filter(|a| a != command),
            None => r.agent.clone(),
        };
        entries.push(CatalogEntry::Open {
            session: r.session.clone(),
            segment: segment.clone(),
            cwd: r.cwd.clone(),
            agent: r.agent_command.clone().or_else(|| r.agent.clone()),
            agent_name: title,
            git_branch: None,
            t: r.started_us,
            agent_info: r.agent_name.as_ref().map(|name| AgentInfo {
                name: Some(name.clone()),
                version: r.agent_version.clone(),
            }),
        });
        if let Some(title) = &r.title {
            entries.push(CatalogEntry::Prompt {
                session: r.session.clone(),
                title: title.clone(),
                t: r.started_us,
            });
        }
        if r.state == "closed" {
            if let Some(t) = r.last_turn_ended_us {
                // When its last turn ended (the close gives the turns).
                entries.push(CatalogEntry::TurnEnded {
                    session: r.session.clone(),
                    turns: 0,
                    t,
                });
            }
            entries.push(CatalogEntry::Close {
                segment,
                records: 0,
                bytes: r.bytes.unwrap_or(0),
                turns: u64::from(r.turns),
                t: r.last_activity_us,
            });
        } else if r.turns > 0 {
            entries.push(CatalogEntry::TurnEnded {
                session: r.session.clone(),
                turns: u64::from(r.turns),
                t: r.last_turn_ended_us.unwrap_or(r.last_activity_us),
            });
        }
        if r.hidden {
            entries.push(CatalogEntry::Delete {
                session: r.session.clone(),
                t: r.last_activity_us,
            });
        }
    }
    entries
}

#[cfg(test)]
mod bombs;
#[cfg(test)]
mod tests;
