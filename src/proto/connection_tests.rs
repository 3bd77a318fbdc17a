//! Several client connections on one core: ids mapped per connection, lines routed to the
//! connections a session is attached to, a connection that ends while its sessions live on.

use bytes::Bytes;
use serde_json::{Value, json};

use super::tests::{Harness, json_of};
use super::*;

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#;
const INIT_OK: &str = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"sessionCapabilities":{"list":{},"resume":{},"close":{},"delete":{},"fork":{}}},"authMethods":[]}}"#;

fn new_session(id: u32) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"session/new","params":{{"cwd":"/w","mcpServers":[]}}}}"#
    )
}

fn update(session: &str, text: &str) -> String {
    json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":session,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":text}}}}).to_string()
}

fn received(h: &Harness, conn: u32) -> Vec<Value> {
    h.clients
        .get(&ConnId(conn))
        .map(|lines| lines.iter().map(json_of).collect())
        .unwrap_or_default()
}

impl Harness {
    /// Answer the last history fetch with its end (nothing to replay).
    fn history_end(&mut self) {
        history(self, Vec::new());
    }
}

/// Answer the last history fetch with `lines`, then its end.
fn history(h: &mut Harness, lines: Vec<String>) {
    let load = super::tests::fetch(h);
    let at = h.stamp();
    let lines = lines.into_iter().map(|l| Bytes::from(l + "\n")).collect();
    h.proxy.handle_history(at, load, HistoryChunk::Lines(lines));
    h.proxy
        .handle_history(at, load, HistoryChunk::End(Default::default()));
    h.drain();
}

fn last_to_agent(h: &Harness) -> Value {
    json_of(h.to_agent.last().unwrap())
}

/// Two connections, each with a session of its own on the one agent.
fn two_sessions() -> Harness {
    let mut h = Harness::with(Config::default());
    h.client(INIT);
    h.agent(INIT_OK);
    h.client_on(1, INIT);
    h.client(&new_session(1));
    h.agent(r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"A"}}"#);
    h.client_on(1, &new_session(1));
    assert_eq!(last_to_agent(&h)["id"], "acp-journal:c1:1", "renumbered");
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:c1:1","result":{"sessionId":"B"}}"#);
    h
}

#[test]
fn a_later_connection_is_initialized_from_the_agents_answer_and_its_ids_are_its_own() {
    let h = two_sessions();
    let inits = h
        .to_agent
        .iter()
        .filter(|l| json_of(l)["method"] == "initialize")
        .count();
    assert_eq!(inits, 1, "the agent is initialized once");
    let one = received(&h, 1);
    assert_eq!(one[0]["id"], 0);
    assert_eq!(
        one[0]["result"]["agentCapabilities"],
        json_of(&h.clients[&ConnId::FIRST][0])["result"]["agentCapabilities"]
    );
    assert_eq!(
        one[1],
        json!({"jsonrpc":"2.0","id":1,"result":{"sessionId":"B"}})
    );
    let zero = received(&h, 0);
    assert_eq!(zero.len(), 2, "its initialize and session/new answers only");
    assert_eq!(zero[1]["result"]["sessionId"], "A");
}

