//! kill -9 of the proxy at random points, many times: random delays and random traffic
//! (prompts, streams of updates, permission requests, big lines both ways, several sessions).
//! After each kill every journal in the store is readable, the catalog lists, the agent is
//! gone, and every line the client received is in the journal, in order.
//!
//! Runs are seeded: `ACP_KILL_SEED` (default: from the clock) and `ACP_KILL_RUNS` (default
//! 200); a failure names the seed that reproduces its traffic and delay.

use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use acp_journal::catalog::Catalog;
use acp_journal::journal::{JournalDir, SegmentReader};

use acp_journal::wire::Side;
use serde_json::json;

use crate::util::{TestClient, journaled, proxied, reply_to, scripted, segment_paths, wait_gone};

/// Runs at once (each is a proxy, a Python agent and this client).
const PARALLEL: usize = 6;

/// SplitMix64: small, seedable, good enough to pick traffic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// When the proxy is killed.
#[derive(Clone, Copy, Debug)]
enum Trigger {
    /// This long after it was started.
    After(Duration),
    /// Once the client has received this many lines, and this long after.
    Lines(usize, Duration),
}

/// The longest a run waits for its trigger: the traffic never stops, so only a stalled proxy
/// would make it wait that long (its store is still checked).
const STALL: Duration = Duration::from_secs(20);

impl Trigger {
    /// Kill `proxy` when due, on a thread of its own. The proxy stays our child (a zombie at
    /// worst) until it is reaped after that thread is joined: its pid cannot be reused.
    /// The thread returns false when the traffic stalled before the trigger.
    fn arm(self, proxy: i32, seen: Arc<AtomicUsize>) -> std::thread::JoinHandle<bool> {
        std::thread::spawn(move || {
            let started = Instant::now();
            let mut flowing = true;
            match self {
                Trigger::After(delay) => std::thread::sleep(delay),
                Trigger::Lines(lines, extra) => {
                    while seen.load(Ordering::Relaxed) < lines {
                        if started.elapsed() > STALL {
                            flowing = false;
                            break;
                        }
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    std::thread::sleep(extra);
                }
            }
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(proxy, libc::SIGKILL) };
            flowing
        })
    }
}

/// What one run saw.
struct Outcome {
    /// Complete lines the client received.
    received: usize,
}

/// The next client message of a random traffic mix, as a line without its newline;
/// `sessions` grows with `session/new`.
fn next_message(rng: &mut Rng, id: &mut u64, sessions: &mut u64) -> String {
    *id += 1;
    let session = format!("mix-{}", rng.below(*sessions));
    match rng.below(100) {
        0..=59 => {
            let big = if rng.chance(5) {
                16 + rng.below(256)
            } else {
                0
            };
            let spec = format!("updates={} big={big} perm={}", rng.below(60), rng.below(3));
            json!({"jsonrpc":"2.0","id":*id,"method":"session/prompt","params":{"sessionId":session,"prompt":[{"type":"text","text":spec}]}}).to_string()
        }
        60..=62 => {
            // A big line from the client: a pasted file.
            let pasted = "p".repeat((16 << 10) + rng.below(256 << 10) as usize);
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"session/prompt","params":{{"sessionId":"{session}","prompt":[{{"type":"text","text":"updates=3"}},{{"type":"text","text":"{pasted}"}}]}}}}"#
            )
        }
        63..=84 => {
            json!({"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":session}})
                .to_string()
        }
        _ => {
            *sessions += 1;
            json!({"jsonrpc":"2.0","id":*id,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}).to_string()
        }
    }
}

