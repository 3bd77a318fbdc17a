//! Benchmark: the inspection commands on a big store, through the built binary.
//!
//! - `list` over 10 000 sessions (target: under 200 ms).
//! - `search` over the store's journals against `zstd -dc FILES | grep -c` on the same files, in
//!   the same run (target: no slower).
//!
//! The store is generated with the library's segment writer: 10 000 small sessions, plus a few
//! large ones of realistic traffic (`BENCH_QUICK=1` makes it smaller). Report on stdout.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use acp_journal::journal::format::{
    Body, FORMAT_VERSION, Header, Payload, Record, SegmentKind, Side,
};
use acp_journal::journal::store::CatalogEntry;
use acp_journal::journal::{SegmentWriter, Store};
use bytes::Bytes;

fn header(session: &str, started: i64) -> Header {
    Header {
        acpj: FORMAT_VERSION,
        kind: SegmentKind::Session,
        session: Some(session.into()),
        run: "bench".into(),
        proxy: "bench".into(),
        started,
        pid: 0,
        argv: vec!["npx".into(), "@zed-industries/claude-code-acp".into()],
        cwd: Some("/bench".into()),
        connection: None,
        initialize: None,
    }
}

/// Write one session of `updates` updates; returns (raw NDJSON bytes, file bytes).
fn session(store: &Store, id: &str, updates: usize, started: i64) -> (u64, u64) {
    let (path, file) = store
        .create_segment(&store.session_dir(id), "20260101T000000.000000Z-1")
        .expect("segment");
    let mut w = SegmentWriter::with_file(file, &path, &header(id, started)).expect("writer");
    let words = [
        "the", "parser", "now", "handles", "escaped", "quotes", "and", "returns", "an", "error",
        "for", "trailing", "commas",
    ];
    let mut raw = 0u64;
    for i in 0..updates {
        let line = if i % 40 == 0 {
            format!(
                r#"{{"jsonrpc":"2.0","id":{i},"method":"session/prompt","params":{{"sessionId":"{id}","prompt":[{{"type":"text","text":"question {i} about the tokenizer"}}]}}}}"#
            )
        } else {
            format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{id}","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"{} {} {} "}}}}}}}}"#,
                words[i % 13],
                words[(i * 7) % 13],
                words[(i * 11) % 13]
            )
        };
        raw += line.len() as u64 + 1;
        let from = if i % 40 == 0 {
            Side::Client
        } else {
            Side::Agent
        };
        w.append(&Record {
            seq: i as u64,
            unix_us: started + i as i64,
            mono_us: i as u64,
            body: Body::Message {
                from,
                payload: Payload::from_line(Bytes::from(line)),
            },
        })
        .expect("append");
        if i % 500 == 499 {
            w.flush().expect("flush");
        }
    }
    let stats = w
        .close(updates as u64, started + updates as i64, 0)
        .expect("close");
    store
        .append_catalog(&CatalogEntry::Open {
            session: id.into(),
            segment: store.relative(&path),
            cwd: Some("/bench".into()),
            agent: Some("npx @zed-industries/claude-code-acp".into()),
            t: started,
        })
        .expect("catalog");
    store
        .append_catalog(&CatalogEntry::Close {
            segment: store.relative(&path),
            records: stats.records,
            bytes: stats.file_bytes,
            turns: (updates / 40) as u64,
            t: started + updates as i64,
        })
        .expect("catalog");
    (raw, stats.file_bytes)
}

fn best_of(n: usize, mut f: impl FnMut() -> Duration) -> Duration {
    (0..n).map(|_| f()).min().expect("n > 0")
}

fn main() {
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let (small, big, big_updates) = if quick {
        (1_000, 2, 200_000)
    } else {
        (10_000, 8, 1_000_000)
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::new(dir.path());
    store.create_dirs().expect("store");
    let (mut raw, mut stored) = (0u64, 0u64);
    for i in 0..small {
        let (r, s) = session(&store, &format!("small-{i:05}"), 20, 1_000_000 + i as i64);
        raw += r;
        stored += s;
    }
    for i in 0..big {
        let (r, s) = session(
            &store,
            &format!("big-{i}"),
            big_updates,
            2_000_000 + i as i64,
        );
        raw += r;
        stored += s;
    }
    eprintln!(
        "store: {} sessions, {:.0} MB raw, {:.0} MB on disk",
        small + big,
        raw as f64 / 1e6,
        stored as f64 / 1e6
    );
    let bin = env!("CARGO_BIN_EXE_acp-journal");
    let root = dir.path().to_str().expect("utf-8 path");

    let list = best_of(5, || {
        let t = Instant::now();
        let out = Command::new(bin)
            .args(["list", "--journal-dir", root])
            .stdout(Stdio::null())
            .status()
            .expect("list");
        assert!(out.success());
        t.elapsed()
    });

    let mut files: Vec<String> = Vec::new();
    for entry in walk(&dir.path().join("sessions")) {
        files.push(entry);
    }
    let pattern = "question 1000 about the tokenizer";
    let ours = best_of(3, || {
        let t = Instant::now();
        let status = Command::new(bin)
            .args(["search", "--journal-dir", root, pattern])
            .stdout(Stdio::null())
            .status()
            .expect("search");
        assert!(status.success());
        t.elapsed()
    });
    let pipeline = best_of(3, || {
        let t = Instant::now();
        let mut zstd = Command::new("zstd")
            .arg("-dcq")
            .args(&files)
            .stdout(Stdio::piped())
            .spawn()
            .expect("zstd");
        let grep = Command::new("grep")
            .args(["-c", pattern])
            .stdin(zstd.stdout.take().expect("piped"))
            .stdout(Stdio::null())
            .status()
            .expect("grep");
        let _ = zstd.wait();
        assert!(grep.success());
        t.elapsed()
    });
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "| measure | acp-journal | baseline | target |");
    let _ = writeln!(out, "|---|---:|---:|---|");
    let _ = writeln!(
        out,
        "| `list` over {} sessions | {:.0} ms | | < 200 ms |",
        small + big,
        list.as_secs_f64() * 1e3
    );
    let _ = writeln!(
        out,
        "| `search` over {:.0} MB of journals ({:.0} MB raw) | {:.2} s | `zstd -dc | grep -c`: {:.2} s | no slower ({:.2}×) |",
        stored as f64 / 1e6,
        raw as f64 / 1e6,
        ours.as_secs_f64(),
        pipeline.as_secs_f64(),
        ours.as_secs_f64() / pipeline.as_secs_f64()
    );
}

fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path.display().to_string());
        }
    }
    out.sort();
    out
}
