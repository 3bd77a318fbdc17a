//! What a host gives back: after any mix of client connections, restarts of `serve` (SIGTERM
//! or `kill -9`) and turns, every replay of a session — a `session/load`, a `session/attach` —
//! is the session's whole history as `show` reads it from the journal; the same for the stdio
//! proxy across its processes. A generated sequence of steps over one session, driven by raw
//! WebSocket clients (or a stdio client) against the TypeScript SDK's example agent; the seed
//! is printed, and `ACPJ_HISTORY_SEED` replays one.

use std::net::TcpStream;
use std::path::Path;

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{Message, WebSocket};

use crate::serve::{Served, websocket};
use crate::util::{Peers, TestClient, bin, reply_to};

/// One WebSocket client connection.
struct Conn {
    ws: WebSocket<TcpStream>,
    next_id: u64,
}

impl Conn {
    fn open(served: &Served) -> Conn {
        let ws = websocket(served);
        let mut conn = Conn { ws, next_id: 0 };
        let init = conn.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        );
        assert!(init.0.get("result").is_some(), "{}", init.0);
        conn
    }

    /// Send a request; answer the agent's requests meanwhile; return its answer and the
    /// `session/update`s that came before it.
    fn call(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        self.next_id += 1;
        let id = self.next_id;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.ws.send(Message::text(request.to_string())).unwrap();
        let mut updates = vec![];
        loop {
            let Message::Text(text) = self.ws.read().unwrap() else {
                continue;
            };
            let msg: Value = serde_json::from_str(&text).unwrap();
            if msg.get("method").is_none() && msg["id"] == id {
                return (msg, updates);
            }
            if msg["method"] == "session/update" {
                updates.push(msg["params"]["update"].clone());
            } else if let Some(reply) = reply_to(&msg) {
                self.ws.send(Message::text(reply.to_string())).unwrap();
            }
        }
    }
}

/// What a replay must give back, in order: each run of user text, of agent text, and each tool
/// call by its title (its ID may be prefixed on a session continued on a new agent session).
fn transcript<'a>(updates: impl IntoIterator<Item = &'a Value>) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for update in updates {
        let text = update["content"]["text"].as_str().unwrap_or_default();
        let voice = match update["sessionUpdate"].as_str().unwrap_or_default() {
            "user_message_chunk" => "user: ",
            "agent_message_chunk" => "agent: ",
            "tool_call" => {
                out.push(format!("tool: {}", update["title"]));
                continue;
            }
            _ => continue,
        };
        match out.last_mut() {
            Some(last) if last.starts_with(voice) => last.push_str(text),
            _ => out.push(format!("{voice}{text}")),
        }
    }
    out
}

/// The same, from the session's records as `show --json` prints them: the client's prompts
/// (as user text) and the agent's own updates (not the proxy's replays).
fn journaled(store: &Path, session: &str) -> Vec<String> {
    let out = std::process::Command::new(bin())
        .args(["--journal-dir", &store.display().to_string()])
        .args(["show", session, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut updates = vec![];
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        let msg = &record["msg"];
        if record["proxy"] == true {
            continue;
        }
        match (record["from"].as_str(), msg["method"].as_str()) {
            (Some("client"), Some("session/prompt")) => {
                for block in msg["params"]["prompt"].as_array().into_iter().flatten() {
                    updates.push(json!({"sessionUpdate": "user_message_chunk", "content": block}));
                }
            }
            (Some("agent"), Some("session/update")) => {
                updates.push(msg["params"]["update"].clone());
            }
            _ => {}
        }
    }
    transcript(&updates)
}

/// The session's turns and state as `list --json` gives them (after rebuilding the catalog from
/// the journals when `rebuild`).
fn listed(store: &Path, session: &str, rebuild: bool) -> (u64, String) {
    let mut command = std::process::Command::new(bin());
    command.args([
        "--journal-dir",
        &store.display().to_string(),
        "list",
        "--json",
    ]);
    if rebuild {
        command.arg("--rebuild-catalog");
    }
    let out = command.output().unwrap();
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["session"] == session)
        .unwrap_or_else(|| panic!("{session} not listed: {rows:#}"));
    (
        row["turns"].as_u64().unwrap(),
        row["state"].as_str().unwrap().to_string(),
    )
}

/// A small deterministic generator (xorshift64*).
struct Steps(u64);

