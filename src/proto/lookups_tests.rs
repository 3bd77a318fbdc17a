//! What a client prompt and its answer cost the core's tables, counted by a test build: lookups
//! of the session table by ID ([`super::sessions::SessionTable::lookups`]) and of the pending
//! table by key ([`super::pending::PendingTable::lookups`]), in the stdio proxy (one connection,
//! ACP v1, `--load auto`, a session live on the agent under its own ID), as
//! `examples/core_path` drives it; and the agent's lines of a turn.

use super::tests::Harness;
use super::*;

const PROMPT: &str = r#"{"jsonrpc":"2.0","id":N,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hello"}]}}"#;
const ANSWER: &str = r#"{"jsonrpc":"2.0","id":N,"result":{"stopReason":"end_turn"}}"#;

/// Session-table and pending-table lookups so far.
fn lookups(h: &Harness) -> (usize, usize) {
    (h.proxy.sessions().lookups(), h.proxy.pending_lookups())
}

/// The stdio proxy with session `s1` live on the agent under its own ID.
fn live_session() -> Harness {
    let mut h = Harness::with(Config::default());
    h.client(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#);
    h.agent(r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}"#);
    h.client(r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}"#);
    h.agent(r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}"#);
    h
}

#[test]
fn a_prompt_and_its_answer_look_the_tables_up_as_counted() {
    let mut h = live_session();
    // A first turn (its prompt names the session's title), uncounted.
    h.client(&PROMPT.replace('N', "2"));
    h.agent(&ANSWER.replace('N', "2"));
    let before = lookups(&h);
    h.client(&PROMPT.replace('N', "3"));
    let prompted = lookups(&h);
    h.agent(&ANSWER.replace('N', "3"));
    let answered = lookups(&h);
    let prompt = (prompted.0 - before.0, prompted.1 - before.1);
    let answer = (answered.0 - prompted.0, answered.1 - prompted.1);
    // (session table, pending table). The prompt: its session looked up once, as it arrives
    // (`Proxy::handle_line`: its membership), and reached by its slot after (the route, the
    // relay's edit, the attribution's owner, the facts, whether its journal is open); its entry
    // put in the pending table. The answer: the entry taken out once (the route), which the
    // relay and the attribution then read, and the session it names looked up once (the
    // route), reached by its slot after (the facts, the prompt's end, whether the journal is
    // open).
    assert_eq!(
        (prompt, answer),
        ((1, 1), (1, 1)),
        "(the prompt, its answer)"
    );
}

#[test]
fn an_agent_s_updates_and_requests_look_their_session_up_once() {
    let mut h = live_session();
    h.client(&PROMPT.replace('N', "2"));
    // (session table, pending table) per agent line of the turn: the session it names looked
    // up once (the route), reached by its slot after (whether it is held, the catalog's facts,
    // the attribution's owner, whether its journal is open, whether it is a native replay);
    // a request's entry put in the pending table.
    let update = |u: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s1","update":{u}}}}}"#
        )
    };
    let lines = [
        update(r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}"#),
        update(r#"{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Read a.rs"}"#),
        update(r#"{"sessionUpdate":"usage_update","used":1200,"size":200000}"#),
        update(r#"{"sessionUpdate":"session_info_update","title":"Fix the splitter"}"#),
        r#"{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"t1"},"options":[]}}"#.to_string(),
    ];
    for line in lines {
        let before = lookups(&h);
        h.agent(&line);
        let after = lookups(&h);
        let expected = match line.contains("request_permission") {
            true => (1, 1),
            false => (1, 0),
        };
        assert_eq!((after.0 - before.0, after.1 - before.1), expected, "{line}");
    }
}
