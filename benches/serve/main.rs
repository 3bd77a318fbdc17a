//! Benchmark of `acp-journal serve` (ACP over WebSocket and Streamable HTTP at `/acp`) against
//! the stdio proxy on the same traffic.
//!
//! Run with `BENCH_QUICK=1 cargo bench --bench serve` (~20 s once built; without `BENCH_QUICK`
//! the full run, ~2 min: 10× the floods and round trips, 8× the paced updates, 5× the fan-out's
//! deliveries). The markdown report goes to stdout and to `target/serve-bench-report.md`;
//! progress goes to stderr. A watchdog aborts after 10 minutes. No figure is checked against a
//! target.
//!
//! Measured, in one run: (1) throughput and CPU per message of the acp-journal process on one
//! flood, for (a) the stdio proxy on pipes, (b) serve over WebSocket, (c) serve over Streamable
//! HTTP (SSE) and (c2) the same over HTTP/2 (h2c, serve's 64 KiB windows), each as a ratio to
//! (a), and (d) the TypeScript SDK 2.4.0's own server over
//! WebSocket (`tests/agents/ts_sdk_server.mjs` run beside `.peers/node-v2`, one agent process per
//! connection; skipped with a note when node or the peers are missing; its CPU is the node
//! process's plus its agent child's); (2) prompt → response round trips (p50, p99) for a direct
//! pipe to the agent and (a), (b), (c), (c2), (d); (3) an update's delay from the agent to each client
//! of one session ([`paced`]: the one prompting, one that joined by `session/load` over WebSocket,
//! one over HTTP+SSE; a direct pipe and (a) for comparison); (4) serve's RSS with 1, 10 and 100
//! idle clients (each initialized, with a session); (5) 1, 10 and 50 WebSocket clients attached
//! to one session (the others joined the first's by `session/load`) taking its floods: serve's
//! CPU per update delivered and per agent update, deliveries per second, RSS before and peak;
//! (6) without the token ([`attack`]): guesses answered in 10 s by 1, 4 and 16 loops, and a
//! token holder's round trips while 0, 2, 4 and 8 sockets flood HTTP/2 `PING`s.
//!
//! The proxy bench's helper roles and traffic are reused as they are (its modules included
//! below from `benches/proxy/`); this binary re-executes itself as `__turns` (the prompt-turns
//! agent), `__echo`, `__flood N SEED`, and its own `__sflood N SEED`: the flood agent with the
//! `session/new` serve needs (serve sends a session's lines only to the connections attached to
//! it), answering any number of clients and prompts; and `__pace N INTERVAL_US`, the pacing
//! agent of [`paced`].
//!
//! Environment: `BENCH_QUICK=1`; `BENCH_SERVE_ONLY=throughput|latency|delay|memory|fan|attack` runs
//! one measurement (`memory`: the idle clients and the fan-out); `BENCH_SERVE_FLOOD=N` sets the
//! throughput flood's messages (past ~230 000, one turn passes serve's 64 MiB `--client-queue`
//! and the client is dropped);
//! `BENCH_PROXY_ARGS="--fsync never"` (whitespace-separated) adds options to both acp-journal
//! command lines; `ACP_JOURNAL_LOG` is passed through (serve gets `warn` with its address line
//! when unset).
//!
//! Layout: [`client`] (one ACP client per transport), [`server`] (the paths and processes),
//! [`figures`] (the measurements), [`paced`] (the update delay), [`summary`] (the report).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

// The proxy bench's modules, shared as they are (each refers to the others as `crate::…`).
#[allow(dead_code, unused_imports)]
#[path = "../proxy/cpu.rs"]
mod cpu;
#[allow(dead_code, unused_imports)]
#[path = "../proxy/measure.rs"]
mod measure;
#[allow(dead_code, unused_imports)]
#[path = "../proxy/peers.rs"]
mod peers;
#[allow(dead_code, unused_imports)]
#[path = "../proxy/procfs.rs"]
mod procfs;
#[allow(dead_code, unused_imports)]
#[path = "../proxy/report.rs"]
mod report;
#[allow(dead_code, unused_imports)]
#[path = "../proxy/roles.rs"]
mod roles;
#[allow(dead_code, unused_imports)]
#[path = "../proxy/traffic.rs"]
mod traffic;
#[allow(dead_code, unused_imports)]
#[path = "../proxy/turns.rs"]
mod turns;

mod attack;
mod client;
mod figures;
mod paced;
mod server;
mod summary;

