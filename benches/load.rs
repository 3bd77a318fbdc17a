//! Benchmark: `session/load` served from the journal, through the built binary.
//!
//! For sessions of 1 k, 10 k and 100 k updates, measures the time from sending `session/load`
//! to receiving its response (the whole replay comes before it), and the proxy's peak RSS, to
//! show memory stays flat as sessions grow. The journals are written with the library's segment
//! writer, exactly as the proxy writes them; the agent behind the proxy is a minimal ACP agent
//! without `loadSession` (this binary, re-executed with `__agent`), so the proxy serves the
//! load itself and then starts a fresh agent session.
//!
//! Then `session/list` served from a store of 10 000 sessions: the time from request to answer
//! of a page of 50 (the first page, and every page walked with the cursor), p50 and p99.
//!
//! With `BENCH_HUGE_MB=N` it measures only a huge session instead: N MB of journal (decompressed)
//! in turns of chat, tool outputs of 8 KiB and file reads of 256 KiB, as long sessions of the
//! coding agents are (codex-acp users report 600 MiB); a whole load of it, and a tail load of its
//! last 10 turns (`_meta.acpJournal.tail`): the time to the response and the proxy's peak RSS.
//!
//! Run: `cargo bench --bench load` (`BENCH_QUICK=1` for a smaller run; `BENCH_HUGE_MB=500` for
//! the huge session). Report on stdout.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use acp_journal::catalog::CatalogEntry;
use acp_journal::journal::format::{Body, FORMAT_VERSION, Header, Payload, Record, SegmentKind};

use acp_journal::journal::{JournalDir, SegmentWriter};
use acp_journal::wire::Side;
use bytes::Bytes;

const SESSION: &str = "bench-session";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("__agent") {
        agent();
        return;
    }
    if let Some(mb) = std::env::var("BENCH_HUGE_MB")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        huge(mb);
        return;
    }
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let sizes: &[usize] = if quick {
        &[1_000, 10_000]
    } else {
        &[1_000, 10_000, 100_000]
    };
    let mut rows = Vec::new();
    for &n in sizes {
        let store = tempfile::tempdir().expect("tempdir");
        let bytes = write_session(store.path(), n);
        // Best of three loads, each through a fresh proxy.
        let mut best: Option<(Duration, usize, u64)> = None;
        for _ in 0..3 {
            let run = load_once(store.path());
            if best.is_none_or(|b| run.0 < b.0) {
                best = Some(run);
            }
        }
        let (took, replayed, rss_kib) = best.expect("three runs");
        eprintln!("{n} updates: {took:?}, {replayed} replayed, {rss_kib} KiB peak RSS");
        rows.push((n, bytes, took, replayed, rss_kib));
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "| updates in the session | journal (compressed) | session/load → response | replay rate | proxy peak RSS |"
    );
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|");
    for (n, bytes, took, replayed, rss) in rows {
        let _ = writeln!(
            out,
            "| {n} | {:.1} MiB | {:.1} ms | {:.0} k updates/s | {:.1} MiB |",
            bytes as f64 / (1 << 20) as f64,
            took.as_secs_f64() * 1e3,
            replayed as f64 / took.as_secs_f64() / 1e3,
            rss as f64 / 1024.0
        );
    }
    let (first, walk) = list_latency(10_000);
    let _ = writeln!(
        out,
        "\n| session/list, page of 50 of 10 000 sessions | p50 | p99 |\n|---|---:|---:|"
    );
    for (what, mut times) in [
        ("first page (100 requests)", first),
        ("every page by cursor (200)", walk),
    ] {
        times.sort_unstable();
        let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
        let _ = writeln!(
            out,
            "| {what} | {:.2} ms | {:.2} ms |",
            at(0.5).as_secs_f64() * 1e3,
            at(0.99).as_secs_f64() * 1e3
        );
    }
}

