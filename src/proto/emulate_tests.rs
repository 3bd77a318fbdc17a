//! Scenarios for session emulation: capabilities, synthetic loads, id and session mapping,
//! cancellation, listing, close and delete — literal JSON lines through the [`Harness`].

use bytes::Bytes;
use serde_json::{Value, json};

use super::tests::{Harness, fetch, json_of, sessions_answer};
use super::*;
use crate::journal::Event;
use crate::journal::format::Body;

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"notices":{}}}}}"#;
const INIT_OK: &str = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"promptCapabilities":{"image":true}},"authMethods":[]}}"#;
const LOAD: &str = r#"{"jsonrpc":"2.0","id":5,"method":"session/load","params":{"sessionId":"S","cwd":"/w","mcpServers":[]}}"#;

fn emulating() -> Harness {
    let mut h = Harness::with(Config::default());
    h.client(INIT);
    h.agent(INIT_OK);
    h
}

/// `--load journal` in front of an agent that advertises `loadSession`.
fn journal_mode_over_a_loading_agent() -> Harness {
    agent_with(
        Config {
            load: LoadMode::Journal,
            ..Config::default()
        },
        r#"{"loadSession":true}"#,
    )
}

/// A harness initialized with an agent that advertises `caps` (its `agentCapabilities`).
fn agent_with(config: Config, caps: &str) -> Harness {
    let mut h = Harness::with(config);
    h.client(INIT);
    h.agent(&format!(
        r#"{{"jsonrpc":"2.0","id":0,"result":{{"protocolVersion":1,"agentCapabilities":{caps}}}}}"#
    ));
    h
}

/// Send [`LOAD`] and finish its history fetch with `summary`.
fn load_replayed(h: &mut Harness, summary: Summary) {
    h.client(LOAD);
    let load = fetch(h);
    history(h, load, HistoryChunk::End(summary));
}

fn last_to_client(h: &Harness) -> Value {
    json_of(h.to_client.last().unwrap())
}

fn last_to_agent(h: &Harness) -> Value {
    json_of(h.to_agent.last().unwrap())
}

fn history(h: &mut Harness, load: u64, chunk: HistoryChunk) {
    let at = h.stamp();
    h.proxy.handle_history(at, load, chunk);
    h.drain();
}

fn replay_line(text: &str) -> Bytes {
    Bytes::from(format!(
        "{}\n",
        json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":text}}}})
    ))
}

fn summary() -> Summary {
    Summary {
        turns: 1,
        transcript: "User: hi\nAgent: hello\n".into(),
        mode: Some("plan".into()),
        agent_copy: AgentCopy::Whole("S".into()),
        ..Summary::default()
    }
}

/// A session the agent's own copy holds whole (the journal says its own ID ran every turn
/// here), and nothing else.
fn whole() -> Summary {
    Summary {
        agent_copy: AgentCopy::Whole("S".into()),
        ..Summary::default()
    }
}

#[test]
fn capabilities_are_added_and_nothing_else_changes() {
    let h = emulating();
    let sent = String::from_utf8(h.to_client[0].to_vec()).unwrap();
    assert_eq!(
        sent,
        "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":1,\"agentCapabilities\":{\"promptCapabilities\":{\"image\":true},\"loadSession\":true,\"sessionCapabilities\":{\"list\":{\"limit\":{},\"changes\":{}},\"resume\":{},\"close\":{},\"delete\":{},\"fork\":{}}},\"authMethods\":[]}}\n"
    );
    // The journal holds what the client saw.
    assert_eq!(h.connection()[1], sent.trim_end());
}

#[test]
fn an_agent_with_everything_is_left_alone() {
    let mut h = Harness::with(Config::default());
    h.client(INIT);
    let full = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"sessionCapabilities":{"list":{},"resume":{},"close":{},"delete":{},"fork":{}}}}}"#;
    h.agent(full);
    assert_eq!(h.to_client[0], format!("{full}\n"));
}

#[test]
fn synthetic_load_replays_then_starts_a_new_session_and_maps_it() {
    let mut h = emulating();
    h.client(LOAD);
    assert!(h.to_agent.len() == 1, "the load is not forwarded");
    let load = fetch(&h);
    history(
        &mut h,
        load,
        HistoryChunk::Lines(vec![replay_line("one"), replay_line("two")]),
    );
    assert_eq!(h.to_client.len(), 3, "replay lines go out as they come");
    history(&mut h, load, HistoryChunk::End(summary()));
    // session/new underneath, with the load's cwd and MCP servers, and an id of ours.
    let new = last_to_agent(&h);
    assert_eq!(new["method"], "session/new");
    assert_eq!(new["id"], "acp-journal:0");
    assert_eq!(new["params"], json!({"cwd":"/w","mcpServers":[]}));
    // An update for the new agent session before the load is answered is held.
    let before_answer = h.to_client.len();
    h.agent(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"U","update":{"sessionUpdate":"available_commands_update","availableCommands":[]}}}"#);
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:0","result":{"sessionId":"U","modes":{"currentModeId":"code","availableModes":[{"id":"code","name":"Code"},{"id":"plan","name":"Plan"}]}}}"#);
    // The recorded mode is restored before the answer.
    let set_mode = last_to_agent(&h);
    assert_eq!(set_mode["method"], "session/set_mode");
    assert_eq!(set_mode["params"], json!({"sessionId":"U","modeId":"plan"}));
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:1","result":{}}"#);
    let out: Vec<Value> = h.to_client[before_answer..].iter().map(json_of).collect();
    assert_eq!(
        out[0]["params"]["update"]["sessionUpdate"], "notice",
        "the client accepts notices"
    );
    assert_eq!(out[1]["id"], 5);
    assert_eq!(out[1]["result"]["modes"]["currentModeId"], "plan");
    // Then the held update, under the client's session ID.
    assert_eq!(out[2]["params"]["sessionId"], "S");
    assert_eq!(out.len(), 3);

    // The first prompt carries the transcript; the journal keeps the client's prompt.
    let prompt = r#"{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"next"}]}}"#;
    h.client(prompt);
    let sent = last_to_agent(&h);
    assert_eq!(sent["params"]["sessionId"], "U");
    assert_eq!(
        sent["params"]["prompt"][1],
        json!({"type":"text","text":"next"})
    );
    assert!(
        sent["params"]["prompt"][0]["text"]
            .as_str()
            .unwrap()
            .contains("User: hi\nAgent: hello\n")
    );
    assert!(h.session("S").contains(&prompt.to_string()));
    // Only the first prompt.
    h.client(&prompt.replace("\"id\":6", "\"id\":7"));
    assert_eq!(
        last_to_agent(&h)["params"]["prompt"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // Agent traffic is mapped back, and its tool and message ids cannot collide with replayed ones.
    h.agent(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"U","update":{"sessionUpdate":"tool_call","toolCallId":"call_1","title":"t"}}}"#);
    let update = last_to_client(&h);
    assert_eq!(update["params"]["sessionId"], "S");
    let id = update["params"]["update"]["toolCallId"].as_str().unwrap();
    assert!(id.ends_with("-call_1") && id != "call_1", "{id}");
    h.agent(r#"{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"U","toolCall":{"toolCallId":"call_1"},"options":[]}}"#);
    let perm = last_to_client(&h);
    assert_eq!(perm["params"]["sessionId"], "S");
    assert_eq!(perm["params"]["toolCall"]["toolCallId"], id);
    h.client(r#"{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"cancelled"}}}"#);
    assert_eq!(last_to_agent(&h)["id"], 0);
    h.agent(r#"{"jsonrpc":"2.0","id":6,"result":{"stopReason":"end_turn"}}"#);
    assert_eq!(last_to_client(&h)["id"], 6);

    // The mapping is persisted for later runs.
    assert!(h.requests.contains(&Action::Catalog(CatalogUpdate::Alias {
        session: "S".into(),
        agent: "U".into()
    })));
    let mapped = h.journals[&Target::Session("S".into())].iter().any(|r| matches!(&r.body, Body::Event(Event::SessionMapped { agent_session }) if agent_session == "U"));
    assert!(mapped);
}

#[test]
fn agent_lines_held_while_a_load_starts_their_session_are_bounded() {
    let mut h = Harness::with(Config {
        held_limit: 1000,
        ..Config::default()
    });
    h.client(INIT);
    h.agent(INIT_OK);
    h.client(LOAD);
    let load = fetch(&h);
    history(&mut h, load, HistoryChunk::End(summary()));
    assert_eq!(last_to_agent(&h)["method"], "session/new");
    let chunk = |n: usize, session: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{session}","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"{n:0>50}"}}}}}}}}"#
        )
    };
    let texts = |out: &[Bytes]| -> Vec<(String, String)> {
        out.iter()
            .map(json_of)
            .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
            .map(|m| {
                let text = m["params"]["update"]["content"]["text"].as_str().unwrap();
                let session = m["params"]["sessionId"].as_str().unwrap();
                (session.to_string(), text.to_string())
            })
            .collect()
    };
    // The agent floods its new session before answering `session/new`: held up to 1000
    // bytes, then the held lines and the rest pass as they come, in order. The client does
    // not know that session yet: they pass as the agent sent them.
    let before = h.to_client.len();
    for n in 0..20 {
        h.agent(&chunk(n, "U"));
    }
    let out = texts(&h.to_client[before..]);
    let expected: Vec<(String, String)> = (0..20)
        .map(|n| ("U".to_string(), format!("{n:0>50}")))
        .collect();
    assert_eq!(out, expected);
    // Answered, the session is mapped while its mode is restored: the rest goes out under
    // the client's session ID, still as it comes.
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:0","result":{"sessionId":"U","modes":{"currentModeId":"code","availableModes":[{"id":"code","name":"Code"},{"id":"plan","name":"Plan"}]}}}"#);
    assert_eq!(last_to_agent(&h)["method"], "session/set_mode");
    let before = h.to_client.len();
    h.agent(&chunk(20, "U"));
    assert_eq!(
        texts(&h.to_client[before..]),
        vec![("S".to_string(), format!("{:0>50}", 20))]
    );
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:1","result":{}}"#);
    assert_eq!(last_to_client(&h)["id"], 5, "the load is answered");
    assert!(!h.proxy.held().overflowed(), "the next load holds again");
}

