//! Whose a committed line is: the agent's edit that wrote it, or the person git names.
//!
//! A line is an edit's when all of these hold:
//! - its text is a line the edit wrote in that file (the file's path in the commit git's
//!   blame names, so a file renamed since, or a block moved or copied from another file that
//!   git's `-M -C` follows, is looked up where the line was written);
//! - the edit was made no later than that commit was committed (seconds: a squash or fixup
//!   keeps its first commit's author time), or the line is not committed yet;
//! - no later edit of a session took that text out of the file before the commit (the text
//!   typed again by a person after the agent deleted it is the person's);
//! - no earlier commit of the file, committed since the edit, already held the text (it was
//!   committed, then removed or changed, then brought back: by whoever git names);
//! - the edit has not already given away every line of that text it wrote (a line written
//!   once is credited once);
//! - a line with little text (`}`, a blank line: fewer than four letters or digits) only next
//!   to a line credited to the same session: such lines are everybody's.
//!
//! So a person's change of the line after the agent, a formatter's (the text differs), and a
//! line the agent's text merely resembles are the person's; git's blame itself decides moves.

use std::collections::HashMap;

use super::edits::{Edit, Origin};
use super::lines::fingerprint;

/// One line of `git blame --porcelain`: git's commit and author for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlamedLine {
    /// Its number in the file as blamed, from 1.
    pub number: usize,
    /// Its text.
    pub text: String,
    /// The commit git names (40 hex; zeros when not committed yet).
    pub commit: String,
    /// The commit's author (`Not Committed Yet` for a line not committed).
    pub author: String,
    /// The author's e-mail, without `<>`.
    pub mail: String,
    /// When the commit was authored, Unix seconds.
    pub author_time: i64,
    /// When it was committed, Unix seconds: an amend, rebase, squash or cherry-pick keeps the
    /// author's time and commits again, so the rules go by this one.
    pub commit_time: i64,
    /// The file's path in that commit, relative to the repository.
    pub path: String,
}

impl BlamedLine {
    /// The line is in the work tree (or the index) only.
    pub fn uncommitted(&self) -> bool {
        self.commit.bytes().all(|b| b == b'0')
    }
}

/// What the repository's history holds, asked by the rules.
pub trait History {
    /// Whether a commit before `commit` (its ancestors that changed `path`; `None`: the work
    /// tree, so `HEAD` and its ancestors) committed at `since` (Unix seconds) or later held a
    /// line with fingerprint `print` in `path` (commit times).
    fn held_before(&mut self, commit: Option<&str>, path: &str, print: u64, since: i64) -> bool;
}

/// An edit with its file's path relative to the repository.
#[derive(Clone, Copy, Debug)]
pub struct InRepo<'a> {
    /// The path, relative to the repository's root.
    pub path: &'a str,
    /// The edit.
    pub edit: &'a Edit,
}

/// For each line, the origin of the edit it is credited to, or `None`: git's author's.
/// `edits` in time order.
pub fn attribute<'a>(
    lines: &[BlamedLine],
    edits: &[InRepo<'a>],
    history: &mut dyn History,
) -> Vec<Option<&'a Origin>> {
    let mut credit: Vec<Option<usize>> = vec![None; lines.len()];
    // How many lines of each text each edit has credited.
    let mut used: HashMap<(usize, u64), usize> = HashMap::new();
    let mut rules = Rules {
        edits,
        history,
        used: &mut used,
    };
    for (i, line) in lines.iter().enumerate() {
        if !little(&line.text) {
            credit[i] = rules.credit(line);
        }
    }
    // Lines with little text, next to their session's: until nothing changes.
    loop {
        let mut changed = false;
        for (i, line) in lines.iter().enumerate() {
            if credit[i].is_some() || !little(&line.text) {
                continue;
            }
            let neighbours: Vec<usize> = [i.checked_sub(1), Some(i + 1)]
                .into_iter()
                .flatten()
                .filter_map(|n| credit.get(n).copied().flatten())
                .collect();
            if neighbours.is_empty() {
                continue;
            }
            if let Some(e) = rules.credit(line) {
                let session = &edits[e].edit.origin.session;
                if neighbours
                    .iter()
                    .any(|n| &edits[*n].edit.origin.session == session)
                {
                    credit[i] = Some(e);
                    changed = true;
                } else {
                    *rules
                        .used
                        .get_mut(&(e, fingerprint(&line.text)))
                        .expect("counted") -= 1;
                }
            }
        }
        if !changed {
            break;
        }
    }
    credit
        .into_iter()
        .map(|c| c.map(|e| &edits[e].edit.origin))
        .collect()
}

