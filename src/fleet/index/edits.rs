//! What a teammate's `blame` needs of a session, as rows of the `edits` table: each edit of a
//! file its journal shows (`provenance::edits`, derived from the records as they are, old
//! journals included), and each command that may have changed files, with who asked for it
//! (session, turn, tool call, agent, model, the prompt's first line), when, and where: the
//! path as the session named it, and the repository it lies in as any clone of it names it
//! ([`crate::provenance::repo::Repo::identity`]) with the path relative to its root, so a
//! teammate whose clone lies elsewhere finds it. The lines an edit wrote and the texts it took
//! away are kept as their fingerprints, never as text.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::rows::TEXT_CHARS;
use crate::provenance::edits::{Command, Derived, Edit, How, Origin};
use crate::provenance::repo::Repo;

/// Most fingerprints a row keeps of the lines written (and, apart, of the texts taken away):
/// 8 192, 64 KiB (`super::bounds::MAX_CELL_BYTES`). An edit that wrote more is several rows
/// of the same origin, which the rules of `provenance::attribute` read as one.
pub const FINGERPRINTS: usize = 8192;

/// An edit of a file, or a command, of a session.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct EditRow {
    /// The session ID.
    pub session: String,
    /// Its prompt turn (0 before the first).
    pub turn: u32,
    /// The host that journaled it.
    pub host: String,
    /// When the proxy saw it (Unix microseconds).
    pub time_us: i64,
    /// The tool call that made it, when known.
    pub tool_call: Option<String>,
    /// The agent's `agentInfo.name`.
    pub agent: Option<String>,
    /// The model the session ran on, when known.
    pub model: Option<String>,
    /// The first line of the turn's prompt (as journaled: redacted).
    pub prompt: String,
    /// The file edited, or the directory the command ran in, absolute, as the session named it
    /// on its host.
    pub path: Option<String>,
    /// The repository it lies in: the first commit of its `HEAD`'s first-parent history, when
    /// its host found it in a repository that had one.
    pub repo: Option<String>,
    /// The path relative to that repository's root (`""`: the root).
    pub repo_path: Option<String>,
    /// How an edit reached the file: `diff` (a tool call's diff content: the agent wrote it)
    /// or `write` (`fs/write_text_file`: the client wrote it); `None` for a command.
    pub how: Option<String>,
    /// The command line, for a command (which may have changed any file).
    pub command: Option<String>,
    /// The fingerprints of the lines it wrote (`provenance::lines`).
    pub written: Vec<u64>,
    /// The fingerprints of the texts it took away.
    pub removed: Vec<u64>,
}

impl EditRow {
    /// How an edit reached the file (`None`: a command, or a value this build does not know).
    pub fn how(&self) -> Option<How> {
        match self.how.as_deref()? {
            "diff" => Some(How::Diff),
            "write" => Some(How::Write),
            _ => None,
        }
    }

    /// Who asked for it and when.
    pub fn origin(&self) -> Origin {
        Origin {
            session: self.session.clone(),
            turn: u64::from(self.turn),
            tool_call: self.tool_call.clone(),
            agent: self.agent.clone(),
            model: self.model.clone(),
            prompt: self.prompt.clone(),
            time_us: self.time_us,
        }
    }

    /// About how many bytes it holds.
    pub fn size(&self) -> usize {
        let texts = [
            &self.tool_call,
            &self.agent,
            &self.model,
            &self.path,
            &self.repo,
            &self.repo_path,
            &self.how,
            &self.command,
        ];
        let texts: usize = texts
            .iter()
            .filter_map(|t| t.as_ref())
            .map(String::len)
            .sum();
        self.session.len()
            + self.prompt.len()
            + texts
            + 8 * (self.written.len() + self.removed.len())
            + 64
    }
}

/// Where paths lie, as their host sees them: each directory's repository and that
/// repository's identity, asked of git once each.
#[derive(Debug, Default)]
pub struct Repos {
    /// A directory → the repository it lies in (an index into `repos`), or none.
    dirs: HashMap<PathBuf, Option<usize>>,
    /// Each repository met, with its identity.
    repos: Vec<(Repo, Option<String>)>,
}

