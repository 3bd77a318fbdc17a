//! Session loading for agents that lack it, through the built binary with real peers: record,
//! restart, load, continue; restarts in a row; session/list; agents with a lossy or a failing
//! native load.

use std::path::Path;

use serde_json::Value;

use crate::util::{Peers, TestClient, proxied, proxied_with, run_cli, texts};

/// Record a session with two prompts; returns its ID.
fn record(store: &Path, agent: &[String], prompts: &[&str]) -> String {
    let mut client = TestClient::spawn(&proxied(store, agent));
    let session = client.start_session("/tmp");
    for p in prompts {
        assert!(client.prompt(&session, p).get("result").is_some());
    }
    client.finish();
    session
}

/// Restart, load, check the replay, prompt once more. Returns the replayed texts.
fn load_and_continue(
    store: &Path,
    agent: &[String],
    session: &str,
    next: &str,
) -> (Vec<String>, Vec<Value>) {
    let mut client = TestClient::spawn(&proxied(store, agent));
    let init = client.initialize();
    assert_eq!(
        init["result"]["agentCapabilities"]["loadSession"], true,
        "advertised by the proxy"
    );
    let (updates, response) = client.load(session, "/tmp");
    assert!(response.get("result").is_some(), "load failed: {response}");
    let replayed = texts(&updates);
    let before = client.received.len();
    let answer = client.prompt(session, next);
    assert!(
        answer.get("result").is_some(),
        "the next prompt works: {answer}"
    );
    let live: Vec<Value> = client.received[before..]
        .iter()
        .filter_map(|r| r.json.clone())
        .collect();
    for m in &live {
        if m["method"] == "session/update" {
            assert_eq!(
                m["params"]["sessionId"], session,
                "the client keeps its session ID"
            );
        }
    }
    client.finish();
    (replayed, live)
}

