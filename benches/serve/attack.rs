//! What a client without the token gets from `serve` (report section 6), as the attacker of
//! issue 38 went at it, on loopback:
//!
//! - **Guessing.** Wrong tokens sent one after another for [`GUESSING`], each on its own
//!   socket (HTTP/1.1 `POST /acp`, `initialize`), by 1, 4 and 16 loops at once: how many were
//!   answered. And a guesser that gives up on a guess after [`GIVE_UP`] with no answer (taking
//!   silence for a wrong token, which worked while a right token was answered at once), with the
//!   right token as its 150th guess: whether it recognised it.
//! - **HTTP/2 floods.** N sockets (0, 2, 4, 8) that flood `PING` frames by prior knowledge
//!   without the token, each reading what it is sent and connecting again as soon as it is
//!   closed, while a token holder makes round trips: a message `POST`ed on its connection (202)
//!   and a new connection's `initialize` (answered by the agent). Their p50, p99 and maximum, and
//!   serve's CPU over the flood.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::roles::me;
use crate::server::{Serve, tick_us, ticks};

/// How long the guessers guess.
pub const GUESSING: Duration = Duration::from_secs(10);
/// How long the impatient guesser waits for an answer.
pub const GIVE_UP: Duration = Duration::from_millis(30);
/// Flooding sockets, in steps.
pub const FLOODERS: [usize; 4] = [0, 2, 4, 8];

/// Guesses answered in [`GUESSING`] by `loops` at once.
pub struct Guessing {
    pub loops: usize,
    pub answered: usize,
}

/// The impatient guesser: its guesses, and at which one it recognised the right token (150th).
pub struct GiveUp {
    pub tried: usize,
    pub recognised: Option<usize>,
}

/// A token holder's round trips with `sockets` flooding.
pub struct Flooded {
    pub sockets: usize,
    /// A message on its connection: p50, p99, max (ms).
    pub message: [f64; 3],
    /// A new connection's `initialize`: p50, p99, max (ms).
    pub initialize: [f64; 3],
    /// Serve's CPU-seconds per second over the round trips.
    pub cpu: f64,
    /// The flooders' sockets (connections made) and PINGs answered, in all.
    pub connections: usize,
    pub pongs: usize,
}

pub struct Attack {
    pub guessing: Vec<Guessing>,
    pub give_up: GiveUp,
    pub floods: Vec<Flooded>,
}

/// One request on a socket of its own; its status.
fn request(authority: &str, token: &str, body: &str) -> Option<u16> {
    let mut socket = TcpStream::connect(authority).ok()?;
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .ok()?;
    socket
        .write_all(post(authority, token, None, body).as_bytes())
        .ok()?;
    let mut reader = BufReader::new(socket);
    let (status, _, _) = response(&mut reader)?;
    Some(status)
}

