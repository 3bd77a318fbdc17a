//! `acp-journal serve` against whoever lacks the token, as an attacker on the same machine
//! would go at it: raw sockets that never finish a request, a raw HTTP/2 preface that only
//! answers pings, forged `Host` and `Origin` headers, wrong tokens by the hundred, a client that
//! opens no event stream. After each, a client with the token is still served; memory is read
//! from `/proc/PID/status` with its bound stated.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::json;

use crate::serve::{JSON, Served, TOKEN, bearer, initialize, request, rss_kib, websocket, ws_call};
use crate::util::{Peers, TIMEOUT, bin};

/// The handshake limit the tests run with (10 s by default).
const HANDSHAKE: &str = "2";
/// What the tests allow past it for the server to close a socket: generous, never flaky.
const MARGIN: Duration = Duration::from_secs(8);

/// A client with the token gets in: `initialize` over Streamable HTTP answers 200 (and the
/// connection is ended again, so as not to count against `--max-connections`).
fn client_gets_in(addr: SocketAddr) {
    let reply = request(addr, "POST", &[bearer(), JSON.into()], &initialize());
    assert_eq!(reply.status, 200, "{}", reply.text());
    let id = reply.header("acp-connection-id").unwrap();
    let end = request(
        addr,
        "DELETE",
        &[bearer(), format!("Acp-Connection-Id: {id}")],
        b"",
    );
    assert_eq!(end.status, 202);
}

/// Connect and send `bytes` (a request never finished, or nothing).
fn hold(addr: SocketAddr, bytes: &[u8]) -> TcpStream {
    let mut socket = TcpStream::connect(addr).unwrap();
    socket.write_all(bytes).unwrap();
    socket
}

/// When `socket` was closed by the server: reads (and drops whatever comes) until EOF or an
/// error; `None` if it is still open after `within`.
fn closed_within(socket: &mut TcpStream, within: Duration) -> Option<Duration> {
    let start = Instant::now();
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut buf = [0u8; 4096];
    while start.elapsed() < within {
        match socket.read(&mut buf) {
            Ok(0) => return Some(start.elapsed()),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return Some(start.elapsed()),
        }
    }
    None
}

/// An HTTP/2 client by prior knowledge that sends no request and answers every PING (and
/// SETTINGS) as a live peer would; sends when its socket was closed.
fn h2_pinger(addr: SocketAddr) -> mpsc::Receiver<Instant> {
    let (tx, rx) = mpsc::channel();
    let mut socket = TcpStream::connect(addr).unwrap();
    std::thread::spawn(move || {
        socket
            .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            .unwrap();
        // An empty SETTINGS frame.
        socket.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).unwrap();
        let mut head = [0u8; 9];
        loop {
            if socket.read_exact(&mut head).is_err() {
                break;
            }
            let len =
                (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
            let mut payload = vec![0u8; len];
            if socket.read_exact(&mut payload).is_err() {
                break;
            }
            let (kind, flags) = (head[3], head[4]);
            let answer = match (kind, flags & 1) {
                // PING, not an ACK: the same payload back, ACKed.
                (6, 0) => [&[0, 0, 8, 6, 1, 0, 0, 0, 0][..], &payload].concat(),
                // SETTINGS, not an ACK: ACK it.
                (4, 0) => vec![0, 0, 0, 4, 1, 0, 0, 0, 0],
                _ => continue,
            };
            if socket.write_all(&answer).is_err() {
                break;
            }
        }
        let _ = tx.send(Instant::now());
    });
    rx
}

