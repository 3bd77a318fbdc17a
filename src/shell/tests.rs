//! The shell driven end to end without processes: [`run`] between in-memory client and agent
//! pipes, a fake agent process and a temporary journal directory.
//!
//! Both destinations are [`Probe`]s: at the moment the proxy hands a line to one, the probe reads
//! the journal directory's segments from disk and checks that the line's record is already there
//! (for a line handed over in pieces, already at its first piece). A shell that forwards a line
//! before its record is written fails every test that relays a line through the probes.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::{mpsc, oneshot};

use super::journals::FsyncPolicy;
use super::pipes::Output;
use super::*;
use crate::journal::dir::segments_in;
use crate::journal::{Body, JournalDir, SegmentReader};
use crate::proto;
use crate::wire::Side;

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#;
/// An agent with no session capabilities: the proxy lists and loads sessions for it.
const INIT_OK: &str =
    r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{}}}"#;
const NEW: &str =
    r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}"#;
const NEW_OK: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"S"}}"#;
const PROMPT: &str = r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"hi"}]}}"#;
const PROMPT_OK: &str = r#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}"#;

fn update(text: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"S","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"{text}"}}}}}}}}"#
    )
}

/// The messages of every segment in the journal directory, as wire lines, with their counts.
fn journaled(root: &Path) -> HashMap<Vec<u8>, usize> {
    let mut dirs = vec![root.join("connections")];
    if let Ok(sessions) = std::fs::read_dir(root.join("sessions")) {
        dirs.extend(sessions.flatten().map(|e| e.path()));
    }
    let mut lines = HashMap::new();
    for dir in dirs {
        for path in segments_in(&dir).unwrap_or_default() {
            let Ok(reader) = SegmentReader::open(&path) else {
                continue;
            };
            for record in reader {
                if let Body::Message { payload, .. } = record.body {
                    *lines.entry(payload.wire()).or_default() += 1;
                }
            }
        }
    }
    lines
}

/// The records of one direction (`from`) in a session's segments, in order, as wire lines.
fn session_messages(root: &Path, session: &str, from: Side) -> Vec<Vec<u8>> {
    let journals = JournalDir::new(root);
    let mut lines = Vec::new();
    for path in segments_in(&journals.session_dir(session)).unwrap() {
        for record in SegmentReader::open(&path).unwrap() {
            if let Body::Message { from: f, payload } = record.body
                && f == from
            {
                lines.push(payload.wire());
            }
        }
    }
    lines
}

/// The kinds of the events in a session's segments, in order.
fn session_events(root: &Path, session: &str) -> Vec<String> {
    let journals = JournalDir::new(root);
    let mut events = Vec::new();
    for path in segments_in(&journals.session_dir(session)).unwrap() {
        for record in SegmentReader::open(&path).unwrap() {
            if let Body::Event(e) = record.body {
                events.push(e.kind().to_string());
            }
        }
    }
    events
}

/// What the probes saw: every forwarded line against the journal on disk at that moment.
struct Checker {
    root: PathBuf,
    /// Lines forwarded so far (both directions), with their counts.
    forwarded: HashMap<Vec<u8>, usize>,
    /// The journal directory's messages at the last scan.
    journaled: HashMap<Vec<u8>, usize>,
    /// Lines forwarded before their record was on disk.
    early: Vec<String>,
}

impl Checker {
    fn new(root: &Path) -> Arc<Mutex<Checker>> {
        Arc::new(Mutex::new(Checker {
            root: root.to_path_buf(),
            forwarded: HashMap::new(),
            journaled: HashMap::new(),
            early: Vec::new(),
        }))
    }

    /// The first bytes of a line are being forwarded now: a record that starts with them must
    /// be readable already (a line is forwarded in pieces when the destination is slower).
    fn starting(&mut self, start: &[u8]) {
        if !self.journaled.keys().any(|k| k.starts_with(start)) {
            self.journaled = journaled(&self.root);
            if !self.journaled.keys().any(|k| k.starts_with(start)) {
                self.early
                    .push(String::from_utf8_lossy(&start[..start.len().min(160)]).into_owned());
            }
        }
    }

    /// `line` is being forwarded now: its record must be readable already.
    fn forwarding(&mut self, line: &[u8]) {
        let count = self.forwarded.entry(line.to_vec()).or_default();
        *count += 1;
        let count = *count;
        if self.journaled.get(line).copied().unwrap_or(0) < count {
            self.journaled = journaled(&self.root);
            if self.journaled.get(line).copied().unwrap_or(0) < count {
                self.early
                    .push(String::from_utf8_lossy(&line[..line.len().min(160)]).into_owned());
            }
        }
    }
}

/// A destination that checks each line against the journal on disk as it takes it, then
/// passes it to an in-memory pipe.
struct Probe {
    inner: DuplexStream,
    /// The line being forwarded, so far.
    partial: Vec<u8>,
    /// Its start was checked.
    started: bool,
    checker: Arc<Mutex<Checker>>,
}

impl Probe {
    fn took(&mut self, bytes: &[u8]) {
        self.partial.extend_from_slice(bytes);
        let mut checker = self.checker.lock();
        while let Some(end) = memchr::memchr(b'\n', &self.partial) {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            checker.forwarding(&line);
            self.started = false;
        }
        if !self.partial.is_empty() && !self.started {
            checker.starting(&self.partial);
            self.started = true;
        }
    }
}

