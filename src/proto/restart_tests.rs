//! Scenarios for sessions that outlive their agent: restart, re-initialize, restore on the next
//! request, answers to a dead agent's requests, stalls — literal JSON lines through the
//! [`Harness`].

use bytes::Bytes;
use serde_json::json;

use super::tests::{Harness, fetch, json_of};
use super::*;
use crate::journal::Event;
use crate::journal::format::Body;

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

/// A restored session the agent's own copy holds whole (its own ID ran every turn here).
fn whole() -> Summary {
    Summary {
        agent_copy: AgentCopy::Whole("S".into()),
        ..Summary::default()
    }
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
    assert!(events(&h, &Target::Run).contains(&"agent_restarted".to_string()));
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
    history(&mut h, load, whole());
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

/// The core's time at `mono_us` (the shell's paused clock, as it wakes at `poll_timeout`).
fn at(mono_us: u64) -> Stamp {
    Stamp {
        unix_us: 1_000_000 + mono_us as i64,
        mono_us,
    }
}

/// A client line at `mono_us`.
fn client_at(h: &mut Harness, mono_us: u64, line: &str) {
    h.proxy.handle_line(
        at(mono_us),
        Peer::Client(ConnId::FIRST),
        Bytes::from(format!("{line}\n")),
    );
    h.drain();
}

/// Tick the core at `mono_us`.
fn tick_at(h: &mut Harness, mono_us: u64) {
    h.proxy.handle_tick(at(mono_us));
    h.drain();
}

/// The client's messages from `from` on, as JSON.
fn client_since(h: &Harness, from: usize) -> Vec<serde_json::Value> {
    h.to_client[from..].iter().map(json_of).collect()
}

/// The titles of the notices among `messages`.
fn notices(messages: &[serde_json::Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "notice")
        .map(|m| m["params"]["update"]["title"].as_str().unwrap().to_string())
        .collect()
}

fn logs(h: &Harness) -> Vec<String> {
    h.requests
        .iter()
        .filter_map(|a| match a {
            Action::Log(message) => Some(message.clone()),
            _ => None,
        })
        .collect()
}

const SECOND: u64 = 1_000_000;

/// When the tests' agent dies: well past the harness's own stamps.
const T0: u64 = 1_000 * SECOND;

/// A live session whose agent (a host, when `remote`) gets `reinit_timeout_us` to answer the
/// recorded `initialize` once it is started again.
fn restarting(remote: bool, reinit_timeout_us: u64) -> Harness {
    live(
        Config {
            remote,
            reinit_timeout_us,
            ..Config::default()
        },
        "{}",
    )
}

#[test]
fn a_request_held_for_a_restarted_agent_is_answered_when_its_initialize_times_out() {
    let timeout = 20 * SECOND;
    let mut h = restarting(false, timeout);
    let t0 = T0;
    h.proxy.handle_agent_restart(at(t0), 137);
    h.drain();
    // A prompt sent meanwhile waits for the new agent, which never answers initialize.
    client_at(&mut h, t0 + SECOND, &PROMPT.replace("\"id\":2", "\"id\":3"));
    assert_eq!(h.proxy.poll_timeout(), Some(t0 + timeout));
    let seen = h.to_client.len();
    tick_at(&mut h, t0 + timeout - 1);
    assert_eq!(h.to_client.len(), seen, "not before the timeout");
    assert!(!h.requests.contains(&Action::RestartAgent));
    tick_at(&mut h, t0 + timeout);
    let answer = client_since(&h, seen)
        .into_iter()
        .find(|m| m["id"] == 3)
        .expect("the held prompt is answered at the timeout");
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not answer initialize"),
        "{answer}"
    );
    assert_eq!(answer["error"]["data"]["method"], "session/prompt");
    assert!(
        answer["error"]["data"]["reason"]
            .as_str()
            .unwrap()
            .contains("did not answer initialize within 20 s (--init-timeout)"),
        "{answer}"
    );
    assert!(
        h.requests.contains(&Action::RestartAgent),
        "and it restarts"
    );
    assert!(
        h.session("S").iter().any(|l| l.contains("\"id\":3")),
        "the prompt and its answer are journaled with its session"
    );
    // The next agent answers: nothing held crosses over to it.
    h.proxy.handle_agent_restart(at(t0 + timeout + SECOND), 137);
    h.drain();
    let init = json_of(h.to_agent.last().unwrap());
    assert_eq!(init["method"], "initialize");
    let sent = h.to_agent.len();
    h.agent(&format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"protocolVersion":1,"agentCapabilities":{{}}}}}}"#,
        init["id"]
    ));
    assert_eq!(h.to_agent.len(), sent, "the answered prompt is not sent");
}

