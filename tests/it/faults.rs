//! Faults: kill -9, agent crash, client EOF, garbage and huge lines, hostile session IDs,
//! signals, an agent that cannot start.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use acp_journal::wire::Side;
use serde_json::json;

use crate::util::{TestClient, journaled, proxied, run_cli, scripted, wait_gone};

#[test]
fn kill_9_loses_nothing_the_client_received_and_the_agent_dies_too() {
    let store = tempfile::tempdir().unwrap();
    let pid_file = store.path().join("agent.pid");
    let mut client = TestClient::spawn_env(
        &proxied(&store.path().join("j"), &scripted("flood")),
        &[("AGENT_PID_FILE", &pid_file)],
    );
    client.start_session("/tmp");
    for _ in 0..2000 {
        client.recv().expect("flooding");
    }
    let agent_pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(client.child.id() as i32, libc::SIGKILL) };
    let _ = client.child.wait();
    // Drain what the proxy had already written to the pipe: the client received it.
    while client.recv().is_some() {}
    assert!(wait_gone(agent_pid), "the agent outlived the proxy");

    // A line cut by the kill is not a message the client received.
    let received: Vec<Vec<u8>> = client
        .received
        .iter()
        .map(|r| r.raw.clone())
        .filter(|raw| raw.ends_with(b"\n"))
        .collect();
    let journal = journaled(&store.path().join("j"), Side::Agent);
    assert!(received.len() > 2000);
    assert!(
        journal.len() >= received.len(),
        "journal {} < received {}",
        journal.len(),
        received.len()
    );
    if let Some(i) = (0..received.len()).find(|&i| journal[i] != received[i]) {
        panic!(
            "message {i} of {} received differs from the journal:\n  journal:  {}\n  received: {}",
            received.len(),
            String::from_utf8_lossy(&journal[i]),
            String::from_utf8_lossy(&received[i])
        );
    }

    let (code, out, _) = run_cli(&[
        "verify",
        "--journal-dir",
        store.path().join("j").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "a killed proxy leaves readable journals: {out}");
    assert!(out.contains("unfinished") || out.contains("torn"), "{out}");
}