impl AsyncWrite for Probe {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let n = std::task::ready!(Pin::new(&mut self.inner).poll_write(cx, buf))?;
        self.took(&buf[..n]);
        Poll::Ready(Ok(n))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let joined = bufs.iter().map(|b| &**b).collect::<Vec<&[u8]>>().concat();
        self.poll_write(cx, &joined)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The agent's process: exits when the test says, records the signals it gets.
struct FakeProcess {
    exit: oneshot::Receiver<i32>,
    got: mpsc::UnboundedSender<i32>,
}

impl Process for FakeProcess {
    async fn wait(&mut self) -> io::Result<i32> {
        Ok((&mut self.exit).await.unwrap_or(1))
    }

    fn signal(&mut self, sig: i32) {
        let _ = self.got.send(sig);
    }

    fn kill(&mut self) {
        let _ = self.got.send(libc::SIGKILL);
    }
}

/// The test's ends of the pipes, and the fake agent's controls.
struct Peers {
    /// The client's lines to the proxy.
    client: DuplexStream,
    /// What the client receives.
    to_client: BufReader<DuplexStream>,
    /// What the agent receives.
    to_agent: BufReader<DuplexStream>,
    /// The agent's stdout.
    agent: DuplexStream,
    /// The agent's stderr.
    agent_err: DuplexStream,
    /// Makes the agent's process exit with a code.
    exit: oneshot::Sender<i32>,
    /// Signals the agent's process got.
    got: mpsc::UnboundedReceiver<i32>,
    /// Signals for the proxy.
    signals: mpsc::Sender<i32>,
    checker: Arc<Mutex<Checker>>,
    /// The ends of the agents the proxy starts after this one, in order.
    next: std::collections::VecDeque<AgentEnds>,
}

/// The test's ends of one agent the proxy may start.
struct AgentEnds {
    to_agent: BufReader<DuplexStream>,
    agent: DuplexStream,
    agent_err: DuplexStream,
    exit: oneshot::Sender<i32>,
    got: mpsc::UnboundedReceiver<i32>,
}

impl Peers {
    async fn client_says(&mut self, line: &str) {
        self.client
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }

    async fn agent_says(&mut self, line: &str) {
        self.agent
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }

    async fn client_gets(&mut self) -> Value {
        read_json(&mut self.to_client).await
    }

    async fn agent_gets(&mut self) -> Value {
        read_json(&mut self.to_agent).await
    }

    /// The agent closes its output and exits with `code`; the test's ends are then those of
    /// the next agent the proxy may start, if any.
    fn agent_exits(self, code: i32) -> Peers {
        let Peers {
            client,
            to_client,
            to_agent,
            agent,
            agent_err,
            exit,
            got,
            signals,
            checker,
            mut next,
        } = self;
        drop((agent, agent_err));
        exit.send(code).unwrap();
        let ends = next.pop_front().unwrap_or_else(|| {
            let (dead, _) = tokio::io::duplex(1);
            let (dead_err, _) = tokio::io::duplex(1);
            let (exit, _) = oneshot::channel();
            AgentEnds {
                to_agent,
                agent: dead,
                agent_err: dead_err,
                exit,
                got,
            }
        });
        Peers {
            client,
            to_client,
            to_agent: ends.to_agent,
            agent: ends.agent,
            agent_err: ends.agent_err,
            exit: ends.exit,
            got: ends.got,
            signals,
            checker,
            next,
        }
    }

    /// The lines forwarded before their record was on disk.
    fn early(&self) -> Vec<String> {
        self.checker.lock().early.clone()
    }

