//! Subagents (child sessions), background tasks, compactions and notices through the built
//! binary, from our scripted agent sending what claude-agent-acp 0.101 sends a client that
//! declares `subagents` (`tests/agents/scripted_agent.py subagents`); the real claude-agent-acp
//! delegating to its Agent tool is in `adapters.rs`. The tree journaled with its root and listed
//! once, replayed in order to a client that knows subagents and as the parent's view to one that
//! does not, the tail of a long session, and every reader showing it.

use std::path::Path;

use serde_json::{Value, json};

use crate::util::{TestClient, proxied, read_store, root, run_cli, scripted, session_messages};

/// `initialize` declaring `caps`.
fn initialize(client: &mut TestClient, caps: Value) {
    let init = client.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": caps,
            "clientInfo": {"name": "acp-journal-tests", "version": "0"}}),
    );
    assert!(init.get("result").is_some(), "{init}");
}

/// A session of `turns` delegating prompt turns, recorded in `store` by a client that declared
/// subagents; its ID.
fn record(store: &Path, turns: usize) -> String {
    let mut client = TestClient::spawn(&proxied(store, &scripted("subagents")));
    initialize(&mut client, json!({"subagents": {}}));
    let session = client.new_session("/w");
    for n in 1..=turns {
        let answer = client.prompt(&session, &format!("find the TODOs, take {n}"));
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    }
    let received: Vec<Value> = client
        .received
        .iter()
        .filter_map(|r| r.json.clone())
        .collect();
    assert!(
        received
            .iter()
            .any(|m| m["params"]["sessionId"] == "sub-child-1"),
        "the child's lines reach the client under its own ID"
    );
    client.finish();
    session
}

/// `(sessionId, sessionUpdate)` of each replayed update.
fn whose(updates: &[Value]) -> Vec<(String, String)> {
    updates
        .iter()
        .map(|m| {
            (
                m["params"]["sessionId"].as_str().unwrap_or("?").to_string(),
                m["params"]["update"]["sessionUpdate"]
                    .as_str()
                    .unwrap_or("?")
                    .to_string(),
            )
        })
        .collect()
}

fn list(store: &Path, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["list", "--journal-dir", store.to_str().unwrap(), "--json"];
    args.extend(extra);
    let (code, out, err) = run_cli(&args);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

#[test]
fn a_subagent_is_journaled_with_its_parent_and_listed_once() {
    let store = tempfile::tempdir().unwrap();
    let session = record(store.path(), 1);
    let journals = session_messages(store.path());
    assert_eq!(
        journals.keys().collect::<Vec<_>>(),
        [&session],
        "no journal of the child's own"
    );
    let child_lines: Vec<&Value> = journals[&session]
        .iter()
        .filter(|m| m["params"]["sessionId"] == "sub-child-1")
        .collect();
    let kinds: Vec<&str> = child_lines
        .iter()
        .map(|m| {
            m["params"]["update"]["sessionUpdate"]
                .as_str()
                .or(m["method"].as_str())
                .unwrap()
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "session_message",
            "tool_call",
            "session/request_permission",
            "tool_call_update",
            "agent_message_chunk"
        ],
        "the child's lines, in order, with its parent's"
    );
    assert!(
        journals[&session]
            .iter()
            .any(|m| m["id"] == "perm-1" && m["result"]["outcome"]["optionId"] == "allow"),
        "the answer to the child's request too"
    );
    for rows in [
        list(store.path(), &[]),
        list(store.path(), &["--rebuild-catalog"]),
    ] {
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0]["session"], session.as_str());
        assert_eq!(rows[0]["subagents"], 1);
        assert_eq!(rows[0]["turns"], 1);
    }
}

