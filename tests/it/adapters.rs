//! The adapter users install today, `@agentclientprotocol/claude-agent-acp` (pinned by
//! `scripts/install-peers.sh`, with the Claude Code binary it drives), through the built binary,
//! against a loopback model server of ours (`tests/agents/model_server.py`: the Anthropic Messages
//! API, no key, no network). The model's answers say how many user messages it was shown, so each
//! test checks the context the agent really has, not only what the editor is shown: a
//! conversation, a native load in a new proxy, `--load journal`, and a respawn after `kill -9`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::respawn::{agent_pid, kill9};
use crate::util::{Peers, TestClient, proxied, proxied_with, python, root};

/// The loopback model server, stopped when dropped.
struct Model {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Model {
    fn start(dir: &Path) -> Model {
        let log = dir.join("model.log");
        let mut child = Command::new(python())
            .arg(root().join("tests/agents/model_server.py"))
            .env("MODEL_LOG", &log)
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting the model server");
        let mut port = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut port)
            .unwrap();
        let url = format!("http://127.0.0.1:{}", port.trim());
        Model { child, url, log }
    }

    /// The user texts of every request for a turn the model answered, in order.
    fn turns(&self) -> Vec<Vec<String>> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| {
                r["path"]
                    .as_str()
                    .is_some_and(|p| p.starts_with("/v1/messages"))
            })
            .filter(|r| r["stream"] == true)
            .map(|r| {
                r["users"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|u| u.as_str().map(str::to_string))
                    .collect()
            })
            .collect()
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A machine for the adapter: its own home (where Claude Code keeps its sessions), a working
/// directory, the model server, and a store.
struct Setup {
    model: Model,
    home: tempfile::TempDir,
    cwd: tempfile::TempDir,
    store: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let home = tempfile::tempdir().unwrap();
        Setup {
            model: Model::start(home.path()),
            home,
            cwd: tempfile::tempdir().unwrap(),
            store: tempfile::tempdir().unwrap(),
        }
    }

    fn cwd(&self) -> String {
        self.cwd.path().display().to_string()
    }

    /// The proxy (with `options`) in front of the adapter, pointed at the model server.
    fn client(&self, options: &[&str]) -> TestClient {
        let agent = Peers::get().claude_agent();
        let cmd = if options.is_empty() {
            proxied(self.store.path(), &agent)
        } else {
            proxied_with(self.store.path(), options, &agent)
        };
        let url = PathBuf::from(&self.model.url);
        let one = PathBuf::from("1");
        let key = PathBuf::from("sk-ant-loopback");
        TestClient::spawn_env(
            &cmd,
            &[
                ("ANTHROPIC_BASE_URL", &url),
                ("ANTHROPIC_API_KEY", &key),
                ("HOME", self.home.path()),
                // Claude Code refuses its permission bypass to root outside a sandbox.
                ("IS_SANDBOX", &one),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", &one),
                ("DISABLE_AUTOUPDATER", &one),
            ],
        )
    }
}

/// Send `text` to `session`; the answer's end_turn and the agent text it brought.
fn turn(client: &mut TestClient, session: &str, text: &str) -> String {
    let before = client.received.len();
    let answer = client.prompt(session, text);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    client.received[before..]
        .iter()
        .filter_map(|r| r.json.as_ref())
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect()
}

/// The texts of the user messages in `updates` (a load's replay).
fn user_texts(updates: &[Value]) -> Vec<String> {
    updates
        .iter()
        .filter(|u| u["params"]["update"]["sessionUpdate"] == "user_message_chunk")
        .filter_map(|u| u["params"]["update"]["content"]["text"].as_str())
        .map(str::to_string)
        .collect()
}

#[test]
fn claude_agent_acp_converses_loads_natively_and_from_the_journal_with_its_context() {
    let setup = Setup::new();
    let cwd = setup.cwd();
    let mut client = setup.client(&[]);
    let init = client.initialize();
    assert_eq!(
        init["result"]["agentInfo"]["title"], "Claude Agent",
        "{init}"
    );
    let session = client.new_session(&cwd);
    assert!(
        turn(&mut client, &session, "first task").contains("You said: first task. I can see 1")
    );
    assert!(turn(&mut client, &session, "second task").contains("I can see 2 user messages"));
    assert_eq!(client.finish().0, 0);

    // A new proxy: the agent loads the session itself, and has its context.
    let mut client = setup.client(&[]);
    client.initialize();
    let (updates, response) = client.load(&session, &cwd);
    assert!(response.get("result").is_some(), "{response}");
    let users = user_texts(&updates);
    assert!(
        users.iter().any(|u| u.contains("first task"))
            && users.iter().any(|u| u.contains("second task")),
        "the agent's own replay: {users:?}"
    );
    assert!(turn(&mut client, &session, "third task").contains("I can see 3 user messages"));
    assert_eq!(client.finish().0, 0);

    // `--load journal`: the journal's replay, the agent's own load underneath (context kept).
    let mut client = setup.client(&["--load", "journal"]);
    client.initialize();
    let (updates, response) = client.load(&session, &cwd);
    assert!(response.get("result").is_some(), "{response}");
    assert_eq!(
        user_texts(&updates),
        ["first task", "second task", "third task"],
        "the journal's replay, once"
    );
    assert!(turn(&mut client, &session, "fourth task").contains("I can see 4 user messages"));
    assert_eq!(client.finish().0, 0);

    // What the list shows of it.
    let (_, out, _) = crate::util::run_cli_store(setup.store.path(), &["list", "--json"]);
    let rows: Vec<Value> = serde_json::from_str(&out).unwrap();
    let row = rows
        .iter()
        .find(|r| r["session"] == session.as_str())
        .expect(&out);
    assert_eq!(row["turns"], 4, "{row}");
    assert_eq!(row["agent_name"], "Claude Agent", "{row}");
}

#[test]
fn claude_agent_acp_killed_with_sigkill_is_restarted_and_its_session_keeps_its_context() {
    let setup = Setup::new();
    let cwd = setup.cwd();
    let mut client = setup.client(&[]);
    let session = client.start_session(&cwd);
    assert!(turn(&mut client, &session, "before the crash").contains("I can see 1"));
    let proxy = client.child.id();
    let pid = agent_pid(proxy, None);
    kill9(pid);
    // The proxy has started the next one before the prompt is sent.
    agent_pid(proxy, Some(pid));
    let after = turn(&mut client, &session, "after the crash");
    assert!(
        after.contains("You said: after the crash. I can see 2 user messages"),
        "restored on the restarted agent with its context: {after}"
    );
    assert_eq!(client.finish().0, 0);
    let turns = setup.model.turns();
    assert_eq!(
        turns.last().map(|t| t.len()),
        Some(2),
        "the model saw both prompts: {turns:?}"
    );
    let (_, shown, _) = crate::util::run_cli_store(setup.store.path(), &["show", &session]);
    assert!(
        shown.contains("restored on the restarted agent ("),
        "{shown}"
    );
}
