//! Sessions that outlive their agent, through the built binary with real peers: the agent is
//! killed with SIGKILL from outside, the proxy restarts it and restores the session on the next
//! prompt.
//!
//! - `*_killed_twice_keeps_its_session`: killed between prompts, the session goes on.
//! - `typescript_agent_killed_mid_prompt_answers_it_restarted`: a prompt in flight is answered
//!   "send your message again", and the session takes the next one.
//! - `typescript_agent_killed_while_asking_permission_journals_the_late_answer`: the answer to
//!   the dead agent's permission request is journaled in the session, not forwarded; twice.
//! - `an_agent_that_dies_on_every_prompt_is_restarted_three_times_then_ends_the_proxy`: the
//!   restart limit stops a crash loop, with the agent's status.
//! - `an_agent_that_dies_before_initialize_is_not_restarted`: nothing to restart yet.
//! - `a_stalled_prompt_is_cancelled_then_the_agent_restarted`: `--stall-timeout`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::{Peers, TestClient, proxied, proxied_with, read_store, scripted};

/// The agent process the proxy `proxy` runs now (its child, not its reaper), waiting up to
/// 10 s for one other than `not`.
pub(crate) fn agent_pid(proxy: u32, not: Option<i32>) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    let reaper = |pid: i32| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|cmdline| cmdline.split(|b| *b == 0).any(|arg| arg == b"__reap"))
    };
    loop {
        let children = std::fs::read_to_string(format!("/proc/{proxy}/task/{proxy}/children"))
            .unwrap_or_default();
        if let Some(pid) = children
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
            .find(|p| Some(*p) != not && !reaper(*p))
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "no agent process under {proxy}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `kill -9` of the proxy's agent `pid`, then the pid of the agent the proxy starts next.
pub(crate) fn kill9_and_await_the_next(proxy: u32, pid: i32) -> i32 {
    kill9(pid);
    agent_pid(proxy, Some(pid))
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

/// A proxy in front of `agent`, recording into a fresh store, with one session started: the
/// store, the client, the proxy's pid and the session ID.
fn started(agent: &[String]) -> (tempfile::TempDir, TestClient, u32, String) {
    let store = tempfile::tempdir().unwrap();
    let mut client = TestClient::spawn(&proxied(store.path(), agent));
    let proxy = client.child.id();
    let session = client.start_session("/tmp");
    (store, client, proxy, session)
}

fn killed_between_prompts(agent: Vec<String>, echoes: bool) {
    let (store, mut client, proxy, session) = started(&agent);
    assert!(
        client
            .prompt(&session, "first question")
            .get("result")
            .is_some()
    );
    let mut pid = agent_pid(proxy, None);
    for round in 1..=2 {
        pid = kill9_and_await_the_next(proxy, pid);
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
    // `show` and the HTML export tell the restarts, `stats` counts them.
    let (code, shown, _) = crate::util::run_cli_store(store.path(), &["show", &session]);
    assert_eq!(code, 0);
    assert_eq!(
        shown.matches("acp-journal restarted it").count(),
        2,
        "{shown}"
    );
    assert_eq!(
        shown.matches("restored on the restarted agent").count(),
        2,
        "{shown}"
    );
    let (_, html, _) =
        crate::util::run_cli_store(store.path(), &["export", &session, "--format", "html"]);
    assert_eq!(html.matches("acp-journal restarted it").count(), 2);
    let (_, stats, _) = crate::util::run_cli_store(store.path(), &["stats", &session]);
    assert!(stats.contains("2 agent restarts"), "{stats}");
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

/// Read until a message matching `pred` arrives; panics at EOF.
fn read_until(client: &mut TestClient, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    loop {
        let Some(r) = client.recv() else {
            panic!(
                "EOF while waiting for {what}; stderr: {}",
                String::from_utf8_lossy(&client.stderr.lock().unwrap())
            );
        };
        if let Some(m) = &r.json
            && pred(m)
        {
            return m.clone();
        }
    }
}

/// Send a prompt under the id `id` without waiting for its answer.
fn send_prompt(client: &mut TestClient, id: &str, session: &str, text: &str) {
    client.send(
        &json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}}),
    );
}

/// The response to the request `id`.
fn response_to(client: &mut TestClient, id: &str) -> Value {
    read_until(client, &format!("the response to {id}"), |m| {
        m.get("method").is_none() && m["id"] == id
    })
}

/// The error a prompt in flight gets when the agent was restarted under it.
fn assert_restarted_prompt(answer: &Value) {
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("restarted") && message.contains("send your message again"),
        "{answer}"
    );
    assert_eq!(
        answer["error"]["data"]["method"], "session/prompt",
        "{answer}"
    );
}

