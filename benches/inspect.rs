//! Benchmark: the inspection commands on a big store, through the built binary.
//!
//! - `list` over 10 000 sessions (target: under 200 ms).
//! - `search` over the store's journals against `zstd -dc FILES | grep -c` on the same files, in
//!   the same run (target: no slower).
//! - Decode speed, in MB/s of raw NDJSON (target: at least 150 MB/s), and peak RSS (target:
//!   flat, a few MB, whatever the journal's size) of `show`, `watch --from-start`, `export
//!   --format markdown|ndjson|html` and `search` over one session of about 1 GB of raw NDJSON, beside
//!   `zstd -dc` of the same segment (decompression alone: the floor of any reader).
//!
//! The stores are generated with the library's segment writer: 10 000 small sessions, plus a
//! few large ones of realistic traffic; and, apart, the 1 GB session made of whole prompt turns
//! (thoughts, message chunks, a tool call with a diff, a permission request and its answer).
//! `BENCH_QUICK=1` makes everything smaller (a 100 MB session); `BENCH_DECODE_ONLY=1` measures only
//! the big session; `BENCH_KEEP=DIR` keeps its store in DIR. Report on stdout.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use acp_journal::journal::format::{Body, FORMAT_VERSION, Header, Payload, Record, SegmentKind};

use acp_journal::catalog::{Catalog, CatalogEntry};
use acp_journal::journal::{JournalDir, SegmentWriter};
use acp_journal::wire::Side;
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

const WORDS: [&str; 13] = [
    "the", "parser", "now", "handles", "escaped", "quotes", "and", "returns", "an", "error", "for",
    "trailing", "commas",
];

/// Three words of filler text, varied by `i`.
fn words(i: usize) -> String {
    format!(
        "{} {} {} ",
        WORDS[i % 13],
        WORDS[(i * 7) % 13],
        WORDS[(i * 11) % 13]
    )
}

fn update(id: &str, update: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{id}","update":{update}}}}}"#
    )
}

fn chunk(id: &str, kind: &str, i: usize) -> String {
    update(
        id,
        &format!(
            r#"{{"sessionUpdate":"{kind}","content":{{"type":"text","text":"{}"}}}}"#,
            words(i)
        ),
    )
}

/// Line `i` of a chat: a prompt every 40 lines, message chunks between (no responses).
fn chat_line(id: &str, i: usize) -> (Side, String) {
    if i.is_multiple_of(40) {
        let prompt = format!(
            r#"{{"jsonrpc":"2.0","id":{i},"method":"session/prompt","params":{{"sessionId":"{id}","prompt":[{{"type":"text","text":"question {i} about the tokenizer"}}]}}}}"#
        );
        (Side::Client, prompt)
    } else {
        (Side::Agent, chunk(id, "agent_message_chunk", i))
    }
}

/// Lines per turn of [`turn_line`].
const TURN_LINES: usize = 50;

/// Line `i` of a session of whole prompt turns: the prompt, thoughts, message chunks, a tool
/// call, a permission request and its answer, the tool call's diff, more text, the response.
fn turn_line(id: &str, i: usize) -> (Side, String) {
    let turn = i / TURN_LINES;
    let line = match i % TURN_LINES {
        0 => return chat_line(id, turn * 40),
        1..=3 => chunk(id, "agent_thought_chunk", i),
        31 => update(
            id,
            &format!(
                r#"{{"sessionUpdate":"tool_call","toolCallId":"call_{turn}","title":"Editing src/lexer.rs","kind":"edit","status":"pending","locations":[{{"path":"/bench/src/lexer.rs","line":{turn}}}],"rawInput":{{"path":"/bench/src/lexer.rs"}}}}"#
            ),
        ),
        32 => format!(
            r#"{{"jsonrpc":"2.0","id":"perm-{turn}","method":"session/request_permission","params":{{"sessionId":"{id}","toolCall":{{"toolCallId":"call_{turn}","title":"Editing src/lexer.rs"}},"options":[{{"optionId":"allow","name":"Allow","kind":"allow_once"}},{{"optionId":"reject","name":"Reject","kind":"reject_once"}}]}}}}"#
        ),
        33 => {
            let answer = format!(
                r#"{{"jsonrpc":"2.0","id":"perm-{turn}","result":{{"outcome":{{"outcome":"selected","optionId":"allow"}}}}}}"#
            );
            return (Side::Client, answer);
        }
        34 => update(
            id,
            &format!(
                r#"{{"sessionUpdate":"tool_call_update","toolCallId":"call_{turn}","status":"completed","content":[{{"type":"diff","path":"/bench/src/lexer.rs","oldText":"fn lex() {{\n    let a = 1;\n    {}\n}}\n","newText":"fn lex() {{\n    let a = 2;\n    {}\n}}\n"}}]}}"#,
                words(i),
                words(i + 1)
            ),
        ),
        49 => format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"stopReason":"end_turn"}}}}"#,
            turn * 40
        ),
        _ => chunk(id, "agent_message_chunk", i),
    };
    (Side::Agent, line)
}