#[test]
fn a_sessions_lines_go_to_the_connections_attached_to_it() {
    let mut h = two_sessions();
    let before = (received(&h, 0).len(), received(&h, 1).len());
    h.agent(&update("A", "to zero"));
    h.agent(&update("B", "to one"));
    // A permission request goes to one connection, which answers it.
    h.agent(r#"{"jsonrpc":"2.0","id":40,"method":"session/request_permission","params":{"sessionId":"B","toolCall":{"toolCallId":"t"},"options":[]}}"#);
    let zero = &received(&h, 0)[before.0..];
    let one = &received(&h, 1)[before.1..];
    assert_eq!(zero.len(), 1);
    assert_eq!(zero[0]["params"]["update"]["content"]["text"], "to zero");
    assert_eq!(one.len(), 2);
    assert_eq!(one[0]["params"]["update"]["content"]["text"], "to one");
    assert_eq!(one[1]["method"], "session/request_permission");
    h.client_on(
        1,
        r#"{"jsonrpc":"2.0","id":40,"result":{"outcome":{"outcome":"cancelled"}}}"#,
    );
    assert_eq!(last_to_agent(&h)["id"], 40, "the agent's id, as it sent it");
    // The same request id from both connections: each gets its own answer.
    h.client(r#"{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"A","prompt":[]}}"#);
    h.client_on(1, r#"{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"B","prompt":[]}}"#);
    h.client_on(
        1,
        r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":7}}"#,
    );
    assert_eq!(
        last_to_agent(&h)["params"]["requestId"],
        "acp-journal:c1:7",
        "a cancel names the request as the agent knows it"
    );
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:c1:7","result":{"stopReason":"cancelled"}}"#);
    h.agent(r#"{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}"#);
    assert_eq!(
        received(&h, 1).last().unwrap(),
        &json!({"jsonrpc":"2.0","id":7,"result":{"stopReason":"cancelled"}})
    );
    assert_eq!(
        received(&h, 0).last().unwrap(),
        &json!({"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}})
    );
}

#[test]
fn a_connection_ends_while_its_session_lives_on_and_the_last_ends_the_client() {
    let mut h = two_sessions();
    let at = h.stamp();
    h.proxy.handle_eof(at, Peer::Client(ConnId::FIRST));
    h.drain();
    assert!(!h.closed_agent_stdin, "another connection is open");
    // Session A lives on: a later connection takes it up.
    h.client_on(1, r#"{"jsonrpc":"2.0","id":8,"method":"session/prompt","params":{"sessionId":"A","prompt":[]}}"#);
    h.agent(&update("A", "to one now"));
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:c1:8","result":{"stopReason":"end_turn"}}"#);
    let one = received(&h, 1);
    let n = one.len();
    assert_eq!(
        one[n - 2]["params"]["update"]["content"]["text"],
        "to one now"
    );
    assert_eq!(one[n - 1]["id"], 8);
    assert_eq!(
        h.proxy.sessions().get("A").unwrap().members().attached(),
        [ConnId(1)]
    );
    let at = h.stamp();
    h.proxy.handle_eof(at, Peer::Client(ConnId(1)));
    h.drain();
    assert!(h.closed_agent_stdin, "the last connection ended");
}

#[test]
fn with_one_connection_lines_cross_unread_and_unchanged() {
    let mut h = Harness::with(Config::default());
    h.client(INIT);
    h.agent(INIT_OK);
    h.client(&new_session(1));
    h.agent(r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"A"}}"#);
    h.client(r#"{"jsonrpc":"2.0","id":"acp-journal:c1:1","method":"session/prompt","params":{"sessionId":"A","prompt":[]}}"#);
    assert_eq!(
        last_to_agent(&h)["id"],
        "acp-journal:c1:1",
        "no other connection: the id is the client's"
    );
    // An agent line before any client line still reaches the one client.
    let mut h = Harness::with(Config::default());
    h.agent(&update("A", "early"));
    assert_eq!(h.clients[&ConnId::FIRST].len(), 1);
}

#[test]
fn an_agent_request_left_unanswered_by_an_ended_connection_is_asked_again_or_answered() {
    let mut h = two_sessions();
    // Connection 1 takes part in session A too.
    h.client_on(1, r#"{"jsonrpc":"2.0","id":9,"method":"session/prompt","params":{"sessionId":"A","prompt":[]}}"#);
    h.agent(r#"{"jsonrpc":"2.0","id":40,"method":"_vendor/ask","params":{"sessionId":"A"}}"#);
    assert_eq!(
        received(&h, 0).last().unwrap()["id"],
        40,
        "asked of the first attached"
    );
    h.agent(r#"{"jsonrpc":"2.0","id":41,"method":"session/request_permission","params":{"sessionId":"A","toolCall":{"toolCallId":"t"},"options":[]}}"#);
    assert_eq!(received(&h, 0).last().unwrap()["id"], 41, "asked of all");
    assert_eq!(received(&h, 1).last().unwrap()["id"], 41, "asked of all");
    let before = received(&h, 1).len();
    // The first connection ends without answering: the other attached connection is asked
    // what only the first was; the permission request is still asked of it.
    let at = h.stamp();
    h.proxy.handle_eof(at, Peer::Client(ConnId::FIRST));
    h.drain();
    let one = &received(&h, 1)[before..];
    assert_eq!(one.len(), 1);
    assert_eq!(one[0]["method"], "_vendor/ask");
    assert_eq!(one[0]["id"], 40);
    // A request of session B, whose only connection then ends too... while a third one is
    // open: nobody attached can answer, so the proxy does, for the client.
    h.client_on(2, INIT);
    h.agent(r#"{"jsonrpc":"2.0","id":42,"method":"fs/read_text_file","params":{"sessionId":"B","path":"/w/x"}}"#);
    let refused = last_to_agent(&h);
    assert_eq!(refused["id"], 42, "no client declared fs: answered at once");
    assert_eq!(refused["error"]["code"], -32603);
    h.agent(r#"{"jsonrpc":"2.0","id":43,"method":"session/request_permission","params":{"sessionId":"B","toolCall":{"toolCallId":"u"},"options":[]}}"#);
    let sent = h.to_agent.len();
    let at = h.stamp();
    h.proxy.handle_eof(at, Peer::Client(ConnId(1)));
    h.drain();
    let mut answers: Vec<Value> = h.to_agent[sent..].iter().map(json_of).collect();
    answers.sort_by_key(|a| a["id"].as_i64());
    assert_eq!(answers.len(), 3, "{answers:?}");
    assert_eq!(answers[0]["id"], 40);
    assert_eq!(answers[0]["error"]["code"], -32603);
    assert_eq!(answers[1]["id"], 41);
    assert_eq!(answers[1]["result"]["outcome"]["outcome"], "cancelled");
    assert_eq!(answers[2]["id"], 43);
    assert_eq!(answers[2]["result"]["outcome"]["outcome"], "cancelled");
    assert!(
        received(&h, 2).iter().all(|l| l.get("method").is_none()),
        "none asked of 2"
    );
    assert_eq!(h.proxy.pending_requests(), 1, "the prompt still runs");
}

/// A host (`serve`): connection 1 made session A, connection 2 is open.
fn hosted() -> Harness {
    let config = Config {
        hosted: true,
        unattended_timeout_us: 1_000_000,
        ..Config::default()
    };
    let mut h = Harness::with(config);
    h.client_on(1, INIT);
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:c1:0","result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}"#);
    h.client_on(1, &new_session(1));
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:c1:1","result":{"sessionId":"A"}}"#);
    h.client_on(2, INIT);
    h
}

const PERMISSION_A: &str = r#"{"jsonrpc":"2.0","id":50,"method":"session/request_permission","params":{"sessionId":"A","toolCall":{"toolCallId":"t"},"options":[]}}"#;

#[test]
fn a_host_sends_a_sessions_lines_only_to_its_connections_and_lives_on_without_any() {
    let mut h = hosted();
    assert_eq!(
        received(&h, 1)[0]["id"],
        0,
        "each connection gets its own ids back"
    );
    assert_eq!(received(&h, 2)[0]["id"], 0);
    h.agent(&update("A", "for one"));
    assert_eq!(received(&h, 1).last().unwrap()["method"], "session/update");
    assert_eq!(received(&h, 2).len(), 1, "two is not attached to A");
    let at = h.stamp();
    h.proxy.handle_eof(at, Peer::Client(ConnId(1)));
    h.proxy.handle_eof(at, Peer::Client(ConnId(2)));
    h.drain();
    assert!(
        !h.closed_agent_stdin,
        "a host's agent outlives every connection"
    );
    h.agent(&update("A", "while nobody is there"));
    assert!(
        h.session("A")
            .iter()
            .any(|l| l.contains("while nobody is there")),
        "journaled"
    );
    assert_eq!(received(&h, 1).len(), 3, "sent to nobody");
    let at = h.stamp();
    h.proxy.handle_clients_gone(at);
    h.drain();
    assert!(h.closed_agent_stdin, "the host stops");
}

#[test]
fn a_request_for_a_session_nobody_is_attached_to_waits_for_the_next_that_loads_it() {
    let mut h = hosted();
    let at = h.stamp();
    h.proxy.handle_eof(at, Peer::Client(ConnId(1)));
    h.drain();
    let sent = h.to_agent.len();
    h.agent(PERMISSION_A);
    assert_eq!(h.to_agent.len(), sent, "not answered: it waits");
    assert!(
        received(&h, 2).iter().all(|l| l.get("method").is_none()),
        "not asked of two"
    );
    assert_eq!(h.proxy.poll_timeout(), Some(h.now() + 1_000_000));
    // Connection 2 loads A, which is live on the agent: served from the journal (the agent is
    // not asked), and the request follows the load's answer.
    let sent = h.to_agent.len();
    h.client_on(2, r#"{"jsonrpc":"2.0","id":3,"method":"session/load","params":{"sessionId":"A","cwd":"/w","mcpServers":[]}}"#);
    assert_eq!(h.to_agent.len(), sent, "the agent is not asked");
    history(&mut h, vec![update("A", "replayed")]);
    let two = received(&h, 2);
    let n = two.len();
    assert_eq!(
        two[n - 3]["params"]["update"]["content"]["text"],
        "replayed"
    );
    assert_eq!(two[n - 2]["id"], 3);
    assert!(two[n - 2]["result"].is_object());
    assert_eq!(two[n - 1]["method"], "session/request_permission");
    assert_eq!(two[n - 1]["id"], 50);
    h.client_on(2, r#"{"jsonrpc":"2.0","id":50,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}"#);
    assert_eq!(last_to_agent(&h)["result"]["outcome"]["optionId"], "allow");
    assert_eq!(h.proxy.poll_timeout(), None);
}

#[test]
fn a_request_that_waits_too_long_or_past_the_limit_is_answered_for_the_client() {
    let mut h = hosted();
    let at = h.stamp();
    h.proxy.handle_eof(at, Peer::Client(ConnId(1)));
    h.drain();
    h.agent(PERMISSION_A);
    h.agent(r#"{"jsonrpc":"2.0","id":51,"method":"fs/read_text_file","params":{"sessionId":"A","path":"/w/x"}}"#);
    let sent = h.to_agent.len();
    let first = h.proxy.poll_timeout().unwrap();
    h.proxy.handle_tick(Stamp {
        unix_us: 0,
        mono_us: first + 10,
    });
    h.drain();
    let answers: Vec<Value> = h.to_agent[sent..].iter().map(json_of).collect();
    assert_eq!(answers.len(), 2);
    assert_eq!(answers[0]["id"], 50);
    assert_eq!(answers[0]["result"]["outcome"]["outcome"], "cancelled");
    assert_eq!(answers[1]["id"], 51);
    assert_eq!(answers[1]["error"]["code"], -32603);
    assert_eq!(h.proxy.poll_timeout(), None);
    // Past the limit, a request is answered at once.
    for n in 0..connection::WAITING_LIMIT + 1 {
        h.agent(&format!(r#"{{"jsonrpc":"2.0","id":{},"method":"session/request_permission","params":{{"sessionId":"A","toolCall":{{"toolCallId":"t"}},"options":[]}}}}"#, 100 + n));
    }
    let last = last_to_agent(&h);
    assert_eq!(last["id"], 100 + connection::WAITING_LIMIT);
    assert_eq!(last["result"]["outcome"]["outcome"], "cancelled");
}

const PROMPT_A: &str = r#"{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"A","prompt":[{"type":"text","text":"go"}]}}"#;
const INIT_FS: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true},"clientInfo":{"name":"two","version":"2.0"}}}"#;

/// Connection 2 loads session A while connection 1's turn runs there.
fn joined_mid_turn() -> Harness {
    let mut h = hosted();
    h.client_on(1, PROMPT_A);
    h.agent(&update("A", "before"));
    h.client_on(2, r#"{"jsonrpc":"2.0","id":3,"method":"session/load","params":{"sessionId":"A","cwd":"/w","mcpServers":[]}}"#);
    let until = h.requests.iter().rev().find_map(|a| match a {
        Action::FetchHistory { until, .. } => Some(*until),
        _ => None,
    });
    assert!(
        matches!(until, Some(Some(_))),
        "a live session's history stops where the live lines begin: {until:?}"
    );
    // While its history is read, the turn goes on: held for two, sent to one.
    h.agent(&update("A", "during"));
    h.agent(PERMISSION_A);
    assert_eq!(received(&h, 1).last().unwrap()["id"], 50);
    assert!(received(&h, 2).iter().all(|l| l.get("method").is_none()));
    history(&mut h, vec![update("A", "before")]);
    h
}

#[test]
fn a_connection_joining_a_live_session_gets_the_history_then_every_live_line_once() {
    let h = joined_mid_turn();
    let two = received(&h, 2);
    let texts: Vec<&Value> = two
        .iter()
        .map(|l| &l["params"]["update"]["content"]["text"])
        .collect();
    let n = two.len();
    assert_eq!(texts[n - 4], "before", "the history");
    assert_eq!(two[n - 3]["id"], 3, "the answer");
    assert_eq!(texts[n - 2], "during", "then the live lines, once");
    assert_eq!(two[n - 1]["id"], 50, "and the permission request");
    assert_eq!(
        received(&h, 1)
            .iter()
            .filter(|l| l["params"]["update"]["content"]["text"] == "before")
            .count(),
        1,
        "one does not get two's history"
    );
}

#[test]
fn the_first_answer_to_a_permission_request_wins_and_the_others_are_told() {
    let mut h = joined_mid_turn();
    let sent = h.to_agent.len();
    h.client_on(2, r#"{"jsonrpc":"2.0","id":50,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}"#);
    assert_eq!(h.to_agent.len(), sent + 1);
    assert_eq!(last_to_agent(&h)["result"]["outcome"]["optionId"], "allow");
    let one = received(&h, 1);
    let n = one.len();
    assert_eq!(one[n - 2]["method"], "$/cancel_request");
    assert_eq!(one[n - 2]["params"]["requestId"], 50);
    assert_eq!(
        one[n - 1]["params"]["update"]["sessionUpdate"],
        "tool_call_update"
    );
    assert_eq!(one[n - 1]["params"]["update"]["toolCallId"], "t");
    assert_eq!(
        one[n - 1]["params"]["update"]["_meta"]["acpJournal"]["permission"]["optionId"],
        "allow"
    );
    // One's answer (to the cancel) comes late: not forwarded.
    h.client_on(
        1,
        r#"{"jsonrpc":"2.0","id":50,"error":{"code":-32800,"message":"cancelled"}}"#,
    );
    assert_eq!(h.to_agent.len(), sent + 1, "the agent gets one answer");
}

#[test]
fn an_error_answer_waits_for_another_connections() {
    let mut h = joined_mid_turn();
    let sent = h.to_agent.len();
    h.client_on(
        1,
        r#"{"jsonrpc":"2.0","id":50,"error":{"code":-32601,"message":"no"}}"#,
    );
    assert_eq!(h.to_agent.len(), sent, "two may still answer");
    h.client_on(2, r#"{"jsonrpc":"2.0","id":50,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}"#);
    assert_eq!(last_to_agent(&h)["result"]["outcome"]["optionId"], "allow");
}

#[test]
fn a_prompt_while_another_connections_turn_runs_is_refused_then_taken_and_shown_to_the_others() {
    let mut h = joined_mid_turn();
    let sent = h.to_agent.len();
    h.client_on(2, r#"{"jsonrpc":"2.0","id":8,"method":"session/prompt","params":{"sessionId":"A","prompt":[{"type":"text","text":"me too"}]}}"#);
    assert_eq!(h.to_agent.len(), sent, "refused, not forwarded");
    let refusal = received(&h, 2).last().unwrap().clone();
    assert_eq!(refusal["id"], 8);
    assert_eq!(refusal["error"]["code"], -32000);
    assert!(
        refusal["error"]["message"]
            .as_str()
            .unwrap()
            .contains("busy")
    );
    // Either connection may cancel the turn.
    h.client_on(
        2,
        r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"A"}}"#,
    );
    assert_eq!(last_to_agent(&h)["method"], "session/cancel");
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:c1:7","result":{"stopReason":"cancelled"}}"#);
    assert_eq!(received(&h, 1).last().unwrap()["id"], 7);
    // Two is told the turn ended (the prompt's answer is one's).
    let told = received(&h, 2).last().unwrap().clone();
    let info = &told["params"]["update"];
    assert_eq!(info["sessionUpdate"], "session_info_update");
    assert_eq!(
        info["_meta"]["acpJournal"]["turnEnded"]["stopReason"],
        "cancelled"
    );
    assert_eq!(info["_meta"]["acpJournal"]["turnEnded"]["by"], "c1");
    // The turn is over: two's prompt goes on, and one sees it as the user's message.
    h.client_on(2, r#"{"jsonrpc":"2.0","id":9,"method":"session/prompt","params":{"sessionId":"A","prompt":[{"type":"text","text":"me now"}]}}"#);
    assert_eq!(last_to_agent(&h)["id"], "acp-journal:c2:9");
    let echo = received(&h, 1).last().unwrap().clone();
    assert_eq!(
        echo["params"]["update"]["sessionUpdate"],
        "user_message_chunk"
    );
    assert_eq!(echo["params"]["update"]["content"]["text"], "me now");
    h.agent(&update("A", "for both"));
    assert_eq!(
        received(&h, 1).last().unwrap()["params"]["update"]["content"]["text"],
        "for both"
    );
    assert_eq!(
        received(&h, 2).last().unwrap()["params"]["update"]["content"]["text"],
        "for both"
    );
}

#[test]
fn fs_requests_go_to_the_connection_running_the_turn_or_one_that_can() {
    let mut h = hosted();
    h.client_on(3, INIT_FS);
    h.client_on(3, r#"{"jsonrpc":"2.0","id":1,"method":"session/attach","params":{"sessionId":"A","historyPolicy":"none"}}"#);
    h.history_end();
    let answer = received(&h, 3).last().unwrap().clone();
    assert_eq!(answer["id"], 1);
    assert_eq!(answer["result"]["sessionId"], "A");
    assert_eq!(answer["result"]["role"], "controller");
    // One runs the turn but declared no fs: three, which did, is asked.
    h.client_on(1, PROMPT_A);
    h.agent(r#"{"jsonrpc":"2.0","id":60,"method":"fs/read_text_file","params":{"sessionId":"A","path":"/w/x"}}"#);
    assert_eq!(received(&h, 3).last().unwrap()["id"], 60);
    assert_ne!(received(&h, 1).last().unwrap()["id"], 60);
    // A terminal's requests go to the connection that created it.
    h.agent(r#"{"jsonrpc":"2.0","id":61,"method":"terminal/create","params":{"sessionId":"A","command":"ls"}}"#);
    assert_eq!(received(&h, 3).last().unwrap()["id"], 61);
    h.client_on(
        3,
        r#"{"jsonrpc":"2.0","id":61,"result":{"terminalId":"term-1"}}"#,
    );
    h.agent(r#"{"jsonrpc":"2.0","id":62,"method":"terminal/output","params":{"sessionId":"A","terminalId":"term-1"}}"#);
    assert_eq!(received(&h, 3).last().unwrap()["id"], 62);
    // Three detaches: the next fs request has nobody who can answer it.
    h.client_on(
        3,
        r#"{"jsonrpc":"2.0","id":2,"method":"session/detach","params":{"sessionId":"A"}}"#,
    );
    let three = received(&h, 3);
    let detached = three.iter().find(|l| l["id"] == 2).unwrap();
    assert_eq!(detached["result"]["status"], "detached");
    // The terminal is three's: its request stays with it.
    assert_eq!(three.last().unwrap()["id"], 62);
    h.agent(r#"{"jsonrpc":"2.0","id":63,"method":"fs/read_text_file","params":{"sessionId":"A","path":"/w/x"}}"#);
    let refused = last_to_agent(&h);
    assert_eq!(refused["id"], 63);
    assert_eq!(refused["error"]["code"], -32603);
}

#[test]
fn a_close_while_others_are_attached_detaches_only_that_connection() {
    let mut h = hosted();
    h.client_on(2, r#"{"jsonrpc":"2.0","id":1,"method":"session/attach","params":{"sessionId":"A","role":"observer","historyPolicy":"none"}}"#);
    h.history_end();
    assert_eq!(
        received(&h, 2).last().unwrap()["result"]["role"],
        "observer"
    );
    h.client_on(2, r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"A","prompt":[]}}"#);
    assert!(
        received(&h, 2).last().unwrap()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("observers")
    );
    let sent = h.to_agent.len();
    h.client_on(
        1,
        r#"{"jsonrpc":"2.0","id":3,"method":"session/close","params":{"sessionId":"A"}}"#,
    );
    assert_eq!(
        h.to_agent.len(),
        sent,
        "two stays: the agent does not close it"
    );
    assert_eq!(received(&h, 1).last().unwrap()["id"], 3);
    h.agent(&update("A", "only two"));
    assert_eq!(
        received(&h, 2).last().unwrap()["params"]["update"]["content"]["text"],
        "only two"
    );
    assert_ne!(
        received(&h, 1).last().unwrap()["params"]["update"]["content"]["text"],
        "only two"
    );
    let bad = r#"{"jsonrpc":"2.0","id":4,"method":"session/attach","params":{"sessionId":"A","historyPolicy":"most"}}"#;
    h.client_on(1, bad);
    assert_eq!(received(&h, 1).last().unwrap()["error"]["code"], -32602);
}

#[test]
fn a_hosts_list_marks_the_sessions_live_on_its_agent() {
    let mut h = hosted();
    h.client_on(
        2,
        r#"{"jsonrpc":"2.0","id":5,"method":"session/list","params":{}}"#,
    );
    let row = |id: &str| ListedSession {
        session: id.into(),
        cwd: Some("/w".into()),
        prompted: true,
        updated: Activity { us: 1, at: None },
        ..ListedSession::default()
    };
    super::tests::sessions_answer(&mut h, vec![row("A"), row("old")]);
    let answer = received(&h, 2).last().unwrap().clone();
    let rows = answer["result"]["sessions"].as_array().unwrap().clone();
    let live = |id: &str| {
        rows.iter().find(|r| r["sessionId"] == id).unwrap()["_meta"]["acpJournal"]["live"] == true
    };
    assert!(live("A"), "{rows:?}");
    assert!(!live("old"), "{rows:?}");
    let init = &received(&h, 2)[0];
    assert_eq!(
        init["result"]["agentCapabilities"]["sessionCapabilities"]["attach"]["roles"],
        json!(["controller", "observer"]),
        "a host advertises the draft's attach"
    );
}
