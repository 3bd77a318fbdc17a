//! The bridge (`--connect`) when its host goes away: what its log and the editor are told, and
//! what becomes of a prompt sent meanwhile — through when the host is back in time, else
//! answered "the host is unreachable" at `--init-timeout`. The host is `acp-journal serve` in
//! front of the TypeScript SDK's example agent; the editor is raw JSON lines, accepting notices.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::serve::{Served, TOKEN, bridge};
use crate::util::{Peers, TIMEOUT, TestClient, reply_to};

/// A bridge to a host, with one session that had a turn.
struct Scene {
    served: Served,
    /// The editor, on the bridge's stdio.
    editor: TestClient,
    session: String,
    remote: tempfile::TempDir,
    _local: tempfile::TempDir,
}

impl Scene {
    /// `serve` on a free port; the bridge to it with extra `options`; initialize (notices
    /// declared), a session and a turn.
    fn start(options: &[&str]) -> Scene {
        let remote = tempfile::tempdir().unwrap();
        let local = tempfile::tempdir().unwrap();
        let served = Served::start(remote.path(), &[], &Peers::get().ts_agent());
        let mut argv = bridge(local.path(), &served.ws_url());
        argv.extend(options.iter().map(|o| o.to_string()));
        let mut editor = TestClient::spawn_env(&argv, &[("ACP_JOURNAL_TOKEN", Path::new(TOKEN))]);
        let init = editor.request(
            "initialize",
            json!({"protocolVersion":1,"clientCapabilities":{"session":{"notices":{}}}}),
        );
        assert!(init.get("result").is_some(), "{init}");
        let session = editor.new_session("/tmp");
        let first = editor.prompt(&session, "before");
        assert_eq!(first["result"]["stopReason"], "end_turn", "{first}");
        Scene {
            served,
            editor,
            session,
            remote,
            _local: local,
        }
    }

    /// Kill the host (`kill -9`) and wait until the bridge has seen the connection drop; the
    /// address it listened on.
    fn kill_host(&mut self) -> String {
        let listen = self.served.addr.to_string();
        // SAFETY: killing the server we started.
        unsafe { libc::kill(self.served.pid() as i32, libc::SIGKILL) };
        self.log_until("the connection to the host dropped");
        listen
    }

    /// The bridge's stderr once it contains `wanted`.
    fn log_until(&self, wanted: &str) -> String {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let log = self.log();
            if log.contains(wanted) {
                return log;
            }
            assert!(Instant::now() < deadline, "no {wanted:?} in: {log}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log(&self) -> String {
        String::from_utf8_lossy(&self.editor.stderr.lock().unwrap()).into_owned()
    }

    /// Send a prompt without waiting for its answer.
    fn send_prompt(&mut self, id: u64, text: &str) {
        let session = self.session.clone();
        self.editor.send(&json!({"jsonrpc":"2.0","id":id,"method":"session/prompt","params":{"sessionId":session,"prompt":[{"type":"text","text":text}]}}));
    }

    /// Read the editor's lines until one matches `wanted` (answering the agent's requests on
    /// the way); that one.
    fn until(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        loop {
            let Some(line) = self.editor.recv() else {
                panic!("the bridge ended; its log: {}", self.log());
            };
            let Some(msg) = line.json.clone() else {
                continue;
            };
            if wanted(&msg) {
                return msg;
            }
            if let Some(reply) = reply_to(&msg) {
                self.editor.send(&reply);
            }
        }
    }

    /// The titles of the notices the editor got, in order.
    fn notices(&self) -> Vec<String> {
        self.editor
            .received
            .iter()
            .filter_map(|r| r.json.as_ref())
            .filter(|m| m["params"]["update"]["sessionUpdate"] == "notice")
            .map(|m| m["params"]["update"]["title"].as_str().unwrap().to_string())
            .collect()
    }
}

/// A notice titled `title`.
fn notice(title: &str) -> impl Fn(&Value) -> bool + '_ {
    move |m| {
        m["params"]["update"]["sessionUpdate"] == "notice"
            && m["params"]["update"]["title"] == title
    }
}

/// The bridge's log tells of a host, not of an agent restarted.
fn assert_told_of_the_host(log: &str) {
    assert!(log.contains("the connection to the host dropped"), "{log}");
    assert!(log.contains("attempt 1 failed, the next in"), "{log}");
    assert!(!log.contains("restarted it"), "{log}");
    assert!(!log.contains("the agent exited"), "{log}");
}

#[test]
fn a_prompt_sent_while_the_host_is_down_goes_through_when_it_is_back_and_the_editor_is_told() {
    let mut scene = Scene::start(&[]);
    let listen = scene.kill_host();
    scene.send_prompt(100, "while it was down");
    let unreachable = scene.until(notice("The host is unreachable"));
    assert_eq!(unreachable["params"]["sessionId"], scene.session.as_str());
    assert_eq!(unreachable["params"]["update"]["severity"], "warning");
    // The host comes back on the same address and store, well within --init-timeout (60 s).
    scene.served = Served::start(
        scene.remote.path(),
        &["--listen", &listen],
        &Peers::get().ts_agent(),
    );
    let answer = scene.until(|m| m["id"] == 100);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(
        scene.notices(),
        ["The host is unreachable", "The host is back"],
        "told it is unreachable, then back"
    );
    let log = scene.log_until("the host is back after");
    assert_told_of_the_host(&log);
    let again = format!("connected to {} again", scene.served.ws_url());
    assert!(log.contains(&again), "{log}");
    let Scene {
        editor,
        served,
        session,
        _local: local,
        ..
    } = scene;
    editor.finish();
    served.stop();
    // The bridge's journal tells the same: the host dropped, the session restored on it.
    let (code, shown, _) = crate::util::run_cli_store(local.path(), &["show", &session]);
    assert_eq!(code, 0);
    assert!(
        shown.contains("── the connection to the host dropped: acp-journal connects again"),
        "{shown}"
    );
    assert!(shown.contains("── restored on the host ("), "{shown}");
    assert!(!shown.contains("restarted"), "{shown}");
    let (code, stats, _) = crate::util::run_cli_store(local.path(), &["stats", &session]);
    assert_eq!(code, 0);
    assert!(
        stats.contains("1 dropped connections to the host (the bridge connected again)"),
        "{stats}"
    );
    assert!(!stats.contains("agent restarts"), "{stats}");
}

#[test]
fn a_prompt_sent_while_the_host_stays_down_is_answered_unreachable_at_the_init_timeout() {
    let mut scene = Scene::start(&["--init-timeout", "3"]);
    scene.kill_host();
    let sent = Instant::now();
    scene.send_prompt(100, "into the void");
    let answer = scene.until(|m| m["id"] == 100);
    let waited = sent.elapsed();
    let error = &answer["error"];
    assert_eq!(error["code"], -32603, "{answer}");
    assert_eq!(
        error["message"],
        "the host is unreachable: send the request again once it is back"
    );
    assert_eq!(error["data"]["method"], "session/prompt");
    assert!(
        error["data"]["reason"]
            .as_str()
            .unwrap()
            .contains("within 3 s (--init-timeout)"),
        "{error}"
    );
    // Bounded: 3 s nominal; a generous margin for a loaded machine.
    assert!(waited < Duration::from_secs(20), "{waited:?}");
    assert_eq!(scene.notices(), ["The host is unreachable"]);
    let log = scene.log_until("the host did not answer initialize within 3 s");
    assert_told_of_the_host(&log);
    scene.editor.finish();
}
