//! The bridge (`--connect`) when its host goes away: what its log and the editor are told, and
//! what becomes of a prompt sent meanwhile — through when the host is back in time, else
//! answered "the host is unreachable" at `--init-timeout`. The host is `acp-journal serve` in
//! front of the TypeScript SDK's example agent; the editor is raw JSON lines, accepting notices.
//! And the bridge over TLS: to `serve --tls-cert` with a self-signed certificate (refused until
//! named by `--ca-file` or `SSL_CERT_FILE`) and to nginx with TLS; over plain `ws://` to another
//! host, the warning.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::serve::{Nginx, Served, TOKEN, bridge, certificate};
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

/// The bridge's log tells of a host, not of an agent restarted; and, over `ws://` to this
/// machine, it gives no warning of a token in clear.
fn assert_told_of_the_host(log: &str) {
    assert!(log.contains("the connection to the host dropped"), "{log}");
    assert!(log.contains("attempt 1 failed, the next in"), "{log}");
    assert!(!log.contains("restarted it"), "{log}");
    assert!(!log.contains("the agent exited"), "{log}");
    assert!(!log.contains("WITHOUT TLS"), "{log}");
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

/// The bridge to `url` with `options` and `env` (and the token): the editor makes a session and
/// has a turn through it. The bridge's log.
fn converse_through(url: &str, options: &[&str], env: &[(&str, &Path)]) -> String {
    let local = tempfile::tempdir().unwrap();
    let mut argv = bridge(local.path(), url);
    argv.extend(options.iter().map(|o| o.to_string()));
    let mut env = env.to_vec();
    env.push(("ACP_JOURNAL_TOKEN", Path::new(TOKEN)));
    let mut editor = TestClient::spawn_env(&argv, &env);
    let session = editor.start_session("/tmp");
    let answer = editor.prompt(&session, "over TLS");
    let log = String::from_utf8_lossy(&editor.stderr.lock().unwrap()).into_owned();
    assert_eq!(
        answer["result"]["stopReason"], "end_turn",
        "{answer}\n{log}"
    );
    let (code, _) = editor.finish();
    assert_eq!(code, 0, "{log}");
    log
}

/// The bridge to `url` (with the token), which the editor asks to initialize: it must end by
/// itself. Its exit code and log.
fn ends_by_itself(url: &str, options: &[&str]) -> (i32, String) {
    let local = tempfile::tempdir().unwrap();
    let mut argv = bridge(local.path(), url);
    argv.extend(options.iter().map(|o| o.to_string()));
    let mut editor = TestClient::spawn_env(&argv, &[("ACP_JOURNAL_TOKEN", Path::new(TOKEN))]);
    editor.send(&json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}));
    let log = || String::from_utf8_lossy(&editor.stderr.lock().unwrap()).into_owned();
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(status) = editor.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the bridge did not end: {}",
            log()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // Its stderr is read to its end (the collecting thread has dropped its handle).
    let deadline = Instant::now() + TIMEOUT;
    while std::sync::Arc::strong_count(&editor.stderr) > 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    (status.code().unwrap_or(-1), log())
}

#[test]
fn the_bridge_over_wss_refuses_a_certificate_it_does_not_trust_until_it_is_named() {
    let remote = tempfile::tempdir().unwrap();
    let (cert, key) = certificate(remote.path());
    let (cert_s, key_s) = (cert.display().to_string(), key.display().to_string());
    let served = Served::start(
        remote.path(),
        &["--tls-cert", &cert_s, "--tls-key", &key_s],
        &Peers::get().ts_agent(),
    );
    let url = served.ws_url();
    assert!(url.starts_with("wss://127.0.0.1:"), "{url}");
    // Self-signed, named nowhere: the bridge ends at once (no attempts again) with the fix named,
    // and no panic.
    let (code, log) = ends_by_itself(&url, &[]);
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains(&format!(
            "{url} has a certificate this bridge does not trust"
        )) && log.contains("--ca-file FILE"),
        "{log}"
    );
    assert!(!log.contains("panicked"), "{log}");
    assert!(!log.contains("attempt 1 failed"), "{log}");
    // Named by --ca-file, or by SSL_CERT_FILE as OpenSSL and curl take it: a conversation.
    converse_through(&url, &["--ca-file", &cert_s], &[]);
    converse_through(&url, &[], &[("SSL_CERT_FILE", &cert)]);
    // A --ca-file that holds no certificate is an error at start.
    let (code, log) = ends_by_itself(&url, &["--ca-file", &key_s]);
    assert_eq!(code, 2, "{log}");
    assert!(log.contains("no certificate in"), "{log}");
    served.stop();
}

#[test]
fn the_bridge_reaches_a_host_behind_nginx_with_tls() {
    let remote = tempfile::tempdir().unwrap();
    let served = Served::start(
        remote.path(),
        &["--allow-host", "localhost"],
        &Peers::get().ts_agent(),
    );
    let nginx = Nginx::start(served.addr);
    let url = format!("wss://localhost:{}/acp", nginx.port);
    let ca = nginx.ca().display().to_string();
    let log = converse_through(&url, &["--ca-file", &ca], &[]);
    assert!(log.contains(&format!("connected to {url}")), "{log}");
    drop(nginx);
    served.stop();
}

/// The bridge to `url` (with the token) in a network namespace of its own with no interface
/// up, so that no packet leaves this machine: its log once its first attempt failed.
fn first_attempt_alone(url: &str) -> String {
    let local = tempfile::tempdir().unwrap();
    let argv = bridge(local.path(), url);
    crate::util::full_tier("a network namespace of its own (unshare, as root)");
    let mut child = Command::new("unshare")
        .arg("--net")
        .arg("--")
        .args(&argv)
        .env("ACP_JOURNAL_TOKEN", TOKEN)
        .env("ACP_JOURNAL_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("unshare (util-linux)");
    let stderr = crate::util::collect_stderr(&mut child);
    let log = || String::from_utf8_lossy(&stderr.lock().unwrap()).into_owned();
    let deadline = Instant::now() + TIMEOUT;
    while !log().contains("attempt 1 failed") {
        assert!(
            Instant::now() < deadline && child.try_wait().unwrap().is_none(),
            "{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    log()
}

#[test]
fn a_bridge_over_plain_ws_to_another_host_warns_that_the_token_travels_in_clear() {
    let warning = "WITHOUT TLS: the token and every message travel in clear";
    for url in ["ws://192.0.2.1:9/acp", "http://box.example:9/acp"] {
        let log = first_attempt_alone(url);
        let shown = url.replacen("http://", "ws://", 1);
        assert!(
            log.contains(&format!("CONNECTING TO {shown} {warning}")),
            "{url}: {log}"
        );
    }
    for url in [
        "ws://127.0.0.1:9/acp",
        "ws://localhost:9/acp",
        "ws://[::1]:9/acp",
        "wss://192.0.2.1:9/acp",
    ] {
        let log = first_attempt_alone(url);
        assert!(!log.contains(warning), "{url}: {log}");
    }
    // A CA file means TLS.
    let (code, log) = ends_by_itself("ws://127.0.0.1:9/acp", &["--ca-file", "/etc/hostname"]);
    assert_eq!(code, 2, "{log}");
    assert!(log.contains("--ca-file is for wss://"), "{log}");
}