    /// Every forwarded line was on disk before it was forwarded.
    fn assert_journaled_first(&self) {
        let early = self.early();
        assert!(
            early.is_empty(),
            "{} lines forwarded before they were journaled, the first: {:?}",
            early.len(),
            &early[..early.len().min(3)]
        );
    }
}

async fn read_line(from: &mut BufReader<DuplexStream>) -> String {
    let mut line = String::new();
    let n = tokio::time::timeout(Duration::from_secs(20), from.read_line(&mut line))
        .await
        .expect("a line in time")
        .unwrap();
    assert!(n > 0, "end of stream");
    line
}

async fn read_json(from: &mut BufReader<DuplexStream>) -> Value {
    serde_json::from_str(&read_line(from).await).unwrap()
}

fn config(root: &Path) -> ShellConfig {
    ShellConfig {
        run: crate::journal::dir::run_id(1_795_000_000_000_000, std::process::id()),
        started_us: 1_795_000_000_000_000,
        agent: vec!["fake-agent".into()],
        journals: JournalDir::new(root),
        fsync: FsyncPolicy::Never,
        core: proto::Config {
            redact: false,
            ..proto::Config::default()
        },
        grace: Duration::from_secs(5),
        respawn: 0,
        list_all: false,
        tracing: Default::default(),
        fleet: None,
    }
}

/// The proxy's future and the test's ends, with `client_buffer` bytes of pipe to the client.
fn start(root: &Path, client_buffer: usize) -> (impl Future<Output = anyhow::Result<i32>>, Peers) {
    start_with(config(root), client_buffer, 1)
}

/// Bytes of pipe from the client to the proxy.
const CLIENT_PIPE: usize = 64 << 10;

/// The proxy with `config`, and `agents` agents for it to start, one after the other.
fn start_with(
    config: ShellConfig,
    client_buffer: usize,
    agents: usize,
) -> (impl Future<Output = anyhow::Result<i32>>, Peers) {
    let checker = Checker::new(config.journals.root());
    let (client, client_input) = tokio::io::duplex(CLIENT_PIPE);
    let (client_output, to_client) = tokio::io::duplex(client_buffer);
    let (signals, signals_rx) = mpsc::channel(4);
    let probe = |inner| {
        Box::new(Probe {
            inner,
            partial: Vec::new(),
            started: false,
            checker: checker.clone(),
        })
    };
    let client_end = Client {
        input: pipes::ClientInput::reader(Box::new(client_input)),
        output: Output::writer(probe(client_output)),
    };
    let mut processes = std::collections::VecDeque::new();
    let mut ends = std::collections::VecDeque::new();
    for _ in 0..agents {
        let (agent_stdin, to_agent) = tokio::io::duplex(1 << 20);
        let (agent, agent_stdout) = tokio::io::duplex(64 << 10);
        let (agent_err, agent_stderr) = tokio::io::duplex(1 << 10);
        let (exit, exit_rx) = oneshot::channel();
        let (got_tx, got) = mpsc::unbounded_channel();
        processes.push_back(Agent {
            stdin: Output::writer(probe(agent_stdin)),
            stdout: Box::new(agent_stdout) as pipes::Reader,
            stderr: Box::new(agent_stderr) as pipes::Reader,
            process: FakeProcess {
                exit: exit_rx,
                got: got_tx,
            },
        });
        ends.push_back(AgentEnds {
            to_agent: BufReader::new(to_agent),
            agent,
            agent_err,
            exit,
            got,
        });
    }
    let spawn = move || {
        processes
            .pop_front()
            .ok_or_else(|| std::io::Error::other("no more agents"))
    };
    let proxy = run(config, Front::Editor(client_end), spawn, signals_rx);
    let first = ends.pop_front().expect("one agent at least");
    let peers = Peers {
        client,
        to_client: BufReader::new(to_client),
        to_agent: first.to_agent,
        agent: first.agent,
        agent_err: first.agent_err,
        exit: first.exit,
        got: first.got,
        signals,
        checker,
        next: ends,
    };
    (proxy, peers)
}

/// Initialize and open session `S`, both peers answering.
async fn open_session(p: &mut Peers) {
    p.client_says(INIT).await;
    assert_eq!(p.agent_gets().await["method"], "initialize");
    p.agent_says(INIT_OK).await;
    let init = p.client_gets().await;
    assert_eq!(init["result"]["agentCapabilities"]["loadSession"], true);
    p.client_says(NEW).await;
    assert_eq!(p.agent_gets().await["method"], "session/new");
    p.agent_says(NEW_OK).await;
    assert_eq!(p.client_gets().await["result"]["sessionId"], "S");
}

/// A prompt turn of session `S` with `updates` message chunks.
async fn prompt_turn(p: &mut Peers, updates: usize) {
    p.client_says(PROMPT).await;
    assert_eq!(p.agent_gets().await["method"], "session/prompt");
    for i in 0..updates {
        p.agent_says(&update(&format!("part {i}"))).await;
        let got = p.client_gets().await;
        assert_eq!(
            got["params"]["update"]["content"]["text"],
            format!("part {i}")
        );
    }
    p.agent_says(PROMPT_OK).await;
    assert_eq!(p.client_gets().await["result"]["stopReason"], "end_turn");
}

/// The client leaves, the agent then exits; returns the peers' ends.
async fn shut_down(mut p: Peers, code: i32) -> Peers {
    p.client.shutdown().await.unwrap();
    let mut p = p.agent_exits(code);
    // The agent's stdin is closed once the client left.
    let mut rest = String::new();
    p.to_agent.read_line(&mut rest).await.unwrap();
    assert_eq!(rest, "");
    p
}

#[tokio::test]
async fn relayed_lines_are_on_disk_before_they_are_forwarded() {
    let dir = tempfile::tempdir().unwrap();
    let (proxy, mut p) = start(dir.path(), 1 << 20);
    let script = async move {
        open_session(&mut p).await;
        prompt_turn(&mut p, 20).await;
        // An agent request and the client's answer.
        p.agent_says(r#"{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"S","toolCall":{"toolCallId":"c1"},"options":[]}}"#).await;
        assert_eq!(
            p.client_gets().await["method"],
            "session/request_permission"
        );
        p.client_says(r#"{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"cancelled"}}}"#)
            .await;
        assert_eq!(
            p.agent_gets().await["result"]["outcome"]["outcome"],
            "cancelled"
        );
        shut_down(p, 0).await
    };
    let (code, p) = tokio::join!(proxy, script);
    assert_eq!(code.unwrap(), 0);
    p.assert_journaled_first();
    let checker = p.checker.lock();
    assert_eq!(checker.forwarded.values().sum::<usize>(), 4 + 22 + 2);
}

#[tokio::test]
async fn proxy_made_answers_are_on_disk_before_they_are_forwarded() {
    let dir = tempfile::tempdir().unwrap();
    let (proxy, mut p) = start(dir.path(), 1 << 20);
    let script = async move {
        open_session(&mut p).await;
        prompt_turn(&mut p, 0).await;
        // The agent cannot list sessions: the proxy answers from the catalog (which lists
        // sessions with a prompt).
        p.client_says(r#"{"jsonrpc":"2.0","id":7,"method":"session/list","params":{}}"#)
            .await;
        let list = p.client_gets().await;
        assert_eq!(list["id"], 7);
        assert_eq!(list["result"]["sessions"][0]["sessionId"], "S");
        // Nor close them: answered too.
        p.client_says(
            r#"{"jsonrpc":"2.0","id":8,"method":"session/close","params":{"sessionId":"S"}}"#,
        )
        .await;
        assert_eq!(p.client_gets().await["id"], 8);
        // The agent is told to stop working on it.
        assert_eq!(p.agent_gets().await["method"], "session/cancel");
        shut_down(p, 0).await
    };
    let (code, p) = tokio::join!(proxy, script);
    assert_eq!(code.unwrap(), 0);
    p.assert_journaled_first();
}

#[tokio::test]
async fn agent_exit_while_the_client_waits_answers_it_and_returns_the_agents_code() {
    let dir = tempfile::tempdir().unwrap();
    let (proxy, mut p) = start(dir.path(), 1 << 20);
    let script = async move {
        open_session(&mut p).await;
        p.client_says(PROMPT).await;
        assert_eq!(p.agent_gets().await["method"], "session/prompt");
        p.agent_says(&update("half an answer")).await;
        p.client_gets().await;
        // The agent dies mid-turn.
        let mut p = p.agent_exits(3);
        let answer = p.client_gets().await;
        assert_eq!(answer["id"], 2);
        assert_eq!(answer["error"]["code"], -32603);
        assert_eq!(answer["error"]["message"], "the agent exited");
        // The proxy is done: the client's stream ends.
        let mut rest = String::new();
        p.to_client.read_line(&mut rest).await.unwrap();
        assert_eq!(rest, "");
        (p, answer)
    };
    let (code, (p, answer)) = tokio::join!(proxy, script);
    assert_eq!(code.unwrap(), 3, "the agent's exit code");
    p.assert_journaled_first();
    // The answer is in the session's journal, after the prompt, as a line the proxy made.
    let to_client = session_messages(dir.path(), "S", Side::Agent);
    let last: Value = serde_json::from_slice(to_client.last().unwrap()).unwrap();
    assert_eq!(last, answer);
}

#[tokio::test]
async fn a_load_served_from_the_journal_is_on_disk_before_it_is_forwarded() {
    let dir = tempfile::tempdir().unwrap();
    // A first run records session S.
    let (proxy, mut p) = start(dir.path(), 1 << 20);
    let script = async move {
        open_session(&mut p).await;
        prompt_turn(&mut p, 3).await;
        shut_down(p, 0).await
    };
    let (code, _) = tokio::join!(proxy, script);
    assert_eq!(code.unwrap(), 0);
    let recorded = journaled(dir.path());

    // A second run loads it for an agent without loadSession.
    let (proxy, mut p) = start(dir.path(), 1 << 20);
    let script = async move {
        p.client_says(INIT).await;
        p.agent_gets().await;
        p.agent_says(INIT_OK).await;
        p.client_gets().await;
        p.client_says(r#"{"jsonrpc":"2.0","id":5,"method":"session/load","params":{"sessionId":"S","cwd":"/w","mcpServers":[]}}"#).await;
        // The history comes first, from the journal.
        let mut replayed = Vec::new();
        loop {
            let line = read_line(&mut p.to_client).await;
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["method"] != "session/update" {
                panic!("unexpected before the session/new underneath: {line}");
            }
            replayed.push(line);
            if message["params"]["update"]["content"]["text"] == "part 2" {
                break;
            }
        }
        // Then a fresh agent session underneath, and the load's answer.
        let new = p.agent_gets().await;
        assert_eq!(new["method"], "session/new");
        let id = new["id"].to_string();
        p.agent_says(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"sessionId":"U"}}}}"#
        ))
        .await;
        let answer = loop {
            let message = p.client_gets().await;
            if message.get("id").is_some() {
                break message;
            }
        };
        assert_eq!(answer["id"], 5);
        assert!(answer.get("result").is_some(), "{answer}");
        (shut_down(p, 0).await, replayed)
    };
    let (code, (p, replayed)) = tokio::join!(proxy, script);
    assert_eq!(code.unwrap(), 0);
    // The replay comes from the first run's records: the agent's lines byte for byte, the
    // prompt as a user message chunk.
    assert_eq!(
        replayed.len(),
        4,
        "the prompt and three chunks: {replayed:?}"
    );
    assert!(recorded.contains_key(format!("{PROMPT}\n").as_bytes()));
    for line in &replayed[1..] {
        assert!(
            recorded.contains_key(line.as_bytes()),
            "{line} was recorded"
        );
    }
    let user: Value = serde_json::from_str(&replayed[0]).unwrap();
    assert_eq!(
        user["params"]["update"]["sessionUpdate"],
        "user_message_chunk"
    );
    assert_eq!(user["params"]["update"]["content"]["text"], "hi");
    // Every line of the second run's own was on disk before it was forwarded.
    let early = p.early();
    assert_eq!(early.len(), 1, "{early:?}");
    assert!(replayed[0].starts_with(&early[0]), "{early:?}");
}

