//! The proxy in front of real ACP implementations we did not write (the Python and TypeScript
//! SDK examples, pinned by scripts/install-peers.sh): the client sees exactly what it would see
//! without the proxy, and the journals hold every message of every session, in order.

use std::collections::BTreeMap;
use std::path::Path;

use acp_journal::journal::{Body, SegmentReader, Tail};

use acp_journal::wire::Side;
use serde_json::Value;

use crate::util::{Peers, TestClient, proxied_with, run_cli};

/// A client session script: two sessions, prompts interleaved between them.
fn script(client: &mut TestClient, prompts: &[&str]) -> Vec<String> {
    let first = client.start_session("/tmp");
    let second = client.new_session("/");
    for (i, text) in prompts.iter().enumerate() {
        let session = if i % 2 == 0 { &first } else { &second };
        let response = client.prompt(session, text);
        assert!(
            response.get("result").is_some(),
            "prompt failed: {response}"
        );
    }
    vec![first, second]
}

/// The received stream with each session ID replaced by its index, so two runs of an agent
/// that picks random IDs compare byte for byte.
fn normalized(received: &[crate::util::Received], sessions: &[String]) -> Vec<Vec<u8>> {
    received
        .iter()
        .map(|r| {
            let mut text = String::from_utf8(r.raw.clone()).expect("peers speak UTF-8");
            for (i, id) in sessions.iter().enumerate() {
                text = text.replace(&format!("\"{id}\""), &format!("\"<session {i}>\""));
            }
            text.into_bytes()
        })
        .collect()
}

/// Every record of every segment in the store: (header kind, session, records).
fn journal_records(store: &Path) -> Vec<(Option<String>, Vec<acp_journal::journal::Record>, Tail)> {
    let mut out = vec![];
    for (path, ..) in crate::util::read_store(store) {
        let mut reader = SegmentReader::open(&path).unwrap();
        let session = reader.header().session.clone();
        let records: Vec<_> = reader.by_ref().collect();
        out.push((session, records, reader.tail().unwrap().clone()));
    }
    out
}

/// The received stream of the direct run and of a proxied run with `options`.
fn compare(agent: &[String], prompts: &[&str], options: &[&str]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut direct = TestClient::spawn(agent);
    let direct_sessions = script(&mut direct, prompts);
    let (direct_code, direct_received) = direct.finish();
    let store = tempfile::tempdir().unwrap();
    let mut client = TestClient::spawn(&proxied_with(store.path(), options, agent));
    let sessions = script(&mut client, prompts);
    let (code, received) = client.finish();
    assert_eq!(code, direct_code, "the proxy exits with the agent's code");
    (
        normalized(&direct_received, &direct_sessions),
        normalized(&received, &sessions),
    )
}

fn assert_same_stream(a: &[Vec<u8>], b: &[Vec<u8>], skip: usize) {
    for (i, (x, y)) in a.iter().zip(b).enumerate().skip(skip) {
        assert_eq!(
            String::from_utf8_lossy(x),
            String::from_utf8_lossy(y),
            "message {i} differs between the direct and the proxied run"
        );
    }
    assert_eq!(a.len(), b.len(), "number of messages received");
}

