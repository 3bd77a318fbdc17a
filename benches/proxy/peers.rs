//! The peer the bench compares with on the same traffic: the official Rust ACP conductor,
//! `agent-client-protocol-conductor`, as a stdio proxy in front of the same agents
//! (`agent-client-protocol-conductor --trace FILE agent "<agent command>"`: with no proxies in
//! its chain and the trace on, it relays through a pass-through proxy and writes one JSON line
//! per message to FILE).
//!
//! `scripts/bench-peers.sh` installs the pinned version into `target/peers/bin`; the bench runs
//! it when the binary is missing, and leaves the conductor out of the report if that fails.
//! `BENCH_CONDUCTOR=/path/to/binary` uses another build.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

use crate::measure::{FloodRun, Latency};
use crate::report::pass;
use crate::roles::PathKind;
use crate::traffic::{Flood, SEED};

/// The version `scripts/bench-peers.sh` installs.
pub const CONDUCTOR_VERSION: &str = "5.0.0";

/// The conductor binary, installed on first use; `None` when it cannot be had.
pub fn conductor() -> Option<&'static Path> {
    static BIN: OnceLock<Option<PathBuf>> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("BENCH_CONDUCTOR") {
            return Some(PathBuf::from(bin));
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let bin = root.join("target/peers/bin/agent-client-protocol-conductor");
        if !bin.exists() {
            eprintln!(
                "bench: installing the ACP conductor {CONDUCTOR_VERSION} (scripts/bench-peers.sh)"
            );
            let installed = Command::new(root.join("scripts/bench-peers.sh"))
                .status()
                .is_ok_and(|s| s.success());
            if !installed {
                eprintln!("bench: no ACP conductor: it is left out of the report");
                return None;
            }
        }
        Some(bin)
    })
    .as_deref()
}

/// `agent` as one shell-quoted string (the conductor splits its component commands like a
/// shell).
fn shell_line(agent: &[String]) -> String {
    agent
        .iter()
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The conductor in front of `agent`, tracing into `dir/trace.jsons`.
pub fn command(agent: &[String], dir: &Path) -> Command {
    let mut c = Command::new(conductor().expect("checked by paths()"));
    c.arg("--trace")
        .arg(trace_file(dir))
        .arg("agent")
        .arg(shell_line(agent));
    c
}

fn trace_file(dir: &Path) -> PathBuf {
    dir.join("trace.jsons")
}

/// The conductor's flood run, and how its trace compares with acp-journal's journal of the
/// same traffic.
pub struct Compared {
    /// The conductor's run.
    pub run: FloodRun,
    /// Bytes of its trace file.
    pub trace_bytes: u64,
    /// Bytes of acp-journal's segment files for the same traffic.
    pub journal_bytes: u64,
    /// Messages in the trace.
    pub traced: usize,
    /// Messages in the journal.
    pub journaled: usize,
    /// Traced messages found in the journal, in the same order, with the same content.
    pub traced_in_journal: usize,
    /// The first traced message not found, if any.
    pub missing: Option<String>,
    /// The trace keeps the client's request ids.
    pub trace_keeps_ids: bool,
    /// The conductor relayed the agent's bytes unchanged (same byte count at least).
    pub byte_identical: bool,
}

/// A message as both recordings can state it: who sent it, and its content without the
/// `jsonrpc` and `id` members (the conductor renumbers requests).
#[derive(PartialEq)]
struct Said {
    from_client: bool,
    content: Value,
}

/// The trace's messages, and whether any keeps a client id.
fn traced(dir: &Path) -> (Vec<Said>, bool) {
    let text = std::fs::read_to_string(trace_file(dir)).expect("reading the conductor's trace");
    let mut out = Vec::new();
    let mut keeps_ids = false;
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let content = match event["type"].as_str() {
            Some("request" | "notification") => {
                serde_json::json!({"method": event["method"], "params": event["params"]})
            }
            Some("response") if event["is_error"] == true => {
                serde_json::json!({"error": event["payload"]})
            }
            Some("response") => serde_json::json!({"result": event["payload"]}),
            _ => continue,
        };
        keeps_ids |= event["id"] == 1;
        out.push(Said {
            from_client: event["from"] == "Client",
            content,
        });
    }
    (out, keeps_ids)
}

