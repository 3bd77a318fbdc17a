//! Scenarios for the core, driven with literal JSON lines through a [`Harness`].

use std::collections::BTreeMap;

use bytes::Bytes;

use super::*;
use crate::journal::Event;
use crate::journal::format::{Body, Encoding, Record};
use crate::wire::Side;

/// The peer on `side`: the first client connection, or the agent.
pub(super) fn peer(side: Side) -> Peer {
    match side {
        Side::Client => Peer::Client(ConnId::FIRST),
        Side::Agent => Peer::Agent,
    }
}

/// Feeds lines to a [`Proxy`] and collects what it does.
pub(super) struct Harness {
    pub(super) proxy: Proxy,
    now: u64,
    /// Lines to any client connection, in order.
    pub(super) to_client: Vec<Bytes>,
    /// The same, by connection.
    pub(super) clients: BTreeMap<ConnId, Vec<Bytes>>,
    pub(super) to_agent: Vec<Bytes>,
    pub(super) journals: BTreeMap<Target, Vec<Record>>,
    pub(super) opened: Vec<(SessionId, Option<String>, Initialize)>,
    pub(super) closed_agent_stdin: bool,
    /// Other actions, in order (fetches, catalog updates, logs).
    pub(super) requests: Vec<Action>,
    /// The session IDs the journals hold, answering `FindFreeId` (with `Config::asks_free_ids`).
    pub(super) stored: fn(&str) -> bool,
}

impl Harness {
    /// A pure recorder (`--load off`): every line passes unchanged.
    pub(super) fn new() -> Harness {
        Harness::with(Config {
            load: LoadMode::Off,
            ..Config::default()
        })
    }

    pub(super) fn with(config: Config) -> Harness {
        Harness {
            proxy: Proxy::new(config),
            now: 0,
            to_client: vec![],
            clients: BTreeMap::new(),
            to_agent: vec![],
            journals: BTreeMap::new(),
            opened: vec![],
            closed_agent_stdin: false,
            requests: vec![],
            stored: |_| false,
        }
    }

    /// The monotonic time of the last stamp.
    pub(super) fn now(&self) -> u64 {
        self.now
    }

    pub(super) fn stamp(&mut self) -> Stamp {
        self.now += 10;
        Stamp {
            unix_us: 1_000_000 + self.now as i64,
            mono_us: self.now,
        }
    }

    fn line(&mut self, from: Peer, line: &str) {
        let at = self.stamp();
        self.proxy
            .handle_line(at, from, Bytes::from(format!("{line}\n")));
        self.drain();
    }

    pub(super) fn client(&mut self, line: &str) {
        self.line(Peer::Client(ConnId::FIRST), line)
    }

    /// A line from client connection `conn`.
    pub(super) fn client_on(&mut self, conn: u32, line: &str) {
        self.line(Peer::Client(ConnId(conn)), line)
    }

    pub(super) fn agent(&mut self, line: &str) {
        self.line(Peer::Agent, line)
    }

    pub(super) fn drain(&mut self) {
        while let Some(action) = self.proxy.poll_action() {
            match action {
                Action::Forward { to, line } => match to {
                    Peer::Client(conn) => {
                        self.clients.entry(conn).or_default().push(line.clone());
                        self.to_client.push(line);
                    }
                    Peer::Agent => self.to_agent.push(line),
                },
                Action::OpenSession {
                    session,
                    cwd,
                    initialize,
                } => {
                    assert!(
                        !self
                            .journals
                            .contains_key(&Target::Session(session.clone()))
                    );
                    self.opened.push((session, cwd, initialize));
                }
                Action::Journal { target, record } => {
                    if let Target::Session(s) = &target {
                        assert!(
                            self.opened.iter().any(|(o, ..)| o == s),
                            "journal before open"
                        );
                    }
                    self.journals.entry(target).or_default().push(record);
                }
                Action::CloseAgentStdin => self.closed_agent_stdin = true,
                Action::FindFreeId { ask, session } => {
                    let free = first_free(&session, self.stored);
                    let at = self.stamp();
                    self.proxy.handle_free_id(at, ask, free);
                }
                other => self.requests.push(other),
            }
        }
    }

    /// What the catalog learned with the turns since the last call ([`Proxy::handle_facts_due`]).
    pub(super) fn turn_facts(&mut self) -> Vec<(CatalogUpdate, i64)> {
        self.proxy.handle_facts_due();
        self.drain();
        let at = self
            .requests
            .iter()
            .rposition(|a| matches!(a, Action::TurnFacts(_)));
        match at.map(|i| self.requests.remove(i)) {
            Some(Action::TurnFacts(facts)) => facts,
            _ => Vec::new(),
        }
    }

