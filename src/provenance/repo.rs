//! A git work tree, through the git binary: its root, paths relative to it, and its identity
//! (what a teammate's clone of the same history shares). The one part of `provenance` that
//! runs a program and reads the file system.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::Context;

/// A git work tree.
#[derive(Debug)]
pub struct Repo {
    /// Its root, with every symbolic link resolved.
    root: PathBuf,
}

impl Repo {
    /// The work tree `path` (a file or a directory) lies in.
    pub fn containing(path: &Path) -> anyhow::Result<Repo> {
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

    /// The work tree the directory `dir` lies in, looked up from it or, when it is gone, from
    /// its nearest ancestor that exists; `None` when that is in no work tree.
    pub fn around(dir: &Path) -> Option<Repo> {
        let dir = dir.ancestors().find(|d| d.is_dir())?;
        Repo::containing(dir).ok()
    }

    /// Its root, every symbolic link resolved.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What names this repository on every machine of a team: the first commit of `HEAD`'s
    /// first-parent history (40 hex digits), which every clone of that history holds whatever
    /// its remote's URL or its place on the disk. `None` before the first commit; a shallow
    /// clone names the first commit it holds, and so is a repository of its own.
    pub fn identity(&self) -> Option<String> {
        let out = self
            .git(&["rev-list", "--max-parents=0", "--first-parent", "HEAD"])
            .ok()?;
        let first = out.lines().last()?.trim();
        (first.len() == 40 && first.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| first.to_string())
    }

    /// `path` relative to the root (`/` between parts), when it lies inside the work tree.
    pub fn relative(&self, path: &Path) -> Option<String> {
        let rel = canonical(path).strip_prefix(&self.root).ok()?.to_path_buf();
        let parts: Vec<&str> = rel.iter().map(|p| p.to_str()).collect::<Option<_>>()?;
        (!parts.is_empty()).then(|| parts.join("/"))
    }

    /// Whether `path` is the root or inside it.
    pub fn holds(&self, path: &Path) -> bool {
        canonical(path).starts_with(&self.root)
    }

    /// git's standard output for `args`, run at the root; an error with git's own message when
    /// it fails.
    pub fn git(&self, args: &[&str]) -> anyhow::Result<String> {
        run(&self.root, args, None)
    }

    /// Like [`Repo::git`], with `input` on git's standard input.
    pub fn git_input(&self, args: &[&str], input: &str) -> anyhow::Result<String> {
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