impl Steps {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// Where the client talks: `serve` and a WebSocket connection to it, or the stdio proxy
/// (whose process is the connection: a new connection is a new proxy).
enum Front {
    Serve {
        served: Option<Served>,
        listen: String,
    },
    Stdio,
}

/// A client connection, either way.
enum Link {
    Ws(Conn),
    Stdio(TestClient),
}

impl Link {
    fn call(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        match self {
            Link::Ws(conn) => conn.call(method, params),
            Link::Stdio(client) => {
                let before = client.received.len();
                let answer = client.request(method, params);
                let updates = client.received[before..]
                    .iter()
                    .filter_map(|r| r.json.as_ref())
                    .filter(|m| m["method"] == "session/update")
                    .map(|m| m["params"]["update"].clone())
                    .collect();
                (answer, updates)
            }
        }
    }

    /// End the connection: SIGTERM (or `kill -9` when `hard`) of a stdio proxy.
    fn end(self, hard: bool) {
        if let Link::Stdio(mut client) = self {
            let signal = if hard { libc::SIGKILL } else { libc::SIGTERM };
            // SAFETY: signalling the proxy this test started.
            unsafe { libc::kill(client.child.id() as i32, signal) };
            let _ = client.child.wait();
        }
    }
}

/// The sequence's state: the store, the front, the client connection in use.
struct Host<'a> {
    store: &'a Path,
    agent: Vec<String>,
    front: Front,
    link: Option<Link>,
    /// The connection has this session open (it loaded, attached or created it).
    joined: bool,
    session: String,
    /// Prompt turns taken.
    turns: u64,
}

impl Host<'_> {
    fn start(store: &Path, agent: Vec<String>, serve: bool) -> Host<'_> {
        let front = match serve {
            true => {
                let served = Served::start(store, &["--reprime", "off"], &agent);
                let listen = served.addr.to_string();
                Front::Serve {
                    served: Some(served),
                    listen,
                }
            }
            false => Front::Stdio,
        };
        let mut host = Host {
            store,
            agent,
            front,
            link: None,
            joined: true,
            session: String::new(),
            turns: 0,
        };
        host.reconnect(false);
        let (new, _) = host.call("session/new", json!({"cwd": "/tmp", "mcpServers": []}));
        host.session = new["result"]["sessionId"].as_str().unwrap().to_string();
        host.joined = true;
        host
    }

    fn call(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        self.link.as_mut().unwrap().call(method, params)
    }

    /// A client connection (with `initialize`): another WebSocket, or another stdio proxy.
    fn connect(&self) -> Link {
        match &self.front {
            Front::Serve { served, .. } => Link::Ws(Conn::open(served.as_ref().unwrap())),
            Front::Stdio => {
                let argv =
                    crate::util::proxied_with(self.store, &["--reprime", "off"], &self.agent);
                let mut client = TestClient::spawn(&argv);
                client.initialize();
                Link::Stdio(client)
            }
        }
    }

    /// Stop the host (SIGTERM, or `kill -9` when `hard`) and start it again (on its port).
    fn restart(&mut self, hard: bool) {
        match &mut self.front {
            Front::Serve { served, listen } => {
                let old = served.take().unwrap();
                if hard {
                    // SAFETY: killing the server this test started.
                    unsafe { libc::kill(old.pid() as i32, libc::SIGKILL) };
                    drop(old);
                } else {
                    old.stop();
                }
                *served = Some(Served::start(
                    self.store,
                    &["--listen", listen, "--reprime", "off"],
                    &self.agent,
                ));
                self.reconnect(false);
            }
            // The stdio proxy is its connection.
            Front::Stdio => self.reconnect(hard),
        }
    }

    /// A new client connection in place of the one in use (which ends: `hard`, killed).
    fn reconnect(&mut self, hard: bool) {
        if let Some(link) = self.link.take() {
            link.end(hard);
        }
        self.link = Some(self.connect());
        self.joined = false;
    }

    /// Load the session on the connection in use and check the replay.
    fn load(&mut self, step: &str) {
        let session = self.session.clone();
        let (answer, updates) = self.call(
            "session/load",
            json!({"sessionId": session, "cwd": "/tmp", "mcpServers": []}),
        );
        assert!(answer.get("result").is_some(), "{step}: {answer}");
        self.joined = true;
        self.check(step, &updates);
    }

    /// Attach another connection with the full history, check it, and leave (the stdio
    /// proxy has one connection: a load there).
    fn attach(&mut self, step: &str) {
        if matches!(self.front, Front::Stdio) {
            return self.load(step);
        }
        let mut other = self.connect();
        let (answer, updates) = other.call(
            "session/attach",
            json!({"sessionId": self.session, "role": "controller", "historyPolicy": "full"}),
        );
        assert!(answer.get("result").is_some(), "{step}: {answer}");
        self.check(step, &updates);
    }

    fn prompt(&mut self, step: &str, text: &str) {
        if !self.joined {
            self.load(&format!("{step} (its load first)"));
        }
        let session = self.session.clone();
        let (answer, _) = self.call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        );
        assert_eq!(
            answer["result"]["stopReason"], "end_turn",
            "{step}: {answer}"
        );
        self.turns += 1;
        let (turns, state) = listed(self.store, &self.session, false);
        assert_eq!(state, "live", "{step}");
        // A live session's turns are counted as they end (coalesced: one may not be yet).
        assert!(
            (self.turns - 1..=self.turns).contains(&turns),
            "{step}: {turns} turns listed of {}",
            self.turns
        );
    }

    fn check(&self, step: &str, updates: &[Value]) {
        let replayed = transcript(updates);
        let recorded = journaled(self.store, &self.session);
        assert!(
            recorded.iter().filter(|l| l.starts_with("user: ")).count() >= 1,
            "{step}: nothing journaled? {recorded:#?}"
        );
        assert_eq!(
            replayed, recorded,
            "{step}: the replay is not the journal's history"
        );
    }

    /// The client leaves and the host ends cleanly.
    fn end(mut self) -> u64 {
        if let Some(link) = self.link.take() {
            link.end(false);
        }
        if let Front::Serve { served, .. } = &mut self.front {
            served.take().unwrap().stop();
        }
        self.turns
    }
}

