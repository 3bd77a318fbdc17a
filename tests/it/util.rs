//! Test support: a real ACP test client over pipes, peer discovery, journal reading.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The built proxy binary.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_acp-journal"))
}

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where the page tests' screenshots go: `target/page-screenshots/`.
pub fn screenshots() -> PathBuf {
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let dir = target.parent().unwrap_or(&target).join("page-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Marks the calling test as one of the full tier: it needs `what`, which only
/// `scripts/test.sh` (the full tier) installs. Under `scripts/test.sh --fast`
/// (`ACPJ_TEST_TIER=fast`), which selects the tests that need nothing but the built binary,
/// Python 3 and the repository, such a test fails here, loudly, whether or not `what` happens
/// to be installed on this machine: the fast tier never depends on an install, and a test that
/// needs one is excluded from it in `.config/nextest.toml`, never skipped. Every fixture that
/// reaches outside the repository (the reference peers, the object stores, chromium, nginx,
/// Phoenix, the tools the tests run) calls it first.
pub fn full_tier(what: &str) {
    let tier = std::env::var("ACPJ_TEST_TIER").unwrap_or_default();
    assert!(
        tier != "fast",
        "this test needs {what}, which the fast tier does not install: add it to the \
         full-tier tests in .config/nextest.toml (profile `fast`'s default-filter)"
    );
}

/// The pinned reference peers installed by `scripts/install-peers.sh`.
pub struct Peers {
    dir: PathBuf,
}

impl Peers {
    /// Find the peers; panics with the fix when they are not installed.
    pub fn get() -> Peers {
        full_tier("the reference peers (scripts/install-peers.sh)");
        let dir = std::env::var_os("ACP_JOURNAL_PEERS")
            .map(PathBuf::from)
            .unwrap_or_else(|| root().join(".peers"));
        assert!(
            dir.join(".stamp").exists(),
            "reference peers are not installed in {}: run scripts/install-peers.sh (scripts/test.sh does)",
            dir.display()
        );
        Peers { dir }
    }

    fn python(&self, example: &str) -> Vec<String> {
        vec![
            self.dir.join("venv/bin/python").display().to_string(),
            self.dir
                .join("py-examples")
                .join(example)
                .display()
                .to_string(),
        ]
    }

    /// The Python SDK's `echo_agent.py`.
    pub fn py_echo_agent(&self) -> Vec<String> {
        self.python("echo_agent.py")
    }

    /// The Python SDK's `agent.py`.
    pub fn py_agent(&self) -> Vec<String> {
        self.python("agent.py")
    }

    /// The Python SDK's `client.py` (`client.py AGENT [ARGS]`, prompts on stdin).
    pub fn py_client(&self) -> Vec<String> {
        self.python("client.py")
    }

    /// `@agentclientprotocol/claude-agent-acp`, the adapter users install today (it needs a
    /// model server: see `tests/it/adapters.rs`).
    pub fn claude_agent(&self) -> Vec<String> {
        vec![
            "node".into(),
            self.dir
                .join("adapters/node_modules/@agentclientprotocol/claude-agent-acp/dist/index.js")
                .display()
                .to_string(),
        ]
    }

    /// `@agentclientprotocol/codex-acp`, the other adapter users install today (it needs a model
    /// server: see `tests/it/adapters.rs`).
    pub fn codex_agent(&self) -> Vec<String> {
        vec![
            "node".into(),
            self.dir
                .join("adapters/node_modules/@agentclientprotocol/codex-acp/dist/index.js")
                .display()
                .to_string(),
        ]
    }

    /// The Rust SDK's ACP v2 example agent (sessions kept in memory).
    pub fn rust_v2_agent(&self) -> Vec<String> {
        vec![self.rust_v2_example("simple_agent_v2")]
    }

    /// The Rust SDK's ACP v2 one-shot client (`--command CMD PROMPT`).
    pub fn rust_v2_client(&self) -> String {
        self.rust_v2_example("v2_one_shot_client")
    }

    fn rust_v2_example(&self, name: &str) -> String {
        self.dir
            .join("rust-sdk/src-5.0.0/target/release/examples")
            .join(name)
            .display()
            .to_string()
    }

    /// Our ACP v2 client on the TypeScript SDK's `experimental/v2` API
    /// (`tests/agents/ts_v2_client.mjs`, run from beside the SDK it imports).
    pub fn ts_v2_client(&self) -> Vec<String> {
        let script = install_beside("ts_v2_client.mjs", &self.dir.join("node-v2"));
        vec!["node".into(), script.display().to_string()]
    }

    /// Our remote client on the TypeScript SDK 2.4.0's HTTP and WebSocket client transports
    /// (`tests/agents/sdk_remote.mjs`, run from beside the SDK it imports).
    pub fn ts_remote_client(&self) -> Vec<String> {
        let script = install_beside("sdk_remote.mjs", &self.dir.join("node-v2"));
        vec!["node".into(), script.display().to_string()]
    }

    /// The same on the Python SDK 0.12.1's `acp.http` and `acp.ws` (`tests/agents/sdk_remote.py`).
    pub fn py_remote_client(&self) -> Vec<String> {
        vec![
            self.dir.join("venv/bin/python").display().to_string(),
            root()
                .join("tests/agents/sdk_remote.py")
                .display()
                .to_string(),
        ]
    }

    /// The TypeScript SDK 2.4.0's own remote server (`experimental/server` and
    /// `experimental/node`) at `http://127.0.0.1:PORT/acp`, HTTP and WebSocket, each connection
    /// bridged to its own stdio agent (`tests/agents/ts_sdk_server.mjs`, run from beside the SDK
    /// it imports). Append `[--port P] [--token T] -- AGENT...`; its first stdout line is
    /// `{"event":"listening","port":P,"url":…}`.
    #[allow(dead_code)] // the baseline for serve's tests and benchmark, which take it up next
    pub fn ts_sdk_server(&self) -> Vec<String> {
        let script = install_beside("ts_sdk_server.mjs", &self.dir.join("node-v2"));
        vec!["node".into(), script.display().to_string()]
    }

    /// Our driver of `serve`'s page in headless chromium (`tests/agents/page_driver.mjs`), run
    /// from beside the puppeteer-core that `scripts/install-chromium.sh` pins in `browser/`.
    pub fn page_driver(&self) -> Vec<String> {
        self.browser_driver("page_driver.mjs")
    }

    /// Our driver of the page's team view (`tests/agents/team_driver.mjs`), likewise.
    pub fn team_driver(&self) -> Vec<String> {
        self.browser_driver("team_driver.mjs")
    }

    /// `tests/agents/<name>`, run from beside the puppeteer-core of `browser/`.
    fn browser_driver(&self, name: &str) -> Vec<String> {
        let dir = self.dir.join("browser");
        assert!(
            dir.join(".stamp").exists(),
            "puppeteer-core is not installed in {}: run scripts/install-chromium.sh (scripts/test.sh does)",
            dir.display()
        );
        let script = install_beside(name, &dir);
        vec!["node".into(), script.display().to_string()]
    }

    /// The TypeScript SDK's scripted example agent.
    pub fn ts_agent(&self) -> Vec<String> {
        vec![
            "node".into(),
            self.dir
                .join("node/node_modules/@agentclientprotocol/sdk/dist/examples/agent.js")
                .display()
                .to_string(),
        ]
    }
}

/// A child's stderr, collected by a thread as it comes.
pub fn collect_stderr(child: &mut Child) -> std::sync::Arc<std::sync::Mutex<Vec<u8>>> {
    collect_stderr_to_end(child).0
}

/// Like [`collect_stderr`], with a channel that disconnects once the thread has read the last
/// byte (every writer closed the pipe): a process that exited may not have been read to its end
/// yet.
fn collect_stderr_to_end(
    child: &mut Child,
) -> (std::sync::Arc<std::sync::Mutex<Vec<u8>>>, Receiver<()>) {
    let stderr = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = stderr.clone();
    let mut err = child.stderr.take().expect("a piped stderr");
    let (read_to_end, end) = channel::<()>();
    std::thread::spawn(move || {
        let _read_to_end = read_to_end;
        let mut buf = [0u8; 8192];
        while let Ok(n) = err.read(&mut buf) {
            if n == 0 {
                return;
            }
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    (stderr, end)
}

/// The user texts of ACP v2 updates, whole messages and chunks alike.
pub fn v2_user_texts(updates: &[Value]) -> Vec<String> {
    updates
        .iter()
        .flat_map(|u| match u["sessionUpdate"].as_str() {
            Some("user_message_chunk") => vec![u["content"].clone()],
            Some("user_message") => u["content"].as_array().cloned().unwrap_or_default(),
            _ => vec![],
        })
        .filter_map(|c| c["text"].as_str().map(str::to_string))
        .collect()
}

/// The proxy command line in front of `agent`, journaling into `store`.
pub fn proxied(store: &Path, agent: &[String]) -> Vec<String> {
    proxied_with(store, &[], agent)
}

/// Like [`proxied`], with extra proxy options.
pub fn proxied_with(store: &Path, options: &[&str], agent: &[String]) -> Vec<String> {
    let mut cmd = vec![
        bin().display().to_string(),
        "--journal-dir".into(),
        store.display().to_string(),
        "--grace".into(),
        "2".into(),
    ];
    cmd.extend(options.iter().map(|o| o.to_string()));
    cmd.push("--".into());
    cmd.extend(agent.iter().cloned());
    cmd
}

/// A line received from the agent side, with the moment it arrived.
pub struct Received {
    /// The raw bytes, newline included.
    pub raw: Vec<u8>,
    /// Parsed JSON, if it was.
    pub json: Option<Value>,
}

/// The peer closed its output.
#[derive(Debug)]
pub struct Eof;

/// An ACP client driving a process over its stdio, recording every byte it receives.
pub struct TestClient {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Vec<u8>>,
    /// Every line received, in order.
    pub received: Vec<Received>,
    /// Every line sent, in order.
    pub sent: Vec<Vec<u8>>,
    next_id: i64,
    /// Agent stderr, collected.
    pub stderr: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    /// Disconnects once [`TestClient::stderr`] holds all the process wrote there.
    stderr_end: Receiver<()>,
}

/// Longest line [`TestClient::recv_within`] parses.
pub const PARSED_LINE_BYTES: usize = 64 * 1024;

/// How long any single wait may take before the test fails.
pub const TIMEOUT: Duration = Duration::from_secs(30);

impl TestClient {
    /// Spawn `argv` with piped stdio.
    pub fn spawn(argv: &[String]) -> TestClient {
        TestClient::spawn_env(argv, &[])
    }

    /// Spawn `argv` with piped stdio and extra environment variables.
    pub fn spawn_env(argv: &[String], env: &[(&str, &Path)]) -> TestClient {
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {argv:?}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let (stderr, stderr_end) = collect_stderr_to_end(&mut child);
        TestClient {
            stdin: child.stdin.take(),
            child,
            lines,
            received: vec![],
            sent: vec![],
            next_id: 0,
            stderr,
            stderr_end,
        }
    }

    /// Write raw bytes (a line, or anything).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.sent.push(bytes.to_vec());
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// Like [`TestClient::send_raw`], but a closed pipe (the peer died) is `false`, not a panic.
    pub fn try_send_raw(&mut self, bytes: &[u8]) -> bool {
        let Some(stdin) = self.stdin.as_mut() else {
            return false;
        };
        self.sent.push(bytes.to_vec());
        stdin.write_all(bytes).and_then(|()| stdin.flush()).is_ok()
    }

    /// The next line if one arrives within `wait`: `Ok(None)` when none did, `Err(Eof)` at EOF.
    /// Only lines up to [`PARSED_LINE_BYTES`] are parsed (`json` is `None` for longer ones).
    pub fn recv_within(&mut self, wait: Duration) -> Result<Option<&Received>, Eof> {
        match self.lines.recv_timeout(wait) {
            Ok(raw) => {
                let json = (raw.len() <= PARSED_LINE_BYTES)
                    .then(|| serde_json::from_slice(&raw).ok())
                    .flatten();
                self.received.push(Received { raw, json });
                Ok(self.received.last())
            }
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(Eof),
        }
    }

    /// Send a JSON message as one line.
    pub fn send(&mut self, msg: &Value) {
        let mut line = serde_json::to_vec(msg).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// Close our end of the agent's stdin.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The next line, or `None` at EOF; panics after [`TIMEOUT`].
    pub fn recv(&mut self) -> Option<&Received> {
        match self.lines.recv_timeout(TIMEOUT) {
            Ok(raw) => {
                let json = serde_json::from_slice(&raw).ok();
                self.received.push(Received { raw, json });
                self.received.last()
            }
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => panic!(
                "no line from the peer in {TIMEOUT:?}; stderr: {}",
                String::from_utf8_lossy(&self.stderr.lock().unwrap())
            ),
        }
    }

    /// Send a request and wait for its response, answering the peer's requests meanwhile.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let msg = match self.recv() {
                Some(r) => r.json.clone(),
                None => panic!("EOF while waiting for the response to {method}"),
            };
            let Some(msg) = msg else { continue };
            if msg.get("method").is_some() {
                if let Some(reply) = reply_to(&msg) {
                    self.send(&reply);
                }
                continue;
            }
            if msg.get("id") == Some(&json!(id)) {
                return msg;
            }
        }
    }

    /// initialize + session/new; returns the session ID.
    pub fn start_session(&mut self, cwd: &str) -> String {
        self.initialize();
        self.new_session(cwd)
    }

    /// initialize; returns the response.
    pub fn initialize(&mut self) -> Value {
        let init = self.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": false}, "clientInfo": {"name": "acp-journal-tests", "version": "0"}}),
        );
        assert!(init.get("result").is_some(), "initialize failed: {init}");
        init
    }

    /// session/load; returns the notifications received before the response, and the response.
    pub fn load(&mut self, session: &str, cwd: &str) -> (Vec<Value>, Value) {
        let before = self.received.len();
        let response = self.request(
            "session/load",
            json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
        );
        let updates = self.received[before..]
            .iter()
            .filter_map(|r| r.json.clone())
            .filter(|m| m["method"] == "session/update")
            .collect();
        (updates, response)
    }

    /// session/new only.
    pub fn new_session(&mut self, cwd: &str) -> String {
        let new = self.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
        new["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("session/new failed: {new}"))
            .to_string()
    }

    /// `initialize` asking for ACP v2; returns the response.
    pub fn initialize_v2(&mut self) -> Value {
        self.request(
            "initialize",
            json!({"protocolVersion": 2, "info": {"name": "acp-journal-tests", "version": "0"}, "capabilities": {}}),
        )
    }

    /// An ACP v2 turn: the prompt is taken (its `messageId`), then the turn ends with the
    /// agent's idle `state_update`, whose `stopReason` is returned with the session's own agent text (not its subagents').
    pub fn turn_v2(&mut self, session: &str, text: &str) -> (String, Value) {
        let before = self.received.len();
        let answer = self.prompt(session, text);
        assert!(answer["result"]["messageId"].is_string(), "{answer}");
        let stop = loop {
            let Some(m) = self.recv().expect("the turn's end").json.clone() else {
                continue;
            };
            let update = &m["params"]["update"];
            // The session's own end: a subagent (a child session) goes idle under its own ID.
            if m["params"]["sessionId"] == session
                && update["sessionUpdate"] == "state_update"
                && update["state"] == "idle"
            {
                break update["stopReason"].clone();
            }
        };
        let text = self.received[before..]
            .iter()
            .filter_map(|r| r.json.as_ref())
            .filter(|m| m["params"]["sessionId"] == session)
            .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
            .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
            .collect();
        (text, stop)
    }

    /// An ACP v2 `session/resume` replaying from the start: the updates before the answer,
    /// and the answer.
    pub fn resume_v2(&mut self, session: &str, cwd: &str) -> (Vec<Value>, Value) {
        let before = self.received.len();
        let answer = self.request(
            "session/resume",
            json!({"sessionId": session, "cwd": cwd, "mcpServers": [], "replayFrom": {"type": "start"}}),
        );
        let updates = self.received[before..]
            .iter()
            .filter_map(|r| r.json.clone())
            .filter(|m| m["method"] == "session/update")
            .map(|m| m["params"]["update"].clone())
            .collect();
        (updates, answer)
    }

    /// One prompt turn; returns the response.
    pub fn prompt(&mut self, session: &str, text: &str) -> Value {
        self.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
    }

    /// Close stdin and wait for the process to exit; returns its exit code. Its stderr is then
    /// read to the end (unless a process it left behind holds the pipe past [`TIMEOUT`]).
    pub fn finish(mut self) -> (i32, Vec<Received>) {
        self.close_stdin();
        while self.recv().is_some() {}
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                use std::os::unix::process::ExitStatusExt;
                let code = status
                    .code()
                    .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
                let _ = self.stderr_end.recv_timeout(TIMEOUT);
                return (code, self.received);
            }
            assert!(Instant::now() < deadline, "process did not exit");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// This test client's answer to a message from the agent, when it is a request.
/// The text of every `user_message_chunk` and `agent_message_chunk`, in order, tagged.
pub fn texts(updates: &[Value]) -> Vec<String> {
    updates
        .iter()
        .filter_map(|u| {
            let update = &u["params"]["update"];
            let tag = match update["sessionUpdate"].as_str()? {
                "user_message_chunk" => "user",
                "agent_message_chunk" => "agent",
                _ => return None,
            };
            Some(format!("{tag}: {}", update["content"]["text"].as_str()?))
        })
        .collect()
}

pub fn reply_to(msg: &Value) -> Option<Value> {
    msg.get("method")?;
    let req_id = msg.get("id")?.clone();
    let mut reply = json!({"jsonrpc": "2.0", "id": req_id});
    match answer(msg) {
        Ok(result) => reply["result"] = result,
        Err(error) => reply["error"] = error,
    }
    Some(reply)
}

/// How this test client answers an agent's request.
fn answer(msg: &Value) -> Result<Value, Value> {
    let params = &msg["params"];
    match msg["method"].as_str().unwrap_or("") {
        "session/request_permission" => {
            let options = params["options"].as_array().cloned().unwrap_or_default();
            let pick = options
                .iter()
                .find(|o| o["kind"] == "allow_once")
                .or(options.first())
                .map(|o| o["optionId"].clone());
            Ok(match pick {
                Some(id) => json!({"outcome": {"outcome": "selected", "optionId": id}}),
                None => json!({"outcome": {"outcome": "cancelled"}}),
            })
        }
        "fs/read_text_file" => Ok(json!({"content": "file content from the test client\n"})),
        "fs/write_text_file" => Ok(json!({})),
        other => Err(json!({"code": -32601, "message": format!("method not found: {other}")})),
    }
}

/// Every segment file of a store: its connection segments, then its session segments, each
/// sorted by path.
pub fn segment_paths(store: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for sub in ["connections", "sessions"] {
        let Ok(entries) = std::fs::read_dir(store.join(sub)) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = Vec::new();
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                for f in std::fs::read_dir(&p).unwrap() {
                    paths.push(f.unwrap().path());
                }
            } else {
                paths.push(p);
            }
        }
        paths.sort();
        out.extend(paths);
    }
    out
}

/// Every record of a store, per segment file: (path, header, records as JSON lines).
pub fn read_store(store: &Path) -> Vec<(PathBuf, Value, Vec<Value>)> {
    let mut out = Vec::new();
    for path in segment_paths(store) {
        let text = decompress_salvage(&path);
        let mut lines = text.split(|b| *b == b'\n').filter(|l| !l.is_empty());
        let header: Value = serde_json::from_slice(lines.next().unwrap()).unwrap();
        let records = lines
            .filter_map(|l| serde_json::from_slice(l).ok())
            .collect();
        out.push((path, header, records));
    }
    out
}

/// Decompress a segment with the standard `zstd` tool, keeping what precedes a torn tail.
pub fn decompress_salvage(path: &Path) -> Vec<u8> {
    full_tier("the zstd CLI");
    let out = Command::new("zstd")
        .arg("-dc")
        .arg(path)
        .output()
        .expect("zstd CLI");
    out.stdout
}

/// The `msg` values of the session journals of a store, keyed by session ID.
pub fn session_messages(store: &Path) -> std::collections::BTreeMap<String, Vec<Value>> {
    let mut map = std::collections::BTreeMap::new();
    for (_, header, records) in read_store(store) {
        if header["kind"] != "session" {
            continue;
        }
        let id = header["session"].as_str().unwrap().to_string();
        let msgs: &mut Vec<Value> = map.entry(id).or_default();
        msgs.extend(records.into_iter().filter_map(|r| r.get("msg").cloned()));
    }
    map
}

/// Run the proxy binary with arguments, returning (exit code, stdout, stderr).
pub fn run_cli(args: &[&str]) -> (i32, String, String) {
    run_cli_in(Path::new("."), args)
}

/// [`run_cli`] on the journal store `store` (`--journal-dir` first).
pub fn run_cli_store(store: &Path, args: &[&str]) -> (i32, String, String) {
    let dir = store.display().to_string();
    let mut all = vec!["--journal-dir", dir.as_str()];
    all.extend_from_slice(args);
    run_cli(&all)
}

/// [`run_cli`] in the working directory `dir`.
pub fn run_cli_in(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin())
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A private copy of a sample store from `journals/`.
pub fn sample_copy(name: &str) -> tempfile::TempDir {
    let store = tempfile::tempdir().unwrap();
    copy_dir(&root().join("journals").join(name), store.path());
    store
}

/// `tests/agents/<name>` put in `dir` (beside the packages it imports), copied whole and then
/// renamed into place: a script another test is starting from there (tests run at once, and
/// checkouts share the peers) never reads half a file.
fn install_beside(name: &str, dir: &Path) -> PathBuf {
    static COPIES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = COPIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let copy = dir.join(format!("{name}.{}.{n}.tmp", std::process::id()));
    std::fs::copy(root().join("tests/agents").join(name), &copy)
        .unwrap_or_else(|e| panic!("copying {name} into {}: {e}", dir.display()));
    let script = dir.join(name);
    std::fs::rename(&copy, &script).expect("putting the script in place");
    script
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let dest = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &dest);
        } else {
            std::fs::copy(&path, &dest).unwrap();
        }
    }
}

