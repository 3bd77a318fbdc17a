//! An update's delay from the agent to each client attached to a session: the pacing agent
//! (`__pace N INTERVAL_US`) streams N `session/update`s at a steady pace in answer to one
//! prompt, each stamped with the time it was written (`CLOCK_MONOTONIC`, the same clock in every
//! process of the machine); every client notes when each one arrives.
//!
//! Through serve, three clients share the session: A made it and prompts (WebSocket), B
//! (WebSocket) and C (Streamable HTTP, the connection's SSE stream) joined it by `session/load`
//! before the prompt. For comparison, the same agent and prompt through a direct pipe (no proxy)
//! and the stdio proxy, one client each. Each client runs on a thread (and a current-thread
//! Tokio runtime) of its own, so none waits for another's reading.

use std::future::Future;
use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::client::Client;
use crate::roles::{me, raw_fd, request_id};
use crate::server::{Serve, Target, start};

/// The pacing agent's one session.
const SESSION: &str = "bench-paced-0000000000000000";
/// What precedes an update's send time (ns) in its text.
const MARK: &[u8] = br#""text":"@t="#;
/// The first updates of each client, left out of the figures (connections and caches warming).
pub const WARMUP: usize = 100;

/// Now on `CLOCK_MONOTONIC`, ns.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The pacing agent: answers `initialize`, `session/new` and `session/load` (always [`SESSION`]),
/// and each `session/prompt` with `n` `agent_message_chunk` updates, the k-th written at
/// `interval_us` × k after the prompt came (at once when late), its text carrying the time it
/// was written, then the prompt's response. Ignores anything else; ends at EOF.
pub fn pacing_agent(n: usize, interval_us: u64) {
    let mut input = BufReader::new(raw_fd(0).try_clone().expect("stdin"));
    let mut out = raw_fd(1);
    let mut line = Vec::new();
    let mut update = Vec::with_capacity(512);
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line).unwrap_or(0) == 0 {
            return;
        }
        let written = if let Some(answer) = crate::answer_setup(&line, SESSION) {
            out.write_all(answer.as_bytes())
        } else if let Some(id) = request_id(&line, "session/load") {
            out.write_all(
                format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{}}}}\n").as_bytes(),
            )
        } else if let Some(id) = request_id(&line, "session/prompt") {
            let start = mono_ns();
            let mut result = Ok(());
            for k in 1..=n as u64 {
                let due = start + k * interval_us * 1000;
                let now = mono_ns();
                if due > now {
                    std::thread::sleep(Duration::from_nanos(due - now));
                }
                update.clear();
                let _ = writeln!(
                    update,
                    "{{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{{\"sessionId\":\"{SESSION}\",\"update\":{{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{{\"type\":\"text\",\"text\":\"@t={} #{k}: the line splitter keeps a trailing carriage return; strip it before the length check.\"}}}}}}}}",
                    mono_ns()
                );
                result = out.write_all(&update);
                if result.is_err() {
                    break;
                }
            }
            result.and_then(|()| {
                out.write_all(
                    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"stopReason\":\"end_turn\"}}}}\n")
                        .as_bytes(),
                )
            })
        } else {
            Ok(())
        };
        if written.is_err() {
            return;
        }
    }
}

/// The agent's send time (ns) that message `msg` carries, if it is one of the paced updates.
fn mark(msg: &[u8]) -> Option<u64> {
    let at = memchr::memmem::find(msg, MARK)? + MARK.len();
    let digits = msg[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&msg[at..at + digits])
        .ok()?
        .parse()
        .ok()
}

/// Messages until `updates` paced updates came (and, with `response`, the response to that
/// request id, JSON text); each update's delay from the agent's send time to its receipt, ns, in
/// the order they came.
async fn delays(client: &mut Client, updates: usize, response: Option<&str>) -> Vec<u64> {
    let want: Option<serde_json::Value> =
        response.map(|id| serde_json::from_str(id).expect("an id in JSON"));
    let mut answered = want.is_none();
    let mut out = Vec::with_capacity(updates);
    while out.len() < updates || !answered {
        let msg = client.recv().await;
        let now = mono_ns();
        if let Some(sent) = mark(&msg) {
            out.push(now.saturating_sub(sent));
        } else if let Some(want) = &want
            && memchr::memmem::find(&msg, b"\"stopReason\"").is_some()
        {
            let value: serde_json::Value = serde_json::from_slice(&msg).expect("JSON");
            answered |= value.get("id") == Some(want);
        }
    }
    out
}

/// The prompt the pacing agent answers (id 1).
fn prompt(session: &str) -> String {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/prompt\",\"params\":{{\"sessionId\":\"{session}\",\"prompt\":[{{\"type\":\"text\",\"text\":\"Stream the refactoring plan.\"}}]}}}}"
    )
}

/// Run the future `f` makes on a thread of its own (its own current-thread runtime); its output
/// comes back on the receiver (dropped unsent if it panics).
fn on_thread<T, F, Fut>(name: &str, f: F) -> oneshot::Receiver<T>
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T>,
{
    let (tx, rx) = oneshot::channel();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            let _ = tx.send(runtime.block_on(f()));
        })
        .expect("a thread");
    rx
}

