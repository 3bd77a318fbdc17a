//! `acp-journal watch` through the built binary: a second process following a session that a
//! real proxy (in front of the TypeScript SDK example agent) is journaling.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Instant;

use serde_json::Value;

use crate::util::{Peers, TIMEOUT, TestClient, bin, proxied};

/// A running `acp-journal watch`: its stdout lines as they come, its stderr lines too.
struct Watch {
    child: Child,
    lines: Receiver<String>,
    errors: Receiver<String>,
    /// Every stdout line so far.
    out: Vec<String>,
    /// Every stderr line so far.
    err: Vec<String>,
}

fn lines_of(stream: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

impl Watch {
    fn start(store: &Path, args: &[&str]) -> Watch {
        let mut child = Command::new(bin())
            .arg("--journal-dir")
            .arg(store)
            .arg("watch")
            .args(args)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = lines_of(child.stdout.take().unwrap());
        let errors = lines_of(child.stderr.take().unwrap());
        Watch {
            child,
            lines,
            errors,
            out: vec![],
            err: vec![],
        }
    }

    /// Wait (bounded) for a stderr line containing `text`.
    fn wait_stderr(&mut self, text: &str) {
        let deadline = Instant::now() + TIMEOUT;
        while !self.err.iter().any(|l| l.contains(text)) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.errors.recv_timeout(left) {
                Ok(line) => self.err.push(line),
                Err(_) => panic!("no {text:?} from the watcher; stderr: {:?}", self.err),
            }
        }
    }

    /// Wait (bounded) until the output holds a line for which `done` is true.
    fn wait_for(&mut self, what: &str, done: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + TIMEOUT;
        while !self.out.iter().any(|l| done(l)) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.out.push(line),
                Err(_) => panic!("the watcher did not print {what}; output: {:#?}", self.out),
            }
        }
    }

    /// Wait (bounded) for the watcher to exit by itself; returns its code and every line.
    fn exit(mut self) -> (i32, Vec<String>, Vec<String>) {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            match self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(line) => self.out.push(line),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    let _ = self.child.kill();
                    panic!("the watcher did not exit; output: {:#?}", self.out)
                }
            }
        }
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the watcher did not exit");
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        self.err.extend(self.errors.try_iter());
        let (out, err) = (std::mem::take(&mut self.out), std::mem::take(&mut self.err));
        (status.code().unwrap_or(-1), out, err)
    }

    /// Stop the watcher (it runs until interrupted) and return its output.
    fn kill(mut self) -> Vec<String> {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.out.extend(self.lines.iter());
        std::mem::take(&mut self.out)
    }
}