#[tokio::test]
async fn batches_are_written_in_order_before_they_are_forwarded() {
    let dir = tempfile::tempdir().unwrap();
    let (proxy, mut p) = start(dir.path(), 1 << 20);
    let script = async move {
        open_session(&mut p).await;
        p.client_says(PROMPT).await;
        p.agent_gets().await;
        let mut sent = Vec::new();
        // A small batch (committed on the main loop), then big ones (the compressor thread),
        // each in one write, so one read; each is read back before the next is sent, so the
        // thread's every hand-back is checked against the disk.
        let rounds = std::iter::once((10, 10)).chain(std::iter::repeat_n((200, 100), 20));
        for (count, pad) in rounds {
            let mut batch = String::new();
            for _ in 0..count {
                let line = format!(
                    "{}\n",
                    update(&format!("{} {}", sent.len(), "x".repeat(pad)))
                );
                batch.push_str(&line);
                sent.push(line);
            }
            if count == 200 {
                assert!(batch.len() > journals::INLINE_BYTES);
            }
            p.agent.write_all(batch.as_bytes()).await.unwrap();
            for line in &sent[sent.len() - count..] {
                assert_eq!(&read_line(&mut p.to_client).await, line);
            }
        }
        // A batch that takes the compressor milliseconds (8 MiB that do not compress): had
        // the thread handed it back before writing it, the probe would be reading the disk
        // while the thread still compresses.
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let noise: String = (0..8 << 20)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                char::from(b'a' + (state % 26) as u8)
            })
            .collect();
        let line = format!("{}\n", update(&noise));
        p.agent.write_all(line.as_bytes()).await.unwrap();
        assert!(read_line(&mut p.to_client).await == line);
        sent.push(line);
        // Many client lines in one read go to the agent in order.
        let mut batch = String::new();
        for i in 0..50 {
            batch.push_str(&format!(
                r#"{{"jsonrpc":"2.0","method":"session/cancel","params":{{"sessionId":"S","n":{i}}}}}"#
            ));
            batch.push('\n');
        }
        p.client.write_all(batch.as_bytes()).await.unwrap();
        for i in 0..50 {
            assert_eq!(p.agent_gets().await["params"]["n"], i);
        }
        p.agent_says(PROMPT_OK).await;
        p.client_gets().await;
        (shut_down(p, 0).await, sent)
    };
    let (code, (p, sent)) = tokio::join!(proxy, script);
    assert_eq!(code.unwrap(), 0);
    p.assert_journaled_first();
    let updates: Vec<Vec<u8>> = session_messages(dir.path(), "S", Side::Agent)
        .into_iter()
        .filter(|l| l.starts_with(br#"{"jsonrpc":"2.0","method":"session/update""#))
        .collect();
    let sent: Vec<Vec<u8>> = sent.into_iter().map(String::into_bytes).collect();
    assert_eq!(updates, sent, "journaled in order");
}

#[tokio::test]
async fn a_client_that_stops_reading_stops_the_agent_being_read_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // 64 KiB of pipe to a client that does not read for now.
    let (proxy, mut p) = start(dir.path(), 64 << 10);
    let lines = 4096;
    let total = lines * 1024;
    let progress = AtomicUsize::new(0);
    let script = async {
        open_session(&mut p).await;
        p.client_says(PROMPT).await;
        p.agent_gets().await;
        let line = |i: usize| {
            let mut line = update(&format!("{i:05} "));
            line.insert_str(line.len() - 5, &"y".repeat(1023 - line.len()));
            line.push('\n');
            line
        };
        assert_eq!(line(7).len(), 1024);
        let agent = &mut p.agent;
        let write = async {
            for i in 0..lines {
                agent.write_all(line(i).as_bytes()).await.unwrap();
                progress.fetch_add(1024, Ordering::Relaxed);
            }
            agent
                .write_all(format!("{PROMPT_OK}\n").as_bytes())
                .await
                .unwrap();
        };
        tokio::pin!(write);
        let stalled = tokio::select! {
            () = &mut write => panic!("the agent wrote everything to a client that does not read"),
            stalled = stalls(&progress) => stalled,
        };
        assert!(
            stalled > pipes::BACKLOG_LIMIT && stalled < 2 * pipes::BACKLOG_LIMIT,
            "the agent stalled after {stalled} bytes"
        );
        // The client reads again: everything arrives, in order.
        let read = async {
            for i in 0..lines {
                assert_eq!(read_line(&mut p.to_client).await, line(i));
            }
            assert_eq!(read_json(&mut p.to_client).await["id"], 2);
        };
        tokio::join!(write, read);
        stalled
    };
    let stalled = tokio::select! {
        _ = proxy => panic!("the proxy ended early"),
        stalled = script => stalled,
    };
    assert!(stalled < total);
    p.assert_journaled_first();
}

