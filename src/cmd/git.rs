//! What a repository's history holds, read through the git binary (for
//! `provenance::attribute`); the work tree itself is `provenance::repo::Repo`.

use std::collections::{HashMap, HashSet};

use crate::provenance::attribute::History;
use crate::provenance::lines::{fingerprint, split};
use crate::provenance::repo::Repo;

/// The history of a repository's files, read through git as the rules ask, each answer kept.
pub(super) struct GitHistory<'r> {
    repo: &'r Repo,
    /// (revision, path) → the commits from it back that changed the path, newest first, with
    /// their commit times.
    logs: HashMap<(String, String), Vec<(String, i64)>>,
    /// (commit, path) → the fingerprints of the file's lines in it.
    files: HashMap<(String, String), HashSet<u64>>,
}

impl<'r> GitHistory<'r> {
    /// The repository.
    pub(super) fn repo(&self) -> &'r Repo {
        self.repo
    }

    /// The history of `repo`.
    pub(super) fn new(repo: &'r Repo) -> GitHistory<'r> {
        GitHistory {
            repo,
            logs: HashMap::new(),
            files: HashMap::new(),
        }
    }

    /// The commits before `commit` (`None`: from `HEAD` on, for the work tree) that changed
    /// `path`, newest first, with their commit times.
    pub(super) fn before(&mut self, commit: Option<&str>, path: &str) -> &[(String, i64)] {
        let rev = commit.map_or_else(|| "HEAD".to_string(), |c| format!("{c}^"));
        let repo = self.repo;
        self.logs
            .entry((rev.clone(), path.to_string()))
            .or_insert_with(|| {
                // A root commit has no parent, a new repository no HEAD: no history.
                repo.git(&["log", "--format=%H %ct", &rev, "--", path])
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|l| {
                        let (sha, time) = l.split_once(' ')?;
                        Some((sha.to_string(), time.parse().ok()?))
                    })
                    .collect()
            })
    }

    fn lines_of(&mut self, commit: &str, path: &str) -> &HashSet<u64> {
        let repo = self.repo;
        self.files
            .entry((commit.to_string(), path.to_string()))
            .or_insert_with(|| {
                repo.git(&["show", &format!("{commit}:{path}")])
                    .map(|text| split(&text).map(fingerprint).collect())
                    .unwrap_or_default()
            })
    }
}

impl History for GitHistory<'_> {
    fn held_before(&mut self, commit: Option<&str>, path: &str, print: u64, since: i64) -> bool {
        let commits: Vec<String> = self
            .before(commit, path)
            .iter()
            .filter(|(_, time)| *time >= since)
            .map(|(sha, _)| sha.clone())
            .collect();
        commits
            .iter()
            .any(|sha| self.lines_of(sha, path).contains(&print))
    }
}