/// Who received the updates, how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Receiver {
    /// The agent on pipes, no proxy: the client prompting.
    Direct,
    /// The stdio proxy: the client prompting.
    Stdio,
    /// serve, WebSocket: A, the client that made the session and prompts.
    ServeA,
    /// serve, WebSocket: B, joined by `session/load`.
    ServeB,
    /// serve, Streamable HTTP (SSE): C, joined by `session/load`.
    ServeC,
}

impl Receiver {
    pub fn name(self) -> &'static str {
        match self {
            Receiver::Direct => "direct pipe (no proxy), the prompting client",
            Receiver::Stdio => "(a) stdio proxy, the prompting client",
            Receiver::ServeA => "serve, A: made the session and prompts (WebSocket)",
            Receiver::ServeB => "serve, B: joined by session/load (WebSocket)",
            Receiver::ServeC => "serve, C: joined by session/load (HTTP+SSE)",
        }
    }
}

pub struct Delay {
    pub receiver: Receiver,
    /// Sorted delays after the warm-up, ns.
    pub ns: Vec<u64>,
}

impl Delay {
    fn new(receiver: Receiver, mut ns: Vec<u64>) -> Delay {
        ns.drain(..WARMUP.min(ns.len()));
        ns.sort_unstable();
        let d = Delay { receiver, ns };
        eprintln!(
            "bench:   {}: p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
            receiver.name(),
            d.us(0.5),
            d.us(0.99),
            d.us(1.0)
        );
        d
    }

    /// The `q` quantile, µs.
    pub fn us(&self, q: f64) -> f64 {
        let idx = ((q * self.ns.len() as f64).ceil() as usize).clamp(1, self.ns.len()) - 1;
        self.ns[idx] as f64 / 1e3
    }
}

pub struct Delays {
    pub updates: usize,
    pub interval_us: u64,
    pub rows: Vec<Delay>,
}

/// One paced turn through a direct pipe or the stdio proxy, one client.
async fn single(target: Target, role: Vec<String>, n: usize) -> Vec<u64> {
    let rx = on_thread("bench-paced", move || async move {
        let (running, mut client) = start(target, &role).await;
        client.send(&prompt(&client.session)).await;
        let d = delays(&mut client, n, Some("1")).await;
        running.finish(client).await;
        d
    });
    rx.await.expect("the paced client panicked")
}

/// The delays of one paced turn of `n` updates, `interval_us` apart, to each receiver.
pub async fn run_delays(n: usize, interval_us: u64) -> Delays {
    let role = vec!["__pace".to_string(), n.to_string(), interval_us.to_string()];
    let mut rows = Vec::new();
    eprintln!(
        "bench: update delay: {n} updates, one every {interval_us} µs, through a direct pipe, the stdio proxy, and serve to 3 clients of one session"
    );
    let d = single(Target::Direct, role.clone(), n).await;
    rows.push(Delay::new(Receiver::Direct, d));
    let d = single(Target::Stdio, role.clone(), n).await;
    rows.push(Delay::new(Receiver::Stdio, d));

    let agent: Vec<String> = std::iter::once(me()).chain(role).collect();
    let serve = Serve::start(&agent);
    let (session_tx, session_rx) = oneshot::channel::<String>();
    let (go_tx, go_rx) = oneshot::channel::<()>();
    let at = serve.endpoint.clone();
    let a = on_thread("bench-client-a", move || async move {
        let mut client = Client::ws(&at).await;
        let _ = session_tx.send(client.session.clone());
        go_rx.await.expect("the go");
        client.send(&prompt(&client.session)).await;
        let d = delays(&mut client, n, Some("1")).await;
        client.close().await;
        d
    });
    let session = session_rx.await.expect("client A's session");
    let mut joined = Vec::new();
    let mut ready = Vec::new();
    for (name, http) in [("bench-client-b", false), ("bench-client-c", true)] {
        let (ready_tx, ready_rx) = oneshot::channel::<()>();
        let (at, session) = (serve.endpoint.clone(), session.clone());
        joined.push(on_thread(name, move || async move {
            let mut client = match http {
                false => Client::ws_bare(&at).await,
                true => Client::http_bare(&at).await,
            };
            client.join(&session).await;
            let _ = ready_tx.send(());
            let d = delays(&mut client, n, None).await;
            client.close().await;
            d
        }));
        ready.push(ready_rx);
    }
    for r in ready {
        r.await.expect("a client joining the session");
    }
    let _ = go_tx.send(());
    rows.push(Delay::new(
        Receiver::ServeA,
        a.await.expect("client A panicked"),
    ));
    for (rx, receiver) in joined.into_iter().zip([Receiver::ServeB, Receiver::ServeC]) {
        rows.push(Delay::new(receiver, rx.await.expect("a client panicked")));
    }
    serve.stop();
    Delays {
        updates: n,
        interval_us,
        rows,
    }
}
