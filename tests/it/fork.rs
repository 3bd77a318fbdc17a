//! `fork` through the built binary: a session recorded with the TypeScript example agent,
//! forked at turn 1, loaded through the proxy in front of the Python echo agent.

use std::path::Path;

use serde_json::Value;

use crate::util::{Peers, TestClient, proxied, run_cli_store, texts};

/// Load `session` through the proxy and prompt once; returns the replayed updates and the
/// live messages of the prompt.
fn load_and_prompt(
    store: &Path,
    agent: &[String],
    session: &str,
    next: &str,
) -> (Vec<Value>, Vec<Value>) {
    let mut client = TestClient::spawn(&proxied(store, agent));
    client.initialize();
    let (updates, response) = client.load(session, "/tmp");
    assert!(response.get("result").is_some(), "load failed: {response}");
    let before = client.received.len();
    let answer = client.prompt(session, next);
    assert!(answer.get("result").is_some(), "the prompt works: {answer}");
    let live = client.received[before..]
        .iter()
        .filter_map(|r| r.json.clone())
        .collect();
    client.finish();
    (updates, live)
}

#[test]
fn a_fork_at_turn_one_loads_with_turn_one_only_and_the_original_stays_whole() {
    let peers = Peers::get();
    let store = tempfile::tempdir().unwrap();
    let ts = peers.ts_agent();
    let mut client = TestClient::spawn(&proxied(store.path(), &ts));
    let parent = client.start_session("/tmp");
    for p in ["alpha question", "bravo question"] {
        assert!(client.prompt(&parent, p).get("result").is_some());
    }
    client.finish();

    let (code, out, err) = run_cli_store(store.path(), &["fork", &parent[..8], "--at-turn", "1"]);
    assert_eq!(code, 0, "{err}");
    let fork = out.trim().to_string();
    assert_eq!(out.lines().count(), 1, "{out}");
    assert_eq!(fork.len(), 32);
    assert!(
        fork.bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
    );
    assert!(
        err.contains(&format!("forked session {parent} into {fork}: 1 turn,")),
        "{err}"
    );

    // Listed, verifiable, and `show` says where it came from.
    let (code, list, _) = run_cli_store(store.path(), &["list"]);
    assert_eq!(code, 0);
    assert!(
        list.contains(&fork[..6]) && list.contains(&parent[..6]),
        "{list}"
    );
    let (code, out, _) = run_cli_store(store.path(), &["verify"]);
    assert_eq!(code, 0, "{out}");
    let (code, shown, _) = run_cli_store(store.path(), &["show", &fork]);
    assert_eq!(code, 0);
    assert!(
        shown.contains(&format!("forked from session {parent} (1 turn kept)")),
        "{shown}"
    );

    // The fork replays turn 1 under its own ID; the next prompt is re-primed with turn 1 only.
    let echo = peers.py_echo_agent();
    let (updates, live) = load_and_prompt(store.path(), &echo, &fork, "charlie question");
    for u in &updates {
        assert_eq!(u["params"]["sessionId"], fork.as_str(), "{u}");
    }
    let replayed = texts(&updates);
    let users: Vec<&String> = replayed
        .iter()
        .filter(|t| t.starts_with("user: "))
        .collect();
    assert_eq!(users, ["user: alpha question"]);
    assert!(replayed.iter().any(|t| t.starts_with("agent: ")));
    assert!(!replayed.join("\n").contains("bravo"), "{replayed:?}");
    let echoed = texts(&live).join("\n");
    assert!(
        echoed.contains("Earlier turns") && echoed.contains("alpha question"),
        "{echoed}"
    );
    assert!(!echoed.contains("bravo question"), "{echoed}");

    // The original still loads whole.
    let (updates, _) = load_and_prompt(store.path(), &echo, &parent, "delta question");
    let users: Vec<String> = texts(&updates)
        .into_iter()
        .filter(|t| t.starts_with("user: "))
        .collect();
    assert_eq!(users, ["user: alpha question", "user: bravo question"]);

    // Errors name the problem.
    let (code, _, err) = run_cli_store(store.path(), &["fork", &parent, "--at-turn", "9"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("has 3 prompt turn(s); cannot fork at turn 9"),
        "{err}"
    );
    let (code, _, err) = run_cli_store(store.path(), &["fork", "nosuchsession"]);
    assert_eq!(code, 2);
    assert!(err.contains("no session \"nosuchsession\""), "{err}");
}