/// The records of the journal of session `session`, in order.
fn session_records(store: &std::path::Path, session: &str) -> Vec<Value> {
    read_store(store)
        .into_iter()
        .filter(|(_, header, _)| header["kind"] == "session" && header["session"] == session)
        .flat_map(|(_, _, records)| records)
        .collect()
}

/// The `prompt_stalled` actions and other event types of a session journal, in order.
fn event_types(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| {
            let t = r["event"]["type"].as_str()?;
            Some(match r["event"]["action"].as_str() {
                Some(action) => format!("{t}:{action}"),
                None => t.to_string(),
            })
        })
        .collect()
}

fn stderr_text(client: &TestClient) -> String {
    String::from_utf8_lossy(&client.stderr.lock().unwrap()).into_owned()
}

/// Wait up to `within` for the proxy to exit; its code.
fn exit_code_within(client: &mut TestClient, within: Duration) -> i32 {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = client.child.try_wait().unwrap() {
            return status.code().expect("the proxy exited, not killed");
        }
        assert!(
            Instant::now() < deadline,
            "the proxy did not exit within {within:?}; stderr: {}",
            stderr_text(client)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn typescript_agent_killed_mid_prompt_answers_it_restarted() {
    let (_store, mut client, proxy, session) = started(&Peers::get().ts_agent());
    let pid = agent_pid(proxy, None);
    send_prompt(&mut client, "p1", &session, "a long task");
    read_until(&mut client, "the first session/update", |m| {
        m["method"] == "session/update"
    });
    kill9(pid);
    let answer = response_to(&mut client, "p1");
    assert_restarted_prompt(&answer);
    assert_ne!(agent_pid(proxy, Some(pid)), pid);
    let again = client.prompt(&session, "the same task again");
    assert_eq!(again["result"]["stopReason"], "end_turn", "{again}");
    only_expected_ids(&client);
    let (code, _) = client.finish();
    assert_eq!(code, 0);
}

#[test]
fn typescript_agent_killed_while_asking_permission_journals_the_late_answer() {
    let (store, mut client, proxy, session) = started(&Peers::get().ts_agent());
    let mut pid = agent_pid(proxy, None);
    let mut late = vec![];
    for (round, option) in [(1, "allow"), (2, "reject")] {
        let id = format!("killed-{round}");
        send_prompt(&mut client, &id, &session, &format!("task {round}"));
        let ask = read_until(&mut client, "a permission request", |m| {
            m["method"] == "session/request_permission"
        });
        assert_eq!(ask["params"]["sessionId"], session.as_str(), "{ask}");
        kill9(pid);
        let answer = response_to(&mut client, &id);
        assert_restarted_prompt(&answer);
        // The client answers the dead agent's question only now.
        let reply = json!({"jsonrpc": "2.0", "id": ask["id"].clone(),
            "result": {"outcome": {"outcome": "selected", "optionId": option}}});
        client.send(&reply);
        late.push(reply);
        pid = agent_pid(proxy, Some(pid));
        let next = client.prompt(&session, &format!("task {round}, once more"));
        assert_eq!(
            next["result"]["stopReason"], "end_turn",
            "round {round}: {next}"
        );
    }
    only_expected_ids(&client);
    let (code, _) = client.finish();
    assert_eq!(code, 0);
    let records = session_records(store.path(), &session);
    for reply in &late {
        assert!(
            records
                .iter()
                .any(|r| r["from"] == "client" && r["msg"] == *reply),
            "the late answer {reply} is in the session journal"
        );
    }
    let events = event_types(&records);
    assert_eq!(
        events.iter().filter(|e| *e == "agent_restarted").count(),
        2,
        "{events:?}"
    );
    // The timeline tells each thing once, in the order it happened, as the editor saw it: the
    // exit, then the prompt it failed, then one line for the restore.
    let (_, shown, _) = crate::util::run_cli_store(store.path(), &["show", &session]);
    let lines: Vec<&str> = shown.lines().collect();
    let at = |needle: &str| lines.iter().position(|l| l.contains(needle));
    let exited = at("the agent exited (status 137)").expect(&shown);
    let failed = at("! session/prompt failed: -32603").expect(&shown);
    assert!(exited < failed, "{shown}");
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains("restored on the restarted agent ("))
            .count(),
        2,
        "{shown}"
    );
    for wrong in [
        "loaded from the journal",
        "── session/new",
        "continued on a new agent session",
    ] {
        assert_eq!(
            lines.iter().filter(|l| l.contains(wrong)).count(),
            usize::from(wrong == "── session/new"),
            "{wrong:?} (the client's own session/new only): {shown}"
        );
    }
}