impl Repos {
    /// The identity of the repository `dir` lies in and `path` relative to its root, when
    /// `dir` lies in one that has a commit.
    fn place(&mut self, dir: &Path, path: &Path) -> Option<(String, String)> {
        let at = match self.dirs.get(dir) {
            Some(at) => *at,
            None => {
                let at = Repo::around(dir).map(|repo| {
                    match self.repos.iter().position(|(r, _)| r.root() == repo.root()) {
                        Some(i) => i,
                        None => {
                            let identity = repo.identity();
                            self.repos.push((repo, identity));
                            self.repos.len() - 1
                        }
                    }
                });
                self.dirs.insert(dir.to_path_buf(), at);
                at
            }
        };
        let (repo, identity) = &self.repos[at?];
        let relative = match repo.holds(path) {
            true => repo.relative(path).unwrap_or_default(),
            false => return None,
        };
        Some((identity.clone()?, relative))
    }

    /// What `derived` (of a session journaled by `host`) gives as rows.
    pub fn rows(&mut self, derived: Derived, host: &str) -> Vec<EditRow> {
        let mut rows = Vec::new();
        for Edit {
            origin,
            path,
            change,
            how,
        } in derived.edits
        {
            let dir = path.parent().unwrap_or(Path::new("/"));
            let (repo, repo_path) = self.place(dir, &path).unzip();
            let mut base = row(&origin, host, Some(&path), repo, repo_path, None);
            base.how = Some(
                match how {
                    How::Diff => "diff",
                    How::Write => "write",
                }
                .to_string(),
            );
            let (written, removed) = (change.written, change.removed);
            let pieces = written
                .len()
                .max(removed.len())
                .div_ceil(FINGERPRINTS)
                .max(1);
            for i in 0..pieces {
                let part = |all: &[u64]| -> Vec<u64> {
                    all.iter()
                        .skip(i * FINGERPRINTS)
                        .take(FINGERPRINTS)
                        .copied()
                        .collect()
                };
                rows.push(EditRow {
                    written: part(&written),
                    removed: part(&removed),
                    ..base.clone()
                });
            }
        }
        for Command {
            origin,
            command,
            cwd,
        } in derived.commands
        {
            let (repo, repo_path) = cwd.as_deref().and_then(|d| self.place(d, d)).unzip();
            let command = Some(bounded(&command));
            rows.push(row(&origin, host, cwd.as_deref(), repo, repo_path, command));
        }
        rows
    }
}

fn row(
    origin: &Origin,
    host: &str,
    path: Option<&Path>,
    repo: Option<String>,
    repo_path: Option<String>,
    command: Option<String>,
) -> EditRow {
    let text = |t: &Option<String>| t.as_deref().map(bounded);
    EditRow {
        session: origin.session.clone(),
        turn: u32::try_from(origin.turn).unwrap_or(u32::MAX),
        host: host.to_string(),
        time_us: origin.time_us,
        tool_call: text(&origin.tool_call),
        agent: text(&origin.agent),
        model: text(&origin.model),
        prompt: bounded(&origin.prompt),
        path: path.map(|p| bounded(&p.to_string_lossy())),
        repo,
        repo_path: repo_path.map(|p| bounded(&p)),
        how: None,
        command,
        written: Vec::new(),
        removed: Vec::new(),
    }
}

/// `text` cut to [`TEXT_CHARS`] characters.
fn bounded(text: &str) -> String {
    text.chars().take(TEXT_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provenance::lines::Change;

    #[test]
    fn an_edit_of_many_lines_is_rows_of_the_same_origin_and_a_path_outside_a_repository_has_none() {
        let dir = tempfile::tempdir().unwrap();
        let edit = Edit {
            origin: Origin {
                session: "s".into(),
                turn: 2,
                prompt: "p".into(),
                time_us: 7,
                ..Origin::default()
            },
            path: dir.path().join("f"),
            change: Change {
                written: (0..FINGERPRINTS as u64 + 1).collect(),
                removed: vec![9],
            },
            how: How::Diff,
        };
        let derived = Derived {
            edits: vec![edit],
            commands: vec![Command {
                origin: Origin::default(),
                command: "make".into(),
                cwd: Some(dir.path().to_path_buf()),
            }],
        };
        let rows = Repos::default().rows(derived, "h");
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].written.len(), FINGERPRINTS);
        assert_eq!(rows[0].removed, [9]);
        assert_eq!(rows[1].written, [FINGERPRINTS as u64]);
        assert!(rows[1].removed.is_empty());
        assert_eq!((rows[1].turn, rows[1].host.as_str()), (2, "h"));
        assert_eq!(rows[0].repo, None);
        assert_eq!(rows[0].how(), Some(How::Diff));
        assert_eq!(rows[2].command.as_deref(), Some("make"));
    }
}