#[test]
fn a_request_waits_for_restarted_agents_at_most_the_init_timeout_in_all() {
    let timeout = 20 * SECOND;
    let mut h = restarting(false, timeout);
    let t0 = T0;
    h.proxy.handle_agent_restart(at(t0), 137);
    client_at(&mut h, t0 + SECOND, PROMPT);
    // The new agent dies before it answers; the next one gets its own time, the prompt does
    // not.
    h.proxy.handle_agent_restart(at(t0 + 15 * SECOND), 1);
    h.drain();
    assert_eq!(h.proxy.poll_timeout(), Some(t0 + SECOND + timeout));
    let seen = h.to_client.len();
    tick_at(&mut h, t0 + SECOND + timeout);
    let answer = client_since(&h, seen)
        .into_iter()
        .find(|m| m["id"] == 2)
        .expect("answered");
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    assert!(
        !h.requests.contains(&Action::RestartAgent),
        "the agent has time left"
    );
    assert_eq!(h.proxy.poll_timeout(), Some(t0 + 15 * SECOND + timeout));
}

#[test]
fn a_host_unreachable_for_a_few_seconds_is_told_then_back_and_the_held_prompt_goes_on() {
    let mut h = restarting(true, Config::default().reinit_timeout_us);
    h.client(PROMPT);
    let t0 = T0;
    let seen = h.to_client.len();
    h.proxy.handle_agent_restart(at(t0), 1);
    h.drain();
    // The turn in flight is answered with what happened; nothing else is said yet.
    let said = client_since(&h, seen);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0]["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("the connection to the host dropped"),
        "{}",
        said[0]
    );
    assert!(
        logs(&h)
            .iter()
            .any(|l| l.starts_with("the connection to the host dropped")),
        "{:?}",
        logs(&h)
    );
    assert!(!logs(&h).iter().any(|l| l.contains("restarted it")));
    client_at(&mut h, t0 + SECOND, &PROMPT.replace("\"id\":2", "\"id\":3"));
    assert_eq!(h.proxy.poll_timeout(), Some(t0 + 3 * SECOND));
    let seen = h.to_client.len();
    tick_at(&mut h, t0 + 3 * SECOND);
    let said = client_since(&h, seen);
    assert_eq!(notices(&said), ["The host is unreachable"], "{said:?}");
    assert_eq!(said[0]["params"]["sessionId"], "S");
    assert_eq!(said[0]["params"]["update"]["severity"], "warning");
    assert!(!said.iter().any(|m| m["id"] == 3), "the prompt waits on");
    assert_eq!(h.proxy.poll_timeout(), Some(t0 + 60 * SECOND));
    // The host answers the recorded initialize: the client hears it is back, then the held
    // prompt restores its session and goes on.
    let seen = h.to_client.len();
    h.proxy.handle_line(
        at(t0 + 10 * SECOND),
        Peer::Agent,
        Bytes::from_static(b"{\"jsonrpc\":\"2.0\",\"id\":\"acp-journal:0\",\"result\":{\"protocolVersion\":1,\"agentCapabilities\":{}}}\n"),
    );
    h.drain();
    assert_eq!(
        notices(&client_since(&h, seen)),
        ["The host is back"],
        "{:?}",
        client_since(&h, seen)
    );
    assert!(
        logs(&h)
            .iter()
            .any(|l| l.starts_with("the host is back after 10.0 s"))
    );
    let load = fetch(&h);
    history(&mut h, load, Summary::default());
    let new = json_of(h.to_agent.last().unwrap());
    assert_eq!(new["method"], "session/new");
    h.agent(&format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"sessionId":"U"}}}}"#,
        new["id"]
    ));
    let prompt = json_of(h.to_agent.last().unwrap());
    assert_eq!(prompt["id"], 3);
    assert_eq!(prompt["method"], "session/prompt");
}

