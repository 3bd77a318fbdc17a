//! Several clients on one live session of `acp-journal serve`: the SDKs' own client transports
//! (TypeScript 2.4.0, Python 0.12.1) over WebSocket and HTTP, in front of the TypeScript SDK's
//! example agent (which asks for permission in every turn).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::serve::{Served, TOKEN, clients, of_kind, sdk_client, story};
use crate::util::{Peers, TIMEOUT};

/// An SDK client running on its own while the test goes on: its events as they come.
pub struct Running {
    child: Child,
    events: mpsc::Receiver<Value>,
    seen: Vec<Value>,
}

impl Running {
    pub fn start(client: &[String], url: &str, transport: &str, args: &[&str]) -> Running {
        let mut child = Command::new(&client[0])
            .args(&client[1..])
            .args(["--url", url, "--transport", transport, "--token", TOKEN])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, events) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(event) = serde_json::from_str(&line)
                    && tx.send(event).is_err()
                {
                    return;
                }
            }
        });
        Running {
            child,
            events,
            seen: Vec::new(),
        }
    }

    /// Wait for an event of kind `event`; everything seen so far.
    pub fn until(&mut self, event: &str) -> &[Value] {
        let deadline = Instant::now() + TIMEOUT;
        while !self.seen.iter().any(|e| e["event"] == event) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(e) => self.seen.push(e),
                Err(_) => panic!("no {event} event: {:#?}", self.seen),
            }
        }
        &self.seen
    }

    /// Wait until one of the agent's texts and tool calls seen (`story`) contains `wanted`.
    pub fn until_story(&mut self, wanted: &str) -> &[Value] {
        self.until_story_count(wanted, 1)
    }

    /// Wait until `n` of the agent's texts and tool calls seen contain `wanted`.
    pub fn until_story_count(&mut self, wanted: &str, n: usize) -> &[Value] {
        let deadline = Instant::now() + TIMEOUT;
        while story(&self.seen)
            .iter()
            .filter(|s| s.contains(wanted))
            .count()
            < n
        {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(e) => self.seen.push(e),
                Err(_) => panic!("never saw {wanted:?}: {:#?}", self.seen),
            }
        }
        &self.seen
    }

    /// Wait for `n` events of kind `event`.
    pub fn until_count(&mut self, event: &str, n: usize) -> &[Value] {
        let deadline = Instant::now() + TIMEOUT;
        while of_kind(&self.seen, event).len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(e) => self.seen.push(e),
                Err(_) => panic!("fewer than {n} {event} events: {:#?}", self.seen),
            }
        }
        &self.seen
    }

    /// Drop the connection as a crash would (SIGKILL: nothing closed).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The updates of `events` up to their first `result` (one turn), and after it.
fn split_at_result(events: &[Value]) -> (&[Value], &[Value]) {
    let at = events
        .iter()
        .position(|e| e["event"] == "result")
        .unwrap_or(events.len());
    events.split_at(at)
}