    /// The message bodies journaled to `target`, as strings, in order.
    pub(super) fn journal(&self, target: &Target) -> Vec<String> {
        self.journals
            .get(target)
            .map(|records| {
                records
                    .iter()
                    .filter_map(|r| match &r.body {
                        Body::Message { payload, .. } => {
                            Some(String::from_utf8(payload.bytes.to_vec()).unwrap())
                        }
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(super) fn session(&self, id: &str) -> Vec<String> {
        self.journal(&Target::Session(id.into()))
    }

    pub(super) fn connection(&self) -> Vec<String> {
        self.journal(&Target::Run)
    }
}

/// The `load` of the last history fetch the proxy asked for.
pub(super) fn fetch(h: &Harness) -> u64 {
    h.requests
        .iter()
        .rev()
        .find_map(|a| match a {
            Action::FetchHistory { load, .. } => Some(*load),
            _ => None,
        })
        .expect("a FetchHistory")
}

/// Answer the last `FetchSessions` the proxy asked for with `sessions`.
pub(super) fn sessions_answer(h: &mut Harness, sessions: Vec<ListedSession>) {
    let request = h
        .requests
        .iter()
        .rev()
        .find_map(|a| match a {
            Action::FetchSessions { request, .. } => Some(*request),
            _ => None,
        })
        .expect("a FetchSessions");
    let at = h.stamp();
    h.proxy.handle_sessions(at, request, sessions);
    h.drain();
}

/// One written line, parsed.
pub(super) fn json_of(line: &Bytes) -> serde_json::Value {
    serde_json::from_slice(line).unwrap()
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#;
const INIT_OK: &str =
    r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{}}}"#;
const NEW: &str =
    r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/work","mcpServers":[]}}"#;
const NEW_OK: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"S1"}}"#;
const UPDATE_S1: &str = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}"#;

fn started() -> Harness {
    let mut h = Harness::new();
    h.client(INIT);
    h.agent(INIT_OK);
    h.client(NEW);
    h.agent(NEW_OK);
    h
}

#[test]
fn every_line_is_forwarded_byte_for_byte() {
    let mut h = Harness::new();
    let lines: [&[u8]; 8] = [
        INIT.as_bytes(),
        b"not json at all",
        b"[{\"jsonrpc\":\"2.0\",\"method\":\"x\"}]",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/new\",\"params\":{\"mcpServers\":[{\"name\":\"a\",\"command\":\"c\",\"args\":[],\"env\":[{\"name\":\"K\",\"value\":\"secret\"}]}],\"cwd\":\"/\"}}\r",
        b"\xff\xfe\x00",
        b"",
        b"   {\"a\" : 1 }   ",
        "{\"text\":\"\u{e9}\\u00e9 sk-ant-abcdefghijklmnopqrstuvwxyz\"}".as_bytes(),
    ];
    for (i, line) in lines.iter().enumerate() {
        let wire = Bytes::from([*line, b"\n"].concat());
        let from = if i % 2 == 0 {
            Side::Client
        } else {
            Side::Agent
        };
        let at = h.stamp();
        h.proxy.handle_line(at, peer(from), wire.clone());
        h.drain();
        let out = if from == Side::Client {
            h.to_agent.last()
        } else {
            h.to_client.last()
        };
        assert_eq!(out, Some(&wire), "line {i}");
    }
    // A final partial line at EOF is forwarded as it came.
    let at = h.stamp();
    h.proxy
        .handle_line(at, Peer::Agent, Bytes::from_static(b"{\"partial\":"));
    h.drain();
    assert_eq!(
        h.to_client.last().unwrap(),
        &Bytes::from_static(b"{\"partial\":")
    );
}

#[test]
fn initialize_goes_to_the_connection_and_into_session_headers() {
    let h = started();
    assert_eq!(h.connection(), [INIT, INIT_OK, NEW]);
    let (session, cwd, init) = &h.opened[0];
    assert_eq!(&**session, "S1");
    assert_eq!(cwd.as_deref(), Some("/work"));
    assert_eq!(init.request.as_deref(), Some(INIT.as_bytes()));
    assert_eq!(init.response.as_deref(), Some(INIT_OK.as_bytes()));
}

#[test]
fn session_new_request_is_copied_into_the_new_session() {
    let mut h = started();
    h.agent(UPDATE_S1);
    assert_eq!(h.session("S1"), [NEW, NEW_OK, UPDATE_S1]);
    // The copy keeps the request's own sequence number and time.
    let records = &h.journals[&Target::Session("S1".into())];
    let conn = &h.journals[&Target::Run];
    assert_eq!(records[0].seq, conn[2].seq);
    assert!(records[0].seq < records[1].seq);
}

#[test]
fn updates_before_the_session_new_response_are_kept_with_the_request_first() {
    let mut h = Harness::new();
    h.client(INIT);
    h.agent(INIT_OK);
    h.client(NEW);
    h.agent(UPDATE_S1);
    h.agent(NEW_OK);
    assert_eq!(h.session("S1"), [NEW, UPDATE_S1, NEW_OK]);
    assert_eq!(h.opened.len(), 1);
    assert_eq!(h.opened[0].1.as_deref(), Some("/work"));
}

#[test]
fn prompts_updates_and_responses_follow_the_session() {
    let mut h = started();
    let prompt = r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S1","prompt":[{"type":"text","text":"hello"}]}}"#;
    let done = r#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}"#;
    h.client(prompt);
    h.agent(UPDATE_S1);
    h.agent(done);
    assert_eq!(h.session("S1"), [NEW, NEW_OK, prompt, UPDATE_S1, done]);
    assert_eq!(h.proxy.pending_requests(), 0);
}

#[test]
fn colliding_ids_in_the_two_directions_are_kept_apart() {
    let mut h = started();
    // The client's prompt and the agent's permission request both use id 2.
    let prompt = r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S1","prompt":[]}}"#;
    let perm = r#"{"jsonrpc":"2.0","id":2,"method":"session/request_permission","params":{"sessionId":"S1","toolCall":{"toolCallId":"t"},"options":[]}}"#;
    let perm_ok = r#"{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"cancelled"}}}"#;
    let done = r#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}"#;
    h.client(prompt);
    h.agent(perm);
    h.client(perm_ok);
    assert_eq!(h.proxy.pending_requests(), 1, "the prompt is still pending");
    h.agent(done);
    assert_eq!(h.session("S1")[2..], [prompt, perm, perm_ok, done]);
    assert_eq!(h.proxy.pending_requests(), 0);
}

#[test]
fn number_and_string_ids_are_different_requests() {
    let mut h = started();
    let a = r#"{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"S1","prompt":[]}}"#;
    let b = r#"{"jsonrpc":"2.0","id":"7","method":"session/set_mode","params":{"sessionId":"S2","modeId":"x"}}"#;
    h.client(a);
    h.client(b);
    let b_ok = r#"{"jsonrpc":"2.0","id":"7","result":{}}"#;
    let a_ok = r#"{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}"#;
    h.agent(b_ok);
    h.agent(a_ok);
    assert_eq!(h.session("S2"), [b, b_ok]);
    assert_eq!(h.session("S1")[2..], [a, a_ok]);
}

#[test]
fn null_ids_and_unknown_responses_go_to_the_connection() {
    let mut h = started();
    let parse_error =
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#;
    let stray = r#"{"jsonrpc":"2.0","id":99,"result":{}}"#;
    h.agent(parse_error);
    h.client(stray);
    assert_eq!(h.connection()[3..], [parse_error, stray]);
    // A null-id request is still matched by its null-id response.
    let req = r#"{"jsonrpc":"2.0","id":null,"method":"session/prompt","params":{"sessionId":"S1","prompt":[]}}"#;
    let resp = r#"{"jsonrpc":"2.0","id":null,"result":{"stopReason":"end_turn"}}"#;
    h.client(req);
    h.agent(resp);
    assert_eq!(h.session("S1")[2..], [req, resp]);
}

#[test]
fn two_sessions_interleaved_on_one_connection() {
    let mut h = started();
    let new2 = r#"{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/other","mcpServers":[]}}"#;
    let new2_ok = r#"{"jsonrpc":"2.0","id":2,"result":{"sessionId":"S2"}}"#;
    h.client(new2);
    h.agent(new2_ok);
    let p1 = r#"{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"S1","prompt":[]}}"#;
    let p2 = r#"{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"S2","prompt":[]}}"#;
    let u2 = UPDATE_S1.replace("S1", "S2");
    let r1 = r#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}"#;
    let r2 = r#"{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn"}}"#;
    h.client(p1);
    h.client(p2);
    h.agent(&u2);
    h.agent(UPDATE_S1);
    h.agent(r2);
    h.agent(r1);
    assert_eq!(h.session("S1"), [NEW, NEW_OK, p1, UPDATE_S1, r1]);
    assert_eq!(h.session("S2"), [new2, new2_ok, p2, u2.as_str(), r2]);
    assert_eq!(h.opened[1].1.as_deref(), Some("/other"));
}

#[test]
fn cancel_request_follows_the_cancelled_request() {
    let mut h = started();
    let perm = r#"{"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":{"sessionId":"S1","toolCall":{"toolCallId":"t"},"options":[]}}"#;
    let cancel = r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"p1"}}"#;
    let unknown = r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"nope"}}"#;
    h.agent(perm);
    h.agent(cancel);
    h.agent(unknown);
    assert_eq!(h.session("S1")[2..], [perm, cancel]);
    assert_eq!(h.connection().last().map(String::as_str), Some(unknown));
}