#[test]
fn a_prompt_held_while_the_host_stays_unreachable_is_answered_at_the_init_timeout() {
    let timeout = 2 * SECOND;
    let mut h = restarting(true, timeout);
    let t0 = T0;
    h.proxy.handle_agent_restart(at(t0), 1);
    client_at(&mut h, t0 + 1, PROMPT);
    // The timeout is shorter than the notice's few seconds: the notice comes with it, first.
    assert_eq!(h.proxy.poll_timeout(), Some(t0 + timeout));
    let seen = h.to_client.len();
    tick_at(&mut h, t0 + timeout);
    let said = client_since(&h, seen);
    assert_eq!(notices(&said), ["The host is unreachable"], "{said:?}");
    let answer = said.iter().position(|m| m["id"] == 2).expect("answered");
    assert!(answer > 0, "after the notice: {said:?}");
    let error = &said[answer]["error"];
    assert_eq!(error["code"], -32603);
    assert_eq!(
        error["message"],
        "the host is unreachable: send the request again once it is back"
    );
    assert_eq!(error["data"]["method"], "session/prompt");
    assert!(
        error["data"]["reason"]
            .as_str()
            .unwrap()
            .contains("within 2 s (--init-timeout)"),
        "{error}"
    );
    assert!(h.requests.contains(&Action::RestartAgent), "connect again");
    assert!(
        logs(&h)
            .iter()
            .any(|l| l.starts_with("the host did not answer initialize within 2 s")),
        "{:?}",
        logs(&h)
    );
    // Connecting again tells the client nothing new until the host is back.
    let seen = h.to_client.len();
    h.proxy.handle_agent_restart(at(t0 + timeout + 1), 1);
    h.drain();
    tick_at(&mut h, t0 + 2 * timeout + 1);
    assert!(notices(&client_since(&h, seen)).is_empty());
}

#[test]
fn requests_held_for_a_restarted_agent_are_answered_when_it_is_gone_for_good() {
    let mut h = live(Config::default(), "{}");
    restart(&mut h, 137);
    h.client(PROMPT);
    let seen = h.to_client.len();
    // No more restarts (--respawn spent): the agent's end reaches the core.
    let at = h.stamp();
    h.proxy.handle_eof(at, Peer::Agent);
    h.drain();
    let answer = client_since(&h, seen)
        .into_iter()
        .find(|m| m["id"] == 2)
        .expect("the held prompt is answered");
    assert_eq!(answer["error"]["message"], "the agent exited", "{answer}");
    assert_eq!(answer["error"]["data"]["method"], "session/prompt");
}

#[test]
fn a_host_refusing_the_restore_because_another_host_holds_the_session_splits_nothing() {
    // Issue 37 (5): the bridge reconnected through a load balancer to a host that may not
    // continue the session yet. The held prompt gets the refusal; no new session is made on
    // the host (which would split the conversation); the next prompt tries the restore again.
    let mut h = live(
        Config {
            remote: true,
            ..Config::default()
        },
        r#"{"loadSession":true}"#,
    );
    let t0 = T0;
    h.proxy.handle_agent_restart(at(t0), 1);
    h.drain();
    client_at(&mut h, t0 + SECOND, &PROMPT.replace("\"id\":2", "\"id\":3"));
    h.proxy.handle_line(
        at(t0 + 2 * SECOND),
        Peer::Agent,
        Bytes::from_static(b"{\"jsonrpc\":\"2.0\",\"id\":\"acp-journal:0\",\"result\":{\"protocolVersion\":1,\"agentCapabilities\":{\"loadSession\":true}}}\n"),
    );
    h.drain();
    let load = fetch(&h);
    history(&mut h, load, whole());
    let asked = json_of(h.to_agent.last().unwrap());
    assert_eq!(asked["method"], "session/load", "{asked}");
    let seen = h.to_client.len();
    let sent = h.to_agent.len();
    h.agent(&format!(
        r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":-32000,"message":"session \"S\" is being continued on host \"b\" (run \"r\")","data":{{"sessionId":"S","reason":"lease"}}}}}}"#,
        asked["id"]
    ));
    assert_eq!(h.to_agent.len(), sent, "no session/new on the host");
    let answer = client_since(&h, seen)
        .into_iter()
        .find(|m| m["id"] == 3)
        .expect("the held prompt is answered");
    assert_eq!(answer["error"]["data"]["reason"], "lease", "{answer}");
    // The next prompt asks for the session again.
    client_at(
        &mut h,
        t0 + 20 * SECOND,
        &PROMPT.replace("\"id\":2", "\"id\":4"),
    );
    let again = fetch(&h);
    assert_ne!(again, load, "a new restore");
}