#[test]
fn a_session_the_agent_names_while_a_load_waits_gets_its_early_lines_first() {
    let mut h = emulating();
    h.client(LOAD);
    let load = fetch(&h);
    history(&mut h, load, HistoryChunk::End(summary()));
    assert_eq!(last_to_agent(&h)["method"], "session/new");
    // Meanwhile the client starts a session of its own; the agent sends its first update
    // before its answer, while the load waits for an unknown session: held.
    h.client(
        r#"{"jsonrpc":"2.0","id":7,"method":"session/new","params":{"cwd":"/v","mcpServers":[]}}"#,
    );
    let update = |text: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"V","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"{text}"}}}}}}}}"#
        )
    };
    let before = h.to_client.len();
    h.agent(&update("first"));
    assert_eq!(h.to_client.len(), before, "held while V is unknown");
    h.agent(r#"{"jsonrpc":"2.0","id":7,"result":{"sessionId":"V"}}"#);
    h.agent(&update("second"));
    // V is not the load's: its lines go out in the agent's order, the load still waiting.
    let out: Vec<Value> = h.to_client[before..].iter().map(json_of).collect();
    assert_eq!(out.len(), 3);
    assert_eq!(out[0]["id"], 7);
    assert_eq!(out[1]["params"]["update"]["content"]["text"], "first");
    assert_eq!(out[2]["params"]["update"]["content"]["text"], "second");
}

#[test]
fn loading_an_unknown_session_is_resource_not_found() {
    let mut h = emulating();
    h.client(LOAD);
    let load = fetch(&h);
    history(&mut h, load, HistoryChunk::Missing);
    let answer = last_to_client(&h);
    assert_eq!(answer["id"], 5);
    assert_eq!(answer["error"]["code"], -32002);
    assert_eq!(answer["error"]["data"]["sessionId"], "S");
    assert!(
        h.opened.is_empty(),
        "no journal is created for a session that does not exist"
    );
}

#[test]
fn loading_a_session_another_host_holds_fails_with_the_reason() {
    let mut h = emulating();
    h.client(LOAD);
    let load = fetch(&h);
    let why = "session \"S\" is being continued on host h2 (run r)";
    history(&mut h, load, HistoryChunk::Refused(why.into()));
    let answer = last_to_client(&h);
    assert_eq!(answer["id"], 5);
    assert_eq!(answer["error"]["code"], -32000);
    assert_eq!(answer["error"]["message"], why);
    assert_eq!(answer["error"]["data"]["sessionId"], "S");
    assert!(
        h.opened.is_empty(),
        "nothing is journaled for the session here"
    );
}

#[test]
fn cancel_request_during_the_replay_stops_it_and_answers_32800() {
    let mut h = emulating();
    h.client(LOAD);
    let load = fetch(&h);
    history(&mut h, load, HistoryChunk::Lines(vec![replay_line("one")]));
    h.client(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":5}}"#);
    assert!(h.requests.contains(&Action::CancelHistory { load }));
    let answer = last_to_client(&h);
    assert_eq!(
        (answer["id"].clone(), answer["error"]["code"].clone()),
        (json!(5), json!(-32800))
    );
    let sent = h.to_client.len();
    history(&mut h, load, HistoryChunk::Lines(vec![replay_line("late")]));
    history(&mut h, load, HistoryChunk::End(summary()));
    assert_eq!(h.to_client.len(), sent, "nothing after the cancel");
    assert_eq!(
        h.to_agent.len(),
        1,
        "neither the load nor the cancel reach the agent"
    );
}

#[test]
fn session_cancel_during_a_load_answers_it() {
    let mut h = emulating();
    h.client(LOAD);
    h.client(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"S"}}"#);
    assert_eq!(last_to_client(&h)["error"]["code"], -32800);
}

#[test]
fn an_agent_error_on_the_new_session_becomes_the_load_error() {
    let mut h = emulating();
    load_replayed(&mut h, summary());
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:0","error":{"code":-32000,"message":"Authentication required"}}"#);
    assert_eq!(
        last_to_client(&h),
        json!({"jsonrpc":"2.0","id":5,"error":{"code":-32000,"message":"Authentication required"}})
    );
}

#[test]
fn agents_with_resume_are_resumed_without_mapping() {
    let mut h = agent_with(
        Config::default(),
        r#"{"sessionCapabilities":{"resume":{}}}"#,
    );
    load_replayed(&mut h, whole());
    let resume = last_to_agent(&h);
    assert_eq!(resume["method"], "session/resume");
    assert_eq!(resume["params"]["sessionId"], "S");
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:0","result":{}}"#);
    assert_eq!(
        last_to_client(&h),
        json!({"jsonrpc":"2.0","id":5,"result":{}})
    );
    h.client(r#"{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"sessionId":"S","prompt":[]}}"#);
    assert_eq!(last_to_agent(&h)["params"]["sessionId"], "S");
}

#[test]
fn a_failed_resume_falls_back_to_a_new_session() {
    let mut h = agent_with(
        Config::default(),
        r#"{"sessionCapabilities":{"resume":{}}}"#,
    );
    load_replayed(&mut h, Summary::default());
    h.agent(
        r#"{"jsonrpc":"2.0","id":"acp-journal:0","error":{"code":-32002,"message":"unknown"}}"#,
    );
    assert_eq!(last_to_agent(&h)["method"], "session/new");
}

#[test]
fn client_ids_that_collide_with_ours_are_renumbered_both_ways() {
    let mut h = emulating();
    load_replayed(&mut h, Summary::default());
    // Our session/new ("acp-journal:0") is pending; the client happens to use the same id.
    h.client(r#"{"jsonrpc":"2.0","id":"acp-journal:0","method":"_x/ping","params":{}}"#);
    let sent = last_to_agent(&h);
    assert_ne!(sent["id"], "acp-journal:0");
    let alias = sent["id"].as_str().unwrap().to_string();
    h.client(
        r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"acp-journal:0"}}"#,
    );
    assert_eq!(last_to_agent(&h)["params"]["requestId"], alias.as_str());
    h.agent(&format!(
        r#"{{"jsonrpc":"2.0","id":"{alias}","result":{{"pong":true}}}}"#
    ));
    assert_eq!(
        last_to_client(&h),
        json!({"jsonrpc":"2.0","id":"acp-journal:0","result":{"pong":true}})
    );
    // Our own response is still consumed.
    let n = h.to_client.len();
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:0","result":{"sessionId":"U"}}"#);
    assert_eq!(last_to_client(&h)["id"], 5);
    assert_eq!(h.to_client.len(), n + 2, "a notice, then the load's answer");
}

