//! 7: what the store is asked for a new session and for a turn, and the end of a run with many
//! sessions open, on a store made distant (every byte delayed each way by the relay of the
//! integration tests, which also counts the requests by kind): a proxy run of `sessions`
//! sessions of one turn, left to ship before it ends (every request it makes, per session);
//! runs of a tenth as many sessions of one and of ten turns a ship interval apart (a turn's cost
//! is the difference); and a run of `sessions` sessions of one turn ended at once, timed from
//! the editor's end (stdin closed) to the proxy's exit, with the sessions the index holds right
//! after. With `BENCH_BASE_BIN` (an `acp-journal` built at another revision) both binaries are
//! measured in the same run, the base first.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use super::{Launch, Proxy, S3};

#[path = "../../tests/it/relay.rs"]
mod relay;

/// Each way.
const DELAY: Duration = Duration::from_millis(30);

/// What one proxy run cost.
struct Run {
    requests: BTreeMap<String, usize>,
    end: Duration,
    indexed: usize,
}

/// The sessions of the index under `prefix` of the bench bucket (its manifest's sessions parts,
/// read with the crate's decoder).
fn indexed(s3: &S3, prefix: &str) -> std::collections::BTreeSet<String> {
    let root = s3.root.path().join("bench").join(prefix);
    let Ok(manifest) = std::fs::read(root.join("index/snapshot.json")) else {
        return Default::default();
    };
    let manifest: serde_json::Value = serde_json::from_slice(&manifest).unwrap_or_default();
    let mut sessions = std::collections::BTreeSet::new();
    for part in manifest["parts"].as_array().into_iter().flatten() {
        if part["table"] != "sessions" {
            continue;
        }
        let Some(path) = part["path"].as_str() else {
            continue;
        };
        let Ok(bytes) = std::fs::read(root.join(path)) else {
            continue;
        };
        if let Ok(rows) = acp_journal::fleet::index::table::decode_sessions(bytes.into()) {
            sessions.extend(rows.into_iter().map(|r| r.session));
        }
    }
    sessions
}

/// How one run goes: `sessions` sessions of `turns` turns, a round of them every `apart`, the
/// run ended `idle` after the last.
struct Shape {
    sessions: usize,
    turns: usize,
    apart: Duration,
    idle: Duration,
}

/// A run of `shape` through `bin`, a journal directory of its own, the store at `prefix`
/// through `relay`.
fn run(bin: &Path, s3: &S3, relay: &relay::Relay, prefix: &str, shape: &Shape) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let mut env = s3.env();
    for (k, v) in &mut env {
        if k == "AWS_ENDPOINT_URL" {
            *v = format!("http://127.0.0.1:{}", relay.port);
        }
    }
    let url = format!("s3://bench/{prefix}");
    relay.take_counts();
    let mut proxy = Proxy::launch(
        &Launch::default(),
        bin,
        dir.path(),
        Some((&env, &url)),
        &[],
        0,
    );
    let ids: Vec<String> = (0..shape.sessions).map(|_| proxy.new_session()).collect();
    for round in 0..shape.turns {
        if round > 0 {
            std::thread::sleep(shape.apart);
        }
        for id in &ids {
            proxy.prompt(id);
        }
    }
    std::thread::sleep(shape.idle);
    let ended = Instant::now();
    proxy.finish();
    let end = ended.elapsed();
    let index = indexed(s3, prefix);
    Run {
        requests: relay.take_counts(),
        end,
        indexed: ids.iter().filter(|s| index.contains(*s)).count(),
    }
}

fn total(r: &BTreeMap<String, usize>) -> usize {
    r.values().sum()
}

/// Requests of the lease (`leases/`) in `r`.
fn lease(r: &BTreeMap<String, usize>) -> usize {
    r.iter()
        .filter(|(k, _)| k.ends_with(" leases"))
        .map(|(_, n)| n)
        .sum()
}

pub fn bench(s3: &S3, sessions: usize, report: &mut String) {
    let head = Path::new(env!("CARGO_BIN_EXE_acp-journal")).to_path_buf();
    let mut bins = Vec::new();
    if let Some(base) = std::env::var_os("BENCH_BASE_BIN") {
        bins.push(("base", std::path::PathBuf::from(base)));
    }
    bins.push(("head", head));
    let relay = relay::Relay::start(s3.port, DELAY);
    writeln!(
        report,
        "## 7. What a session and a turn cost the store; the end of a run\n\n\
         s3s-fs behind a relay delaying every byte {} ms each way. A proxy run of {sessions} \
         new sessions of one turn, left 10 s to ship before it ends: every request of the run, \
         per session. Runs of {} sessions of one and of ten turns, a round of turns every \
         1.1 s (a ship interval), each left 5 s before it ends: a turn's cost is the \
         difference, over {} turns. A run of {sessions} sessions of one turn ended at once: \
         its end timed from stdin closed to exit (`SHIP_AT_END` is 5 s, the lease's TTL 15 s), \
         and the sessions the index holds right after.\n",
        DELAY.as_millis(),
        sessions / 10,
        sessions / 10 * 9,
    )
    .unwrap();
    writeln!(
        report,
        "| binary | requests per new session | of them the lease's | requests per turn | end of the run, {sessions} sessions open | sessions in the index at the end |\n|---|---:|---:|---:|---:|---:|"
    )
    .unwrap();
    for (name, bin) in &bins {
        eprintln!("bench: cost of sessions and turns ({name})");
        let tag = super::rand_tag();
        let few = sessions / 10;
        // One run of `sessions` sessions of `turns` turns each, idle `idle` seconds at the end.
        let measure = |what: &str, sessions, turns, idle| {
            let shape = Shape {
                sessions,
                turns,
                apart: Duration::from_millis(1100),
                idle: Duration::from_secs(idle),
            };
            run(bin, s3, &relay, &format!("cost-{tag}-{what}"), &shape)
        };
        let new = measure("new", sessions, 1, 10);
        let one = measure("one", few, 1, 5);
        let ten = measure("ten", few, 10, 5);
        let end = measure("end", sessions, 1, 0);
        let per_turn =
            (total(&ten.requests) as f64 - total(&one.requests) as f64) / (few * 9) as f64;
        writeln!(
            report,
            "| {name} | {:.2} | {:.2} | {per_turn:.2} | {:.2} s | {} of {sessions} |",
            total(&new.requests) as f64 / sessions as f64,
            lease(&new.requests) as f64 / sessions as f64,
            end.end.as_secs_f64(),
            end.indexed,
        )
        .unwrap();
        eprintln!("bench: {name}: a run of new sessions {:?}", new.requests);
        eprintln!(
            "bench: {name}: ten turns {:?}; one {:?}",
            ten.requests, one.requests
        );
    }
    writeln!(report).unwrap();
}