/// Write one session of `lines` lines made by `line`; returns (raw NDJSON bytes, file bytes).
fn session(
    journals: &JournalDir,
    id: &str,
    lines: usize,
    started: i64,
    make: fn(&str, usize) -> (Side, String),
) -> (u64, u64) {
    let (path, file) = journals
        .create_segment(&journals.session_dir(id), "20260101T000000.000000Z-1")
        .expect("segment");
    let mut w = SegmentWriter::with_file(file, &path, &header(id, started)).expect("writer");
    let (mut raw, mut turns) = (0u64, 0u64);
    for i in 0..lines {
        let (from, line) = make(id, i);
        raw += line.len() as u64 + 1;
        if from == Side::Client && line.contains(r#""method":"session/prompt""#) {
            turns += 1;
        }
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
        .close(lines as u64, started + lines as i64, 0)
        .expect("close");
    journals
        .append_catalog(&CatalogEntry::Open {
            git_branch: None,
            session: id.into(),
            segment: journals.relative(&path),
            cwd: Some("/bench".into()),
            agent: Some("npx @zed-industries/claude-code-acp".into()),
            agent_name: None,
            t: started,
            agent_info: None,
        })
        .expect("catalog");
    journals
        .append_catalog(&CatalogEntry::Close {
            segment: journals.relative(&path),
            records: stats.records,
            bytes: stats.file_bytes,
            turns,
            t: started + lines as i64,
        })
        .expect("catalog");
    (raw, stats.file_bytes)
}

fn best_of(n: usize, mut f: impl FnMut() -> Duration) -> Duration {
    (0..n).map(|_| f()).min().expect("n > 0")
}

fn main() {
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let bin = env!("CARGO_BIN_EXE_acp-journal");
    if std::env::var_os("BENCH_DECODE_ONLY").is_some() {
        flat_memory(bin, quick);
        return;
    }
    let (small, big, big_updates) = if quick {
        (1_000, 2, 200_000)
    } else {
        (10_000, 8, 1_000_000)
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let journals = JournalDir::new(dir.path());
    journals.create_dirs().expect("store");
    let (mut raw, mut stored) = (0u64, 0u64);
    for i in 0..small {
        let (r, s) = session(
            &journals,
            &format!("small-{i:05}"),
            20,
            1_000_000 + i as i64,
            chat_line,
        );
        raw += r;
        stored += s;
    }
    for i in 0..big {
        let (r, s) = session(
            &journals,
            &format!("big-{i}"),
            big_updates,
            2_000_000 + i as i64,
            chat_line,
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
    drop(out);
    flat_memory(bin, quick);
}

/// Decode speed (MB/s of raw NDJSON) and peak RSS of the reading commands over one big
/// session, each through the built binary, against `zstd -dc` of the same segment (the floor:
/// decompression alone). `BENCH_KEEP=DIR` writes the session's store in DIR and keeps it.
fn flat_memory(bin: &str, quick: bool) {
    let target_raw: u64 = if quick { 100_000_000 } else { 1_000_000_000 };
    let temp;
    let dir = match std::env::var_os("BENCH_KEEP") {
        Some(keep) => std::path::PathBuf::from(keep),
        None => {
            temp = tempfile::tempdir().expect("tempdir");
            temp.path().to_path_buf()
        }
    };
    let journals = JournalDir::new(&dir);
    journals.create_dirs().expect("store");
    // About 190 raw bytes a line.
    let lines = (target_raw / 190) as usize / TURN_LINES * TURN_LINES;
    let t = Instant::now();
    let (raw, stored) = session(&journals, "huge", lines, 3_000_000, turn_line);
    eprintln!(
        "huge session: {lines} records, {:.0} MB raw, {:.0} MB on disk, written in {:.0} s",
        raw as f64 / 1e6,
        stored as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );
    let root = dir.to_str().expect("utf-8 path");
    let segment = walk(&dir.join("sessions")).pop().expect("the segment");
    // The floor: zstd alone, decompressing the segment to nowhere.
    let mut decompressed = 0u64;
    let zstd = best_of(3, || {
        let t = Instant::now();
        let mut zstd = Command::new("zstd")
            .args(["-dcq", &segment])
            .stdout(Stdio::piped())
            .spawn()
            .expect("zstd");
        let mut output = zstd.stdout.take().expect("piped");
        decompressed = std::io::copy(&mut output, &mut std::io::sink()).expect("zstd output");
        assert!(zstd.wait().expect("zstd").success());
        t.elapsed()
    });
    let commands: [(&str, &[&str]); 6] = [
        ("show", &["show", "huge"]),
        // The session is closed: `watch` renders it from the start and ends at its end marker.
        ("watch --from-start", &["watch", "huge", "--from-start"]),
        (
            "export --format markdown",
            &["export", "huge", "--format", "markdown"],
        ),
        (
            "export --format ndjson",
            &["export", "huge", "--format", "ndjson"],
        ),
        (
            "export --format html",
            &["export", "huge", "--format", "html"],
        ),
        ("search", &["search", "question 4000 about the tokenizer"]),
    ];
    let mb_s = |time: Duration| raw as f64 / 1e6 / time.as_secs_f64();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "\n| over one session of {:.2} GB raw ({:.2} GB decompressed journal, {:.0} MB on disk, {} records) | time | decode speed, MB/s of raw | peak RSS |",
        raw as f64 / 1e9,
        decompressed as f64 / 1e9,
        stored as f64 / 1e6,
        lines
    );
    let _ = writeln!(out, "|---|---:|---:|---:|");
    let _ = writeln!(
        out,
        "| `zstd -dc` of the segment (reference: decompression alone, {:.0} MB/s decompressed) | {:.2} s | {:.0} MB/s | |",
        decompressed as f64 / 1e6 / zstd.as_secs_f64(),
        zstd.as_secs_f64(),
        mb_s(zstd)
    );
    let runs = if quick { 3 } else { 2 };
    for (name, args) in commands {
        // Best time of a few runs (the VM is noisy); the highest peak RSS among them.
        let mut peak_kib = 0;
        let time = best_of(runs, || {
            let (time, kib) = peak_rss(bin, root, args);
            peak_kib = peak_kib.max(kib);
            time
        });
        let _ = writeln!(
            out,
            "| `{name}` | {:.2} s | {:.0} MB/s | {:.1} MB |",
            time.as_secs_f64(),
            mb_s(time),
            peak_kib as f64 / 1024.0
        );
    }
}

/// Run `bin --journal-dir root ARGS` with stdout discarded; its wall time and peak resident
/// set (KiB), from `wait4`'s resource usage of that one child.
#[expect(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4, which also gives its resource usage"
)]
fn peak_rss(bin: &str, root: &str, args: &[&str]) -> (Duration, u64) {
    let t = Instant::now();
    let child = Command::new(bin)
        .args(args)
        .args(["--journal-dir", root])
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waiting for a child we spawned and have not waited for.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    let elapsed = t.elapsed();
    assert_eq!(pid, child.id() as libc::pid_t, "wait4");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{args:?} failed: {status}"
    );
    (elapsed, usage.ru_maxrss as u64)
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