/// Once a writer's `progress` (how much it has written) stays the same for a second: where it
/// stopped.
async fn stalls(progress: &AtomicUsize) -> usize {
    let (mut last, mut still) = (0, 0);
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = progress.load(Ordering::Relaxed);
        still = if now == last { still + 1 } else { 0 };
        if still == 5 {
            return now;
        }
        last = now;
    }
}

#[tokio::test]
async fn a_client_that_reads_nothing_of_a_stalled_backlog_is_not_read_until_it_does() {
    let dir = tempfile::tempdir().unwrap();
    let (proxy, mut p) = start(dir.path(), 64 << 10);
    let progress = AtomicUsize::new(0);
    let lines = 20_000;
    let script = async {
        open_session(&mut p).await;
        // More than the stalled limit for a client that reads nothing for now (one huge line,
        // so the agent is read to its end).
        let huge = update(&"z".repeat(pipes::STALLED_LIMIT + (1 << 20)));
        p.agent_says(&huge).await;
        let note = |i: usize| {
            format!("{{\"jsonrpc\":\"2.0\",\"method\":\"_test/n\",\"params\":{{\"i\":{i:05}}}}}\n")
        };
        let client = &mut p.client;
        let write = async {
            for i in 0..lines {
                client.write_all(note(i).as_bytes()).await.unwrap();
                progress.fetch_add(1, Ordering::Relaxed);
            }
        };
        // The agent reads whatever reaches it.
        let to_agent = &mut p.to_agent;
        let agent_reads = async {
            for i in 0..lines {
                assert_eq!(read_line(to_agent).await, note(i));
            }
        };
        tokio::pin!(write, agent_reads);
        let stalled = tokio::select! {
            () = &mut write => panic!("the client's lines were all read while it read nothing"),
            () = &mut agent_reads => panic!("the agent got every line of a client that read nothing"),
            stalled = stalls(&progress) => stalled,
        };
        assert!(
            stalled < lines / 4,
            "the client stalled after {stalled} lines"
        );
        // The client reads again: its lines go on, in order.
        let big = read_line(&mut p.to_client).await;
        assert_eq!(big.len(), huge.len() + 1);
        tokio::join!(write, agent_reads);
    };
    tokio::select! {
        _ = proxy => panic!("the proxy ended early"),
        () = script => {}
    }
}

