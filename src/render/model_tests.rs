use bytes::Bytes;

use super::*;
use crate::journal::Payload;

/// Collects events as debug strings.
#[derive(Default)]
struct Log(Vec<String>);

impl Render for Log {
    fn event(&mut self, event: &Event<'_>) -> std::io::Result<()> {
        let text = match event {
            Event::Chunk { voice, text, first } => format!("chunk {voice:?} {text} {first}"),
            Event::Tool(t) => format!("tool {} {} {}", t.title, t.status, t.new),
            Event::TurnStart { number, prompt } => format!("turn {number} {prompt}"),
            Event::TurnEnd {
                number,
                stop_reason,
                ..
            } => format!("end {number} {stop_reason:?}"),
            Event::Permission { title, choice, .. } => format!("permission {title} {choice}"),
            Event::PermissionAsked { title, .. } => format!("permission asked {title}"),
            other => format!("{other:?}"),
        };
        self.0.push(text);
        Ok(())
    }
}

fn run(lines: &[(Side, &str)]) -> Vec<String> {
    let mut timeline = Timeline::new();
    let mut log = Log::default();
    for (i, (from, line)) in lines.iter().enumerate() {
        let record = Record {
            seq: i as u64,
            unix_us: 0,
            mono_us: i as u64 * 1_000_000,
            body: Body::Message {
                from: *from,
                payload: Payload::from_line(Bytes::from(line.to_string())),
            },
        };
        timeline.record(&record, &mut log).unwrap();
    }
    timeline.finish(&mut log).unwrap();
    log.0
}

