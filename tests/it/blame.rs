//! `acp-journal blame` through the binary, in real git repositories, on the journals of real
//! proxy runs: our edit agent (`tests/agents/edit_agent.py`) writes through
//! `fs/write_text_file` (answered by this test's client, which writes the file), edits files
//! itself and reports `diff` content, and runs commands. Each case states whose every line is
//! and compares them all.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::util::{TestClient, proxied, python, root, run_cli_in};

/// A git repository with a journal directory beside it.
struct Repo {
    dir: tempfile::TempDir,
    journals: tempfile::TempDir,
}

/// The person committing in the tests.
const PERSON: &str = "Ann Person";

impl Repo {
    fn new() -> Repo {
        let repo = Repo {
            dir: tempfile::tempdir().unwrap(),
            journals: tempfile::tempdir().unwrap(),
        };
        repo.git(&["init", "-q", "-b", "main"]);
        repo
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// git, as the person, with nothing of the user's configuration.
    fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args([
                "-c",
                "commit.gpgsign=false",
                "-c",
                "core.hooksPath=/dev/null",
            ])
            .args(args)
            .current_dir(self.path())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", PERSON)
            .env("GIT_AUTHOR_EMAIL", "ann@example.com")
            .env("GIT_COMMITTER_NAME", PERSON)
            .env("GIT_COMMITTER_EMAIL", "ann@example.com")
            .env("GIT_EDITOR", "true")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn write(&self, file: &str, lines: &[&str]) {
        let path = self.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            path,
            lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
        )
        .unwrap();
    }

    fn commit(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
    }

    /// A proxied session of the edit agent in `cwd`.
    fn session(&self, cwd: &Path) -> Session {
        let agent = vec![
            python(),
            root()
                .join("tests/agents/edit_agent.py")
                .display()
                .to_string(),
        ];
        let mut client = TestClient::spawn(&proxied(self.journals.path(), &agent));
        client.initialize();
        let id = client.new_session(cwd.to_str().unwrap());
        Session {
            client,
            id,
            next: 100,
        }
    }

    /// `blame FILE --json` run in the work tree: (text, whose) per line, whose being git's
    /// author or `<session>:<turn>`, with each agent line's prompt, agent and model checked.
    fn blame(&self, file: &str, sessions: &[(&str, &str)]) -> Vec<(String, String)> {
        let journals = self.journals.path().display().to_string();
        let (code, out, err) = run_cli_in(
            self.path(),
            &["--journal-dir", &journals, "blame", file, "--json"],
        );
        assert_eq!(code, 0, "{err}");
        let rows: Vec<Value> = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        rows.iter()
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

/// A session of the edit agent through the proxy; this client writes and reads files for it.
struct Session {
    client: TestClient,
    id: String,
    next: u64,
}

impl Session {
    /// One turn: `Turn N` then the directives.
    fn turn(&mut self, number: u64, directives: &str) {
        let id = self.next;
        self.next += 1;
        let text = format!("Turn {number} of the test\n{directives}");
        self.client.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
            "params": {"sessionId": self.id, "prompt": [{"type": "text", "text": text}]}}),
        );
        loop {
            let msg = self
                .client
                .recv()
                .expect("the turn's end")
                .json
                .clone()
                .unwrap();
            if msg["id"] == id && msg.get("method").is_none() {
                assert_eq!(msg["result"]["stopReason"], "end_turn", "{msg}");
                return;
            }
            let params = &msg["params"];
            let path = PathBuf::from(params["path"].as_str().unwrap_or_default());
            let reply = match msg["method"].as_str() {
                Some("fs/read_text_file") => match std::fs::read_to_string(&path) {
                    Ok(content) => json!({"result": {"content": content}}),
                    Err(e) => json!({"error": {"code": -32002, "message": e.to_string()}}),
                },
                Some("fs/write_text_file") => {
                    std::fs::write(&path, params["content"].as_str().unwrap()).unwrap();
                    json!({"result": null})
                }
                _ => continue,
            };
            let mut reply = reply;
            reply["jsonrpc"] = json!("2.0");
            reply["id"] = msg["id"].clone();
            self.client.send(&reply);
        }
    }

    /// The session ends (the proxy and agent exit); its ID.
    fn end(self) -> String {
        let (code, _) = self.client.finish();
        assert_eq!(code, 0);
        self.id
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
