//! `blame FILE --store URL`: the team's edits from the store's index (its `edits` table,
//! `fleet::index::edits`), so a line written on a teammate's machine is found without a copy of
//! every session. The index's rows are believed as every reader of it believes them
//! (`fleet::index::view`); a row names its repository by the first commit of its history, so a
//! clone of the same history anywhere on any machine matches it, and a row its host could not
//! place in a repository is matched by its path, as a journal's edit is. Only the sessions the
//! index cannot answer for are read from their journals: those its rows say were indexed by a
//! host that did not index edits, and those the hosts' catalogs know more of (the index is
//! behind on them). With no index to trust (said), every session is read, as before.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;

use super::blame::{self, Journaled};
use super::from_store::{self, Indexed, Limits};
use crate::cli::{BlameArgs, Command as Cli};
use crate::fleet::index::edits::EditRow;
use crate::fleet::index::view;
use crate::provenance::edits::{Command, Edit};
use crate::provenance::lines::Change;
use crate::provenance::repo::Repo;

/// Print the blame of `args.file` with the sessions of the store at `url`.
///
/// # Errors
/// The store cannot be opened or read, git's.
pub(super) fn run(url: &str, args: BlameArgs, limits: Limits) -> anyhow::Result<ExitCode> {
    let Some(indexed) = from_store::open_view(url)? else {
        let copy = from_store::local_copy(url, &Cli::Blame(args.clone()), limits)?;
        return blame::run(&copy, args);
    };
    blame::run_with(args, |repo, paths| {
        journaled(url, indexed, repo, paths, limits)
    })
}

/// What the index and the journals it cannot answer for say of `repo`'s files `paths`.
fn journaled(
    url: &str,
    indexed: Indexed,
    repo: &Repo,
    paths: &BTreeSet<String>,
    limits: Limits,
) -> anyhow::Result<Journaled> {
    let Indexed {
        opened,
        snapshot,
        view,
    } = indexed;
    let (rows, skipped) = opened
        .runtime
        .block_on(view::edits(&opened.store, &snapshot, &view));
    for why in skipped {
        eprintln!("acp-journal: {url}: an index part cannot be read ({why}): left out");
    }
    let mut unknown: BTreeSet<String> = view
        .rows
        .iter()
        .filter(|r| r.edits.is_none())
        .map(|r| r.session.clone())
        .collect();
    unknown.extend(view.behind.iter().cloned());
    let identity = repo.identity();
    let (mut edits, mut commands) = (Vec::new(), Vec::new());
    for row in rows.iter().filter(|r| !unknown.contains(&r.session)) {
        match &row.command {
            Some(command) if in_repo(row, repo, identity.as_deref()) => {
                commands.push(Command {
                    origin: row.origin(),
                    command: command.clone(),
                    cwd: Some(repo.root().join(row.repo_path.as_deref().unwrap_or(""))),
                });
            }
            Some(_) => {}
            None => {
                if let Some(rel) = relative(row, repo, identity.as_deref())
                    && paths.contains(&rel)
                    && let Some(how) = row.how()
                {
                    let edit = Edit {
                        origin: row.origin(),
                        path: repo.root().join(&rel),
                        change: Change {
                            written: row.written.clone(),
                            removed: row.removed.clone(),
                        },
                        how,
                    };
                    edits.push((edit, Some(rel)));
                }
            }
        }
    }
    let from_index = Journaled::new(edits, commands);
    if unknown.is_empty() {
        return Ok(from_index);
    }
    // Those sessions' journals, pulled into the local copy of the store.
    let ids: Vec<String> = unknown.into_iter().collect();
    eprintln!(
        "acp-journal: {url}: {} sessions the index cannot answer for (indexed without their edits, or behind): read from their journals",
        ids.len()
    );
    opened.pull(url, &ids)?;
    let mut derived = Vec::new();
    for id in &ids {
        let mut segments =
            crate::journal::dir::segments_in(&opened.copy.session_dir(id)).unwrap_or_default();
        crate::journal::mark::in_epoch_order(&mut segments);
        derived.push(blame::derive(id, &segments));
    }
    from_store::trim(&opened.copy, &ids, limits.copy);
    Ok(from_index.and(Journaled::of(repo, derived)))
}

/// Whether a command's row ran in `repo` (whose identity is `identity`).
fn in_repo(row: &EditRow, repo: &Repo, identity: Option<&str>) -> bool {
    match (&row.repo, identity) {
        (Some(theirs), Some(ours)) => theirs == ours,
        (Some(_), None) => false,
        (None, _) => row
            .path
            .as_deref()
            .is_some_and(|p| repo.holds(Path::new(p))),
    }
}

/// An edit's row's path relative to `repo`, when it lies in it: by the repository's identity
/// when its host placed it, else by its path as a journal's edit is.
fn relative(row: &EditRow, repo: &Repo, identity: Option<&str>) -> Option<String> {
    match (&row.repo, identity) {
        (Some(theirs), Some(ours)) if theirs == ours => row.repo_path.clone(),
        (Some(_), _) => None,
        (None, _) => repo.relative(Path::new(row.path.as_deref()?)),
    }
}