#[test]
fn an_agent_that_dies_on_every_prompt_is_restarted_three_times_then_ends_the_proxy() {
    let store = tempfile::tempdir().unwrap();
    let log = store.path().join("prompts.log");
    let cmd = proxied(&store.path().join("journal"), &scripted("crashloop"));
    let mut client = TestClient::spawn_env(&cmd, &[("AGENT_LOG", &log)]);
    let session = client.start_session("/tmp");
    let start = Instant::now();
    let mut errors = vec![];
    for n in 0..10 {
        let id = format!("crash-{n}");
        let line = json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}});
        let mut bytes = serde_json::to_vec(&line).unwrap();
        bytes.push(b'\n');
        if !client.try_send_raw(&bytes) {
            break;
        }
        let answer = loop {
            match client.recv() {
                None => break None,
                Some(r) => {
                    if let Some(m) = &r.json
                        && m.get("method").is_none()
                        && m["id"] == id.as_str()
                    {
                        break Some(m.clone());
                    }
                }
            }
        };
        let Some(answer) = answer else { break };
        assert_eq!(answer["error"]["code"], -32603, "{answer}");
        errors.push(answer);
    }
    let code = exit_code_within(
        &mut client,
        Duration::from_secs(20).saturating_sub(start.elapsed()),
    );
    assert!(start.elapsed() < Duration::from_secs(20));
    let stderr = stderr_text(&client);
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("not restarting it again") && stderr.contains("status 3"),
        "{stderr}"
    );
    let reached = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .count();
    assert!(
        (1..=4).contains(&reached),
        "{reached} prompts reached an agent"
    );
    assert_eq!(reached, 4, "3 restarts, then it gives up: {errors:?}");
    // Every prompt was answered: "restarted" while it restarts, "exited" when it gives up.
    assert_eq!(errors.len(), 4, "{errors:?}");
    let last = errors.last().unwrap()["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(last.contains("exited"), "{errors:?}");
    only_expected_ids(&client);
    let restarts = read_store(&store.path().join("journal"))
        .into_iter()
        .filter(|(_, header, _)| header["kind"] != "session")
        .flat_map(|(_, _, records)| records)
        .filter(|r| r["event"]["type"] == "agent_restarted")
        .count();
    assert_eq!(restarts, 3, "the connection journal has every restart");
}

#[test]
fn an_agent_that_dies_before_initialize_is_not_restarted() {
    let store = tempfile::tempdir().unwrap();
    let mut client = TestClient::spawn(&proxied(store.path(), &scripted("dead")));
    let start = Instant::now();
    client.send(
        &json!({"jsonrpc": "2.0", "id": "init", "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
    );
    let answer = response_to(&mut client, "init");
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    let code = exit_code_within(&mut client, Duration::from_secs(10));
    assert!(start.elapsed() < Duration::from_secs(10));
    let stderr = stderr_text(&client);
    assert_eq!(code, 4, "{stderr}");
    assert!(!stderr.contains("restarted it"), "{stderr}");
    let restarts = read_store(store.path())
        .into_iter()
        .flat_map(|(_, _, records)| records)
        .filter(|r| r["event"]["type"] == "agent_restarted")
        .count();
    assert_eq!(restarts, 0);
}

#[test]
fn a_stalled_prompt_is_cancelled_then_the_agent_restarted() {
    let store = tempfile::tempdir().unwrap();
    let mut cmd = proxied_with(store.path(), &["--stall-timeout", "1"], &scripted("stall"));
    let grace = cmd.iter().position(|a| a == "--grace").unwrap();
    cmd[grace + 1] = "1".into();
    let mut client = TestClient::spawn(&cmd);
    let session = client.start_session("/tmp");
    let start = Instant::now();
    let answer = client.prompt(&session, "please stall");
    assert!(start.elapsed() < Duration::from_secs(20));
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("restarted")),
        "{answer}"
    );
    let next = client.prompt(&session, "hello");
    assert_eq!(next["result"]["stopReason"], "end_turn", "{next}");
    only_expected_ids(&client);
    let (code, _) = client.finish();
    assert_eq!(code, 0);
    let records = session_records(store.path(), &session);
    let events = event_types(&records);
    let stalled: Vec<&String> = events
        .iter()
        .filter(|e| e.starts_with("prompt_stalled"))
        .collect();
    assert_eq!(
        stalled,
        ["prompt_stalled:cancel", "prompt_stalled:restart"],
        "{events:?}"
    );
    let cancel = records
        .iter()
        .position(|r| r["msg"]["method"] == "session/cancel" && r["proxy"] == true);
    assert!(cancel.is_some(), "the proxy's session/cancel is journaled");
    assert!(events.iter().any(|e| e == "agent_restarted"), "{events:?}");
    assert!(
        records
            .iter()
            .any(|r| r["event"]["type"] == "session_restored" && r["event"]["how"] == "session/new"),
        "{events:?}"
    );
    assert!(events.iter().any(|e| e == "session_restored"), "{events:?}");
}