impl Drop for Watch {
    /// A test that fails midway does not leave its watcher running (`--all` runs until
    /// interrupted).
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `session/update` lines the client received for `session`, as received.
fn updates_received(client: &TestClient, session: &str, from: usize) -> Vec<String> {
    client.received[from..]
        .iter()
        .filter(|r| {
            r.json.as_ref().is_some_and(|m| {
                m["method"] == "session/update" && m["params"]["sessionId"] == session
            })
        })
        .map(|r| String::from_utf8_lossy(r.raw.strip_suffix(b"\n").unwrap()).into_owned())
        .collect()
}

/// The `session/update` lines of a `--json` watch output.
fn updates_watched(out: &[String]) -> Vec<String> {
    out.iter()
        .filter(|l| serde_json::from_str::<Value>(l).is_ok_and(|m| m["method"] == "session/update"))
        .cloned()
        .collect()
}

#[test]
fn a_watcher_sees_every_update_in_order_and_exits_when_the_session_closes() {
    let store = tempfile::tempdir().unwrap();
    let mut client = TestClient::spawn(&proxied(store.path(), &Peers::get().ts_agent()));
    let session = client.start_session("/tmp");
    let json = Watch::start(store.path(), &[&session, "--json"]);
    let text = Watch::start(store.path(), &[&session[..8]]);
    client.prompt(&session, "first question");
    client.prompt(&session, "second question");
    let received = updates_received(&client, &session, 0);
    assert!(received.len() >= 6, "{received:#?}");
    let (code, _) = client.finish();
    assert_eq!(code, 0);

    let (code, out, err) = json.exit();
    assert_eq!(code, 0, "{err:?}");
    assert_eq!(updates_watched(&out), received, "every update, in order");
    assert!(out[0].contains("session/new"), "from the start: {}", out[0]);

    let (code, out, err) = text.exit();
    assert_eq!(code, 0, "{err:?}");
    let transcript = out.join("\n");
    let first = transcript.find("❯ first question").expect(&transcript);
    let second = transcript.find("❯ second question").expect(&transcript);
    assert!(first < second, "{transcript}");
    assert!(
        transcript.contains("── session/new in /tmp") && transcript.contains("I'll help you"),
        "{transcript}"
    );
}

#[test]
fn a_watcher_started_mid_session_sees_the_first_turn_only_from_the_start() {
    let store = tempfile::tempdir().unwrap();
    let mut client = TestClient::spawn(&proxied(store.path(), &Peers::get().ts_agent()));
    let session = client.start_session("/tmp");
    client.prompt(&session, "first question");
    let first_turn = updates_received(&client, &session, 0);
    let mut from_now = Watch::start(store.path(), &[&session, "--json", "--from-now"]);
    from_now.wait_stderr("watching from now");
    let mut from_start = Watch::start(store.path(), &["--raw"]);
    from_start.wait_stderr(&format!("watching {session}"));
    // The first turn is on screen before the second begins.
    from_start.wait_for("the first prompt", |l| l.contains("first question"));
    let before = client.received.len();
    client.prompt(&session, "second question");
    let second_turn = updates_received(&client, &session, before);
    assert!(!second_turn.is_empty());
    client.finish();

    let (code, out, err) = from_now.exit();
    assert_eq!(code, 0, "{err:?}");
    assert_eq!(updates_watched(&out), second_turn, "only what came after");
    assert!(
        !out.iter().any(|l| l.contains("first question")),
        "{out:#?}"
    );

    let (code, out, err) = from_start.exit();
    assert_eq!(code, 0, "{err:?}");
    // --raw: `time  ← agent  <the line>`; the updates are the lines' ends.
    let raw_updates: Vec<String> = out
        .iter()
        .filter_map(|l| l.find("{\"").map(|i| l[i..].to_string()))
        .filter(|l| l.contains("\"session/update\""))
        .collect();
    let all: Vec<String> = first_turn.into_iter().chain(second_turn).collect();
    assert_eq!(raw_updates, all, "both turns, in order");
}

#[test]
fn watch_all_picks_up_a_session_that_starts_after_it() {
    let store = tempfile::tempdir().unwrap();
    let mut watch = Watch::start(store.path(), &["--all", "--json"]);
    watch.wait_stderr("watching every session");
    let mut client = TestClient::spawn(&proxied(store.path(), &Peers::get().ts_agent()));
    let session = client.start_session("/tmp");
    client.prompt(&session, "a question");
    let received = updates_received(&client, &session, 0);
    client.finish();
    // The last update the client received, behind the session's short ID.
    let last = received.last().unwrap().clone();
    watch.wait_for("the last update", |l| l.ends_with(&last));
    let out = watch.kill();
    let prefix = &session[..6];
    let mut updates = vec![];
    for line in &out {
        let (short, rest) = line.split_once("  ").expect(line);
        assert!(session.starts_with(short) && short.len() >= 6, "{line}");
        assert!(short.starts_with(prefix));
        if rest.contains("\"session/update\"") {
            updates.push(rest.to_string());
        }
    }
    assert_eq!(updates, received, "every update, in order");
}

#[test]
fn a_permission_request_shows_while_it_waits_and_its_answer_when_it_comes() {
    let store = tempfile::tempdir().unwrap();
    let mut client = TestClient::spawn(&proxied(store.path(), &Peers::get().ts_agent()));
    let session = client.start_session("/tmp");
    let mut watch = Watch::start(store.path(), &[&session]);
    client.send(
        &serde_json::json!({"jsonrpc": "2.0", "id": 90, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "change it"}]}}),
    );
    // The agent asks; the client does not answer yet.
    let asked = loop {
        let msg = client
            .recv()
            .expect("the agent's permission request")
            .json
            .clone();
        if let Some(msg) = msg.filter(|m| m["method"] == "session/request_permission") {
            break msg;
        }
    };
    let title = asked["params"]["toolCall"]["title"]
        .as_str()
        .unwrap()
        .to_string();
    watch.wait_for("the waiting request", |l| {
        l.starts_with(&format!("? permission for {title}: waiting for the user"))
    });
    let waiting = watch
        .out
        .iter()
        .find(|l| l.contains("waiting for the user"))
        .unwrap();
    assert!(
        waiting.contains("Allow this change"),
        "the options: {waiting}"
    );
    // The tool call it is about is on screen before it.
    let call = watch
        .out
        .iter()
        .position(|l| l.starts_with("⏺ ") && l.contains(&title));
    let ask = watch
        .out
        .iter()
        .position(|l| l.contains("waiting for the user"));
    assert!(call.is_some() && call < ask, "{:#?}", watch.out);
    // Answered: the choice follows.
    client.send(&crate::util::reply_to(&asked).unwrap());
    watch.wait_for("the answer", |l| {
        l.starts_with(&format!("? permission for {title}: ")) && !l.contains("waiting")
    });
    loop {
        let msg = client.recv().expect("the prompt's answer").json.clone();
        if msg.is_some_and(|m| m["id"] == 90) {
            break;
        }
    }
    client.finish();
    let (code, out, err) = watch.exit();
    assert_eq!(code, 0, "{err:?}");
    // `show` prints the answer only: what was asked is in it.
    let (_, shown, _) = crate::util::run_cli_store(store.path(), &["show", &session]);
    assert!(!shown.contains("waiting for the user"), "{shown}");
    assert!(out.iter().any(|l| l.contains("waiting for the user")));
}