/// A `POST /acp` (keep-alive), on connection `id` if given.
fn post(authority: &str, token: &str, id: Option<&str>, body: &str) -> String {
    let id = id.map_or(String::new(), |id| format!("Acp-Connection-Id: {id}\r\n"));
    format!(
        "POST /acp HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\n{id}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// An HTTP/1.1 response: its status, `Acp-Connection-Id` and body.
fn response(reader: &mut impl BufRead) -> Option<(u16, Option<String>, Vec<u8>)> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let status = line.split_whitespace().nth(1)?.parse().ok()?;
    let (mut length, mut id) = (0usize, None);
    loop {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().ok()?,
            "acp-connection-id" => id = Some(value.trim().to_string()),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((status, id, body))
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#;

/// Guesses from `loops` threads for [`GUESSING`]: those answered.
fn guessing(authority: &str, loops: usize) -> usize {
    let answered = Arc::new(AtomicUsize::new(0));
    let until = Instant::now() + GUESSING;
    let threads: Vec<_> = (0..loops)
        .map(|i| {
            let (authority, answered) = (authority.to_string(), answered.clone());
            std::thread::spawn(move || {
                let mut n = 0;
                while Instant::now() < until {
                    n += 1;
                    let guess = format!("guess-{i}-{n}-0123456789abcdef");
                    if request(&authority, &guess, INITIALIZE) == Some(401)
                        && Instant::now() < until
                    {
                        answered.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        let _ = thread.join();
    }
    answered.load(Ordering::Relaxed)
}

/// The impatient guesser, the right token its 150th guess: its guesses in [`GUESSING`], and
/// the one it saw answered 200 within [`GIVE_UP`].
fn give_up(authority: &str, token: &str) -> GiveUp {
    let until = Instant::now() + GUESSING;
    let mut tried = 0;
    while Instant::now() < until {
        tried += 1;
        let guess = if tried == 150 {
            token.to_string()
        } else {
            format!("impatient-{tried}-0123456789abcdef")
        };
        let Ok(mut socket) = TcpStream::connect(authority) else {
            continue;
        };
        let _ = socket.set_read_timeout(Some(GIVE_UP));
        if socket
            .write_all(post(authority, &guess, None, INITIALIZE).as_bytes())
            .is_err()
        {
            continue;
        }
        let mut first = [0u8; 12];
        if socket.read_exact(&mut first).is_ok() && &first[9..12] == b"200" {
            return GiveUp {
                tried,
                recognised: Some(tried),
            };
        }
    }
    GiveUp {
        tried,
        recognised: None,
    }
}

/// A flooder: connects, sends the HTTP/2 preface and `PING`s as fast as the socket takes them,
/// reads what comes, connects again when closed; until `stop`. Counts connections and pongs.
fn flooder(
    authority: String,
    stop: Arc<AtomicBool>,
    connections: Arc<AtomicUsize>,
    pongs: Arc<AtomicUsize>,
) {
    const PING: [u8; 17] = [0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
    let batch = PING.repeat(256);
    while !stop.load(Ordering::Relaxed) {
        let Ok(socket) = TcpStream::connect(&authority) else {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        connections.fetch_add(1, Ordering::Relaxed);
        let Ok(mut reader) = socket.try_clone() else {
            continue;
        };
        let pongs = pongs.clone();
        let drain = std::thread::spawn(move || {
            let mut head = [0u8; 9];
            let mut payload = vec![0u8; 1 << 16];
            while reader.read_exact(&mut head).is_ok() {
                let len = (usize::from(head[0]) << 16)
                    | (usize::from(head[1]) << 8)
                    | usize::from(head[2]);
                if reader.read_exact(&mut payload[..len.min(1 << 16)]).is_err() {
                    break;
                }
                if head[3] == 6 && head[4] & 1 == 1 {
                    pongs.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        let mut writer = socket;
        let mut sent = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        sent.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
        while !stop.load(Ordering::Relaxed) && writer.write_all(&sent).is_ok() {
            sent.clone_from(&batch);
        }
        let _ = writer.shutdown(std::net::Shutdown::Both);
        let _ = drain.join();
    }
}

/// p50, p99 and max of `samples` (ms).
fn stats(mut samples: Vec<f64>) -> [f64; 3] {
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    [at(0.5), at(0.99), at(1.0)]
}

/// The token holder's round trips with `sockets` flooding.
fn flooded(serve: &Serve, sockets: usize, trips: usize) -> Flooded {
    let authority = serve.endpoint.authority.clone();
    let token = serve.endpoint.token.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let connections = Arc::new(AtomicUsize::new(0));
    let pongs = Arc::new(AtomicUsize::new(0));
    let flooders: Vec<_> = (0..sockets)
        .map(|_| {
            let (a, s, c, p) = (
                authority.clone(),
                stop.clone(),
                connections.clone(),
                pongs.clone(),
            );
            std::thread::spawn(move || flooder(a, s, c, p))
        })
        .collect();
    // Let the floods start.
    std::thread::sleep(Duration::from_millis(500));
    let (ticks0, t0) = (ticks(serve.pid()), Instant::now());
    let socket = TcpStream::connect(&authority).expect("connect");
    let mut writer = socket.try_clone().expect("clone");
    let mut reader = BufReader::new(socket);
    writer
        .write_all(post(&authority, &token, None, INITIALIZE).as_bytes())
        .expect("write");
    let (_, id, _) = response(&mut reader).expect("initialize");
    let id = id.expect("Acp-Connection-Id");
    let note = r#"{"jsonrpc":"2.0","method":"bench/note","params":{}}"#;
    let mut message = Vec::with_capacity(trips);
    let mut initialize = Vec::with_capacity(trips);
    for _ in 0..trips {
        let t = Instant::now();
        writer
            .write_all(post(&authority, &token, Some(&id), note).as_bytes())
            .expect("write");
        let (status, _, _) = response(&mut reader).expect("a response");
        assert_eq!(status, 202);
        message.push(t.elapsed().as_secs_f64() * 1000.0);
        let t = Instant::now();
        let mut fresh = BufReader::new(TcpStream::connect(&authority).expect("connect"));
        fresh
            .get_mut()
            .write_all(post(&authority, &token, None, INITIALIZE).as_bytes())
            .expect("write");
        let (status, other, _) = response(&mut fresh).expect("initialize");
        assert_eq!(status, 200);
        initialize.push(t.elapsed().as_secs_f64() * 1000.0);
        if let Some(other) = other {
            let end = format!(
                "DELETE /acp HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {token}\r\nAcp-Connection-Id: {other}\r\nContent-Length: 0\r\n\r\n"
            );
            let _ = fresh.get_mut().write_all(end.as_bytes());
            let _ = response(&mut fresh);
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    let cpu = (ticks(serve.pid()) - ticks0) as f64 * tick_us() / 1e6 / seconds;
    stop.store(true, Ordering::Relaxed);
    for flooder in flooders {
        let _ = flooder.join();
    }
    Flooded {
        sockets,
        message: stats(message),
        initialize: stats(initialize),
        cpu,
        connections: connections.load(Ordering::Relaxed),
        pongs: pongs.load(Ordering::Relaxed),
    }
}

/// The whole section: each step on a serve of its own (a guesser's failures slow that server's
/// answers for 10 minutes).
pub fn run(trips: usize) -> Attack {
    let agent = [
        me(),
        "__sflood".to_string(),
        "1".to_string(),
        "1".to_string(),
    ];
    let mut guessing_rows = Vec::new();
    for loops in [1, 4, 16] {
        let serve = Serve::start(&agent);
        eprintln!(
            "bench: guessing with {loops} loops for {} s",
            GUESSING.as_secs()
        );
        let answered = guessing(&serve.endpoint.authority, loops);
        guessing_rows.push(Guessing { loops, answered });
        serve.stop();
    }
    let serve = Serve::start(&agent);
    eprintln!("bench: an impatient guesser for {} s", GUESSING.as_secs());
    let give_up = give_up(&serve.endpoint.authority, &serve.endpoint.token);
    serve.stop();
    let mut floods = Vec::new();
    for sockets in FLOODERS {
        let serve = Serve::start(&agent);
        eprintln!("bench: {trips} round trips with {sockets} sockets flooding PINGs");
        floods.push(flooded(&serve, sockets, trips));
        serve.stop();
    }
    Attack {
        guessing: guessing_rows,
        give_up,
        floods,
    }
}