/// One run: traffic until the proxy is killed, then the checks. `Err` says what broke.
fn one_run(seed: u64) -> Result<Outcome, String> {
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("j");
    let pid_file = dir.path().join("agent.pid");
    let mut client = TestClient::spawn_env(
        &proxied(&store, &scripted("mix")),
        &[("AGENT_PID_FILE", &pid_file)],
    );
    let proxy = client.child.id() as i32;
    // A fifth of the kills land while starting up (a random delay), the others once the client
    // has received a random number of lines (and a random moment more).
    let (startup, lines, extra) = (
        rng.chance(20),
        rng.below(500) as usize,
        Duration::from_micros(rng.below(5000)),
    );
    let trigger = if startup {
        Trigger::After(Duration::from_micros(rng.below(50_000)))
    } else {
        Trigger::Lines(lines, extra)
    };
    let seen = Arc::new(AtomicUsize::new(0));
    let killer = trigger.arm(proxy, seen.clone());

    let (mut id, mut sessions) = (0u64, 1u64);
    let mut script = vec![
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}).to_string(),
        json!({"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}).to_string(),
    ];
    id += 1;
    'traffic: loop {
        let msg = if script.is_empty() {
            next_message(&mut rng, &mut id, &mut sessions)
        } else {
            script.remove(0)
        };
        if !client.try_send_raw((msg + "\n").as_bytes()) {
            break;
        }
        // Take what has arrived (waiting a little, at random), answering the agent's requests.
        let mut wait = Duration::from_micros(rng.below(3000));
        loop {
            match client.recv_within(wait) {
                Ok(Some(got)) => {
                    seen.fetch_add(1, Ordering::Relaxed);
                    let reply = got.json.as_ref().and_then(reply_to);
                    if let Some(reply) = reply {
                        let mut line = serde_json::to_vec(&reply).unwrap();
                        line.push(b'\n');
                        if !client.try_send_raw(&line) {
                            break 'traffic;
                        }
                    }
                }
                Ok(None) => break,
                Err(_) => break 'traffic,
            }
            wait = Duration::ZERO;
        }
    }
    while client.recv().is_some() {}
    if !killer.join().unwrap() {
        return Err(format!(
            "the traffic stalled: {} lines in {STALL:?} ({trigger:?})",
            client.received.len()
        ));
    }
    let status = client.child.wait().unwrap();
    let code = {
        use std::os::unix::process::ExitStatusExt;
        status.signal()
    };
    if code != Some(libc::SIGKILL) {
        return Err(format!(
            "the proxy ended on its own ({status}) before the kill ({trigger:?}); stderr:\n{}",
            String::from_utf8_lossy(&client.stderr.lock().unwrap())
        ));
    }
    let agent = std::fs::read_to_string(&pid_file)
        .ok()
        .and_then(|p| p.trim().parse::<i32>().ok());
    if let Some(agent) = agent
        && !wait_gone(agent)
    {
        return Err(format!("the agent {agent} outlived the proxy"));
    }
    check_store(&store)?;

    // A line cut by the kill is not a message the client received.
    let received: Vec<&[u8]> = client
        .received
        .iter()
        .map(|r| &r.raw[..])
        .filter(|raw| raw.ends_with(b"\n"))
        .collect();
    let journal = journaled(&store, Side::Agent);
    if journal.len() < received.len() {
        return Err(format!(
            "the client received {} lines, the journal holds {}",
            received.len(),
            journal.len()
        ));
    }
    if let Some(i) = (0..received.len()).find(|&i| journal[i] != received[i]) {
        return Err(format!(
            "line {i} of {} received differs from the journal:\n  journal:  {:.200}\n  received: {:.200}",
            received.len(),
            String::from_utf8_lossy(&journal[i]),
            String::from_utf8_lossy(received[i])
        ));
    }
    Ok(Outcome {
        received: received.len(),
    })
}

/// Every file in the store is a journal with no damage, and the catalog lists.
fn check_store(store: &Path) -> Result<(), String> {
    for path in segment_paths(store) {
        let mut reader = SegmentReader::open(&path).map_err(|e| e.to_string())?;
        reader.by_ref().count();
        let tail = reader.tail().unwrap();
        if tail.is_corrupt() {
            return Err(format!("{}: {tail}", path.display()));
        }
    }
    JournalDir::new(store)
        .sessions()
        .map_err(|e| format!("listing the store: {e}"))?;
    Ok(())
}

#[test]
fn kill_9_at_random_points_never_loses_what_the_client_received() {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let runs = env("ACP_KILL_RUNS").unwrap_or(200);
    let base = env("ACP_KILL_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    let started = Instant::now();
    let next = AtomicU64::new(0);
    let failures = Mutex::new(Vec::new());
    let received = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..PARALLEL {
            scope.spawn(|| {
                loop {
                    let run = next.fetch_add(1, Ordering::Relaxed);
                    if run >= runs {
                        return;
                    }
                    let seed = base.wrapping_add(run);
                    match one_run(seed) {
                        Ok(outcome) => received.lock().unwrap().push(outcome.received),
                        Err(why) => failures.lock().unwrap().push(format!(
                            "seed {seed}: {why}\n  reproduce: ACP_KILL_SEED={seed} ACP_KILL_RUNS=1 cargo test --test it kill_storm"
                        )),
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {runs} runs failed (base seed {base}):\n{}",
        failures.len(),
        failures.join("\n")
    );
    let mut received = received.into_inner().unwrap();
    received.sort_unstable();
    eprintln!(
        "kill storm: {runs} runs in {:.1?} (base seed {base}); lines received before the kill: min {}, median {}, max {}",
        started.elapsed(),
        received[0],
        received[received.len() / 2],
        received[received.len() - 1]
    );
    assert!(
        received.iter().any(|n| *n > 0),
        "no run was killed in the middle of traffic"
    );
}