/// Every segment file below `store`.
fn segment_files(store: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![store.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.to_string_lossy().ends_with(".acpj.zst") {
                files.push(path);
            }
        }
    }
    files
}

/// The journal's messages, in wire order.
fn journaled(store: &Path) -> Vec<Said> {
    let mut records = Vec::new();
    for path in segment_files(store) {
        let reader = acp_journal::journal::SegmentReader::open(&path).expect("segment");
        for r in reader {
            if let acp_journal::journal::Body::Message { from, payload } = r.body {
                records.push((r.seq, from, payload.bytes));
            }
        }
    }
    records.sort_by_key(|r| r.0);
    records.dedup_by_key(|r| r.0);
    records
        .into_iter()
        .filter_map(|(_, from, bytes)| {
            let mut msg: Value = serde_json::from_slice(&bytes).ok()?;
            let object = msg.as_object_mut()?;
            object.remove("jsonrpc");
            object.remove("id");
            Some(Said {
                from_client: from == acp_journal::wire::Side::Client,
                content: msg,
            })
        })
        .collect()
}

/// Compare the conductor's run (trace in `trace_dir`) with acp-journal's on the same traffic.
pub fn compare(run: FloodRun, trace_dir: &Path, ours: &FloodRun, store: &Path) -> Compared {
    eprintln!("bench: comparing the conductor's trace with the journal");
    let (trace, trace_keeps_ids) = traced(trace_dir);
    let journal = journaled(store);
    // Every traced message must be in the journal, in order. The initialize response is the
    // exception in content only: the journal holds what the client received, with the
    // capabilities acp-journal adds; the trace holds the agent's.
    let mut at = 0;
    let mut found = 0;
    let mut missing = None;
    for said in &trace {
        let is_init_response =
            |s: &Said| !s.from_client && s.content["result"]["agentCapabilities"].is_object();
        let hit = journal[at..].iter().position(|j| {
            j.from_client == said.from_client
                && (j.content == said.content || (is_init_response(j) && is_init_response(said)))
        });
        match hit {
            Some(i) => {
                found += 1;
                at += i + 1;
            }
            None => {
                missing.get_or_insert_with(|| said.content.to_string());
            }
        }
    }
    let expected = Flood::new(SEED).lines(ours.messages).len() as u64;
    let segments = |dir: &Path| -> u64 {
        segment_files(dir)
            .iter()
            .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
            .sum()
    };
    Compared {
        byte_identical: run.bytes == expected,
        trace_bytes: std::fs::metadata(trace_file(trace_dir)).map_or(0, |m| m.len()),
        journal_bytes: segments(store),
        traced: trace.len(),
        journaled: journal.len(),
        traced_in_journal: found,
        missing,
        trace_keeps_ids,
        run,
    }
}

