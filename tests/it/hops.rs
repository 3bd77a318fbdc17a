//! Issue 51: a session continued on any machine, any number of times, with the real adapters
//! (claude-agent-acp 0.101, codex-acp 2.6) against the loopback model server, through the
//! built binary on s3s-fs. Each machine is a journal directory and a home of its own (where the
//! adapter keeps its own copies of sessions). At every hop the session is loaded on a machine
//! and asked "what was the first thing I asked?" with a marker of its own; the model must be
//! shown every earlier prompt's marker, whichever machine made the last turn, after agents
//! restarted and a host killed between hops. Then each machine's default `session/list` shows
//! the session once, under the title it had, and every entry it shows loads.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::adapters::{Adapter, Setup, ends, turn, user_texts};
use crate::respawn::{agent_pid, kill9, kill9_and_await_the_next};
use crate::stores::{S3sFs, run_with};
use crate::util::TestClient;

/// One machine: the adapter's home and a journal directory.
struct Machine {
    name: &'static str,
    home: tempfile::TempDir,
    journals: tempfile::TempDir,
}

impl Machine {
    fn new(name: &'static str) -> Machine {
        Machine {
            name,
            home: tempfile::tempdir().unwrap(),
            journals: tempfile::tempdir().unwrap(),
        }
    }
}

/// What happens on a machine at a hop, besides the load and the turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Then {
    /// The proxy ends cleanly.
    Ends,
    /// The agent is killed (`kill -9`) after the turn and a second turn follows on its
    /// restarted agent; then the proxy ends.
    AgentKilled,
    /// The proxy (the host) is killed with `kill -9` once the store holds the turn.
    HostKilled,
}

/// The fleet of the test: the adapter's setup (model server, cwd), the store, the machines.
struct Fleet {
    setup: Setup,
    store: S3sFs,
    url: String,
    machines: Vec<Machine>,
    /// The session, once made.
    session: Option<String>,
    /// The markers of the prompts so far, in order.
    markers: Vec<String>,
    /// How many of the markers before it each turn's model request held, and of how many.
    held: Vec<(String, usize, usize)>,
    /// The re-prime titles the editor was given, at which hop.
    reprime_titles: Vec<String>,
    /// What each hop's proxy said of how it brought the session up (its log lines about the
    /// agent's copies).
    said: Vec<String>,
}

