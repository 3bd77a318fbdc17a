//! History any agent can use, through the built binary with real peers: a history-grade
//! `session/list` over 10 000 sessions (order, limit, cursor, fields, valid v1),
//! `session/list_changed` while a second proxy records, and a session continued in another
//! agent and back.

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use acp_journal::catalog::{Catalog, CatalogEntry};
use acp_journal::journal::JournalDir;
use serde_json::{Value, json};

use crate::util::{Peers, TestClient, proxied, proxied_with, run_cli_store};

/// The agent command line as the catalog stores it.
fn agent_line(agent: &[String]) -> String {
    agent.join(" ")
}

/// `n` sessions in `cwd` recorded with `agent`, session `i` last active at second `i`.
fn generate(store: &Path, agent: &str, cwd: &str, n: usize) {
    let journals = JournalDir::new(store);
    journals.create_dirs().unwrap();
    let mut catalog = Vec::new();
    for i in 0..n {
        let session = format!("gen-{i:05}");
        let entry = CatalogEntry::Open {
            segment: format!(
                "sessions/{}/x.acpj.zst",
                acp_journal::journal::dir::session_key(&session)
            ),
            session,
            cwd: Some(cwd.into()),
            agent: Some(agent.into()),
            agent_name: None,
            git_branch: Some("main".into()),
            t: 1_700_000_000_000_000 + i as i64 * 1_000_000,
            agent_info: None,
        };
        catalog.extend(serde_json::to_vec(&entry).unwrap());
        catalog.push(b'\n');
        let prompt = CatalogEntry::Prompt {
            session: format!("gen-{i:05}"),
            title: format!("task {i}"),
            t: 1_700_000_000_000_000 + i as i64 * 1_000_000,
        };
        catalog.extend(serde_json::to_vec(&prompt).unwrap());
        catalog.push(b'\n');
    }
    std::fs::write(journals.root().join("catalog.ndjson"), catalog).unwrap();
    // One title and usage report, to check the fields.
    journals
        .append_catalog(&CatalogEntry::Usage {
            session: "gen-09999".into(),
            usage: json!({"used": 12, "size": 200, "cost": {"amount": 0.25, "currency": "USD"}}),
            t: 1_700_000_000_000_000 + 9_999 * 1_000_000,
        })
        .unwrap();
}

fn init_with_list_changed(client: &mut TestClient) -> Value {
    let init = client.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"session": {"listChanged": {}}}, "clientInfo": {"name": "history-test", "version": "0"}}),
    );
    assert!(init.get("result").is_some(), "{init}");
    init
}

/// The text of every update the client received from message `from` on, concatenated.
fn update_texts(client: &TestClient, from: usize) -> String {
    client.received[from..]
        .iter()
        .filter_map(|r| r.json.as_ref())
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect()
}

/// Send `text` to `session`, expect a result, and return the update texts it brought.
fn prompt_echo(client: &mut TestClient, session: &str, text: &str) -> String {
    let before = client.received.len();
    let response = client.prompt(session, text);
    assert!(response.get("result").is_some(), "{response}");
    update_texts(client, before)
}

