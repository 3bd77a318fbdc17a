//! `note`, `list --commit` and `hooks install`: a commit's authorship log in the Git AI Standard v3.0.0 under
//! `refs/notes/ai` (written with `git notes`), and the hooks that write it at each commit and
//! again for the commits an amend or rebase makes; the sessions and turns behind a commit, and
//! the commits holding a session's lines.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use super::blame::Journaled;
use super::git::GitHistory;
use crate::catalog::Catalog;
use crate::cli::NoteArgs;
use crate::journal::{JournalDir, SegmentReader};
use crate::provenance::edits::Origin;
use crate::provenance::note;
use crate::provenance::repo::Repo;

/// The notes ref the standard names.
const NOTES_REF: &str = "--ref=refs/notes/ai";

/// The lines commit `rev` brought in that an agent wrote: (file, line, the edit's origin).
fn credited<'j>(
    repo: &Repo,
    journaled: &'j Journaled,
    sha: &str,
) -> anyhow::Result<Vec<(String, usize, &'j Origin)>> {
    // The files the commit changed (none for a merge: its note would be its resolutions').
    let files = repo.git(&[
        "diff-tree",
        "--no-commit-id",
        "--name-only",
        "-r",
        "--root",
        "-M",
        "-z",
        sha,
    ])?;
    let mut history = GitHistory::new(repo);
    let mut credited = Vec::new();
    for file in files.split('\0').filter(|f| !f.is_empty()) {
        // A file the commit deleted has nothing to blame.
        if repo
            .git(&["cat-file", "-e", &format!("{sha}:{file}")])
            .is_err()
        {
            continue;
        }
        let (lines, credits) = journaled.blame(&mut history, Some(sha), file, None)?;
        for (line, credit) in lines.iter().zip(credits) {
            if let (true, Some(origin)) = (line.commit == sha, credit) {
                credited.push((file.to_string(), line.number, origin));
            }
        }
    }
    Ok(credited)
}

/// The work tree of the working directory and the commit `rev` names there.
fn commit(rev: &str) -> anyhow::Result<(Repo, String)> {
    let repo = Repo::containing(Path::new("."))?;
    let sha = repo.git(&["rev-parse", "--verify", &format!("{rev}^{{commit}}")])?;
    let sha = sha.trim().to_string();
    Ok((repo, sha))
}

