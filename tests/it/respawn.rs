//! Sessions that outlive their agent, through the built binary with real peers: the agent is
//! killed with SIGKILL from outside, the proxy restarts it and restores the session on the next
//! prompt.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{Peers, TestClient, proxied, read_store};

/// The agent process the proxy `proxy` runs now (its child), waiting up to 10 s for one other
/// than `not`.
pub(crate) fn agent_pid(proxy: u32, not: Option<i32>) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let children = std::fs::read_to_string(format!("/proc/{proxy}/task/{proxy}/children"))
            .unwrap_or_default();
        if let Some(pid) = children
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
            .find(|p| Some(*p) != not)
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "no agent process under {proxy}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn kill9(pid: i32) {
    // SAFETY: a plain kill(2) of a process this test started (through the proxy).
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

/// The text of every agent message chunk received after index `from`.
fn agent_texts(client: &TestClient, from: usize) -> String {
    client.received[from..]
        .iter()
        .filter_map(|r| r.json.as_ref())
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every response the client received answers a request it sent.
fn only_expected_ids(client: &TestClient) {
    let sent: Vec<Value> = client
        .sent
        .iter()
        .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
        .filter(|m| m.get("method").is_some())
        .filter_map(|m| m.get("id").cloned())
        .collect();
    for r in &client.received {
        let Some(m) = &r.json else { continue };
        if m.get("method").is_none() {
            assert!(sent.contains(&m["id"]), "unexpected response id: {m}");
        }
    }
}

fn killed_between_prompts(agent: Vec<String>, echoes: bool) {
    let store = tempfile::tempdir().unwrap();
    let mut client = TestClient::spawn(&proxied(store.path(), &agent));
    let proxy = client.child.id();
    let session = client.start_session("/tmp");
    assert!(
        client
            .prompt(&session, "first question")
            .get("result")
            .is_some()
    );
    let mut pid = agent_pid(proxy, None);
    for round in 1..=2 {
        kill9(pid);
        pid = agent_pid(proxy, Some(pid));
        let before = client.received.len();
        let answer = client.prompt(&session, &format!("question after kill {round}"));
        assert!(answer.get("result").is_some(), "round {round}: {answer}");
        if echoes {
            let echoed = agent_texts(&client, before);
            assert!(
                echoed.contains("Earlier turns") && echoed.contains("first question"),
                "round {round}: the new agent has the conversation: {echoed}"
            );
        }
        for r in &client.received[before..] {
            if let Some(m) = &r.json
                && m["method"] == "session/update"
            {
                assert_eq!(m["params"]["sessionId"], session.as_str());
            }
        }
    }
    only_expected_ids(&client);
    let (code, _) = client.finish();
    assert_eq!(code, 0);
    // The journal tells the story: two restarts, and how the session came back each time.
    let journal = read_store(store.path());
    let events: Vec<String> = journal
        .iter()
        .flat_map(|(_, _, records)| records)
        .filter_map(|r| r["event"]["type"].as_str().map(str::to_string))
        .collect();
    let count = |t: &str| events.iter().filter(|e| *e == t).count();
    assert_eq!(count("session_restored"), 2, "{events:?}");
    assert!(count("agent_restarted") >= 2, "{events:?}");
}

#[test]
fn python_echo_agent_killed_twice_keeps_its_session() {
    killed_between_prompts(Peers::get().py_echo_agent(), true);
}

#[test]
fn python_example_agent_killed_twice_keeps_its_session() {
    killed_between_prompts(Peers::get().py_agent(), false);
}

#[test]
fn typescript_example_agent_killed_twice_keeps_its_session() {
    killed_between_prompts(Peers::get().ts_agent(), false);
}
