//! The replay core without processes: recordings built in memory, played and compared.

use bytes::Bytes;
use serde_json::{Value, json};

use super::diff::{Category, diff};
use super::player::Player;
use super::recording::Recording;
use crate::journal::format::{FORMAT_VERSION, InitializeExchange};
use crate::journal::{Body, Header, Payload, Record, SegmentKind};
use crate::wire::Side;

/// Builds one session segment message by message.
struct Script {
    session: String,
    records: Vec<Record>,
    clock: u64,
}

impl Script {
    fn new(session: &str) -> Script {
        Script {
            session: session.into(),
            records: Vec::new(),
            clock: 0,
        }
    }

    /// A message from `from`, `ms` milliseconds after the previous one.
    fn msg(mut self, from: Side, ms: u64, msg: Value) -> Script {
        self.clock += ms * 1000;
        self.records.push(Record {
            seq: self.records.len() as u64 + 1,
            unix_us: self.clock as i64,
            mono_us: self.clock,
            body: Body::Message {
                from,
                payload: Payload::from_line(Bytes::from(msg.to_string())),
            },
        });
        self
    }

    fn client(self, msg: Value) -> Script {
        self.msg(Side::Client, 1, msg)
    }

    fn agent(self, ms: u64, msg: Value) -> Script {
        self.msg(Side::Agent, ms, msg)
    }

    fn update(self, ms: u64, text: &str) -> Script {
        let session = self.session.clone();
        self.agent(
            ms,
            json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session,
                "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}}),
        )
    }

    fn prompt(self, id: u64, text: &str) -> Script {
        let session = self.session.clone();
        self.client(
            json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}}),
        )
    }

    fn opened(self) -> Script {
        let session = self.session.clone();
        self.client(json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
            "params": {"cwd": "/rec", "mcpServers": []}}))
            .agent(
                1,
                json!({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": session}}),
            )
    }

    fn end_turn(self, id: u64) -> Script {
        self.agent(
            1,
            json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}}),
        )
    }

    fn segment(self) -> (Header, Vec<Record>) {
        let raw = |v: Value| Some(serde_json::value::to_raw_value(&v).unwrap());
        let header = Header {
            acpj: FORMAT_VERSION,
            kind: SegmentKind::Session,
            session: Some(self.session),
            run: "run".into(),
            proxy: "test".into(),
            started: 0,
            pid: 1,
            argv: vec!["agent".into()],
            cwd: Some("/rec".into()),
            connection: None,
            initialize: Some(InitializeExchange {
                request: raw(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                    "params": {"protocolVersion": 1, "clientCapabilities": {}}})),
                response: raw(json!({"jsonrpc": "2.0", "id": 0,
                    "result": {"protocolVersion": 1, "agentCapabilities": {"loadSession": true}}})),
            }),
        };
        (header, self.records)
    }
}