#[tokio::test(start_paused = true)]
async fn signals_are_forwarded_and_an_agent_that_outstays_the_client_is_terminated() {
    let dir = tempfile::tempdir().unwrap();
    let (proxy, mut p) = start(dir.path(), 1 << 20);
    let script = async move {
        open_session(&mut p).await;
        p.signals.send(libc::SIGINT).await.unwrap();
        assert_eq!(p.got.recv().await, Some(libc::SIGINT));
        // The client leaves; the agent does not exit.
        p.client.shutdown().await.unwrap();
        let left = tokio::time::Instant::now();
        assert_eq!(p.got.recv().await, Some(libc::SIGTERM));
        assert_eq!(left.elapsed().as_secs(), 5, "after the grace");
        assert_eq!(p.got.recv().await, Some(libc::SIGKILL));
        assert_eq!(left.elapsed().as_secs(), 10, "after as long again");
        p.agent_exits(128 + libc::SIGKILL)
    };
    let (code, _p) = tokio::join!(proxy, script);
    assert_eq!(code.unwrap(), 128 + libc::SIGKILL);
    assert_eq!(
        every_connection_event(dir.path()),
        [
            "signal",
            "eof",
            "terminate",
            "terminate",
            "eof",
            "agent_exit",
            "segment_end"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_restarted_agent_that_never_answers_initialize_is_restarted_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.respawn = 3;
    config.core.reinit_timeout_us = 30_000_000;
    let (proxy, mut p) = start_with(config, 1 << 20, 3);
    let script = async move {
        open_session(&mut p).await;
        prompt_turn(&mut p, 1).await;
        // The agent dies between turns; the second one is sent the client's initialize and
        // never answers it.
        let mut p = p.agent_exits(137);
        let reinit = p.agent_gets().await;
        assert_eq!(reinit["method"], "initialize");
        let restarted = tokio::time::Instant::now();
        // The client's next prompt waits for the agent.
        p.client_says(PROMPT).await;
        // The timeout: the silent agent is killed, and the waiting prompt answered that it
        // did not answer initialize (not held for the next one)...
        assert_eq!(p.got.recv().await, Some(libc::SIGKILL));
        assert_eq!(restarted.elapsed().as_secs(), 30, "after the timeout");
        let refused = p.client_gets().await;
        assert_eq!(refused["id"], 2, "{refused}");
        assert_eq!(refused["error"]["code"], -32603, "{refused}");
        assert_eq!(refused["error"]["data"]["method"], "session/prompt");
        // ...and a third one started, which answers: the prompt sent again restores the
        // session on it and goes on, answered once.
        let mut p = p.agent_exits(128 + libc::SIGKILL);
        reinitialized(&mut p).await;
        p.client_says(PROMPT).await;
        let new = p.agent_gets().await;
        assert_eq!(new["method"], "session/new", "the lost session is restored");
        p.agent_says(&format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"sessionId":"S3"}}}}"#,
            new["id"]
        ))
        .await;
        let prompt = p.agent_gets().await;
        assert_eq!(prompt["method"], "session/prompt");
        assert_eq!(prompt["params"]["sessionId"], "S3");
        p.agent_says(PROMPT_OK).await;
        let answer = p.client_gets().await;
        assert_eq!(answer["id"], 2, "{answer}");
        assert_eq!(answer["result"]["stopReason"], "end_turn");
        shut_down(p, 0).await
    };
    let (code, _p) = tokio::join!(proxy, script);
    assert_eq!(code.unwrap(), 0);
    // (The prompt went to the agent edited, re-primed on the new session, so the probes'
    // byte-for-byte check does not apply to this run.)
    assert_eq!(
        connection_events(dir.path()),
        [
            "agent_exit",
            "agent_restarted",
            "init_timeout",
            "agent_exit",
            "agent_restarted",
            "agent_exit",
            "segment_end"
        ]
    );
}

