//! The adapters users install today, `@agentclientprotocol/claude-agent-acp` and
//! `@agentclientprotocol/codex-acp` (pinned by `scripts/install-peers.sh`, with the Claude Code and
//! Codex binaries they drive), through the built binary, against a loopback model server of ours
//! (`tests/agents/model_server.py`: the Anthropic Messages and OpenAI Responses APIs, no key, no
//! network). The model's answers say how many user messages it was shown, so each
//! test checks the context the agent really has, not only what the editor is shown: a
//! conversation, a native load in a new proxy, `--load journal`, and a respawn after `kill -9`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::respawn::{agent_pid, kill9_and_await_the_next};
use crate::util::{Peers, TestClient, proxied, proxied_with, python, root, v2_user_texts};

/// The loopback model server, stopped when dropped.
pub(crate) struct Model {
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
    pub(crate) fn turns(&self) -> Vec<Vec<String>> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| {
                r["path"]
                    .as_str()
                    .is_some_and(|p| p.starts_with("/v1/messages") || p.ends_with("/responses"))
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

/// Which adapter.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Adapter {
    Claude,
    Codex,
}

/// A machine for the adapter: its own home (where it keeps its sessions), a working directory,
/// the model server, and a store.
pub(crate) struct Setup {
    adapter: Adapter,
    pub(crate) model: Model,
    pub(crate) home: tempfile::TempDir,
    pub(crate) cwd: tempfile::TempDir,
    pub(crate) store: tempfile::TempDir,
}

impl Setup {
    pub(crate) fn new(adapter: Adapter) -> Setup {
        let home = tempfile::tempdir().unwrap();
        let model = Model::start(home.path());
        // Codex reads its model provider from $CODEX_HOME/config.toml.
        let codex = home.path().join(".codex");
        std::fs::create_dir_all(&codex).unwrap();
        let config = format!(
            "model = \"gpt-5.5\"\nmodel_provider = \"loopback\"\napproval_policy = \"never\"\n\
             sandbox_mode = \"read-only\"\n\n[model_providers.loopback]\nname = \"loopback\"\n\
             base_url = \"{}/v1\"\nenv_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n",
            model.url
        );
        std::fs::write(codex.join("config.toml"), config).unwrap();
        Setup {
            adapter,
            model,
            home,
            cwd: tempfile::tempdir().unwrap(),
            store: tempfile::tempdir().unwrap(),
        }
    }

    pub(crate) fn cwd(&self) -> String {
        self.cwd.path().display().to_string()
    }

    /// The proxy (with `options`) in front of the adapter, pointed at the model server.
    fn client(&self, options: &[&str]) -> TestClient {
        self.client_at_home(self.home.path(), options)
    }

    /// The same, with the adapter keeping its sessions in `home` (another home: a machine
    /// where the agent never saw the session).
    fn client_at_home(&self, home: &Path, options: &[&str]) -> TestClient {
        self.client_on(home, self.store.path(), options)
    }

    /// The same, journaling into `journals` (another machine altogether).
    fn client_on(&self, home: &Path, journals: &Path, options: &[&str]) -> TestClient {
        self.client_env(home, journals, options, &[])
    }