/// A turn with a permission request answered `allow`.
fn with_permission(s: Script) -> Script {
    let session = s.session.clone();
    s.opened()
        .prompt(2, "edit it")
        .update(5, "Editing.")
        .agent(
            1,
            json!({"jsonrpc": "2.0", "id": 0, "method": "session/request_permission",
            "params": {"sessionId": session, "toolCall": {"toolCallId": "t1"},
            "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}]}}),
        )
        .client(json!({"jsonrpc": "2.0", "id": 0,
            "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}}))
        .update(7, "Done.")
        .end_turn(2)
}

fn recording(scripts: Vec<Script>) -> Recording {
    Recording::from_segments("test", scripts.into_iter().map(Script::segment))
}

/// Feed `line` and collect everything the player sends until it blocks or runs dry.
fn exchange(player: &mut Player, line: Value) -> Vec<(u64, Value)> {
    player.client_line(line.to_string().as_bytes());
    drain(player)
}

fn drain(player: &mut Player) -> Vec<(u64, Value)> {
    let mut out = Vec::new();
    while let Some(line) = player.take_immediate() {
        out.push((0, serde_json::from_slice(&line).unwrap()));
    }
    while let Some(next) = player.take_out() {
        out.push((next.delay_us, serde_json::from_slice(&next.line).unwrap()));
    }
    out
}

fn request(id: Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// `session/new` with request `id`; returns the session ID served.
fn new_session(player: &mut Player, id: i64) -> Value {
    let sent = exchange(
        player,
        request(
            json!(id),
            "session/new",
            json!({"cwd": "/x", "mcpServers": []}),
        ),
    );
    sent[0].1["result"]["sessionId"].clone()
}

fn prompt(session: &str, id: &str, text: &str) -> Value {
    request(
        json!(id),
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
    )
}

#[test]
fn a_turn_is_played_with_live_ids_and_waits_for_the_permission_answer() {
    let mut player = Player::new(recording(vec![with_permission(Script::new("s1"))]), false);
    let init = exchange(
        &mut player,
        request(
            json!("i"),
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        ),
    );
    assert_eq!(init[0].1["id"], "i");
    assert_eq!(
        init[0].1["result"]["agentCapabilities"]["loadSession"],
        true
    );
    let new = exchange(
        &mut player,
        request(
            json!(7),
            "session/new",
            json!({"cwd": "/live", "mcpServers": []}),
        ),
    );
    assert_eq!(
        new[0].1,
        json!({"jsonrpc": "2.0", "id": 7, "result": {"sessionId": "s1"}})
    );

    let sent = exchange(&mut player, prompt("s1", "p", "edit it"));
    // The update, then the permission request; nothing more until it is answered.
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].0, 5000, "the recorded delay");
    let asked = &sent[1].1;
    assert_eq!(asked["method"], "session/request_permission");
    let answer = json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}});
    let rest = exchange(&mut player, answer);
    assert_eq!(rest.len(), 2);
    assert_eq!(rest[0].1["params"]["update"]["content"]["text"], "Done.");
    assert_eq!(
        rest[1].1,
        json!({"jsonrpc": "2.0", "id": "p", "result": {"stopReason": "end_turn"}})
    );
    assert!(player.take_reports().is_empty());
    assert!(player.idle());
}

#[test]
fn a_different_answer_or_prompt_is_reported_with_turn_field_and_values() {
    let mut player = Player::new(recording(vec![with_permission(Script::new("s1"))]), false);
    new_session(&mut player, 1);
    let sent = exchange(&mut player, prompt("s1", "p", "edit that"));
    let id = sent[1].1["id"].clone();
    exchange(
        &mut player,
        json!({"jsonrpc": "2.0", "id": id, "result": {"outcome": {"outcome": "cancelled"}}}),
    );
    let reports: Vec<String> = player
        .take_reports()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        reports,
        [
            "turn 1, session/prompt (session s1)\n    prompt[0].text: recorded \"edit it\", live \"edit that\"",
            "turn 1, answer to session/request_permission (session s1)\n    result.outcome.outcome: recorded \"selected\", live \"cancelled\"\n    result.outcome.optionId: recorded \"allow\", live (absent)",
        ]
    );
}

#[test]
fn strict_answers_a_differing_request_with_an_error_and_serves_nothing() {
    let mut player = Player::new(recording(vec![with_permission(Script::new("s1"))]), true);
    new_session(&mut player, 1);
    let sent = exchange(&mut player, prompt("s1", "p", "something else"));
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].1["error"]["code"], -32602);
    assert!(
        sent[0].1["error"]["message"]
            .as_str()
            .unwrap()
            .contains("turn 1, session/prompt differs: prompt[0].text")
    );
    // The recorded turn is still there for a corrected retry.
    let sent = exchange(&mut player, prompt("s1", "q", "edit it"));
    assert_eq!(sent[1].1["method"], "session/request_permission");
}

#[test]
fn repeated_prompts_replay_in_order_and_running_out_is_an_error() {
    let s = Script::new("s1")
        .opened()
        .prompt(2, "again")
        .update(1, "first answer")
        .end_turn(2)
        .prompt(3, "again")
        .update(1, "second answer")
        .end_turn(3);
    let mut player = Player::new(recording(vec![s]), false);
    new_session(&mut player, 1);
    let texts: Vec<Value> = (0..2)
        .map(|i| exchange(&mut player, prompt("s1", &i.to_string(), "again"))[0].1["params"]["update"]["content"]["text"].clone())
        .collect();
    assert_eq!(texts, [json!("first answer"), json!("second answer")]);
    let third = exchange(&mut player, prompt("s1", "3", "again"));
    assert!(
        third[0].1["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no more of these (it has 2)")
    );
    assert_eq!(player.take_reports()[0].turn, 3);
}

#[test]
fn several_sessions_are_served_in_recorded_order_and_a_load_replays_history() {
    let a = Script::new("a")
        .opened()
        .prompt(2, "to a")
        .update(1, "from a")
        .end_turn(2);
    let b = Script::new("b")
        .opened()
        .prompt(2, "to b")
        .update(1, "from b")
        .end_turn(2);
    let mut player = Player::new(recording(vec![a, b]), false);
    assert_eq!(new_session(&mut player, 1), "a");
    assert_eq!(new_session(&mut player, 2), "b");
    let sent = exchange(&mut player, prompt("b", "p", "to b"));
    assert_eq!(sent[0].1["params"]["update"]["content"]["text"], "from b");
    // Loading `a`: its history (the prompt as a user message, then the answer), then the response.
    let loaded = exchange(
        &mut player,
        request(
            json!(9),
            "session/load",
            json!({"sessionId": "a", "cwd": "/x", "mcpServers": []}),
        ),
    );
    let kinds: Vec<&str> = loaded
        .iter()
        .map(|(_, m)| {
            m["params"]["update"]["sessionUpdate"]
                .as_str()
                .unwrap_or("response")
        })
        .collect();
    assert_eq!(
        kinds,
        ["user_message_chunk", "agent_message_chunk", "response"]
    );
    assert_eq!(loaded[2].1["id"], 9);
    // Unknown sessions are refused with the ACP resource-not-found code.
    let unknown = exchange(
        &mut player,
        request(
            json!(10),
            "session/load",
            json!({"sessionId": "zz", "cwd": "/x", "mcpServers": []}),
        ),
    );
    assert_eq!(unknown[0].1["error"]["code"], -32002);
    assert!(
        player
            .take_reports()
            .iter()
            .any(|r| r.problem.as_deref() == Some("this session is not in the recording"))
    );
}