/// The connection journal's events, `eof`s left out.
fn connection_events(root: &Path) -> Vec<String> {
    let mut events = every_connection_event(root);
    events.retain(|e| e != "eof");
    events
}

/// The kinds of every event in the run's connection journal, in order.
fn every_connection_event(root: &Path) -> Vec<String> {
    let journals = JournalDir::new(root);
    let connection = segments_in(&journals.root().join("connections")).unwrap();
    SegmentReader::open(&connection[0])
        .unwrap()
        .filter_map(|r| match r.body {
            Body::Event(e) => Some(e.kind().to_string()),
            _ => None,
        })
        .collect()
}

/// The agent answers a restarted agent's `initialize` (the client's, sent again).
async fn reinitialized(p: &mut Peers) {
    let reinit = p.agent_gets().await;
    assert_eq!(reinit["method"], "initialize");
    p.agent_says(&init_ok(&reinit["id"])).await;
}

/// The agent's answer to the `initialize` request `id`.
fn init_ok(id: &Value) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":1,"agentCapabilities":{{}}}}}}"#
    )
}

#[tokio::test(start_paused = true)]
async fn restarts_are_counted_within_a_minute() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.respawn = 1;
    let (proxy, mut p) = start_with(config, 1 << 20, 3);
    let script = async move {
        open_session(&mut p).await;
        // The first death is restarted.
        let mut p = p.agent_exits(137);
        reinitialized(&mut p).await;
        // A minute later the restart has aged out of the window: restarted again.
        tokio::time::sleep(Duration::from_secs(61)).await;
        let mut p = p.agent_exits(137);
        reinitialized(&mut p).await;
        // At once again: past --respawn 1 within the minute, the proxy ends with the agent.
        let mut p = p.agent_exits(3);
        let mut rest = String::new();
        p.to_client.read_line(&mut rest).await.unwrap();
        assert_eq!(rest, "", "the client's end is closed");
        p
    };
    let (code, _p) = tokio::join!(proxy, script);
    assert_eq!(code.unwrap(), 3);
    assert_eq!(
        connection_events(dir.path()),
        [
            "agent_exit",
            "agent_restarted",
            "agent_exit",
            "agent_restarted",
            "agent_exit",
            "segment_end"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_stalled_prompt_is_cancelled_then_its_agent_restarted() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.respawn = 1;
    config.core.stall_timeout_us = Some(10_000_000);
    config.core.stall_grace_us = 5_000_000;
    let (proxy, mut p) = start_with(config, 1 << 20, 2);
    let script = async move {
        open_session(&mut p).await;
        p.client_says(PROMPT).await;
        assert_eq!(p.agent_gets().await["method"], "session/prompt");
        let sent = tokio::time::Instant::now();
        // A sign of life resets the watch.
        tokio::time::sleep(Duration::from_secs(8)).await;
        p.agent_says(&update("thinking")).await;
        assert_eq!(
            p.client_gets().await["params"]["update"]["content"]["text"],
            "thinking"
        );
        // Then silence: cancelled after the timeout...
        let cancel = p.agent_gets().await;
        assert_eq!(cancel["method"], "session/cancel");
        assert_eq!(sent.elapsed().as_secs(), 18, "10 s after the last update");
        // ...and killed after the grace.
        assert_eq!(p.got.recv().await, Some(libc::SIGKILL));
        assert_eq!(sent.elapsed().as_secs(), 23, "5 s after the cancel");
        let mut p = p.agent_exits(128 + libc::SIGKILL);
        reinitialized(&mut p).await;
        let answer = p.client_gets().await;
        assert_eq!(answer["id"], 2, "{answer}");
        assert_eq!(answer["error"]["code"], -32603, "{answer}");
        shut_down(p, 0).await
    };
    let (code, _p) = tokio::join!(proxy, script);
    assert_eq!(code.unwrap(), 0);
    let events = connection_events(dir.path());
    assert_eq!(
        events,
        ["agent_exit", "agent_restarted", "agent_exit", "segment_end"]
    );
    let stalls: Vec<String> = session_events(dir.path(), "S")
        .into_iter()
        .filter(|e| e == "prompt_stalled")
        .collect();
    assert_eq!(stalls.len(), 2, "cancel, then restart");
}

#[tokio::test]
async fn past_the_held_limit_the_client_is_not_read_until_the_agent_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.respawn = 1;
    config.core.held_limit = 16 * 1024;
    let (proxy, mut p) = start_with(config, 1 << 20, 2);
    const LINES: usize = 300;
    let note = |n: usize| {
        let pad = "x".repeat(1000);
        format!(
            r#"{{"jsonrpc":"2.0","method":"_test/note","params":{{"sessionId":"S","n":{n},"pad":"{pad}"}}}}"#
        )
    };
    let line_len = note(0).len() + 1;
    let script = async move {
        open_session(&mut p).await;
        let mut p = p.agent_exits(137);
        let reinit = p.agent_gets().await;
        // 300 KB of client lines while the agent is being initialized: the proxy takes up to
        // its limit (16 KiB here) and leaves the rest in the pipe and the writer.
        let written = Arc::new(AtomicUsize::new(0));
        let mut client = std::mem::replace(&mut p.client, tokio::io::duplex(1).0);
        let counter = written.clone();
        let writer = tokio::spawn(async move {
            for n in 0..LINES {
                client
                    .write_all(format!("{}\n", note(n)).as_bytes())
                    .await
                    .unwrap();
                counter.fetch_add(1, Ordering::Relaxed);
            }
            client
        });
        // Wait until the writer makes no progress for a while.
        let mut last = usize::MAX;
        while written.load(Ordering::Relaxed) != last {
            last = written.load(Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        assert!(last < LINES, "the writer is blocked");
        // What left the writer: in the pipe, or read by the proxy (held, or in its read buffer).
        let taken = last * line_len - CLIENT_PIPE;
        assert!(
            taken < 16 * 1024 + 64 * 1024 + 2 * line_len,
            "the proxy took {taken} bytes while the agent was not ready"
        );
        // The agent answers: everything goes on, in order, nothing lost.
        p.agent_says(&init_ok(&reinit["id"])).await;
        // The first note names the lost session: it is restored first (session/new).
        let new = p.agent_gets().await;
        assert_eq!(new["method"], "session/new");
        p.agent_says(&format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"sessionId":"S2"}}}}"#,
            new["id"]
        ))
        .await;
        for n in 0..LINES {
            let m = p.agent_gets().await;
            assert_eq!(m["method"], "_test/note");
            assert_eq!(m["params"]["sessionId"], "S2");
            assert_eq!(m["params"]["n"], n);
        }
        p.client = writer.await.unwrap();
        shut_down(p, 0).await
    };
    let (code, _p) = tokio::join!(proxy, script);
    assert_eq!(code.unwrap(), 0);
    let notes = session_messages(dir.path(), "S", Side::Client)
        .iter()
        .filter(|l| l.windows(10).any(|w| w == b"_test/note"))
        .count();
    assert_eq!(notes, LINES, "every held line journaled once");
}