#[test]
fn sockets_that_never_show_the_token_are_closed_in_time_and_lock_no_client_out() {
    let store = tempfile::tempdir().unwrap();
    // Four connections: 20 unauthenticated sockets at once (the attack had 24 against
    // two connections).
    let served = Served::start(
        store.path(),
        &["--max-connections", "4", "--handshake-timeout", HANDSHAKE],
        &Peers::get().ts_agent(),
    );
    let addr = served.addr;
    let host = format!("Host: {addr}\r\n");
    let start = Instant::now();
    let mut sockets = Vec::new();
    for _ in 0..8 {
        // Nothing at all; headers that never end; a body that never ends (a page path, and
        // /acp, where the body is never read without the token).
        sockets.push(hold(addr, b""));
        sockets.push(hold(
            addr,
            format!("GET / HTTP/1.1\r\n{host}X-Slow: a").as_bytes(),
        ));
        sockets.push(hold(
            addr,
            format!("POST / HTTP/1.1\r\n{host}Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100000\r\n\r\ntoken=").as_bytes(),
        ));
        sockets.push(hold(
            addr,
            format!("POST /acp HTTP/1.1\r\n{host}{JSON}\r\nContent-Length: 100000\r\n\r\n{{")
                .as_bytes(),
        ));
    }
    let pingers: Vec<_> = (0..8).map(|_| h2_pinger(addr)).collect();
    // 40 sockets that never authenticate are open or being shed: a client still gets in, at
    // once and again while they pile up.
    for _ in 0..3 {
        client_gets_in(addr);
        sockets.push(hold(addr, b""));
    }
    // Every one of them is closed by the server, within the limit (the shed ones sooner).
    let limit = Duration::from_secs(2) + MARGIN;
    for socket in &mut sockets {
        let left = limit.saturating_sub(start.elapsed());
        assert!(
            closed_within(socket, left).is_some(),
            "a socket was left open past {limit:?}"
        );
    }
    for pinger in pingers {
        let left = limit.saturating_sub(start.elapsed());
        assert!(
            pinger.recv_timeout(left).is_ok(),
            "an HTTP/2 connection that answers pings was left open past {limit:?}"
        );
    }
    client_gets_in(addr);
    // Shedding is summed up in the log, not a line per socket.
    let log = served.stop();
    let lines = log.matches("shed for").count();
    assert!(
        (1..=2).contains(&lines),
        "{lines} lines about shed sockets: {log}"
    );
}

#[test]
fn a_thousand_slow_sockets_hold_little_memory_and_give_it_back() {
    let store = tempfile::tempdir().unwrap();
    let served = Served::start(
        store.path(),
        &["--handshake-timeout", HANDSHAKE],
        &Peers::get().ts_agent(),
    );
    let addr = served.addr;
    client_gets_in(addr);
    let before = rss_kib(served.pid());
    // 1 040 sockets (the count), each with 30 KiB of headers that never end: under the
    // 32 KiB cap, so each holds its buffer until shed or timed out.
    let filler = format!("X-Fill: {}\r\n", "a".repeat(1000)).repeat(30);
    let head = format!("GET / HTTP/1.1\r\nHost: {addr}\r\n{filler}");
    let mut sockets: Vec<TcpStream> = (0..1040)
        .filter_map(|_| {
            let mut socket = TcpStream::connect(addr).ok()?;
            let _ = socket.write_all(head.as_bytes());
            Some(socket)
        })
        .collect();
    client_gets_in(addr);
    let during = rss_kib(served.pid());
    // Bound: at most 272 unauthenticated sockets (256 connections + 16) of at most 32 KiB of
    // head each (and hyper's and the kernel's own), 48 MiB above the start.
    assert!(
        during < before + 48 * 1024,
        "{before} KiB before, {during} KiB under 1 040 slow sockets"
    );
    // A header past the cap is refused (431), not buffered.
    let mut big = hold(
        addr,
        format!(
            "GET / HTTP/1.1\r\nHost: {addr}\r\nX-Big: {}\r\n\r\n",
            "b".repeat(64 * 1024)
        )
        .as_bytes(),
    );
    let mut status = [0u8; 12];
    big.set_read_timeout(Some(TIMEOUT)).unwrap();
    big.read_exact(&mut status).unwrap();
    assert_eq!(&status[9..12], b"431");
    for socket in &mut sockets {
        let _ = socket.shutdown(std::net::Shutdown::Both);
    }
    sockets.clear();
    std::thread::sleep(Duration::from_secs(3));
    let after = rss_kib(served.pid());
    client_gets_in(addr);
    // Given back: within 16 MiB of the start once they are gone.
    assert!(
        after < before + 16 * 1024,
        "{before} KiB before, {during} KiB during, {after} KiB after"
    );
    eprintln!("RSS: {before} KiB before, {during} KiB under 1 040 slow sockets, {after} KiB after");
    served.stop();
}

/// The status of one request whose head is `head` (with its blank line), on its own socket.
fn status(addr: SocketAddr, head: &str) -> u16 {
    let mut socket = TcpStream::connect(addr).unwrap();
    socket.set_read_timeout(Some(TIMEOUT)).unwrap();
    socket.write_all(head.as_bytes()).unwrap();
    let mut first = [0u8; 12];
    socket.read_exact(&mut first).unwrap();
    String::from_utf8_lossy(&first[9..12]).parse().unwrap()
}

