//! `blame`: git's blame of a file (the git binary's, with `-M -C`), and for each line an agent
//! wrote, the session, turn, time, agent, model and prompt behind it (`provenance`).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{Value, json};

use super::git::GitHistory;
use crate::catalog::{Catalog, SessionSummary};
use crate::cli::BlameArgs;
use crate::journal::{JournalDir, SegmentReader};
use crate::provenance::attribute::{BlamedLine, InRepo, attribute};
use crate::provenance::edits::{Command, Derived, Deriver, Edit, Origin};
use crate::provenance::porcelain;
use crate::provenance::repo::Repo;

/// Print the blame of `args.file` with the sessions of `journals`.
pub(super) fn run(journals: &JournalDir, args: BlameArgs) -> anyhow::Result<ExitCode> {
    run_with(args, |repo, _| Journaled::read(journals, repo))
}

/// Print the blame of `args.file` with what `journaled` gives of the repository, told the
/// paths (in their commits) of the lines blamed: the file's, and those git's `-M -C` followed
/// lines to.
pub(super) fn run_with(
    args: BlameArgs,
    journaled: impl FnOnce(&Repo, &BTreeSet<String>) -> anyhow::Result<Journaled>,
) -> anyhow::Result<ExitCode> {
    let repo = Repo::containing(&args.file)?;
    let Some(rel) = repo.relative(&args.file) else {
        anyhow::bail!("{} is not a file of the work tree", args.file.display());
    };
    let mut history = GitHistory::new(&repo);
    let lines = blamed(&mut history, None, &rel, args.lines)?;
    let paths = lines.iter().map(|l| l.path.clone()).collect();
    let journaled = journaled(&repo, &paths)?;
    let credits = journaled.credit(&lines, &mut history);
    // The commands of sessions run in this work tree: each may have written an uncredited line
    // committed after it and after the file's previous commit.
    let commands: Vec<&Command> = journaled
        .commands
        .iter()
        .filter(|c| c.cwd.as_deref().is_some_and(|cwd| repo.holds(cwd)))
        .collect();
    let mut maybe: Vec<Vec<&Command>> = Vec::with_capacity(lines.len());
    for (line, credit) in lines.iter().zip(&credits) {
        maybe.push(match credit {
            Some(_) => Vec::new(),
            None => may_have_written(line, &commands, &mut history),
        });
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if args.json {
        let rows: Vec<Value> = lines
            .iter()
            .zip(&credits)
            .zip(&maybe)
            .map(|((line, credit), maybe)| row(line, *credit, maybe))
            .collect();
        serde_json::to_writer_pretty(&mut out, &rows)?;
        writeln!(out)?;
    } else {
        text(&mut out, &lines, &credits, &maybe)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// What the journals say was done: every session's edits, with their paths in the repository.
pub(super) struct Journaled {
    /// Every edit, in time order.
    edits: Vec<Edit>,
    /// Each edit's path relative to the repository, when it lies in it.
    paths: Vec<Option<String>>,
    /// Every command.
    commands: Vec<Command>,
}

impl Journaled {
    /// The sessions of `journals`, for `repo`.
    pub(super) fn read(journals: &JournalDir, repo: &Repo) -> anyhow::Result<Journaled> {
        Ok(Journaled::of_sessions(
            journals,
            &journals.sessions_with(false)?,
            repo,
        ))
    }

    /// The sessions `sessions` of `journals`, for `repo`.
    pub(super) fn of_sessions(
        journals: &JournalDir,
        sessions: &[SessionSummary],
        repo: &Repo,
    ) -> Journaled {
        let derived = sessions
            .iter()
            .map(|session| {
                let segments: Vec<PathBuf> = session
                    .segments
                    .iter()
                    .map(|s| journals.root().join(s))
                    .collect();
                derive(&session.session, &segments)
            })
            .collect();
        Journaled::of(repo, derived)
    }

    /// What `derived` (sessions' edits and commands) says of `repo`.
    pub(super) fn of(repo: &Repo, derived: Vec<Derived>) -> Journaled {
        let (mut edits, mut commands) = (Vec::new(), Vec::new());
        for d in derived {
            edits.extend(d.edits);
            commands.extend(d.commands);
        }
        edits.sort_by_key(|e| e.origin.time_us);
        let paths = edits.iter().map(|e| repo.relative(&e.path)).collect();
        Journaled {
            edits,
            paths,
            commands,
        }
    }

    /// Edits each with its path relative to the repository (when it lies in it), and commands.
    pub(super) fn new(edits: Vec<(Edit, Option<String>)>, commands: Vec<Command>) -> Journaled {
        let (edits, paths) = edits.into_iter().unzip();
        Journaled {
            edits,
            paths,
            commands,
        }
    }

    /// These and `more`'s, in time order.
    pub(super) fn and(self, more: Journaled) -> Journaled {
        let mut edits: Vec<(Edit, Option<String>)> = self
            .edits
            .into_iter()
            .zip(self.paths)
            .chain(more.edits.into_iter().zip(more.paths))
            .collect();
        edits.sort_by_key(|(e, _)| e.origin.time_us);
        let mut commands = self.commands;
        commands.extend(more.commands);
        Journaled::new(edits, commands)
    }

    /// The files of the repository `session` edited, each once, in the order of its edits.
    pub(super) fn files_of(&self, session: &str) -> Vec<&str> {
        let mut files: Vec<&str> = Vec::new();
        for (edit, path) in self.edits.iter().zip(&self.paths) {
            if let (true, Some(path)) = (edit.origin.session == session, path.as_deref())
                && !files.contains(&path)
            {
                files.push(path);
            }
        }
        files
    }

    /// git's blame of `rel` at `rev` (`None`: the work tree), lines `range` or all, and whose
    /// each line is.
    pub(super) fn blame(
        &self,
        history: &mut GitHistory,
        rev: Option<&str>,
        rel: &str,
        range: Option<(usize, usize)>,
    ) -> anyhow::Result<(Vec<BlamedLine>, Vec<Option<&Origin>>)> {
        let lines = blamed(history, rev, rel, range)?;
        let credits = self.credit(&lines, history);
        Ok((lines, credits))
    }

    /// Whose each of `lines` is.
    fn credit(&self, lines: &[BlamedLine], history: &mut GitHistory) -> Vec<Option<&Origin>> {
        let paths: HashSet<&str> = lines.iter().map(|l| l.path.as_str()).collect();
        let in_repo: Vec<InRepo> = self
            .edits
            .iter()
            .zip(&self.paths)
            .filter_map(|(edit, path)| {
                let path = path.as_deref().filter(|p| paths.contains(p))?;
                Some(InRepo { path, edit })
            })
            .collect();
        attribute(lines, &in_repo, history)
    }
}

/// git's blame of `rel` at `rev` (`None`: the work tree), lines `range` or all.
fn blamed(
    history: &mut GitHistory,
    rev: Option<&str>,
    rel: &str,
    range: Option<(usize, usize)>,
) -> anyhow::Result<Vec<BlamedLine>> {
    let range = range.map(|(a, b)| format!("{a},{b}"));
    let mut git_args = vec!["blame", "--line-porcelain", "-M", "-C"];
    if let Some(range) = &range {
        git_args.extend(["-L", range]);
    }
    git_args.extend(rev);
    git_args.extend(["--", rel]);
    Ok(porcelain::parse(&history.repo().git(&git_args)?))
}

/// The edits and commands of session `session`, from its segments (in the order written).
pub(super) fn derive(session: &str, segments: &[PathBuf]) -> Derived {
    let mut deriver = Deriver::new(session);
    for segment in segments {
        let Ok(mut reader) = SegmentReader::open(segment) else {
            continue;
        };
        deriver.header(reader.header());
        while let Some(record) = reader.next_where(Deriver::wants) {
            deriver.record(&record);
        }
    }
    deriver.finish()
}

/// The commands that ran after the file's commit before `line`'s and no later than it.
fn may_have_written<'c>(
    line: &BlamedLine,
    commands: &[&'c Command],
    history: &mut GitHistory,
) -> Vec<&'c Command> {
    let commit = (!line.uncommitted()).then_some(line.commit.as_str());
    let after = history
        .before(commit, &line.path)
        .iter()
        .map(|(_, time)| *time)
        .max()
        .unwrap_or(i64::MIN);
    commands
        .iter()
        .filter(|c| {
            let t = c.origin.time_us.div_euclid(1_000_000);
            t >= after && (commit.is_none() || t <= line.commit_time)
        })
        .copied()
        .collect()
}

/// A line as JSON.
fn row(line: &BlamedLine, credit: Option<&Origin>, maybe: &[&Command]) -> Value {
    json!({
        "line": line.number,
        "text": line.text,
        "commit": (!line.uncommitted()).then_some(&line.commit),
        "author": line.author,
        "mail": line.mail,
        "author_time": crate::render::utc(line.author_time.saturating_mul(1_000_000)),
        "path": line.path,
        "agent": credit.map(origin),
        "commands": maybe
            .iter()
            .map(|c| {
                let mut o = origin(&c.origin);
                o["command"] = json!(c.command);
                o
            })
            .collect::<Vec<_>>(),
    })
}

/// Who wrote a line: the session, turn, tool call, time, agent, model and prompt's first line.
pub(super) fn origin(o: &Origin) -> Value {
    json!({
        "session": o.session,
        "turn": o.turn,
        "tool_call": o.tool_call,
        "time": crate::render::utc(o.time_us),
        "agent": o.agent,
        "model": o.model,
        "prompt": o.prompt,
    })
}

/// The text form: a line per line (commit, author, date, the session's mark, number, text),
/// then what each mark stands for.
fn text(
    out: &mut impl Write,
    lines: &[BlamedLine],
    credits: &[Option<&Origin>],
    maybe: &[Vec<&Command>],
) -> std::io::Result<()> {
    // Marks in order of first appearance: [1], [2]… for turns, ?1, ?2… for commands.
    let mut turns: BTreeMap<(String, u64), (usize, &Origin)> = BTreeMap::new();
    let mut runs: BTreeMap<(String, i64), (usize, &Command)> = BTreeMap::new();
    let author_width = lines
        .iter()
        .map(|l| l.author.chars().count())
        .max()
        .unwrap_or(0)
        .min(20);
    let number_width = lines.last().map_or(1, |l| l.number.to_string().len());
    for ((line, credit), maybe) in lines.iter().zip(credits).zip(maybe) {
        let mark = match (credit, maybe.first()) {
            (Some(o), _) => {
                let next = turns.len() + 1;
                let n = turns
                    .entry((o.session.clone(), o.turn))
                    .or_insert((next, o))
                    .0;
                format!("[{n}]")
            }
            (None, Some(_)) => {
                let marks: Vec<String> = maybe
                    .iter()
                    .map(|c| {
                        let next = runs.len() + 1;
                        let key = (c.origin.session.clone(), c.origin.time_us);
                        format!("?{}", runs.entry(key).or_insert((next, c)).0)
                    })
                    .collect();
                marks.join(",")
            }
            (None, None) => String::new(),
        };
        let commit = if line.uncommitted() {
            "00000000"
        } else {
            &line.commit[..8]
        };
        let author: String = line.author.chars().take(author_width).collect();
        let date = jiff::Timestamp::from_second(line.author_time)
            .map(|t| t.strftime("%Y-%m-%d").to_string())
            .unwrap_or_default();
        writeln!(
            out,
            "{commit} {author:<author_width$} {date} {mark:<5} {:>number_width$}│ {}",
            line.number, line.text
        )?;
    }
    let mut turns: Vec<_> = turns.into_values().collect();
    turns.sort_by_key(|(n, _)| *n);
    if !turns.is_empty() {
        writeln!(out)?;
    }
    for (n, o) in turns {
        let agent = o.agent.as_deref().unwrap_or("an agent");
        let model = o
            .model
            .as_deref()
            .map(|m| format!(" ({m})"))
            .unwrap_or_default();
        writeln!(
            out,
            "[{n}] session {} turn {}, {}, {agent}{model}: {}",
            o.session,
            o.turn,
            crate::render::utc(o.time_us),
            o.prompt
        )?;
    }
    let mut runs: Vec<_> = runs.into_values().collect();
    runs.sort_by_key(|(n, _)| *n);
    for (n, c) in runs {
        writeln!(
            out,
            "?{n} may have been written by a command of session {} turn {}, {}: {}",
            c.origin.session,
            c.origin.turn,
            crate::render::utc(c.origin.time_us),
            c.command
        )?;
    }
    Ok(())
}
