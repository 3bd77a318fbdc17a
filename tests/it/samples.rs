//! The sample journals in `journals/`, recorded from the reference peers by
//! `scripts/record-samples.sh`: they must stay readable by this build (format stability), and a
//! recorded session must load into a fresh proxy.

use std::path::PathBuf;

use acp_journal::journal::{SegmentReader, Tail};

use crate::util::{Peers, TestClient, proxied, root, run_cli, sample_copy};

fn samples() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root().join("journals"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 2, "sample journals are missing");
    dirs
}

#[test]
fn sample_journals_read_clean_with_this_build() {
    for dir in samples() {
        let (code, out, _) = run_cli(&["verify", "--journal-dir", dir.to_str().unwrap()]);
        assert_eq!(code, 0, "{out}");
        for (path, ..) in crate::util::read_store(&dir) {
            let mut reader = SegmentReader::open(&path).unwrap();
            assert!(reader.header().initialize.is_some() || reader.header().session.is_none());
            assert!(reader.by_ref().count() > 2);
            assert_eq!(reader.tail(), Some(&Tail::Clean));
        }
    }
}

#[test]
fn a_recorded_session_loads_into_a_fresh_proxy() {
    let store = sample_copy("python-echo-agent");
    let (_, out, _) = run_cli(&[
        "list",
        "--journal-dir",
        store.path().to_str().unwrap(),
        "--json",
    ]);
    let list: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    let session = list[0]["session"].as_str().unwrap().to_string();

    let mut client = TestClient::spawn(&proxied(store.path(), &Peers::get().py_echo_agent()));
    client.initialize();
    let (updates, response) = client.load(&session, "/tmp");
    assert!(response.get("result").is_some(), "{response}");
    let users = updates
        .iter()
        .filter(|u| u["params"]["update"]["sessionUpdate"] == "user_message_chunk")
        .count();
    let agents = updates
        .iter()
        .filter(|u| u["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .count();
    assert_eq!((users, agents), (2, 2), "two recorded turns, each echoed");
    assert!(client.prompt(&session, "and now?").get("result").is_some());
    client.finish();
}

#[test]
fn show_renders_a_recorded_session_as_a_transcript() {
    let dir = root().join("journals/typescript-agent");
    let dir = dir.to_str().unwrap();
    let (_, out, _) = run_cli(&["list", "--journal-dir", dir, "--json"]);
    let list: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    let session = list[0]["session"].as_str().unwrap();
    let (code, out, err) = run_cli(&["show", "--journal-dir", dir, &session[..6]]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains('\x1b'), "no colour when not on a terminal");
    for expected in [
        "❯ Add a friendly greeting to hello.txt",
        "I'll help you with that. Let me start by reading some files to understand the current situation.\n",
        "⏺ Reading project files [read] pending /project/README.md",
        "⏺ Reading project files completed",
        "? permission for Modifying critical configuration file: allow",
        "── end_turn (",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in:\n{out}");
    }
    assert_eq!(out.matches("── end_turn").count(), 2, "two turns");
    let (_, raw, _) = run_cli(&["show", "--journal-dir", dir, session, "--raw"]);
    assert!(raw.lines().any(|l| l.contains(
        "agent → client  {\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"session/request_permission\""
    )));
    let (_, json, _) = run_cli(&["show", "--journal-dir", dir, session, "--json"]);
    for line in json.lines() {
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(record["seq"].is_u64());
    }
}
