//! The measurements: throughput and CPU per message on one flood, request→response latency,
//! and the RSS of `serve` with idle clients and with clients taking a flood at once.

use std::time::{Duration, Instant};

use futures_util::future::join_all;

use crate::client::Client;
use crate::roles::me;
use crate::server::{Running, Serve, Target, start, tick_us, ticks, vm_kib};
use crate::traffic::{SEED, prompt_request};

pub struct Scale {
    pub quick: bool,
    /// Messages of one flood (N−1 updates and the prompt's response).
    pub flood: usize,
    /// Floods per path (the median's throughput; CPU summed over all).
    pub flood_runs: usize,
    pub round_trips: usize,
    pub warmup: usize,
    /// Idle clients of the memory figure, in steps.
    pub idle_steps: [usize; 3],
    /// Clients attached to one session taking its floods at once, in steps; one flood's
    /// messages; the updates to deliver at each step (in as many floods as that takes).
    pub fan_clients: [usize; 3],
    pub fan_flood: usize,
    pub fan_deliveries: usize,
    /// The update-delay figure: updates of the paced turn, and the pace.
    pub paced_updates: usize,
    pub paced_interval_us: u64,
    /// Why (d), the TypeScript SDK's server, is left out (node or the peers missing).
    pub sdk_skipped: Option<String>,
}

impl Scale {
    pub fn get() -> Scale {
        let quick = std::env::var("BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
        let div = if quick { 10 } else { 1 };
        Scale {
            quick,
            flood: std::env::var("BENCH_SERVE_FLOOD")
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(200_000 / div),
            // Quick floods take ~30 ms: more of them, for 10 ms CPU ticks.
            flood_runs: if quick { 5 } else { 3 },
            round_trips: 20_000 / div,
            warmup: 2_000 / div,
            idle_steps: [1, 10, 100],
            fan_clients: [1, 10, 50],
            fan_flood: if quick { 10_000 } else { 50_000 },
            fan_deliveries: if quick { 1_000_000 } else { 5_000_000 },
            paced_updates: if quick { 2_500 } else { 20_000 },
            paced_interval_us: 1_000,
            sdk_skipped: crate::server::sdk_server().err(),
        }
    }
}

/// The paths a flood or a prompt crosses: the four through acp-journal, and (d) the TypeScript
/// SDK's own server when it can run.
fn paths(scale: &Scale) -> Vec<Target> {
    let mut paths = vec![Target::Stdio, Target::Ws, Target::Http, Target::Http2];
    match &scale.sdk_skipped {
        None => paths.push(Target::Sdk),
        Some(why) => eprintln!("bench: (d) skipped: {why}"),
    }
    paths
}

fn flood_role(n: usize) -> Vec<String> {
    vec!["__sflood".into(), n.to_string(), SEED.to_string()]
}

// --- 1. throughput -------------------------------------------------------------------------

pub struct FloodRun {
    pub secs: f64,
    pub ticks: u64,
    /// VmHWM (KiB) of the process once the flood is through.
    pub hwm: u64,
}

pub struct Throughput {
    pub target: Target,
    pub messages: usize,
    pub runs: Vec<FloodRun>,
}

impl Throughput {
    /// Messages per second of the median run.
    pub fn msg_s(&self) -> f64 {
        let mut secs: Vec<f64> = self.runs.iter().map(|r| r.secs).collect();
        secs.sort_by(f64::total_cmp);
        self.messages as f64 / secs[secs.len() / 2]
    }

    /// CPU µs of the process per message, over every run (10 ms ticks: summed for precision).
    pub fn cpu_us(&self) -> f64 {
        let ticks: u64 = self.runs.iter().map(|r| r.ticks).sum();
        ticks as f64 * tick_us() / (self.messages * self.runs.len()) as f64
    }

