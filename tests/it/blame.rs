//! `acp-journal blame` through the binary, in real git repositories, on the journals of real
//! proxy runs: our edit agent (`tests/agents/edit_agent.py`) writes through
//! `fs/write_text_file` (answered by this test's client, which writes the file), edits files
//! itself and reports `diff` content, and runs commands. Each case states whose every line is
//! and compares them all.

use std::path::{Path, PathBuf};
use std::process::Command;

use acp_journal::hex;
use serde_json::{Value, json};

use crate::util::{TestClient, bin, proxied_with, python, reply_to, root, run_cli_in};

/// A git repository with a journal directory beside it.
pub struct Repo {
    dir: tempfile::TempDir,
    pub journals: tempfile::TempDir,
}

/// The person committing in the tests.
pub const PERSON: &str = "Ann Person";

impl Repo {
    pub fn new() -> Repo {
        let repo = Repo {
            dir: tempfile::tempdir().unwrap(),
            journals: tempfile::tempdir().unwrap(),
        };
        repo.git(&["init", "-q", "-b", "main"]);
        repo
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `program` in the work tree, as the person: git sees nothing of the user's configuration
    /// (a machine without a git identity, as CI's, runs the same).
    fn as_the_person(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new(program);
        command
            .current_dir(self.path())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", PERSON)
            .env("GIT_AUTHOR_EMAIL", "ann@example.com")
            .env("GIT_COMMITTER_NAME", PERSON)
            .env("GIT_COMMITTER_EMAIL", "ann@example.com")
            .env("GIT_EDITOR", "true");
        command
    }

    /// git, as the person.
    pub fn git(&self, args: &[&str]) -> String {
        let out = self
            .as_the_person("git")
            .args(["-c", "commit.gpgsign=false"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    pub fn write(&self, file: &str, lines: &[&str]) {
        let path = self.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            path,
            lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
        )
        .unwrap();
    }

    pub fn commit(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
    }

    /// `acp-journal ARGS` in the work tree, as the person, on the test's journals: its stdout.
    fn cli(&self, args: &[&str]) -> String {
        let out = self
            .as_the_person(bin())
            .arg("--journal-dir")
            .arg(self.journals.path())
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// A proxied session of the edit agent in `cwd`.
    pub fn session(&self, cwd: &Path) -> Session {
        self.session_with(cwd, &[])
    }

    /// The same, with proxy options.
    fn session_with(&self, cwd: &Path, options: &[&str]) -> Session {
        let mut client =
            TestClient::spawn(&proxied_with(self.journals.path(), options, &edit_agent()));
        client.initialize();
        let id = client.new_session(cwd.to_str().unwrap());
        Session {
            client,
            id,
            next: 100,
        }
    }

    /// `blame FILE --json` run in the work tree: an object per line.
    pub fn blame_json(&self, file: &str) -> Vec<Value> {
        let out = self.cli(&["blame", file, "--json"]);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
    }

    /// `blame FILE --json`: (text, whose) per line, whose being git's author or
    /// `<session>:<turn>`, with each agent line's prompt, agent and model checked.
    fn blame(&self, file: &str, sessions: &[(&str, &str)]) -> Vec<(String, String)> {
        self.blame_json(file)
            .iter()
            .enumerate()
            .map(|(i, row)| {
                assert_eq!(row["line"], i + 1, "{row}");
                let text = row["text"].as_str().unwrap().to_string();
                let agent = &row["agent"];
                let whose = if agent.is_null() {
                    row["author"].as_str().unwrap().to_string()
                } else {
                    assert_eq!(agent["agent"], "edit-agent", "{row}");
                    assert_eq!(agent["model"], "edit-model-1", "{row}");
                    assert!(
                        agent["prompt"].as_str().unwrap().starts_with("Turn "),
                        "{row}"
                    );
                    let name = sessions
                        .iter()
                        .find(|(_, id)| agent["session"] == *id)
                        .map_or("an unknown session", |(name, _)| name);
                    format!("{name}:{}", agent["turn"])
                };
                (text, whose)
            })
            .collect()
    }
}

/// Our edit agent's command line.
pub fn edit_agent() -> Vec<String> {
    vec![
        python(),
        root()
            .join("tests/agents/edit_agent.py")
            .display()
            .to_string(),
    ]
}

/// A session of the edit agent through the proxy; this client writes and reads files for it.
pub struct Session {
    client: TestClient,
    id: String,
    next: u64,
}

impl Session {
    /// One turn: `Turn N` then the directives.
    pub fn turn(&mut self, number: u64, directives: &str) {
        let id = self.next;
        self.next += 1;
        let text = format!("Turn {number} of the test\n{directives}");
        let answer = prompt_writing_files(&mut self.client, id, &self.id, &text);
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    }

    /// The session ends (the proxy and agent exit); its ID.
    pub fn end(self) -> String {
        let (code, _) = self.client.finish();
        assert_eq!(code, 0);
        self.id
    }
}

/// A prompt (request `id`) and its answer, this client reading and writing the files the agent
/// asks it to (`fs/read_text_file`, `fs/write_text_file`: for real, on disk) and answering its
/// other requests as the test client does (a permission: allowed once).
pub fn prompt_writing_files(client: &mut TestClient, id: u64, session: &str, text: &str) -> Value {
    client.send(
        &json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}}),
    );
    loop {
        let Some(msg) = client.recv().expect("the turn's end").json.clone() else {
            continue;
        };
        if msg["id"] == id && msg.get("method").is_none() {
            return msg;
        }
        let params = &msg["params"];
        let path = PathBuf::from(params["path"].as_str().unwrap_or_default());
        let mut reply = match msg["method"].as_str() {
            Some("fs/read_text_file") => match std::fs::read_to_string(&path) {
                Ok(content) => json!({"result": {"content": content}}),
                Err(e) => json!({"error": {"code": -32002, "message": e.to_string()}}),
            },
            Some("fs/write_text_file") => {
                std::fs::write(&path, params["content"].as_str().unwrap()).unwrap();
                json!({"result": null})
            }
            _ => {
                if let Some(reply) = reply_to(&msg) {
                    client.send(&reply);
                }
                continue;
            }
        };
        reply["jsonrpc"] = json!("2.0");
        reply["id"] = msg["id"].clone();
        client.send(&reply);
    }
}

fn expect(lines: &[(&str, &str)]) -> Vec<(String, String)> {
    lines
        .iter()
        .map(|(t, w)| (t.to_string(), w.to_string()))
        .collect()
}

#[test]
fn blame_gives_the_agents_lines_to_its_turns_and_the_persons_changes_to_the_person() {
    let repo = Repo::new();
    repo.write(
        "src/lib.rs",
        &["// a library", "pub fn base() -> u32 { 1 }", "// end"],
    );
    repo.commit("base");
    let mut s = repo.session(repo.path());
    // Turn 1 writes through the client (the whole file); turn 2 edits a part itself (a diff).
    s.turn(
        1,
        "write src/lib.rs
// a library
pub fn greet(name: &str) -> String {
    format!(\"hello {name}\")
}
pub fn shout(name: &str) -> String { name.to_uppercase() }
pub fn whisper(name: &str) -> String { name.to_lowercase() }
pub fn base() -> u32 { 1 }
// end
.",
    );
    s.turn(
        2,
        "replace src/lib.rs
pub fn whisper(name: &str) -> String { name.to_lowercase() }
---
pub fn whisper(name: &str) -> String { format!(\"({})\", name.to_lowercase()) }
.",
    );
    let s = s.end();
    // The person changes one of the agent's lines, reformats another (a formatter's spacing)
    // and adds one, then commits.
    repo.write(
        "src/lib.rs",
        &[
            "// a library",
            "pub fn greet(name: &str) -> String {",
            "    format!(\"hello {name}\")",
            "}",
            "pub fn shout(name: &str) -> String { name.to_uppercase() + \"!\" }",
            "pub fn whisper(name: &str) -> String { format!(\"({})\", name.to_lowercase()) }",
            "pub fn base() -> u32 {  1 }",
            "pub fn added() {}",
            "// end",
        ],
    );
    repo.commit("greetings");
    // And another line after the commit, not committed.
    let mut text = std::fs::read_to_string(repo.path().join("src/lib.rs")).unwrap();
    text.push_str("// uncommitted note by Ann\n");
    std::fs::write(repo.path().join("src/lib.rs"), text).unwrap();
    let got = repo.blame("src/lib.rs", &[("s", &s)]);
    assert_eq!(
        got,
        expect(&[
            ("// a library", PERSON),
            ("pub fn greet(name: &str) -> String {", "s:1"),
            ("    format!(\"hello {name}\")", "s:1"),
            ("}", "s:1"),
            (
                "pub fn shout(name: &str) -> String { name.to_uppercase() + \"!\" }",
                PERSON
            ),
            (
                "pub fn whisper(name: &str) -> String { format!(\"({})\", name.to_lowercase()) }",
                "s:2"
            ),
            ("pub fn base() -> u32 {  1 }", PERSON),
            ("pub fn added() {}", PERSON),
            ("// end", PERSON),
            ("// uncommitted note by Ann", "Not Committed Yet"),
        ])
    );
}

#[test]
fn a_moved_block_and_a_renamed_file_keep_the_agents_lines() {
    let repo = Repo::new();
    repo.write("a.py", &["import os", "", "def main():", "    pass"]);
    repo.commit("base");
    let mut s = repo.session(repo.path());
    s.turn(
        1,
        "replace a.py
import os
---
import os

def helper_written_by_the_agent(first_argument, second_argument):
    combined_value = first_argument + second_argument
    return combined_value * 2
.",
    );
    let s = s.end();
    repo.commit("helper");
    // The person moves the helper below main and renames the file, in one commit.
    repo.git(&["mv", "a.py", "b.py"]);
    repo.write(
        "b.py",
        &[
            "import os",
            "",
            "def main():",
            "    pass",
            "",
            "def helper_written_by_the_agent(first_argument, second_argument):",
            "    combined_value = first_argument + second_argument",
            "    return combined_value * 2",
        ],
    );
    repo.commit("move and rename");
    assert_eq!(
        repo.blame("b.py", &[("s", &s)]),
        expect(&[
            ("import os", PERSON),
            ("", PERSON),
            ("def main():", PERSON),
            ("    pass", PERSON),
            ("", PERSON),
            (
                "def helper_written_by_the_agent(first_argument, second_argument):",
                "s:1"
            ),
            (
                "    combined_value = first_argument + second_argument",
                "s:1"
            ),
            ("    return combined_value * 2", "s:1"),
        ])
    );
}

#[test]
fn text_the_agent_deleted_or_a_person_took_out_and_typed_again_is_the_persons() {
    let repo = Repo::new();
    repo.write("notes.txt", &["title"]);
    repo.commit("base");
    let mut s = repo.session(repo.path());
    s.turn(
        1,
        "write notes.txt
title
the agent's first remark
the agent's second remark
the agent's third remark
.",
    );
    repo.commit("remarks");
    // The agent deletes its first remark; the person later takes out the third, commits,
    // and types both again.
    s.turn(
        2,
        "write notes.txt
title
the agent's second remark
the agent's third remark
.",
    );
    let s = s.end();
    repo.commit("one remark less");
    repo.write("notes.txt", &["title", "the agent's second remark"]);
    repo.commit("third out");
    repo.write(
        "notes.txt",
        &[
            "title",
            "the agent's first remark",
            "the agent's second remark",
            "the agent's third remark",
        ],
    );
    repo.commit("typed again");
    assert_eq!(
        repo.blame("notes.txt", &[("s", &s)]),
        expect(&[
            ("title", PERSON),
            ("the agent's first remark", PERSON),
            ("the agent's second remark", "s:1"),
            ("the agent's third remark", PERSON),
        ])
    );
}

#[test]
fn two_sessions_editing_one_file_each_get_their_lines_committed_or_not() {
    let repo = Repo::new();
    repo.write("list.md", &["# list"]);
    repo.commit("base");
    let mut one = repo.session(repo.path());
    one.turn(1, "write list.md\n# list\n- an item from session one\n.");
    let one = one.end();
    repo.commit("one");
    let mut two = repo.session(repo.path());
    two.turn(
        1,
        "replace list.md\n- an item from session one\n---\n- an item from session one\n- an item from session two\n.",
    );
    two.turn(
        2,
        "replace list.md\n- an item from session two\n---\n- an item from session two\n- not committed, from session two\n.",
    );
    let two = two.end();
    assert_eq!(
        repo.blame("list.md", &[("one", &one), ("two", &two)]),
        expect(&[
            ("# list", PERSON),
            ("- an item from session one", "one:1"),
            ("- an item from session two", "two:1"),
            ("- not committed, from session two", "two:2"),
        ])
    );
    // Committed: each commit's sessions and turns, with the lines they wrote there.
    repo.commit("two");
    let behind = |rev: &str| -> Vec<(String, u64, Value)> {
        let rows: Vec<Value> =
            serde_json::from_str(&repo.cli(&["list", "--commit", rev, "--json"])).unwrap();
        rows.iter()
            .map(|r| {
                assert!(r["prompt"].as_str().unwrap().starts_with("Turn "), "{r}");
                let name = if r["session"] == one.as_str() {
                    "one"
                } else {
                    "two"
                };
                (
                    name.to_string(),
                    r["turn"].as_u64().unwrap(),
                    r["lines"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(
        behind("HEAD"),
        [
            ("two".to_string(), 1, json!({"list.md": "3"})),
            ("two".to_string(), 2, json!({"list.md": "4"})),
        ]
    );
    assert_eq!(
        behind("HEAD~1"),
        [("one".to_string(), 1, json!({"list.md": "2"}))]
    );
    assert_eq!(behind("HEAD~2"), []);
    // And back: each session's commits, with its lines.
    let short = |rev: &str| repo.git(&["rev-parse", "--short", rev]).trim().to_string();
    assert_eq!(
        repo.cli(&["show", &one, "--commits"]),
        format!("{} one  list.md:2\n", short("HEAD~1"))
    );
    assert_eq!(
        repo.cli(&["show", &two, "--commits"]),
        format!("{} two  list.md:3-4\n", short("HEAD"))
    );
    let text = repo.cli(&["list", "--commit", "HEAD"]);
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(
        text.starts_with(&format!(
            "{two} turn 1  edit-agent  list.md:3  Turn 1 of the test\n"
        )),
        "{text}"
    );
}

#[test]
fn a_session_in_a_symlinked_repository_is_found_and_a_file_outside_it_is_not() {
    let repo = Repo::new();
    repo.write("main.go", &["package main"]);
    repo.commit("base");
    let links = tempfile::tempdir().unwrap();
    let link = links.path().join("checkout");
    std::os::unix::fs::symlink(repo.path(), &link).unwrap();
    let outside = links.path().join("elsewhere.go");
    let mut s = repo.session(&link);
    s.turn(
        1,
        &format!(
            "write main.go\npackage main\nfunc fromTheLinkedCheckout() {{}}\n.\nwrite {}\nfunc writtenOutsideTheRepository() {{}}\n.",
            outside.display()
        ),
    );
    let s = s.end();
    // The person writes the outside file's line into the repository.
    repo.write(
        "main.go",
        &[
            "package main",
            "func fromTheLinkedCheckout() {}",
            "func writtenOutsideTheRepository() {}",
        ],
    );
    repo.commit("both");
    assert_eq!(
        repo.blame("main.go", &[("s", &s)]),
        expect(&[
            ("package main", PERSON),
            ("func fromTheLinkedCheckout() {}", "s:1"),
            ("func writtenOutsideTheRepository() {}", PERSON),
        ])
    );
}

#[test]
fn amend_rebase_squash_and_cherry_pick_keep_the_agents_lines() {
    let repo = Repo::new();
    repo.write("a.txt", &["base of a"]);
    repo.write("b.txt", &["base of b"]);
    repo.commit("base");
    let mut s = repo.session(repo.path());
    s.turn(1, "write a.txt\nbase of a\nthe agent's line in a\n.");
    repo.commit("a");
    s.turn(2, "write b.txt\nbase of b\nthe agent's line in b\n.");
    let s = s.end();
    repo.commit("b");
    let whose = |repo: &Repo| {
        [
            repo.blame("a.txt", &[("s", &s)]),
            repo.blame("b.txt", &[("s", &s)]),
        ]
        .concat()
    };
    let agents = expect(&[
        ("base of a", PERSON),
        ("the agent's line in a", "s:1"),
        ("base of b", PERSON),
        ("the agent's line in b", "s:2"),
    ]);
    repo.git(&["commit", "-q", "--amend", "-m", "b, amended"]);
    assert_eq!(whose(&repo), agents, "amended");
    // Reordered: b before a.
    let base = repo.git(&["rev-list", "--max-parents=0", "HEAD"]);
    let base = base.trim();
    repo.git(&["branch", "-q", "before"]);
    let a = repo.git(&["rev-parse", "HEAD~1"]);
    repo.git(&["reset", "-q", "--hard", base]);
    repo.git(&["cherry-pick", "before"]);
    repo.git(&["cherry-pick", a.trim()]);
    assert_eq!(whose(&repo), agents, "reordered by cherry-picks");
    // Squashed into one commit.
    repo.git(&["reset", "-q", "--soft", base]);
    repo.git(&["commit", "-q", "-m", "squashed"]);
    assert_eq!(whose(&repo), agents, "squashed");
    // Rebased onto a person's new commit.
    repo.git(&["checkout", "-q", "-b", "other", base]);
    repo.write("c.txt", &["the person's file"]);
    repo.commit("c");
    repo.git(&["checkout", "-q", "main"]);
    repo.git(&["rebase", "-q", "other"]);
    assert_eq!(whose(&repo), agents, "rebased");
}

#[test]
fn a_line_a_command_may_have_written_is_the_persons_and_names_the_command() {
    let repo = Repo::new();
    repo.write("gen.txt", &["header"]);
    repo.commit("base");
    // git keeps seconds: the base commit in the same second as the command could be after it.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let mut s = repo.session(repo.path());
    s.turn(1, "run printf 'generated by a command\\n' >> gen.txt");
    let s = s.end();
    repo.commit("generated");
    let out = repo.cli(&["blame", "gen.txt", "--json"]);
    let rows: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(rows.len(), 2, "{out}");
    assert!(rows.iter().all(|r| r["agent"].is_null()), "{out}");
    assert_eq!(rows[0]["commands"], json!([]), "{out}");
    let commands = rows[1]["commands"].as_array().unwrap();
    assert_eq!(commands.len(), 1, "{out}");
    assert_eq!(commands[0]["session"], s.as_str());
    assert_eq!(commands[0]["turn"], 1);
    assert_eq!(
        commands[0]["command"],
        "printf 'generated by a command\\n' >> gen.txt"
    );
    // The text form marks it and says what the mark stands for.
    let text = repo.cli(&["blame", "gen.txt", "-L", "2,2"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].contains(" ?1 ") && lines[0].ends_with("2│ generated by a command"),
        "{text}"
    );
    assert!(
        lines[1].starts_with(&format!(
            "?1 may have been written by a command of session {s} turn 1, "
        )),
        "{text}"
    );
}

/// A Git AI Standard v3.0.0 authorship log, read as the standard's text says (independently of
/// acp-journal's writer): per file, per line, the attestation key covering it; and the
/// metadata, checked for the required fields and the session records' shape.
struct Note {
    files: std::collections::BTreeMap<String, std::collections::BTreeMap<usize, String>>,
    meta: Value,
}

fn read_note(text: &str, commit: &str) -> Note {
    let lines: Vec<&str> = text.lines().collect();
    let divider = lines
        .iter()
        .position(|l| *l == "---")
        .unwrap_or_else(|| panic!("no `---` line: {text}"));
    let key = regex::Regex::new(r"^(s_[0-9a-f]{14}::t_[0-9a-f]{14}|h_[0-9a-f]{14}|[0-9a-f]{16})$")
        .unwrap();
    let ranges = regex::Regex::new(r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$").unwrap();
    let mut files = std::collections::BTreeMap::new();
    let mut file: Option<String> = None;
    for line in &lines[..divider] {
        if let Some(entry) = line.strip_prefix("  ") {
            assert!(
                !entry.starts_with(' '),
                "indented by more than two spaces: {line:?}"
            );
            let (k, r) = entry.split_once(' ').expect("a key and its ranges");
            assert!(key.is_match(k), "bad key {k:?}");
            assert!(ranges.is_match(r), "bad ranges {r:?}");
            let mut last = 0;
            let covered: &mut std::collections::BTreeMap<usize, String> =
                files.get_mut(file.as_ref().expect("a file first")).unwrap();
            for part in r.split(',') {
                let (a, b) = part.split_once('-').unwrap_or((part, part));
                let (a, b): (usize, usize) = (a.parse().unwrap(), b.parse().unwrap());
                assert!(
                    a >= 1 && a <= b && a > last,
                    "ranges not ascending from 1: {r}"
                );
                last = b;
                for n in a..=b {
                    assert!(covered.insert(n, k.to_string()).is_none(), "line {n} twice");
                }
            }
        } else {
            assert!(
                !line.starts_with([' ', '\t']),
                "a file line indented: {line:?}"
            );
            let name = match line.strip_prefix('"') {
                Some(quoted) => quoted.strip_suffix('"').expect("closing quote").to_string(),
                None => {
                    assert!(
                        !line.contains([' ', '\t']),
                        "unquoted path with spaces: {line:?}"
                    );
                    line.to_string()
                }
            };
            files.insert(name.clone(), std::collections::BTreeMap::new());
            file = Some(name);
        }
    }
    assert!(
        files.values().all(|f| !f.is_empty()),
        "a file without entries: {text}"
    );
    let meta: Value = serde_json::from_str(&lines[divider + 1..].join("\n")).unwrap();
    assert_eq!(meta["schema_version"], "authorship/3.0.0");
    assert_eq!(meta["base_commit_sha"], commit);
    assert!(meta["prompts"].is_object(), "{meta}");
    let sessions = meta["sessions"].as_object().cloned().unwrap_or_default();
    let session_id = regex::Regex::new(r"^s_[0-9a-f]{14}$").unwrap();
    for (id, record) in &sessions {
        assert!(session_id.is_match(id), "{id}");
        let agent = &record["agent_id"];
        for field in ["tool", "id", "model"] {
            assert!(
                agent[field].is_string(),
                "agent_id.{field} of {id}: {record}"
            );
        }
        for banned in [
            "messages",
            "messages_url",
            "total_additions",
            "total_deletions",
        ] {
            assert!(record.get(banned).is_none(), "{banned} in {record}");
        }
        // The session ID is SHA-256 of `<tool>:<conversation id>`, its first 14 hex digits.
        use sha2::Digest;
        let digest = sha2::Sha256::digest(
            format!(
                "{}:{}",
                agent["tool"].as_str().unwrap(),
                agent["id"].as_str().unwrap()
            )
            .as_bytes(),
        );
        assert_eq!(id[2..], hex::encode(digest)[..14], "{record}");
    }
    // Every key resolves to its record.
    for covered in files.values() {
        for k in covered.values() {
            let map = match k.split_once("::") {
                Some((session, _)) => meta["sessions"].get(session),
                None if k.starts_with("h_") => meta["humans"].get(k.as_str()),
                None => meta["prompts"].get(k.as_str()),
            };
            assert!(map.is_some(), "{k} has no record: {text}");
        }
    }
    Note { files, meta }
}

impl Repo {
    /// The note of `rev` under refs/notes/ai, read by [`read_note`]: for each file of `expected`,
    /// whose each of its lines is (`-` for no entry, `a known human` for an `h_` key, else
    /// `<session>:<tool call>`, the session
    /// named by `sessions`' aliases and the call by its trace ID's position among the session's
    /// in the order of first appearance).
    fn note_of(&self, rev: &str, files: &[&str], sessions: &[(&str, &str)]) -> Vec<Vec<String>> {
        let sha = self.git(&["rev-parse", rev]).trim().to_string();
        let note = read_note(&self.git(&["notes", "--ref=ai", "show", &sha]), &sha);
        let mut traces: Vec<String> = Vec::new();
        files
            .iter()
            .map(|file| {
                let count = std::fs::read_to_string(self.path().join(file))
                    .ok()
                    .filter(|_| rev == "HEAD")
                    .map_or_else(
                        || {
                            self.git(&["show", &format!("{sha}:{file}")])
                                .lines()
                                .count()
                        },
                        |t| t.lines().count(),
                    );
                let covered = note.files.get(*file).cloned().unwrap_or_default();
                assert!(covered.keys().all(|n| *n <= count), "{file}: past its end");
                (1..=count)
                    .map(|n| match covered.get(&n) {
                        None => "-".to_string(),
                        Some(key) if key.starts_with("h_") => "a known human".to_string(),
                        Some(key) => {
                            let (session, trace) = key.split_once("::").unwrap();
                            let id = &note.meta["sessions"][session]["agent_id"]["id"];
                            let alias = sessions
                                .iter()
                                .find(|(_, s)| id == *s)
                                .map_or("an unknown session", |(a, _)| a);
                            if !traces.iter().any(|t| t == trace) {
                                traces.push(trace.to_string());
                            }
                            let call = traces.iter().position(|t| t == trace).unwrap() + 1;
                            format!("{alias}:{call}")
                        }
                    })
                    .collect()
            })
            .collect()
    }
}

fn strings(files: &[&[&str]]) -> Vec<Vec<String>> {
    files
        .iter()
        .map(|f| f.iter().map(|s| s.to_string()).collect())
        .collect()
}

#[test]
fn installed_hooks_write_standard_notes_at_commit_amend_rebase_squash_and_cherry_pick_keeping_the_hook_there()
 {
    let repo = Repo::new();
    repo.write("a.rs", &["// a", "fn person() {}"]);
    repo.write("b.rs", &["// b"]);
    repo.commit("base");
    // A hook of the person's own, kept and run first.
    let hooks = repo.path().join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    std::fs::write(
        hooks.join("post-commit"),
        "#!/bin/sh\ntouch \"$(git rev-parse --git-dir)/own-hook-ran\"\n",
    )
    .unwrap();
    std::fs::set_permissions(
        hooks.join("post-commit"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let installed = repo.cli(&["hooks", "install"]);
    assert!(
        installed.contains("post-commit.before-acp-journal: kept"),
        "{installed}"
    );
    let mut s = repo.session(repo.path());
    s.turn(1, "write a.rs\n// a\nfn agent_first() -> u8 { 1 }\nfn agent_second() -> u8 { 2 }\nfn person() {}\n.");
    s.turn(
        2,
        "replace b.rs\n// b\n---\n// b\nfn agent_in_b() -> &'static str { \"b\" }\n.",
    );
    let s = s.end();
    repo.write("my file.txt", &["the person's own file"]);
    repo.commit("agent work");
    assert!(
        repo.path().join(".git/own-hook-ran").exists(),
        "the kept hook did not run: {installed} {:?}",
        std::fs::read_dir(&hooks)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect::<Vec<_>>()
    );
    assert_eq!(
        repo.note_of("HEAD", &["a.rs", "b.rs", "my file.txt"], &[("s", &s)]),
        strings(&[&["-", "s:1", "s:1", "-"], &["-", "s:2"], &["-"]])
    );
    // An amend changing one of the agent's lines: the new commit's note without it.
    repo.write(
        "a.rs",
        &[
            "// a",
            "fn agent_first() -> u8 { 1 }",
            "fn agent_second() -> u8 { 20 }",
            "fn person() {}",
        ],
    );
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "--amend", "--no-edit"]);
    assert_eq!(
        repo.note_of("HEAD", &["a.rs", "b.rs"], &[("s", &s)]),
        strings(&[&["-", "s:1", "-", "-"], &["-", "s:2"]])
    );
    // Rebased onto a person's commit that adds lines above: line numbers follow the content.
    let base = repo.git(&["rev-list", "--max-parents=0", "HEAD"]);
    repo.git(&["checkout", "-q", "-b", "other", base.trim()]);
    repo.write("b.rs", &["// header by the person", "// b"]);
    repo.commit("header");
    repo.git(&["checkout", "-q", "main"]);
    repo.git(&["rebase", "-q", "other"]);
    assert_eq!(
        repo.note_of("HEAD", &["a.rs", "b.rs"], &[("s", &s)]),
        strings(&[&["-", "s:1", "-", "-"], &["-", "-", "s:2"]])
    );
    // A second session's commit and a person's after it; then an interactive rebase moves the
    // person's first and squashes the second session's into the first session's: the squashed
    // commit's note holds both sessions' lines, the person's commit has none.
    let mut t = repo.session(repo.path());
    t.turn(1, "write c.rs\nfn agent_in_c() {}\n.");
    let t = t.end();
    repo.commit("c");
    repo.write("d.txt", &["the person's"]);
    repo.commit("d");
    let picks = repo.git(&["rev-list", "--reverse", "HEAD~3..HEAD"]);
    let picks: Vec<&str> = picks.lines().collect();
    let todo = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        todo.path(),
        format!(
            "pick {}\npick {}\nsquash {}\n",
            picks[2], picks[0], picks[1]
        ),
    )
    .unwrap();
    let editor = format!("sequence.editor=cp {}", todo.path().display());
    repo.git(&["-c", &editor, "rebase", "-q", "-i", "HEAD~3"]);
    let squashed = strings(&[&["-", "s:1", "-", "-"], &["-", "-", "s:2"], &["t:3"]]);
    let both = [("s", s.as_str()), ("t", t.as_str())];
    assert_eq!(
        repo.note_of("HEAD", &["a.rs", "b.rs", "c.rs"], &both),
        squashed
    );
    assert!(!has_note(&repo, "HEAD~1"), "the person's commit");
    // Cherry-picked onto the person's branch: the new commit carries the same lines.
    repo.git(&["checkout", "-q", "other"]);
    repo.git(&["cherry-pick", "main"]);
    assert_eq!(
        repo.note_of("HEAD", &["a.rs", "b.rs", "c.rs"], &both),
        squashed
    );
    // The person's commit has no AI lines: no note.
    assert!(!has_note(&repo, "other~1"));
}

/// Whether `rev` has a note under refs/notes/ai.
fn has_note(repo: &Repo, rev: &str) -> bool {
    Command::new("git")
        .args(["notes", "--ref=ai", "show", rev])
        .current_dir(repo.path())
        .output()
        .unwrap()
        .status
        .success()
}

#[test]
fn another_tools_note_is_merged_never_overwritten() {
    let repo = Repo::new();
    repo.write("a.rs", &["// a"]);
    repo.commit("base");
    let mut s = repo.session(repo.path());
    s.turn(
        1,
        "write a.rs\n// a\nfn from_the_agent() {}\nfn typed_in_an_ide() {}\n.",
    );
    let s = s.end();
    repo.commit("work");
    let sha = repo.git(&["rev-parse", "HEAD"]).trim().to_string();
    // git-ai's note: a known human typed line 3.
    let theirs = format!(
        "a.rs\n  h_31dce776f88375 3\n---\n{{\n  \"schema_version\": \"authorship/3.0.0\",\n  \"git_ai_version\": \"1.4.5\",\n  \"base_commit_sha\": \"{sha}\",\n  \"prompts\": {{}},\n  \"humans\": {{\"h_31dce776f88375\": {{\"author\": \"Developer <dev@example.com>\"}}}}\n}}\n"
    );
    repo.git(&["notes", "--ref=ai", "add", "-m", &theirs, &sha]);
    repo.cli(&["note"]);
    repo.cli(&["note", "HEAD"]);
    let note = read_note(&repo.git(&["notes", "--ref=ai", "show", &sha]), &sha);
    assert_eq!(note.meta["git_ai_version"], "1.4.5");
    assert_eq!(
        note.meta["humans"]["h_31dce776f88375"]["author"],
        "Developer <dev@example.com>"
    );
    assert_eq!(note.meta["sessions"].as_object().unwrap().len(), 1);
    assert_eq!(
        repo.note_of("HEAD", &["a.rs"], &[("s", &s)]),
        strings(&[&["-", "s:1", "a known human"]])
    );
}

#[test]
fn a_teammate_blames_through_the_store_with_none_of_the_journals() {
    let repo = Repo::new();
    repo.write("shared.rs", &["// shared"]);
    repo.commit("base");
    let shared = tempfile::tempdir().unwrap();
    let url = format!("file://{}", shared.path().join("store").display());
    let mut s = repo.session_with(repo.path(), &["--store", &url, "--ship-interval", "0.2"]);
    s.turn(
        1,
        "write shared.rs\n// shared\nfn written_on_the_first_machine() {}\n.",
    );
    let s = s.end();
    repo.commit("work");
    // Another machine: its own, empty journal directory, and the team's store.
    let elsewhere = tempfile::tempdir().unwrap();
    let journals = elsewhere.path().display().to_string();
    let (code, out, err) = run_cli_in(
        repo.path(),
        &[
            "--journal-dir",
            &journals,
            "--store",
            &url,
            "blame",
            "shared.rs",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let rows: Vec<Value> = serde_json::from_str(&out).unwrap();
    let whose: Vec<&Value> = rows.iter().map(|r| &r["agent"]["session"]).collect();
    assert_eq!(whose, [&Value::Null, &json!(s)], "{out}");
    // Without the store, that machine knows nothing of it.
    let (code, out, _) = run_cli_in(
        repo.path(),
        &["--journal-dir", &journals, "blame", "shared.rs", "--json"],
    );
    assert_eq!(code, 0);
    assert!(!out.contains(&s), "{out}");
}