/// Holds a paused clock still while the test waits on one of the proxy's threads (the
/// catalog's): tokio moves a paused clock on by itself whenever the runtime has nothing to run,
/// so a task that keeps yielding leaves it to `tokio::time::advance`. It lets go after 20 real
/// seconds, so that a line that never comes still fails the test's read.
fn hold_the_clock() -> tokio::task::JoinHandle<()> {
    tokio::spawn(async {
        let until = std::time::Instant::now() + Duration::from_secs(20);
        while std::time::Instant::now() < until {
            tokio::task::yield_now().await;
        }
    })
}

/// A session another proxy opened in `cwd`, as it writes the catalog.
fn opened_elsewhere(journals: &JournalDir, session: &str, cwd: &str) {
    crate::catalog::Catalog::append_catalog_entries(
        journals,
        &[crate::catalog::CatalogEntry::Open {
            session: session.into(),
            segment: format!(
                "sessions/{}/0.acpj.zst",
                crate::journal::dir::session_key(session)
            ),
            cwd: Some(cwd.into()),
            agent: None,
            agent_name: None,
            git_branch: None,
            t: 1,
            agent_info: None,
        }],
    )
    .unwrap();
}

/// On a paused clock: a change in a listed directory is announced at the catalog service's next
/// check (every 250 ms), until the watch ends ten minutes after the list.
#[tokio::test(start_paused = true)]
async fn a_change_in_a_listed_directory_is_announced_at_the_next_check_for_ten_minutes() {
    let dir = tempfile::tempdir().unwrap();
    let journals = JournalDir::new(dir.path());
    let (proxy, mut p) = start(dir.path(), 1 << 20);
    let script = async move {
        // The list and the checks are answered by the catalog's thread.
        let held = hold_the_clock();
        p.client_says(
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"listChanged":{}}}}}"#,
        )
        .await;
        assert_eq!(p.agent_gets().await["method"], "initialize");
        p.agent_says(INIT_OK).await;
        p.client_gets().await;
        p.client_says(
            r#"{"jsonrpc":"2.0","id":1,"method":"session/list","params":{"cwd":"/other"}}"#,
        )
        .await;
        assert_eq!(
            p.client_gets().await["result"]["sessions"],
            serde_json::json!([])
        );
        opened_elsewhere(&journals, "A", "/other");
        tokio::time::advance(Duration::from_millis(250)).await;
        let changed = p.client_gets().await;
        assert_eq!(changed["method"], "session/list_changed", "{changed}");
        assert_eq!(changed["params"]["cwd"], "/other");
        // Ten minutes on, the watch is over: a later change there is not announced. The
        // catalog answers in order, so anything for /other would come before the answer to a
        // list of another directory.
        tokio::time::advance(Duration::from_secs(10 * 60)).await;
        opened_elsewhere(&journals, "B", "/other");
        tokio::time::advance(Duration::from_secs(1)).await;
        p.client_says(
            r#"{"jsonrpc":"2.0","id":2,"method":"session/list","params":{"cwd":"/elsewhere"}}"#,
        )
        .await;
        let next = p.client_gets().await;
        assert_eq!(
            next["id"], 2,
            "the list's answer, nothing before it: {next}"
        );
        held.abort();
        shut_down(p, 0).await
    };
    let (code, _p) = tokio::join!(proxy, script);
    assert_eq!(code.unwrap(), 0);
}
