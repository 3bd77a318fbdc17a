//! The git binary, run in a work tree: its output, the repository's root, paths relative to
//! it, and what the history holds (for `provenance::attribute`).

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::Context;

use crate::provenance::attribute::History;
use crate::provenance::lines::{fingerprint, split};

/// A git work tree.
pub(super) struct Repo {
    /// Its root, with every symbolic link resolved.
    root: PathBuf,
}

impl Repo {
    /// The work tree `path` (a file or a directory) lies in.
    pub(super) fn containing(path: &Path) -> anyhow::Result<Repo> {
        let dir = if path.is_dir() {
            path
        } else {
            path.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
        };
        let out = run(dir, &["rev-parse", "--show-toplevel"], None)
            .with_context(|| format!("{} is not in a git work tree", path.display()))?;
        let root = canonical(Path::new(out.trim_end_matches('\n')));
        Ok(Repo { root })
    }

    /// `path` relative to the root (`/` between parts), when it lies inside the work tree.
    pub(super) fn relative(&self, path: &Path) -> Option<String> {
        let rel = canonical(path).strip_prefix(&self.root).ok()?.to_path_buf();
        let parts: Vec<&str> = rel.iter().map(|p| p.to_str()).collect::<Option<_>>()?;
        (!parts.is_empty()).then(|| parts.join("/"))
    }

    /// Whether `path` is the root or inside it.
    pub(super) fn holds(&self, path: &Path) -> bool {
        canonical(path).starts_with(&self.root)
    }

    /// git's standard output for `args`, run at the root; an error with git's own message when
    /// it fails.
    pub(super) fn git(&self, args: &[&str]) -> anyhow::Result<String> {
        run(&self.root, args, None)
    }

    /// Like [`Repo::git`], with `input` on git's standard input.
    pub(super) fn git_input(&self, args: &[&str], input: &str) -> anyhow::Result<String> {
        run(&self.root, args, Some(input))
    }
}

fn run(dir: &Path, args: &[&str], input: Option<&str>) -> anyhow::Result<String> {
    let mut child = Command::new("git")
        .args(args)
        .current_dir(dir)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running git (is it installed and on PATH?)")?;
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(input.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        anyhow::bail!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8(out.stdout).context("git's output is not UTF-8")
}

/// `path` with every symbolic link resolved, as far as it exists (the rest appended: a file
/// deleted or renamed since keeps its place).
fn canonical(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        if let Ok(mut real) = at.canonicalize() {
            real.extend(rest.iter().rev());
            return real;
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                at = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

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