/// What a record is, for [`run_records`].
enum Rec<'a> {
    /// A line as it crossed.
    Line(Side, &'a str),
    /// A line the proxy made or consumed.
    Proxy(Side, &'a str),
    /// An event of the proxy's.
    Event(JournalEvent),
}

fn run_records(records: Vec<Rec<'_>>) -> Vec<String> {
    let mut timeline = Timeline::new();
    let mut log = Log::default();
    for (i, rec) in records.into_iter().enumerate() {
        let body = match rec {
            Rec::Line(from, line) | Rec::Proxy(from, line) => {
                let mut payload = Payload::from_line(Bytes::from(line.to_string()));
                payload.proxy = matches!(rec, Rec::Proxy(..));
                Body::Message { from, payload }
            }
            Rec::Event(event) => Body::Event(event),
        };
        let record = Record {
            seq: i as u64,
            unix_us: 0,
            mono_us: i as u64,
            body,
        };
        timeline.record(&record, &mut log).unwrap();
    }
    timeline.finish(&mut log).unwrap();
    log.0
}

#[test]
fn each_thing_that_happened_is_told_once_as_the_editor_saw_it() {
    let log = run_records(vec![
        // A native load the agent failed, served from the journal.
        Rec::Line(
            Side::Client,
            r#"{"id":1,"method":"session/load","params":{"sessionId":"S","cwd":"/w"}}"#,
        ),
        Rec::Proxy(
            Side::Agent,
            r#"{"id":1,"error":{"code":-32000,"message":"No previous sessions found"}}"#,
        ),
        Rec::Event(JournalEvent::Replayed { lines: 4 }),
        // The proxy brings it up underneath: its own requests are not the client's, and
        // one that fails (the agent's own load, tried first) is the proxy's to handle.
        Rec::Proxy(
            Side::Client,
            r#"{"id":"acp-journal:9","method":"session/load","params":{"sessionId":"S","cwd":"/w"}}"#,
        ),
        Rec::Proxy(
            Side::Agent,
            r#"{"id":"acp-journal:9","error":{"code":-32603,"message":"No previous sessions"}}"#,
        ),
        Rec::Proxy(
            Side::Client,
            r#"{"id":"acp-journal:0","method":"session/new","params":{"cwd":"/w"}}"#,
        ),
        Rec::Line(
            Side::Agent,
            r#"{"id":"acp-journal:0","result":{"sessionId":"U"}}"#,
        ),
        Rec::Event(JournalEvent::SessionMapped {
            agent_session: "U".into(),
        }),
        Rec::Proxy(Side::Agent, r#"{"id":1,"result":{}}"#),
        // A restore after a restart: one line.
        Rec::Event(JournalEvent::AgentRestarted { code: 137 }),
        Rec::Proxy(
            Side::Client,
            r#"{"id":"acp-journal:1","method":"session/new","params":{"cwd":"/w"}}"#,
        ),
        Rec::Line(
            Side::Agent,
            r#"{"id":"acp-journal:1","result":{"sessionId":"V"}}"#,
        ),
        Rec::Event(JournalEvent::SessionMapped {
            agent_session: "V".into(),
        }),
        Rec::Event(JournalEvent::SessionRestored {
            how: "session/new".into(),
        }),
        // The proxy's own cancel (a close) is no user's.
        Rec::Proxy(
            Side::Client,
            r#"{"method":"session/cancel","params":{"sessionId":"V"}}"#,
        ),
        // An agent error the proxy consumed and nothing served: told as a failure.
        Rec::Line(
            Side::Client,
            r#"{"id":2,"method":"session/resume","params":{"sessionId":"T","cwd":"/w"}}"#,
        ),
        Rec::Proxy(
            Side::Agent,
            r#"{"id":2,"error":{"code":-32002,"message":"gone"}}"#,
        ),
    ]);
    assert_eq!(
        log,
        [
            "Setup { method: \"session/load\", cwd: \"/w\" }",
            "Replayed { updates: 4, agent_failed: Some(\"session/load failed on the agent: -32000 No previous sessions found\") }",
            "Continued { agent_session: \"U\" }",
            "Restarted { code: 137 }",
            "Restored { how: \"session/new\", agent_session: Some(\"V\"), host: false }",
            "Setup { method: \"session/resume\", cwd: \"/w\" }",
            "Failed { method: \"session/resume\", code: Number(-32002), message: \"gone\" }",
        ]
    );
}

#[test]
fn steering_the_agent_takes_is_user_input_and_one_it_refuses_is_not() {
    let log = run(&[
        (
            Side::Client,
            r#"{"id":1,"method":"session/prompt","params":{"prompt":[{"type":"text","text":"go"}]}}"#,
        ),
        (
            Side::Client,
            r#"{"id":2,"method":"_session/steering","params":{"sessionId":"S","prompt":[{"type":"text","text":"use tabs"}]}}"#,
        ),
        (Side::Agent, r#"{"id":2,"result":{}}"#),
        (
            Side::Agent,
            r#"{"id":1,"result":{"stopReason":"end_turn"}}"#,
        ),
        (
            Side::Client,
            r#"{"id":3,"method":"_session/steering","params":{"sessionId":"S","prompt":[{"type":"text","text":"late"}]}}"#,
        ),
        (
            Side::Agent,
            r#"{"id":3,"result":{"outcome":"promptRequired","reason":"noRunningTurn"}}"#,
        ),
    ]);
    assert_eq!(
        log,
        [
            "turn 1 go",
            "User(\"use tabs\")",
            "end 1 Some(\"end_turn\")"
        ]
    );
}

fn update(u: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"update":{u}}}}}"#)
}