#[test]
fn a_foreign_host_is_refused_everywhere_no_dns_rebinding() {
    let store = tempfile::tempdir().unwrap();
    let served = Served::start(
        store.path(),
        &["--allow-host", "box.example"],
        &Peers::get().ts_agent(),
    );
    let (addr, port) = (served.addr, served.addr.port());
    let init = String::from_utf8(initialize()).unwrap();
    let post = |host: &str| {
        status(
            addr,
            &format!(
                "POST /acp HTTP/1.1\r\nHost: {host}\r\n{}\r\n{JSON}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{init}",
                bearer(),
                init.len()
            ),
        )
    };
    let page = |host: &str| {
        status(
            addr,
            &format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        )
    };
    // A rebinding page: its name resolved to 127.0.0.1, its own Origin, the token even.
    let rebound = format!("rebind.attacker.example:{port}");
    let upgrade = format!(
        "GET /acp HTTP/1.1\r\nHost: {rebound}\r\nOrigin: http://{rebound}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{}\r\n\r\n",
        bearer()
    );
    assert_eq!(status(addr, &upgrade), 421);
    for host in [
        rebound.as_str(),
        "localhost:1",
        "evil.example",
        "127.0.0.1.nip.io",
    ] {
        assert_eq!(page(host), 421, "{host}");
        assert_eq!(post(host), 421, "{host}");
    }
    assert_eq!(
        status(addr, "GET / HTTP/1.0\r\n\r\n"),
        421,
        "no Host at all"
    );
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        "box.example".into(),
        format!("box.example:{port}"),
    ] {
        assert_eq!(page(&host), 200, "{host}");
        assert_eq!(post(&host), 200, "{host}");
    }
    // With curl, as a browser would be told it.
    crate::util::full_tier("curl");
    let out = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-H",
            "Host: evil.example",
        ])
        .arg(format!("http://{addr}/"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "421");
    client_gets_in(addr);
    served.stop();
}

/// A wrong token on `/acp`: by the bearer header (`ws`: as the page's subprotocol on an
/// upgrade). Its status.
fn wrong_token(addr: SocketAddr, ws: bool) -> u16 {
    let head = if ws {
        format!(
            "GET /acp HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://{addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: acp-journal, acp-journal.bearer.bm90LXRoZS10b2tlbi0wMTIzNDU\r\n\r\n"
        )
    } else {
        format!(
            "GET /acp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer not-the-token-012345\r\n\r\n"
        )
    };
    status(addr, &head)
}

/// A wrong token sent from another loopback address (`curl --interface`): its status.
fn wrong_token_from(addr: SocketAddr, source: &str) -> String {
    crate::util::full_tier("curl");
    let out = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--interface",
            source,
        ])
        .args(["-H", "Authorization: Bearer not-the-token-012345"])
        .arg(format!("http://{addr}/acp"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_right_token_is_answered_no_sooner_than_a_wrong_one_on_every_route() {
    let store = tempfile::tempdir().unwrap();
    let served = Served::start(store.path(), &[], &Peers::get().ts_agent());
    let addr = served.addr;
    // Three wrong tokens from this address, one after another, by both routes.
    for i in 0..3 {
        assert_eq!(wrong_token(addr, i % 2 == 1), 401);
    }
    // Now the right token from this address, on a request that names no connection (a GET
    // without `Acp-Connection-Id`, answered 400 at once once the token is taken, the agent not
    // asked): its answer waits as a wrong one's would (0.4 s after three failures), where it
    // used to come at once and so told a guesser that any answer not there at once was a wrong
    // guess. A wrong token sent after it from an address with no failures (127.0.0.2) is
    // answered first.
    let (order, answers) = mpsc::channel();
    let (sent, is_sent) = mpsc::channel();
    let right = {
        let order = order.clone();
        std::thread::spawn(move || {
            let mut socket = TcpStream::connect(addr).unwrap();
            socket.set_read_timeout(Some(TIMEOUT)).unwrap();
            let head = format!(
                "GET /acp HTTP/1.1\r\nHost: {addr}\r\n{}\r\nConnection: close\r\n\r\n",
                bearer()
            );
            socket.write_all(head.as_bytes()).unwrap();
            sent.send(()).unwrap();
            let mut first = [0u8; 12];
            socket.read_exact(&mut first).unwrap();
            order
                .send(format!("right {}", String::from_utf8_lossy(&first[9..12])))
                .unwrap();
        })
    };
    is_sent.recv_timeout(TIMEOUT).unwrap();
    let code = wrong_token_from(addr, "127.0.0.2");
    order.send(format!("wrong {code}")).unwrap();
    right.join().unwrap();
    let answered: Vec<String> = answers.try_iter().collect();
    assert_eq!(answered, ["wrong 401", "right 400"]);
    // The right token gets in by either route (the bearer header on a WebSocket, the page's
    // subprotocol), from the address that guessed.
    let mut ws = websocket(&served);
    let answer = ws_call(
        &mut ws,
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}),
    );
    assert!(answer.get("result").is_some(), "{answer}");
    let page_socket = format!(
        "GET /acp HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://{addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: acp-journal, acp-journal.bearer.{}\r\n\r\n",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(TOKEN)
    );
    assert_eq!(status(addr, &page_socket), 101, "the page's subprotocol");
    let log = served.stop();
    // Logged as a summary: the first at once, the rest summed up later, not a line each.
    assert_eq!(log.matches("wrong token").count(), 1, "{log}");
    assert!(!log.contains("not-the-token"), "{log}");
}