fn check_against_peer(agent: Vec<String>, prompts: &[&str]) {
    // With session emulation on (the default), only the initialize response differs, and only
    // by the capabilities the proxy adds.
    let (direct, proxied_default) = compare(&agent, prompts, &[]);
    assert_same_stream(&direct, &proxied_default, 1);
    let mut original: Value = serde_json::from_slice(&direct[0]).unwrap();
    let mut seen: Value = serde_json::from_slice(&proxied_default[0]).unwrap();
    assert_eq!(seen["result"]["agentCapabilities"]["loadSession"], true);
    for v in [&mut original, &mut seen] {
        let result = v["result"].as_object_mut().unwrap();
        if let Some(caps) = result
            .get_mut("agentCapabilities")
            .and_then(Value::as_object_mut)
        {
            caps.remove("loadSession");
            caps.remove("sessionCapabilities");
            if caps.is_empty() {
                result.remove("agentCapabilities");
            }
        }
    }
    assert_eq!(
        original, seen,
        "nothing else in the initialize response changed"
    );

    // As a pure recorder the client-visible stream is identical, message for message, byte for
    // byte.
    let store = tempfile::tempdir().unwrap();
    let mut direct = TestClient::spawn(&agent);
    let direct_sessions = script(&mut direct, prompts);
    let (_, direct_received) = direct.finish();
    let mut client = TestClient::spawn(&proxied_with(store.path(), &["--load", "off"], &agent));
    let sessions = script(&mut client, prompts);
    let sent = client.sent.clone();
    let (_, received) = client.finish();
    assert_same_stream(
        &normalized(&direct_received, &direct_sessions),
        &normalized(&received, &sessions),
        0,
    );

    // The journals hold every byte sent and received, in order, once (the session/new
    // request is copied into its session: same seq, counted once).
    let journals = journal_records(store.path());
    let mut by_seq: BTreeMap<u64, (Side, Vec<u8>)> = BTreeMap::new();
    for (_, records, tail) in &journals {
        assert_eq!(tail, &Tail::Clean);
        for r in records {
            if let Body::Message { from, payload } = &r.body {
                assert!(!payload.redacted);
                by_seq.insert(r.seq, (*from, payload.wire()));
            }
        }
    }
    let from = |side| -> Vec<Vec<u8>> {
        by_seq
            .values()
            .filter(|(s, _)| *s == side)
            .map(|(_, b)| b.clone())
            .collect()
    };
    assert_eq!(
        from(Side::Client),
        sent,
        "client→agent lines in the journals"
    );
    let got: Vec<Vec<u8>> = received.iter().map(|r| r.raw.clone()).collect();
    assert_eq!(from(Side::Agent), got, "agent→client lines in the journals");

    // Each session's journal holds its own traffic: every message naming it, every prompt
    // response, and the copies of the initialize exchange in its header.
    for id in &sessions {
        let (_, records, _) = journals
            .iter()
            .find(|(s, ..)| s.as_deref() == Some(id.as_str()))
            .unwrap_or_else(|| panic!("no journal for session {id}"));
        let msgs: Vec<Value> = records
            .iter()
            .filter_map(|r| match &r.body {
                Body::Message { payload, .. } => serde_json::from_slice(&payload.bytes).ok(),
                _ => None,
            })
            .collect();
        assert_eq!(
            msgs[0]["method"], "session/new",
            "the setup request comes first"
        );
        assert_eq!(msgs[1]["result"]["sessionId"], id.as_str());
        let naming = |m: &Value| m["params"]["sessionId"] == id.as_str();
        let all_naming = received
            .iter()
            .filter_map(|r| r.json.clone())
            .chain(sent.iter().filter_map(|l| serde_json::from_slice(l).ok()))
            .filter(naming)
            .count();
        assert_eq!(
            msgs.iter().filter(|m| naming(m)).count(),
            all_naming,
            "session {id}"
        );
        let prompts_sent = msgs
            .iter()
            .filter(|m| m["method"] == "session/prompt")
            .count();
        let stops = msgs
            .iter()
            .filter(|m| m["result"]["stopReason"].is_string())
            .count();
        assert_eq!(
            prompts_sent, stops,
            "every prompt and its response in session {id}"
        );
        let seqs: Vec<u64> = records.iter().map(|r| r.seq).collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "wire order");
    }

    // verify says clean; list shows both sessions with their cwd.
    let dir = store.path().to_str().unwrap();
    let (code, out, _) = run_cli(&["verify", "--journal-dir", dir]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.lines()
            .all(|l| l.starts_with("ok") && l.ends_with("clean")),
        "{out}"
    );
    let (_, out, _) = run_cli(&["list", "--journal-dir", dir, "--json"]);
    let list: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(list.len(), 2);
    for s in &list {
        let cwd = if s["session"] == sessions[0].as_str() {
            "/tmp"
        } else {
            "/"
        };
        assert_eq!(s["cwd"], cwd);
    }
}

#[test]
fn python_echo_agent() {
    let peers = Peers::get();
    check_against_peer(
        peers.py_echo_agent(),
        &["hello", "second session", "émoji ✓ \"quoted\"\nnewline"],
    );
}

#[test]
fn python_example_agent() {
    let peers = Peers::get();
    check_against_peer(peers.py_agent(), &["hello", "again"]);
}

#[test]
fn typescript_example_agent_with_permission_requests() {
    let peers = Peers::get();
    check_against_peer(peers.ts_agent(), &["change the config"]);
}