/// A generated sequence of (new connection | restart | `kill -9` and start again | the same
/// connection) × (load | prompt | prompt then attach) over one session, checking every replay
/// against the journal, then the catalog's turns and state once the host ended cleanly.
fn every_replay_is_the_whole_history(serve: bool) {
    let peers = Peers::get();
    let seed = std::env::var("ACPJ_HISTORY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("ACPJ_HISTORY_SEED={seed}");
    let mut steps = Steps(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut host = Host::start(dir.path(), peers.ts_agent(), serve);
    host.prompt("the first turn", "turn 0");
    // Every kind of step at least once, whatever the seed: a restart, a kill, a reconnection,
    // each followed by a load and an attach after a turn; then generated steps.
    let mut plan: Vec<(u64, u64)> = vec![(1, 2), (1, 0), (2, 2), (2, 0), (0, 2), (0, 0), (3, 1)];
    plan.extend((0..5).map(|_| (steps.below(4), steps.below(3))));
    for (n, (process, op)) in plan.into_iter().enumerate() {
        let mut step = format!("step {n} (seed {seed}):");
        match process {
            0 => {
                step.push_str(" new connection,");
                host.reconnect(false);
            }
            1 => {
                step.push_str(" restarted (SIGTERM),");
                host.restart(false);
            }
            2 => {
                step.push_str(" killed (kill -9) and started again,");
                host.restart(true);
            }
            _ => step.push_str(" same connection,"),
        }
        match op {
            0 => {
                step.push_str(" load");
                host.load(&step);
            }
            1 => {
                step.push_str(" prompt");
                host.prompt(&step, &format!("turn {}", n + 1));
            }
            _ => {
                // A turn first, so the session joined is live with history on both sides of
                // a restart.
                step.push_str(" prompt, then attach");
                host.prompt(&step, &format!("turn {}", n + 1));
                host.attach(&step);
            }
        }
    }
    // The host ends cleanly: the session is closed (not torn, though runs of it were killed),
    // with every turn counted, and a catalog rebuilt from the journals says the same.
    let session = host.session.clone();
    let turns = host.end();
    for rebuild in [false, true] {
        assert_eq!(
            listed(dir.path(), &session, rebuild),
            (turns, "closed".to_string()),
            "seed {seed}, catalog rebuilt: {rebuild}"
        );
    }
}

#[test]
fn every_replay_from_a_host_restarted_and_killed_is_the_whole_journaled_history() {
    every_replay_is_the_whole_history(true);
}

#[test]
fn every_replay_from_stdio_proxies_ended_and_killed_is_the_whole_journaled_history() {
    every_replay_is_the_whole_history(false);
}