/// `session/list` round trips through a proxy over a store of `n` sessions of this agent:
/// the first page asked 100 times, then every page walked with the cursor.
fn list_latency(n: usize) -> (Vec<Duration>, Vec<Duration>) {
    let store = tempfile::tempdir().expect("tempdir");
    let me = std::env::current_exe().expect("current exe");
    let agent = format!("{} __agent", me.display());
    let mut catalog = Vec::new();
    for i in 0..n {
        let session = format!("s{i:06}");
        let entry = CatalogEntry::Open {
            segment: format!(
                "sessions/{}/x.acpj.zst",
                acp_journal::journal::dir::session_key(&session)
            ),
            session,
            cwd: Some("/bench".into()),
            agent: Some(agent.clone()),
            agent_name: None,
            git_branch: Some("main".into()),
            t: 1_795_000_000_000_000 + i as i64 * 1_000,
            agent_info: None,
        };
        catalog.extend(serde_json::to_vec(&entry).expect("json"));
        catalog.push(b'\n');
        // A prompted session: `session/list` shows only those.
        let prompt = CatalogEntry::Prompt {
            session: format!("s{i:06}"),
            title: format!("task {i}"),
            t: 1_795_000_000_000_000 + i as i64 * 1_000,
        };
        catalog.extend(serde_json::to_vec(&prompt).expect("json"));
        catalog.push(b'\n');
    }
    JournalDir::new(store.path()).create_dirs().expect("store");
    std::fs::write(store.path().join("catalog.ndjson"), catalog).expect("catalog");
    let (mut child, mut stdin, mut stdout) = initialized_proxy(store.path());
    let mut line = Vec::new();
    let mut ask = |params: serde_json::Value| -> (Duration, serde_json::Value) {
        let start = Instant::now();
        writeln!(
            stdin,
            "{}",
            serde_json::json!({"jsonrpc":"2.0","id":1,"method":"session/list","params":params})
        )
        .expect("write");
        line.clear();
        stdout.read_until(b'\n', &mut line).expect("answer");
        (
            start.elapsed(),
            serde_json::from_slice(&line).expect("json"),
        )
    };
    let first: Vec<Duration> = (0..100)
        .map(|_| ask(serde_json::json!({"cwd": "/bench", "limit": 50})).0)
        .collect();
    let mut walk = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..200 {
        let mut params = serde_json::json!({"cwd": "/bench", "limit": 50});
        if let Some(c) = &cursor {
            params["cursor"] = serde_json::json!(c);
        }
        let (took, page) = ask(params);
        walk.push(took);
        match page["result"]["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    drop(stdin);
    let _ = child.wait();
    (first, walk)
}

/// A huge session (`mb` MB of records, decompressed): its load, whole and its last 10 turns.
fn huge(mb: u64) {
    let store = tempfile::tempdir().expect("tempdir");
    let started = Instant::now();
    let (compressed, raw, turns) = write_huge(store.path(), mb << 20);
    eprintln!(
        "wrote {turns} turns, {raw} bytes ({compressed} compressed) in {:?}",
        started.elapsed()
    );
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "| a session of {:.0} MB ({turns} turns, {:.1} MiB compressed) | session/load → response | lines replayed | proxy peak RSS |\n|---|---:|---:|---:|",
        raw as f64 / 1e6,
        compressed as f64 / (1 << 20) as f64
    );
    for (what, meta) in [
        ("whole", String::new()),
        (
            "tail: the last 10 turns",
            r#","_meta":{"acpJournal":{"tail":{"turns":10}}}"#.to_string(),
        ),
    ] {
        let (took, replayed, rss_kib) = load_with(store.path(), &meta);
        eprintln!("{what}: {took:?}, {replayed} replayed, {rss_kib} KiB peak RSS");
        let _ = writeln!(
            out,
            "| {what} | {:.2} s | {replayed} | {:.1} MiB |",
            took.as_secs_f64(),
            rss_kib as f64 / 1024.0
        );
    }
}

/// A session of about `bytes` bytes of records: turns of a prompt, 30 message chunks, 6 tool
/// calls with 8 KiB of output and 2 file reads of 256 KiB. Returns (file bytes, record bytes,
/// turns).
fn write_huge(root: &Path, bytes: u64) -> (u64, u64, u64) {
    /// The segment, the records written and their bytes.
    struct Out {
        w: SegmentWriter,
        seq: u64,
        raw: u64,
    }
    impl Out {
        fn push(&mut self, from: Side, line: String) {
            self.seq += 1;
            self.raw += line.len() as u64 + 1;
            let record = Record {
                seq: self.seq,
                unix_us: 1_795_000_000_000_000 + self.seq as i64,
                mono_us: self.seq,
                body: Body::Message {
                    from,
                    payload: Payload::from_line(Bytes::from(line)),
                },
            };
            self.w.append(&record).expect("append");
            if self.seq.is_multiple_of(64) {
                self.w.flush().expect("flush");
            }
        }
    }
    let mut out = Out {
        w: session_writer(root),
        seq: 0,
        raw: 0,
    };
    let words = [
        "fn", "parse", "let", "match", "Some", "None", "return", "error", "value", "self", "input",
        "token", "=>", "{", "}", "(", ")", ";", "impl", "pub", "struct", "enum", "use", "mut",
        "if", "else", "for", "in", "while", "loop", "break", "Ok", "Err", "String", "Vec", "len",
        "push", "iter", "map", "collect", "unwrap", "expect", "&", "*", "->", "::", "+",
    ];
    // Text that compresses about as source code and logs do (5 to 10 times): words drawn at
    // random (xorshift, seeded by `salt`), with numbers.
    let text = |n: usize, salt: usize| -> String {
        let mut out = String::with_capacity(n + 16);
        let mut x = (salt as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        while out.len() < n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let pick = (x % 64) as usize;
            if pick < words.len() {
                out.push_str(words[pick]);
            } else {
                out.push_str(&(x % 100_000).to_string());
            }
            out.push(if x.is_multiple_of(9) { '\n' } else { ' ' });
        }
        serde_json::to_string(&out).expect("a string")
    };
    let update = |u: String| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{SESSION}","update":{u}}}}}"#
        )
    };
    let mut turn = 0u64;
    while out.raw < bytes {
        turn += 1;
        let id = turn + 1;
        out.push(
            Side::Client,
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"session/prompt","params":{{"sessionId":"{SESSION}","prompt":[{{"type":"text","text":"step {turn}: fix the next failing test"}}]}}}}"#
            ),
        );
        for i in 0..40usize {
            let salt = turn as usize * 40 + i;
            let u = match i % 20 {
                3 | 13 => {
                    let call = format!("read_{turn}_{i}");
                    out.push(
                        Side::Agent,
                        update(format!(
                            r#"{{"sessionUpdate":"tool_call","toolCallId":"{call}","title":"Read src/parser.rs","kind":"read","status":"in_progress"}}"#
                        )),
                    );
                    format!(
                        r#"{{"sessionUpdate":"tool_call_update","toolCallId":"{call}","status":"completed","rawOutput":{{"content":{}}}}}"#,
                        text(256 << 10, salt)
                    )
                }
                5 | 8 | 11 | 15 | 17 | 19 => {
                    let call = format!("run_{turn}_{i}");
                    out.push(
                        Side::Agent,
                        update(format!(
                            r#"{{"sessionUpdate":"tool_call","toolCallId":"{call}","title":"cargo test","kind":"execute","status":"in_progress"}}"#
                        )),
                    );
                    format!(
                        r#"{{"sessionUpdate":"tool_call_update","toolCallId":"{call}","status":"completed","rawOutput":{{"stdout":{}}}}}"#,
                        text(8 << 10, salt)
                    )
                }
                _ => format!(
                    r#"{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":{}}}}}"#,
                    text(120, salt)
                ),
            };
            out.push(Side::Agent, update(u));
        }
        out.push(
            Side::Agent,
            format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"stopReason":"end_turn"}}}}"#),
        );
    }
    out.w.flush().expect("flush");
    let stats = out.w.close(out.seq + 1, 0, 0).expect("close");
    (stats.file_bytes, out.raw, turn)
}

