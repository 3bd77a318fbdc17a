//! `replay`, `rerun`, `diff` and `bundle` through the built binary, with real peers.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::util::{
    Peers, TestClient, bin, decompress_salvage, proxied, proxied_with, read_store, root,
    run_cli_store, sample_copy, session_messages,
};

/// Our own deterministic agent; `changed` makes a second version of it.
fn story_agent(changed: bool) -> Vec<String> {
    let mut argv = vec![
        crate::util::python(),
        root()
            .join("tests/agents/story_agent.py")
            .display()
            .to_string(),
    ];
    if changed {
        argv.push("changed".into());
    }
    argv
}

fn replay_argv(store: &Path, sources: &[&str], options: &[&str]) -> Vec<String> {
    let mut argv = vec![
        bin().display().to_string(),
        "--journal-dir".into(),
        store.display().to_string(),
        "replay".into(),
    ];
    argv.extend(sources.iter().map(|s| s.to_string()));
    argv.extend(options.iter().map(|s| s.to_string()));
    argv
}

/// The messages a client gets from the agent, ids dropped (they are the client's own).
fn without_ids(messages: impl IntoIterator<Item = Value>) -> Vec<Value> {
    messages
        .into_iter()
        .map(|mut m| {
            m.as_object_mut().unwrap().remove("id");
            m
        })
        .collect()
}

/// Record one session of our story agent through the proxy; returns its session ID.
fn record_story(store: &Path, options: &[&str], prompts: &[&str]) -> String {
    let mut client = TestClient::spawn(&proxied_with(store, options, &story_agent(false)));
    let session = client.start_session("/tmp");
    for p in prompts {
        let r = client.prompt(&session, p);
        assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    }
    client.finish();
    session
}

