//! Fuzz the sans-I/O proxy core: arbitrary lines from both peers, stderr, EOFs, and the store's
//! answers to the core's fetches, checking the invariants of `acp_journal::proto`.
//!
//! Input: byte 0 is the configuration (bits 0-1 load mode off/auto/journal/agent, bit 2 redact,
//! bit 3 re-prime, bit 4 a 1 ms stall timeout, bit 5 a 1 ms initialize timeout for restarted
//! agents, bit 6 a 4 KiB bound on held client lines); the rest is split on `\n` into steps,
//! each a byte saying what happens and the step's bytes (see [`Step`]).
//! `fuzz/corpus/proxy/seed-*` are real sessions in this form.
//!
//! As the shell does, the driver gives the core no client line while `reads_client` is false,
//! and a tick moves time to what `poll_timeout` asks (which must then lie in the future).

#![no_main]

use std::collections::{HashSet, VecDeque};

use acp_journal::journal::format::{Encoding, decode_record, encode_record};
use acp_journal::journal::{Body, Record};
use acp_journal::proto::{
    Action, Activity, AgentCopy, Config, ConnId, HistoryChunk, ListedSession, LoadMode, Peer,
    Proxy, SessionId, Stamp, Summary, Target, reuse_candidates,
};
use acp_journal::redact::{REDACTED, redact_tokens};
use acp_journal::wire::Side;
use acp_journal::wire::envelope::{self, Kind};
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// What one step of the input does (its first byte, modulo 16).
enum Step<'a> {
    /// A whole line from a peer, with `\n` or `\r\n`.
    Line(Side, &'a [u8], &'static [u8]),
    /// A whole line from a second client connection.
    Second(&'a [u8]),
    /// A final line without terminator.
    Partial(Side, &'a [u8]),
    /// A stderr chunk, with or without a newline.
    Stderr(&'a [u8], bool),
    /// A peer closed its stream.
    Eof(Side),
    /// Answer the oldest `FetchHistory`.
    History(&'a [u8]),
    /// Answer the oldest `FetchSessions`.
    Sessions(&'a [u8]),
    /// The agent died and was started again (when the core allows it).
    Restart,
    /// Time passes (stall checks).
    Tick,
    /// The store changed for these working directories.
    StoreChanged(&'a [u8]),
}

fn side(b: u8) -> Side {
    if b & 1 == 0 {
        Side::Client
    } else {
        Side::Agent
    }
}

fn parse(chunk: &[u8]) -> Option<Step<'_>> {
    let (&op, body) = chunk.split_first()?;
    let first = body.first().copied().unwrap_or(0);
    Some(match op % 16 {
        0..=2 => Step::Line(Side::Client, body, b"\n"),
        3 => Step::Second(body),
        4 => Step::Line(Side::Client, body, b"\r\n"),
        5..=8 => Step::Line(Side::Agent, body, b"\n"),
        9 => Step::Line(Side::Agent, body, b"\r\n"),
        10 => Step::Stderr(body, true),
        11 => Step::Stderr(body, false),
        12 => Step::Eof(side(first)),
        13 => Step::History(body),
        14 => Step::Sessions(body),
        _ => match first {
            0xF0.. => Step::Restart,
            0xE0.. => Step::Tick,
            0xD0.. => Step::StoreChanged(&body[1..]),
            _ => Step::Partial(side(first), body.get(1..).unwrap_or_default()),
        },
    })
}

/// The driver: feeds the core, applies its actions, checks every invariant as it goes.
struct Driver {
    proxy: Proxy,
    config: Config,
    now: u64,
    opened: HashSet<Target>,
    fetches: VecDeque<u64>,
    lists: VecDeque<u64>,
    forks: VecDeque<u64>,
    /// The store questions not answered yet (`FindFreeId`).
    free_ids: VecDeque<(u64, SessionId)>,
    /// Lines handed to the core (or as history) so far: forwarding one is not an edit (agent
    /// lines held during a load are forwarded steps later).
    inputs: HashSet<Bytes>,
    /// The agent's output ended: from then on the core answers each client request itself.
    agent_ended: bool,
    /// Sides whose stream ended: nothing more comes from them (the shell stops reading).
    ended: HashSet<Side>,
    /// A second client connection sent a line: its requests are renumbered and lines for
    /// clients routed, so the one-connection stream checks no longer apply.
    several: bool,
}

/// The peer of `side` on the first connection.
fn peer(side: Side) -> Peer {
    match side {
        Side::Client => Peer::Client(ConnId::FIRST),
        Side::Agent => Peer::Agent,
    }
}

impl Driver {
    fn stamp(&mut self) -> Stamp {
        self.now += 7;
        Stamp {
            unix_us: 1_700_000_000_000_000 + self.now as i64,
            mono_us: self.now,
        }
    }

    /// Apply every pending action; returns the lines forwarded, by receiver.
    fn drain(&mut self) -> Vec<(Side, Bytes)> {
        let several = self.several;
        let mut forwarded = vec![];
        while let Some(action) = self.proxy.poll_action() {
            match action {
                Action::Forward { to, line } => {
                    assert!(!line.is_empty(), "an empty forward");
                    if !self.inputs.contains(&line) {
                        // A line the proxy made or edited is always one JSON object.
                        let body = line.strip_suffix(b"\n").unwrap_or(&line);
                        let body = body.strip_suffix(b"\r").unwrap_or(body);
                        let raw = serde_json::from_slice::<&serde_json::value::RawValue>(body);
                        assert!(
                            raw.is_ok_and(|r| r.get().starts_with('{')),
                            "the proxy forwarded a line it made that is not a JSON object: {:?}",
                            String::from_utf8_lossy(&line)
                        );
                    }
                    if !several {
                        assert_eq!(
                            to,
                            peer(to.side()),
                            "one connection: every client line goes to it"
                        );
                    }
                    forwarded.push((to.side(), line));
                }
                Action::OpenSession { session, .. } => {
                    assert!(
                        self.opened.insert(Target::Session(session.clone())),
                        "session {session:?} opened twice"
                    );
                }
                Action::Journal { target, record } => {
                    assert!(
                        target == Target::Run || self.opened.contains(&target),
                        "journal to {target:?} before it was opened"
                    );
                    self.check_record(&record);
                }
                Action::FetchHistory { load, .. } => {
                    assert_ne!(self.config.load, LoadMode::Off);
                    self.fetches.push_back(load);
                }
                Action::FetchSessions { request, .. } => {
                    assert_ne!(self.config.load, LoadMode::Off);
                    self.lists.push_back(request);
                }
                Action::CancelHistory { load } => self.fetches.retain(|f| *f != load),
                Action::ForkJournal { op, .. } => {
                    assert_ne!(self.config.load, LoadMode::Off);
                    self.forks.push_back(op);
                }
                Action::FindFreeId { ask, session } => {
                    assert!(
                        self.config.asks_free_ids,
                        "asked the journals without asks_free_ids"
                    );
                    self.free_ids.push_back((ask, session));
                }
                Action::EndClient(conn) => {
                    // The shell ends the connection; the core then hears it ended.
                    assert!(self.config.hosted, "only a host ends a connection");
                    let at = self.stamp();
                    self.proxy.handle_eof(at, Peer::Client(conn));
                }
                Action::CloseAgentStdin
                | Action::Catalog(_)
                | Action::TurnFacts(_)
                | Action::Log(_)
                | Action::RestartAgent => {}
            }
        }
        forwarded
    }

    /// Every record reads back as written, and redaction left no secret behind.
    fn check_record(&self, record: &Record) {
        let mut line = Vec::new();
        encode_record(record, &mut line);
        let back = decode_record(&line[..line.len() - 1])
            .unwrap_or_else(|e| panic!("journaled record does not decode ({e}): {record:?}"));
        assert_eq!(&back, record, "record changed through the format");
        if !self.config.redact {
            return;
        }
        match &record.body {
            Body::Message { payload, .. } => {
                assert_no_token(&payload.bytes);
                if payload.encoding == Encoding::Json {
                    let msg: Value = serde_json::from_slice(&payload.bytes).unwrap_or_default();
                    assert_env_redacted(&msg);
                }
            }
            Body::Stderr(bytes) => assert_no_token(bytes),
            Body::Event(event) => assert_no_token(event.to_string().as_bytes()),
        }
    }

    fn line(&mut self, from: Side, line: Bytes) {
        let at = self.stamp();
        self.inputs.insert(line.clone());
        self.proxy.handle_line(at, peer(from), line.clone());
        let forwarded = self.drain();
        if self.several {
            return;
        }
        let same = forwarded
            .iter()
            .any(|(to, l)| *to == from.other() && *l == line);
        if self.config.load == LoadMode::Off {
            // A pure recorder forwards exactly the line, once, and nothing else; but once the
            // agent is gone, a client request is also answered with an error at once.
            let mut expected = vec![(from.other(), line.clone())];
            if let (true, Side::Client, Kind::Request { id, .. }) =
                (self.agent_ended, from, envelope::peek(&line).kind)
            {
                let answer = forwarded.get(1).map(|(_, a)| a.clone()).unwrap_or_default();
                let answer: Value = serde_json::from_slice(&answer).unwrap_or_default();
                assert_eq!(answer["error"]["code"], -32603, "{answer}");
                let id: Value = serde_json::from_str(&id.to_json()).unwrap_or_default();
                assert_eq!(answer["id"], id);
                expected.push((Side::Client, forwarded[1].1.clone()));
            }
            assert_eq!(forwarded, expected, "--load off changed the stream");
        } else if !same {
            // Only JSON-RPC messages are ever consumed or edited.
            let kind = envelope::peek(&line).kind;
            assert!(
                matches!(
                    kind,
                    Kind::Request { .. } | Kind::Notification { .. } | Kind::Response { .. }
                ),
                "a line that is no JSON-RPC message was not forwarded unchanged: {:?}",
                String::from_utf8_lossy(&line)
            );
        }
    }

    fn step(&mut self, step: Step<'_>) {
        match step {
            Step::Line(from, ..) | Step::Partial(from, _) if self.ended.contains(&from) => {}
            // The shell does not read the client while the core holds too much for the agent.
            Step::Line(Side::Client, ..) | Step::Partial(Side::Client, _)
                if !self.proxy.reads_client() => {}
            Step::Line(from, body, end) => self.line(from, Bytes::from([body, end].concat())),
            Step::Second(_) if self.ended.contains(&Side::Client) => {}
            Step::Second(body) => {
                let at = self.stamp();
                let line = Bytes::from([body, b"\n"].concat());
                self.inputs.insert(line.clone());
                self.several = true;
                self.proxy.handle_line(at, Peer::Client(ConnId(1)), line);
                self.drain();
            }
            Step::Partial(from, body) if !body.is_empty() => {
                self.line(from, Bytes::copy_from_slice(body))
            }
            Step::Partial(..) => {}
            Step::Stderr(body, newline) => {
                let at = self.stamp();
                let chunk = [body, if newline { b"\n" } else { b"" }].concat();
                self.proxy.handle_stderr(at, Bytes::from(chunk));
                assert!(self.drain().is_empty(), "stderr is never forwarded");
            }
            Step::Eof(from) => {
                let at = self.stamp();
                self.proxy.handle_eof(at, peer(from));
                self.agent_ended |= from == Side::Agent;
                self.ended.insert(from);
                self.drain();
            }
            Step::History(body) => {
                let Some(&load) = self.fetches.front() else {
                    return;
                };
                let at = self.stamp();
                let chunk = match body.first().copied().unwrap_or(0) % 5 {
                    0 => HistoryChunk::Missing,
                    4 => HistoryChunk::Refused("held by another host".into()),
                    1 => {
                        let line = Bytes::from([&body[1..], b"\n"].concat());
                        self.inputs.insert(line.clone());
                        HistoryChunk::Lines(vec![line])
                    }
                    n => HistoryChunk::End(summary(&body[1..], n == 3)),
                };
                if !matches!(chunk, HistoryChunk::Lines(_)) {
                    self.fetches.pop_front();
                }
                self.proxy.handle_history(at, load, chunk);
                self.drain();
            }
            Step::Sessions(body) => {
                let at = self.stamp();
                if let Some((ask, session)) = self.free_ids.pop_front() {
                    // The store holds the first `n` candidates.
                    let n = usize::from(body.first().copied().unwrap_or(0) % 3);
                    if let Some(free) = reuse_candidates(&session).nth(n) {
                        self.proxy.handle_free_id(at, ask, free);
                    }
                    self.drain();
                    return;
                }
                if let Some(op) = self.forks.pop_front() {
                    // A fork's copy: made, or refused.
                    let outcome = if body.first().is_some_and(|b| b & 1 == 0) {
                        Ok(())
                    } else {
                        Err("no journal".to_string())
                    };
                    self.proxy.handle_forked(at, op, outcome);
                    self.drain();
                    return;
                }
                let Some(request) = self.lists.pop_front() else {
                    return;
                };
                self.proxy.handle_sessions(at, request, listed(body));
                self.drain();
            }
            Step::Restart => {
                if !self.proxy.can_restart() {
                    return;
                }
                let at = self.stamp();
                self.proxy.handle_agent_restart(at, 137);
                self.agent_ended = false;
                self.ended.remove(&Side::Agent);
                self.drain();
            }
            Step::Tick => {
                // To the core's next timer (or a second on, without one).
                let due = self.proxy.poll_timeout().unwrap_or(self.now + 1_000_000);
                self.now = self.now.max(due);
                let at = self.stamp();
                self.proxy.handle_tick(at);
                self.drain();
                if let Some(next) = self.proxy.poll_timeout() {
                    assert!(
                        next > at.mono_us,
                        "after a tick at {}, the core asks for another at {next}: the shell would spin",
                        at.mono_us
                    );
                }
            }
            Step::StoreChanged(body) => {
                let at = self.stamp();
                let cwd = String::from_utf8_lossy(body).into_owned();
                self.proxy.handle_journals_changed(at, &[cwd, "/w".into()]);
                self.drain();
            }
        }
    }
}

/// A summary of a recorded session, from fuzz bytes.
fn summary(body: &[u8], agent_session: bool) -> Summary {
    let text = String::from_utf8_lossy(body);
    let mut parts = text.splitn(3, '|');
    let turns = parts.next().map_or(0, |p| p.len());
    Summary {
        turns,
        transcript: parts.next().unwrap_or_default().to_string(),
        mode: parts.next().map(str::to_string),
        agent_session: agent_session.then(|| text.chars().take(8).collect()),
        // The agent's own copy holds every turn, or it does not.
        agent_copy: match agent_session {
            true => AgentCopy::Whole(text.chars().take(8).collect()),
            false => AgentCopy::Behind {
                known: 0,
                turns: turns as u64,
            },
        },
        ..Summary::default()
    }
}

/// Sessions the store lists, from fuzz bytes (`,`-separated IDs).
fn listed(body: &[u8]) -> Vec<ListedSession> {
    String::from_utf8_lossy(body)
        .split(',')
        .enumerate()
        .map(|(i, id)| ListedSession {
            session: id.to_string(),
            cwd: (i % 3 != 2).then(|| "/w".to_string()),
            title: (i % 2 == 0).then(|| format!("title {i}")),
            updated: Activity {
                at: None,
                us: i as i64,
            },
            agent_ids: if i % 4 == 1 {
                vec![format!("{id}-a")]
            } else {
                vec![]
            },
            ..ListedSession::default()
        })
        .collect()
}

fn assert_no_token(bytes: &[u8]) {
    if let Some(redacted) = redact_tokens(bytes) {
        panic!(
            "a token-shaped string was journaled: {:?} (redacted: {:?})",
            String::from_utf8_lossy(bytes),
            String::from_utf8_lossy(&redacted)
        );
    }
}

/// MCP server env/header values of session setup requests and `terminal/create` env values.
fn assert_env_redacted(msg: &Value) {
    let method = msg["method"].as_str().unwrap_or_default();
    let params = &msg["params"];
    let mut lists = vec![];
    if [
        "session/new",
        "session/load",
        "session/resume",
        "session/fork",
    ]
    .contains(&method)
    {
        for server in params["mcpServers"].as_array().into_iter().flatten() {
            lists.push(&server["env"]);
            lists.push(&server["headers"]);
        }
    }
    if method == "terminal/create" {
        lists.push(&params["env"]);
    }
    for list in lists {
        for entry in list.as_array().into_iter().flatten() {
            if let Some(v) = entry.get("value") {
                assert_eq!(v, REDACTED, "an env or header value was journaled: {msg}");
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&cfg, rest)) = data.split_first() else {
        return;
    };
    let config = Config {
        load: [
            LoadMode::Off,
            LoadMode::Auto,
            LoadMode::Journal,
            LoadMode::Agent,
        ][usize::from(cfg & 3)],
        redact: cfg & 4 != 0,
        reprime: cfg & 8 != 0,
        // With re-priming, the store is asked about the agent's new sessions, answered (or
        // not) by later steps while the agent's lines wait.
        asks_free_ids: cfg & 8 != 0,
        reprime_limit: 4096,
        stall_timeout_us: (cfg & 16 != 0).then_some(1_000),
        stall_grace_us: 1_000,
        reinit_timeout_us: if cfg & 32 != 0 { 1_000 } else { 60_000_000 },
        held_limit: if cfg & 64 != 0 { 4096 } else { 8 << 20 },
        // The host's mode (`serve`): lines go only to attached connections (the one-connection
        // stream checks are off, as with a second connection).
        hosted: cfg & 128 != 0,
        // The bridge (`--connect`, never a host): its agent a host reached again, with the
        // short init timeout.
        remote: cfg & 128 == 0 && cfg & 32 != 0,
        unattended_timeout_us: 1_000,
        offer_history: None,
    };
    let mut driver = Driver {
        proxy: Proxy::new(config),
        config,
        now: 0,
        opened: HashSet::new(),
        fetches: VecDeque::new(),
        forks: VecDeque::new(),
        free_ids: VecDeque::new(),
        lists: VecDeque::new(),
        inputs: HashSet::new(),
        agent_ended: false,
        ended: HashSet::new(),
        several: config.hosted,
    };
    for chunk in rest.split(|b| *b == b'\n') {
        if let Some(step) = parse(chunk) {
            driver.step(step);
        }
    }
});