impl Fleet {
    fn new(adapter: Adapter, machines: &[&'static str]) -> Fleet {
        let store = S3sFs::start();
        let url = store.url("acp");
        let setup = Setup::new(adapter);
        let machines: Vec<Machine> = machines.iter().map(|m| Machine::new(m)).collect();
        // Codex reads its model provider from $CODEX_HOME/config.toml: each home has it.
        let config = setup.home.path().join(".codex/config.toml");
        for m in &machines {
            let codex = m.home.path().join(".codex");
            std::fs::create_dir_all(&codex).unwrap();
            std::fs::copy(&config, codex.join("config.toml")).unwrap();
        }
        Fleet {
            setup,
            store,
            url,
            machines,
            session: None,
            markers: Vec::new(),
            held: Vec::new(),
            reprime_titles: Vec::new(),
            said: Vec::new(),
        }
    }

    fn machine(&self, name: &str) -> &Machine {
        self.machines.iter().find(|m| m.name == name).unwrap()
    }

    fn client(&self, name: &str) -> TestClient {
        let m = self.machine(name);
        let options = [
            "--store",
            self.url.as_str(),
            "--ship-interval",
            "0.2",
            "--lease-ttl",
            "3",
        ];
        self.setup.client_env(
            m.home.path(),
            m.journals.path(),
            &options,
            &self.store.env(),
        )
    }

    /// The user texts of the model's last turn request, joined.
    fn last_request(&self) -> String {
        self.setup
            .model
            .turns()
            .last()
            .cloned()
            .unwrap_or_default()
            .join("\n")
    }

    /// One turn asking for the first prompt, with a new marker; records how many of the
    /// markers so far the model was shown.
    fn ask(&mut self, client: &mut TestClient, at: &str) {
        let session = self.session.clone().unwrap();
        let marker = format!("mk{:02}q", self.markers.len() + 1);
        self.markers.push(marker.clone());
        let text = format!("What was the first thing I asked? {marker}");
        let answer = turn(client, &session, &text);
        assert!(answer.contains(&marker), "{answer}");
        let shown = self.last_request();
        let held = self.markers.iter().filter(|m| shown.contains(*m)).count();
        eprintln!(
            "hop {} on {at}: the model held {held} of {} prompts",
            self.held.len() + 1,
            self.markers.len()
        );
        self.held.push((at.to_string(), held, self.markers.len()));
    }

    /// A hop: `name` loads the session (or starts it) and asks; then `then`.
    fn hop(&mut self, name: &'static str, then: Then) {
        let mut client = self.client(name);
        client.initialize();
        let cwd = self.setup.cwd();
        match self.session.clone() {
            None => self.session = Some(client.new_session(&cwd)),
            Some(session) => {
                let (updates, response) = client.load(&session, &cwd);
                assert!(response.get("result").is_some(), "{name}: {response}");
                let users = user_texts(&updates);
                assert_eq!(
                    users.len(),
                    self.markers.len(),
                    "{name}: the editor is shown every turn: {users:?}\n{}",
                    String::from_utf8_lossy(&client.stderr.lock().unwrap())
                );
            }
        }
        self.ask(&mut client, name);
        if then == Then::AgentKilled {
            let proxy = client.child.id();
            kill9_and_await_the_next(proxy, agent_pid(proxy, None));
            self.ask(&mut client, name);
        }
        // No title the editor is given is a re-prime's.
        let titles = session_info_titles(&client.received);
        self.reprime_titles.extend(
            titles
                .into_iter()
                .filter(|t| t.contains("Context restored"))
                .map(|t| format!("hop {} on {name}: {t}", self.held.len())),
        );
        let log = client.stderr.clone();
        if then == Then::HostKilled {
            self.await_shipped();
            kill9(client.child.id().cast_signed());
            let _ = client.child.wait();
        } else {
            ends(client);
        }
        let log = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
        self.said.extend(
            log.lines()
                .filter(|l| l.contains("acp-journal replayed session"))
                .map(|l| format!("hop {} on {name}: {l}", self.held.len())),
        );
    }

    /// The proxies said why they brought the session up afresh as it was: never that an
    /// agent that loads sessions cannot.
    fn check_said(&self) {
        assert!(
            self.said
                .iter()
                .all(|l| !l.contains("cannot load sessions")),
            "{:#?}",
            self.said
        );
        assert!(
            self.said
                .iter()
                .any(|l| l.contains("This agent's own copies of session")
                    && l.contains("on this host hold")),
            "{:#?}",
            self.said
        );
    }

    /// What a machine with no journals of its own reads of the store: `list` names the agent
    /// and the session's size; `show` reads the store, then, the store down, the local copy,
    /// and says so.
    fn check_readers(&mut self, agent: &str) {
        let session = self.session.clone().unwrap();
        let rows = self.store_list();
        let row = rows
            .iter()
            .find(|r| r["session"] == session.as_str())
            .unwrap();
        assert_eq!(row["agent_name"], agent, "{row}");
        assert!(row["bytes"].as_u64().is_some_and(|b| b > 0), "{row}");
        assert!(row["last_turn_ended"].is_string(), "{row}");
        assert!(
            row["title"]
                .as_str()
                .is_some_and(|t| t.starts_with("What was the first thing I asked")),
            "{row}"
        );
        let reader = tempfile::tempdir().unwrap();
        let mut env = self.store.env();
        env.push(("XDG_CACHE_HOME".into(), reader.path().display().to_string()));
        let journals = reader.path().join("journals").display().to_string();
        let show = |env: &[(String, String)]| {
            run_with(
                env,
                &[
                    "--journal-dir",
                    &journals,
                    "--store",
                    &self.url,
                    "show",
                    &session,
                ],
            )
        };
        let (code, shown, err) = show(&env);
        assert_eq!(code, 0, "{err}");
        assert!(shown.contains(self.markers.last().unwrap()), "{shown}");
        self.store.stop();
        let (code, again, err) = show(&env);
        self.store.resume();
        assert_eq!(code, 0, "{err}");
        assert_eq!(again, shown);
        assert!(
            err.contains("reading the local copy of the store instead"),
            "{err}"
        );
    }

    /// Until a reader of the store counts every turn so far in the session.
    fn await_shipped(&self) {
        let session = self.session.clone().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let rows = self.store_list();
            let turns = rows
                .iter()
                .find(|r| r["session"] == session.as_str())
                .and_then(|r| r["turns"].as_u64());
            if turns == Some(self.markers.len() as u64) {
                return;
            }
            assert!(Instant::now() < deadline, "never shipped: {rows:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `list --store --json` from a machine with no journals of its own.
    fn store_list(&self) -> Vec<Value> {
        let reader = tempfile::tempdir().unwrap();
        let mut env = self.store.env();
        env.push(("XDG_CACHE_HOME".into(), reader.path().display().to_string()));
        let journals = reader.path().join("journals").display().to_string();
        let (_, out, err) = run_with(
            &env,
            &[
                "--journal-dir",
                &journals,
                "--store",
                &self.url,
                "list",
                "--json",
            ],
        );
        serde_json::from_str(&out).unwrap_or_else(|_| panic!("{out}{err}"))
    }

    /// What every hop must show: every turn knew every earlier prompt, no re-prime became a
    /// title, each proxy said how it brought the session up, and each machine's list is right.
    fn check_every_hop(&self) {
        self.check_every_turn_known();
        assert!(self.reprime_titles.is_empty(), "{:?}", self.reprime_titles);
        self.check_said();
        for machine in &self.machines {
            self.check_list(machine.name);
        }
    }

    /// Every turn's model request held every earlier prompt.
    fn check_every_turn_known(&self) {
        let lacking: Vec<_> = self.held.iter().filter(|(_, h, of)| h != of).collect();
        assert!(
            lacking.is_empty(),
            "turns whose model lacked prompts: {lacking:?} of {:?}",
            self.held
        );
    }

    /// `machine`'s default `session/list`: the session once, titled as it was before any
    /// re-prime, no agent-side session of a re-prime, and every entry loads.
    fn check_list(&self, name: &'static str) {
        let session = self.session.clone().unwrap();
        let mut client = self.client(name);
        client.initialize();
        let cwd = self.setup.cwd();
        let list = client.request("session/list", json!({"cwd": cwd}));
        let rows = list["result"]["sessions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let ids: Vec<&str> = rows
            .iter()
            .filter_map(|r| r["sessionId"].as_str())
            .collect();
        assert_eq!(
            ids,
            [session.as_str()],
            "{name}: one entry, the session: {list}"
        );
        let title = rows[0]["title"].as_str().unwrap_or_default();
        assert!(
            !title.contains("Context restored") && title.contains("first thing I asked"),
            "{name}: {list}"
        );
        for id in ids {
            let (_, response) = client.load(id, &cwd);
            assert!(response.get("result").is_some(), "{name}: {id}: {response}");
        }
        ends(client);
    }
}

/// The titles of the `session_info_update`s among `received`.
fn session_info_titles(received: &[crate::util::Received]) -> Vec<String> {
    received
        .iter()
        .filter_map(|r| r.json.as_ref())
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "session_info_update")
        .filter_map(|m| m["params"]["update"]["title"].as_str())
        .map(str::to_string)
        .collect()
}

#[test]
fn claude_agent_acp_hopping_between_two_machines_knows_every_turn_at_every_hop() {
    let mut fleet = Fleet::new(Adapter::Claude, &["A", "B"]);
    fleet.hop("A", Then::Ends);
    fleet.hop("B", Then::Ends);
    fleet.hop("A", Then::Ends);
    fleet.hop("B", Then::HostKilled);
    fleet.hop("B", Then::Ends);
    fleet.hop("A", Then::Ends);
    fleet.hop("A", Then::AgentKilled);
    fleet.hop("B", Then::Ends);
    fleet.check_every_hop();
    fleet.check_readers("Claude Agent");
}

#[test]
fn codex_acp_hopping_between_three_machines_knows_every_turn_at_every_hop() {
    let mut fleet = Fleet::new(Adapter::Codex, &["A", "B", "C"]);
    fleet.hop("A", Then::Ends);
    fleet.hop("B", Then::Ends);
    fleet.hop("C", Then::Ends);
    fleet.hop("A", Then::HostKilled);
    fleet.hop("A", Then::Ends);
    fleet.hop("C", Then::Ends);
    fleet.hop("B", Then::AgentKilled);
    fleet.hop("B", Then::Ends);
    fleet.check_every_hop();
}