/// A and B (client, transport) on one session: B joins while A's turn waits for permission,
/// answers it, then prompts (refused while A's turn runs, then taken); A sees B's turn; A drops
/// and B, connecting again, carries on.
fn two_clients_on_one_session(a: (&[String], &str), b: (&[String], &str)) {
    let store = tempfile::tempdir().unwrap();
    let served = Served::start(store.path(), &[], &Peers::get().ts_agent());
    let mut first = Running::start(
        a.0,
        &served.url,
        a.1,
        &[
            "--prompt",
            "hello",
            "--permission",
            "never",
            "--linger",
            "60",
        ],
    );
    let seen = first.until("permission");
    let session = of_kind(seen, "session")[0]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    // B joins mid-turn: the history so far, then the live turn; it answers the permission
    // request A's turn waits on, and prompts once the turn is over.
    let (second, stderr) = sdk_client(
        b.0,
        &served.url,
        b.1,
        &["--session", &session, "--load", "--prompt", "second"],
    );
    let pairing = format!("A {a:?} / B {b:?}", a = a.1, b = b.1);
    assert_eq!(
        of_kind(&second, "loaded").len(),
        1,
        "{pairing}: {second:?}\n{stderr}"
    );
    let results = of_kind(&second, "result");
    assert_eq!(results.len(), 1, "{pairing}: {second:?}\n{stderr}");
    assert_eq!(results[0]["stopReason"], "end_turn");
    let answered = of_kind(&second, "permission");
    assert_eq!(
        answered.len(),
        2,
        "B answered A's permission request and its own turn's: {second:?}"
    );
    // A's turn completed on B's answer.
    let seen = first.until_count("result", 1).to_vec();
    let (a_turn, _) = split_at_result(&seen);
    let a_story = story(a_turn);
    let b_story = story(&second);
    assert!(a_story.len() >= 4, "{a_story:?}");
    assert_eq!(
        b_story[..a_story.len()],
        a_story[..],
        "{pairing}: B saw exactly what A saw of A's turn, once"
    );
    // A sees B's turn: B's prompt as the user's message, then the agent's answer.
    let b_turn = &b_story[a_story.len()..];
    assert!(!b_turn.is_empty(), "{b_story:?}");
    let deadline = Instant::now() + TIMEOUT;
    loop {
        first.seen.extend(first.events.try_iter());
        let (_, after) = split_at_result(&first.seen);
        if story(after).len() >= b_turn.len() {
            let echoed = after.iter().any(|e| {
                e["update"]["sessionUpdate"] == "user_message_chunk"
                    && e["update"]["content"]["text"] == "second"
            });
            assert!(echoed, "{pairing}: A sees B's prompt: {after:?}");
            assert_eq!(story(after), b_turn, "{pairing}: A sees B's turn");
            break;
        }
        assert!(Instant::now() < deadline, "A never saw B's turn: {after:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A's permission handler never answered: when B answered first, A was told it is settled.
    let settled = first
        .seen
        .iter()
        .any(|e| e["update"]["_meta"]["acpJournal"]["permission"]["outcome"] == "selected");
    assert!(settled, "{pairing}: A sees the outcome: {:?}", first.seen);
    // A drops; B comes back and carries on.
    first.kill();
    let (third, stderr) = sdk_client(
        b.0,
        &served.url,
        b.1,
        &["--session", &session, "--load", "--prompt", "third"],
    );
    assert_eq!(
        of_kind(&third, "result").len(),
        1,
        "{pairing}: {third:?}\n{stderr}"
    );
    served.stop();
}

#[test]
fn a_typescript_client_over_websocket_and_a_python_client_over_http_share_a_live_session() {
    let [(_, ts), (_, py)] = clients();
    two_clients_on_one_session((&ts, "ws"), (&py, "http"));
}

#[test]
fn a_python_client_over_websocket_and_a_typescript_client_over_http_share_a_live_session() {
    let [(_, ts), (_, py)] = clients();
    two_clients_on_one_session((&py, "ws"), (&ts, "http"));
}

#[test]
fn the_first_client_of_a_fresh_host_loads_a_journaled_session_with_its_history() {
    let store = tempfile::tempdir().unwrap();
    let [(_, ts), (_, py)] = clients();
    let served = Served::start(store.path(), &[], &Peers::get().ts_agent());
    let (before, stderr) = sdk_client(&ts, &served.url, "ws", &["--prompt", "hello"]);
    assert_eq!(of_kind(&before, "result").len(), 1, "{before:?}\n{stderr}");
    let session = of_kind(&before, "session")[0]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    served.stop();
    // A new host on the same store: its first client loads the session, which is in the
    // journal only (the agent's own load, or the journal's, brings it up).
    let served = Served::start(store.path(), &[], &Peers::get().ts_agent());
    let (after, stderr) = sdk_client(&py, &served.url, "http", &["--session", &session, "--load"]);
    assert_eq!(of_kind(&after, "loaded").len(), 1, "{after:?}\n{stderr}");
    assert_eq!(
        story(&after),
        story(&before),
        "the history, as the first host's client saw the turn"
    );
    served.stop();
}

#[test]
fn a_file_request_goes_to_the_attached_client_that_can_answer_it() {
    let store = tempfile::tempdir().unwrap();
    let agent = crate::util::scripted("files");
    let served = Served::start(store.path(), &[], &agent);
    let [(_, ts), (_, py)] = clients();
    // A (Python, WebSocket) declares fs.readTextFile; it makes the session and stays.
    let mut first = Running::start(
        &py,
        &served.url,
        "ws",
        &["--prompt", "read", "--fs", "from A", "--linger", "60"],
    );
    let seen = first.until("result").to_vec();
    assert!(
        story(&seen).contains(&"text read: from A".to_string()),
        "{seen:?}"
    );
    let session = of_kind(&seen, "session")[0]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    // B (TypeScript, HTTP) declares no fs and prompts: the agent's read goes to A, who can.
    let args = ["--session", session.as_str(), "--load", "--prompt", "read"];
    let (second, stderr) = sdk_client(&ts, &served.url, "http", &args);
    assert_eq!(of_kind(&second, "result").len(), 1, "{second:?}\n{stderr}");
    assert!(
        story(&second).contains(&"text read: from A".to_string()),
        "B's turn read through A: {second:?}"
    );
    assert_eq!(of_kind(first.until_count("fs", 2), "fs").len(), 2);
    // A leaves: nobody attached can read, so the host answers the agent itself.
    first.kill();
    let (third, stderr) = sdk_client(&ts, &served.url, "http", &args);
    assert_eq!(of_kind(&third, "result").len(), 1, "{third:?}\n{stderr}");
    assert!(
        story(&third).contains(&"text read: error -32603".to_string()),
        "{third:?}"
    );
    served.stop();
}
