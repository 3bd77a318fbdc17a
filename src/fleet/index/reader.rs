//! Reading the index: the manifest once (a consistent snapshot), then only the parts a
//! question needs ([`super::view`] reads the sessions and turns tables); for a search, of each
//! postings part only the row groups whose word statistics can hold the words asked for (its
//! footer, cached, and a row group or two, by ranged reads).

use std::collections::BTreeSet;

use futures_util::{StreamExt, TryStreamExt};
use parquet::file::statistics::Statistics;

use super::bounds::Totals;
use super::cache::{Cache, PartReader};
use crate::fleet::Error;

use super::snapshot::{self, Part, Read, Snapshot};
use super::table::{self, Table};
use crate::fleet::store::Store;

/// Parts fetched at once.
const FETCHES: usize = 16;

/// The index as a reader finds it.
#[derive(Debug)]
pub enum Found {
    /// A snapshot of it.
    Index(Snapshot),
    /// No index in the store.
    Missing,
    /// A manifest that cannot be trusted (why).
    Unreadable(String),
}

/// The index's manifest.
///
/// # Errors
/// The store's.
pub async fn open(store: &Store) -> Result<Found, Error> {
    Ok(match snapshot::read(store).await? {
        Read::Absent => Found::Missing,
        Read::Found(_, s) => Found::Index(s),
        Read::Unreadable(_, why) => Found::Unreadable(why),
    })
}

/// Every row of every part of `table` in `snapshot`, each part decoded by `decode` (the tests'
/// look at what the index holds; readers read it through [`super::view`]).
#[cfg(test)]
async fn every_row<T>(
    store: &Store,
    snapshot: &Snapshot,
    table: Table,
    decode: fn(bytes::Bytes) -> parquet::errors::Result<Vec<T>>,
) -> Result<Vec<T>, Error> {
    let fetches = snapshot.of(table).map(|part| async move {
        let bytes = store
            .get_bounded(&part.path, super::bounds::MAX_PART_BYTES)
            .await?;
        decode(bytes).map_err(|e| Error::from(e).at(&part.path))
    });
    let parts: Vec<Vec<T>> = futures_util::stream::iter(fetches)
        .buffer_unordered(FETCHES)
        .try_collect()
        .await?;
    Ok(parts.into_iter().flatten().collect())
}

/// Every turn in `snapshot` (a turn in two parts is there twice), unchecked.
///
/// # Errors
/// The store's, or a part that is not Parquet of the table.
#[cfg(test)]
pub async fn turns(store: &Store, snapshot: &Snapshot) -> Result<Vec<super::rows::TurnRow>, Error> {
    every_row(store, snapshot, Table::Turns, table::decode_turns).await
}

/// Every session's latest row (by `version`) in `snapshot`, unchecked.
///
/// # Errors
/// The store's, or a part that is not Parquet of the table.
#[cfg(test)]
pub async fn sessions(
    store: &Store,
    snapshot: &Snapshot,
) -> Result<Vec<super::rows::SessionRow>, Error> {
    let parts = every_row(store, snapshot, Table::Sessions, table::decode_sessions).await?;
    let mut latest = std::collections::HashMap::<String, super::rows::SessionRow>::new();
    for row in parts {
        match latest.get(&row.session) {
            Some(have) if have.version >= row.version => {}
            _ => {
                latest.insert(row.session.clone(), row);
            }
        }
    }
    let mut rows: Vec<_> = latest.into_values().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.last_activity_us));
    Ok(rows)
}

/// Whether a word range `[min, max]` can hold a word beginning with `prefix`.
fn may_hold(min: &[u8], max: &[u8], prefix: &[u8]) -> bool {
    max >= prefix && (min <= prefix || min.starts_with(prefix))
}

/// The sessions that hold, for every one of `prefixes`, a word beginning with it.
///
/// # Errors
/// The store's, or a part that is not Parquet of the table.
pub async fn candidates(
    store: &Store,
    snapshot: &Snapshot,
    prefixes: &[String],
    cache: Option<&std::sync::Arc<Cache>>,
) -> Result<BTreeSet<String>, Error> {
    let mut all: Option<BTreeSet<String>> = None;
    for prefix in prefixes {
        // Every postings part: the word range a manifest gives is anyone's to write, the
        // statistics in each part's own footer (cached once read) decide.
        let parts: Vec<&Part> = snapshot.of(Table::Postings).collect();
        let lookups = parts
            .into_iter()
            .map(|part| lookup(store, part, prefix, cache.cloned()));
        let found: Vec<BTreeSet<String>> = futures_util::stream::iter(lookups)
            .buffer_unordered(FETCHES)
            .try_collect()
            .await?;
        let found: BTreeSet<String> = found.into_iter().flatten().collect();
        all = Some(match all {
            None => found,
            Some(before) => before.intersection(&found).cloned().collect(),
        });
    }
    Ok(all.unwrap_or_default())
}