#[test]
fn python_client_sees_the_same_run_from_a_replay_as_from_the_live_typescript_agent() {
    let peers = Peers::get();
    let store = tempfile::tempdir().unwrap();
    let client = |agent: Vec<String>| {
        let mut argv = peers.py_client();
        argv.extend(agent);
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .current_dir(store.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"Add a greeting\nAnd another one\n")
            .unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (live, _) = client(proxied(store.path(), &peers.ts_agent()));
    assert_eq!(live.matches("| Agent:").count(), 4, "live run: {live}");
    let session = session_messages(store.path())
        .into_keys()
        .next()
        .expect("the live run was journaled");
    let (replayed, stderr) = client(replay_argv(store.path(), &[&session], &["--pace", "fast"]));
    assert_eq!(replayed, live, "replay stderr: {stderr}");
    assert!(!stderr.contains("differs"), "{stderr}");
}

/// Open a replay of the sample's session as its recorded client did (same initialize and
/// session/new params, other cwd); returns the session and the recorded messages.
fn open_as_recorded(client: &mut TestClient, store: &Path) -> (String, Vec<Value>) {
    let (_, header, _) = read_store(store)
        .into_iter()
        .find(|(_, h, _)| h["kind"] == "session")
        .unwrap();
    let init = header["initialize"]["request"]["params"].clone();
    assert!(client.request("initialize", init).get("result").is_some());
    let (session, recorded) = session_messages(store).into_iter().next().unwrap();
    let mut new = recorded[0]["params"].clone();
    new["cwd"] = json!("/elsewhere");
    assert_eq!(
        client.request("session/new", new)["result"]["sessionId"],
        session
    );
    (session, recorded)
}

#[test]
fn our_client_gets_every_recorded_update_and_request_from_a_replay() {
    let store = sample_copy("typescript-agent");
    let mut client = TestClient::spawn(&replay_argv(
        store.path(),
        &["b1c08ce9c97e4f39cac3a3b4797a59b3"],
        &["--pace", "fast"],
    ));
    let (session, recorded) = open_as_recorded(&mut client, store.path());
    for m in recorded.iter().filter(|m| m["method"] == "session/prompt") {
        client.prompt(&session, m["params"]["prompt"][0]["text"].as_str().unwrap());
    }
    let stderr = client.stderr.clone();
    let (code, received) = client.finish();
    assert_eq!(code, 0);
    // Everything the agent sent after initialize, in order, as recorded.
    let live: Vec<Value> = received
        .iter()
        .filter_map(|r| r.json.clone())
        .skip(1)
        .collect();
    let expected: Vec<Value> = recorded
        .into_iter()
        .filter(|m| {
            m.get("method")
                .is_some_and(|m| m != "session/prompt" && m != "session/new")
                || m.get("result").is_some() && m["result"].get("outcome").is_none()
        })
        .collect();
    assert_eq!(without_ids(live), without_ids(expected));
    let stderr = String::from_utf8_lossy(&stderr.lock().unwrap()).into_owned();
    assert!(!stderr.contains("differs"), "{stderr}");
    assert!(stderr.contains("served 4 requests"), "{stderr}");
}

#[test]
fn a_diverging_client_is_reported_and_strict_refuses_it() {
    let store = sample_copy("typescript-agent");
    let session = session_messages(store.path()).into_keys().next().unwrap();
    for strict in [false, true] {
        let options: &[&str] = if strict {
            &["--pace", "fast", "--strict"]
        } else {
            &["--pace", "x1000"]
        };
        let mut client = TestClient::spawn(&replay_argv(store.path(), &[&session], options));
        open_as_recorded(&mut client, store.path());
        let answer = client.prompt(&session, "Something else entirely");
        assert_eq!(answer.get("error").is_some(), strict, "{answer}");
        let stderr = client.stderr.clone();
        let (code, _) = client.finish();
        assert_eq!(code, i32::from(strict));
        let stderr = String::from_utf8_lossy(&stderr.lock().unwrap()).into_owned();
        assert!(
            stderr.contains(
                r#"turn 1, session/prompt (session b1c08ce9c97e4f39cac3a3b4797a59b3)
    prompt[0].text: recorded "Add a friendly greeting to hello.txt", live "Something else entirely""#
            ),
            "{stderr}"
        );
    }
}

#[test]
fn rerun_against_the_same_typescript_agent_finds_no_difference() {
    let peers = Peers::get();
    let store = sample_copy("typescript-agent");
    let mut args = vec!["rerun", "b1c0", "--fail-on", "text,tools,errors", "--"];
    let agent = peers.ts_agent();
    args.extend(agent.iter().map(String::as_str));
    let (code, stdout, stderr) = run_cli_store(store.path(), &args);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    // The sample was recorded before the proxy advertised the history list's markers and
    // session/fork: those capabilities differ, nothing else.
    assert!(stdout.contains("text 0, tools 0, errors 0"), "{stdout}");
    // The rerun was journaled as a session of its own, here, without the recorded MCP server
    // (a command the agent would start).
    let sessions = session_messages(store.path());
    assert_eq!(sessions.len(), 2);
    let (_, rerun) = sessions
        .into_iter()
        .find(|(id, _)| id != "b1c08ce9c97e4f39cac3a3b4797a59b3")
        .unwrap();
    let here = std::env::current_dir().unwrap();
    assert_eq!(rerun[0]["params"]["cwd"], json!(here));
    assert_eq!(rerun[0]["params"]["mcpServers"], json!([]));
}

#[test]
fn rerun_against_a_changed_agent_reports_exactly_the_change() {
    let store = tempfile::tempdir().unwrap();
    let session = record_story(store.path(), &[], &["Summarize my notes"]);
    let rerun = |changed: bool, fail_on: &str| {
        let agent = story_agent(changed);
        let mut args = vec!["rerun", session.as_str(), "--fail-on", fail_on, "--"];
        args.extend(agent.iter().map(String::as_str));
        run_cli_store(store.path(), &args)
    };
    // The same agent: the recorded permission and file content were given back.
    let (code, stdout, stderr) = rerun(false, "text,tools,errors,capabilities");
    assert_eq!(
        (code, stdout.trim()),
        (
            0,
            "0 differences: text 0, tools 0, errors 0, capabilities 0"
        ),
        "{stderr}"
    );
    // The changed one: exactly its two edits.
    let (code, stdout, stderr) = rerun(true, "tools");
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        stdout.trim(),
        r#"[text] session 1, turn 1: agent message 2:
  - Done: Summarize my notes (34 bytes of notes)
  + All done: Summarize my notes (34 bytes of notes)
[tools] session 1, turn 1: tool call "Read notes.txt": title "Read notes.txt" → "Read notes.md"
2 differences: text 1, tools 1, errors 0, capabilities 0"#
    );
    // diff between the recordings says the same, and --fail-on picks the exit status.
    let sessions: Vec<String> = session_messages(store.path()).into_keys().collect();
    assert_eq!(sessions.len(), 3);
    let changed = stderr
        .split("journaled as ")
        .nth(1)
        .unwrap()
        .split(';')
        .next()
        .unwrap();
    let (code, out, _) = run_cli_store(
        store.path(),
        &["diff", &session, changed, "--fail-on", "capabilities"],
    );
    assert_eq!(code, 0);
    assert!(
        out.ends_with("2 differences: text 1, tools 1, errors 0, capabilities 0\n"),
        "{out}"
    );
}