#[test]
fn native_loads_pass_through_and_their_replay_is_not_journaled_twice() {
    let mut h = agent_with(Config::default(), r#"{"loadSession":true}"#);
    h.client(LOAD);
    assert_eq!(h.to_agent.last().unwrap(), &format!("{LOAD}\n"));
    let replayed = replay_line("old");
    let n = h.to_client.len();
    h.agent(std::str::from_utf8(&replayed).unwrap().trim_end());
    assert_eq!(
        h.to_client.len(),
        n,
        "held until the agent answers the load"
    );
    h.agent(r#"{"jsonrpc":"2.0","id":5,"result":{}}"#);
    assert_eq!(h.to_client[n], replayed, "then shown before the answer");
    assert_eq!(h.to_client.len(), n + 2);
    let live = replay_line("new");
    h.agent(std::str::from_utf8(&live).unwrap().trim_end());
    let journal = h.session("S");
    assert_eq!(journal.len(), 3, "load, response, live update: {journal:?}");
}

#[test]
fn load_journal_mode_hides_the_agents_own_replay() {
    let mut h = journal_mode_over_a_loading_agent();
    h.client(LOAD);
    let load = fetch(&h);
    history(
        &mut h,
        load,
        HistoryChunk::Lines(vec![replay_line("from the journal")]),
    );
    history(&mut h, load, HistoryChunk::End(whole()));
    assert_eq!(last_to_agent(&h)["method"], "session/load");
    let n = h.to_client.len();
    h.agent(
        std::str::from_utf8(&replay_line("lossy agent replay"))
            .unwrap()
            .trim_end(),
    );
    assert_eq!(
        h.to_client.len(),
        n,
        "the agent's replay never reaches the client"
    );
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:0","result":{}}"#);
    assert_eq!(last_to_client(&h)["id"], 5);
    h.agent(
        std::str::from_utf8(&replay_line("live"))
            .unwrap()
            .trim_end(),
    );
    assert_eq!(
        last_to_client(&h)["params"]["update"]["content"]["text"],
        "live"
    );
}

fn listed(n: usize) -> Vec<ListedSession> {
    (0..n)
        .map(|i| ListedSession {
            session: format!("s{i}"),
            cwd: Some(if i % 2 == 0 { "/a".into() } else { "/b".into() }),
            title: (i == 0).then(|| "First".to_string()),
            updated: Activity {
                at: Some("2026-11-21T00:00:00Z".into()),
                us: 0,
            },
            agent_ids: if i == 1 {
                vec!["agent-1".into()]
            } else {
                vec![]
            },
            prompted: true,
            ..ListedSession::default()
        })
        .collect()
}

#[test]
fn session_list_is_served_from_the_journal_with_cwd_filter_and_paging() {
    let mut h = emulating();
    h.client(r#"{"jsonrpc":"2.0","id":9,"method":"session/list","params":{"cwd":"/a"}}"#);
    sessions_answer(&mut h, listed(120));
    let page = last_to_client(&h);
    let sessions = page["result"]["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 50);
    assert!(sessions.iter().all(|s| s["cwd"] == "/a"));
    assert_eq!(
        sessions[0],
        json!({"sessionId":"s0","cwd":"/a","title":"First","updatedAt":"2026-11-21T00:00:00Z"})
    );
    let cursor = page["result"]["nextCursor"].as_str().unwrap().to_string();
    h.client(&format!(r#"{{"jsonrpc":"2.0","id":10,"method":"session/list","params":{{"cwd":"/a","cursor":"{cursor}"}}}}"#));
    sessions_answer(&mut h, listed(120));
    let page = last_to_client(&h);
    assert_eq!(page["result"]["sessions"].as_array().unwrap().len(), 10);
    assert!(page["result"].get("nextCursor").is_none());
    h.client(r#"{"jsonrpc":"2.0","id":11,"method":"session/list","params":{"cursor":"bogus"}}"#);
    sessions_answer(&mut h, listed(3));
    assert_eq!(last_to_client(&h)["error"]["code"], -32602);
    h.client(r#"{"jsonrpc":"2.0","id":12,"method":"session/list"}"#);
    sessions_answer(&mut h, vec![]);
    assert_eq!(last_to_client(&h)["result"], json!({"sessions":[]}));
    assert!(h.to_agent.len() == 1, "never forwarded");
}

#[test]
fn session_list_merges_with_the_agents_own_list() {
    let mut h = agent_with(Config::default(), r#"{"sessionCapabilities":{"list":{}}}"#);
    h.client(r#"{"jsonrpc":"2.0","id":9,"method":"session/list","params":{}}"#);
    sessions_answer(&mut h, listed(3));
    assert_eq!(last_to_agent(&h)["method"], "session/list");
    h.agent(r#"{"jsonrpc":"2.0","id":9,"result":{"sessions":[{"sessionId":"agent-1","cwd":"/b"},{"sessionId":"native","cwd":"/c"}]}}"#);
    let ids: Vec<String> = last_to_client(&h)["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_string())
        .collect();
    // One order: all tie at the epoch here (`listed` has no times), so by ID.
    assert_eq!(ids, ["native", "s0", "s1", "s2"]);
}

#[test]
fn a_merged_list_is_one_order_newest_first_with_a_cursor_across_both() {
    let at = |secs: i64| 1_795_000_000_000_000 + secs * 1_000_000;
    let iso = |secs: i64| {
        jiff::Timestamp::from_microsecond(at(secs))
            .unwrap()
            .to_string()
    };
    let journal = |id: &str, secs: i64, agent_ids: Vec<String>| ListedSession {
        session: id.into(),
        cwd: Some("/a".into()),
        updated: Activity {
            us: at(secs),
            at: None,
        },
        agent_ids,
        prompted: true,
        ..ListedSession::default()
    };
    // The journal: sessions the agent does not list, and one it lists under its own ID.
    let store = vec![
        journal("j95", 95, vec![]),
        journal("j70", 70, vec![]),
        journal("j20", 20, vec![]),
        journal("j10", 10, vec![]),
        journal("mapped", 90, vec!["agent-b".into()]),
    ];
    let ids = |msg: &Value| -> Vec<String> {
        msg["result"]["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["sessionId"].as_str().unwrap().to_string())
            .collect()
    };
    let mut h = agent_with(Config::default(), r#"{"sessionCapabilities":{"list":{}}}"#);
    h.client(r#"{"jsonrpc":"2.0","id":1,"method":"session/list","params":{"cwd":"/a","limit":2}}"#);
    sessions_answer(&mut h, store.clone());
    assert!(last_to_agent(&h)["params"].get("cursor").is_none());
    h.agent(&format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"sessions":[{{"sessionId":"a100","cwd":"/a","updatedAt":"{}"}},{{"sessionId":"agent-b","cwd":"/a"}}],"nextCursor":"agent-page-2"}}}}"#,
        iso(100)
    ));
    let page = last_to_client(&h);
    assert_eq!(
        ids(&page),
        ["a100", "j95", "mapped"],
        "the journal's rows between the agent's, the agent's row without a time placed by the journal's"
    );
    let cursor = page["result"]["nextCursor"].as_str().unwrap().to_string();
    assert_ne!(cursor, "agent-page-2", "wrapped");
    // The next page: the agent gets its own cursor back.
    h.client(&format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"session/list","params":{{"cwd":"/a","limit":2,"cursor":"{cursor}"}}}}"#
    ));
    sessions_answer(&mut h, store.clone());
    assert_eq!(last_to_agent(&h)["params"]["cursor"], "agent-page-2");
    h.agent(&format!(
        r#"{{"jsonrpc":"2.0","id":2,"result":{{"sessions":[{{"sessionId":"a50","cwd":"/a","updatedAt":"{}"}}]}}}}"#,
        iso(50)
    ));
    let page = last_to_client(&h);
    assert_eq!(
        ids(&page),
        ["j70", "a50", "j20"],
        "after the agent's last page, the journal's older rows, `limit` of them"
    );
    let cursor = page["result"]["nextCursor"].as_str().unwrap().to_string();
    // The rest from the journal alone, not forwarded.
    let sent = h.to_agent.len();
    h.client(&format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"session/list","params":{{"cwd":"/a","limit":2,"cursor":"{cursor}"}}}}"#
    ));
    sessions_answer(&mut h, store);
    assert_eq!(h.to_agent.len(), sent);
    let page = last_to_client(&h);
    assert_eq!(ids(&page), ["j10"]);
    assert!(page["result"].get("nextCursor").is_none());
}

#[test]
fn sessions_never_prompted_are_left_out_of_the_list() {
    let mut h = emulating();
    h.client(r#"{"jsonrpc":"2.0","id":9,"method":"session/list","params":{}}"#);
    let mut sessions = listed(3);
    sessions[1].prompted = false;
    sessions_answer(&mut h, sessions.clone());
    let ids: Vec<Value> = last_to_client(&h)["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].clone())
        .collect();
    assert_eq!(ids, [json!("s0"), json!("s2")]);
    // Merged with an agent's list: the agent's rows are its own to choose.
    let mut h = agent_with(Config::default(), r#"{"sessionCapabilities":{"list":{}}}"#);
    h.client(r#"{"jsonrpc":"2.0","id":9,"method":"session/list","params":{}}"#);
    sessions[2].prompted = false;
    sessions_answer(&mut h, sessions);
    h.agent(r#"{"jsonrpc":"2.0","id":9,"result":{"sessions":[{"sessionId":"s2","cwd":"/a"}]}}"#);
    let mut ids: Vec<Value> = last_to_client(&h)["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].clone())
        .collect();
    ids.sort_by_key(Value::to_string);
    assert_eq!(ids, [json!("s0"), json!("s2")]);
}

#[test]
fn close_and_delete_are_answered_for_agents_without_them() {
    let mut h = emulating();
    h.client(r#"{"jsonrpc":"2.0","id":3,"method":"session/close","params":{"sessionId":"S"}}"#);
    assert_eq!(
        last_to_client(&h),
        json!({"jsonrpc":"2.0","id":3,"result":{}})
    );
    assert_eq!(
        last_to_agent(&h)["method"],
        "session/cancel",
        "closing stops ongoing work"
    );
    h.client(r#"{"jsonrpc":"2.0","id":4,"method":"session/delete","params":{"sessionId":"S"}}"#);
    assert_eq!(
        last_to_client(&h),
        json!({"jsonrpc":"2.0","id":4,"result":{}})
    );
    assert!(h.requests.contains(&Action::Catalog(CatalogUpdate::Delete {
        session: "S".into()
    })));
}

#[test]
fn every_message_the_proxy_writes_is_valid_acp() {
    let schema: Value =
        serde_json::from_str(include_str!("../../tests/schema/acp-v1.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut h = emulating();
    load_replayed(&mut h, summary());
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:0","result":{"sessionId":"U","modes":{"currentModeId":"code","availableModes":[{"id":"code","name":"Code"},{"id":"plan","name":"Plan"}]},"configOptions":[{"id":"model","name":"Model","type":"select","currentValue":"a","options":[{"value":"a","name":"A"},{"value":"b","name":"B"}]}]}}"#);
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:1","result":{}}"#);
    h.client(r#"{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"next"}]}}"#);
    h.client(r#"{"jsonrpc":"2.0","id":9,"method":"session/list","params":{}}"#);
    sessions_answer(&mut h, listed(2));
    h.client(r#"{"jsonrpc":"2.0","id":10,"method":"session/close","params":{"sessionId":"S"}}"#);
    h.client(r#"{"jsonrpc":"2.0","id":11,"method":"session/load","params":{"sessionId":"gone","cwd":"/w","mcpServers":[]}}"#);
    let load = fetch(&h);
    history(&mut h, load, HistoryChunk::Missing);
    for line in h.to_client.iter().chain(&h.to_agent) {
        let msg = json_of(line);
        let errors: Vec<String> = validator
            .iter_errors(&msg)
            .map(|e| e.to_string())
            .take(3)
            .collect();
        assert!(errors.is_empty(), "{msg}\n{errors:?}");
    }
}

#[test]
fn a_session_closed_by_the_agent_is_brought_up_again_on_the_next_load() {
    let mut h = agent_with(Config::default(), r#"{"sessionCapabilities":{"close":{}}}"#);
    load_replayed(&mut h, Summary::default());
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:0","result":{"sessionId":"U"}}"#);
    h.client(r#"{"jsonrpc":"2.0","id":7,"method":"session/close","params":{"sessionId":"S"}}"#);
    assert_eq!(last_to_agent(&h)["params"]["sessionId"], "U");
    h.agent(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#);
    h.client(&LOAD.replace("\"id\":5", "\"id\":8"));
    let load = fetch(&h);
    history(&mut h, load, HistoryChunk::End(Summary::default()));
    assert_eq!(
        last_to_agent(&h)["method"],
        "session/new",
        "not answered from a stale live set"
    );
}

#[test]
fn a_renumbered_client_id_comes_back_on_a_merged_session_list() {
    let mut h = agent_with(Config::default(), r#"{"sessionCapabilities":{"list":{}}}"#);
    load_replayed(&mut h, Summary::default());
    h.client(r#"{"jsonrpc":"2.0","id":"acp-journal:0","method":"session/list","params":{}}"#);
    sessions_answer(&mut h, vec![]);
    let alias = last_to_agent(&h)["id"].as_str().unwrap().to_string();
    assert_ne!(alias, "acp-journal:0");
    h.agent(&format!(
        r#"{{"jsonrpc":"2.0","id":"{alias}","result":{{"sessions":[]}}}}"#
    ));
    assert_eq!(last_to_client(&h)["id"], "acp-journal:0");
}

#[test]
fn cancelling_a_journal_mode_load_does_not_leave_the_session_hidden() {
    let mut h = journal_mode_over_a_loading_agent();
    load_replayed(&mut h, Summary::default());
    h.client(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"S"}}"#);
    h.agent(
        std::str::from_utf8(&replay_line("live"))
            .unwrap()
            .trim_end(),
    );
    assert_eq!(
        last_to_client(&h)["params"]["update"]["content"]["text"],
        "live"
    );
}

#[test]
fn a_hostile_list_cursor_is_not_a_crash() {
    use base64::Engine;
    let mut h = emulating();
    let cursor =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("acpj:{}", usize::MAX));
    h.client(&format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"session/list","params":{{"cursor":"{cursor}"}}}}"#
    ));
    sessions_answer(&mut h, listed(3));
    assert_eq!(last_to_client(&h)["result"]["sessions"], json!([]));
}

#[test]
fn loads_and_forwarded_lists_are_answered_once_when_the_agent_exits() {
    let mut h = agent_with(Config::default(), r#"{"sessionCapabilities":{"list":{}}}"#);
    // One load brings the agent up, one is still reading the journal, and a list waits on
    // the agent's own answer.
    load_replayed(&mut h, summary());
    h.client(r#"{"jsonrpc":"2.0","id":6,"method":"session/load","params":{"sessionId":"T","cwd":"/w","mcpServers":[]}}"#);
    let fetching = fetch(&h);
    h.client(r#"{"jsonrpc":"2.0","id":7,"method":"session/list","params":{}}"#);
    sessions_answer(&mut h, listed(1));
    let before = h.to_client.len();
    let at = h.stamp();
    h.proxy.handle_eof(at, Peer::Agent);
    h.drain();
    let answers: Vec<Value> = h.to_client[before..].iter().map(json_of).collect();
    let ids: Vec<Value> = answers.iter().map(|a| a["id"].clone()).collect();
    assert_eq!(ids, [json!(5), json!(6), json!(7)], "each answered once");
    assert!(answers.iter().all(|a| a["error"]["code"] == -32603));
    assert_eq!(answers[1]["error"]["data"]["method"], "session/load");
    assert!(
        h.requests
            .contains(&Action::CancelHistory { load: fetching })
    );
    // The load still reading is journaled with its session, request then answer.
    let t = h.session("T");
    assert_eq!(t.len(), 2);
    assert!(t[0].contains("session/load") && t[1].contains("the agent exited"));
    let sent = h.to_client.len();
    history(&mut h, fetching, HistoryChunk::End(summary()));
    assert_eq!(h.to_client.len(), sent, "a late history is dropped");
}

#[test]
fn an_object_without_a_method_passes_a_mapped_session_unchanged() {
    // Found by fuzzing: only requests and notifications get the agent-side session ID.
    let mut h = emulating();
    load_replayed(&mut h, Summary::default());
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:0","result":{"sessionId":"U"}}"#);
    let odd = r#"{"jsonrpc":"2.0","id":4,"iethod":"session/close","params":{"sessionId":"S"}}"#;
    h.client(odd);
    assert_eq!(h.to_agent.last().unwrap(), &format!("{odd}\n"));
    h.client(r#"{"jsonrpc":"2.0","id":5,"method":"session/set_mode","params":{"sessionId":"S","modeId":"m"}}"#);
    assert_eq!(last_to_agent(&h)["params"]["sessionId"], "U");
}

/// The error gemini-cli 0.61 answers its own `session/load` with.
const NO_SESSIONS: &str = r#"{"jsonrpc":"2.0","id":5,"error":{"code":-32603,"message":"No previous sessions found for this project."}}"#;

#[test]
fn a_failing_native_load_is_served_from_the_journal_without_showing_the_agents_replay() {
    let mut h = agent_with(Config::default(), r#"{"loadSession":true}"#);
    h.client(LOAD);
    assert_eq!(
        last_to_agent(&h)["method"],
        "session/load",
        "tried natively first"
    );
    let n = h.to_client.len();
    h.agent(
        std::str::from_utf8(&replay_line("partial agent replay"))
            .unwrap()
            .trim_end(),
    );
    h.agent(NO_SESSIONS);
    assert_eq!(
        h.to_client.len(),
        n,
        "neither the partial replay nor the error"
    );
    let load = fetch(&h);
    history(
        &mut h,
        load,
        HistoryChunk::Lines(vec![replay_line("from the journal")]),
    );
    history(&mut h, load, HistoryChunk::End(summary()));
    assert_eq!(h.to_client[n], replay_line("from the journal"));
    let new = last_to_agent(&h);
    assert_eq!(new["method"], "session/new", "not the agent's load again");
    assert_eq!(new["params"]["cwd"], "/w");
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:0","result":{"sessionId":"U"}}"#);
    let answer = last_to_client(&h);
    assert_eq!(answer["id"], 5);
    assert!(answer.get("result").is_some(), "{answer}");
    let notice = json_of(&h.to_client[h.to_client.len() - 2]);
    assert!(
        notice["params"]["update"]["description"]
            .as_str()
            .unwrap()
            .contains("could not load this session"),
        "{notice}"
    );
    h.client(r#"{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"next"}]}}"#);
    let prompt = last_to_agent(&h);
    assert_eq!(prompt["params"]["sessionId"], "U");
    assert!(
        prompt["params"]["prompt"][0]["text"]
            .as_str()
            .unwrap()
            .contains("User: hi"),
        "re-primed: {prompt}"
    );
    let journal = h.session("S");
    let texts: Vec<String> = journal.iter().map(|r| format!("{r:?}")).collect();
    assert!(
        texts.iter().any(|t| t.contains("No previous sessions")),
        "the agent's error is journaled"
    );
    assert!(
        !texts.iter().any(|t| t.contains("partial agent replay")),
        "the dropped replay is not"
    );
}

#[test]
fn a_failing_native_load_of_a_session_the_journal_lacks_gets_the_agents_error() {
    let mut h = agent_with(Config::default(), r#"{"loadSession":true}"#);
    h.client(LOAD);
    h.agent(NO_SESSIONS);
    let load = fetch(&h);
    history(&mut h, load, HistoryChunk::Missing);
    assert_eq!(h.to_client.last().unwrap(), &format!("{NO_SESSIONS}\n"));
    assert_eq!(h.proxy.pending_requests(), 0);
}

#[test]
fn a_failing_native_resume_is_served_from_the_journal_on_a_new_session() {
    let mut h = agent_with(
        Config::default(),
        r#"{"loadSession":true,"sessionCapabilities":{"resume":{}}}"#,
    );
    h.client(r#"{"jsonrpc":"2.0","id":5,"method":"session/resume","params":{"sessionId":"S","cwd":"/w"}}"#);
    assert_eq!(last_to_agent(&h)["method"], "session/resume");
    h.agent(r#"{"jsonrpc":"2.0","id":5,"error":{"code":-32002,"message":"Resource not found"}}"#);
    let load = fetch(&h);
    let n = h.to_client.len();
    history(
        &mut h,
        load,
        HistoryChunk::Lines(vec![replay_line("from the journal")]),
    );
    assert_eq!(h.to_client.len(), n, "a resume replays nothing");
    history(&mut h, load, HistoryChunk::End(summary()));
    assert_eq!(last_to_agent(&h)["method"], "session/new");
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:0","result":{"sessionId":"U"}}"#);
    assert!(last_to_client(&h).get("result").is_some());
}

#[test]
fn load_journal_mode_falls_back_to_a_new_session_when_the_agents_load_fails() {
    let mut h = journal_mode_over_a_loading_agent();
    load_replayed(&mut h, summary());
    assert_eq!(last_to_agent(&h)["method"], "session/load");
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:0","error":{"code":-32603,"message":"No previous sessions found for this project."}}"#);
    assert_eq!(last_to_agent(&h)["method"], "session/new");
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:1","result":{"sessionId":"U"}}"#);
    let answer = last_to_client(&h);
    assert_eq!(answer["id"], 5);
    assert!(answer.get("result").is_some(), "{answer}");
    h.client(r#"{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"next"}]}}"#);
    assert_eq!(last_to_agent(&h)["params"]["sessionId"], "U");
}

/// A load mapped to agent session "U", answered.
fn mapped() -> Harness {
    let mut h = emulating();
    load_replayed(&mut h, Summary::default());
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:0","result":{"sessionId":"U"}}"#);
    h
}

#[test]
fn session_ids_in_meta_are_mapped_both_ways() {
    let mut h = mapped();
    h.client(r#"{"jsonrpc":"2.0","id":6,"method":"_x/ping","params":{"sessionId":"S","_meta":{"trace":{"session":"S","other":"Sx"}}}}"#);
    let sent = last_to_agent(&h);
    assert_eq!(sent["params"]["sessionId"], "U");
    assert_eq!(
        sent["params"]["_meta"],
        json!({"trace":{"session":"U","other":"Sx"}})
    );
    h.agent(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"U","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"U"},"_meta":{"origin":["U"]}},"_meta":{"parent":"U"}}}"#);
    let got = last_to_client(&h);
    assert_eq!(got["params"]["_meta"], json!({"parent":"S"}));
    assert_eq!(got["params"]["update"]["_meta"], json!({"origin":["S"]}));
    assert_eq!(
        got["params"]["update"]["content"]["text"], "U",
        "only _meta and sessionId are mapped"
    );
    // A line without the ID in its _meta keeps that member's bytes.
    h.agent(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"U","update":{"sessionUpdate":"plan","entries":[]},"_meta":{ "k" : 1 }}}"#);
    let raw = String::from_utf8(h.to_client.last().unwrap().to_vec()).unwrap();
    assert!(raw.contains(r#""_meta":{ "k" : 1 }"#), "{raw}");
}

#[test]
fn elicitation_tool_call_ids_are_prefixed_like_other_tool_ids() {
    let mut h = mapped();
    h.agent(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"U","update":{"sessionUpdate":"tool_call","toolCallId":"call_1","title":"t"}}}"#);
    let id = last_to_client(&h)["params"]["update"]["toolCallId"].clone();
    h.agent(r#"{"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{"sessionId":"U","toolCallId":"call_1","message":"Which?","mode":"form","requestedSchema":{"type":"object","properties":{}}}}"#);
    let ask = last_to_client(&h);
    assert_eq!(ask["params"]["sessionId"], "S");
    assert_eq!(ask["params"]["toolCallId"], id);
}

/// `n` sessions in "/a", session `i` last active at second `i`.
fn history_rows(n: usize) -> Vec<ListedSession> {
    (0..n)
        .map(|i| ListedSession {
            session: format!("h{i:05}"),
            cwd: Some("/a".into()),
            updated: Activity {
                us: i as i64 * 1_000_000,
                at: None,
            },
            prompted: true,
            ..ListedSession::default()
        })
        .collect()
}

#[test]
fn the_history_list_is_newest_first_in_pages_of_limit_with_a_stable_cursor() {
    let mut h = emulating();
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 0.. {
        let params = match &cursor {
            Some(c) => json!({"cwd": "/a", "limit": 40, "cursor": c}),
            None => json!({"cwd": "/a", "limit": 40}),
        };
        h.client(
            &json!({"jsonrpc":"2.0","id":100 + page,"method":"session/list","params":params})
                .to_string(),
        );
        sessions_answer(&mut h, history_rows(100));
        let result = last_to_client(&h)["result"].clone();
        let rows = result["sessions"].as_array().unwrap().clone();
        assert!(!rows.is_empty(), "a page with a cursor is never empty");
        assert!(rows.len() <= 40);
        seen.extend(
            rows.iter()
                .map(|r| r["sessionId"].as_str().unwrap().to_string()),
        );
        match result["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    let expected: Vec<String> = (0..100).rev().map(|i| format!("h{i:05}")).collect();
    assert_eq!(seen, expected, "every session once, newest first");
}

#[test]
fn history_rows_carry_branch_state_turn_end_cost_and_usage() {
    let mut h = emulating();
    h.client(r#"{"jsonrpc":"2.0","id":9,"method":"session/list","params":{}}"#);
    sessions_answer(
        &mut h,
        vec![ListedSession {
            session: "s".into(),
            cwd: Some("/a".into()),
            updated: Activity {
                at: Some("2026-11-21T00:00:00Z".into()),
                us: 0,
            },
            state: Some("requires_action".into()),
            last_turn_ended_at: Some("2026-11-21T00:00:00Z".into()),
            usage: Some(
                json!({"used": 10, "size": 100, "cost": {"amount": 1.5, "currency": "USD"}}),
            ),
            git_branch: Some("main".into()),
            agent: Some("node agent.js".into()),
            prompted: true,
            ..ListedSession::default()
        }],
    );
    assert_eq!(
        last_to_client(&h)["result"]["sessions"][0],
        json!({"sessionId":"s","cwd":"/a","updatedAt":"2026-11-21T00:00:00Z","gitBranch":"main",
            "state":"requires_action","lastTurnEndedAt":"2026-11-21T00:00:00Z",
            "cost":{"amount":1.5,"currency":"USD"},
            "_meta":{"acpJournal":{"agent":"node agent.js","usage":{"used":10,"size":100,"cost":{"amount":1.5,"currency":"USD"}}}}})
    );
}

#[test]
fn list_changed_goes_to_a_client_that_asked_for_the_cwds_it_listed() {
    let mut h = Harness::with(Config::default());
    h.client(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"listChanged":{}}}}}"#);
    h.agent(INIT_OK);
    assert!(!h.proxy.wants_list_changes(), "nothing listed yet");
    h.client(r#"{"jsonrpc":"2.0","id":1,"method":"session/list","params":{"cwd":"/a"}}"#);
    sessions_answer(&mut h, vec![]);
    assert!(h.proxy.wants_list_changes());
    let at = h.stamp();
    h.proxy
        .handle_journals_changed(at, &["/a".to_string(), "/b".to_string()]);
    h.drain();
    assert_eq!(
        last_to_client(&h),
        json!({"jsonrpc":"2.0","method":"session/list_changed","params":{"cwd":"/a"}})
    );
    // Ten minutes later the watch is over.
    let later = Stamp {
        unix_us: 0,
        mono_us: at.mono_us + 11 * 60 * 1_000_000,
    };
    let n = h.to_client.len();
    h.proxy.handle_journals_changed(later, &["/a".to_string()]);
    h.drain();
    assert_eq!(h.to_client.len(), n);
    assert!(!h.proxy.wants_list_changes());
}

#[test]
fn a_list_watch_is_a_timer_that_ends_it_after_ten_minutes() {
    let mut h = Harness::with(Config::default());
    h.client(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"listChanged":{}}}}}"#);
    h.agent(INIT_OK);
    assert_eq!(h.proxy.poll_timeout(), None, "no timer runs");
    h.client(r#"{"jsonrpc":"2.0","id":1,"method":"session/list","params":{"cwd":"/a"}}"#);
    let listed = h.now();
    sessions_answer(&mut h, vec![]);
    let end = h.proxy.poll_timeout().expect("the watch's end is a timer");
    assert_eq!(end, listed + 10 * 60 * 1_000_000);
    let tick = |mono_us| Stamp {
        unix_us: 0,
        mono_us,
    };
    h.proxy.handle_tick(tick(end - 1));
    assert!(h.proxy.wants_list_changes(), "not over yet");
    h.proxy.handle_tick(tick(end));
    assert!(!h.proxy.wants_list_changes(), "over at its end");
    assert_eq!(h.proxy.poll_timeout(), None);
}

#[test]
fn a_client_without_list_changed_never_gets_it() {
    let mut h = emulating();
    h.client(r#"{"jsonrpc":"2.0","id":1,"method":"session/list","params":{"cwd":"/a"}}"#);
    sessions_answer(&mut h, vec![]);
    assert!(!h.proxy.wants_list_changes());
}

#[test]
fn the_catalog_hears_when_a_session_runs_waits_and_ends_its_turn_with_usage() {
    let mut h = emulating();
    h.client(
        r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/a","mcpServers":[]}}"#,
    );
    h.agent(r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"S"}}"#);
    h.client(r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[]}}"#);
    h.agent(r#"{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"S","toolCall":{"toolCallId":"t"},"options":[]}}"#);
    h.client(r#"{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"cancelled"}}}"#);
    h.agent(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"usage_update","used":5,"size":10}}}"#);
    h.agent(r#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn","usage":{"inputTokens":3,"outputTokens":4,"totalTokens":7}}}"#);
    // Per-turn facts are no actions: coalesced in the core until the shell takes them.
    assert!(
        !h.requests.iter().any(|a| matches!(a, Action::Catalog(_))),
        "{:?}",
        h.requests
    );
    let facts: Vec<CatalogUpdate> = h.turn_facts().into_iter().map(|(u, _)| u).collect();
    let s = SessionId::from("S");
    assert_eq!(
        facts,
        [
            CatalogUpdate::Usage {
                session: s.clone(),
                usage: json!({"used":5,"size":10,"inputTokens":3,"outputTokens":4,"totalTokens":7})
            },
            CatalogUpdate::TurnEnded {
                session: s.clone(),
                turns: 1
            },
            CatalogUpdate::State {
                session: s,
                state: "idle"
            },
        ]
    );
    // While the permission request waited, the state said so.
    h.agent(r#"{"jsonrpc":"2.0","id":8,"method":"session/request_permission","params":{"sessionId":"S","toolCall":{"toolCallId":"t"},"options":[]}}"#);
    assert_eq!(
        h.turn_facts()[0].0,
        CatalogUpdate::State {
            session: SessionId::from("S"),
            state: "requires_action"
        }
    );
}

#[test]
fn a_resume_for_an_agent_without_it_is_served_from_the_journal() {
    let mut h = emulating();
    h.client(r#"{"jsonrpc":"2.0","id":5,"method":"session/resume","params":{"sessionId":"S","cwd":"/w"}}"#);
    assert_eq!(h.to_agent.len(), 1, "not forwarded");
    let load = fetch(&h);
    history(&mut h, load, HistoryChunk::Lines(vec![replay_line("old")]));
    let n = h.to_client.len();
    history(&mut h, load, HistoryChunk::End(summary()));
    assert_eq!(last_to_agent(&h)["method"], "session/new");
    assert!(
        h.to_client[n..]
            .iter()
            .all(|l| json_of(l)["params"]["update"]["content"]["text"] != "old"),
        "a resume replays nothing"
    );
}

#[test]
fn a_fork_for_an_agent_without_it_is_made_in_the_journal_and_started_afresh() {
    let mut h = emulating();
    h.client(r#"{"jsonrpc":"2.0","id":5,"method":"session/fork","params":{"sessionId":"S","cwd":"/w","mcpServers":[],"messageId":"m1"}}"#);
    assert_eq!(h.to_agent.len(), 1, "not forwarded");
    let (op, fork) = h
        .requests
        .iter()
        .find_map(|a| match a {
            Action::ForkJournal {
                op,
                parent,
                fork,
                message,
            } => {
                assert_eq!(&**parent, "S");
                assert_eq!(message.as_deref(), Some("m1"));
                Some((*op, fork.clone()))
            }
            _ => None,
        })
        .expect("a ForkJournal");
    assert_eq!(fork.len(), 32);
    let at = h.stamp();
    h.proxy.handle_forked(at, op, Ok(()));
    h.drain();
    let load = fetch(&h);
    let n = h.to_client.len();
    history(&mut h, load, HistoryChunk::Lines(vec![replay_line("old")]));
    assert_eq!(h.to_client.len(), n, "a fork replays nothing to the client");
    history(&mut h, load, HistoryChunk::End(summary()));
    assert_eq!(last_to_agent(&h)["method"], "session/new");
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:0","result":{"sessionId":"U"}}"#);
    let answer = last_to_client(&h);
    assert_eq!(answer["id"], 5);
    assert_eq!(answer["result"]["sessionId"], &*fork);
    h.client(&format!(
        r#"{{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{{"sessionId":"{fork}","prompt":[{{"type":"text","text":"next"}}]}}}}"#
    ));
    let prompt = last_to_agent(&h);
    assert_eq!(prompt["params"]["sessionId"], "U");
    assert!(
        prompt["params"]["prompt"][0]["text"]
            .as_str()
            .unwrap()
            .contains("User: hi")
    );
    assert!(
        h.session(&fork).iter().any(|l| l.contains("session/fork")),
        "the request is in the fork's journal"
    );
}

#[test]
fn a_fork_of_an_unknown_session_is_resource_not_found() {
    let mut h = emulating();
    h.client(r#"{"jsonrpc":"2.0","id":5,"method":"session/fork","params":{"sessionId":"nope","cwd":"/w","mcpServers":[]}}"#);
    let op = h
        .requests
        .iter()
        .find_map(|a| match a {
            Action::ForkJournal { op, .. } => Some(*op),
            _ => None,
        })
        .unwrap();
    let at = h.stamp();
    h.proxy
        .handle_forked(at, op, Err("no journal for session nope".into()));
    h.drain();
    let answer = last_to_client(&h);
    assert_eq!(answer["error"]["code"], -32002);
}

#[test]
fn the_vendor_session_index_reaches_the_catalog_once_the_agent_does_it_and_archived_rows_hide() {
    let mut h = emulating();
    let catalog = |h: &Harness| -> Vec<CatalogUpdate> {
        h.requests
            .iter()
            .filter_map(|a| match a {
                Action::Catalog(
                    u @ (CatalogUpdate::Rename { .. } | CatalogUpdate::Archive { .. }),
                ) => Some(u.clone()),
                _ => None,
            })
            .collect()
    };
    h.client(r#"{"jsonrpc":"2.0","id":1,"method":"_session/rename","params":{"sessionId":"S","title":"  Parser fix ghp_abcdefghijklmnopqrstuvwxyz0123456789 "}}"#);
    assert_eq!(
        last_to_agent(&h)["method"],
        "_session/rename",
        "passed on untouched"
    );
    assert!(catalog(&h).is_empty(), "not before the agent did it");
    h.agent(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    h.client(r#"{"jsonrpc":"2.0","id":2,"method":"_session/archive","params":{"sessionId":"S"}}"#);
    h.agent(r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"Method not found"}}"#);
    h.client(r#"{"jsonrpc":"2.0","id":3,"method":"_session/archive","params":{"sessionId":"S"}}"#);
    h.agent(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#);
    h.client(
        r#"{"jsonrpc":"2.0","id":4,"method":"_session/unarchive","params":{"sessionId":"S"}}"#,
    );
    h.agent(r#"{"jsonrpc":"2.0","id":4,"result":{}}"#);
    assert_eq!(
        catalog(&h),
        [
            CatalogUpdate::Rename {
                session: "S".into(),
                title: "Parser fix [REDACTED]".into()
            },
            CatalogUpdate::Archive {
                session: "S".into(),
                archived: true
            },
            CatalogUpdate::Archive {
                session: "S".into(),
                archived: false
            },
        ],
        "a failed archive changes nothing; the name is trimmed and redacted"
    );
    // The journal's list leaves archived sessions out unless asked for them.
    let mut sessions = listed(2);
    sessions[1].archived = true;
    let ids = |h: &Harness| -> Vec<String> {
        last_to_client(h)["result"]["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["sessionId"].as_str().unwrap().to_string())
            .collect()
    };
    h.client(r#"{"jsonrpc":"2.0","id":5,"method":"session/list","params":{}}"#);
    sessions_answer(&mut h, sessions.clone());
    assert_eq!(ids(&h), ["s0"]);
    for (filter, expected) in [("archived", vec!["s1"]), ("all", vec!["s0", "s1"])] {
        h.client(&format!(
            r#"{{"jsonrpc":"2.0","id":6,"method":"session/list","params":{{"_meta":{{"jetbrains":{{"air":{{"list":{{"archived":"{filter}"}}}}}}}}}}}}"#
        ));
        sessions_answer(&mut h, sessions.clone());
        assert_eq!(ids(&h), expected, "{filter}");
    }
}

// ACP v2: literal lines as `@agentclientprotocol/claude-agent-acp` 0.101 sends them.

const INIT_V2: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2,"info":{"name":"ed","version":"1"},"capabilities":{}}}"#;
const INIT_V2_OK: &str = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2,"info":{"name":"@agentclientprotocol/claude-agent-acp","title":"Claude Agent","version":"0.101.0"},"capabilities":{"session":{"prompt":{"image":{}},"delete":{},"fork":{}}},"authMethods":[]}}"#;
const RESUME_V2: &str = r#"{"jsonrpc":"2.0","id":5,"method":"session/resume","params":{"sessionId":"S","cwd":"/w","mcpServers":[],"replayFrom":{"type":"start"}}}"#;

fn v2_with(init_ok: &str) -> Harness {
    let mut h = Harness::with(Config::default());
    h.client(INIT_V2);
    h.agent(init_ok);
    h
}

#[test]
fn a_v2_initialize_is_untouched_unless_delete_is_missing_and_then_it_goes_where_v2_puts_it() {
    let h = v2_with(INIT_V2_OK);
    assert_eq!(
        h.to_client.last().unwrap(),
        &Bytes::from(format!("{INIT_V2_OK}\n")),
        "byte for byte: v2 has no loadSession and the agent has every session method"
    );
    let h = v2_with(
        r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2,"info":{"name":"a","version":"1"},"capabilities":{"session":{}}}}"#,
    );
    let init = last_to_client(&h);
    assert_eq!(
        init["result"]["capabilities"]["session"],
        json!({"delete": {}})
    );
    assert!(init["result"].get("agentCapabilities").is_none(), "{init}");
}

#[test]
fn a_v2_native_resume_with_replay_passes_and_its_replay_is_not_journaled_twice() {
    let mut h = v2_with(INIT_V2_OK);
    h.client(RESUME_V2);
    assert_eq!(last_to_agent(&h)["params"]["replayFrom"]["type"], "start");
    h.agent(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"first task"},"messageId":"m1"}}}"#);
    h.agent(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"state_update","state":"idle","background":[]}}}"#);
    h.agent(r#"{"jsonrpc":"2.0","id":5,"result":{}}"#);
    let got: Vec<Value> = h.to_client[1..].iter().map(json_of).collect();
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got[0]["params"]["update"]["content"]["text"], "first task");
    assert_eq!(got[2]["id"], 5);
    let journaled = h.session("S").join("\n");
    assert!(!journaled.contains("first task"), "{journaled}");
}

#[test]
fn a_v2_resume_the_agent_fails_is_served_from_the_journal_with_its_state_before_the_answer() {
    let mut h = v2_with(INIT_V2_OK);
    h.client(RESUME_V2);
    h.agent(r#"{"jsonrpc":"2.0","id":5,"error":{"code":-32603,"message":"Internal error"}}"#);
    let load = fetch(&h);
    history(
        &mut h,
        load,
        HistoryChunk::Lines(vec![replay_line("from the journal")]),
    );
    history(&mut h, load, HistoryChunk::End(summary()));
    let new = last_to_agent(&h);
    assert_eq!(new["method"], "session/new", "the agent lost it: a new one");
    h.agent(&format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"sessionId":"U"}}}}"#,
        new["id"]
    ));
    let got: Vec<Value> = h.to_client[1..].iter().map(json_of).collect();
    let n = got.len();
    assert_eq!(
        got[0]["params"]["update"]["content"]["text"],
        "from the journal"
    );
    assert_eq!(
        got[n - 2]["params"]["update"],
        json!({"sessionUpdate": "state_update", "state": "idle"})
    );
    assert_eq!(got[n - 1]["id"], 5);
    assert!(got[n - 1].get("result").is_some(), "{:?}", got[n - 1]);
}

#[test]
fn a_v2_resume_from_an_unknown_cursor_is_the_agents_to_refuse_never_served_from_the_journal() {
    let mut h = v2_with(INIT_V2_OK);
    h.client(r#"{"jsonrpc":"2.0","id":6,"method":"session/resume","params":{"sessionId":"S","cwd":"/w","replayFrom":{"type":"weird"}}}"#);
    assert_eq!(last_to_agent(&h)["id"], 6, "forwarded");
    h.agent(r#"{"jsonrpc":"2.0","id":6,"error":{"code":-32602,"message":"Invalid params"}}"#);
    assert_eq!(last_to_client(&h)["error"]["code"], -32602);
    assert!(
        !h.requests
            .iter()
            .any(|a| matches!(a, Action::FetchHistory { .. })),
        "no journal replay"
    );
    // An agent without sessions: the proxy refuses it itself.
    let mut h = v2_with(
        r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2,"info":{"name":"a","version":"1"},"capabilities":{}}}"#,
    );
    h.client(r#"{"jsonrpc":"2.0","id":6,"method":"session/resume","params":{"sessionId":"S","cwd":"/w","replayFrom":{"type":"weird"}}}"#);
    let answer = last_to_client(&h);
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(h.to_agent.len(), 1, "only the initialize reached the agent");
}

#[test]
fn a_v2_turn_ends_in_the_catalog_with_its_idle_state_update_not_with_the_prompt_answer() {
    let mut h = v2_with(INIT_V2_OK);
    h.client(
        r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}"#,
    );
    h.agent(r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"S"}}"#);
    h.client(r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"hi"}]}}"#);
    h.agent(r#"{"jsonrpc":"2.0","id":2,"result":{"messageId":"m1"}}"#);
    let ended = |h: &mut Harness| {
        h.turn_facts()
            .into_iter()
            .any(|(u, _)| matches!(u, CatalogUpdate::TurnEnded { .. }))
    };
    assert!(!ended(&mut h), "the answer only says the prompt was taken");
    h.agent(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn","usage":{"inputTokens":10,"outputTokens":5,"totalTokens":15}}}}"#);
    assert!(ended(&mut h));
}

#[test]
fn a_v2_turn_the_agent_dies_in_ends_for_the_client_with_a_notice_and_an_idle_state() {
    let mut h = v2_with(INIT_V2_OK);
    h.client(
        r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}"#,
    );
    h.agent(r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"S"}}"#);
    h.client(r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"hi"}]}}"#);
    h.agent(r#"{"jsonrpc":"2.0","id":2,"result":{"messageId":"m1"}}"#);
    h.agent(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"state_update","state":"running"}}}"#);
    let before = h.to_client.len();
    let at = h.stamp();
    h.proxy.handle_eof(at, Peer::Agent);
    h.drain();
    let got: Vec<Value> = h.to_client[before..].iter().map(json_of).collect();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0]["params"]["update"]["sessionUpdate"], "notice");
    assert_eq!(got[0]["params"]["update"]["severity"], "error");
    assert_eq!(
        got[1]["params"]["update"],
        json!({"sessionUpdate": "state_update", "state": "idle"})
    );
    assert!(
        h.session("S").iter().any(|l| l.contains("\"notice\"")),
        "journaled with the session"
    );
}

#[test]
fn a_v2_prompt_is_watched_for_stalls_until_its_session_is_idle_not_until_it_is_taken() {
    let mut h = Harness::with(Config {
        stall_timeout_us: Some(1_000_000),
        ..Config::default()
    });
    h.client(INIT_V2);
    h.agent(INIT_V2_OK);
    h.client(
        r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}"#,
    );
    h.agent(r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"S"}}"#);
    let tick = |h: &mut Harness, s: u64| {
        let at = Stamp {
            unix_us: 0,
            mono_us: s * 1_000_000,
        };
        h.proxy.handle_tick(at);
        h.drain();
        h.to_agent
            .iter()
            .filter(|l| json_of(l)["method"] == "session/cancel")
            .count()
    };
    h.client(r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"hi"}]}}"#);
    h.agent(r#"{"jsonrpc":"2.0","id":2,"result":{"messageId":"m1"}}"#);
    assert_eq!(tick(&mut h, 60), 1, "taken, then silent: cancelled");
    h.client(r#"{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"again"}]}}"#);
    h.agent(r#"{"jsonrpc":"2.0","id":3,"result":{"messageId":"m2"}}"#);
    h.agent(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn"}}}"#);
    assert_eq!(tick(&mut h, 600), 1, "idle: nothing more to watch");
}

#[test]
fn a_session_id_the_store_already_holds_gets_a_fresh_client_facing_id_mapped_to_the_agents() {
    let mut h = Harness::with(Config {
        asks_free_ids: true,
        ..Config::default()
    });
    h.stored = |id| id == "echo-session-1" || id == "echo-session-1~2";
    h.client(INIT);
    h.agent(INIT_OK);
    h.client(
        r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}"#,
    );
    h.agent(r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"echo-session-1"}}"#);
    assert_eq!(
        last_to_client(&h)["result"]["sessionId"],
        "echo-session-1~3",
        "the first ID the store does not hold"
    );
    h.client(r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"echo-session-1~3","prompt":[]}}"#);
    assert_eq!(last_to_agent(&h)["params"]["sessionId"], "echo-session-1");
    h.agent(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"echo-session-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}"#);
    assert_eq!(
        last_to_client(&h)["params"]["sessionId"],
        "echo-session-1~3"
    );
    let journal = &h.journals[&Target::Session("echo-session-1~3".into())];
    assert!(journal.iter().any(|r| matches!(&r.body, Body::Event(Event::SessionMapped { agent_session }) if agent_session == "echo-session-1")));
    assert!(h.requests.contains(&Action::Catalog(CatalogUpdate::Alias {
        session: "echo-session-1~3".into(),
        agent: AgentSessionId::from("echo-session-1"),
    })));
    assert!(
        !h.journals
            .contains_key(&Target::Session("echo-session-1".into())),
        "nothing goes to the earlier run's session"
    );
    // An ID the store does not hold passes as the agent gave it.
    h.client(
        r#"{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}"#,
    );
    h.agent(r#"{"jsonrpc":"2.0","id":3,"result":{"sessionId":"echo-session-2"}}"#);
    assert_eq!(last_to_client(&h)["result"]["sessionId"], "echo-session-2");
}

/// A proxy whose shell answers `FindFreeId`, a client's `session/new` on its way to the agent.
fn asking_the_store_about_a_new_session() -> Harness {
    let mut h = Harness::with(Config {
        asks_free_ids: true,
        ..Config::default()
    });
    h.client(INIT);
    h.agent(INIT_OK);
    h.client(
        r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}"#,
    );
    h
}

#[test]
fn the_agent_lines_after_a_new_sessions_answer_wait_in_order_for_the_stores_answer() {
    let mut h = asking_the_store_about_a_new_session();
    let sent = h.to_client.len();
    let at = h.stamp();
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s-1"}}"#,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}"#,
    ] {
        h.proxy
            .handle_line(at, Peer::Agent, Bytes::from(format!("{line}\n")));
    }
    let asked: Vec<Action> = std::iter::from_fn(|| h.proxy.poll_action()).collect();
    let [Action::FindFreeId { ask, session }] = asked.as_slice() else {
        panic!("only the question goes out while the lines wait: {asked:?}");
    };
    assert_eq!(&**session, "s-1");
    h.proxy.handle_free_id(at, *ask, SessionId::from("s-1~2"));
    h.drain();
    let out: Vec<Value> = h.to_client[sent..]
        .iter()
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(out.len(), 2, "the answer, then the update");
    assert_eq!(out[0]["result"]["sessionId"], "s-1~2");
    assert_eq!(out[1]["params"]["sessionId"], "s-1~2");
}

/// The agent's answer naming its new session `s-1`, not drained: the store is asked.
fn agent_names_a_new_session(h: &mut Harness) -> Stamp {
    let at = h.stamp();
    let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s-1"}}"#;
    h.proxy
        .handle_line(at, Peer::Agent, Bytes::from(format!("{answer}\n")));
    at
}

#[test]
fn an_agent_that_ends_while_the_store_is_asked_keeps_its_own_session_id() {
    let mut h = asking_the_store_about_a_new_session();
    let at = agent_names_a_new_session(&mut h);
    h.proxy.handle_eof(at, Peer::Agent);
    h.drain();
    assert_eq!(last_to_client(&h)["result"]["sessionId"], "s-1");
    assert!(h.journals.contains_key(&Target::Session("s-1".into())));
}

#[test]
fn what_is_no_message_passes_at_once_while_the_store_is_asked() {
    let mut h = asking_the_store_about_a_new_session();
    let at = agent_names_a_new_session(&mut h);
    h.proxy
        .handle_line(at, Peer::Agent, Bytes::from_static(b"not json\n"));
    let out: Vec<Action> = std::iter::from_fn(|| h.proxy.poll_action()).collect();
    assert!(
        out.iter().any(|a| matches!(a, Action::Forward { to: Peer::Client(_), line } if &line[..] == b"not json\n")),
        "{out:?}"
    );
    assert!(out.iter().any(|a| matches!(a, Action::FindFreeId { .. })));
}

/// The support a `FetchHistory` asked the store for.
fn fetched_support(h: &Harness) -> ClientSupport {
    h.requests
        .iter()
        .rev()
        .find_map(|a| match a {
            Action::FetchHistory { support, .. } => Some(*support),
            _ => None,
        })
        .expect("a FetchHistory")
}

#[test]
fn a_load_that_asks_for_the_tail_is_served_from_the_journal_even_by_an_agent_that_loads() {
    let mut h = agent_with(Config::default(), r#"{"loadSession":true}"#);
    let plain = LOAD;
    h.client(plain);
    assert_eq!(last_to_agent(&h)["id"], 5, "a whole load: the agent's own");
    let mut h = agent_with(Config::default(), r#"{"loadSession":true}"#);
    h.client(r#"{"jsonrpc":"2.0","id":5,"method":"session/load","params":{"sessionId":"S","cwd":"/w","mcpServers":[],"_meta":{"acpJournal":{"tail":{"turns":2}}}}}"#);
    assert_eq!(fetched_support(&h).tail, Some(2));
    let load = fetch(&h);
    history(&mut h, load, HistoryChunk::End(whole()));
    let underneath = last_to_agent(&h);
    assert_eq!(underneath["method"], "session/load");
    assert_eq!(
        underneath["id"], "acp-journal:0",
        "the proxy's own, its replay hidden"
    );
    assert!(underneath["params"].get("_meta").is_none());
    let n = h.to_client.len();
    h.agent(
        std::str::from_utf8(&replay_line("the agent's whole replay"))
            .unwrap()
            .trim_end(),
    );
    assert_eq!(h.to_client.len(), n, "hidden");
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:0","result":{}}"#);
    assert_eq!(last_to_client(&h)["id"], 5);
}

#[test]
fn a_v2_tail_resume_is_served_from_the_journal_and_ends_with_replay_complete() {
    let mut h = v2_with(INIT_V2_OK);
    h.client(r#"{"jsonrpc":"2.0","id":5,"method":"session/resume","params":{"sessionId":"S","cwd":"/w","mcpServers":[],"replayFrom":{"type":"_acpJournal/tail","turns":1}}}"#);
    assert_eq!(fetched_support(&h).tail, Some(1));
    let load = fetch(&h);
    history(
        &mut h,
        load,
        HistoryChunk::Lines(vec![replay_line("last turn")]),
    );
    history(&mut h, load, HistoryChunk::End(summary()));
    let underneath = last_to_agent(&h);
    assert_eq!(underneath["method"], "session/resume", "v2 agents resume");
    assert!(
        underneath["params"].get("replayFrom").is_none(),
        "without its replay"
    );
    h.agent(&format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#,
        underneath["id"]
    ));
    let got: Vec<Value> = h.to_client[1..].iter().map(json_of).collect();
    let kinds: Vec<&str> = got
        .iter()
        .map(|m| {
            m["params"]["update"]["sessionUpdate"]
                .as_str()
                .unwrap_or("(answer)")
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "agent_message_chunk",
            "replay_complete",
            "state_update",
            "(answer)"
        ]
    );
}

#[test]
fn cursors_reach_the_client_only_when_the_session_comes_back_on_the_agent_session_that_made_them() {
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"cursors":{}}}}}"#;
    let cursors = Cursors {
        agent: Some("scripted".into()),
        agent_session: "S".into(),
        updates: vec![
            json!({"sessionUpdate":"cursor_update","cursorId":"c1","anchor":{"type":"tool_call","toolCallId":"t"}}),
        ],
    };
    let run = |agent_caps: &str, answer: &str| -> Vec<Value> {
        let mut h = Harness::with(Config::default());
        h.client(init);
        h.agent(&format!(
            r#"{{"jsonrpc":"2.0","id":0,"result":{{"protocolVersion":1,"agentCapabilities":{agent_caps},"agentInfo":{{"name":"scripted","version":"1"}}}}}}"#
        ));
        h.client(LOAD);
        let load = fetch(&h);
        history(
            &mut h,
            load,
            HistoryChunk::End(Summary {
                cursors: Some(Box::new(cursors.clone())),
                ..whole()
            }),
        );
        let underneath = last_to_agent(&h);
        h.agent(&answer.replace("ID", &underneath["id"].to_string()));
        h.to_client.iter().map(json_of).collect()
    };
    let told = |got: &[Value]| {
        got.iter()
            .any(|m| m["params"]["update"]["sessionUpdate"] == "cursor_update")
    };
    // The agent resumes the session itself: its cursors are still good.
    let resumed = run(
        r#"{"sessionCapabilities":{"resume":{}}}"#,
        r#"{"jsonrpc":"2.0","id":ID,"result":{}}"#,
    );
    assert!(told(&resumed), "{resumed:?}");
    let answer = resumed.last().unwrap();
    assert_eq!(answer["id"], 5);
    // A new agent session: they were the lost one's.
    let fresh = run(
        "{}",
        r#"{"jsonrpc":"2.0","id":ID,"result":{"sessionId":"U"}}"#,
    );
    assert_eq!(fresh.last().unwrap()["id"], 5);
    assert!(!told(&fresh), "{fresh:?}");
}

#[test]
fn a_title_the_agent_makes_of_the_reprime_is_neither_forwarded_nor_kept() {
    // Issue 51: claude-agent-acp names a session after its first prompt, which on a re-primed
    // session is the re-prime block.
    let mut h = mapped();
    h.client(r#"{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"next"}]}}"#);
    h.agent(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"U","update":{"sessionUpdate":"session_info_update","title":"[Context restored by acp-journal: this conversation was interrupted and resumed in a new session. Earlier turns:] User: hi Agent: hel…","updatedAt":"2026-11-29T07:32:44Z"}}}"#);
    let got = last_to_client(&h);
    assert_eq!(
        got,
        json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"session_info_update","updatedAt":"2026-11-29T07:32:44Z"}}})
    );
    assert!(h.requests.contains(&Action::Catalog(CatalogUpdate::Info {
        session: SessionId::from("S"),
        title: None,
        updated_at: Some("2026-11-29T07:32:44Z".into()),
    })));
    // A title of the agent's own is the session's, as ever.
    h.agent(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"U","update":{"sessionUpdate":"session_info_update","title":"Fix the parser"}}}"#);
    assert_eq!(
        last_to_client(&h)["params"]["update"]["title"],
        "Fix the parser"
    );
}

#[test]
fn the_agents_own_rows_of_a_journal_session_are_merged_into_its_entry_never_beside_it() {
    // Issue 51: claude-agent-acp lists its stale copy of S (its last prompt as title, its old
    // time) and the agent-side session the proxy made for a re-prime (titled with the
    // transcript). Both are S: one entry, the journal's.
    let mut h = agent_with(Config::default(), r#"{"sessionCapabilities":{"list":{}}}"#);
    h.client(r#"{"jsonrpc":"2.0","id":9,"method":"session/list","params":{"cwd":"/a"}}"#);
    let s = ListedSession {
        session: "S".into(),
        cwd: Some("/a".into()),
        title: Some("What was the first thing I asked?".into()),
        updated: Activity {
            at: Some("2026-11-29T10:00:00Z".into()),
            us: 1_795_960_800_000_000,
        },
        agent_ids: vec!["U".into()],
        prompted: true,
        ..ListedSession::default()
    };
    sessions_answer(&mut h, vec![s]);
    h.agent(r#"{"jsonrpc":"2.0","id":9,"result":{"sessions":[{"sessionId":"U","cwd":"/a","title":"[Context restored by acp-journal: this conversation…","updatedAt":"2026-11-29T09:00:00Z","_meta":{"claudeCode":{"x":1}}},{"sessionId":"native","cwd":"/a","title":"made without the proxy","updatedAt":"2026-11-29T09:30:00Z"},{"sessionId":"S","cwd":"/a","title":"the third prompt","updatedAt":"2026-11-28T08:00:00Z"}]}}"#);
    let got = last_to_client(&h);
    let rows = got["result"]["sessions"].as_array().unwrap();
    let ids: Vec<&str> = rows
        .iter()
        .map(|r| r["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["S", "native"], "{got}");
    assert_eq!(rows[0]["title"], "What was the first thing I asked?");
    assert_eq!(rows[0]["updatedAt"], "2026-11-29T10:00:00Z");
    assert_eq!(
        rows[0]["_meta"]["claudeCode"],
        json!({"x": 1}),
        "the agent's own _meta kept"
    );
}

#[test]
fn a_session_the_journal_lacks_is_loaded_by_the_agent_with_its_replay_shown() {
    // Issue 51: an entry of the agent's own list (a session made without the proxy) loads,
    // with a store too (where loads are served from the journal).
    let mut h = journal_mode_over_a_loading_agent();
    h.client(LOAD);
    let load = fetch(&h);
    history(&mut h, load, HistoryChunk::Missing);
    let asked = last_to_agent(&h);
    assert_eq!(asked["method"], "session/load");
    assert_eq!(asked["params"]["sessionId"], "S");
    h.agent(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"made without the proxy"}}}}"#);
    assert_eq!(
        last_to_client(&h)["params"]["update"]["content"]["text"],
        "made without the proxy",
        "the agent's replay is shown"
    );
    h.agent(&format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#,
        asked["id"]
    ));
    assert_eq!(
        last_to_client(&h),
        json!({"jsonrpc":"2.0","id":5,"result":{}})
    );
    assert!(
        h.session("S")
            .iter()
            .any(|l| l.contains("made without the proxy")),
        "journaled from now on"
    );
}

#[test]
fn a_session_neither_the_journal_nor_the_agent_has_gets_the_agents_error() {
    let mut h = journal_mode_over_a_loading_agent();
    h.client(LOAD);
    let load = fetch(&h);
    history(&mut h, load, HistoryChunk::Missing);
    let asked = last_to_agent(&h);
    h.agent(&format!(
        r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":-32002,"message":"Resource not found"}}}}"#,
        asked["id"]
    ));
    assert_eq!(
        last_to_client(&h),
        json!({"jsonrpc":"2.0","id":5,"error":{"code":-32002,"message":"Resource not found"}})
    );
    assert_eq!(h.proxy.pending_requests(), 0);
}