/// The first entry of a directory (the only one, where the tests use it).
pub fn first_entry(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
}

/// The ID of the only session in a store (the sample stores hold one each).
pub fn only_session(store: &Path) -> String {
    let (code, out, err) = run_cli(&["list", "--journal-dir", store.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let list: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(list.len(), 1, "{out}");
    list[0]["session"].as_str().unwrap().to_string()
}

/// The Python 3 interpreter itself, not a version manager's shim (which costs a few
/// processes at every start).
pub fn python() -> String {
    static PYTHON: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PYTHON
        .get_or_init(|| {
            Command::new("python3")
                .args(["-c", "import sys; print(sys.executable)"])
                .output()
                .ok()
                .and_then(|o| String::from_utf8(o.stdout).ok())
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "python3".into())
        })
        .clone()
}

/// The scripted test agent (`tests/agents/scripted_agent.py`) in `mode`.
pub fn scripted(mode: &str) -> Vec<String> {
    vec![
        python(),
        root()
            .join("tests/agents/scripted_agent.py")
            .display()
            .to_string(),
        mode.into(),
    ]
}

/// Every message payload (wire form) from `side` in every segment of `store`, in wire order
/// (a record copied into two journals counted once).
pub fn journaled(store: &Path, side: acp_journal::wire::Side) -> Vec<Vec<u8>> {
    journaled_in(&segment_paths(store), side)
}

/// Like [`journaled`], over the segment files `paths` (of one run).
pub fn journaled_in(paths: &[PathBuf], side: acp_journal::wire::Side) -> Vec<Vec<u8>> {
    let mut all = vec![];
    for path in paths {
        let reader = acp_journal::journal::SegmentReader::open(path).unwrap();
        for r in reader {
            if let acp_journal::journal::Body::Message { from, payload } = r.body
                && from == side
            {
                all.push((r.seq, payload.wire()));
            }
        }
    }
    all.sort();
    all.dedup();
    all.into_iter().map(|(_, b)| b).collect()
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// Wait (up to 10 s) for process `pid` to be gone or a zombie; false if it is still running.
pub fn wait_gone(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        // Reap if it is our zombie child; otherwise just poll.
        if !alive(pid)
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map_or(true, |s| s.contains(") Z "))
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}
