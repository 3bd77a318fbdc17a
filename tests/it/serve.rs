//! `acp-journal serve`: ACP over Streamable HTTP and WebSocket, driven by the SDKs' own client
//! transports (TypeScript 2.4.0, Python 0.12.1) and by raw sockets for what no client sends.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::{Peers, TIMEOUT, bin};

/// The token every test server takes.
pub const TOKEN: &str = "test-token-0123456789";

/// `acp-journal serve` in front of an agent, on a free loopback port.
pub struct Served {
    child: Child,
    /// `http://127.0.0.1:PORT/acp`.
    pub url: String,
    pub addr: SocketAddr,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Served {
    /// Serve `agent` journaling into `store`, with extra `options` (before `--`).
    pub fn start(store: &Path, options: &[&str], agent: &[String]) -> Served {
        Served::start_env(store, options, agent, &[("ACP_JOURNAL_TOKEN", TOKEN)])
    }

    pub fn start_env(
        store: &Path,
        options: &[&str],
        agent: &[String],
        env: &[(&str, &str)],
    ) -> Served {
        let mut child = Command::new(bin())
            .args(["--journal-dir", &store.display().to_string(), "serve"])
            .args(match options.contains(&"--listen") {
                true => vec!["--grace", "2"],
                false => vec!["--listen", "127.0.0.1:0", "--grace", "2"],
            })
            .args(options)
            .arg("--")
            .args(agent)
            .envs(env.iter().copied())
            .env("ACP_JOURNAL_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning acp-journal serve");
        let stderr = crate::util::collect_stderr(&mut child);
        let deadline = Instant::now() + TIMEOUT;
        let url = loop {
            let text = String::from_utf8_lossy(&stderr.lock().unwrap()).into_owned();
            if let Some(at) = text.find("serving ACP at ") {
                let rest = &text[at + "serving ACP at ".len()..];
                break rest.split_whitespace().next().unwrap().to_string();
            }
            assert!(Instant::now() < deadline, "serve did not start: {text}");
            if let Ok(Some(status)) = child.try_wait() {
                panic!("serve exited ({status}): {text}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let authority = url.split("://").nth(1).unwrap().split('/').next().unwrap();
        let addr = authority.parse().unwrap();
        Served {
            child,
            url,
            addr,
            stderr,
        }
    }

    /// The same URL as `ws://`.
    pub fn ws_url(&self) -> String {
        self.url
            .replacen("http://", "ws://", 1)
            .replacen("https://", "wss://", 1)
    }

    /// What the server logged so far.
    pub fn log(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stop it (SIGTERM) and wait for it.
    pub fn stop(mut self) -> String {
        self.terminate();
        self.log()
    }

    fn terminate(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        panic!("serve did not stop on SIGTERM: {}", self.log());
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// An HTTP/1.1 response read off a raw socket.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }
}

/// One request to `/acp` on its own socket (`Connection: close`); `headers` as `Name: value`
/// lines.
pub fn request(addr: SocketAddr, method: &str, headers: &[String], body: &[u8]) -> Reply {
    request_to(addr, method, "/acp", headers, body)
}

/// One request to `path` on its own socket (`Connection: close`); `headers` as `Name: value`
/// lines.
pub fn request_to(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[String],
    body: &[u8],
) -> Reply {
    let mut socket = TcpStream::connect(addr).unwrap();
    socket.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for h in headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    socket.write_all(head.as_bytes()).unwrap();
    // A refused body may be answered before it is all sent.
    let _ = socket.write_all(body);
    read_reply(&mut BufReader::new(socket), true)
}

fn read_reply(reader: &mut impl BufRead, to_end: bool) -> Reply {
    let mut status_line = String::new();
    reader.read_line(&mut status_line).unwrap();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .unwrap_or_else(|| panic!("no status in {status_line:?}"))
        .parse()
        .unwrap();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap();
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    let mut body = Vec::new();
    let length = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .map(|(_, v)| v.parse::<usize>().unwrap());
    match length {
        Some(n) => {
            body.resize(n, 0);
            reader.read_exact(&mut body).unwrap();
        }
        None if to_end && status != 101 => {
            let _ = reader.read_to_end(&mut body);
        }
        None => {}
    }
    Reply {
        status,
        headers,
        body,
    }
}

pub fn bearer() -> String {
    format!("Authorization: Bearer {TOKEN}")
}

pub const JSON: &str = "Content-Type: application/json";

pub fn initialize() -> Vec<u8> {
    json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}})
        .to_string()
        .into_bytes()
}

/// A raw Streamable HTTP client: `initialize` POSTed, the connection stream read on a thread.
struct RawHttp {
    addr: SocketAddr,
    connection: String,
    events: std::sync::mpsc::Receiver<Value>,
}

impl RawHttp {
    fn open(addr: SocketAddr) -> RawHttp {
        let reply = request(addr, "POST", &[bearer(), JSON.into()], &initialize());
        assert_eq!(
            reply.status,
            200,
            "{:?}",
            String::from_utf8_lossy(&reply.body)
        );
        assert_eq!(reply.json()["id"], 0);
        let connection = reply.header("acp-connection-id").unwrap().to_string();
        let mut socket = TcpStream::connect(addr).unwrap();
        let head = format!(
            "GET /acp HTTP/1.1\r\nHost: {addr}\r\n{}\r\nAccept: text/event-stream\r\nAcp-Connection-Id: {connection}\r\n\r\n",
            bearer()
        );
        socket.write_all(head.as_bytes()).unwrap();
        let mut reader = BufReader::new(socket);
        let reply = read_reply(&mut reader, false);
        assert_eq!(reply.status, 200);
        assert_eq!(reply.header("content-type"), Some("text/event-stream"));
        let (tx, events) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // Chunked transfer: chunk sizes and data lines interleave; data lines carry JSON.
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                if let Some(data) = line.trim_end().strip_prefix("data: ")
                    && let Ok(v) = serde_json::from_str::<Value>(data)
                    && tx.send(v).is_err()
                {
                    return;
                }
                line.clear();
            }
        });
        RawHttp {
            addr,
            connection,
            events,
        }
    }

