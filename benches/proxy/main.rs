//! Benchmark of the `acp-journal` proxy against a direct pipe and a minimal relay.
//!
//! Run with `cargo bench --bench proxy` (`BENCH_QUICK=1` for a ~10× smaller smoke run). The
//! markdown report goes to stdout and to `target/bench-report.md`; progress goes to stderr.
//!
//! The binary re-executes itself for its helper roles, selected by the first argument:
//! - `__echo`: an agent that answers `initialize` and writes every other line it reads back to
//!   stdout, one `write(2)` per line;
//! - `__flood N SEED`: an agent that pre-generates N ACP messages of a realistic mix, answers
//!   an `initialize` request (the "ready" signal), then on the next line (a `session/prompt`)
//!   writes the N messages (N−1 `session/update` notifications and the prompt's response) as
//!   fast as it can and exits; with `BENCH_FLOOD_WRITES=line` in its environment it writes them
//!   one `write(2)` per message, as agents do, else all at once (`bulk`);
//! - `__relay -- CMD…`: the baseline relay: spawns CMD and copies bytes both ways with two
//!   threads, no parsing, no journaling;
//! - `__turns`: an agent that answers each prompt with a chunk, a usage update and the response
//!   ([`turns`]).
//!
//! Each measurement runs three paths in the same process: (a) direct pipe to the agent, (b) the
//! minimal relay in front of it, (c) `acp-journal --journal-dir <tmp> -- <agent>`; and, when it
//! is installed (`scripts/bench-peers.sh`, run by the bench if needed), (d) the official Rust
//! ACP conductor with its trace on, on the same traffic ([`peers`]).
//!
//! CPU per message against the minimal relay ([`cpu`]): floods of 100 k and 1 M messages, the
//! agent writing in bulk and line by line, through the relay, acp-journal and the base build
//! (below), alternated run by run, median of 3 and 2 rounds. CPU is the nanoseconds on a CPU of
//! the path's process alone (not the agent, its child), summed over its threads from
//! `/proc/PID/task/TID/schedstat`, shown per thread name (acp-journal's main thread, its
//! `compressor`), with `/proc/PID/stat` (utime + stime, 10 ms ticks) as a cross-check; from
//! writing the prompt to reading the last line, before the path's stdin is closed ([`procfs`]).
//!
//! Environment: `BENCH_QUICK=1` scales every count down ~10×; `BENCH_PROXY_BASE=<acp-journal
//! binary>` adds another build to the prompt-turns and CPU-per-message measurements, for
//! before/after in one run; `BENCH_PROXY_ARGS="--fsync never"`
//! (whitespace-separated) adds options to the acp-journal command line, for experiments;
//! `ACP_JOURNAL_LOG` is passed through (the bench sets it to `warn` when unset).
//!
//! Layout: [`roles`] (the helper roles and the paths measured), [`traffic`] (the messages they
//! exchange), [`measure`] (the measurements), [`procfs`] (CPU time and RSS from /proc),
//! [`turns`] (prompt turns), [`cpu`] (CPU per message against the relay), [`report`] (the
//! markdown report), [`peers`] (the ACP conductor).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod cpu;
mod measure;
mod peers;
mod procfs;
mod report;
mod roles;
mod traffic;
mod turns;

use measure::{Load, Scale, run_latency, run_sizes, run_throughput};
use report::{Measured, render};
use roles::{PROXY, echo_agent, flood_agent, relay};

/// The whole bench is aborted after this long (a hung child must not hang CI).
const WATCHDOG: Duration = Duration::from_secs(900);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("__echo") => echo_agent(),
        Some("__turns") => turns::turns_agent(),
        Some("__flood") => {
            let n = args[2].parse().expect("__flood N SEED");
            let seed = args[3].parse().expect("__flood N SEED");
            flood_agent(n, seed);
        }
        Some("__relay") => {
            assert_eq!(
                args.get(2).map(String::as_str),
                Some("--"),
                "__relay -- CMD…"
            );
            relay(&args[3..]);
        }
        // `cargo bench` passes `--bench`; anything else runs the bench.
        _ => bench(),
    }
}

fn bench() {
    std::thread::spawn(|| {
        std::thread::sleep(WATCHDOG);
        eprintln!("bench: watchdog: no result after {WATCHDOG:?}; aborting");
        std::process::exit(2);
    });
    let scale = Scale::get();
    let load = Load::start();
    let started = Instant::now();
    eprintln!(
        "bench: proxy {PROXY}{}",
        if scale.quick { " (BENCH_QUICK)" } else { "" }
    );

    let latency = [run_latency(&scale, false), run_latency(&scale, true)];
    let throughput = run_throughput(&scale);
    let sizes = run_sizes(&scale, &throughput.store);
    let cpu = cpu::run_cpu(&scale);
    let turns = turns::run_turns(scale.turns);

    let measured = Measured {
        latency,
        throughput,
        sizes,
        turns,
        cpu,
    };
    let report = render(&scale, &load, &measured, started.elapsed());
    print!("{report}");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    let out = target.join("bench-report.md");
    match std::fs::create_dir_all(&target).and_then(|()| std::fs::write(&out, &report)) {
        Ok(()) => eprintln!("bench: report written to {}", out.display()),
        Err(e) => eprintln!("bench: cannot write {}: {e}", out.display()),
    }
}