/// Write the note of `args.rev`: the lines that commit brought in that an agent wrote.
pub(super) fn run(journals: &JournalDir, args: NoteArgs) -> anyhow::Result<ExitCode> {
    let (repo, sha) = commit(&args.rev)?;
    let journaled = Journaled::read(journals, &repo)?;
    let credited = credited(&repo, &journaled, &sha)?;
    let existing = repo.git(&["notes", NOTES_REF, "show", &sha]).ok();
    let mut err = std::io::stderr().lock();
    if credited.is_empty() && existing.is_none() {
        writeln!(
            err,
            "acp-journal: no line {sha} brought in is an agent's: no note"
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let lines: Vec<(&str, usize, &Origin)> = credited
        .iter()
        .map(|(f, n, o)| (f.as_str(), *n, *o))
        .collect();
    let text = note::write(&sha, &lines, existing.as_deref()).map_err(|e| {
        anyhow::anyhow!(
            "the note of {sha} under refs/notes/ai is not a Git AI authorship log ({e}): left as it is"
        )
    })?;
    repo.git_input(&["notes", NOTES_REF, "add", "-f", "-F", "-", &sha], &text)?;
    let sessions: HashSet<&str> = credited
        .iter()
        .map(|(_, _, o)| o.session.as_str())
        .collect();
    writeln!(
        err,
        "acp-journal: the note of {sha}: {} lines of {} sessions (refs/notes/ai)",
        credited.len(),
        sessions.len()
    )?;
    Ok(ExitCode::SUCCESS)
}

/// A turn's lines in a commit, by file.
type Lines<'a> = BTreeMap<&'a str, Vec<usize>>;

/// `list --commit REV`: the sessions and turns behind a commit, each with the lines it wrote
/// there, by file.
pub(super) fn sessions_of_commit(
    journals: &JournalDir,
    rev: &str,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let (repo, sha) = commit(rev)?;
    let journaled = Journaled::read(journals, &repo)?;
    let credited = credited(&repo, &journaled, &sha)?;
    // Turns in the order of their edits' times; each file's lines in order.
    let mut turns: BTreeMap<(i64, String, u64), (&Origin, Lines)> = BTreeMap::new();
    let mut firsts: std::collections::HashMap<(&str, u64), i64> = std::collections::HashMap::new();
    for (_, _, o) in &credited {
        let first = firsts.entry((&o.session, o.turn)).or_insert(o.time_us);
        *first = (*first).min(o.time_us);
    }
    for (file, line, origin) in &credited {
        let first = firsts[&(origin.session.as_str(), origin.turn)];
        turns
            .entry((first, origin.session.clone(), origin.turn))
            .or_insert_with(|| (*origin, BTreeMap::new()))
            .1
            .entry(file)
            .or_default()
            .push(*line);
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if json {
        let rows: Vec<serde_json::Value> = turns
            .values()
            .map(|(o, files)| {
                serde_json::json!({
                    "session": o.session,
                    "turn": o.turn,
                    "agent": o.agent,
                    "model": o.model,
                    "prompt": o.prompt,
                    "time": crate::render::utc(o.time_us),
                    "lines": files
                        .iter()
                        .map(|(f, l)| (f.to_string(), serde_json::json!(note::ranges(l))))
                        .collect::<serde_json::Map<_, _>>(),
                })
            })
            .collect();
        serde_json::to_writer_pretty(&mut out, &rows)?;
        writeln!(out)?;
    } else {
        for (o, files) in turns.values() {
            let lines: Vec<String> = files
                .iter()
                .map(|(f, l)| format!("{f}:{}", note::ranges(l)))
                .collect();
            writeln!(
                out,
                "{} turn {}  {}  {}  {}",
                o.session,
                o.turn,
                o.agent.as_deref().unwrap_or("an agent"),
                lines.join(" "),
                o.prompt
            )?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// `show SESSION --commits`: the commits that hold the session's lines in the work tree of the
/// working directory (what `blame` of each file it edited gives it), each with its lines.
pub(super) fn commits_of_session(journals: &JournalDir, session: &str) -> anyhow::Result<ExitCode> {
    let segments = journals.resolve(session).map_err(anyhow::Error::msg)?;
    let id = segments
        .iter()
        .find_map(|s| SegmentReader::open(s).ok()?.header().session.clone())
        .unwrap_or_else(|| session.to_string());
    let repo = Repo::containing(Path::new("."))?;
    let journaled = Journaled::read(journals, &repo)?;
    let mut history = GitHistory::new(&repo);
    // Commit (None: not committed yet) → file → lines, commits in the order first met.
    let mut commits: Vec<(Option<String>, Lines)> = Vec::new();
    let files = journaled.files_of(&id);
    for file in &files {
        // A file gone from the work tree, or never added, holds none of its lines in a commit.
        if repo
            .git(&["ls-files", "--error-unmatch", "--", file])
            .is_err()
        {
            continue;
        }
        let (lines, credits) = journaled.blame(&mut history, None, file, None)?;
        for (line, credit) in lines.iter().zip(credits) {
            if credit.is_none_or(|o| o.session != id) {
                continue;
            }
            let commit = (!line.uncommitted()).then(|| line.commit.clone());
            let at = match commits.iter().position(|(c, _)| *c == commit) {
                Some(at) => at,
                None => {
                    commits.push((commit, Lines::new()));
                    commits.len() - 1
                }
            };
            commits[at].1.entry(file).or_default().push(line.number);
        }
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for (commit, files) in &commits {
        let lines: Vec<String> = files
            .iter()
            .map(|(f, l)| format!("{f}:{}", note::ranges(l)))
            .collect();
        let title = match commit {
            Some(sha) => repo
                .git(&["log", "-1", "--format=%h %s", sha])?
                .trim()
                .to_string(),
            None => "not committed yet".to_string(),
        };
        writeln!(out, "{title}  {}", lines.join(" "))?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The first line of our hooks after the shebang: how a hook is known to be ours.
const MARK: &str =
    "# acp-journal: authorship notes under refs/notes/ai (acp-journal hooks install)";

/// Where a hook that was there before ours is kept (ours runs it first).
const KEPT: &str = ".before-acp-journal";

/// Add `post-commit` and `post-rewrite` hooks to the repository of the working directory;
/// a hook already there is kept and run first.
pub(super) fn install_hooks(journals: &JournalDir) -> anyhow::Result<ExitCode> {
    let repo = Repo::containing(Path::new("."))?;
    let dir = repo.git(&["rev-parse", "--path-format=absolute", "--git-path", "hooks"])?;
    let dir = PathBuf::from(dir.trim_end_matches('\n'));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let exe = std::env::current_exe().context("finding acp-journal's own path")?;
    let run = format!(
        "{} --journal-dir {} note",
        quote(&exe.display().to_string()),
        quote(&journals.root().display().to_string())
    );
    let commit = format!(
        "#!/bin/sh\n{MARK}\nstatus=0\nif [ -x \"$0{KEPT}\" ]; then \"$0{KEPT}\" \"$@\" || status=$?; fi\n{run} HEAD >/dev/null\nexit $status\n"
    );
    // After an amend or a rebase, git names each old commit and the new one it became.
    let rewrite = format!(
        "#!/bin/sh\n{MARK}\ninput=$(cat)\nstatus=0\nif [ -x \"$0{KEPT}\" ]; then printf '%s\\n' \"$input\" | \"$0{KEPT}\" \"$@\" || status=$?; fi\nprintf '%s\\n' \"$input\" | while read -r old new rest; do\n  [ -n \"$new\" ] && {run} \"$new\" >/dev/null\ndone\nexit $status\n"
    );
    let mut out = std::io::stdout().lock();
    for (name, script) in [("post-commit", commit), ("post-rewrite", rewrite)] {
        let path = dir.join(name);
        let kept = dir.join(format!("{name}{KEPT}"));
        match std::fs::read_to_string(&path) {
            Ok(text) if text.contains(MARK) => {}
            Ok(_) if kept.exists() => anyhow::bail!(
                "{} is not ours and {} is taken: move one of them away",
                path.display(),
                kept.display()
            ),
            Ok(_) => {
                std::fs::rename(&path, &kept)
                    .with_context(|| format!("keeping {}", path.display()))?;
                writeln!(out, "{}: kept, run first", kept.display())?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        }
        std::fs::write(&path, script).with_context(|| format!("writing {}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        writeln!(out, "{}: installed", path.display())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A word for sh: single-quoted.
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}
