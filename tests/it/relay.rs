//! A TCP relay on loopback in front of an S3 server that makes it distant and counts what is
//! asked of it: every byte waits a fixed time each way (a store tens of milliseconds away, as
//! an S3 region is from a laptop), and every HTTP/1.1 request is counted by method and by the
//! first component of its key (`PUT leases`, `LIST sessions`, `GET index`).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The relay.
pub struct Relay {
    /// The port to connect to.
    pub port: u16,
    counts: Arc<Mutex<BTreeMap<String, usize>>>,
}

impl Relay {
    /// Relay a fresh loopback port to `target`, every byte delayed `one_way` each way.
    pub fn start(target: u16, one_way: Duration) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let counts = Arc::new(Mutex::new(BTreeMap::new()));
        let counted = counts.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(client) = conn else { continue };
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let requests = Requests::new(counted.clone());
                delayed(
                    client.try_clone().unwrap(),
                    server.try_clone().unwrap(),
                    one_way,
                    Some(requests),
                );
                delayed(server, client, one_way, None);
            }
        });
        Relay { port, counts }
    }

    /// The requests counted so far, by kind (`METHOD first-component`), and forgotten.
    pub fn take_counts(&self) -> BTreeMap<String, usize> {
        std::mem::take(&mut *self.counts.lock().unwrap())
    }
}

/// Copy `from` to `to`, each chunk written `delay` after it was read; the requests in it
/// counted when `requests` is given.
fn delayed(mut from: TcpStream, mut to: TcpStream, delay: Duration, requests: Option<Requests>) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::spawn(move || {
        let mut requests = requests;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if let Some(r) = requests.as_mut() {
                        r.feed(&buf[..n]);
                    }
                    if tx
                        .send((Instant::now() + delay, buf[..n].to_vec()))
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
        let _ = from.shutdown(std::net::Shutdown::Read);
    });
    std::thread::spawn(move || {
        for (due, bytes) in rx {
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            if to.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Write);
    });
}

/// The HTTP/1.1 requests of one connection, read as they pass: a head up to its blank line,
/// then its body (`Content-Length` or chunked), skipped.
struct Requests {
    counts: Arc<Mutex<BTreeMap<String, usize>>>,
    head: Vec<u8>,
    /// Body bytes still to skip.
    body: usize,
    /// Inside a chunked body.
    chunked: bool,
    /// Bytes of a chunk-size line or trailer read so far.
    line: Vec<u8>,
}

impl Requests {
    fn new(counts: Arc<Mutex<BTreeMap<String, usize>>>) -> Requests {
        Requests {
            counts,
            head: Vec::new(),
            body: 0,
            chunked: false,
            line: Vec::new(),
        }
    }

    fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.body > 0 {
                let n = self.body.min(bytes.len());
                self.body -= n;
                bytes = &bytes[n..];
                continue;
            }
            if self.chunked {
                // A chunk-size line (`<hex>\r\n`), its data and CRLF; size 0 ends it (with
                // an empty trailer line).
                let b = bytes[0];
                bytes = &bytes[1..];
                self.line.push(b);
                if self.line.ends_with(b"\r\n") {
                    let text = String::from_utf8_lossy(&self.line[..self.line.len() - 2]);
                    let size =
                        usize::from_str_radix(text.split(';').next().unwrap_or("").trim(), 16);
                    self.line.clear();
                    match size {
                        Ok(0) => {
                            self.chunked = false;
                            self.body = 2;
                        }
                        Ok(n) => self.body = n + 2,
                        Err(_) => {}
                    }
                }
                continue;
            }
            self.head.push(bytes[0]);
            bytes = &bytes[1..];
            if self.head.ends_with(b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.head).to_string();
                self.head.clear();
                self.count(&head);
            }
        }
    }

    fn count(&mut self, head: &str) {
        let mut lines = head.lines();
        let first = lines.next().unwrap_or_default();
        let mut parts = first.split_whitespace();
        let (method, target) = (parts.next().unwrap_or("?"), parts.next().unwrap_or("/"));
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        // Path-style: /<bucket>/<prefix>/<first component of the key>/…
        let components: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        let kind = if method == "GET" && query.contains("list-type") {
            let prefix = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("prefix="))
                .unwrap_or("");
            let prefix = prefix.replace("%2F", "/");
            let top = prefix.split('/').nth(1).unwrap_or("").to_string();
            format!("LIST {top}")
        } else if method == "POST" && query.contains("delete") {
            "DELETE (bulk)".to_string()
        } else {
            format!("{method} {}", components.get(2).copied().unwrap_or(""))
        };
        *self.counts.lock().unwrap().entry(kind).or_default() += 1;
        for line in lines {
            let lower = line.to_ascii_lowercase();
            if let Some(n) = lower.strip_prefix("content-length:") {
                self.body = n.trim().parse().unwrap_or(0);
            } else if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
                self.chunked = true;
            }
        }
    }
}