#[test]
fn a_failed_session_new_stays_with_the_connection() {
    let mut h = Harness::new();
    h.client(NEW);
    let err =
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"Authentication required"}}"#;
    h.agent(err);
    assert_eq!(h.connection(), [NEW, err]);
    assert!(h.opened.is_empty());
}

#[test]
fn session_load_opens_its_session_with_the_cwd() {
    let mut h = Harness::new();
    let load = r#"{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"old","cwd":"/p","mcpServers":[]}}"#;
    h.client(load);
    assert_eq!(h.opened[0].1.as_deref(), Some("/p"));
    assert_eq!(h.session("old"), [load]);
}

#[test]
fn redaction_changes_the_journal_copy_only() {
    let mut h = Harness::new();
    let new = r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[{"name":"s","command":"c","args":[],"env":[{"name":"API_KEY","value":"hunter2hunter2"}]}]}}"#;
    h.client(new);
    assert_eq!(h.to_agent[0], format!("{new}\n"));
    let stored = &h.connection()[0];
    assert!(!stored.contains("hunter2hunter2") && stored.contains("API_KEY"));
    let rec = &h.journals[&Target::Run][0];
    assert!(matches!(&rec.body, Body::Message { payload, .. } if payload.redacted));

    let mut h = Harness::with(Config {
        redact: false,
        load: LoadMode::Off,
        ..Config::default()
    });
    h.client(new);
    assert_eq!(h.connection(), [new]);
}