#[test]
fn session_list_pages_ten_thousand_sessions_newest_first_as_valid_v1() {
    let agent = Peers::get().py_echo_agent();
    let store = tempfile::tempdir().unwrap();
    generate(store.path(), &agent_line(&agent), "/proj", 10_000);
    let schema: Value = serde_json::from_str(include_str!("../schema/acp-v1.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut client = TestClient::spawn(&proxied(store.path(), &agent));
    let init = init_with_list_changed(&mut client);
    assert_eq!(
        init["result"]["agentCapabilities"]["sessionCapabilities"]["list"],
        json!({"limit": {}, "changes": {}})
    );
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut params = json!({"cwd": "/proj", "limit": 50});
        if let Some(c) = &cursor {
            params["cursor"] = json!(c);
        }
        let page = client.request("session/list", params);
        let errors: Vec<String> = validator
            .iter_errors(&page)
            .map(|e| e.to_string())
            .take(3)
            .collect();
        assert!(errors.is_empty(), "{errors:?}");
        let rows = page["result"]["sessions"].as_array().unwrap();
        assert!(!rows.is_empty() && rows.len() <= 50);
        if seen.is_empty() {
            let first = &rows[0];
            assert_eq!(first["sessionId"], "gen-09999");
            assert_eq!(first["gitBranch"], "main");
            assert_eq!(first["title"], "task 9999", "the first prompt's line");
            assert_eq!(first["cost"], json!({"amount": 0.25, "currency": "USD"}));
            assert_eq!(first["_meta"]["acpJournal"]["usage"]["used"], 12);
            assert!(first["updatedAt"].as_str().unwrap().starts_with("2023-11-"));
        }
        seen.extend(
            rows.iter()
                .map(|r| r["sessionId"].as_str().unwrap().to_string()),
        );
        match page["result"]["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    let expected: Vec<String> = (0..10_000).rev().map(|i| format!("gen-{i:05}")).collect();
    assert_eq!(seen.len(), 10_000);
    assert!(seen == expected, "every session once, newest first");
    client.finish();
}

/// Wait (bounded) for a `session/list_changed` for `cwd`.
fn wait_list_changed(client: &mut TestClient, cwd: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        match client.recv_within(Duration::from_millis(200)) {
            Ok(Some(r)) => {
                if r.json.as_ref().is_some_and(|m| {
                    m["method"] == "session/list_changed" && m["params"]["cwd"] == cwd
                }) {
                    return true;
                }
            }
            Ok(None) => {}
            Err(_) => return false,
        }
    }
    false
}

#[test]
fn list_changed_reaches_a_client_while_another_proxy_records_a_session() {
    let agent = Peers::get().py_echo_agent();
    let store = tempfile::tempdir().unwrap();
    let cwd = store.path().display().to_string();
    let mut watcher = TestClient::spawn(&proxied(store.path(), &agent));
    init_with_list_changed(&mut watcher);
    let empty = watcher.request("session/list", json!({"cwd": cwd}));
    assert_eq!(empty["result"]["sessions"], json!([]));
    let mut other = TestClient::spawn(&proxied(store.path(), &agent));
    let session = other.start_session(&cwd);
    assert!(
        wait_list_changed(&mut watcher, &cwd),
        "a new session in a listed cwd"
    );
    let listed = watcher.request("session/list", json!({"cwd": cwd}));
    assert_eq!(
        listed["result"]["sessions"],
        json!([]),
        "not history before its first prompt"
    );
    assert!(other.prompt(&session, "hello").get("result").is_some());
    assert!(wait_list_changed(&mut watcher, &cwd), "a turn in it");
    let listed = watcher.request("session/list", json!({"cwd": cwd}));
    let row = &listed["result"]["sessions"][0];
    assert_eq!(row["sessionId"], session.as_str(), "{row}");
    assert_eq!(row["title"], "hello", "the first prompt's line: {row}");
    assert_eq!(row["state"], "idle", "{row}");
    assert!(row["lastTurnEndedAt"].is_string(), "{row}");
    other.finish();
    watcher.finish();
}

#[test]
fn a_session_recorded_with_one_agent_continues_in_another_and_back() {
    let peers = Peers::get();
    let (ts, echo) = (peers.ts_agent(), peers.py_echo_agent());
    let store = tempfile::tempdir().unwrap();
    let mut client = TestClient::spawn(&proxied(store.path(), &ts));
    let session = client.start_session("/tmp");
    assert!(
        client
            .prompt(&session, "asked the typescript agent")
            .get("result")
            .is_some()
    );
    client.finish();

    // The echo agent lists only its own sessions, unless asked for every agent's.
    let mut client = TestClient::spawn(&proxied(store.path(), &echo));
    client.initialize();
    let own = client.request("session/list", json!({"cwd": "/tmp"}));
    assert_eq!(own["result"]["sessions"], json!([]));
    client.finish();
    let mut client =
        TestClient::spawn(&proxied_with(store.path(), &["--list-scope", "all"], &echo));
    client.initialize();
    let all = client.request("session/list", json!({"cwd": "/tmp"}));
    let row = &all["result"]["sessions"][0];
    assert_eq!(row["sessionId"], session.as_str());
    assert!(
        row["_meta"]["acpJournal"]["agent"]
            .as_str()
            .unwrap()
            .contains("agent.js"),
        "marked with the agent that recorded it: {row}"
    );
    // Continued in the echo agent: replayed from the journal, re-primed.
    let (updates, response) = client.load(&session, "/tmp");
    assert!(response.get("result").is_some(), "{response}");
    assert!(!updates.is_empty());
    let echoed = prompt_echo(&mut client, &session, "asked the echo agent");
    assert!(echoed.contains("asked the typescript agent"), "{echoed}");
    client.finish();

    // And back in the TypeScript agent: both turns are there.
    let mut client = TestClient::spawn(&proxied(store.path(), &ts));
    client.initialize();
    let (updates, response) = client.load(&session, "/tmp");
    assert!(response.get("result").is_some(), "{response}");
    let users: HashSet<String> = updates
        .iter()
        .filter(|u| u["params"]["update"]["sessionUpdate"] == "user_message_chunk")
        .filter_map(|u| {
            u["params"]["update"]["content"]["text"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert!(
        users.contains("asked the typescript agent") && users.contains("asked the echo agent"),
        "{users:?}"
    );
    client.finish();
}

/// The text of every `user_message_chunk` in `updates`.
fn user_texts(updates: &[Value]) -> Vec<String> {
    updates
        .iter()
        .filter(|u| u["params"]["update"]["sessionUpdate"] == "user_message_chunk")
        .filter_map(|u| {
            u["params"]["update"]["content"]["text"]
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

#[test]
fn session_fork_for_an_agent_without_it_keeps_the_first_turn_only() {
    let peers = Peers::get();
    let (ts, echo) = (peers.ts_agent(), peers.py_echo_agent());
    let store = tempfile::tempdir().unwrap();
    let mut client = TestClient::spawn(&proxied(store.path(), &ts));
    let session = client.start_session("/tmp");
    for text in ["first turn", "second turn"] {
        assert!(client.prompt(&session, text).get("result").is_some());
    }
    client.finish();

    // In front of the echo agent (no session/fork of its own): load, pick turn 1's message,
    // fork there.
    let mut client =
        TestClient::spawn(&proxied_with(store.path(), &["--list-scope", "all"], &echo));
    let init = client.initialize();
    assert_eq!(
        init["result"]["agentCapabilities"]["sessionCapabilities"]["fork"],
        json!({}),
        "advertised for the agent"
    );
    let (updates, _) = client.load(&session, "/tmp");
    let first = updates
        .iter()
        .find(|u| {
            u["params"]["update"]["sessionUpdate"] == "user_message_chunk"
                && u["params"]["update"]["content"]["text"] == "first turn"
        })
        .and_then(|u| u["params"]["update"]["messageId"].as_str())
        .expect("the replayed prompt has a messageId")
        .to_string();
    let forked = client.request(
        "session/fork",
        json!({"sessionId": session, "cwd": "/tmp", "mcpServers": [], "messageId": first}),
    );
    let fork = forked["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("fork failed: {forked}"))
        .to_string();
    assert_ne!(fork, session);
    let echoed = prompt_echo(&mut client, &fork, "third, in the fork");
    assert!(
        echoed.contains("first turn") && !echoed.contains("second turn"),
        "the fork's agent has turn 1 only: {echoed}"
    );
    let listed = client.request("session/list", json!({"cwd": "/tmp"}));
    let ids: Vec<&str> = listed["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["sessionId"].as_str())
        .collect();
    assert!(
        ids.contains(&fork.as_str()) && ids.contains(&session.as_str()),
        "{ids:?}"
    );
    client.finish();

    // Loaded again later: the fork has turn 1 and its own turn; the original is whole.
    let mut client = TestClient::spawn(&proxied(store.path(), &echo));
    client.initialize();
    let (updates, response) = client.load(&fork, "/tmp");
    assert!(response.get("result").is_some(), "{response}");
    assert_eq!(user_texts(&updates), ["first turn", "third, in the fork"]);
    let (updates, _) = client.load(&session, "/tmp");
    assert_eq!(user_texts(&updates), ["first turn", "second turn"]);
    client.finish();
}

#[test]
fn a_rename_an_archive_and_steering_reach_list_session_list_show_and_a_load() {
    let agent = crate::util::scripted("index");
    let store = tempfile::tempdir().unwrap();
    let cwd = store.path().display().to_string();
    let mut client = TestClient::spawn(&proxied(store.path(), &agent));
    let session = client.start_session(&cwd);
    // Steering sent while the turn runs (the agent here answers at once: it took it).
    client.send(&json!({"jsonrpc": "2.0", "id": 50, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "write the parser"}]}}));
    let steer = client.request(
        "_session/steering",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "and use tabs"}]}),
    );
    assert_eq!(steer["result"], json!({}), "{steer}");
    let answered = |client: &TestClient| {
        client
            .received
            .iter()
            .any(|r| r.json.as_ref().is_some_and(|m| m["id"] == 50))
    };
    while !answered(&client) {
        client.recv().expect("the prompt's answer");
    }
    let renamed = client.request(
        "_session/rename",
        json!({"sessionId": session, "title": "Parser rewrite"}),
    );
    assert_eq!(
        renamed["result"],
        json!({}),
        "passed to the agent: {renamed}"
    );
    let rows = |client: &mut TestClient, params: Value| -> Vec<Value> {
        let page = client.request("session/list", params);
        page["result"]["sessions"]
            .as_array()
            .cloned()
            .expect("rows")
    };
    let listed = rows(&mut client, json!({"cwd": cwd}));
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        listed[0]["title"], "Parser rewrite",
        "the client's name wins"
    );
    client.request("_session/archive", json!({"sessionId": session}));
    assert!(
        rows(&mut client, json!({"cwd": cwd})).is_empty(),
        "archived: hidden"
    );
    let all = json!({"cwd": cwd, "_meta": {"jetbrains": {"air": {"list": {"archived": "all"}}}}});
    assert_eq!(rows(&mut client, all).len(), 1, "unless asked for");
    client.finish();

    let (_, out, _) = run_cli_store(store.path(), &["list", "--json"]);
    let listed: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (&listed[0]["title"], &listed[0]["archived"]),
        (&json!("Parser rewrite"), &json!(true))
    );
    let (_, rebuilt, _) = run_cli_store(store.path(), &["list", "--json", "--rebuild-catalog"]);
    assert_eq!(
        serde_json::from_str::<Vec<Value>>(&rebuilt).unwrap()[0]["title"],
        "Parser rewrite",
        "read back from the segments"
    );
    // The steering is the user's input in the timeline and in a load's replay.
    let (_, shown, _) = run_cli_store(store.path(), &["show", &session]);
    assert!(shown.contains("❯ and use tabs"), "{shown}");
    let mut client = TestClient::spawn(&proxied(store.path(), &agent));
    client.initialize();
    let (updates, response) = client.load(&session, &cwd);
    assert!(response.get("result").is_some(), "{response}");
    let users: Vec<&str> = updates
        .iter()
        .filter(|u| u["params"]["update"]["sessionUpdate"] == "user_message_chunk")
        .filter_map(|u| u["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(users, ["write the parser", "and use tabs"]);
    client.finish();
}