/// The sessions of one postings part holding a word beginning with `prefix`: its footer, then
/// only the row groups whose word statistics can hold one, each checked before it is decoded.
async fn lookup(
    store: &Store,
    part: &Part,
    prefix: &str,
    cache: Option<std::sync::Arc<Cache>>,
) -> Result<BTreeSet<String>, Error> {
    let reader = PartReader::new(store.clone(), part.path.clone(), part.bytes, cache);
    let wrong = |e: Error| e.at(&part.path);
    let mut totals = Totals::default();
    let footer = reader
        .footer(Table::Postings, &mut totals)
        .await
        .map_err(wrong)?;
    let groups: Vec<usize> = footer
        .metadata()
        .row_groups()
        .iter()
        .enumerate()
        .filter(|(_, group)| match group.column(0).statistics() {
            Some(Statistics::ByteArray(s)) => match (s.min_opt(), s.max_opt()) {
                (Some(min), Some(max)) => may_hold(min.data(), max.data(), prefix.as_bytes()),
                _ => true,
            },
            _ => true,
        })
        .map(|(i, _)| i)
        .collect();
    let mut chunks = Vec::new();
    for group in groups {
        let read = reader.row_group(&footer, group, &mut totals).await;
        chunks.push((group, read.map_err(wrong)?));
    }
    Ok(table::decode_postings(&footer, chunks)
        .map_err(wrong)?
        .into_iter()
        .filter(|(word, _)| word.starts_with(prefix))
        .map(|(_, session)| session)
        .collect())
}

/// The words a search pattern needs every match to contain, for the index to narrow the
/// sessions to read: the word runs of the literal text the regular expression requires at its
/// top level (`flaky test` → `flaky`, `test`; `fix(ed|es)` → `fix`). `None` when it requires
/// no literal word the index can look up (a search then reads every session).
pub fn required_words(pattern: &str) -> Option<Vec<String>> {
    use regex_syntax::hir::{Hir, HirKind};
    let hir = regex_syntax::Parser::new().parse(pattern).ok()?;
    fn literal_runs(hir: &Hir, out: &mut Vec<String>) {
        match hir.kind() {
            HirKind::Literal(lit) => {
                if let Ok(text) = std::str::from_utf8(&lit.0) {
                    out.push(text.to_string());
                }
            }
            HirKind::Concat(parts) => {
                // Adjacent literals are one run of text.
                let mut run = String::new();
                for part in parts {
                    match part.kind() {
                        HirKind::Literal(lit) => {
                            run.push_str(std::str::from_utf8(&lit.0).unwrap_or(""));
                        }
                        _ => {
                            out.push(std::mem::take(&mut run));
                            literal_runs(part, out);
                        }
                    }
                }
                out.push(run);
            }
            HirKind::Capture(c) => literal_runs(&c.sub, out),
            // Repetitions that may be absent, alternations and classes require nothing.
            _ => {}
        }
    }
    let mut runs = Vec::new();
    literal_runs(&hir, &mut runs);
    let mut words = BTreeSet::new();
    for run in runs {
        super::rows::words(run.as_bytes(), &mut words);
    }
    (!words.is_empty()).then(|| words.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_requires_the_words_of_its_literal_text() {
        assert_eq!(
            required_words("flaky test"),
            Some(vec!["flaky".into(), "test".into()])
        );
        assert_eq!(
            required_words("Fix(ed|es) the bug"),
            Some(vec!["bug".into(), "fix".into(), "the".into()])
        );
        assert_eq!(required_words("(foo|bar)"), None);
        assert_eq!(required_words("a.*b"), None);
        assert_eq!(required_words("x?"), None);
        assert_eq!(required_words("[unclosed"), None);
    }

    #[test]
    fn a_word_range_may_hold_a_prefix() {
        assert!(may_hold(b"apple", b"grape", b"fig"));
        assert!(may_hold(b"figure", b"zebra", b"fig"));
        assert!(!may_hold(b"grape", b"zebra", b"fig"));
        assert!(!may_hold(b"apple", b"banana", b"fig"));
    }
}