/// A line with fewer than four letters or digits.
fn little(text: &str) -> bool {
    text.chars().filter(|c| c.is_alphanumeric()).count() < 4
}

struct Rules<'e, 'a, 'h> {
    edits: &'e [InRepo<'a>],
    history: &'h mut dyn History,
    used: &'e mut HashMap<(usize, u64), usize>,
}

impl Rules<'_, '_, '_> {
    /// The edit `line` is credited to (counted as used), if any.
    fn credit(&mut self, line: &BlamedLine) -> Option<usize> {
        let print = fingerprint(&line.text);
        let committed = (!line.uncommitted()).then_some(line.commit_time);
        let commit = (!line.uncommitted()).then_some(line.commit.as_str());
        let before = |time_us: i64| committed.is_none_or(|t| time_us.div_euclid(1_000_000) <= t);
        // The latest write first.
        for (e, candidate) in self.edits.iter().enumerate().rev() {
            let edit = candidate.edit;
            if candidate.path != line.path || !before(edit.origin.time_us) {
                continue;
            }
            let wrote = edit.change.written.iter().filter(|w| **w == print).count();
            if wrote == 0 {
                continue;
            }
            // Taken out of the file since, before the commit.
            let removed = self.edits[e + 1..].iter().any(|later| {
                later.path == line.path
                    && later.edit.origin.time_us > edit.origin.time_us
                    && before(later.edit.origin.time_us)
                    && later.edit.change.removed.contains(&print)
            });
            if removed {
                return None;
            }
            let used = self.used.entry((e, print)).or_default();
            if *used >= wrote {
                continue;
            }
            let since = edit.origin.time_us.div_euclid(1_000_000);
            if self.history.held_before(commit, &line.path, print, since) {
                return None;
            }
            *self.used.get_mut(&(e, print)).expect("counted") += 1;
            return Some(e);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::provenance::edits::How;
    use crate::provenance::lines::change;

    /// The repository's history in the tests: (commit, path, author time, its lines), each
    /// commit's ancestors the commits before it.
    struct Commits(Vec<(&'static str, &'static str, i64, Vec<&'static str>)>);

    impl History for Commits {
        fn held_before(
            &mut self,
            commit: Option<&str>,
            path: &str,
            print: u64,
            since: i64,
        ) -> bool {
            let end = match commit {
                Some(c) => self.0.iter().position(|(id, ..)| *id == c).unwrap_or(0),
                None => self.0.len(),
            };
            self.0[..end].iter().any(|(_, p, t, lines)| {
                *p == path && *t >= since && lines.iter().any(|l| fingerprint(l) == print)
            })
        }
    }

    fn edit(session: &str, second: i64, old: Option<&str>, new: &str) -> Edit {
        Edit {
            origin: Origin {
                session: session.into(),
                turn: 1,
                time_us: second * 1_000_000 + 500_000,
                ..Origin::default()
            },
            path: PathBuf::from("/r/f"),
            change: change(old, new),
            how: How::Write,
        }
    }

    fn line(number: usize, text: &str, commit: &str, time: i64) -> BlamedLine {
        BlamedLine {
            number,
            text: text.into(),
            commit: commit.into(),
            author: "Ann".into(),
            mail: "ann@x".into(),
            author_time: time,
            commit_time: time,
            path: "f".into(),
        }
    }

    /// Whose each line is: a session's ID or `-` for the person.
    fn whose(lines: &[BlamedLine], edits: &[Edit], history: Commits) -> Vec<String> {
        let in_repo: Vec<InRepo> = edits
            .iter()
            .map(|edit| InRepo { path: "f", edit })
            .collect();
        let mut history = history;
        attribute(lines, &in_repo, &mut history)
            .into_iter()
            .map(|o| o.map_or("-".to_string(), |o| o.session.clone()))
            .collect()
    }

    const NOW: &str = "0000000000000000000000000000000000000000";

    #[test]
    fn lines_the_agent_wrote_are_its_until_a_person_changes_them() {
        let edits = [edit(
            "s1",
            100,
            Some("keep\n"),
            "keep\nfn agent_one()\nfn agent_two()\n",
        )];
        let lines = [
            line(1, "keep", "c0", 50),
            line(2, "fn agent_one()", "c1", 110),
            line(3, "fn agent_two() // changed by Ann", "c1", 110),
        ];
        assert_eq!(whose(&lines, &edits, Commits(vec![])), ["-", "s1", "-"]);
    }

    #[test]
    fn a_line_committed_before_the_edit_is_the_committers() {
        let edits = [edit("s1", 100, None, "fn same_text()\n")];
        let lines = [line(1, "fn same_text()", "c0", 99)];
        assert_eq!(whose(&lines, &edits, Commits(vec![])), ["-"]);
        // In the same second it counts (git keeps seconds).
        let lines = [line(1, "fn same_text()", "c0", 100)];
        assert_eq!(whose(&lines, &edits, Commits(vec![])), ["s1"]);
    }

    #[test]
    fn a_squash_keeping_an_older_author_time_keeps_the_later_edits_lines() {
        let edits = [edit("s1", 200, None, "fn fixed_up_later()\n")];
        let mut squashed = line(1, "fn fixed_up_later()", "c1", 100);
        squashed.commit_time = 300;
        assert_eq!(whose(&[squashed], &edits, Commits(vec![])), ["s1"]);
    }

    #[test]
    fn text_typed_again_after_the_agent_deleted_it_is_the_persons() {
        let edits = [
            edit("s1", 100, None, "fn doomed()\nfn kept()\n"),
            edit("s1", 200, Some("fn doomed()\nfn kept()\n"), "fn kept()\n"),
        ];
        let lines = [
            line(1, "fn doomed()", "c2", 300),
            line(2, "fn kept()", "c1", 150),
        ];
        assert_eq!(whose(&lines, &edits, Commits(vec![])), ["-", "s1"]);
        // Not committed yet: the same.
        let lines = [line(1, "fn doomed()", NOW, 0)];
        assert_eq!(whose(&lines, &edits, Commits(vec![])), ["-"]);
    }

    #[test]
    fn text_committed_then_taken_out_and_brought_back_by_a_person_is_theirs() {
        let edits = [edit("s1", 100, None, "fn back()\n")];
        let history = Commits(vec![
            ("c1", "f", 110, vec!["fn back()"]),
            ("c2", "f", 120, vec![]),
            ("c3", "f", 130, vec!["fn back()"]),
        ]);
        assert_eq!(
            whose(&[line(1, "fn back()", "c3", 130)], &edits, history),
            ["-"]
        );
        let history = Commits(vec![("c1", "f", 110, vec!["fn back()"])]);
        assert_eq!(
            whose(&[line(1, "fn back()", "c1", 110)], &edits, history),
            ["s1"]
        );
    }

    #[test]
    fn a_line_written_once_is_credited_once_and_little_lines_only_beside_their_session() {
        let edits = [edit("s1", 100, Some(""), "fn alpha() {\n}\n")];
        let lines = [
            line(1, "fn alpha() {", "c1", 110),
            line(2, "}", "c1", 110),
            line(3, "fn alpha() {", "c2", 120),
            line(4, "}", "c2", 120),
            line(5, "", "c2", 120),
        ];
        assert_eq!(
            whose(&lines, &edits, Commits(vec![])),
            ["s1", "s1", "-", "-", "-"]
        );
        // A brace alone, away from the session's lines, is nobody's in particular.
        let lines = [line(1, "let x = 1;", "c2", 120), line(2, "}", "c1", 110)];
        assert_eq!(whose(&lines, &edits, Commits(vec![])), ["-", "-"]);
    }

    #[test]
    fn the_latest_writer_of_a_line_gets_it() {
        let edits = [
            edit("s1", 100, None, "fn shared()\n"),
            edit("s2", 200, None, "fn shared()\n"),
        ];
        assert_eq!(
            whose(
                &[line(1, "fn shared()", "c1", 300)],
                &edits,
                Commits(vec![])
            ),
            ["s2"]
        );
        assert_eq!(
            whose(
                &[line(1, "fn shared()", "c1", 150)],
                &edits,
                Commits(vec![])
            ),
            ["s1"]
        );
    }

    #[test]
    fn an_edit_of_another_path_credits_nothing() {
        let edits = [edit("s1", 100, None, "fn a()\n")];
        let mut other = line(1, "fn a()", "c1", 110);
        other.path = "g".into();
        assert_eq!(whose(&[other], &edits, Commits(vec![])), ["-"]);
    }
}