/// `serve` with `env` and `args` before `--`: its exit status and stderr, if it exits within
/// a few seconds (`None`: it was serving, and was stopped).
fn start_or_refuse(args: &[&str], env: &[(&str, &str)]) -> Option<(bool, String)> {
    let store = tempfile::tempdir().unwrap();
    let mut child = Command::new(bin())
        .args([
            "--journal-dir",
            &store.path().display().to_string(),
            "serve",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(args)
        .arg("--")
        .args(Peers::get().ts_agent())
        .env_remove("ACP_JOURNAL_TOKEN")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return Some((status.success(), err));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn short_tokens_and_token_files_others_can_read_are_refused_at_start() {
    use std::os::unix::fs::PermissionsExt;
    let (ok, err) = start_or_refuse(&[], &[("ACP_JOURNAL_TOKEN", "x")]).expect("refused");
    assert!(!ok && err.contains("16"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let path = file.display().to_string();
    let (ok, err) = start_or_refuse(&["--token-file", &path], &[]).expect("refused");
    assert!(
        !ok && err.contains("UNPROTECTED TOKEN FILE") && err.contains("0644"),
        "{err}"
    );
    assert!(!err.contains(TOKEN), "{err}");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(
        start_or_refuse(&["--token-file", &path], &[]),
        None,
        "0600: it serves"
    );
}

#[test]
fn a_client_that_opens_no_stream_is_paced_and_dropped_like_any_other() {
    let store = tempfile::tempdir().unwrap();
    let served = Served::start(store.path(), &[], &crate::util::scripted("mix"));
    let addr = served.addr;
    // A WebSocket client makes a session.
    let mut owner = websocket(&served);
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}});
    ws_call(&mut owner, init);
    let new = json!({"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}});
    let session = ws_call(&mut owner, new)["result"]["sessionId"].clone();
    // An HTTP client with the token joins it as an observer and never opens a stream.
    let reply = request(addr, "POST", &[bearer(), JSON.into()], &initialize());
    assert_eq!(reply.status, 200);
    let id = reply.header("acp-connection-id").unwrap().to_string();
    let post = |message: serde_json::Value| {
        let headers = [bearer(), JSON.into(), format!("Acp-Connection-Id: {id}")];
        request(addr, "POST", &headers, message.to_string().as_bytes()).status
    };
    let attach = json!({"jsonrpc":"2.0","id":1,"method":"session/attach","params":{"sessionId":session,"role":"observer","historyPolicy":"none"}});
    assert_eq!(post(attach), 202);
    // 4 000 updates and an 8 MiB one: the old host queued them all for it (up to 64 MiB, for
    // the idle timeout); now they wait in its outbox, past 1 MiB for 2 s at most, then it is
    // dropped.
    let flood = json!({"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":session,"prompt":[{"type":"text","text":"updates=4000 big=8192"}]}});
    assert_eq!(
        ws_call(&mut owner, flood)["result"]["stopReason"],
        "end_turn"
    );
    let deadline = Instant::now() + TIMEOUT;
    while !served.log().contains("does not read what it is sent") {
        assert!(Instant::now() < deadline, "{}", served.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let cancel = json!({"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":session}});
    let deadline = Instant::now() + TIMEOUT;
    while post(cancel.clone()) != 404 {
        assert!(
            Instant::now() < deadline,
            "the connection lives on: {}",
            served.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Bound: 1 MiB paced for it, plus the message that crossed it; the host's RSS stays under
    // the 64 MiB of the other slow-client test.
    let rss = rss_kib(served.pid());
    assert!(rss < 64 * 1024, "{rss} KiB");
    client_gets_in(addr);
    served.stop();
}

#[test]
fn connection_ids_stay_out_of_the_log_and_tls_answers_carry_hsts() {
    let store = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = crate::serve::certificate(dir.path());
    let served = Served::start(
        store.path(),
        &[
            "--tls-cert",
            &cert.display().to_string(),
            "--tls-key",
            &key.display().to_string(),
            "--handshake-timeout",
            HANDSHAKE,
        ],
        &Peers::get().ts_agent(),
    );
    // A TLS handshake that never finishes (a ClientHello's record header, then nothing) is
    // closed within the limit too.
    let mut stalled = hold(served.addr, &[0x16, 0x03, 0x01, 0x02, 0x00, 0x01]);
    let limit = Duration::from_secs(2) + MARGIN;
    assert!(
        closed_within(&mut stalled, limit).is_some(),
        "a stalled TLS handshake was left open past {limit:?}"
    );
    let url = format!("https://127.0.0.1:{}/acp", served.addr.port());
    crate::util::full_tier("curl");
    let out = Command::new("curl")
        .args([
            "-sk",
            "-D",
            "-",
            "-o",
            "/dev/null",
            "-H",
            &bearer(),
            "-H",
            JSON,
        ])
        .args(["--data-binary", &String::from_utf8(initialize()).unwrap()])
        .arg(&url)
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
    assert!(
        head.starts_with("http/2 200") || head.starts_with("http/1.1 200"),
        "{head}"
    );
    assert!(
        head.contains("strict-transport-security: max-age=31536000"),
        "{head}"
    );
    let id = head
        .lines()
        .find_map(|l| l.strip_prefix("acp-connection-id: "))
        .unwrap()
        .trim()
        .to_string();
    let log = served.stop();
    assert!(log.contains("HTTP connection #"), "{log}");
    assert!(
        !log.contains(&id),
        "the connection id is a credential with the token: {log}"
    );
}

/// An HTTP/2 client by prior knowledge that sends `frame` over and over, as fast as the socket
/// takes it, without ever showing the token: the number of answers to it (`PING` and
/// `SETTINGS` acknowledgements) it got before the server closed the socket.
fn h2_flooder(addr: SocketAddr, frame: &'static [u8]) -> std::thread::JoinHandle<usize> {
    let socket = TcpStream::connect(addr).unwrap();
    let mut writer = socket.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut reader = socket;
        reader.set_read_timeout(Some(TIMEOUT)).unwrap();
        let flood = std::thread::spawn(move || {
            let batch = frame.repeat(64);
            let mut sent = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
            sent.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
            while writer.write_all(&sent).is_ok() {
                sent.clone_from(&batch);
            }
        });
        let mut answers = 0;
        let mut head = [0u8; 9];
        while reader.read_exact(&mut head).is_ok() {
            let len =
                (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
            let mut payload = vec![0u8; len];
            if reader.read_exact(&mut payload).is_err() {
                break;
            }
            // A PING or SETTINGS with the ACK flag.
            if matches!(head[3], 4 | 6) && head[4] & 1 == 1 {
                answers += 1;
            }
        }
        let _ = reader.shutdown(std::net::Shutdown::Both);
        let _ = flood.join();
        answers
    })
}

#[test]
fn http2_floods_without_the_token_get_a_bounded_answer_and_a_client_gets_in_meanwhile() {
    let store = tempfile::tempdir().unwrap();
    let served = Served::start(
        store.path(),
        &["--handshake-timeout", HANDSHAKE],
        &Peers::get().ts_agent(),
    );
    let addr = served.addr;
    const PING: &[u8] = &[0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
    const SETTINGS: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0];
    // Four sockets flood at once, two with PINGs, two with SETTINGS.
    let floods: Vec<_> = [PING, SETTINGS, PING, SETTINGS]
        .into_iter()
        .map(|frame| h2_flooder(addr, frame))
        .collect();
    // A client with the token gets in, again and again, while they flood.
    for _ in 0..5 {
        client_gets_in(addr);
    }
    // Each was answered at most 256 frames' worth (the budget of a socket without the token),
    // then closed: where an unbounded server answers every frame until the handshake limit,
    // tens of thousands.
    for flood in floods {
        let answers = flood.join().unwrap();
        assert!(answers <= 257, "{answers} answers to a flood");
    }
    client_gets_in(addr);
    served.stop();
}
