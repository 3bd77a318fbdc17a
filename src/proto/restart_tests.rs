//! Scenarios for sessions that outlive their agent: restart, re-initialize, restore on the next
//! request, answers to a dead agent's requests, stalls — literal JSON lines through the
//! [`Harness`].

use serde_json::json;

use super::tests::{Harness, fetch, json_of};
use super::*;

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"notices":{}}}}}"#;
const NEW: &str =
    r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}"#;
const PROMPT: &str = r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"hi"}]}}"#;

/// A connection whose agent advertised `caps`, with session "S" live on it.
fn live(config: Config, caps: &str) -> Harness {
    let mut h = Harness::with(config);
    h.client(INIT);
    h.agent(&format!(
        r#"{{"jsonrpc":"2.0","id":0,"result":{{"protocolVersion":1,"agentCapabilities":{caps}}}}}"#
    ));
    h.client(NEW);
    h.agent(r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"S"}}"#);
    h
}

fn restart(h: &mut Harness, code: i32) {
    let at = h.stamp();
    h.proxy.handle_agent_restart(at, code);
    h.drain();
}

fn history(h: &mut Harness, load: u64, summary: Summary) {
    let at = h.stamp();
    h.proxy.handle_history(at, load, HistoryChunk::End(summary));
    h.drain();
}

fn events(h: &Harness, target: &Target) -> Vec<String> {
    h.journals[target]
        .iter()
        .filter_map(|r| match &r.body {
            Body::Event(e) => Some(e.kind().to_string()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_restart_answers_the_prompt_then_restores_the_session_on_the_next_one() {
    let mut h = live(Config::default(), "{}");
    assert!(h.proxy.can_restart());
    h.client(PROMPT);
    restart(&mut h, 137);
    // The prompt in flight is answered, never retried.
    let answer = h
        .to_client
        .iter()
        .map(json_of)
        .find(|m| m["id"] == 2)
        .expect("the prompt is answered");
    assert_eq!(answer["error"]["code"], -32603);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("send your message again"),
        "{answer}"
    );
    let notice = h
        .to_client
        .iter()
        .map(json_of)
        .find(|m| m["method"] == "session/update");
    assert_eq!(
        notice.unwrap()["params"]["update"]["sessionUpdate"],
        "notice"
    );
    // The new agent gets the client's initialize, under an id of ours.
    let init = json_of(h.to_agent.last().unwrap());
    assert_eq!(init["method"], "initialize");
    assert_eq!(init["id"], "acp-journal:0");
    assert_eq!(
        init["params"],
        json!({"protocolVersion":1,"clientCapabilities":{"session":{"notices":{}}}})
    );
    // A prompt sent meanwhile waits for the agent to be initialized.
    let sent = h.to_agent.len();
    h.client(&PROMPT.replace("\"id\":2", "\"id\":3"));
    assert_eq!(h.to_agent.len(), sent);
    let seen = h.to_client.len();
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:0","result":{"protocolVersion":1,"agentCapabilities":{}}}"#);
    assert_eq!(
        h.to_client.len(),
        seen,
        "the answer to our initialize is ours"
    );
    // Then the session is restored first: history read, a fresh agent session with the
    // session's own setup, mapped and re-primed.
    let load = fetch(&h);
    history(
        &mut h,
        load,
        Summary {
            turns: 1,
            transcript: "User: hi\nAgent: hello\n".into(),
            ..Summary::default()
        },
    );
    let new = json_of(h.to_agent.last().unwrap());
    assert_eq!(new["method"], "session/new");
    assert_eq!(new["params"], json!({"cwd":"/w","mcpServers":[]}));
    h.agent(&format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"sessionId":"U"}}}}"#,
        new["id"]
    ));
    let prompt = json_of(h.to_agent.last().unwrap());
    assert_eq!(prompt["id"], 3);
    assert_eq!(prompt["params"]["sessionId"], "U");
    assert!(
        prompt["params"]["prompt"][0]["text"]
            .as_str()
            .unwrap()
            .contains("User: hi")
    );
    h.agent(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"U","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"back"}}}}"#);
    assert_eq!(
        json_of(h.to_client.last().unwrap())["params"]["sessionId"],
        "S"
    );
    let story = events(&h, &Target::Session("S".into()));
    assert!(story.contains(&"agent_restarted".to_string()), "{story:?}");
    assert!(story.contains(&"session_restored".to_string()), "{story:?}");
    assert!(events(&h, &Target::Connection).contains(&"agent_restarted".to_string()));
}