    fn post(&self, message: &Value) -> Reply {
        let headers = [
            bearer(),
            JSON.into(),
            format!("Acp-Connection-Id: {}", self.connection),
        ];
        request(self.addr, "POST", &headers, message.to_string().as_bytes())
    }

    /// Events until one satisfies `done` (which is returned with those before it).
    fn until(&self, done: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut seen = Vec::new();
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let event = self
                .events
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("timed out; saw {seen:?}"));
            let end = done(&event);
            seen.push(event);
            if end {
                return seen;
            }
        }
    }

    /// A whole conversation with the TypeScript example agent: a session, a prompt, its
    /// permission request allowed; returns the session's ID.
    fn converse(&self) -> String {
        let reply = self.post(&json!({"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}));
        assert_eq!(reply.status, 202);
        let seen = self.until(|e| e["id"] == 1);
        let session = seen.last().unwrap()["result"]["sessionId"]
            .as_str()
            .unwrap()
            .to_string();
        let reply = self.post(&json!({"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":session,"prompt":[{"type":"text","text":"hello"}]}}));
        assert_eq!(reply.status, 202);
        let seen = self.until(|e| e["method"] == "session/request_permission");
        let asked = seen.last().unwrap();
        let option = asked["params"]["options"][0]["optionId"].clone();
        let answer = json!({"jsonrpc":"2.0","id":asked["id"],"result":{"outcome":{"outcome":"selected","optionId":option}}});
        assert_eq!(self.post(&answer).status, 202);
        let seen = self.until(|e| e["id"] == 2);
        assert_eq!(seen.last().unwrap()["result"]["stopReason"], "end_turn");
        session
    }
}

#[test]
fn every_request_needs_the_token() {
    let store = tempfile::tempdir().unwrap();
    let served = Served::start(store.path(), &[], &Peers::get().ts_agent());
    let wrong = "Authorization: Bearer test-token-0123456788".to_string();
    for auth in [
        vec![],
        vec![wrong.clone()],
        vec!["Authorization: Basic dGVzdA==".into()],
    ] {
        let mut headers = auth.clone();
        headers.push(JSON.into());
        let reply = request(served.addr, "POST", &headers, &initialize());
        assert_eq!(reply.status, 401, "{auth:?}");
        assert_eq!(reply.header("www-authenticate"), Some("Bearer"));
        assert_eq!(request(served.addr, "GET", &auth, b"").status, 401);
        assert_eq!(request(served.addr, "DELETE", &auth, b"").status, 401);
        let mut upgrade = auth.clone();
        upgrade.extend([
            "Upgrade: websocket".to_string(),
            "Connection: Upgrade".into(),
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==".into(),
            "Sec-WebSocket-Version: 13".into(),
        ]);
        assert_eq!(request(served.addr, "GET", &upgrade, b"").status, 401);
    }
    let reply = request(served.addr, "POST", &[bearer(), JSON.into()], &initialize());
    assert_eq!(reply.status, 200);
    assert!(reply.json()["result"]["agentCapabilities"]["loadSession"] == true);
    let log = served.stop();
    assert!(!log.contains(TOKEN), "the token is never logged");
}

#[test]
fn bad_input_gets_a_clear_error_and_harms_nothing_else() {
    let store = tempfile::tempdir().unwrap();
    let served = Served::start(store.path(), &[], &Peers::get().ts_agent());
    let addr = served.addr;
    // Hundreds of sockets that connect and never finish a request.
    let mut half_open = Vec::new();
    for n in 0..300 {
        let mut s = TcpStream::connect(addr).unwrap();
        if n % 2 == 0 {
            s.write_all(b"POST /acp HTTP/1.1\r\nContent-Le").unwrap();
        }
        half_open.push(s);
    }
    let auth = || vec![bearer(), JSON.to_string()];
    let garbage = request(addr, "POST", &auth(), b"this is not json");
    assert_eq!(garbage.status, 400);
    assert_eq!(garbage.json()["error"]["code"], -32700);
    let batch = request(
        addr,
        "POST",
        &auth(),
        b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"}]",
    );
    assert_eq!(batch.status, 400);
    assert_eq!(batch.json()["error"]["code"], -32600);
    let huge = vec![b' '; 17 << 20];
    assert_eq!(request(addr, "POST", &auth(), &huge).status, 413);
    let not_init = json!({"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}).to_string();
    assert_eq!(
        request(addr, "POST", &auth(), not_init.as_bytes()).status,
        400
    );
    let mut unknown = auth();
    unknown.push("Acp-Connection-Id: 0123".into());
    assert_eq!(
        request(addr, "POST", &unknown, not_init.as_bytes()).status,
        404
    );
    assert_eq!(request(addr, "GET", &unknown, b"").status, 404);
    assert_eq!(request(addr, "DELETE", &unknown, b"").status, 404);
    assert_eq!(request(addr, "PUT", &auth(), b"{}").status, 405);
    let mut form = vec![bearer(), "Content-Type: text/plain".into()];
    assert_eq!(request(addr, "POST", &form, &initialize()).status, 415);
    form.clear();
    // Then a whole conversation still works.
    let client = RawHttp::open(addr);
    let session = client.converse();
    let reply = request(
        addr,
        "DELETE",
        &[
            bearer(),
            format!("Acp-Connection-Id: {}", client.connection),
        ],
        b"",
    );
    assert_eq!(reply.status, 202);
    drop(half_open);
    served.stop();
    let show = Command::new(bin())
        .args([
            "--journal-dir",
            &store.path().display().to_string(),
            "show",
            &session,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(text.contains("❯ hello"), "{text}");
    assert!(text.contains("end_turn"), "{text}");
}

#[test]
fn the_agents_turn_goes_on_after_its_connection_drops_and_a_later_connection_answers_its_permission_request()
 {
    let store = tempfile::tempdir().unwrap();
    let served = Served::start(
        store.path(),
        &["--load", "journal"],
        &Peers::get().ts_agent(),
    );
    let a = RawHttp::open(served.addr);
    let reply = a.post(&json!({"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}));
    assert_eq!(reply.status, 202);
    let session = a.until(|e| e["id"] == 1).last().unwrap()["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    a.post(&json!({"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":session,"prompt":[{"type":"text","text":"hello"}]}}));
    a.until(|e| e["params"]["update"]["sessionUpdate"] == "tool_call");
    // A's client vanishes (no DELETE): its stream is dropped mid-turn.
    drop(a);
    // B comes, loads the session (from the journal), and is asked what A was to be asked.
    let b = RawHttp::open(served.addr);
    let load = json!({"jsonrpc":"2.0","id":5,"method":"session/load","params":{"sessionId":session,"cwd":"/tmp","mcpServers":[]}});
    assert_eq!(b.post(&load).status, 202);
    let seen = b.until(|e| e["method"] == "session/request_permission");
    let answered_at = seen
        .iter()
        .position(|e| e["id"] == 5)
        .expect("the load's answer");
    assert!(
        answered_at < seen.len() - 1,
        "the request comes after the load's answer"
    );
    let replayed: Vec<&Value> = seen[..answered_at].iter().collect();
    assert!(
        replayed
            .iter()
            .any(|e| e["params"]["update"]["sessionUpdate"] == "user_message_chunk"),
        "the history: {replayed:?}"
    );
    let asked = seen.last().unwrap();
    let option = asked["params"]["options"][0]["optionId"].clone();
    b.post(&json!({"jsonrpc":"2.0","id":asked["id"],"result":{"outcome":{"outcome":"selected","optionId":option}}}));
    // The turn goes on; B sees the rest of it live, and the journal its end.
    b.until(|e| {
        e["params"]["update"]["sessionUpdate"] == "tool_call_update"
            && e["params"]["update"]["status"] == "completed"
    });
    let text = show_until(store.path(), &session, "end_turn");
    assert!(
        text.contains("? permission for Modifying critical configuration file: allow"),
        "{text}"
    );
    served.stop();
}

/// `acp-journal show SESSION` once it contains `wanted` (the session is live: polled).
pub fn show_until(store: &Path, session: &str, wanted: &str) -> String {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let show = Command::new(bin())
            .args([
                "--journal-dir",
                &store.display().to_string(),
                "show",
                session,
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&show.stdout).into_owned();
        if text.contains(wanted) {
            return text;
        }
        assert!(Instant::now() < deadline, "no {wanted:?} in: {text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The pids of `parent`'s children.
fn children(parent: u32) -> Vec<u32> {
    let path = format!("/proc/{parent}/task/{parent}/children");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

#[test]
fn an_agent_killed_under_serve_is_started_again_and_its_session_goes_on() {
    let store = tempfile::tempdir().unwrap();
    let served = Served::start(store.path(), &[], &Peers::get().ts_agent());
    let client = RawHttp::open(served.addr);
    let session = client.converse();
    let agents: Vec<u32> = children(served.pid())
        .into_iter()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.contains("agent.js"))
        })
        .collect();
    assert_eq!(agents.len(), 1, "one agent process");
    // SAFETY: killing the agent we started.
    unsafe { libc::kill(agents[0] as i32, libc::SIGKILL) };
    // The same connection's next prompt: the session is restored on the new agent.
    let prompt = json!({"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":session,"prompt":[{"type":"text","text":"again"}]}});
    let deadline = Instant::now() + TIMEOUT;
    let answer = loop {
        client.post(&prompt);
        let seen = client.until(|e| e["id"] == 7 || e["method"] == "session/request_permission");
        let last = seen.last().unwrap().clone();
        if last["method"] == "session/request_permission" {
            let option = last["params"]["options"][0]["optionId"].clone();
            client.post(&json!({"jsonrpc":"2.0","id":last["id"],"result":{"outcome":{"outcome":"selected","optionId":option}}}));
            break client.until(|e| e["id"] == 7).last().unwrap().clone();
        }
        // Answered with "the agent was restarted" while it died: send it again.
        assert!(last.get("error").is_some(), "{last}");
        assert!(Instant::now() < deadline);
    };
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let log = served.stop();
    assert!(log.contains("restarted it"), "{log}");
}

/// The bridge's command line: the stdio agent an editor runs.
pub fn bridge(store: &Path, url: &str) -> Vec<String> {
    vec![
        bin().display().to_string(),
        "--journal-dir".into(),
        store.display().to_string(),
        "--connect".into(),
        url.to_string(),
    ]
}

#[test]
fn a_stdio_client_talks_to_serve_through_the_bridge_and_both_sides_journal() {
    let peers = Peers::get();
    let remote = tempfile::tempdir().unwrap();
    let local = tempfile::tempdir().unwrap();
    let served = Served::start(remote.path(), &[], &peers.ts_agent());
    let mut argv = peers.py_client();
    argv.extend(bridge(local.path(), &served.ws_url()));
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(local.path())
        .env("ACP_JOURNAL_TOKEN", TOKEN)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"Add a greeting\nAnd another one\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.matches("| Agent:").count(),
        4,
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    served.stop();
    for store in [local.path(), remote.path()] {
        let list = Command::new(bin())
            .args([
                "--journal-dir",
                &store.display().to_string(),
                "list",
                "--json",
            ])
            .output()
            .unwrap();
        let sessions: Value = serde_json::from_slice(&list.stdout).unwrap();
        assert_eq!(sessions.as_array().unwrap().len(), 1, "{sessions}");
        assert_eq!(sessions[0]["turns"], 2, "{sessions}");
    }
}

#[test]
fn the_bridge_reconnects_when_the_host_comes_back_and_the_session_goes_on() {
    let peers = Peers::get();
    let remote = tempfile::tempdir().unwrap();
    let local = tempfile::tempdir().unwrap();
    let served = Served::start(remote.path(), &[], &peers.ts_agent());
    let port = served.addr.port().to_string();
    let listen = format!("127.0.0.1:{port}");
    let url = served.ws_url();
    let mut client = crate::util::TestClient::spawn_env(
        &bridge(local.path(), &url),
        &[("ACP_JOURNAL_TOKEN", Path::new(TOKEN))],
    );
    let init = client.request(
        "initialize",
        json!({"protocolVersion":1,"clientCapabilities":{}}),
    );
    assert_eq!(
        init["result"]["agentCapabilities"]["loadSession"], true,
        "{init}"
    );
    let new = client.request("session/new", json!({"cwd":"/tmp","mcpServers":[]}));
    let session = new["result"]["sessionId"].as_str().unwrap().to_string();
    let first = client.prompt(&session, "before");
    assert_eq!(first["result"]["stopReason"], "end_turn", "{first}");
    // The host dies hard and comes back on the same port, with the same store.
    let pid = served.pid();
    // SAFETY: killing the server we started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    drop(served);
    let served = Served::start(remote.path(), &["--listen", &listen], &peers.ts_agent());
    let mut answer = client.prompt(&session, "after");
    if answer.get("error").is_some() {
        // The prompt raced the drop: the proxy answered that the connection to the host dropped.
        answer = client.prompt(&session, "after");
    }
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    client.finish();
    served.stop();
    let text = show_until(local.path(), &session, "❯ after");
    assert!(text.contains("❯ before"), "{text}");
}

/// A WebSocket client on a plain socket, with the token.
pub fn websocket(served: &Served) -> tokio_tungstenite::tungstenite::WebSocket<TcpStream> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = served.ws_url().into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let socket = TcpStream::connect(served.addr).unwrap();
    socket.set_read_timeout(Some(TIMEOUT)).unwrap();
    let (ws, response) = tokio_tungstenite::tungstenite::client::client(request, socket).unwrap();
    assert!(response.headers().contains_key("acp-connection-id"));
    ws
}

/// Send `message` and read frames until the answer to `id`.
pub fn ws_call(
    ws: &mut tokio_tungstenite::tungstenite::WebSocket<TcpStream>,
    message: Value,
) -> Value {
    use tokio_tungstenite::tungstenite::Message;
    let id = message["id"].clone();
    ws.send(Message::text(message.to_string())).unwrap();
    loop {
        if let Message::Text(text) = ws.read().unwrap() {
            let v: Value = serde_json::from_str(&text).unwrap();
            if v["id"] == id && v.get("method").is_none() {
                return v;
            }
        }
    }
}

/// The process's own resident memory (`RssAnon`, KiB): what it allocated, not the pages of its
/// binary and libraries it has touched, which grow with the binary's size and hold no message.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[test]
fn a_client_that_stops_reading_is_dropped_and_slows_nobody() {
    use tokio_tungstenite::tungstenite::Message;
    let store = tempfile::tempdir().unwrap();
    let queue = (1 << 20).to_string();
    let served = Served::start(
        store.path(),
        &["--client-queue", &queue],
        &crate::util::scripted("mix"),
    );
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}});
    let new = json!({"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}});
    let mut slow = websocket(&served);
    ws_call(&mut slow, init.clone());
    let session = ws_call(&mut slow, new.clone())["result"]["sessionId"].clone();
    // 16 MiB of updates for a client that reads none of them.
    let flood = json!({"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":session,"prompt":[{"type":"text","text":"updates=2000 big=16384"}]}});
    slow.send(Message::text(flood.to_string())).unwrap();
    // Another client converses meanwhile.
    let mut other = websocket(&served);
    ws_call(&mut other, init);
    let mine = ws_call(&mut other, json!({"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}))["result"]["sessionId"].clone();
    let prompt = json!({"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":mine,"prompt":[{"type":"text","text":"updates=3"}]}});
    assert_eq!(
        ws_call(&mut other, prompt)["result"]["stopReason"],
        "end_turn"
    );
    let deadline = Instant::now() + TIMEOUT;
    while !served.log().contains("does not read what it is sent") {
        assert!(Instant::now() < deadline, "{}", served.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    // The flood was journaled whole for the session, and the host holds no copy of it.
    let text = show_until(store.path(), session.as_str().unwrap(), "end_turn");
    assert!(text.contains("❯ updates=2000"), "{text}");
    assert!(
        rss_kib(served.pid()) < 64 * 1024,
        "{} KiB",
        rss_kib(served.pid())
    );
    drop(slow);
    served.stop();
}

#[test]
fn a_browser_websocket_from_another_origin_is_refused() {
    let store = tempfile::tempdir().unwrap();
    let served = Served::start(
        store.path(),
        &["--allow-origin", "https://editor.example"],
        &Peers::get().ts_agent(),
    );
    let upgrade = |origin: Option<String>| {
        let mut headers = vec![
            bearer(),
            "Upgrade: websocket".to_string(),
            "Connection: Upgrade".into(),
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==".into(),
            "Sec-WebSocket-Version: 13".into(),
        ];
        headers.extend(origin.map(|o| format!("Origin: {o}")));
        request(served.addr, "GET", &headers, b"").status
    };
    assert_eq!(upgrade(Some("https://evil.example".into())), 403);
    assert_eq!(
        upgrade(Some(format!("http://{}.evil.example", served.addr.ip()))),
        403
    );
    // Its own host and port with another scheme, or none, is another origin (the server has no
    // TLS: its pages are http://).
    let addr = served.addr;
    for other in [
        format!("https://{addr}"),
        format!("x://{addr}"),
        format!("{addr}"),
        format!("http://user@{addr}"),
        format!("http://{}:{}", addr.ip(), addr.port() + 1),
    ] {
        assert_eq!(upgrade(Some(other.clone())), 403, "{other}");
    }
    assert_eq!(
        upgrade(Some(format!("http://{}", served.addr))),
        101,
        "its own origin"
    );
    assert_eq!(
        upgrade(Some("https://editor.example".into())),
        101,
        "--allow-origin"
    );
    assert_eq!(upgrade(None), 101, "not a browser");
    served.stop();
}

/// An SDK client's run against `url`: its JSON events (stdout), and its stderr.
pub fn sdk_client(
    client: &[String],
    url: &str,
    transport: &str,
    args: &[&str],
) -> (Vec<Value>, String) {
    sdk_client_env(client, url, transport, args, &[])
}

/// The same, with extra environment variables.
fn sdk_client_env(
    client: &[String],
    url: &str,
    transport: &str,
    args: &[&str],
    env: &[(&str, &Path)],
) -> (Vec<Value>, String) {
    let out = Command::new(&client[0])
        .args(&client[1..])
        .args(["--url", url, "--transport", transport, "--token", TOKEN])
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let events = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (events, String::from_utf8_lossy(&out.stderr).into_owned())
}

pub fn of_kind<'a>(events: &'a [Value], event: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == event).collect()
}

/// The agent's texts and tool calls among `events`' updates, in order.
pub fn story(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["event"] == "update")
        .filter_map(|e| {
            let u = &e["update"];
            match u["sessionUpdate"].as_str()? {
                "agent_message_chunk" => Some(format!("text {}", u["content"]["text"].as_str()?)),
                "tool_call" => Some(format!("tool {}", u["toolCallId"].as_str()?)),
                _ => None,
            }
        })
        .collect()
}

pub fn clients() -> [(&'static str, Vec<String>); 2] {
    let peers = Peers::get();
    [
        ("typescript", peers.ts_remote_client()),
        ("python", peers.py_remote_client()),
    ]
}

#[test]
fn both_sdk_clients_converse_over_http_and_websocket_with_permission_requests() {
    let store = tempfile::tempdir().unwrap();
    let served = Served::start(store.path(), &[], &Peers::get().ts_agent());
    let mut stories = Vec::new();
    for (name, client) in clients() {
        for transport in ["http", "ws"] {
            let (events, stderr) =
                sdk_client(&client, &served.url, transport, &["--prompt", "hello"]);
            let results = of_kind(&events, "result");
            assert_eq!(
                results.len(),
                1,
                "{name} over {transport}: {events:?}\n{stderr}"
            );
            assert_eq!(results[0]["stopReason"], "end_turn");
            let asked = of_kind(&events, "permission");
            assert_eq!(asked.len(), 1, "{name} over {transport}: {events:?}");
            stories.push(story(&events));
        }
    }
    // HTTP/2 by prior knowledge (h2c), with the Python SDK's own HTTP/2 client.
    let python = &clients()[1].1;
    let (events, stderr) = sdk_client(python, &served.url, "http", &["--prompt", "hello", "--h2c"]);
    assert_eq!(
        of_kind(&events, "result").len(),
        1,
        "h2c: {events:?}\n{stderr}"
    );
    stories.push(story(&events));
    assert!(stories[0].len() >= 4, "{stories:?}");
    assert!(
        stories.iter().all(|s| *s == stories[0]),
        "every client saw the same turn: {stories:?}"
    );
    served.stop();
    let list = Command::new(bin())
        .args([
            "--journal-dir",
            &store.path().display().to_string(),
            "list",
            "--json",
        ])
        .output()
        .unwrap();
    let sessions: Value = serde_json::from_slice(&list.stdout).unwrap();
    let sessions = sessions.as_array().unwrap();
    assert_eq!(sessions.len(), 5, "{sessions:?}");
    assert!(sessions.iter().all(|s| s["turns"] == 1), "{sessions:?}");
}

#[test]
fn a_client_cut_mid_turn_then_another_loads_the_session_and_answers_with_nothing_lost_or_twice() {
    let store = tempfile::tempdir().unwrap();
    let served = Served::start(
        store.path(),
        &["--load", "journal"],
        &Peers::get().ts_agent(),
    );
    let [(_, ts), (_, py)] = clients();
    // The whole turn as one client sees it, for comparison.
    let (whole, _) = sdk_client(&ts, &served.url, "ws", &["--prompt", "hello"]);
    let whole = story(&whole);
    // A TypeScript client over HTTP vanishes two updates into its turn (before the agent asks
    // its permission).
    let (cut, stderr) = sdk_client(
        &ts,
        &served.url,
        "http",
        &["--prompt", "hello", "--drop-after", "2"],
    );
    let session = of_kind(&cut, "session")[0]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(of_kind(&cut, "result").is_empty(), "{cut:?}\n{stderr}");
    // A Python client over WebSocket loads the session: the history, then the permission
    // request the turn is waiting on, which it answers; the turn then ends.
    let (joined, stderr) = sdk_client(
        &py,
        &served.url,
        "ws",
        &["--session", &session, "--load", "--linger", "3"],
    );
    assert_eq!(of_kind(&joined, "loaded").len(), 1, "{joined:?}\n{stderr}");
    assert_eq!(
        of_kind(&joined, "permission").len(),
        1,
        "{joined:?}\n{stderr}"
    );
    show_until(store.path(), &session, "end_turn");
    // A third client, later, loads the finished session: the whole turn, once.
    let (after, stderr) = sdk_client(&ts, &served.url, "ws", &["--session", &session, "--load"]);
    assert_eq!(of_kind(&after, "loaded").len(), 1, "{after:?}\n{stderr}");
    assert_eq!(
        story(&after),
        whole,
        "the journal's replay is the turn as it happened"
    );
    served.stop();
}

/// A self-signed certificate for 127.0.0.1 and localhost (`openssl`), as `cert.pem`/`key.pem`.
pub fn certificate(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    crate::util::full_tier("the openssl CLI");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let out = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "2", "-subj", "/CN=acp-journal test"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (cert, key)
}

/// An SDK client's run that trusts `ca` (Node: NODE_EXTRA_CA_CERTS; Python's httpx:
/// SSL_CERT_FILE), which must end its turn.
fn sdk_client_trusting(
    client: &[String],
    ca: &Path,
    url: &str,
    transport: &str,
    args: &[&str],
) -> Vec<Value> {
    let env = [("NODE_EXTRA_CA_CERTS", ca), ("SSL_CERT_FILE", ca)];
    let (events, stderr) = sdk_client_env(client, url, transport, args, &env);
    assert_eq!(
        of_kind(&events, "result").len(),
        1,
        "{url} {transport}: {events:?}\n{stderr}"
    );
    events
}

#[test]
fn tls_with_the_sdk_clients_over_https_and_wss() {
    let store = tempfile::tempdir().unwrap();
    let (cert, key) = certificate(store.path());
    let (cert_s, key_s) = (cert.display().to_string(), key.display().to_string());
    let served = Served::start(
        store.path(),
        &["--tls-cert", &cert_s, "--tls-key", &key_s],
        &Peers::get().ts_agent(),
    );
    assert!(served.url.starts_with("https://"), "{}", served.url);
    for (_, client) in clients() {
        for transport in ["http", "ws"] {
            sdk_client_trusting(&client, &cert, &served.url, transport, &["--prompt", "hi"]);
        }
    }
    // Plain HTTP on the TLS port gets nowhere.
    let plain = std::panic::catch_unwind(|| {
        request(served.addr, "POST", &[bearer(), JSON.into()], &initialize())
    });
    assert!(plain.is_err() || plain.unwrap().status != 200);
    served.stop();
}

/// nginx with TLS in front of `upstream` (`docs/nginx-acp.conf`, its self-signed certificate for
/// 127.0.0.1 and localhost in `cert.pem`), on a free loopback port; stopped when dropped.
pub struct Nginx {
    child: Child,
    prefix: tempfile::TempDir,
    pub port: u16,
}

impl Nginx {
    pub fn start(upstream: SocketAddr) -> Nginx {
        crate::util::full_tier("nginx (scripts/install-nginx.sh)");
        let prefix = tempfile::tempdir().unwrap();
        certificate(prefix.path());
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = std::fs::read_to_string(crate::util::root().join("docs/nginx-acp.conf"))
            .unwrap()
            .replace("__PREFIX__", &prefix.path().display().to_string())
            .replace("__PORT__", &port.to_string())
            .replace("__UPSTREAM__", &upstream.to_string());
        let conf = prefix.path().join("nginx.conf");
        std::fs::write(&conf, config).unwrap();
        let mut child = Command::new("/usr/sbin/nginx")
            .args(["-p", &prefix.path().display().to_string(), "-c"])
            .arg(&conf)
            .args(["-g", "daemon off;"])
            .stderr(Stdio::piped())
            .spawn()
            .expect("nginx: run scripts/install-nginx.sh (scripts/test.sh does)");
        let deadline = Instant::now() + TIMEOUT;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "nginx did not start");
            assert!(
                child.try_wait().unwrap().is_none(),
                "nginx exited: {:?}",
                child.wait_with_output()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Nginx {
            child,
            prefix,
            port,
        }
    }

    /// Its certificate, for clients to trust.
    pub fn ca(&self) -> std::path::PathBuf {
        self.prefix.path().join("cert.pem")
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM, not SIGKILL: the master takes its workers with it.
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

#[test]
fn behind_nginx_with_tls_both_sdk_clients_work() {
    let store = tempfile::tempdir().unwrap();
    // nginx passes on the name clients use (`proxy_set_header Host $host`): serve admits it.
    let served = Served::start(
        store.path(),
        &["--allow-host", "localhost"],
        &Peers::get().ts_agent(),
    );
    let nginx = Nginx::start(served.addr);
    let url = format!("https://localhost:{}/acp", nginx.port);
    let ca = nginx.ca();
    let mut stories = Vec::new();
    for (_, client) in clients() {
        for transport in ["http", "ws"] {
            let events = sdk_client_trusting(&client, &ca, &url, transport, &["--prompt", "hi"]);
            assert_eq!(of_kind(&events, "permission").len(), 1, "{events:?}");
            stories.push(story(&events));
        }
    }
    assert!(stories.iter().all(|s| *s == stories[0]), "{stories:?}");
    drop(nginx);
    served.stop();
}

#[test]
fn an_http_connection_that_opens_no_stream_is_ended_after_the_idle_timeout() {
    let store = tempfile::tempdir().unwrap();
    let served = Served::start(
        store.path(),
        &["--idle-timeout", "1"],
        &Peers::get().ts_agent(),
    );
    let reply = request(served.addr, "POST", &[bearer(), JSON.into()], &initialize());
    assert_eq!(reply.status, 200);
    let connection = reply.header("acp-connection-id").unwrap().to_string();
    let new = json!({"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}});
    let post = || {
        let headers = [
            bearer(),
            JSON.into(),
            format!("Acp-Connection-Id: {connection}"),
        ];
        request(served.addr, "POST", &headers, new.to_string().as_bytes()).status
    };
    assert_eq!(post(), 202, "alive at first");
    let deadline = Instant::now() + TIMEOUT;
    while post() != 404 {
        assert!(Instant::now() < deadline, "never reaped: {}", served.log());
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        served.log().contains("had no stream open"),
        "{}",
        served.log()
    );
    served.stop();
}