#[test]
fn agent_crash_mid_prompt_ends_the_proxy_with_its_code() {
    let store = tempfile::tempdir().unwrap();
    // Without restarts (`--respawn 0`); tests/it/respawn.rs covers the default.
    let mut client = TestClient::spawn(&crate::util::proxied_with(
        store.path(),
        &["--respawn", "0"],
        &scripted("crash"),
    ));
    let session = client.start_session("/tmp");
    client.send(&json!({"jsonrpc":"2.0","id":9,"method":"session/prompt","params":{"sessionId":session,"prompt":[]}}));
    // The client stays connected until the prompt is answered: by the proxy, the agent gone.
    loop {
        let got = client.recv().expect("the prompt's answer before EOF");
        if got.json.as_ref().is_some_and(|m| m["id"] == 9) {
            break;
        }
    }
    let (code, received) = client.finish();
    assert_eq!(code, 3);
    let updates = received
        .iter()
        .filter(|r| {
            r.raw
                .starts_with(br#"{"jsonrpc":"2.0","method":"session/update""#)
        })
        .count();
    assert_eq!(updates, 2);
    // The prompt in flight is answered before the proxy exits.
    let last = received.last().and_then(|r| r.json.clone()).unwrap();
    assert_eq!(last["id"], 9, "{last}");
    assert_eq!(last["error"]["code"], -32603);
    assert_eq!(last["error"]["data"]["method"], "session/prompt");
    let sessions = crate::util::session_messages(store.path());
    let msgs = &sessions["crash-session"];
    assert_eq!(
        msgs[msgs.len() - 2]["params"]["update"]["content"]["text"],
        "chunk 2 xx"
    );
    assert_eq!(msgs.last(), Some(&last), "the answer is journaled");
    let (code, out, _) = run_cli(&["verify", "--journal-dir", store.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn client_eof_closes_the_agent_and_a_stubborn_agent_is_terminated() {
    // `cat` exits at EOF: the proxy exits with its code.
    let store = tempfile::tempdir().unwrap();
    let mut client = TestClient::spawn(&proxied(store.path(), &["cat".into()]));
    client.send_raw(b"{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}\n");
    assert_eq!(
        client.recv().unwrap().raw,
        b"{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}\n"
    );
    let started = Instant::now();
    let (code, _) = client.finish();
    assert_eq!(code, 0);
    assert!(started.elapsed() < Duration::from_secs(2));

    // An agent that ignores EOF and SIGTERM is killed after two grace periods: 128 + 9.
    let mut client = TestClient::spawn(&proxied(store.path(), &scripted("stubborn")));
    client.start_session("/tmp");
    let (code, _) = client.finish();
    assert_eq!(code, 137);
}

#[test]
fn a_client_that_closes_its_stdout_stops_the_agent() {
    let store = tempfile::tempdir().unwrap();
    let argv = proxied(store.path(), &["cat".into()]);
    let mut proxy = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    drop(proxy.stdout.take());
    // Our stdin stays open: only the failed write to our stdout tells the proxy.
    let mut stdin = proxy.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, b"{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}\n").unwrap();
    let deadline = Instant::now() + crate::util::TIMEOUT;
    let status = loop {
        if let Some(status) = proxy.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the proxy kept running");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(0), "`cat` saw EOF and exited");
    let conn = crate::util::read_store(store.path());
    let events: Vec<_> = conn[0].2.iter().filter_map(|r| r.get("event")).collect();
    assert!(
        events.iter().any(|e| e["type"] == "client_gone"),
        "{events:?}"
    );
    drop(stdin);
}

#[test]
fn garbage_and_huge_lines_pass_through_unchanged() {
    let store = tempfile::tempdir().unwrap();
    let mut client = TestClient::spawn(&proxied(store.path(), &["cat".into()]));
    let mut sent = Vec::new();
    for i in 0..10_000u32 {
        let line: Vec<u8> = match i % 5 {
            0 => format!("garbage {i} {{not json\n").into_bytes(),
            1 => vec![0xff, 0xfe, b'x', (i % 256) as u8 | 0x80, b'\n'],
            2 => format!("[{{\"jsonrpc\":\"2.0\",\"method\":\"batch{i}\"}}]\r\n").into_bytes(),
            3 => format!("   {{\"spaced\": {i}}}  \n").into_bytes(),
            _ => b"\n".to_vec(),
        };
        sent.push(line);
    }
    let all: Vec<u8> = sent.concat();
    client.send_raw(&all);
    // A 64 MiB JSON line.
    let big_text: String = (0..(64 << 20) / 64)
        .map(|i| format!("{:064x}", (i as u64).wrapping_mul(0x9e3779b97f4a7c15)))
        .collect();
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{{\"sessionId\":\"big\",\"update\":{{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{{\"type\":\"text\",\"text\":\"{big_text}\"}}}}}}}}\n"
    );
    client.send_raw(big.as_bytes());
    sent.push(big.clone().into_bytes());
    for (i, line) in sent.iter().enumerate() {
        let got = client.recv().expect("echo").raw.clone();
        assert!(
            got == *line,
            "line {i} changed in transit ({} vs {} bytes)",
            got.len(),
            line.len()
        );
    }
    let (code, _) = client.finish();
    assert_eq!(code, 0);
    let journal = journaled(store.path(), Side::Client);
    assert_eq!(journal.len(), sent.len());
    assert!(journal == sent, "the journal holds the exact bytes");
    let big_session = crate::util::session_messages(store.path());
    assert_eq!(
        big_session["big"].len(),
        2,
        "the huge update is in its session, both directions"
    );
}

#[test]
fn hostile_session_ids_stay_inside_the_store_and_never_collide() {
    let store = tempfile::tempdir().unwrap();
    let journal_dir = store.path().join("j");
    let mut client = TestClient::spawn(&proxied(&journal_dir, &["cat".into()]));
    let ids: Vec<String> = vec![
        "../../x".into(),
        "".into(),
        "x".repeat(10_000),
        "x".repeat(10_001),
        "a\u{0}b".into(),
        "a\nb".into(),
        "/etc/passwd".into(),
        "A".into(),
        "a".into(),
        ".".into(),
    ];
    for id in &ids {
        client.send(&json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId": id, "update": {}}}));
        client.recv().unwrap();
    }
    let (code, _) = client.finish();
    assert_eq!(code, 0);
    let sessions = crate::util::session_messages(&journal_dir);
    assert_eq!(sessions.len(), ids.len(), "one journal per distinct ID");
    for id in &ids {
        assert_eq!(sessions[id].len(), 2, "{id:?}: request and echo");
    }
    // Nothing was written outside the store.
    let outside: Vec<PathBuf> = std::fs::read_dir(store.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(outside, vec![journal_dir.clone()]);
    for entry in std::fs::read_dir(journal_dir.join("sessions")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(!name.contains('.') && name.len() <= 121, "{name}");
    }
}

#[test]
fn signals_are_forwarded_and_the_exit_code_follows_the_agent() {
    let store = tempfile::tempdir().unwrap();
    let mut client = TestClient::spawn(&proxied(store.path(), &["sleep".into(), "30".into()]));
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(client.child.id() as i32, libc::SIGTERM) };
    let status = client.child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM));
    let conn = crate::util::read_store(store.path());
    let events: Vec<_> = conn[0].2.iter().filter_map(|r| r.get("event")).collect();
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "signal" && e["signal"] == libc::SIGTERM)
    );
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "agent_exit" && e["code"] == 143)
    );
}