#[test]
fn a_restored_session_is_resumed_where_the_agent_can() {
    let mut h = live(
        Config::default(),
        r#"{"sessionCapabilities":{"resume":{}}}"#,
    );
    restart(&mut h, 1);
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:0","result":{"protocolVersion":1,"agentCapabilities":{"sessionCapabilities":{"resume":{}}}}}"#);
    h.client(PROMPT);
    let load = fetch(&h);
    history(&mut h, load, Summary::default());
    let resume = json_of(h.to_agent.last().unwrap());
    assert_eq!(resume["method"], "session/resume");
    assert_eq!(resume["params"]["sessionId"], "S");
    h.agent(&format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#,
        resume["id"]
    ));
    let prompt = json_of(h.to_agent.last().unwrap());
    assert_eq!(prompt["id"], 2);
    assert_eq!(
        prompt["params"]["sessionId"], "S",
        "resumed under its own ID"
    );
    let restored = h.journals[&Target::Session("S".into())]
        .iter()
        .any(|r| matches!(&r.body, Body::Event(Event::SessionRestored { how }) if how == "session/resume"));
    assert!(restored);
}

#[test]
fn answers_to_the_dead_agents_requests_are_journaled_and_dropped() {
    let mut h = live(Config::default(), "{}");
    h.client(PROMPT);
    h.agent(r#"{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"S","toolCall":{"toolCallId":"t"},"options":[]}}"#);
    restart(&mut h, 137);
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:0","result":{"protocolVersion":1,"agentCapabilities":{}}}"#);
    // The new agent asks something under the same id before the client answered the old
    // request: the client sees it under another id.
    h.agent(r#"{"jsonrpc":"2.0","id":0,"method":"fs/read_text_file","params":{"path":"/x"}}"#);
    let asked = json_of(h.to_client.last().unwrap());
    assert_ne!(asked["id"], json!(0));
    let sent = h.to_agent.len();
    let late = r#"{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"cancelled"}}}"#;
    h.client(late);
    assert_eq!(h.to_agent.len(), sent, "never forwarded to the new agent");
    assert!(h.session("S").contains(&late.to_string()), "but journaled");
    // The client's answer to the new request goes back under the agent's own id.
    h.client(&format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"content":""}}}}"#,
        asked["id"]
    ));
    assert_eq!(json_of(h.to_agent.last().unwrap())["id"], json!(0));
}

#[test]
fn the_agent_is_restarted_only_once_it_answered_initialize_and_never_when_recording_only() {
    let mut h = Harness::with(Config::default());
    h.client(INIT);
    assert!(!h.proxy.can_restart(), "no answer to initialize yet");
    let off = live(
        Config {
            load: LoadMode::Off,
            ..Config::default()
        },
        "{}",
    );
    assert!(!off.proxy.can_restart());
}

#[test]
fn a_silent_prompt_is_cancelled_then_the_agent_restarted() {
    let mut h = live(
        Config {
            stall_timeout_us: Some(1_000_000),
            stall_grace_us: 1_000_000,
            ..Config::default()
        },
        "{}",
    );
    h.client(PROMPT);
    let t0 = h.stamp().mono_us;
    let tick = |h: &mut Harness, after: u64| {
        let at = Stamp {
            unix_us: 0,
            mono_us: t0 + after,
        };
        h.proxy.handle_tick(at);
        h.drain();
    };
    tick(&mut h, 900_000);
    assert_ne!(
        json_of(h.to_agent.last().unwrap())["method"],
        "session/cancel"
    );
    tick(&mut h, 1_100_000);
    let cancel = json_of(h.to_agent.last().unwrap());
    assert_eq!(cancel["method"], "session/cancel");
    assert_eq!(cancel["params"]["sessionId"], "S");
    assert!(!h.requests.contains(&Action::RestartAgent));
    tick(&mut h, 2_200_000);
    assert!(h.requests.contains(&Action::RestartAgent));
    let story = h.journals[&Target::Session("S".into())]
        .iter()
        .filter_map(|r| match &r.body {
            Body::Event(Event::PromptStalled { action }) => Some(action.clone()),
            _ => None,
        })
        .collect::<Vec<_>>();
    assert_eq!(story, ["cancel", "restart"]);
}

#[test]
fn a_prompt_the_agent_keeps_talking_on_or_waits_on_the_client_for_is_not_stalled() {
    let mut h = live(
        Config {
            stall_timeout_us: Some(1_000_000),
            ..Config::default()
        },
        "{}",
    );
    h.client(PROMPT);
    h.agent(r#"{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"S","toolCall":{"toolCallId":"t"},"options":[]}}"#);
    let at = Stamp {
        unix_us: 0,
        mono_us: 60_000_000,
    };
    h.proxy.handle_tick(at);
    h.drain();
    assert_ne!(
        json_of(h.to_agent.last().unwrap())["method"],
        "session/cancel",
        "the agent waits for the user"
    );
}

#[test]
fn a_native_load_cut_short_by_a_restart_does_not_keep_its_replay_out_of_the_journal() {
    let mut h = live(Config::default(), r#"{"loadSession":true}"#);
    h.client(r#"{"jsonrpc":"2.0","id":5,"method":"session/load","params":{"sessionId":"S","cwd":"/w","mcpServers":[]}}"#);
    restart(&mut h, 137);
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:0","result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}"#);
    let update = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"later"}}}}"#;
    h.agent(update);
    assert!(
        h.session("S").contains(&update.to_string()),
        "journaled: the replay it belonged to is over"
    );
}