use roles::{raw_fd, request_id};
use traffic::{Flood, PROMPT_RESPONSE, init_response};

/// The whole bench is aborted after this long (a hung child must not hang CI).
const WATCHDOG: Duration = Duration::from_secs(600);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("__echo") => roles::echo_agent(),
        Some("__turns") => turns::turns_agent(),
        Some("__flood") => {
            roles::flood_agent(args[2].parse().expect("N"), args[3].parse().expect("SEED"))
        }
        Some("__sflood") => session_flood_agent(
            args[2].parse().expect("__sflood N SEED"),
            args[3].parse().expect("__sflood N SEED"),
        ),
        Some("__pace") => paced::pacing_agent(
            args[2].parse().expect("__pace N INTERVAL_US"),
            args[3].parse().expect("__pace N INTERVAL_US"),
        ),
        // `cargo bench` passes `--bench`; anything else runs the bench.
        _ => bench(),
    }
}

/// The flood agent for serve: the proxy bench's flood (generated before it answers anything),
/// with a session. Answers every `initialize`, every `session/new` (always the flood's session),
/// and every `session/prompt` with the N−1 updates then the response; ignores anything else;
/// ends at EOF.
fn session_flood_agent(n: usize, seed: u64) {
    let mut flood = Flood::new(seed);
    let session = flood.session.clone();
    let data = flood.lines(n);
    let updates = &data[..data.len() - PROMPT_RESPONSE.len()];
    let mut input = BufReader::new(raw_fd(0).try_clone().expect("stdin"));
    let mut out = raw_fd(1);
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line).unwrap_or(0) == 0 {
            return;
        }
        let written = if let Some(answer) = answer_setup(&line, &session) {
            out.write_all(answer.as_bytes())
        } else if let Some(id) = request_id(&line, "session/prompt") {
            out.write_all(updates).and_then(|()| {
                out.write_all(
                    PROMPT_RESPONSE
                        .replacen("\"id\":1", &format!("\"id\":{id}"), 1)
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

/// A bench agent's answer to `initialize` or `session/new` (which makes `session`), if `line`
/// is one of them.
pub fn answer_setup(line: &[u8], session: &str) -> Option<String> {
    if let Some(id) = request_id(line, "initialize") {
        return Some(init_response(&id));
    }
    let id = request_id(line, "session/new")?;
    Some(format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"sessionId\":\"{session}\"}}}}\n"
    ))
}

fn bench() {
    std::thread::spawn(|| {
        std::thread::sleep(WATCHDOG);
        eprintln!("bench: watchdog: no result after {WATCHDOG:?}; aborting");
        std::process::exit(2);
    });
    let scale = figures::Scale::get();
    let load = measure::Load::start();
    let started = Instant::now();
    eprintln!(
        "bench: serve vs stdio proxy, {}{}",
        roles::PROXY,
        if scale.quick { " (BENCH_QUICK)" } else { "" }
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    // `BENCH_SERVE_ONLY=throughput|latency|delay|memory|fan|attack`: one measurement (for
    // experiments; `memory` is the idle clients and the fan-out).
    let only = std::env::var("BENCH_SERVE_ONLY").unwrap_or_default();
    let run = |what: &str| only.is_empty() || only == what || (only == "memory" && what == "fan");
    let results = runtime.block_on(async {
        let mut results = summary::Results::default();
        if run("throughput") {
            results.throughput = figures::run_throughput(&scale).await;
        }
        if run("latency") {
            results.latency = figures::run_latency(&scale).await;
        }
        if run("delay") {
            results.delays =
                Some(paced::run_delays(scale.paced_updates, scale.paced_interval_us).await);
        }
        if run("memory") {
            for target in [server::Target::Ws, server::Target::Http] {
                results.idle.push(figures::run_idle(&scale, target).await);
            }
        }
        if run("fan") {
            for clients in scale.fan_clients {
                results.fan.push(figures::run_fan(&scale, clients).await);
            }
        }
        if run("attack") {
            results.attack = Some(attack::run(scale.round_trips.min(200)));
        }
        results
    });
    let report = summary::render(&scale, &load, &results, started.elapsed());
    print!("{report}");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    let out = target.join("serve-bench-report.md");
    match std::fs::create_dir_all(&target).and_then(|()| std::fs::write(&out, &report)) {
        Ok(()) => eprintln!("bench: report written to {}", out.display()),
        Err(e) => eprintln!("bench: cannot write {}: {e}", out.display()),
    }
}