#[test]
fn chunks_coalesce_into_paragraphs_and_turns_pair_with_their_response() {
    let a = update(r#"{"sessionUpdate":"agent_message_chunk","content":{"text":"a"}}"#);
    let t = update(r#"{"sessionUpdate":"agent_thought_chunk","content":{"text":"t"}}"#);
    let call =
        update(r#"{"sessionUpdate":"tool_call","toolCallId":"c1","title":"Read","kind":"read"}"#);
    let done =
        update(r#"{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"failed"}"#);
    let log = run(&[
        (
            Side::Client,
            r#"{"id":5,"method":"session/prompt","params":{"prompt":[{"type":"text","text":"hi"},{"type":"resource_link","uri":"file:///x"}]}}"#,
        ),
        (Side::Agent, &t),
        (Side::Agent, &a),
        (Side::Agent, &a),
        (Side::Agent, &call),
        (
            Side::Agent,
            r#"{"id":"p","method":"session/request_permission","params":{"toolCall":{"toolCallId":"c1"},"options":[{"optionId":"ok","name":"OK"}]}}"#,
        ),
        (
            Side::Client,
            r#"{"id":"p","result":{"outcome":{"outcome":"cancelled"}}}"#,
        ),
        (Side::Agent, &done),
        (Side::Agent, &a),
        (
            Side::Agent,
            r#"{"id":5,"result":{"stopReason":"end_turn"}}"#,
        ),
        (Side::Agent, "not json"),
    ]);
    assert_eq!(
        log,
        [
            "turn 1 hi [resource_link file:///x]",
            "chunk Thought t true",
            "ParagraphEnd",
            "chunk Agent a true",
            "chunk Agent a false",
            "ParagraphEnd",
            "tool Read pending true",
            "permission asked Read",
            "permission Read cancelled",
            "tool Read failed false",
            "chunk Agent a true",
            "ParagraphEnd",
            "end 1 Some(\"end_turn\")",
            "NotJson { from: Agent, text: \"not json\" }",
        ]
    );
}

#[test]
fn a_failed_prompt_ends_its_turn_without_a_stop_reason() {
    let log = run(&[
        (
            Side::Client,
            r#"{"id":1,"method":"session/prompt","params":{"prompt":[]}}"#,
        ),
        (
            Side::Agent,
            r#"{"id":1,"error":{"code":-32603,"message":"boom"}}"#,
        ),
        (Side::Agent, r#"{"id":1,"result":{}}"#),
    ]);
    assert_eq!(
        log,
        [
            "turn 1 ",
            "Failed { method: \"session/prompt\", code: Number(-32603), message: \"boom\" }",
            "end 1 None",
        ]
    );
}

#[test]
fn a_v2_turn_ends_with_the_agents_idle_state_and_its_echoes_are_told_once() {
    let log = run(&[
        (
            Side::Client,
            r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"first task"}]}}"#,
        ),
        (
            Side::Agent,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"user_message","messageId":"m1","content":[{"text":"first task","type":"text"}]}}}"#,
        ),
        (
            Side::Agent,
            r#"{"jsonrpc":"2.0","id":2,"result":{"messageId":"m1"}}"#,
        ),
        (
            Side::Agent,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"state_update","state":"running","background":[]}}}"#,
        ),
        (
            Side::Agent,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"You said it."},"messageId":"msg_loop"}}}"#,
        ),
        (
            Side::Agent,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"messageId":"msg_loop","content":[{"type":"text","text":"You said it."}],"sessionUpdate":"agent_message"}}}"#,
        ),
        (
            Side::Agent,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"plan_update","plan":{"type":"items","planId":"p","entries":[{"content":"read","status":"completed","priority":"high"}]}}}}"#,
        ),
        (
            Side::Agent,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"tool_call_update","toolCallId":"t1","title":"Read a.rs","kind":"read","status":"in_progress"}}}"#,
        ),
        (
            Side::Agent,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed"}}}"#,
        ),
        (
            Side::Agent,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn","usage":{"totalTokens":15}}}}"#,
        ),
    ]);
    assert_eq!(
        log,
        [
            "turn 1 first task",
            "chunk Agent You said it. true",
            "ParagraphEnd",
            "Plan(Object {\"type\": String(\"items\"), \"planId\": String(\"p\"), \"entries\": Array [Object {\"content\": String(\"read\"), \"status\": String(\"completed\"), \"priority\": String(\"high\")}]})",
            "tool Read a.rs in_progress true",
            "tool Read a.rs completed false",
            "end 1 Some(\"end_turn\")",
        ]
    );
}

/// The events a timeline tells of `records` (lines from the agent, the first from the
/// client), their paragraph ends and scopes left out.
fn told(lines: &[(Side, String)]) -> Vec<String> {
    let lines: Vec<(Side, &str)> = lines.iter().map(|(s, l)| (*s, l.as_str())).collect();
    run(&lines)
        .into_iter()
        .filter(|e| e != "ParagraphEnd" && !e.starts_with("Scope"))
        .collect()
}