/// The report's section on the conductor; `relay` is the minimal relay's flood run.
pub fn render(r: &mut String, lat: &[Latency; 2], relay: &FloodRun, ours: &FloodRun, c: &Compared) {
    let _ = writeln!(
        r,
        "\n## 5. Against the official ACP conductor\n\n`agent-client-protocol-conductor` {CONDUCTOR_VERSION} (crates.io, `cargo install --locked`, release build) run as `agent-client-protocol-conductor --trace <file> agent \"<agent>\"` in front of the same agents, on the same traffic, in the same run. Its trace is its record of the traffic: one JSON line per message (kind, from, to, its own request id, method and params or payload, seconds since start), written as each message passes. The last two columns say how acp-journal compares: how many times lower (latency, bytes, memory) or higher (throughput) than the conductor, and its value as a multiple of the minimal relay's.\n"
    );
    let _ = writeln!(
        r,
        "| measure | minimal relay | acp-journal | ACP conductor --trace | acp-journal's advantage over the conductor | acp-journal / minimal relay |"
    );
    let _ = writeln!(r, "|---|---:|---:|---:|---:|---:|");
    for l in lat {
        let Some(ci) = l.kinds.iter().position(|k| *k == PathKind::Conductor) else {
            continue;
        };
        for (q, name) in [(0.5, "p50"), (0.99, "p99")] {
            let (base, ours, theirs) = (l.added(1, q), l.added(2, q), l.added(ci, q));
            let _ = writeln!(
                r,
                "| added latency per hop, {name}, {} (µs) | {base:.1} | {ours:.1} | {theirs:.1} | {:.1}× lower | {:.2}× |",
                l.label(),
                theirs / ours,
                ours / base
            );
        }
    }
    let _ = writeln!(
        r,
        "| throughput (MB/s; relay: {} messages, the others {}) | {:.1} | {:.1} | {:.1} | {:.1}× higher | {:.2}× |",
        relay.messages,
        c.run.messages,
        relay.mb_s(),
        ours.mb_s(),
        c.run.mb_s(),
        ours.mb_s() / c.run.mb_s(),
        ours.mb_s() / relay.mb_s()
    );
    let _ = writeln!(
        r,
        "| throughput (messages/s) | {:.0} | {:.0} | {:.0} | {:.1}× higher | {:.2}× |",
        relay.msg_s(),
        ours.msg_s(),
        c.run.msg_s(),
        ours.msg_s() / c.run.msg_s(),
        ours.msg_s() / relay.msg_s()
    );
    let per = |b: u64| b as f64 / c.run.messages as f64;
    let _ = writeln!(
        r,
        "| bytes written per message (journal; trace) | 0 | {:.1} | {:.1} | {:.1}× fewer | — |",
        per(c.journal_bytes),
        per(c.trace_bytes),
        c.trace_bytes as f64 / c.journal_bytes.max(1) as f64
    );
    let mib = |k: Option<u64>| k.unwrap_or(0) as f64 / 1024.0;
    let _ = writeln!(
        r,
        "| peak RSS (MiB) | {:.1} | {:.1} | {:.1} | {:.1}× smaller | {:.1}× |",
        mib(relay.peak_kib),
        mib(ours.peak_kib),
        mib(c.run.peak_kib),
        mib(c.run.peak_kib) / mib(ours.peak_kib).max(0.001),
        mib(ours.peak_kib) / mib(relay.peak_kib).max(0.001)
    );
    let _ = writeln!(
        r,
        "\n**Nothing less recorded:** {} of the {} messages in the conductor's trace are in the journal, in the same order, with the same content (the journal holds {} messages){}. What the journal has that the trace lacks: the bytes as relayed (the trace re-encodes every message), the client's own request ids (the trace {}), wall-clock time (the trace has seconds since its start), the session each message belongs to, compression and a CRC per record. The conductor's output to the client was {}.\n",
        c.traced_in_journal,
        c.traced,
        c.journaled,
        c.missing.as_ref().map_or(String::new(), |m| format!(
            "; first one missing: `{m:.200}`"
        )),
        if c.trace_keeps_ids {
            "keeps them too"
        } else {
            "logs the conductor's own UUIDs"
        },
        if c.byte_identical {
            "the same size as the agent's"
        } else {
            "not byte-identical to the agent's (re-encoded JSON)"
        }
    );
    let _ = writeln!(r, "| target (issue 6) | measured | |");
    let _ = writeln!(r, "|---|---|---|");
    for l in lat {
        let Some(ci) = l.kinds.iter().position(|k| *k == PathKind::Conductor) else {
            continue;
        };
        for (q, name) in [(0.5, "p50"), (0.99, "p99")] {
            let x = l.added(ci, q) / l.added(2, q);
            let _ = writeln!(
                r,
                "| ≥ 5× lower added latency than the conductor ({name}, {}) | {x:.1}× | {} |",
                l.label(),
                pass(x >= 5.0)
            );
        }
    }
    let bytes = c.trace_bytes as f64 / c.journal_bytes.max(1) as f64;
    let _ = writeln!(
        r,
        "| ≥ 5× fewer bytes written than the conductor's trace | {bytes:.1}× | {} |",
        pass(bytes >= 5.0)
    );
    let all = c.traced_in_journal == c.traced && c.traced > 0;
    let _ = writeln!(
        r,
        "| nothing less recorded | {} of {} traced messages journaled | {} |",
        c.traced_in_journal,
        c.traced,
        pass(all)
    );
}