    /// The same, with more environment variables (a store's credentials, the adapter's own).
    pub(crate) fn client_env(
        &self,
        home: &Path,
        journals: &Path,
        options: &[&str],
        env: &[(String, String)],
    ) -> TestClient {
        let agent = match self.adapter {
            Adapter::Claude => Peers::get().claude_agent(),
            Adapter::Codex => Peers::get().codex_agent(),
        };
        let cmd = if options.is_empty() {
            proxied(journals, &agent)
        } else {
            proxied_with(journals, options, &agent)
        };
        let url = PathBuf::from(&self.model.url);
        let one = PathBuf::from("1");
        let key = PathBuf::from("sk-loopback");
        let codex_home = home.join(".codex");
        let extra: Vec<(&str, PathBuf)> = env
            .iter()
            .map(|(k, v)| (k.as_str(), PathBuf::from(v)))
            .collect();
        let mut vars: Vec<(&str, &Path)> = vec![
            ("ANTHROPIC_BASE_URL", &url),
            ("ANTHROPIC_API_KEY", &key),
            ("OPENAI_API_KEY", &key),
            ("CODEX_HOME", &codex_home),
            ("HOME", home),
            // Claude Code refuses its permission bypass to root outside a sandbox.
            ("IS_SANDBOX", &one),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", &one),
            ("DISABLE_AUTOUPDATER", &one),
        ];
        vars.extend(extra.iter().map(|(k, v)| (*k, v.as_path())));
        TestClient::spawn_env(&cmd, &vars)
    }
}

/// Close the client's end; the proxy ends with the agent. codex-acp does not exit at the end of
/// its stdin: the proxy terminates it after `--grace` (2 s in the tests) and ends with its status.
pub(crate) fn ends(client: TestClient) {
    let code = client.finish().0;
    assert!(
        code == 0 || code == 128 + libc::SIGTERM,
        "exit status {code}"
    );
}

/// Send `text` to `session`; the answer's end_turn and the agent text it brought.
pub(crate) fn turn(client: &mut TestClient, session: &str, text: &str) -> String {
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
pub(crate) fn user_texts(updates: &[Value]) -> Vec<String> {
    updates
        .iter()
        .filter(|u| u["params"]["update"]["sessionUpdate"] == "user_message_chunk")
        .filter_map(|u| u["params"]["update"]["content"]["text"].as_str())
        .map(str::to_string)
        .collect()
}

#[test]
fn claude_agent_acp_converses_loads_natively_and_from_the_journal_with_its_context() {
    converses_and_loads(Adapter::Claude, "Claude Agent");
}

#[test]
fn codex_acp_converses_loads_natively_and_from_the_journal_with_its_context() {
    converses_and_loads(Adapter::Codex, "Codex");
}

#[test]
fn claude_agent_acp_killed_with_sigkill_is_restarted_and_its_session_keeps_its_context() {
    killed_and_restarted(Adapter::Claude);
}

#[test]
fn codex_acp_killed_with_sigkill_is_restarted_and_its_session_keeps_its_context() {
    killed_and_restarted(Adapter::Codex);
}

/// A conversation; a native load in a new proxy; `--load journal`; a native resume; what `list`
/// shows.
fn converses_and_loads(adapter: Adapter, name: &str) {
    let setup = Setup::new(adapter);
    let cwd = setup.cwd();
    let mut client = setup.client(&[]);
    let init = client.initialize();
    let info = &init["result"]["agentInfo"];
    let shown = info["title"]
        .as_str()
        .or(info["name"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(shown.contains(name), "{adapter:?}: {init}");
    let session = client.new_session(&cwd);
    let first = turn(&mut client, &session, "first task");
    assert!(
        first.contains("You said: first task. I can see 1"),
        "{first}"
    );
    let second = turn(&mut client, &session, "second task");
    assert!(second.contains("I can see 2 user messages"), "{second}");
    ends(client);

    // A new proxy: the agent loads the session itself, and has its context.
    let mut client = setup.client(&[]);
    client.initialize();
    let (updates, response) = client.load(&session, &cwd);
    assert!(response.get("result").is_some(), "{adapter:?}: {response}");
    // The agent's own replay, passed on as it came (codex-acp 2.6 replays only a loaded
    // session's first turn, without the proxy too; its model still gets every turn).
    let users = user_texts(&updates);
    assert!(
        users.iter().any(|u| u.contains("first task")),
        "{adapter:?}: the agent's own replay: {users:?}"
    );
    let third = turn(&mut client, &session, "third task");
    assert!(third.contains("I can see 3 user messages"), "{third}");
    ends(client);

    // `--load journal`: the journal's replay, the agent's own load underneath (context kept).
    let mut client = setup.client(&["--load", "journal"]);
    client.initialize();
    let (updates, response) = client.load(&session, &cwd);
    assert!(response.get("result").is_some(), "{adapter:?}: {response}");
    assert_eq!(
        user_texts(&updates),
        ["first task", "second task", "third task"],
        "the journal's replay, once"
    );
    let fourth = turn(&mut client, &session, "fourth task");
    assert!(fourth.contains("I can see 4 user messages"), "{fourth}");
    ends(client);

    // `session/resume` in a new proxy: the agent's own, nothing replayed, the context kept.
    let mut client = setup.client(&[]);
    client.initialize();
    let before = client.received.len();
    let resumed = client.request(
        "session/resume",
        serde_json::json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
    );
    assert!(resumed.get("result").is_some(), "{adapter:?}: {resumed}");
    let replayed = client.received[before..]
        .iter()
        .filter_map(|r| r.json.as_ref())
        .any(|m| m["params"]["update"]["sessionUpdate"] == "user_message_chunk");
    assert!(!replayed, "{adapter:?}: a resume replays nothing");
    let fifth = turn(&mut client, &session, "fifth task");
    assert!(fifth.contains("I can see 5 user messages"), "{fifth}");
    ends(client);

    let (_, out, _) = crate::util::run_cli_store(setup.store.path(), &["list", "--json"]);
    let rows: Vec<Value> = serde_json::from_str(&out).unwrap();
    let row = rows
        .iter()
        .find(|r| r["session"] == session.as_str())
        .expect(&out);
    assert_eq!(row["turns"], 5, "{row}");
    assert_eq!(row["agent_name"], shown.as_str(), "{row}");
    assert_eq!(
        row["title"].as_str().map(|t| !t.is_empty()),
        Some(true),
        "{row}"
    );
}

/// `kill -9` of the agent between prompts: the next prompt is answered by the restarted agent,
/// with the conversation's context.
fn killed_and_restarted(adapter: Adapter) {
    let setup = Setup::new(adapter);
    let cwd = setup.cwd();
    let mut client = setup.client(&[]);
    let session = client.start_session(&cwd);
    let before = turn(&mut client, &session, "before the crash");
    assert!(before.contains("I can see 1"), "{before}");
    let proxy = client.child.id();
    // The proxy has started the next one before the prompt is sent.
    kill9_and_await_the_next(proxy, agent_pid(proxy, None));
    let after = turn(&mut client, &session, "after the crash");
    assert!(
        after.contains("You said: after the crash. I can see 2 user messages"),
        "{adapter:?}: restored on the restarted agent with its context: {after}"
    );
    ends(client);
    let turns = setup.model.turns();
    assert!(
        turns.iter().any(|t| t
            .iter()
            .map(String::as_str)
            .eq(["before the crash", "after the crash"])),
        "the model saw both prompts in one conversation: {turns:?} {}",
        std::fs::read_to_string(&setup.model.log).unwrap_or_default()
    );
    let (_, shown, _) = crate::util::run_cli_store(setup.store.path(), &["show", &session]);
    assert!(
        shown.contains("restored on the restarted agent ("),
        "{shown}"
    );
}

/// A v2 turn through [`TestClient::turn_v2`], which must end the turn; the agent text.
fn turn_v2(client: &mut TestClient, session: &str, text: &str) -> String {
    let (said, stop) = client.turn_v2(session, text);
    assert_eq!(stop, "end_turn", "{said}");
    said
}

/// claude-agent-acp speaks v2 to a client that asks for it: a conversation; a native resume
/// replaying from the start in a new proxy; the same resume where the agent never saw the
/// session (another home), served from the journal and continued on a new agent session; a v1
/// client loading it from the journal; and what `show` and `list` make of it.
#[test]
fn claude_agent_acp_in_v2_converses_and_resumes_natively_and_from_the_journal() {
    let setup = Setup::new(Adapter::Claude);
    let cwd = setup.cwd();
    let mut client = setup.client(&[]);
    let init = client.initialize_v2();
    let result = &init["result"];
    assert_eq!(result["protocolVersion"], 2, "{init}");
    assert!(
        result.get("agentCapabilities").is_none(),
        "nothing v1 added: {init}"
    );
    let journaled = crate::util::journaled(setup.store.path(), acp_journal::wire::Side::Agent);
    let raw = &client.received.last().unwrap().raw;
    assert!(
        journaled.iter().any(|l| l == raw),
        "the agent's initialize answer reached the client byte for byte"
    );
    let session = client.new_session(&cwd);
    let first = turn_v2(&mut client, &session, "first task");
    assert!(first.contains("I can see 1 user messages"), "{first}");
    let second = turn_v2(&mut client, &session, "second task");
    assert!(second.contains("I can see 2 user messages"), "{second}");
    ends(client);

    // A new proxy: the agent resumes it itself and replays it.
    let mut client = setup.client(&[]);
    client.initialize_v2();
    let (updates, answer) = client.resume_v2(&session, &cwd);
    assert!(answer.get("result").is_some(), "{answer}");
    assert_eq!(v2_user_texts(&updates), ["first task", "second task"]);
    assert_eq!(updates.last().unwrap()["sessionUpdate"], "state_update");
    let third = turn_v2(&mut client, &session, "third task");
    assert!(third.contains("I can see 3 user messages"), "{third}");
    ends(client);

    // On a machine where the agent never saw it: served from the journal, then continued on
    // a new agent session that is told the conversation so far.
    let elsewhere = tempfile::tempdir().unwrap();
    let mut client = setup.client_at_home(elsewhere.path(), &[]);
    client.initialize_v2();
    let (updates, answer) = client.resume_v2(&session, &cwd);
    assert!(answer.get("result").is_some(), "{answer}");
    assert_eq!(
        v2_user_texts(&updates),
        ["first task", "second task", "third task"],
        "the journal's replay, once: {updates:?}"
    );
    assert_eq!(
        updates.last().unwrap(),
        &serde_json::json!({"sessionUpdate": "state_update", "state": "idle"})
    );
    let fourth = turn_v2(&mut client, &session, "fourth task");
    assert!(fourth.contains("You said: fourth task"), "{fourth}");
    ends(client);
    let turns = setup.model.turns();
    let told: String = turns.last().unwrap().concat();
    assert!(
        ["first task", "second task", "third task", "fourth task"]
            .iter()
            .all(|t| told.contains(t)),
        "the new agent session is told the conversation so far: {turns:?}"
    );

    // A v1 client loads the v2 session from the journal (`--load journal`): v1's shape.
    let mut client = setup.client_at_home(elsewhere.path(), &["--load", "journal"]);
    client.initialize();
    let (updates, response) = client.load(&session, &cwd);
    assert!(response.get("result").is_some(), "{response}");
    assert_eq!(
        user_texts(&updates),
        ["first task", "second task", "third task", "fourth task"]
    );
    let v2_only = [
        "user_message",
        "agent_message",
        "state_update",
        "plan_update",
    ];
    assert!(
        updates
            .iter()
            .all(|u| !v2_only.contains(&u["params"]["update"]["sessionUpdate"].as_str().unwrap())),
        "{updates:?}"
    );
    let fifth = turn(&mut client, &session, "fifth task");
    assert!(fifth.contains("You said: fifth task"), "{fifth}");
    ends(client);

    let (_, shown, _) = crate::util::run_cli_store(setup.store.path(), &["show", &session]);
    assert!(!shown.contains("── ?"), "{shown}");
    assert!(!shown.contains("cancelled by the user"), "{shown}");
    assert!(
        !shown.contains("Context restored"),
        "the agent's echo is not told: {shown}"
    );
    assert_eq!(
        shown.matches("end_turn").count(),
        5,
        "v2 and v1 turns: {shown}"
    );
    let (_, out, _) = crate::util::run_cli_store(setup.store.path(), &["list", "--json"]);
    let rows: Vec<Value> = serde_json::from_str(&out).unwrap();
    let row = rows
        .iter()
        .find(|r| r["session"] == session.as_str())
        .expect(&out);
    assert_eq!(row["turns"], 5, "{row}");
}

/// `kill -9` of claude-agent-acp between v2 turns: the next prompt is taken by the restarted
/// agent, which resumes the session with its context.
#[test]
fn claude_agent_acp_in_v2_killed_with_sigkill_is_restarted_and_its_session_keeps_its_context() {
    let setup = Setup::new(Adapter::Claude);
    let cwd = setup.cwd();
    let mut client = setup.client(&[]);
    client.initialize_v2();
    let session = client.new_session(&cwd);
    let before = turn_v2(&mut client, &session, "before the crash");
    assert!(before.contains("I can see 1"), "{before}");
    let proxy = client.child.id();
    kill9_and_await_the_next(proxy, agent_pid(proxy, None));
    let after = turn_v2(&mut client, &session, "after the crash");
    assert!(
        after.contains("You said: after the crash. I can see 2 user messages"),
        "restored on the restarted agent with its context: {after}"
    );
    ends(client);
    let (_, shown, _) = crate::util::run_cli_store(setup.store.path(), &["show", &session]);
    assert!(
        shown.contains("restored on the restarted agent (session/resume"),
        "{shown}"
    );
    assert_eq!(shown.matches("end_turn").count(), 2, "{shown}");
}

#[test]
fn claude_behind_serve_two_sdk_clients_share_a_session_and_one_carries_on_when_the_other_drops() {
    let setup = Setup::new(Adapter::Claude);
    let home = setup.home.path().display().to_string();
    let codex_home = setup.home.path().join(".codex").display().to_string();
    let env = [
        ("ACP_JOURNAL_TOKEN", crate::serve::TOKEN),
        ("ANTHROPIC_BASE_URL", setup.model.url.as_str()),
        ("ANTHROPIC_API_KEY", "sk-loopback"),
        ("OPENAI_API_KEY", "sk-loopback"),
        ("CODEX_HOME", codex_home.as_str()),
        ("HOME", home.as_str()),
        ("IS_SANDBOX", "1"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ("DISABLE_AUTOUPDATER", "1"),
    ];
    let served = crate::serve::Served::start_env(
        setup.store.path(),
        &[],
        &Peers::get().claude_agent(),
        &env,
    );
    let [(_, ts), (_, py)] = crate::serve::clients();
    let cwd = setup.cwd();
    // A: the TypeScript SDK over WebSocket, staying connected after its turn.
    let mut first = crate::attach::Running::start(
        &ts,
        &served.url,
        "ws",
        &["--cwd", &cwd, "--prompt", "first task", "--linger", "120"],
    );
    let seen = first.until("result").to_vec();
    let results = crate::serve::of_kind(&seen, "result");
    assert_eq!(results[0]["stopReason"], "end_turn", "{seen:?}");
    let session = crate::serve::of_kind(&seen, "session")[0]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    // Each later client loads the session, then prompts.
    let rejoin = |transport: &str, prompt: &str| {
        crate::serve::sdk_client(
            &py,
            &served.url,
            transport,
            &[
                "--cwd",
                &cwd,
                "--session",
                &session,
                "--load",
                "--prompt",
                prompt,
            ],
        )
    };
    // B: another SDK, another transport, joins the live session (served from the journal, the
    // adapter untouched) and prompts; A sees B's turn.
    let (second, stderr) = rejoin("http", "second task");
    assert_eq!(
        crate::serve::of_kind(&second, "loaded").len(),
        1,
        "{second:?}\n{stderr}"
    );
    assert_eq!(
        crate::serve::of_kind(&second, "result")[0]["stopReason"],
        "end_turn",
        "{second:?}"
    );
    let replayed: Vec<&Value> = crate::serve::of_kind(&second, "update");
    assert!(
        replayed.iter().any(|u| u["update"]["content"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("first task"))),
        "the history came with the load: {replayed:?}"
    );
    let b_turn = crate::serve::story(&second)
        .into_iter()
        .rfind(|s| s.starts_with("text"))
        .unwrap();
    let seen = first.until_story(&b_turn).to_vec();
    assert!(
        seen.iter()
            .any(|e| e["update"]["content"]["text"] == "second task"),
        "A sees B's prompt: {seen:?}"
    );
    // A drops; B comes back over WebSocket and carries on.
    first.kill();
    let (third, stderr) = rejoin("ws", "third task");
    assert_eq!(
        crate::serve::of_kind(&third, "result")[0]["stopReason"],
        "end_turn",
        "{third:?}\n{stderr}"
    );
    served.stop();
    let turns = setup.model.turns();
    assert!(
        turns
            .iter()
            .any(|t| *t == ["first task", "second task", "third task"]),
        "every turn reached the model with those before: {turns:?}"
    );
}

/// The user texts of the model's last turn request, joined.
fn last_request(model: &Model) -> String {
    model.turns().last().cloned().unwrap_or_default().join("\n")
}

#[test]
fn claude_agent_acp_continued_on_another_machine_and_back_knows_every_turn() {
    // Issue 37 (6): two machines share a store. The session goes from A to B and back; on
    // the way back claude-agent-acp has its own, older copy of it (its `loadSession`), which
    // lacks B's turns: the proxy brings the session up afresh and re-primes it with the whole
    // history, so the model is shown B's turns too. The session keeps its title.
    let setup = Setup::new(Adapter::Claude);
    let shared = tempfile::tempdir().unwrap();
    let url = format!("file://{}", shared.path().join("store").display());
    let options = ["--store", url.as_str(), "--ship-interval", "0.2"];
    let cwd = setup.cwd();
    let (home_a, journals_a) = (setup.home.path(), setup.store.path());
    let (home_b, journals_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut client = setup.client_on(home_a, journals_a, &options);
    client.initialize();
    let session = client.new_session(&cwd);
    turn(&mut client, &session, "first task");
    turn(&mut client, &session, "second task");
    ends(client);
    let mut client = setup.client_on(home_b.path(), journals_b.path(), &options);
    client.initialize();
    let (updates, response) = client.load(&session, &cwd);
    assert!(response.get("result").is_some(), "{response}");
    assert_eq!(user_texts(&updates), ["first task", "second task"]);
    let third = turn(&mut client, &session, "third task");
    assert!(third.contains("You said: third task"), "{third}");
    assert!(
        last_request(&setup.model).contains("second task"),
        "B's model has A's turns"
    );
    turn(&mut client, &session, "fourth task");
    ends(client);
    // Back on A, whose agent has the session as it was after the second task.
    let mut client = setup.client_on(home_a, journals_a, &options);
    client.initialize();
    let (updates, response) = client.load(&session, &cwd);
    assert!(response.get("result").is_some(), "{response}");
    assert_eq!(
        user_texts(&updates),
        ["first task", "second task", "third task", "fourth task"],
        "the journal's replay, every host's turns"
    );
    let fifth = turn(&mut client, &session, "fifth task");
    assert!(fifth.contains("You said: fifth task"), "{fifth}");
    let shown = last_request(&setup.model);
    assert!(
        shown.contains("fourth task") && shown.contains("first task"),
        "A's model is shown what B added: {shown}"
    );
    ends(client);
    let reader = tempfile::tempdir().unwrap();
    let env = [(
        "XDG_CACHE_HOME".to_string(),
        reader.path().display().to_string(),
    )];
    let journals = reader.path().join("journals").display().to_string();
    let (_, out, err) = crate::stores::run_with(
        &env,
        &[
            "--journal-dir",
            &journals,
            "--store",
            &url,
            "list",
            "--json",
        ],
    );
    let rows: Vec<Value> = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{out}{err}"));
    let row = rows
        .iter()
        .find(|r| r["session"] == session.as_str())
        .expect(&out);
    assert_eq!(row["turns"], 5, "{row}");
    let title = row["title"].as_str().unwrap_or_default();
    assert!(!title.starts_with("[Context restored"), "{row}");
}

/// The child session a prompt's delegation announced (its `subagent_update`), once its work
/// ended (the adapter may tell that after the prompt's answer: the subagent runs on its own).
fn delegated(client: &mut TestClient, from: usize) -> String {
    let announced = |received: &[crate::util::Received]| {
        let updates: Vec<&Value> = received[from..]
            .iter()
            .filter_map(|r| r.json.as_ref())
            .map(|m| &m["params"]["update"])
            .filter(|u| u["sessionUpdate"] == "subagent_update")
            .collect();
        let ended = updates.iter().any(|u| u["state"]["state"] == "idle");
        updates
            .first()
            .and_then(|u| u["sessionId"].as_str())
            .filter(|_| ended)
            .map(str::to_string)
    };
    loop {
        if let Some(child) = announced(&client.received) {
            return child;
        }
        client.recv().expect("the subagent's end");
    }
}

/// The default `auto` mode has the model judge each tool call, which the model server does not
/// answer as Claude Code expects: the subagent runs in `bypassPermissions` (v1: the session's
/// mode; v2: its `mode` option).
const BYPASS: &str = "bypassPermissions";

/// claude-agent-acp 0.101 delegating to its Agent tool (the model server scripts the call and
/// the subagent's answer) for a client that declares `subagents`: the child's updates arrive
/// under its own session ID; they are journaled with the parent's, `list` counts one session
/// with one subagent; a load from the journal replays them in order under the child's ID to a
/// client that declares subagents, and only the parent's view (a tool call) to one that does
/// not.
#[test]
fn claude_agent_acp_delegating_to_a_subagent_is_journaled_as_one_tree_and_replayed_as_one() {
    let setup = Setup::new(Adapter::Claude);
    let cwd = setup.cwd();
    let subagents = serde_json::json!({"protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "subagents": {}},
        "clientInfo": {"name": "acp-journal-tests", "version": "0"}});
    let mut client = setup.client(&[]);
    client.request("initialize", subagents.clone());
    let session = client.new_session(&cwd);
    let mode = client.request(
        "session/set_mode",
        serde_json::json!({"sessionId": session, "modeId": BYPASS}),
    );
    assert!(mode.get("result").is_some(), "{mode}");
    let from = client.received.len();
    let said = turn(&mut client, &session, "DELEGATE: find the answer");
    assert!(
        said.contains("You said: DELEGATE: find the answer"),
        "{said}"
    );
    let child = delegated(&mut client, from);
    let reported = |updates: &[Value]| {
        updates.iter().position(|m| {
            m["params"]["sessionId"] == child.as_str()
                && m["params"]["update"]["content"]["text"] == "Subagent report: find the answer"
        })
    };
    let live: Vec<Value> = client.received[from..]
        .iter()
        .filter_map(|r| r.json.clone())
        .collect();
    assert!(reported(&live).is_some(), "the child's words under its ID");
    ends(client);

    let journals = crate::util::session_messages(setup.store.path());
    assert_eq!(journals.keys().collect::<Vec<_>>(), [&session]);
    assert!(reported(&journals[&session]).is_some(), "with the parent's");
    let (_, out, _) = crate::util::run_cli_store(setup.store.path(), &["list", "--json"]);
    let rows: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(rows.len(), 1, "{out}");
    assert_eq!(
        (&rows[0]["turns"], &rows[0]["subagents"]),
        (&1.into(), &1.into())
    );

    // From the journal, to a client that declares subagents: the tree, in order.
    let mut client = setup.client(&["--load", "journal"]);
    client.request("initialize", subagents);
    let (updates, response) = client.load(&session, &cwd);
    assert!(response.get("result").is_some(), "{response}");
    let announced = updates
        .iter()
        .position(|m| {
            m["params"]["sessionId"] == session.as_str()
                && m["params"]["update"]["sessionUpdate"] == "subagent_update"
                && m["params"]["update"]["sessionId"] == child.as_str()
        })
        .expect("the announcement");
    let words = reported(&updates).expect("the child's words replayed under its ID");
    assert!(announced < words, "announced before its own updates");
    ends(client);

    // To a client that does not: the parent's view only.
    let mut client = setup.client(&["--load", "journal"]);
    client.initialize();
    let (updates, response) = client.load(&session, &cwd);
    assert!(response.get("result").is_some(), "{response}");
    assert!(
        updates
            .iter()
            .all(|m| m["params"]["sessionId"] == session.as_str()),
        "nothing under the child's ID"
    );
    let stands_for = format!("acpj-subagent-{child}");
    let call = updates
        .iter()
        .map(|m| &m["params"]["update"])
        .find(|u| u["sessionUpdate"] == "tool_call" && u["toolCallId"] == stands_for.as_str())
        .expect("a tool call stands for the subagent");
    assert_eq!(call["title"], "Explore the task", "{call}");
    let done = updates
        .iter()
        .map(|m| &m["params"]["update"])
        .any(|u| u["toolCallId"] == stands_for.as_str() && u["status"] == "completed");
    assert!(done, "its end as the call's status");
    ends(client);
}

/// The same in ACP v2, where every client has subagents: resumed from the journal on a
/// machine where the agent never saw the session, the child's updates come under its ID, in
/// v2's shapes, and the replay ends with `replay_complete` before the state and the answer.
#[test]
fn claude_agent_acp_in_v2_delegating_to_a_subagent_is_resumed_from_the_journal_with_it() {
    let setup = Setup::new(Adapter::Claude);
    let cwd = setup.cwd();
    let mut client = setup.client(&[]);
    client.initialize_v2();
    let session = client.new_session(&cwd);
    let mode = client.request(
        "session/set_config_option",
        serde_json::json!({"sessionId": session, "configId": "mode", "type": "id", "value": BYPASS}),
    );
    assert!(mode.get("result").is_some(), "{mode}");
    let from = client.received.len();
    let said = turn_v2(&mut client, &session, "DELEGATE: find the answer");
    assert!(said.contains("You said: DELEGATE"), "{said}");
    let child = delegated(&mut client, from);
    ends(client);

    let elsewhere = tempfile::tempdir().unwrap();
    let mut client = setup.client_at_home(elsewhere.path(), &[]);
    client.initialize_v2();
    let before = client.received.len();
    let (updates, answer) = client.resume_v2(&session, &cwd);
    assert!(answer.get("result").is_some(), "{answer}");
    let lines: Vec<Value> = client.received[before..]
        .iter()
        .filter_map(|r| r.json.clone())
        .filter(|m| m["method"] == "session/update")
        .collect();
    let words = lines
        .iter()
        .find(|m| {
            m["params"]["sessionId"] == child.as_str()
                && m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        })
        .expect("the child's words under its ID");
    assert!(
        words["params"]["update"]["messageId"].is_string(),
        "v2's shape: {words}"
    );
    let kinds: Vec<&str> = updates
        .iter()
        .filter_map(|u| u["sessionUpdate"].as_str())
        .collect();
    assert_eq!(
        kinds[kinds.len() - 2..],
        ["replay_complete", "state_update"],
        "{kinds:?}"
    );
    ends(client);
}

/// claude-agent-acp 0.101 through the proxy with `--offer-history`: the session's `session/new`
/// reaches the agent with the journal's MCP server added after the client's own entry; the
/// model server has the agent call its `search_sessions` (a `RECALL:` directive), and the
/// model's next request carries the answer: an earlier session of the same repository, none of
/// another's. The journal keeps the client's `mcpServers` as sent and the added entry as the
/// proxy's edit (`history_offered`).
#[test]
fn claude_agent_acp_offered_history_recalls_an_earlier_session_of_its_repository_over_mcp() {
    let setup = Setup::new(Adapter::Claude);
    std::fs::create_dir_all(setup.cwd.path().join(".git")).unwrap();
    let cwd = setup.cwd();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(elsewhere.path().join(".git")).unwrap();
    let mut client = setup.client(&[]);
    client.initialize();
    let ours = client.new_session(&cwd);
    turn(
        &mut client,
        &ours,
        "the lantern test flakes until zstd is pinned",
    );
    let theirs = client.new_session(elsewhere.path().to_str().unwrap());
    turn(&mut client, &theirs, "the lantern of another repository");
    ends(client);

    // Claude Code defers MCP tools behind its ToolSearch by default: the scripted model calls
    // the history tool directly, so the agent lists it with the others.
    let mut client = setup.client_env(
        setup.home.path(),
        setup.store.path(),
        &["--offer-history"],
        &[("ENABLE_TOOL_SEARCH".to_string(), "false".to_string())],
    );
    client.initialize();
    let mine = serde_json::json!({"name": "mine", "command": "/bin/true", "args": [], "env": []});
    let new = client.request(
        "session/new",
        serde_json::json!({"cwd": cwd, "mcpServers": [mine]}),
    );
    let session = new["result"]["sessionId"].as_str().unwrap().to_string();
    let mode = client.request(
        "session/set_mode",
        serde_json::json!({"sessionId": session, "modeId": BYPASS}),
    );
    assert!(mode.get("result").is_some(), "{mode}");
    turn(&mut client, &session, "RECALL: lantern");
    ends(client);

    let log = std::fs::read_to_string(&setup.model.log).unwrap();
    let requests: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let answered: Vec<String> = requests
        .iter()
        .flat_map(|r| r["tool_results"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t.as_str().map(str::to_string))
        .filter(|t| t.contains("quoted_excerpt"))
        .collect();
    let tools: Vec<&Value> = requests
        .iter()
        .flat_map(|r| r["tools"].as_array())
        .flatten()
        .collect();
    assert!(
        !answered.is_empty(),
        "no answer of the history server reached the model; tools offered: {tools:?}"
    );
    assert!(
        answered
            .iter()
            .all(|a| a.contains(&ours) && !a.contains(&theirs)),
        "{answered:?}"
    );

    let (code, raw, err) =
        crate::util::run_cli_store(setup.store.path(), &["show", "--raw", &session]);
    assert_eq!(code, 0, "{err}");
    let sent = raw
        .lines()
        .find(|l| l.contains("\"session/new\""))
        .expect("the session/new in the journal");
    let sent: Value = serde_json::from_str(&sent[sent.find('{').unwrap()..]).unwrap();
    assert_eq!(sent["params"]["mcpServers"], serde_json::json!([mine]));
    let offered = raw
        .lines()
        .find(|l| l.contains("history_offered"))
        .expect("the proxy's edit in the journal");
    assert!(
        offered.contains("acp-journal-history") && offered.contains("--repository"),
        "{offered}"
    );
}

/// A session of `setup`'s adapter in `repo` told (the model server's `EDIT:` directive) to
/// replace `old` by `new` in cart.py with its own edit tool; the turn ends and the proxy with
/// it. Returns the session, the directive's edit and the file as the agent left it.
fn edit_cart(
    setup: &Setup,
    repo: &crate::blame::Repo,
    old: &str,
    new: &str,
) -> (String, serde_json::Value, String) {
    let mut client = setup.client_on(setup.home.path(), repo.journals.path(), &[]);
    client.initialize();
    let session = client.new_session(repo.path().to_str().unwrap());
    let edit = serde_json::json!({
        "file_path": repo.path().join("cart.py"),
        "old_string": old,
        "new_string": new,
    });
    let prompt = format!("EDIT: {edit}\nGive totals a discount");
    let answer = crate::blame::prompt_writing_files(&mut client, 1000, &session, &prompt);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    ends(client);
    let text = std::fs::read_to_string(repo.path().join("cart.py")).unwrap();
    (session, edit, text)
}

/// claude-agent-acp edits part of a file with Claude Code's own Edit tool (the model server's
/// scripted `Read` then `Edit`), in a git repository; a person changes one of its lines and
/// commits: `blame` gives the agent's other lines to its session and turn, with its prompt,
/// agent and model, and the rest to the person.
#[test]
fn claude_agent_acp_edits_are_blamed_on_their_turn_and_a_persons_change_on_the_person() {
    let setup = Setup::new(Adapter::Claude);
    let repo = crate::blame::Repo::new();
    repo.write(
        "cart.py",
        &[
            "def total(items):",
            "    return sum(items)",
            "",
            "# end of cart",
        ],
    );
    repo.commit("base");
    let (session, edit, text) = edit_cart(
        &setup,
        &repo,
        "def total(items):\n    return sum(items)\n",
        "def total(items, discount=0.0):\n    gross = sum(items)\n    return round(gross * (1 - discount), 2)\n",
    );
    assert!(
        text.contains("discount=0.0"),
        "the agent did not edit: {text}"
    );
    // The person changes one of the agent's lines and commits.
    repo.write(
        "cart.py",
        &[
            "def total(items, discount=0.0):",
            "    gross = sum(item for item in items)",
            "    return round(gross * (1 - discount), 2)",
            "",
            "# end of cart",
        ],
    );
    repo.commit("discounts");
    let rows = repo.blame_json("cart.py");
    let whose: Vec<String> = rows
        .iter()
        .map(|row| match row["agent"].as_object() {
            None => format!("{}: {}", row["author"].as_str().unwrap(), row["text"]),
            Some(agent) => {
                assert_eq!(agent["session"], session.as_str(), "{row}");
                // The prompt's first line, at most 200 characters.
                let first: String = format!("EDIT: {edit}").chars().take(200).collect();
                assert_eq!(agent["prompt"], first, "{row}");
                assert!(
                    agent["tool_call"].as_str().is_some_and(|c| !c.is_empty()),
                    "{row}"
                );
                assert!(
                    agent["model"].as_str().is_some_and(|m| !m.is_empty()),
                    "{row}"
                );
                format!(
                    "{} turn {}: {}",
                    agent["agent"].as_str().unwrap(),
                    agent["turn"],
                    row["text"]
                )
            }
        })
        .collect();
    assert_eq!(
        whose,
        [
            "@agentclientprotocol/claude-agent-acp turn 1: \"def total(items, discount=0.0):\"",
            "Ann Person: \"    gross = sum(item for item in items)\"",
            "@agentclientprotocol/claude-agent-acp turn 1: \"    return round(gross * (1 - discount), 2)\"",
            "Ann Person: \"\"",
            "Ann Person: \"# end of cart\"",
        ],
        "{rows:#?}"
    );
}

/// codex-acp edits two places of a file with codex's own `apply_patch` (the model server's
/// scripted call of the freeform tool), in a git repository: codex-acp reports the change as
/// the tool call's `diff` content, one diff per hunk of the file (with its context lines). A
/// person changes one of its lines and commits: `blame` gives the agent's other lines, in both
/// hunks, to its session and turn, with its prompt, agent and model, and the rest to the
/// person.
#[test]
fn codex_acp_edits_are_blamed_on_their_turn_and_a_persons_change_on_the_person() {
    let setup = Setup::new(Adapter::Codex);
    let repo = crate::blame::Repo::new();
    repo.write(
        "cart.py",
        &[
            "def total(items):",
            "    return sum(items)",
            "",
            "",
            "def count(items):",
            "    return len(items)",
            "",
            "",
            "# end of cart",
        ],
    );
    repo.commit("base");
    // Three unchanged lines between the two changes: codex's diff has two hunks.
    let (session, edit, text) = edit_cart(
        &setup,
        &repo,
        "def total(items):\n    return sum(items)\n\n\ndef count(items):\n    return len(items)\n",
        "def total(items, discount=0.0):\n    gross = sum(items)\n    return round(gross * (1 - discount), 2)\n\n\ndef count(items):\n    return len(list(items))\n",
    );
    assert!(
        text.contains("discount=0.0") && text.contains("len(list(items))"),
        "the agent did not edit: {text}"
    );
    // The person changes one of the agent's lines and commits.
    repo.write(
        "cart.py",
        &[
            "def total(items, discount=0.0):",
            "    gross = sum(item for item in items)",
            "    return round(gross * (1 - discount), 2)",
            "",
            "",
            "def count(items):",
            "    return len(list(items))",
            "",
            "",
            "# end of cart",
        ],
    );
    repo.commit("discounts");
    let rows = repo.blame_json("cart.py");
    let whose: Vec<String> = rows
        .iter()
        .map(|row| match row["agent"].as_object() {
            None => format!("{}: {}", row["author"].as_str().unwrap(), row["text"]),
            Some(agent) => {
                assert_eq!(agent["session"], session.as_str(), "{row}");
                // The prompt's first line, at most 200 characters.
                let first: String = format!("EDIT: {edit}").chars().take(200).collect();
                assert_eq!(agent["prompt"], first, "{row}");
                assert_eq!(agent["tool_call"], "call_edit", "the model's call: {row}");
                assert!(
                    agent["model"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("gpt-5.5")),
                    "{row}"
                );
                format!(
                    "{} turn {}: {}",
                    agent["agent"].as_str().unwrap(),
                    agent["turn"],
                    row["text"]
                )
            }
        })
        .collect();
    assert_eq!(
        whose,
        [
            "@agentclientprotocol/codex-acp turn 1: \"def total(items, discount=0.0):\"",
            "Ann Person: \"    gross = sum(item for item in items)\"",
            "@agentclientprotocol/codex-acp turn 1: \"    return round(gross * (1 - discount), 2)\"",
            "Ann Person: \"\"",
            "Ann Person: \"\"",
            "Ann Person: \"def count(items):\"",
            "@agentclientprotocol/codex-acp turn 1: \"    return len(list(items))\"",
            "Ann Person: \"\"",
            "Ann Person: \"\"",
            "Ann Person: \"# end of cart\"",
        ],
        "{rows:#?}"
    );
}