#[test]
fn diff_pairs_tool_calls_and_reports_stop_reasons_capabilities_and_latency() {
    let tool = |s: Script, id: &str, title: &str, status: &str| {
        let session = s.session.clone();
        s.agent(1, json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session,
            "update": {"sessionUpdate": "tool_call", "toolCallId": id, "title": title, "kind": "read", "status": status}}}))
    };
    let a = tool(
        Script::new("a").opened().prompt(2, "go").update(1, "hello"),
        "x1",
        "Read",
        "completed",
    )
    .end_turn(2);
    let b = Script::new("b").opened().prompt(2, "go").update(1, "hello");
    let b = tool(b, "y1", "Read", "failed").agent(
        900,
        json!({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "refusal"}}),
    );
    let ra = recording(vec![a]);
    let mut rb = recording(vec![b]);
    rb.initialize_response =
        Some(json!({"result": {"protocolVersion": 1, "agentCapabilities": {}}}));
    let found = diff(&ra, &rb);
    assert_eq!(
        found.to_string(),
        "[capabilities] initialize: agentCapabilities.loadSession: true → (absent)\n\
         [tools] session 1, turn 1: tool call \"Read\": status \"completed\" → \"failed\"\n\
         [errors] session 1, turn 1: ended: end_turn → refusal\n\
         [latency] session 1, turn 1: 3 ms → 902 ms\n\
         3 differences: text 0, tools 1, errors 1, capabilities 1"
    );
    assert!(found.has(Category::Tools) && !found.has(Category::Text));
    assert!(diff(&ra, &ra).changes.is_empty());
}

#[test]
fn diff_compares_the_subagents_a_turn_started_in_the_order_they_were_announced() {
    let delegate = |name: &str, child: &str, said: &str, tool: &str, end: &str| {
        let up = |session: &str, u: Value| {
            json!({"jsonrpc": "2.0", "method": "session/update",
                "params": {"sessionId": session, "update": u}})
        };
        Script::new(name)
            .opened()
            .prompt(2, "DELEGATE: look")
            .agent(
                1,
                up(
                    name,
                    json!({"sessionUpdate": "subagent_update", "sessionId": child,
                "title": "Explore", "state": {"state": "running"}}),
                ),
            )
            .agent(
                1,
                up(
                    child,
                    json!({"sessionUpdate": "session_message", "messageId": "m",
                "senderSessionId": name, "recipientSessionId": child,
                "content": [{"type": "text", "text": "look"}]}),
                ),
            )
            .agent(
                1,
                up(
                    child,
                    json!({"sessionUpdate": "tool_call", "toolCallId": "g",
                "title": tool, "status": "completed"}),
                ),
            )
            .agent(
                1,
                up(
                    child,
                    json!({"sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": said}}),
                ),
            )
            .agent(
                1,
                up(
                    name,
                    json!({"sessionUpdate": "subagent_update", "sessionId": child,
                "state": {"state": "idle", "stopReason": end}}),
                ),
            )
            .update(1, "done")
            .end_turn(2)
    };
    // Another run of the same session: other IDs, the same work.
    let a = recording(vec![delegate(
        "a", "child-1", "in a.rs", "Grep", "end_turn",
    )]);
    let same = recording(vec![delegate(
        "b", "child-2", "in a.rs", "Grep", "end_turn",
    )]);
    assert!(diff(&a, &same).changes.is_empty(), "{}", diff(&a, &same));
    let other = recording(vec![delegate(
        "b",
        "child-2",
        "nowhere",
        "Read",
        "cancelled",
    )]);
    assert_eq!(
        diff(&a, &other).to_string(),
        "[text] session 1, turn 1: subagent 1 (Explore): agent message 1:\n  - in a.rs\n  + nowhere\n\
         [tools] session 1, turn 1: subagent 1 (Explore): tool call \"Grep\": title \"Grep\" → \"Read\"\n\
         [errors] session 1, turn 1: subagent 1 (Explore): ended: end_turn → cancelled\n\
         3 differences: text 1, tools 1, errors 1, capabilities 0",
        "the parent's own words and tools are the same: only the child differs"
    );
}