/// The writer of the bench session's one segment, its header written.
fn session_writer(root: &Path) -> SegmentWriter {
    let journals = JournalDir::new(root);
    journals.create_dirs().expect("store");
    let header = Header {
        acpj: FORMAT_VERSION,
        kind: SegmentKind::Session,
        session: Some(SESSION.into()),
        run: "bench".into(),
        proxy: "bench".into(),
        started: 0,
        pid: 0,
        argv: vec![],
        cwd: Some("/bench".into()),
        connection: None,
        initialize: None,
    };
    let (path, file) = journals
        .create_segment(&journals.session_dir(SESSION), "bench")
        .expect("segment");
    SegmentWriter::with_file(file, &path, &header).expect("writer")
}

/// A journal of one session with `n` agent updates: turns of one prompt and 20 updates.
fn write_session(root: &Path, n: usize) -> u64 {
    let mut w = session_writer(root);
    let mut seq = 0u64;
    let mut push = |w: &mut SegmentWriter, from: Side, line: String| {
        seq += 1;
        let record = Record {
            seq,
            unix_us: 1_795_000_000_000_000 + seq as i64,
            mono_us: seq,
            body: Body::Message {
                from,
                payload: Payload::from_line(Bytes::from(line)),
            },
        };
        w.append(&record).expect("append");
    };
    push(
        &mut w,
        Side::Client,
        r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/bench","mcpServers":[]}}"#.to_string(),
    );
    push(
        &mut w,
        Side::Agent,
        format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"sessionId":"{SESSION}"}}}}"#),
    );
    let words = [
        "the", "parser", "now", "handles", "escaped", "quotes", "and", "returns", "an", "error",
    ];
    for i in 0..n {
        if i % 20 == 0 {
            push(
                &mut w,
                Side::Client,
                format!(
                    r#"{{"jsonrpc":"2.0","id":{},"method":"session/prompt","params":{{"sessionId":"{SESSION}","prompt":[{{"type":"text","text":"question {i}: please fix the parser"}}]}}}}"#,
                    i + 2
                ),
            );
        }
        let update = if i % 10 == 5 {
            format!(
                r#"{{"sessionUpdate":"tool_call","toolCallId":"call_{i}","title":"Edit src/parser.rs","kind":"edit","status":"completed","content":[{{"type":"diff","path":"/bench/src/parser.rs","oldText":"fn parse() {{}}","newText":"fn parse() -> Result<(), Error> {{ Ok(()) }}"}}]}}"#
            )
        } else {
            format!(
                r#"{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"{} {} "}}}}"#,
                words[i % 10],
                words[(i * 7) % 10]
            )
        };
        push(
            &mut w,
            Side::Agent,
            format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{SESSION}","update":{update}}}}}"#
            ),
        );
        if i % 20 == 19 {
            push(
                &mut w,
                Side::Agent,
                format!(
                    r#"{{"jsonrpc":"2.0","id":{},"result":{{"stopReason":"end_turn"}}}}"#,
                    i - 19 + 2
                ),
            );
        }
        if i % 1000 == 999 {
            w.flush().expect("flush");
        }
    }
    w.flush().expect("flush");
    let stats = w.close(seq + 1, 0, 0).expect("close");
    stats.file_bytes
}

