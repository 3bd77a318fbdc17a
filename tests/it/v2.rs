//! ACP v2 through the built binary, with peers we did not write: the Rust SDK's v2 example
//! agent (`simple_agent_v2`, sessions in memory) and one-shot client (`v2_one_shot_client`),
//! and the TypeScript SDK's `experimental/v2` client API (`tests/agents/ts_v2_client.mjs`).
//! claude-agent-acp in v2 is in `adapters.rs`.

use std::process::Command;

use serde_json::Value;

use crate::respawn::{agent_pid, kill9_and_await_the_next};
use crate::util::{
    Peers, TestClient, journaled, proxied, proxied_with, run_cli_store, v2_user_texts,
};

/// Run our TypeScript v2 client (`args`) against the proxy in front of `agent`; its JSON.
fn ts_v2(store: &std::path::Path, args: &[&str], agent: &[String]) -> Value {
    let mut argv = Peers::get().ts_v2_client();
    argv.extend(args.iter().map(|a| a.to_string()));
    argv.push("--".into());
    argv.extend(proxied(store, agent));
    let out = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{argv:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the client's JSON")
}

/// The Rust SDK's v2 one-shot client sends `prompt` to the agent `command` starts and waits for
/// the agent's idle state (its stderr says so); what it printed (the agent's text).
fn one_shot(command: &str, prompt: &str) -> String {
    let out = Command::new(Peers::get().rust_v2_client())
        .args(["--command", command, prompt])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("Session is idle: Some(EndTurn)"),
        "the client saw the turn end with the agent's idle state: {err}"
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn the_rust_v2_one_shot_client_converses_through_the_proxy_and_show_tells_the_turn() {
    let store = tempfile::tempdir().unwrap();
    let command = proxied(store.path(), &Peers::get().rust_v2_agent()).join(" ");
    assert_eq!(
        one_shot(&command, "what ends a v2 turn?"),
        "Echo: what ends a v2 turn?"
    );
    let (_, shown, _) = run_cli_store(store.path(), &["show", "echo-session-1"]);
    assert!(
        shown.contains("❯ what ends a v2 turn?\nEcho: what ends a v2 turn?\n── end_turn"),
        "{shown}"
    );
    let (_, list, _) = run_cli_store(store.path(), &["list", "--json"]);
    let rows: Vec<Value> = serde_json::from_str(&list).unwrap();
    assert_eq!(rows[0]["turns"], 1, "{list}");
    assert_eq!(rows[0]["title"], "what ends a v2 turn?", "{list}");
}

#[test]
fn with_load_off_a_v2_connection_crosses_byte_for_byte() {
    let store = tempfile::tempdir().unwrap();
    let cmd = proxied_with(
        store.path(),
        &["--load", "off"],
        &Peers::get().rust_v2_agent(),
    );
    let mut client = TestClient::spawn(&cmd);
    client.initialize_v2();
    let session = client.new_session("/tmp");
    let (said, stop) = client.turn_v2(&session, "hi");
    assert_eq!(
        (said.as_str(), stop.as_str()),
        ("Echo: hi", Some("end_turn"))
    );
    let (_, received) = client.finish();
    let from_agent = journaled(store.path(), acp_journal::wire::Side::Agent);
    for line in &received {
        assert!(
            from_agent.contains(&line.raw),
            "a line the agent did not send: {}",
            String::from_utf8_lossy(&line.raw)
        );
    }
}

#[test]
fn an_in_memory_v2_agents_session_resumes_from_the_journal_in_a_new_process() {
    let store = tempfile::tempdir().unwrap();
    let agent = Peers::get().rust_v2_agent();
    let first = ts_v2(
        store.path(),
        &["converse", "/tmp", "first task", "second task"],
        &agent,
    );
    assert_eq!(
        first["turns"],
        serde_json::json!(["Echo: first task", "Echo: second task"])
    );
    let session = first["session"].as_str().unwrap();
    // A new proxy, a new agent process that has no sessions: the TypeScript client resumes
    // it from the start and prompts it.
    let resumed = ts_v2(
        store.path(),
        &["resume", "/tmp", session, "third task"],
        &agent,
    );
    let replayed: Vec<Value> = resumed["replayed"].as_array().unwrap().clone();
    assert_eq!(v2_user_texts(&replayed), ["first task", "second task"]);
    let third = resumed["turns"][0].as_str().unwrap();
    assert!(
        third.contains("User: first task") && third.ends_with("third task"),
        "the new agent session is told the conversation: {third}"
    );
    let (_, shown, _) = run_cli_store(store.path(), &["show", session]);
    assert!(
        shown.contains("session/resume failed on the agent"),
        "{shown}"
    );
    assert_eq!(shown.matches("── end_turn").count(), 3, "{shown}");
}

#[test]
fn a_v2_in_memory_agent_killed_with_sigkill_is_restarted_and_the_session_goes_on() {
    let store = tempfile::tempdir().unwrap();
    let mut client = TestClient::spawn(&proxied(store.path(), &Peers::get().rust_v2_agent()));
    client.initialize_v2();
    let session = client.new_session("/tmp");
    let (said, _) = client.turn_v2(&session, "before the crash");
    assert_eq!(said, "Echo: before the crash");
    let proxy = client.child.id();
    kill9_and_await_the_next(proxy, agent_pid(proxy, None));
    // The restarted agent has no sessions: the session is brought up on a new one, which is
    // told the conversation with the next prompt.
    let (said, stop) = client.turn_v2(&session, "after the crash");
    assert_eq!(stop, "end_turn");
    assert!(
        said.contains("User: before the crash") && said.ends_with("after the crash"),
        "{said}"
    );
    client.finish();
    let (_, shown, _) = run_cli_store(store.path(), &["show", &session]);
    assert!(
        shown.contains("the agent exited (status")
            && shown.contains("restored on the restarted agent"),
        "{shown}"
    );
}

#[test]
fn a_v2_session_list_shows_the_sessions_a_new_agent_process_lost() {
    let store = tempfile::tempdir().unwrap();
    let agent = Peers::get().rust_v2_agent();
    let mut client = TestClient::spawn(&proxied(store.path(), &agent));
    client.initialize_v2();
    let old = client.new_session("/tmp");
    client.turn_v2(&old, "remember me");
    client.finish();
    // A new agent process has no sessions (it keeps them in memory): the list still has the
    // journal's, merged into the agent's own answer.
    let mut client = TestClient::spawn(&proxied(store.path(), &agent));
    client.initialize_v2();
    let list = client.request("session/list", serde_json::json!({"cwd": "/tmp"}));
    let rows = list["result"]["sessions"].as_array().expect("sessions");
    assert_eq!(rows.len(), 1, "{list}");
    assert_eq!(rows[0]["sessionId"], old.as_str());
    assert_eq!(rows[0]["cwd"], "/tmp");
    assert_eq!(rows[0]["title"], "remember me");
    client.finish();
}

#[test]
fn a_v2_recording_reruns_against_the_agent_turn_by_turn_and_compares_clean() {
    let store = crate::util::sample_copy("rust-v2-agent");
    let mut argv = vec!["rerun", "echo-session-1", "--"];
    let agent = Peers::get().rust_v2_agent();
    argv.extend(agent.iter().map(String::as_str));
    let (code, out, err) = run_cli_store(store.path(), &argv);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("0 differences"), "{out}");
    // (Each turn's end is the agent's idle state: a rerun that moved on when the prompt was
    // only taken would differ in how its turn ended.)
}

#[test]
fn a_v2_recording_replays_as_the_agent_to_the_rust_v2_client() {
    let store = crate::util::sample_copy("rust-v2-agent");
    let command = format!(
        "{} replay --journal-dir {} echo-session-1",
        crate::util::bin().display(),
        store.path().display()
    );
    assert_eq!(
        one_shot(&command, "What ends a turn in ACP v2?"),
        "Echo: What ends a turn in ACP v2?"
    );
}

#[test]
fn an_agent_that_reuses_session_ids_across_processes_never_mixes_two_conversations() {
    let store = tempfile::tempdir().unwrap();
    let agent = Peers::get().rust_v2_agent();
    let mut ids = Vec::new();
    for text in ["the first conversation", "the second conversation"] {
        let mut client = TestClient::spawn(&proxied(store.path(), &agent));
        client.initialize_v2();
        let session = client.new_session("/tmp");
        let (said, _) = client.turn_v2(&session, text);
        assert_eq!(said, format!("Echo: {text}"));
        client.finish();
        ids.push(session);
    }
    // The agent called both `echo-session-1`; the editor saw two sessions.
    assert_eq!(ids, ["echo-session-1", "echo-session-1~2"]);
    for (id, text) in ids
        .iter()
        .zip(["the first conversation", "the second conversation"])
    {
        let (_, shown, _) = run_cli_store(store.path(), &["show", id]);
        assert!(shown.contains(text), "{shown}");
        assert_eq!(
            shown.matches("❯ ").count(),
            1,
            "one conversation each: {shown}"
        );
    }
    // Each resumes (from the journal: a new process has neither) with its own history.
    let mut client = TestClient::spawn(&proxied(store.path(), &agent));
    client.initialize_v2();
    let (updates, answer) = client.resume_v2(&ids[1], "/tmp");
    assert!(answer.get("result").is_some(), "{answer}");
    assert_eq!(v2_user_texts(&updates), ["the second conversation"]);
    client.finish();
}