#[test]
fn a_load_replays_the_tree_to_a_client_that_knows_subagents_and_the_parents_view_to_another() {
    let store = tempfile::tempdir().unwrap();
    let session = record(store.path(), 1);
    let load = |caps: Value| {
        let mut client = TestClient::spawn(&proxied(store.path(), &scripted("subagents")));
        initialize(&mut client, caps);
        let (updates, answer) = client.load(&session, "/w");
        assert!(answer.get("result").is_some(), "{answer}");
        client.finish();
        updates
    };
    let s = |session: &str, kind: &str| (session.to_string(), kind.to_string());
    let updates = load(json!({"subagents": {}}));
    assert_eq!(
        whose(&updates),
        [
            s(&session, "user_message_chunk"),
            s(&session, "agent_message_chunk"),
            s(&session, "subagent_update"),
            s(&session, "session_message"),
            s("sub-child-1", "session_message"),
            s("sub-child-1", "tool_call"),
            s("sub-child-1", "tool_call_update"),
            s("sub-child-1", "agent_message_chunk"),
            s(&session, "session_message"),
            s(&session, "subagent_update"),
            s(&session, "agent_message_chunk"),
            s(&session, "usage_update"),
        ],
        "in order, the child's under its own ID; no notice, no compaction nor task the client did not declare"
    );

    let updates = load(json!({}));
    assert!(
        updates
            .iter()
            .all(|m| m["params"]["sessionId"] == session.as_str()),
        "nothing of the child's own"
    );
    let calls: Vec<&Value> = updates
        .iter()
        .map(|m| &m["params"]["update"])
        .filter(|u| u["toolCallId"] == "acpj-subagent-sub-child-1")
        .collect();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert_eq!(
        (
            &calls[0]["sessionUpdate"],
            &calls[0]["title"],
            &calls[0]["status"]
        ),
        (
            &json!("tool_call"),
            &json!("Explore the task"),
            &json!("in_progress")
        )
    );
    assert_eq!(
        calls[1]["content"][0]["content"]["text"],
        "Found 2 TODOs in a.rs."
    );
    assert_eq!(calls[2]["status"], "completed");
    let schema: Value = serde_json::from_str(include_str!("../schema/acp-v1.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    for update in &updates {
        assert!(
            validator.is_valid(update),
            "the parent's view is plain v1: {update}"
        );
    }
}

#[test]
fn a_tail_load_replays_the_last_turns_after_a_line_on_what_it_left_out() {
    let store = tempfile::tempdir().unwrap();
    let session = record(store.path(), 3);
    let mut client = TestClient::spawn(&proxied(store.path(), &scripted("subagents")));
    initialize(&mut client, json!({"subagents": {}}));
    let before = client.received.len();
    let answer = client.request(
        "session/load",
        json!({"sessionId": session, "cwd": "/w", "mcpServers": [],
            "_meta": {"acpJournal": {"tail": {"turns": 1}}}}),
    );
    assert!(answer.get("result").is_some(), "{answer}");
    let updates: Vec<Value> = client.received[before..]
        .iter()
        .filter_map(|r| r.json.clone())
        .filter(|m| m["method"] == "session/update")
        .map(|m| m["params"]["update"].clone())
        .collect();
    let first = &updates[0];
    assert_eq!(first["sessionUpdate"], "agent_message_chunk");
    let said = first["content"]["text"].as_str().unwrap();
    assert!(
        said.starts_with("[acp-journal replayed the last 1 of 3 turns: 2 earlier turns ("),
        "{said}"
    );
    assert_eq!(first["_meta"]["acpJournal"]["tail"]["turns"], 2);
    let prompts: Vec<&str> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "user_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(prompts, ["find the TODOs, take 3"]);
    let announced: Vec<&Value> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "subagent_update")
        .map(|u| &u["sessionId"])
        .collect();
    assert_eq!(announced, [&json!("sub-child-3"), &json!("sub-child-3")]);
    // The session goes on, on a new agent session told every turn, not only the tail.
    let answer = client.prompt(&session, "and now?");
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    client.finish();
    let sent = read_store(store.path())
        .into_iter()
        .flat_map(|(_, _, records)| records)
        .find_map(|r| (r["event"]["type"] == "reprimed").then(|| r["event"]["sent"].to_string()))
        .expect("the first prompt after the load carries the transcript");
    assert!(sent.contains("take 1") && sent.contains("take 3"), "{sent}");
}

#[test]
fn every_reader_shows_the_subagent_its_tasks_the_compaction_and_the_notice() {
    let dir = root().join("journals/scripted-subagents");
    let dir = dir.to_str().unwrap();
    let run = |args: &[&str]| {
        let (code, out, err) = run_cli(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        out
    };
    let show = run(&["show", "--journal-dir", dir, "sub-session"]);
    // `watch` of a closed session: what it recorded, as it would have followed it live.
    let watched = run(&["watch", "--journal-dir", dir, "sub-session"]);
    let markdown = run(&[
        "export",
        "--journal-dir",
        dir,
        "sub-session",
        "--format",
        "markdown",
    ]);
    let html = run(&[
        "export",
        "--journal-dir",
        dir,
        "sub-session",
        "--format",
        "html",
    ]);
    for out in [&show, &markdown, &watched] {
        for line in [
            "⇢ subagent Explore the task (general-purpose): running",
            "┌ Explore the task",
            "│ ⏺ Grep TODO [search] pending",
            "│ Found 2 TODOs in a.rs.",
            "✉ Explore the task → the session: Found 2 TODOs in a.rs.",
            "⇠ subagent Explore the task: end_turn (",
            "⧗ task cargo build: completed — built",
            "── compaction completed",
            "Earlier: the user asked for the TODOs.",
            "! info notice (not part of the history): Context compacted: older turns summarized",
            "── context: 1200 / 200000 tokens, 0.01 USD",
        ] {
            assert!(out.contains(line), "{line:?} missing in:\n{out}");
        }
    }
    for part in [
        "<div class=\"child\" data-session=\"sub-child-1\"",
        "<div class=\"child-title\">Explore the task</div>",
        "<div class=\"subagent\">⇠ subagent Explore the task: end_turn (",
        "<div class=\"task\">⧗ task cargo build: completed — built</div>",
        "<div class=\"notice\">",
    ] {
        assert!(html.contains(part), "{part:?} missing in the HTML");
    }

    let otlp = run(&[
        "export",
        "--journal-dir",
        dir,
        "sub-session",
        "--format",
        "otlp",
    ]);
    let otlp: Value = serde_json::from_str(&otlp).unwrap();
    let spans: Vec<&Value> = otlp["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    let named = |name: &str| -> Vec<&Value> {
        spans
            .iter()
            .copied()
            .filter(|s| s["name"] == name)
            .collect()
    };
    let turns = named("invoke_agent");
    let subagents = named("invoke_agent Explore the task");
    assert_eq!((turns.len(), subagents.len()), (2, 2));
    for (turn, sub) in turns.iter().zip(&subagents) {
        assert_eq!(sub["parentSpanId"], turn["spanId"], "under its turn");
        let grep = named("execute_tool Grep TODO")
            .into_iter()
            .find(|t| t["parentSpanId"] == sub["spanId"]);
        assert!(grep.is_some(), "the subagent's tool call under it");
    }

    let (code, found, _) = run_cli(&["search", "--journal-dir", dir, "TODOs in a.rs"]);
    assert_eq!(code, 0);
    assert!(
        found.contains("sub-session  turn 1  agent  subagent sub-child-1  …"),
        "{found}"
    );
    let stats = run(&["stats", "--journal-dir", dir]);
    assert!(
        stats.contains("344 tokens: 240 in the sessions' own turns, 104 in their subagents' work"),
        "{stats}"
    );
}