/// The proxy in front of this binary's agent (`__agent`) on `store`, initialized: the child,
/// its stdin, and its stdout buffered.
fn initialized_proxy(
    store: &Path,
) -> (
    std::process::Child,
    std::process::ChildStdin,
    BufReader<std::process::ChildStdout>,
) {
    let me = std::env::current_exe().expect("current exe");
    let mut child = Command::new(env!("CARGO_BIN_EXE_acp-journal"))
        .arg("--journal-dir")
        .arg(store)
        .args(["--fsync", "never", "--"])
        .arg(&me)
        .arg("__agent")
        .env("ACP_JOURNAL_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawning the proxy");
    let mut stdin = child.stdin.take().expect("piped");
    let mut stdout = BufReader::with_capacity(1 << 20, child.stdout.take().expect("piped"));
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":1,"clientCapabilities":{{}}}}}}"#).expect("write");
    stdout
        .read_until(b'\n', &mut Vec::new())
        .expect("initialize response");
    (child, stdin, stdout)
}

/// One load through a fresh proxy: (time to response, updates replayed, peak RSS KiB).
fn load_once(store: &Path) -> (Duration, usize, u64) {
    load_with(store, "")
}

/// [`load_once`] with `meta` (`,"_meta":{…}` or nothing) added to the load's params.
fn load_with(store: &Path, meta: &str) -> (Duration, usize, u64) {
    let (mut child, mut stdin, mut stdout) = initialized_proxy(store);
    let pid = child.id();
    let mut line = Vec::new();
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sampler = {
        let peak = peak.clone();
        std::thread::spawn(move || {
            while let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
                if let Some(kib) = status
                    .lines()
                    .find_map(|l| l.strip_prefix("VmHWM:"))
                    .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
                {
                    peak.store(kib, std::sync::atomic::Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let start = Instant::now();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":1,"method":"session/load","params":{{"sessionId":"{SESSION}","cwd":"/bench","mcpServers":[]{meta}}}}}"#).expect("write");
    let mut replayed = 0;
    loop {
        line.clear();
        if stdout.read_until(b'\n', &mut line).expect("read") == 0 {
            panic!("the proxy closed its output before answering the load");
        }
        if line.starts_with(br#"{"jsonrpc":"2.0","id":1,"#) {
            break;
        }
        replayed += 1;
    }
    let took = start.elapsed();
    drop(stdin);
    let _ = child.wait();
    let _ = sampler.join();
    (
        took,
        replayed,
        peak.load(std::sync::atomic::Ordering::Relaxed),
    )
}

/// A minimal ACP agent without `loadSession`: initialize, session/new, session/prompt.
fn agent() {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { return };
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let id = msg["id"].clone();
        let result = match msg["method"].as_str() {
            Some("initialize") => {
                serde_json::json!({"protocolVersion": 1, "agentCapabilities": {}})
            }
            Some("session/new") => serde_json::json!({"sessionId": "fresh"}),
            Some("session/prompt") => serde_json::json!({"stopReason": "end_turn"}),
            _ if id.is_null() => continue,
            _ => serde_json::json!({}),
        };
        let _ = writeln!(
            out,
            "{}",
            serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result})
        );
        let _ = out.flush();
    }
}
