//! What a client prompt and its answer cost the core's tables, counted by a test build: lookups
//! of the session table by ID ([`super::sessions::SessionTable::lookups`]) and of the pending
//! table by key ([`super::pending::PendingTable::lookups`]), in the stdio proxy (one connection,
//! ACP v1, `--load auto`, a session live on the agent under its own ID), as
//! `examples/core_path` drives it.

use super::tests::Harness;
use super::*;

const PROMPT: &str = r#"{"jsonrpc":"2.0","id":N,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hello"}]}}"#;
const ANSWER: &str = r#"{"jsonrpc":"2.0","id":N,"result":{"stopReason":"end_turn"}}"#;

/// Session-table and pending-table lookups so far.
fn lookups(h: &Harness) -> (usize, usize) {
    (h.proxy.sessions().lookups(), h.proxy.pending_lookups())
}

#[test]
fn a_prompt_and_its_answer_look_the_tables_up_as_counted() {
    let mut h = Harness::with(Config::default());
    h.client(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#);
    h.agent(r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}"#);
    h.client(r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}"#);
    h.agent(r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}"#);
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