#[test]
fn every_update_kind_is_shown_as_the_table_says() {
    // A v2 turn taken and its prompt's echo told: what follows is the turn's.
    let turn = [
        (
            Side::Client,
            r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"go"}]}}"#.to_string(),
        ),
        (Side::Agent, update(r#"{"sessionUpdate":"user_message","messageId":"m1","content":[{"type":"text","text":"go"}]}"#)),
        (Side::Agent, r#"{"jsonrpc":"2.0","id":2,"result":{"messageId":"m1"}}"#.to_string()),
    ];
    let before = told(&turn).len();
    for kind in crate::acp::updates::KINDS {
        let sample = crate::acp::updates::sample(kind.name);
        let mut lines = turn.to_vec();
        lines.push((
            Side::Agent,
            format!(r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"S","update":{sample}}}}}"#),
        ));
        let events = told(&lines)[before..].to_vec();
        match kind.shown {
            Some(words) => {
                assert!(!events.is_empty(), "{} should be shown: {words}", kind.name)
            }
            None => assert!(events.is_empty(), "{} is not shown: {events:?}", kind.name),
        }
    }
}

#[test]
fn a_subagents_timeline_is_told_as_its_own_in_its_parents_turn() {
    let s = |session: &str, u: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{session}","update":{u}}}}}"#
        )
    };
    let log = run(&[
        (
            Side::Client,
            r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"DELEGATE: find it"}]}}"#,
        ),
        (
            Side::Agent,
            &s(
                "S",
                r#"{"sessionUpdate":"subagent_update","sessionId":"C","title":"Explore","description":"general-purpose","state":{"state":"running"}}"#,
            ),
        ),
        // The parent's outgoing view, then the child's incoming one: told once.
        (
            Side::Agent,
            &s(
                "S",
                r#"{"sessionUpdate":"session_message","messageId":"t","senderSessionId":"S","recipientSessionId":"C","content":[{"type":"text","text":"look"}],"recipientMessageId":"t"}"#,
            ),
        ),
        (
            Side::Agent,
            &s(
                "C",
                r#"{"sessionUpdate":"session_message","messageId":"t","senderSessionId":"S","recipientSessionId":"C","content":[{"type":"text","text":"look"}],"senderMessageId":"t"}"#,
            ),
        ),
        (
            Side::Agent,
            &s(
                "C",
                r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"found"}}"#,
            ),
        ),
        (
            Side::Agent,
            &s(
                "C",
                r#"{"sessionUpdate":"session_info_update","title":"not the parent's"}"#,
            ),
        ),
        (
            Side::Agent,
            r#"{"jsonrpc":"2.0","id":"p","method":"session/request_permission","params":{"sessionId":"C","toolCall":{"toolCallId":"g","title":"Grep"},"options":[{"optionId":"ok","name":"OK"}]}}"#,
        ),
        (
            Side::Client,
            r#"{"jsonrpc":"2.0","id":"p","result":{"outcome":{"outcome":"selected","optionId":"ok"}}}"#,
        ),
        (
            Side::Agent,
            &s(
                "S",
                r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"meanwhile"}}"#,
            ),
        ),
        (
            Side::Agent,
            &s(
                "S",
                r#"{"sessionUpdate":"subagent_update","sessionId":"C","state":{"state":"idle","stopReason":"end_turn"}}"#,
            ),
        ),
        (
            Side::Agent,
            r#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}"#,
        ),
    ]);
    assert_eq!(
        log,
        [
            "turn 1 DELEGATE: find it",
            "Subagent { session: \"C\", title: \"Explore\", description: Some(\"general-purpose\"), state: Some(\"running\"), first: true, seconds: None }",
            "Scope { depth: 1, session: \"C\", title: \"Explore\" }",
            "Message { from: \"the session\", to: \"Explore\", text: \"look\" }",
            "chunk Agent found true",
            "ParagraphEnd",
            "permission asked Grep",
            "permission Grep ok",
            "Scope { depth: 0, session: \"\", title: \"\" }",
            "chunk Agent meanwhile true",
            "ParagraphEnd",
            "Subagent { session: \"C\", title: \"Explore\", description: None, state: Some(\"end_turn\"), first: false, seconds: Some(8.0) }",
            "end 1 Some(\"end_turn\")",
        ]
    );
}
