//! One prompt turn through the protocol core, for `scripts/core-measures.sh`: it counts the
//! files of `src/proto/` whose code runs on the way of a plain `session/prompt` (ACP v1, one
//! connection, a session live on the agent under its own ID) and of its answer.
//!
//! The handshake, the session's creation and a first turn run before, uncounted; the second
//! turn's prompt ([`way_in`]), an `agent_message_chunk` of it ([`update_out`]) and its answer
//! ([`answer_out`]) are each a function of their own that callgrind's `--toggle-collect` picks.
//!
//! ```text
//! cargo build --example core_path && valgrind --tool=callgrind \
//!     --toggle-collect='core_path::way_in' target/debug/examples/core_path
//! ```

use acp_journal::proto::{Config, ConnId, Peer, Proxy, Stamp};
use bytes::Bytes;

const PROMPT: &str = r#"{"jsonrpc":"2.0","id":N,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hello"}]}}"#;
const CHUNK: &str = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}"#;
const ANSWER: &str = r#"{"jsonrpc":"2.0","id":N,"result":{"stopReason":"end_turn"}}"#;

fn main() {
    let mut proxy = Proxy::new(Config::default());
    let client = Peer::Client(ConnId::FIRST);
    let lines: [(Peer, &str); 4] = [
        (
            client,
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#,
        ),
        (
            Peer::Agent,
            r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}"#,
        ),
        (
            client,
            r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}"#,
        ),
        (
            Peer::Agent,
            r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}"#,
        ),
    ];
    for (from, line) in lines {
        handle(&mut proxy, from, line.to_owned());
    }
    handle(&mut proxy, client, PROMPT.replace('N', "2"));
    handle(&mut proxy, Peer::Agent, CHUNK.to_owned());
    handle(&mut proxy, Peer::Agent, ANSWER.replace('N', "2"));
    way_in(&mut proxy);
    update_out(&mut proxy);
    answer_out(&mut proxy);
}

/// The second turn's prompt, from the client to the agent.
#[inline(never)]
fn way_in(proxy: &mut Proxy) {
    handle(proxy, Peer::Client(ConnId::FIRST), PROMPT.replace('N', "3"));
}

/// An update of the turn, from the agent to the client.
#[inline(never)]
fn update_out(proxy: &mut Proxy) {
    handle(proxy, Peer::Agent, CHUNK.to_owned());
}

/// The turn's answer, from the agent to the client.
#[inline(never)]
fn answer_out(proxy: &mut Proxy) {
    handle(proxy, Peer::Agent, ANSWER.replace('N', "3"));
}

/// The time of every line: the shell's reading, made outside the core (and outside the count).
const AT: Stamp = Stamp {
    unix_us: 0,
    mono_us: 0,
};

/// A line in, and every action it makes drained, as the shell does.
fn handle(proxy: &mut Proxy, from: Peer, line: String) {
    proxy.handle_line(AT, from, Bytes::from(line + "\n"));
    while let Some(action) = proxy.poll_action() {
        let _ = std::hint::black_box(action);
    }
}