    /// The highest peak RSS (KiB) of the runs.
    pub fn hwm(&self) -> u64 {
        self.runs.iter().map(|r| r.hwm).max().unwrap_or(0)
    }
}

/// One flood through `target`: time from the prompt sent to the N-th message received, and
/// the CPU the process spent meanwhile.
async fn flood_once(target: Target, n: usize) -> FloodRun {
    let (running, mut client) = start(target, &flood_role(n)).await;
    let prompt = prompt_request(&client.session);
    let ticks0 = running.ticks();
    let t0 = Instant::now();
    client.send(prompt.trim_end()).await;
    let last = client.count(n).await;
    let secs = t0.elapsed().as_secs_f64();
    let ticks = running.ticks().saturating_sub(ticks0);
    let hwm = vm_kib(running.pid, "VmHWM:");
    assert!(
        memchr::memmem::find(&last, br#""id":1"#).is_some()
            && memchr::memmem::find(&last, br#""result""#).is_some(),
        "{}: the last message is not the prompt's response: {}",
        target.name(),
        String::from_utf8_lossy(&last)
    );
    running.finish(client).await;
    eprintln!(
        "bench:   {}: {n} messages in {secs:.3} s ({:.0} msg/s), {ticks} CPU ticks, peak RSS {hwm} KiB",
        target.name(),
        n as f64 / secs
    );
    FloodRun { secs, ticks, hwm }
}

pub async fn run_throughput(scale: &Scale) -> Vec<Throughput> {
    let mut all: Vec<Throughput> = paths(scale)
        .into_iter()
        .map(|target| Throughput {
            target,
            messages: scale.flood,
            runs: Vec::new(),
        })
        .collect();
    for round in 0..scale.flood_runs {
        eprintln!(
            "bench: flood round {} of {} ({} messages per path)",
            round + 1,
            scale.flood_runs,
            scale.flood
        );
        // Rotated, so drift hits every path alike.
        for j in 0..all.len() {
            let i = (round + j) % all.len();
            let run = flood_once(all[i].target, scale.flood).await;
            all[i].runs.push(run);
        }
    }
    all
}

// --- 2. latency -----------------------------------------------------------------------------

pub struct Latency {
    pub target: Target,
    /// Sorted round trips, ns.
    pub rtt: Vec<u64>,
    /// CPU µs of the path's process (the agent's for the direct pipe) per round trip.
    pub cpu_us: f64,
}

impl Latency {
    pub fn us(&self, q: f64) -> f64 {
        let idx = ((q * self.rtt.len() as f64).ceil() as usize).clamp(1, self.rtt.len()) - 1;
        self.rtt[idx] as f64 / 1e3
    }
}

/// A `session/prompt` with id `id` (answered by the turns agent with a chunk, a usage update and
/// its response).
fn prompt(session: &str, id: u64) -> String {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"session/prompt\",\"params\":{{\"sessionId\":\"{session}\",\"prompt\":[{{\"type\":\"text\",\"text\":\"Refactor the line splitter, then run the tests.\"}}]}}}}"
    )
}

struct TurnPath {
    running: Running,
    client: Client,
    next: u64,
}

impl TurnPath {
    /// One prompt → its response, ns.
    async fn round_trip(&mut self) -> u64 {
        let id = self.next;
        self.next += 1;
        let msg = prompt(&self.client.session, id);
        let t = Instant::now();
        self.client.send(&msg).await;
        self.client.response(&id.to_string()).await;
        t.elapsed().as_nanos() as u64
    }
}

pub async fn run_latency(scale: &Scale) -> Vec<Latency> {
    let targets: Vec<Target> = std::iter::once(Target::Direct)
        .chain(paths(scale))
        .collect();
    let mut paths = Vec::new();
    for &target in &targets {
        let (running, client) = start(target, &["__turns".to_string()]).await;
        let mut path = TurnPath {
            running,
            client,
            next: 1,
        };
        eprintln!("bench: latency warm-up: {}", target.name());
        for _ in 0..scale.warmup {
            path.round_trip().await;
        }
        paths.push(path);
    }
    let ticks0: Vec<u64> = paths.iter().map(|p| p.running.ticks()).collect();
    let block = (scale.round_trips / 20).max(1);
    let mut rtt: Vec<Vec<u64>> = targets
        .iter()
        .map(|_| Vec::with_capacity(scale.round_trips))
        .collect();
    let (mut done, mut round) = (0, 0);
    while done < scale.round_trips {
        let n = block.min(scale.round_trips - done);
        for j in 0..paths.len() {
            let i = (round + j) % paths.len();
            for _ in 0..n {
                rtt[i].push(paths[i].round_trip().await);
            }
        }
        done += n;
        round += 1;
    }
    let cpu_us: Vec<f64> = paths
        .iter()
        .zip(&ticks0)
        .map(|(p, t0)| {
            p.running.ticks().saturating_sub(*t0) as f64 * tick_us() / scale.round_trips as f64
        })
        .collect();
    for p in paths {
        p.running.finish(p.client).await;
    }
    let out: Vec<Latency> = targets
        .iter()
        .zip(rtt)
        .zip(cpu_us)
        .map(|((&target, mut rtt), cpu_us)| {
            rtt.sort_unstable();
            Latency {
                target,
                rtt,
                cpu_us,
            }
        })
        .collect();
    for l in &out {
        eprintln!(
            "bench: latency {}: p50 {:.1} µs, p99 {:.1} µs, {:.1} CPU µs per round trip",
            l.target.name(),
            l.us(0.5),
            l.us(0.99),
            l.cpu_us
        );
    }
    out
}

// --- 3. memory ------------------------------------------------------------------------------

/// VmRSS (KiB) of serve with 0, then each step of, idle clients of one transport.
pub struct Idle {
    pub target: Target,
    /// (clients, VmRSS KiB).
    pub rss: Vec<(usize, u64)>,
}

/// Clients connected one after another (each initialized, with a session), left idle; RSS
/// read after each step settles.
pub async fn run_idle(scale: &Scale, target: Target) -> Idle {
    let serve = Serve::start(&[me(), "__turns".to_string()]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut rss = vec![(0, vm_kib(serve.pid(), "VmRSS:"))];
    let mut clients = Vec::new();
    for &k in &scale.idle_steps {
        while clients.len() < k {
            clients.push(match target {
                Target::Ws => Client::ws(&serve.endpoint).await,
                _ => Client::http(&serve.endpoint).await,
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let kib = vm_kib(serve.pid(), "VmRSS:");
        eprintln!(
            "bench: {}: {k} idle clients: serve VmRSS {kib} KiB",
            target.name()
        );
        rss.push((k, kib));
    }
    for c in clients {
        c.close().await;
    }
    serve.stop();
    Idle { target, rss }
}

/// Clients attached to one busy session taking its floods at once (WebSocket).
pub struct Fan {
    pub clients: usize,
    /// Messages of one flood (N−1 updates, then the prompt's response).
    pub messages: usize,
    /// Floods (prompt turns), one after another.
    pub turns: usize,
    /// From each prompt sent to the last client's last message of its flood, summed.
    pub secs: f64,
    pub ticks: u64,
    /// VmRSS (KiB) of serve with every client attached, before the first prompt.
    pub rss_before: u64,
    /// VmHWM (KiB) of serve after the last flood.
    pub hwm: u64,
}

impl Fan {
    /// The agent's updates, all turns.
    pub fn agent_updates(&self) -> usize {
        (self.messages - 1) * self.turns
    }

    /// Updates delivered, every client's.
    pub fn delivered(&self) -> usize {
        self.clients * self.agent_updates()
    }

    pub fn delivered_s(&self) -> f64 {
        self.delivered() as f64 / self.secs
    }

    /// CPU µs of serve per update delivered (to one client).
    pub fn cpu_us_delivered(&self) -> f64 {
        self.ticks as f64 * tick_us() / self.delivered() as f64
    }

    /// CPU µs of serve per update of the agent (delivered to every client).
    pub fn cpu_us_update(&self) -> f64 {
        self.ticks as f64 * tick_us() / self.agent_updates() as f64
    }
}

/// A `session/prompt` with id `id` in `session` (the flood agent answers any).
fn flood_prompt(session: &str, id: usize) -> String {
    prompt_request(session)
        .trim_end()
        .replacen("\"id\":1", &format!("\"id\":{id}"), 1)
}

/// One client's part of a flood: the prompting client's N−1 updates and the response to `id`;
/// a joined client's echo of the prompt (`user_message_chunk`, ACP v1), the N−1 updates, and
/// the host's notice that the turn ended (`turnEnded`).
async fn take_flood(client: &mut Client, n: usize, prompter: bool, id: usize, last_update: &[u8]) {
    if prompter {
        let last = client.count(n).await;
        let want = format!("\"id\":{id},");
        assert!(
            memchr::memmem::find(&last, want.as_bytes()).is_some()
                && memchr::memmem::find(&last, br#""result""#).is_some(),
            "fan-out: the prompting client's last message is not the response to {id}: {}",
            String::from_utf8_lossy(&last)
        );
        return;
    }
    // The echo comes before the agent has the prompt, so before its updates.
    let first = client.recv().await;
    let echoed = memchr::memmem::find(&first, br#""user_message_chunk""#).is_some();
    let rest = if echoed { n - 1 } else { n - 2 };
    let last = client.count(rest).await;
    assert_eq!(
        &last[..],
        last_update,
        "fan-out: a joined client's last message is not the flood's last update"
    );
    // Then the host tells it the turn ended (the prompt's answer went to the prompting client).
    let told = client.recv().await;
    assert!(
        memchr::memmem::find(&told, br#""turnEnded""#).is_some(),
        "fan-out: a joined client is not told the turn ended: {}",
        String::from_utf8_lossy(&told)
    );
}

/// `clients` WebSocket clients on one session of serve in front of the flood agent: the first
/// makes the session (`session/new`) and prompts, the others join it by `session/load` first;
/// `turns` floods of `scale.fan_flood` messages, each taken by every client at once.
pub async fn run_fan(scale: &Scale, clients: usize) -> Fan {
    let n = scale.fan_flood;
    // About the same deliveries at every step (10 ms CPU ticks): more turns for fewer clients.
    let turns = (scale.fan_deliveries / (clients * n)).max(1);
    let last_update = {
        let data = crate::traffic::Flood::new(SEED).lines(n);
        let updates = &data[..data.len() - crate::traffic::PROMPT_RESPONSE.len() - 1];
        let from = memchr::memrchr(b'\n', updates).map_or(0, |i| i + 1);
        updates[from..].to_vec()
    };
    let mut agent = vec![me()];
    agent.extend(flood_role(n));
    let serve = Serve::start(&agent);
    let mut all = vec![Client::ws(&serve.endpoint).await];
    let session = all[0].session.clone();
    while all.len() < clients {
        let mut c = Client::ws_bare(&serve.endpoint).await;
        c.join(&session).await;
        all.push(c);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid = serve.pid();
    let rss_before = vm_kib(pid, "VmRSS:");
    eprintln!(
        "bench: fan-out: {clients} WebSocket clients on one session (the first made it, the others joined by session/load), {turns} flood(s) of {n}"
    );
    let ticks0 = ticks(pid);
    let mut secs = 0.0;
    for turn in 1..=turns {
        let t0 = Instant::now();
        all[0].send(&flood_prompt(&session, turn)).await;
        join_all(
            all.iter_mut()
                .enumerate()
                .map(|(i, c)| take_flood(c, n, i == 0, turn, &last_update)),
        )
        .await;
        secs += t0.elapsed().as_secs_f64();
    }
    let ticks = ticks(pid).saturating_sub(ticks0);
    let hwm = vm_kib(pid, "VmHWM:");
    for c in all {
        c.close().await;
    }
    serve.stop();
    let fan = Fan {
        clients,
        messages: n,
        turns,
        secs,
        ticks,
        rss_before,
        hwm,
    };
    eprintln!(
        "bench:   {:.3} s, {:.0} updates delivered/s, {:.2} CPU µs per update delivered, {:.2} per agent update; VmRSS {} KiB before, peak {} KiB",
        fan.secs,
        fan.delivered_s(),
        fan.cpu_us_delivered(),
        fan.cpu_us_update(),
        fan.rss_before,
        fan.hwm
    );
    fan
}