#[test]
fn odd_lines_are_journaled_with_the_connection_as_what_they_are() {
    let mut h = Harness::new();
    h.agent("Starting agent v1.2...");
    h.client("[1,2,3]");
    let records = &h.journals[&Target::Run];
    let enc = |i: usize| match &records[i].body {
        Body::Message { payload, .. } => payload.encoding,
        _ => unreachable!(),
    };
    assert_eq!(enc(0), Encoding::Text);
    assert_eq!(enc(1), Encoding::Json);
}

#[test]
fn hostile_session_ids_are_just_strings() {
    let mut h = Harness::new();
    for id in ["../../x", "", "a\u{0}b", "a\nb"] {
        let line = serde_json::json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId": id, "update":{}}});
        h.agent(&line.to_string());
        assert_eq!(h.session(id).len(), 1, "{id:?}");
    }
    assert_eq!(h.opened.len(), 4);
}

#[test]
fn client_eof_closes_the_agent_stdin_and_is_journaled() {
    let mut h = started();
    let at = h.stamp();
    h.proxy.handle_eof(at, Peer::Client(ConnId::FIRST));
    h.drain();
    assert!(h.closed_agent_stdin);
    let last = h.journals[&Target::Run].last().unwrap();
    assert!(matches!(&last.body, Body::Event(Event::Eof { .. })));
}

#[test]
fn sequence_numbers_are_global_and_increasing() {
    let mut h = started();
    h.agent(UPDATE_S1);
    let at = h.stamp();
    h.proxy.handle_stderr(at, Bytes::from_static(b"log\n"));
    h.drain();
    let mut seqs: Vec<u64> = h.journals.values().flatten().map(|r| r.seq).collect();
    seqs.sort();
    seqs.dedup();
    assert_eq!(seqs, (0..6).collect::<Vec<_>>());
}