#[test]
fn an_agent_that_cannot_start_is_reported_with_exit_127() {
    let store = tempfile::tempdir().unwrap();
    let (code, out, err) = run_cli(&[
        "--journal-dir",
        store.path().to_str().unwrap(),
        "--",
        "/no/such/agent",
        "--flag",
    ]);
    assert_eq!(code, 127);
    assert!(out.is_empty(), "nothing on stdout: {out}");
    assert!(err.contains("/no/such/agent --flag"), "{err}");
}

#[test]
fn agent_stderr_is_copied_to_ours_and_journaled_redacted_never_on_stdout() {
    let store = tempfile::tempdir().unwrap();
    let agent = vec![
        "sh".to_string(),
        "-c".into(),
        "printf 'log: starting with token sk-ant-abcdefghijklmnopqrstuvwxyz0123\\n' >&2; cat"
            .into(),
    ];
    let mut client = TestClient::spawn(&proxied(store.path(), &agent));
    client.send_raw(b"{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}\n");
    assert_eq!(
        client.recv().unwrap().raw,
        b"{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}\n"
    );
    let stderr = client.stderr.clone();
    let (code, received) = client.finish();
    assert_eq!(code, 0);
    assert_eq!(received.len(), 1, "stderr never reaches stdout");
    let ours = String::from_utf8_lossy(&stderr.lock().unwrap()).into_owned();
    assert!(
        ours.contains("log: starting with token sk-ant-abcdefghijklmnopqrstuvwxyz0123"),
        "{ours}"
    );
    let conn = crate::util::read_store(store.path());
    let logged: Vec<String> = conn[0]
        .2
        .iter()
        .filter_map(|r| r["stderr"].as_str().map(str::to_string))
        .collect();
    assert_eq!(logged, ["log: starting with token [REDACTED]\n"]);
}

#[test]
fn every_fsync_policy_journals_everything() {
    for policy in ["always", "interval", "never"] {
        let store = tempfile::tempdir().unwrap();
        let argv = crate::util::proxied_with(store.path(), &["--fsync", policy], &["cat".into()]);
        let mut client = TestClient::spawn(&argv);
        for i in 0..20 {
            client.send(&json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"f","update":{"n":i}}}));
            client.recv().unwrap();
        }
        assert_eq!(client.finish().0, 0);
        assert_eq!(
            crate::util::session_messages(store.path())["f"].len(),
            40,
            "{policy}"
        );
        let (code, out, _) = run_cli(&["verify", "--journal-dir", store.path().to_str().unwrap()]);
        assert_eq!(code, 0, "{policy}: {out}");
    }
}
