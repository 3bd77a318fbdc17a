//! Benchmark: how long after the client receives a line `acp-journal watch` prints it.
//!
//! A real proxy (`acp-journal -- <this binary as an agent>`) and a watcher (`acp-journal watch
//! --all --json`, started first) run on a fresh store. The agent answers `initialize` and
//! `session/new`, and for each `session/prompt` sends `session/update`s (numbered) at irregular
//! intervals (0–20 ms, some in bursts), then the answer. This process is the client: one thread
//! stamps each update as it reads it from the proxy's stdout, another as it reads it from the
//! watcher's stdout; latency = watcher stamp − client stamp, per update (the proxy writes the
//! journal before it forwards, so this is the watcher's wake-up, decoding and printing, less the
//! proxy's forwarding: negative when the watcher printed first).
//! Reports p50, p90, p99 and max on stdout. Target: p99 under 100 ms.
//!
//! `BENCH_QUICK=1`: 500 updates instead of 3000.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

const PROXY: &str = env!("CARGO_BIN_EXE_acp-journal");
const ROLE: &str = "ACPJ_WATCH_BENCH_AGENT";
const SESSION: &str = "watch-bench-session";

/// The agent: numbered updates per prompt, at irregular intervals.
fn agent() {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut n: u64 = 0;
    let mut rng: u64 = 0x9E37_79B9_7F4A_7C15;
    for line in stdin.lock().lines() {
        let Ok(line) = line else { return };
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let id = msg["id"].to_string();
        let result = match msg["method"].as_str() {
            Some("initialize") => {
                r#"{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}"#.to_string()
            }
            Some("session/new") => format!(r#"{{"sessionId":"{SESSION}"}}"#),
            Some("session/prompt") => {
                let count = msg["params"]["prompt"][0]["text"]
                    .as_str()
                    .and_then(|t| t.parse::<u64>().ok())
                    .unwrap_or(100);
                for _ in 0..count {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    // A third in bursts (no pause), the rest 1–20 ms apart.
                    if !rng.is_multiple_of(3) {
                        std::thread::sleep(Duration::from_micros(1000 + rng % 19_000));
                    }
                    let text = "lorem ipsum dolor sit amet ".repeat(1 + (rng % 8) as usize);
                    let _ = writeln!(
                        out,
                        r##"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{SESSION}","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"#{n} {text}"}}}}}}}}"##
                    );
                    let _ = out.flush();
                    n += 1;
                }
                r#"{"stopReason":"end_turn"}"#.to_string()
            }
            _ => continue,
        };
        let _ = writeln!(out, r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#);
        let _ = out.flush();
    }
}

/// The update number in a line (`"#N `), if it is one of ours.
fn number(line: &str) -> Option<u64> {
    let at = line.find("\"#")? + 2;
    line[at..].split(' ').next()?.parse().ok()
}

fn main() {
    if std::env::var_os(ROLE).is_some() {
        agent();
        return;
    }
    let total: u64 = if std::env::var_os("BENCH_QUICK").is_some() {
        500
    } else {
        3000
    };
    let store = tempfile::tempdir().unwrap();
    let me = std::env::current_exe().unwrap();

    let mut watcher = Command::new(PROXY)
        .arg("--journal-dir")
        .arg(store.path())
        .args(["watch", "--all", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (seen_tx, seen) = channel::<(u64, Instant)>();
    let watch_out = watcher.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(watch_out).lines() {
            let Ok(line) = line else { return };
            if let Some(n) = number(&line) {
                let _ = seen_tx.send((n, Instant::now()));
            }
        }
    });
    let mut watch_err = BufReader::new(watcher.stderr.take().unwrap());
    let mut note = String::new();
    watch_err.read_line(&mut note).unwrap();
    assert!(note.contains("watching every session"), "{note}");

    let mut proxy = Command::new(PROXY)
        .arg("--journal-dir")
        .arg(store.path())
        .arg("--")
        .arg(&me)
        .env(ROLE, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_proxy = proxy.stdin.take().unwrap();
    let (got_tx, got) = channel::<(Option<u64>, Instant, String)>();
    let from_proxy = proxy.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(from_proxy).lines() {
            let Ok(line) = line else { return };
            let _ = got_tx.send((number(&line), Instant::now(), line));
        }
    });
    let mut received: HashMap<u64, Instant> = HashMap::new();
    let mut request = |id: u64, method: &str, params: &str| {
        writeln!(
            to_proxy,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#
        )
        .unwrap();
        to_proxy.flush().unwrap();
        loop {
            let (n, at, line) = got.recv_timeout(Duration::from_secs(60)).unwrap();
            match n {
                Some(n) => {
                    received.insert(n, at);
                }
                None if line.contains(&format!(r#""id":{id}"#)) => return,
                None => {}
            }
        }
    };
    request(
        0,
        "initialize",
        r#"{"protocolVersion":1,"clientCapabilities":{}}"#,
    );
    request(1, "session/new", r#"{"cwd":"/bench","mcpServers":[]}"#);
    let started = Instant::now();
    let per_turn = 250;
    for turn in 0..total / per_turn {
        request(
            2 + turn,
            "session/prompt",
            &format!(
                r#"{{"sessionId":"{SESSION}","prompt":[{{"type":"text","text":"{per_turn}"}}]}}"#
            ),
        );
    }
    let elapsed = started.elapsed();
    let mut printed: HashMap<u64, Instant> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while printed.len() < received.len() && Instant::now() < deadline {
        if let Ok((n, at)) = seen.recv_timeout(Duration::from_secs(1)) {
            printed.insert(n, at);
        }
    }
    let _ = watcher.kill();
    let _ = watcher.wait();
    let _ = proxy.kill();
    let _ = proxy.wait();

    // Milliseconds, negative when the watcher printed first (the journal is written before the
    // line is forwarded, so the watcher may beat the client).
    let ms = |later: Instant, earlier: Instant| match later.checked_duration_since(earlier) {
        Some(d) => d.as_secs_f64() * 1000.0,
        None => -(earlier.duration_since(later).as_secs_f64() * 1000.0),
    };
    let mut latencies: Vec<f64> = received
        .iter()
        .filter_map(|(n, client)| printed.get(n).map(|w| ms(*w, *client)))
        .collect();
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    println!("## watch latency\n");
    println!(
        "{} updates in {:.1} s through `acp-journal -- agent`; `acp-journal watch --all --json` printed {} of them.\n",
        received.len(),
        elapsed.as_secs_f64(),
        latencies.len()
    );
    println!("| watcher printed − client received | ms |\n|---|---|");
    println!("| min | {:.2} |", latencies[0]);
    for (name, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)] {
        println!("| {name} | {:.2} |", at(q));
    }
    println!("| max | {:.2} |", latencies[latencies.len() - 1]);
    let missing = received.len() - latencies.len();
    if missing > 0 {
        println!("\n{missing} updates never printed by the watcher");
    }
}