fn check_peer(agent: Vec<String>, echoes: bool) {
    let store = tempfile::tempdir().unwrap();
    let session = record(store.path(), &agent, &["first question", "second question"]);
    let (replayed, live) = load_and_continue(store.path(), &agent, &session, "third question");
    // The full history arrived before the response, user messages synthesized from the prompts.
    let users: Vec<&String> = replayed
        .iter()
        .filter(|t| t.starts_with("user: "))
        .collect();
    assert_eq!(users, ["user: first question", "user: second question"]);
    assert!(replayed.iter().any(|t| t.starts_with("agent: ")));
    // The agent received the re-prime (the echo agents say so themselves).
    if echoes {
        let echoed = texts(&live).join("\n");
        assert!(
            echoed.contains("Earlier turns") && echoed.contains("first question"),
            "{echoed}"
        );
    }
    let (code, out, _) = run_cli(&["verify", "--journal-dir", store.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    // The journal says exactly what was sent.
    let journal = crate::util::read_store(store.path());
    let reprimed = journal
        .iter()
        .flat_map(|(_, _, r)| r)
        .any(|r| r["event"]["type"] == "reprimed");
    assert!(reprimed);
    // session/list from the journals shows the session with its cwd.
    let mut client = TestClient::spawn(&proxied(store.path(), &agent));
    client.initialize();
    let list = client.request("session/list", serde_json::json!({}));
    let sessions = list["result"]["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "one client-facing session: {list}");
    assert_eq!(sessions[0]["sessionId"], session.as_str());
    assert_eq!(sessions[0]["cwd"], "/tmp");
    client.finish();
}

#[test]
fn python_echo_agent_gains_session_loading() {
    check_peer(Peers::get().py_echo_agent(), true);
}

#[test]
fn python_example_agent_gains_session_loading() {
    check_peer(Peers::get().py_agent(), true);
}

#[test]
fn typescript_example_agent_gains_session_loading() {
    let peers = Peers::get();
    let store = tempfile::tempdir().unwrap();
    let agent = peers.ts_agent();
    let session = record(store.path(), &agent, &["change the config"]);
    let (replayed, _) = load_and_continue(store.path(), &agent, &session, "again");
    assert_eq!(
        replayed.iter().filter(|t| t.starts_with("user: ")).count(),
        1
    );
    assert_eq!(
        replayed.iter().filter(|t| t.starts_with("agent: ")).count(),
        3
    );
}

#[test]
fn three_restarts_keep_one_session_with_every_turn_once_in_order() {
    let agent = Peers::get().py_echo_agent();
    let store = tempfile::tempdir().unwrap();
    let session = record(store.path(), &agent, &["turn 1"]);
    for n in 2..=4 {
        let (replayed, _) = load_and_continue(store.path(), &agent, &session, &format!("turn {n}"));
        let users: Vec<String> = replayed
            .iter()
            .filter(|t| t.starts_with("user: "))
            .cloned()
            .collect();
        let expected: Vec<String> = (1..n).map(|i| format!("user: turn {i}")).collect();
        assert_eq!(users, expected, "restart {n}");
        // Each echoed answer once (the re-prime transcript is never shown as a user message).
        for i in 1..n {
            let answers = replayed
                .iter()
                .filter(|t| *t == &format!("agent: turn {i}"))
                .count();
            assert_eq!(answers, 1, "restart {n}, turn {i}: {replayed:?}");
        }
    }
}

#[test]
fn agents_with_a_lossy_native_load() {
    let agent = crate::util::scripted("lossy");
    let store = tempfile::tempdir().unwrap();
    let session = record(store.path(), &agent, &["one", "two"]);

    // auto: the agent's own load passes through.
    let mut client = TestClient::spawn(&proxied(store.path(), &agent));
    client.initialize();
    let (updates, _) = client.load(&session, "/tmp");
    assert_eq!(texts(&updates), ["agent: lossy replay"]);
    client.finish();

    // --load journal: the journal's replay instead, and never the agent's.
    let mut client = TestClient::spawn(&proxied_with(store.path(), &["--load", "journal"], &agent));
    client.initialize();
    let (updates, response) = client.load(&session, "/tmp");
    assert!(response.get("result").is_some(), "{response}");
    assert_eq!(
        texts(&updates),
        [
            "user: one",
            "agent: chunk 1 x",
            "agent: chunk 2 xx",
            "user: two",
            "agent: chunk 1 x",
            "agent: chunk 2 xx"
        ]
    );
    let after = client.prompt(&session, "three");
    assert!(after.get("result").is_some());
    let (_, received) = client.finish();
    assert!(
        !received
            .iter()
            .any(|r| String::from_utf8_lossy(&r.raw).contains("lossy replay"))
    );
}

/// An agent whose own `session/load` fails (as gemini-cli 0.61's does) is served from the
/// journal in `auto` and `journal` modes, and the next prompt carries the history.
#[test]
fn a_failing_native_load_is_served_from_the_journal() {
    let agent = crate::util::scripted("forgetful");
    for options in [&["--load", "auto"], &["--load", "journal"]] {
        let store = tempfile::tempdir().unwrap();
        let session = record(store.path(), &agent, &["one", "two"]);
        let mut client = TestClient::spawn(&proxied_with(store.path(), options, &agent));
        client.initialize();
        let (updates, response) = client.load(&session, "/tmp");
        assert!(response.get("result").is_some(), "{options:?}: {response}");
        assert_eq!(
            texts(&updates),
            [
                "user: one",
                "agent: chunk 1 x",
                "agent: chunk 2 xx",
                "agent: you said: one",
                "user: two",
                "agent: chunk 1 x",
                "agent: chunk 2 xx",
                "agent: you said: two"
            ],
            "{options:?}: the journal's replay, once"
        );
        let before = client.received.len();
        let answer = client.prompt(&session, "three");
        assert!(answer.get("result").is_some(), "{answer}");
        let live: Vec<Value> = client.received[before..]
            .iter()
            .filter_map(|r| r.json.clone())
            .collect();
        let echoed = texts(&live).join("\n");
        assert!(
            echoed.contains("Earlier turns") && echoed.contains("User: one"),
            "{options:?}: re-primed: {echoed}"
        );
        let (_, received) = client.finish();
        for text in ["partial replay", "No previous sessions"] {
            assert!(
                !received
                    .iter()
                    .any(|r| String::from_utf8_lossy(&r.raw).contains(text)),
                "{options:?}: {text}"
            );
        }
        // The agent's refusal is in the journal.
        let journal = crate::util::read_store(store.path());
        assert!(
            journal
                .iter()
                .flat_map(|(_, _, r)| r)
                .any(|r| r.to_string().contains("No previous sessions")),
            "{options:?}"
        );
        // The timeline says so in one line, not as a failed load: the editor got a good one.
        let (_, shown, _) = crate::util::run_cli_store(store.path(), &["show", &session]);
        assert!(!shown.contains("! session/load failed"), "{shown}");
        if options[1] == "auto" {
            let line = shown
                .lines()
                .find(|l| l.contains("No previous sessions"))
                .expect(&shown);
            assert!(
                line.contains("session/load failed on the agent")
                    && line.contains("loaded from the journal (8 updates replayed)"),
                "{line}"
            );
        }
    }
}

#[test]
fn delete_hides_a_session_from_lists_and_close_is_answered() {
    let agent = Peers::get().py_echo_agent();
    let store = tempfile::tempdir().unwrap();
    let session = record(store.path(), &agent, &["hello"]);
    let mut client = TestClient::spawn(&proxied(store.path(), &agent));
    let init = client.initialize();
    let caps = &init["result"]["agentCapabilities"]["sessionCapabilities"];
    assert!(
        caps["close"].is_object() && caps["delete"].is_object(),
        "{init}"
    );
    let closed = client.request("session/close", serde_json::json!({"sessionId": session}));
    assert_eq!(closed["result"], serde_json::json!({}));
    let deleted = client.request("session/delete", serde_json::json!({"sessionId": session}));
    assert_eq!(deleted["result"], serde_json::json!({}));
    let list = client.request("session/list", serde_json::json!({}));
    assert_eq!(list["result"]["sessions"], serde_json::json!([]));
    client.finish();
    let (_, out, _) = run_cli(&[
        "list",
        "--journal-dir",
        store.path().to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(
        out.trim(),
        "[]",
        "hidden from list too; the journal stays on disk"
    );
    assert!(
        store
            .path()
            .join("sessions")
            .read_dir()
            .unwrap()
            .next()
            .is_some()
    );
}