#[test]
fn a_bundle_holds_no_seeded_secret_and_still_replays() {
    let store = tempfile::tempdir().unwrap();
    let secrets = [
        "ghp_0123456789abcdefghijABCDEFGHIJklmnop",
        "Bearer abcdefghijklmnopqrstuvwxyz0123",
        "sk-proj-SEEDEDsecretSEEDEDsecret0123",
        "mcp-env-value-not-token-shaped",
    ];
    let new_params = json!({"cwd": "/tmp", "mcpServers": [
        {"name": "gh", "command": "/bin/gh-mcp", "args": [],
         "env": [{"name": "GITHUB_TOKEN", "value": secrets[0]}, {"name": "OTHER", "value": secrets[3]}]},
        {"type": "http", "name": "api", "url": "https://example.invalid/mcp",
         "headers": [{"name": "Authorization", "value": secrets[1]}]}]});
    let prompt = format!("Use the key {} please", secrets[2]);
    // Recorded without redaction, so the bundle's own redaction is what is tested.
    let mut client = TestClient::spawn(&proxied_with(
        store.path(),
        &["--no-redact"],
        &story_agent(false),
    ));
    client.initialize();
    let session = client.request("session/new", new_params.clone())["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    client.prompt(&session, &prompt);
    client.finish();
    let journal = store.path().join(format!("sessions/s{session}"));
    let raw = decompress_salvage(&crate::util::first_entry(&journal));
    assert!(
        secrets
            .iter()
            .all(|s| raw.windows(s.len()).any(|w| w == s.as_bytes()))
    );

    let bundle = store.path().join("bug.acpj");
    let (code, stdout, stderr) = run_cli_store(
        store.path(),
        &["bundle", &session, "-o", bundle.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{stderr}");
    // The three MCP values, the prompt, and the agent's echo of it.
    assert!(stdout.contains("redacted: 5 value(s)"), "{stdout}");
    assert!(
        stdout.contains("session/prompt: params.prompt[0].text"),
        "{stdout}"
    );
    assert!(
        stdout.contains("params.mcpServers[1].headers[0].value"),
        "{stdout}"
    );
    let bytes = decompress_salvage(&bundle);
    for s in secrets {
        assert!(
            !bytes.windows(s.len()).any(|w| w == s.as_bytes()),
            "{s} is in the bundle"
        );
    }
    let manifest: Value =
        serde_json::from_slice(bytes.split(|b| *b == b'\n').nth(1).unwrap()).unwrap();
    assert_eq!(
        manifest["event"]["manifest"]["agent"]["name"],
        "story-agent"
    );
    assert_eq!(
        manifest["event"]["manifest"]["client"]["name"],
        "acp-journal-tests"
    );

    // It replays: the same client with its real secrets matches the redacted recording.
    let mut client = TestClient::spawn(&replay_argv(
        store.path(),
        &[bundle.to_str().unwrap()],
        &["--pace", "fast", "--strict"],
    ));
    client.initialize();
    assert_eq!(
        client.request("session/new", new_params)["result"]["sessionId"],
        session
    );
    let answer = client.prompt(&session, &prompt);
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    let stderr = client.stderr.clone();
    let (code, _) = client.finish();
    let stderr = String::from_utf8_lossy(&stderr.lock().unwrap()).into_owned();
    assert_eq!(code, 0, "{stderr}");
    // And show / diff accept it.
    let (code, shown, _) = run_cli_store(store.path(), &["show", bundle.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(shown.contains("Use the key [REDACTED] please"), "{shown}");
    assert!(
        shown.starts_with("── bundle: agent story-agent 1.0.0, client acp-journal-tests 0, 1 of 1 turns, 5 values redacted"),
        "{shown}"
    );
    let (code, out, _) = run_cli_store(
        store.path(),
        &[
            "diff",
            &session,
            bundle.to_str().unwrap(),
            "--fail-on",
            "text,tools,errors,capabilities",
        ],
    );
    assert_eq!(code, 0, "{out}");
}

#[test]
fn one_replay_serves_several_recorded_sessions_in_order() {
    let store = tempfile::tempdir().unwrap();
    let mut client = TestClient::spawn(&proxied(store.path(), &story_agent(false)));
    client.initialize();
    let recorded: Vec<String> = (0..2).map(|_| client.new_session("/tmp")).collect();
    for (session, text) in recorded.iter().zip(["first", "second"]) {
        client.prompt(session, text);
    }
    client.finish();
    let sources: Vec<&str> = recorded.iter().map(String::as_str).collect();
    let mut client = TestClient::spawn(&replay_argv(store.path(), &sources, &["--pace", "fast"]));
    client.initialize();
    let served: Vec<String> = (0..2).map(|_| client.new_session("/elsewhere")).collect();
    assert_eq!(served, recorded);
    for (session, text) in served.iter().zip(["first", "second"]) {
        let answer = client.prompt(session, text);
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    }
    let stderr = client.stderr.clone();
    assert_eq!(client.finish().0, 0);
    let stderr = String::from_utf8_lossy(&stderr.lock().unwrap()).into_owned();
    assert!(!stderr.contains("differs"), "{stderr}");
    assert!(
        stderr.contains("served 5 requests from 2 recorded session(s)"),
        "{stderr}"
    );
}

#[test]
fn bundle_upto_turn_keeps_the_first_turns_and_says_what_it_left_out() {
    let store = tempfile::tempdir().unwrap();
    let session = record_story(store.path(), &[], &["one", "two", "three"]);
    let bundle = store.path().join("two.acpj");
    let (code, stdout, _) = run_cli_store(
        store.path(),
        &[
            "bundle",
            &session,
            "--upto-turn",
            "2",
            "-o",
            bundle.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0);
    assert!(stdout.contains("2 of 3 turns"), "{stdout}");
    assert!(
        stdout.contains("left out: turn 3 (--upto-turn 2)"),
        "{stdout}"
    );
    let (_, out, _) = run_cli_store(store.path(), &["diff", &session, bundle.to_str().unwrap()]);
    assert!(out.contains("[text] session 1: 3 turns → 2"), "{out}");
    // The agent's stderr only when asked for, its start-up output included.
    let (_, raw, _) = run_cli_store(store.path(), &["show", "--raw", bundle.to_str().unwrap()]);
    assert!(!raw.contains("story agent ready"), "{raw}");
    let with_stderr = store.path().join("with-stderr.acpj");
    let (code, stdout, _) = run_cli_store(
        store.path(),
        &[
            "bundle",
            &session,
            "--include-stderr",
            "-o",
            with_stderr.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0);
    assert!(!stdout.contains("left out: agent stderr"), "{stdout}");
    let (_, raw, _) = run_cli_store(
        store.path(),
        &["show", "--raw", with_stderr.to_str().unwrap()],
    );
    assert!(raw.contains("agent stderr    story agent ready"), "{raw}");
    // A bundle is never written over an existing file.
    let (code, _, stderr) = run_cli_store(
        store.path(),
        &["bundle", &session, "-o", bundle.to_str().unwrap()],
    );
    assert_eq!(code, 2);
    assert!(stderr.contains("it must not exist"), "{stderr}");
}