#[test]
fn when_the_agent_exits_every_pending_client_request_is_answered_in_order() {
    use serde_json::{Value, json};
    let parse = |line: &Bytes| -> Value { serde_json::from_slice(line).unwrap() };
    let mut h = started();
    h.client(r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S1","prompt":[]}}"#);
    h.client(r#"{"jsonrpc":"2.0","id":"m","method":"session/set_mode","params":{"sessionId":"S1","modeId":"x"}}"#);
    h.client(r#"{"jsonrpc":"2.0","id":3,"method":"authenticate","params":{"methodId":"a"}}"#);
    // A request of the agent's stays unanswered by the proxy: the client answers it or not.
    h.agent(r#"{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"S1","toolCall":{"toolCallId":"t"},"options":[]}}"#);
    let before = h.to_client.len();
    let at = h.stamp();
    h.proxy.handle_eof(at, Peer::Agent);
    h.drain();
    let answers: Vec<Value> = h.to_client[before..].iter().map(parse).collect();
    let ids: Vec<Value> = answers.iter().map(|a| a["id"].clone()).collect();
    assert_eq!(ids, [json!(2), json!("m"), json!(3)], "in arrival order");
    for a in &answers {
        assert_eq!(a["error"]["code"], -32603, "{a}");
        assert_eq!(a["error"]["message"], "the agent exited");
    }
    assert_eq!(answers[0]["error"]["data"]["method"], "session/prompt");
    assert_eq!(h.proxy.pending_requests(), 1, "only the agent's request");
    // Each answer is journaled where its request was, as a line the proxy made.
    let made = |target: &Target| -> Vec<String> {
        h.journals[target]
            .iter()
            .filter_map(|r| match &r.body {
                Body::Message { from, payload } if payload.proxy => {
                    assert_eq!(*from, Side::Agent);
                    Some(String::from_utf8(payload.bytes.to_vec()).unwrap() + "\n")
                }
                _ => None,
            })
            .collect()
    };
    let sent: Vec<String> = h.to_client[before..]
        .iter()
        .map(|l| String::from_utf8(l.to_vec()).unwrap())
        .collect();
    assert_eq!(made(&Target::Session("S1".into())), sent[..2]);
    assert_eq!(made(&Target::Run), sent[2..]);
    // A request sent after the agent is gone is answered at once.
    h.client(r#"{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"S1","prompt":[]}}"#);
    let late = parse(h.to_client.last().unwrap());
    assert_eq!(
        (&late["id"], &late["error"]["code"]),
        (&json!(4), &json!(-32603))
    );
}

#[test]
fn after_the_client_closed_its_stream_the_agent_exit_answers_nothing() {
    let mut h = started();
    h.client(r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S1","prompt":[]}}"#);
    let before = h.to_client.len();
    for side in [Side::Client, Side::Agent] {
        let at = h.stamp();
        h.proxy.handle_eof(at, peer(side));
        h.drain();
    }
    assert_eq!(h.to_client.len(), before, "a normal shutdown");
}

#[test]
fn every_update_kind_is_journaled_and_forwarded_as_it_crossed() {
    let mut h = started();
    let kinds = crate::acp::updates::KINDS
        .iter()
        .map(|k| k.name)
        .chain(["_vendor_update", "a_kind_of_tomorrow"]);
    for kind in kinds {
        let line = format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"S1","update":{{"sessionUpdate":"{kind}","x":{{"y":[1,"é"]}}, "_meta":{{"k":true}}}}}}}}"#
        );
        h.agent(&line);
        assert_eq!(
            h.to_client.last(),
            Some(&Bytes::from(format!("{line}\n"))),
            "{kind}: forwarded byte for byte"
        );
        assert_eq!(
            h.session("S1").last(),
            Some(&line),
            "{kind}: journaled as it crossed"
        );
    }
}

#[test]
fn session_options_passes_untouched_to_the_connection_journal_and_opens_no_session() {
    let mut h = started();
    let ask = r#"{"jsonrpc":"2.0","id":7,"method":"session/options","params":{"cwd":"/work","sessionId":"never-opened"}}"#;
    let answer = r#"{"jsonrpc":"2.0","id":7,"result":{"configOptions":[{"id":"model","name":"Model","type":"select","currentValue":"a","options":[]}]}}"#;
    h.client(ask);
    assert_eq!(h.to_agent.last(), Some(&Bytes::from(format!("{ask}\n"))));
    h.agent(answer);
    assert_eq!(
        h.to_client.last(),
        Some(&Bytes::from(format!("{answer}\n")))
    );
    let run = h.connection();
    assert!(run.contains(&ask.to_string()) && run.contains(&answer.to_string()));
    assert!(
        h.opened.iter().all(|(s, ..)| &**s == "S1"),
        "no session opened for a question about one"
    );
}
