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
//!   fast as it can and exits;
//! - `__relay -- CMD…`: the baseline relay: spawns CMD and copies bytes both ways with two
//!   threads, no parsing, no journaling.
//!
//! Each measurement runs three paths in the same process: (a) direct pipe to the agent, (b) the
//! minimal relay in front of it, (c) `acp-journal --journal-dir <tmp> -- <agent>`; and, when it
//! is installed (`scripts/bench-peers.sh`, run by the bench if needed), (d) the official Rust
//! ACP conductor with its trace on, on the same traffic ([`peers`]).
//!
//! Environment: `BENCH_QUICK=1` scales every count down ~10×; `BENCH_PROXY_ARGS="--fsync never"`
//! (whitespace-separated) adds options to the acp-journal command line, for experiments;
//! `ACP_JOURNAL_LOG` is passed through (the bench sets it to `warn` when unset).

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[path = "proxy/peers.rs"]
mod peers;

/// The proxy under test.
const PROXY: &str = env!("CARGO_BIN_EXE_acp-journal");
/// The whole bench is aborted after this long (a hung child must not hang CI).
const WATCHDOG: Duration = Duration::from_secs(900);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("__echo") => echo_agent(),
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

// ---------------------------------------------------------------------------------------------
// Helper roles
// ---------------------------------------------------------------------------------------------

/// An unbuffered handle on one of our standard file descriptors (never closed by us).
fn raw_fd(fd: i32) -> ManuallyDrop<File> {
    // SAFETY: fds 0 and 1 are open for the life of the process, and `ManuallyDrop` keeps the
    // `File` from closing them.
    ManuallyDrop::new(unsafe { File::from_raw_fd(fd) })
}

/// Echo agent: answers `initialize`, and writes every other line it reads back with one
/// `write(2)`.
fn echo_agent() {
    let mut input = BufReader::with_capacity(1 << 16, raw_fd(0).try_clone().expect("stdin"));
    let mut out = raw_fd(1);
    let mut line = Vec::with_capacity(1024);
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let written = match request_id(&line, "initialize") {
                    Some(id) => out.write_all(init_response(&id).as_bytes()),
                    None => out.write_all(&line),
                };
                if written.is_err() {
                    return;
                }
            }
        }
    }
}

/// The id (as JSON text) of `line` when it is a `method` request. A proxy may renumber
/// requests (the ACP conductor does), so answers carry the id received.
fn request_id(line: &[u8], method: &str) -> Option<String> {
    let needle = format!("\"method\":\"{method}\"");
    memchr::memmem::find(line, needle.as_bytes())?;
    let msg: serde_json::Value = serde_json::from_slice(line).ok()?;
    Some(msg.get("id")?.to_string())
}

/// Flood agent: see the module documentation.
fn flood_agent(n: usize, seed: u64) {
    let data = Flood::new(seed).lines(n);
    let mut input = BufReader::new(raw_fd(0).try_clone().expect("stdin"));
    let mut out = raw_fd(1);
    let mut line = Vec::new();
    // initialize → response: tells the bench we are ready (generation is not timed).
    if input.read_until(b'\n', &mut line).unwrap_or(0) == 0 {
        return;
    }
    let id = request_id(&line, "initialize").unwrap_or_else(|| "0".into());
    out.write_all(init_response(&id).as_bytes())
        .expect("stdout");
    line.clear();
    // session/prompt → the flood, its response last (with the id the prompt came with).
    if input.read_until(b'\n', &mut line).unwrap_or(0) == 0 {
        return;
    }
    let id = request_id(&line, "session/prompt").unwrap_or_else(|| "1".into());
    let updates = &data[..data.len() - PROMPT_RESPONSE.len()];
    let _ = out.write_all(updates);
    let _ = out.write_all(
        PROMPT_RESPONSE
            .replacen("\"id\":1", &format!("\"id\":{id}"), 1)
            .as_bytes(),
    );
}

/// Minimal relay: copy stdin → child stdin and child stdout → stdout, big buffers, no parsing.
fn relay(cmd: &[String]) -> ! {
    let mut child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("relay: spawning {cmd:?}: {e}"));
    let mut child_in = child.stdin.take().expect("piped");
    let mut child_out = child.stdout.take().expect("piped");
    std::thread::spawn(move || {
        let mut stdin = raw_fd(0);
        copy(&mut *stdin, &mut child_in);
        // Dropping `child_in` closes the agent's stdin, as EOF on ours.
    });
    copy(&mut child_out, &mut *raw_fd(1));
    let code = match child.wait() {
        Ok(status) => status.code().unwrap_or(1),
        Err(_) => 1,
    };
    std::process::exit(code)
}

fn copy(from: &mut impl Read, to: &mut impl Write) {
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match from.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Realistic ACP traffic (deterministic)
// ---------------------------------------------------------------------------------------------

const INIT_REQUEST: &str = concat!(
    r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"#,
    r#""clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true},"#,
    r#""clientInfo":{"name":"acp-journal-bench","version":"0"}}}"#,
    "\n"
);
/// The agents' answer to `initialize` request `id` (JSON text).
fn init_response(id: &str) -> String {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"protocolVersion\":1,\"agentCapabilities\":{{\"loadSession\":true,\"promptCapabilities\":{{\"image\":false,\"audio\":false,\"embeddedContext\":true}}}},\"authMethods\":[]}}}}\n"
    )
}
const PROMPT_RESPONSE: &str =
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"stopReason\":\"end_turn\"}}\n";

fn prompt_request(session: &str) -> String {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/prompt\",\"params\":{{\"sessionId\":\"{session}\",\"prompt\":[{{\"type\":\"text\",\"text\":\"Refactor the line splitter, then run the tests and fix what fails.\"}}]}}}}\n"
    )
}

/// splitmix64: small, fast, deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (((self.next() >> 32) * n as u64) >> 32) as usize
    }

    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// An element, frequent ones first (roughly Zipf-like: index ∝ u³).
    fn skewed<'a>(&mut self, items: &[&'a str]) -> &'a str {
        let u = self.unit();
        items[((u * u * u) * items.len() as f64) as usize % items.len()]
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    fn hex(&mut self, digits: usize) -> String {
        let mut s = String::with_capacity(digits);
        while s.len() < digits {
            let _ = write!(s, "{:016x}", self.next());
        }
        s.truncate(digits);
        s
    }
}

#[rustfmt::skip]
const WORDS: &[&str] = &[
    "the", "I", "to", "a", "and", "of", "in", "is", "it", "that", "this", "for", "we", "be", "will",
    "now", "let", "me", "file", "function", "test", "tests", "the", "with", "on", "not", "check",
    "need", "can", "code", "error", "should", "which", "so", "when", "from", "then", "there", "are",
    "line", "lines", "update", "change", "look", "at", "implementation", "first", "also", "make",
    "sure", "fix", "issue", "here", "because", "use", "call", "return", "value", "type", "struct",
    "method", "field", "module", "crate", "build", "run", "passes", "fails", "failing", "case",
    "cases", "edge", "handle", "buffer", "parser", "input", "output", "read", "write", "stream",
    "session", "message", "request", "response", "journal", "segment", "it's", "don't", "looks",
    "like", "good", "right", "correct", "instead", "since", "each", "every", "one", "two", "after",
    "before", "into", "only", "if", "by", "as", "an", "all", "was", "has", "have", "been", "would",
    "could", "might", "still", "just", "more", "some", "other", "new", "old", "existing", "current",
    "previous", "next", "last", "same", "different", "problem", "reason", "approach", "simpler",
    "cleaner", "faster", "safe", "unsafe", "bug", "logic", "path", "paths", "directory", "config",
    "option", "flag", "argument", "arguments", "helper", "wrapper", "trait", "impl", "generic",
    "lifetime", "borrow", "clone", "iterator", "loop", "match", "branch", "condition", "newline",
    "byte", "bytes", "string", "slice", "vector", "map", "key", "keys", "entry", "index", "offset",
    "length", "size", "limit", "timeout", "signal", "process", "child", "pipe", "stdin", "stdout",
    "stderr", "exit", "status", "result", "Ok", "Err", "None", "Some", "panic", "assert",
    "expected", "actual", "compile", "compiler", "warning", "clippy", "format", "docs", "comment",
    "rename", "move", "extract", "inline", "remove", "add", "keep", "split", "join", "trim",
    "parse", "encode", "decode", "flush", "sync", "close", "open", "create", "delete", "Let", "Now",
    "The", "This", "Great", "Done", "Next", "First", "Looking", "Checking", "Running", "Updating",
];

#[rustfmt::skip]
const IDENTS: &[&str] = &[
    "line", "buf", "reader", "writer", "session", "state", "config", "entry", "record", "segment",
    "offset", "len", "bytes", "input", "output", "result", "value", "key", "path", "dir", "file",
    "header", "payload", "message", "request", "response", "pending", "id", "method", "params",
    "stamp", "seq", "frame", "encoder", "decoder", "scratch", "staged", "stats", "count", "limit",
    "deadline", "timeout", "child", "status", "code", "err", "chunk", "start", "end", "pos", "next",
    "prev", "items", "map", "set", "queue", "tx", "rx", "handle", "store", "catalog", "splitter",
    "peek", "target", "action", "side", "clock", "events", "lines", "cursor",
];
#[rustfmt::skip]
const TYPES: &[&str] = &[
    "Bytes", "String", "Vec<u8>", "Session", "Record", "Segment", "Header", "Payload", "Config",
    "Store", "Stamp", "Action", "Side", "Target", "Frame", "Encoder", "Error", "State", "Entry",
    "Request", "Response", "Pending", "Catalog", "Journal", "Reader", "Writer", "Splitter",
    "PathBuf", "Duration", "Instant", "HashMap<String, Entry>", "Option<Bytes>", "usize", "u64",
];
#[rustfmt::skip]
const METHODS: &[&str] = &[
    "get", "insert", "remove", "push", "pop", "len", "is_empty", "iter", "map", "filter", "collect",
    "clone", "to_string", "as_ref", "unwrap_or", "ok_or", "extend_from_slice", "split_at", "find",
    "position", "contains", "starts_with", "trim_end", "parse", "read_line", "write_all", "flush",
    "append", "encode", "decode", "next_line", "finish", "open", "close",
];
#[rustfmt::skip]
const FILES: &[&str] = &[
    "shell/mod.rs", "shell/lines.rs", "shell/agent.rs", "shell/journals.rs", "proto/mod.rs",
    "proto/envelope.rs", "proto/redact.rs", "journal/format.rs", "journal/writer.rs",
    "journal/reader.rs", "journal/store.rs", "cmd/proxy.rs", "cmd/list.rs", "cmd/verify.rs",
    "cli.rs", "lib.rs", "main.rs", "util/time.rs", "util/bytes.rs", "net/client.rs",
];

/// Generator of one agent's output during a long prompt turn.
struct Flood {
    rng: Rng,
    session: String,
    calls: u64,
    call: String,
    used: u64,
}

impl Flood {
    fn new(seed: u64) -> Flood {
        let mut rng = Rng(seed);
        let session = rng.hex(32);
        Flood {
            rng,
            session,
            calls: 0,
            call: "call_0".into(),
            used: 1200,
        }
    }

    /// N lines: N−1 `session/update` notifications, then the prompt's response.
    fn lines(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n * 300);
        for _ in 1..n {
            self.update(&mut out);
        }
        out.extend_from_slice(PROMPT_RESPONSE.as_bytes());
        out
    }

    fn update(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(
            br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":""#,
        );
        out.extend_from_slice(self.session.as_bytes());
        out.extend_from_slice(br#"","update":{"sessionUpdate":"#);
        let u = self.rng.unit();
        if u < 0.78 {
            self.chunk(out, "agent_message_chunk");
        } else if u < 0.90 {
            self.chunk(out, "agent_thought_chunk");
        } else if u < 0.93 {
            self.tool_call(out);
        } else if u < 0.945 {
            let _ = write!(
                Adapter(out),
                r#""tool_call_update","toolCallId":"{}","status":"in_progress"}}"#,
                self.call
            );
        } else if u < 0.975 {
            self.tool_result(out);
        } else if u < 0.985 {
            self.plan(out);
        } else {
            self.used += self.rng.range(40, 3000) as u64;
            let cost = self.used as f64 * 3e-6;
            let _ = write!(
                Adapter(out),
                r#""usage_update","used":{},"size":200000,"cost":{{"amount":{cost:.4},"currency":"USD"}}}}"#,
                self.used
            );
        }
        out.extend_from_slice(b"}}\n");
    }

    fn chunk(&mut self, out: &mut Vec<u8>, kind: &str) {
        let _ = write!(
            Adapter(out),
            r#""{kind}","content":{{"type":"text","text":""#
        );
        let mut text = String::new();
        for _ in 0..self.rng.range(1, 4) {
            if self.rng.chance(0.05) {
                let _ = write!(text, " `{}`", self.rng.pick(IDENTS));
            } else {
                text.push(' ');
                text.push_str(self.rng.skewed(WORDS));
            }
            if self.rng.chance(0.06) {
                text.push_str(self.rng.pick(&[".", ",", ":", ".\n\n", "\n- "]));
            }
        }
        json_escape(out, &text);
        out.extend_from_slice(b"\"}}");
    }

    fn file(&mut self) -> String {
        format!("/work/acme/src/{}", self.rng.pick(FILES))
    }

    fn tool_call(&mut self, out: &mut Vec<u8>) {
        self.calls += 1;
        self.call = format!("toolu_{}", self.rng.hex(24));
        let mut o = Adapter(out);
        let _ = write!(o, r#""tool_call","toolCallId":"{}","#, self.call);
        match self.rng.below(4) {
            0 | 1 => {
                let path = self.file();
                let kind = if self.rng.chance(0.5) { "read" } else { "edit" };
                let title = if kind == "read" { "Read" } else { "Edit" };
                let _ = write!(
                    o,
                    r#""title":"{title} {path}","kind":"{kind}","status":"pending","locations":[{{"path":"{path}"}}],"rawInput":{{"file_path":"{path}"}}}}"#
                );
            }
            2 => {
                let cmd = format!(
                    "cargo test --lib {}::tests::{}_{}",
                    self.rng.pick(IDENTS),
                    self.rng.pick(METHODS),
                    self.rng.pick(IDENTS)
                );
                let _ = write!(
                    o,
                    r#""title":"`{cmd}`","kind":"execute","status":"pending","rawInput":{{"command":"{cmd}","description":"Run the tests"}}}}"#
                );
            }
            _ => {
                let pat = format!("fn {}", self.rng.pick(METHODS));
                let _ = write!(
                    o,
                    r#""title":"grep \"{pat}\" /work/acme/src","kind":"search","status":"pending","rawInput":{{"pattern":"{pat}","path":"/work/acme/src"}}}}"#
                );
            }
        }
    }

    fn tool_result(&mut self, out: &mut Vec<u8>) {
        let _ = write!(
            Adapter(out),
            r#""tool_call_update","toolCallId":"{}","status":"completed","content":["#,
            self.call
        );
        let size = self.rng.range(200, 4000);
        if self.rng.chance(0.6) {
            let code = self.code(size);
            out.extend_from_slice(br#"{"type":"content","content":{"type":"text","text":""#);
            json_escape(out, &code);
            out.extend_from_slice(b"\"}}");
        } else {
            let old = self.code(size / 2);
            let new = self.edit(&old);
            let path = self.file();
            let _ = write!(
                Adapter(out),
                r#"{{"type":"diff","path":"{path}","oldText":""#
            );
            json_escape(out, &old);
            out.extend_from_slice(br#"","newText":""#);
            json_escape(out, &new);
            out.extend_from_slice(b"\"}");
        }
        out.extend_from_slice(b"]}");
    }

    fn plan(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(br#""plan","entries":["#);
        let n = self.rng.range(3, 6);
        let done = self.rng.below(n);
        for i in 0..n {
            if i > 0 {
                out.push(b',');
            }
            let mut text = String::from(self.rng.pick(&[
                "Add", "Fix", "Update", "Refactor", "Test", "Remove", "Document", "Check",
            ]));
            for _ in 0..self.rng.range(3, 7) {
                text.push(' ');
                text.push_str(self.rng.skewed(WORDS));
            }
            out.extend_from_slice(br#"{"content":""#);
            json_escape(out, &text);
            let status = match i.cmp(&done) {
                std::cmp::Ordering::Less => "completed",
                std::cmp::Ordering::Equal => "in_progress",
                std::cmp::Ordering::Greater => "pending",
            };
            let priority = self.rng.pick(&["high", "medium", "low"]);
            let _ = write!(
                Adapter(out),
                r#"","priority":"{priority}","status":"{status}"}}"#
            );
        }
        out.extend_from_slice(b"]}");
    }

    /// Rust-looking source of about `size` bytes.
    fn code(&mut self, size: usize) -> String {
        let mut s = String::with_capacity(size + 128);
        while s.len() < size {
            let line = self.code_line();
            s.push_str(&line);
            s.push('\n');
        }
        s
    }

    fn code_line(&mut self) -> String {
        let r = &mut self.rng;
        let indent = "    ".repeat(r.below(4));
        let (a, b, c) = (r.pick(IDENTS), r.pick(IDENTS), r.pick(IDENTS));
        let (t, t2) = (r.pick(TYPES), r.pick(TYPES));
        let m = r.pick(METHODS);
        let body = match r.below(14) {
            0 => format!("pub fn {m}_{a}(&mut self, {b}: &{t}) -> Result<{t2}> {{"),
            1 => format!("let {a} = self.{b}.{m}({c})?;"),
            2 => format!("let mut {a} = Vec::with_capacity({});", r.below(4096)),
            3 => format!("for {a} in {b}.iter() {{"),
            4 => format!("if {a}.{m}() {{"),
            5 => format!(
                "return Err(Error::{}(format!(\"{} {} {{}}\", {a})));",
                t.trim_end_matches(['<', '>']),
                r.skewed(WORDS),
                r.skewed(WORDS)
            ),
            6 => format!(
                "// {} {} {} {} {}.",
                r.skewed(WORDS),
                r.skewed(WORDS),
                r.skewed(WORDS),
                r.skewed(WORDS),
                r.skewed(WORDS)
            ),
            7 => format!("{a}.{m}({b}.clone());"),
            8 => format!("match {a} {{"),
            9 => format!("Some({a}) => {b}.{m}({a}),"),
            10 => format!("Ok({t2} {{ {a}, {b} }})"),
            11 => "}".to_string(),
            12 => format!("assert_eq!({a}.len(), {});", r.below(100)),
            _ => format!("use crate::{a}::{{{t}, {t2}}};"),
        };
        indent + &body
    }

    /// `old` with about a sixth of its lines replaced or added.
    fn edit(&mut self, old: &str) -> String {
        let mut new = String::with_capacity(old.len() + 256);
        for line in old.lines() {
            if self.rng.chance(0.12) {
                new.push_str(&self.code_line());
            } else {
                new.push_str(line);
            }
            new.push('\n');
            if self.rng.chance(0.05) {
                new.push_str(&self.code_line());
                new.push('\n');
            }
        }
        new
    }
}

/// `fmt::Write` into a byte vector.
struct Adapter<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Adapter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// The body of a JSON string (no quotes).
fn json_escape(out: &mut Vec<u8>, s: &str) {
    for &b in s.as_bytes() {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0..0x20 => {
                let _ = write!(Adapter(out), "\\u{b:04x}");
            }
            _ => out.push(b),
        }
    }
}

/// The small message of the latency test: an `agent_message_chunk` update.
fn latency_messages(count: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng(7);
    let session = rng.hex(32);
    (0..count)
        .map(|i| {
            let mut m = Vec::with_capacity(200);
            m.extend_from_slice(br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":""#);
            m.extend_from_slice(session.as_bytes());
            m.extend_from_slice(br#"","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":""#);
            let _ = write!(Adapter(&mut m), "{} {}", WORDS[i % WORDS.len()], i % 100);
            m.extend_from_slice(b"\"}}}}\n");
            m
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The bench
// ---------------------------------------------------------------------------------------------

struct Scale {
    quick: bool,
    latency_msgs: usize,
    latency_warmup: usize,
    flood_journal: usize,
    flood_small: usize,
    flood_baseline: usize,
    zstd19_lines: usize,
}

impl Scale {
    fn get() -> Scale {
        let quick = std::env::var("BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
        let div = if quick { 10 } else { 1 };
        Scale {
            quick,
            latency_msgs: 20_000 / div,
            latency_warmup: 1_000 / div,
            flood_journal: 1_000_000 / div,
            flood_small: 100_000 / div,
            flood_baseline: 200_000 / div,
            zstd19_lines: 100_000 / div,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PathKind {
    Direct,
    Relay,
    Journal,
    /// The official Rust ACP conductor with its trace on (see `peers.rs`).
    Conductor,
}

const PATHS: [PathKind; 3] = [PathKind::Direct, PathKind::Relay, PathKind::Journal];

/// The paths measured: [`PATHS`], then the conductor when it is installed.
fn paths() -> Vec<PathKind> {
    let mut all = PATHS.to_vec();
    if peers::conductor().is_some() {
        all.push(PathKind::Conductor);
    }
    all
}

impl PathKind {
    fn name(self) -> &'static str {
        match self {
            PathKind::Direct => "direct pipe",
            PathKind::Relay => "minimal relay",
            PathKind::Journal => "acp-journal",
            PathKind::Conductor => "ACP conductor --trace",
        }
    }

    /// True when the path relays every byte unchanged (the conductor re-encodes messages and
    /// renumbers requests).
    fn transparent(self) -> bool {
        self != PathKind::Conductor
    }

    /// The command line of this path in front of `agent` (`journal` is the store for
    /// acp-journal, the directory of the trace file for the conductor).
    fn command(self, agent: &[String], journal: Option<&Path>) -> Command {
        let me = std::env::current_exe().expect("current_exe");
        let mut cmd = match self {
            PathKind::Direct => {
                let mut c = Command::new(&agent[0]);
                c.args(&agent[1..]);
                c
            }
            PathKind::Relay => {
                let mut c = Command::new(me);
                c.arg("__relay").arg("--").args(agent);
                c
            }
            PathKind::Journal => {
                let mut c = Command::new(PROXY);
                if std::env::var_os("ACP_JOURNAL_LOG").is_none() {
                    c.env("ACP_JOURNAL_LOG", "warn");
                }
                c.arg("--journal-dir")
                    .arg(journal.expect("a journal dir"))
                    .args(extra_proxy_args())
                    .arg("--")
                    .args(agent);
                c
            }
            PathKind::Conductor => peers::command(agent, journal.expect("a trace dir")),
        };
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        cmd
    }
}

/// Extra options for acp-journal from `BENCH_PROXY_ARGS` (whitespace-separated), for
/// experiments such as `--fsync never`.
fn extra_proxy_args() -> Vec<String> {
    std::env::var("BENCH_PROXY_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// The machine's load, to tell how much other processes disturbed the bench.
struct Load {
    avg_start: String,
    /// (busy, steal) ticks from /proc/stat.
    stat_start: (u64, u64),
    /// CPU seconds of this process and its waited-for descendants.
    ours_start: f64,
}

impl Load {
    fn start() -> Load {
        Load {
            avg_start: loadavg(),
            stat_start: proc_stat(),
            ours_start: our_cpu_secs(),
        }
    }

    fn report(&self, elapsed: Duration) -> String {
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let (busy, steal) = proc_stat();
        let ours = our_cpu_secs() - self.ours_start;
        let others = (busy.saturating_sub(self.stat_start.0) as f64 / hz - ours).max(0.0);
        let steal = steal.saturating_sub(self.stat_start.1) as f64 / hz;
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let share = others / (elapsed.as_secs_f64() * cpus);
        format!(
            "while the bench ran, other processes used {others:.1} CPU-s ({:.0} % of the machine; the bench itself used {ours:.1} CPU-s), hypervisor steal {steal:.1} s; load average {} at the start, {} at the end{}",
            share * 100.0,
            self.avg_start,
            loadavg(),
            if share > 0.05 || steal / (elapsed.as_secs_f64() * cpus) > 0.05 {
                " — **the machine was shared (other processes or hypervisor steal > 5 %): expect noisy latency and lower throughput**"
            } else {
                ""
            }
        )
    }
}

/// (busy, steal) CPU ticks of the whole machine since boot.
fn proc_stat() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let at = |i: usize| f.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal
    (at(0) + at(1) + at(2) + at(5) + at(6), at(7))
}

/// CPU seconds (user + system) of this process and of its waited-for descendants.
fn our_cpu_secs() -> f64 {
    let secs = |who| {
        // SAFETY: getrusage fills the zeroed struct it is given.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(who, &mut ru) };
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        tv(ru.ru_utime) + tv(ru.ru_stime)
    };
    secs(libc::RUSAGE_SELF) + secs(libc::RUSAGE_CHILDREN)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn me() -> String {
    std::env::current_exe()
        .expect("current_exe")
        .display()
        .to_string()
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

    let report = render(
        &scale,
        &load,
        &latency,
        &throughput,
        &sizes,
        started.elapsed(),
    );
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

// --- 1. latency ------------------------------------------------------------------------------

struct Latency {
    /// Every process on one CPU.
    pinned: bool,
    msg_bytes: usize,
    /// The paths measured: [`PATHS`], then the conductor when installed.
    kinds: Vec<PathKind>,
    /// Sorted round-trip times in nanoseconds, per path (`kinds` order).
    rtt: Vec<Vec<u64>>,
}

impl Latency {
    /// RTT quantile `q` of path `i`, in nanoseconds.
    fn rtt(&self, i: usize, q: f64) -> u64 {
        pct(&self.rtt[i], q)
    }

    /// Added latency per hop of path `i` at quantile `q`, in microseconds.
    fn added(&self, i: usize, q: f64) -> f64 {
        (self.rtt(i, q) as f64 - self.rtt(0, q) as f64) / 2.0 / 1e3
    }

    /// added(acp-journal) / added(relay) at quantile `q`, when the relay adds anything.
    fn ratio(&self, q: f64) -> Option<f64> {
        let relay = self.added(1, q);
        (relay > 0.5).then(|| self.added(2, q) / relay)
    }

    fn label(&self) -> &'static str {
        if self.pinned {
            "all on one CPU"
        } else {
            "unpinned"
        }
    }
}

/// Pin the calling thread (and so the children it spawns) to CPU 0, or restore `mask`.
fn set_affinity(mask: Option<&libc::cpu_set_t>) -> libc::cpu_set_t {
    // SAFETY: plain libc calls on a zeroed, properly sized cpu_set_t for the calling thread.
    unsafe {
        let mut old: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut old);
        let new = match mask {
            Some(m) => *m,
            None => {
                let mut one: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(0, &mut one);
                one
            }
        };
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &new);
        old
    }
}

struct EchoPath {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// The echo must be byte-identical (else equal as JSON).
    exact: bool,
    _journal: Option<tempfile::TempDir>,
}

impl EchoPath {
    /// Start the path in front of the echo agent and initialize it.
    fn start(kind: PathKind) -> EchoPath {
        let journal = matches!(kind, PathKind::Journal | PathKind::Conductor)
            .then(|| tempfile::tempdir().expect("tempdir"));
        let agent = vec![me(), "__echo".to_string()];
        let mut child = kind
            .command(&agent, journal.as_ref().map(|d| d.path()))
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {}: {e}", kind.name()));
        let mut path = EchoPath {
            stdin: child.stdin.take().expect("piped"),
            stdout: BufReader::with_capacity(1 << 16, child.stdout.take().expect("piped")),
            child,
            exact: kind.transparent(),
            _journal: journal,
        };
        let mut line = Vec::new();
        path.stdin
            .write_all(INIT_REQUEST.as_bytes())
            .expect("write");
        path.stdout.read_until(b'\n', &mut line).expect("read");
        assert!(
            memchr::memmem::find(&line, br#""result""#).is_some(),
            "{}: initialize failed: {}",
            kind.name(),
            String::from_utf8_lossy(&line)
        );
        path
    }

    /// One round trip, in nanoseconds.
    fn round_trip(&mut self, msg: &[u8], line: &mut Vec<u8>) -> u64 {
        line.clear();
        let t = Instant::now();
        self.stdin.write_all(msg).expect("write to the path");
        self.stdout
            .read_until(b'\n', line)
            .expect("read from the path");
        let ns = t.elapsed().as_nanos() as u64;
        if self.exact || line.as_slice() != msg {
            let json = |b: &[u8]| serde_json::from_slice::<serde_json::Value>(b).ok();
            assert!(
                line.as_slice() == msg
                    || (!self.exact && json(line).is_some() && json(line) == json(msg)),
                "the echo differs from the message"
            );
        }
        ns
    }

    fn finish(mut self) {
        drop(self.stdin);
        let mut rest = Vec::new();
        let _ = self.stdout.read_to_end(&mut rest);
        let status = self.child.wait().expect("wait");
        assert!(status.success(), "echo path exited with {status}");
    }
}

fn run_latency(scale: &Scale, pinned: bool) -> Latency {
    let saved = pinned.then(|| set_affinity(None));
    let msgs = latency_messages(256);
    let kinds = paths();
    let mut paths: Vec<EchoPath> = kinds.iter().map(|&k| EchoPath::start(k)).collect();
    let mut line = Vec::with_capacity(512);
    for (p, kind) in paths.iter_mut().zip(&kinds) {
        eprintln!(
            "bench: latency warm-up: {}{}",
            kind.name(),
            if pinned { " (all on CPU 0)" } else { "" }
        );
        for i in 0..scale.latency_warmup {
            p.round_trip(&msgs[i % msgs.len()], &mut line);
        }
    }
    // Interleave blocks of messages across the paths so drift (frequency, other load) hits all
    // of them alike.
    let block = (scale.latency_msgs / 20).max(1);
    let count = kinds.len();
    let mut rtt: Vec<Vec<u64>> = (0..count)
        .map(|_| Vec::with_capacity(scale.latency_msgs))
        .collect();
    let mut done = 0;
    let mut round = 0;
    while done < scale.latency_msgs {
        let n = block.min(scale.latency_msgs - done);
        for j in 0..count {
            let idx = (round + j) % count;
            for i in 0..n {
                let ns = paths[idx].round_trip(&msgs[(done + i) % msgs.len()], &mut line);
                rtt[idx].push(ns);
            }
        }
        done += n;
        round += 1;
    }
    for p in paths {
        p.finish();
    }
    if let Some(saved) = saved {
        set_affinity(Some(&saved));
    }
    for r in &mut rtt {
        r.sort_unstable();
    }
    for (kind, r) in kinds.iter().zip(&rtt) {
        eprintln!(
            "bench: latency {}: p50 {:.1} µs, p99 {:.1} µs",
            kind.name(),
            us(pct(r, 0.50)),
            us(pct(r, 0.99))
        );
    }
    Latency {
        pinned,
        msg_bytes: msgs.iter().map(Vec::len).sum::<usize>() / msgs.len(),
        kinds,
        rtt,
    }
}

fn pct(sorted: &[u64], p: f64) -> u64 {
    let idx = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[idx]
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

// --- 2. throughput and 4. RSS ------------------------------------------------------------------

struct FloodRun {
    kind: PathKind,
    messages: usize,
    bytes: u64,
    secs: f64,
    /// Peak RSS (VmHWM, KiB) of the path's process, last value read before it exited.
    peak_kib: Option<u64>,
    /// VmHWM at 10 %, 20 %, … 100 % of the lines received.
    hwm_progress: Vec<u64>,
    rss_samples: u64,
    /// CPU seconds (user + system) per thread of the path's process between the start line
    /// and its last sample before exit: (thread name, seconds).
    cpu: Vec<(String, f64)>,
}

impl FloodRun {
    fn mb_s(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.secs
    }

    fn msg_s(&self) -> f64 {
        self.messages as f64 / self.secs
    }
}

struct Throughput {
    /// Median of three runs each (direct, relay).
    baselines: Vec<FloodRun>,
    journal_small: FloodRun,
    journal_big: FloodRun,
    /// The store of the big acp-journal run.
    store: StoreBytes,
    /// The conductor on the traffic of `journal_small`, compared with it.
    conductor: Option<peers::Compared>,
}

const SEED: u64 = 0xACB_2026;

fn run_throughput(scale: &Scale) -> Throughput {
    let mut baselines = Vec::new();
    for kind in [PathKind::Direct, PathKind::Relay] {
        let mut runs: Vec<FloodRun> = (0..3)
            .map(|_| flood_run(kind, scale.flood_baseline, None))
            .collect();
        runs.sort_by(|a, b| a.secs.total_cmp(&b.secs));
        baselines.push(runs.swap_remove(1));
    }
    let small_dir = tempfile::tempdir().expect("tempdir");
    let journal_small = flood_run(PathKind::Journal, scale.flood_small, Some(small_dir.path()));
    let conductor = peers::conductor().map(|_| {
        let trace_dir = tempfile::tempdir().expect("tempdir");
        let run = flood_run(
            PathKind::Conductor,
            scale.flood_small,
            Some(trace_dir.path()),
        );
        peers::compare(run, trace_dir.path(), &journal_small, small_dir.path())
    });
    let big_dir = tempfile::tempdir().expect("tempdir");
    let journal_big = flood_run(PathKind::Journal, scale.flood_journal, Some(big_dir.path()));
    let store = store_bytes(big_dir.path());
    Throughput {
        baselines,
        journal_small,
        journal_big,
        store,
        conductor,
    }
}

/// What a journal store holds.
struct StoreBytes {
    /// Bytes of the `*.acpj.zst` segment files.
    segments: u64,
    /// Bytes of every file (catalog included).
    all: u64,
    count: usize,
    /// The segments decompressed: the journal's records as JSON lines.
    decoded: u64,
    /// The decompressed records compressed again as one whole-file zstd -3 stream (what the
    /// journal would take without its per-batch block flushes).
    recompressed: u64,
}

fn store_bytes(dir: &Path) -> StoreBytes {
    let mut sb = StoreBytes {
        segments: 0,
        all: 0,
        count: 0,
        decoded: 0,
        recompressed: 0,
    };
    let mut records = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let meta = e.metadata().expect("metadata");
            if meta.is_dir() {
                stack.push(e.path());
            } else {
                sb.all += meta.len();
                if e.file_name().to_string_lossy().ends_with(".acpj.zst") {
                    sb.segments += meta.len();
                    sb.count += 1;
                    let file = File::open(e.path()).expect("open segment");
                    records.extend(zstd::stream::decode_all(file).expect("decode segment"));
                }
            }
        }
    }
    sb.decoded = records.len() as u64;
    sb.recompressed = zstd::stream::encode_all(&records[..], 3)
        .expect("zstd")
        .len() as u64;
    sb
}

fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// CPU ticks (user + system) of every thread of `pid`: (tid, name, ticks).
fn thread_ticks(pid: u32) -> Vec<(u32, String, u64)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_string();
        // After the name: state (field 3) … utime (14), stime (15).
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let tid = task.file_name().to_string_lossy().parse().unwrap_or(0);
        out.push((tid, name, ticks(11) + ticks(12)));
    }
    out
}

/// What the poller saw last.
#[derive(Default)]
struct ProcSample {
    hwm_kib: AtomicU64,
    samples: AtomicU64,
    threads: std::sync::Mutex<Vec<(u32, String, u64)>>,
}

/// Polls VmHWM and per-thread CPU every ~10 ms until `stop`, keeping the last values read.
fn proc_poller(pid: u32, seen: Arc<ProcSample>, stop: Arc<AtomicBool>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            if let Some(kib) = vm_hwm_kib(pid) {
                seen.hwm_kib.store(kib, Ordering::Relaxed);
                seen.samples.fetch_add(1, Ordering::Relaxed);
            }
            let threads = thread_ticks(pid);
            if !threads.is_empty() {
                let mut last = seen.threads.lock().expect("lock");
                for t in threads {
                    match last.iter_mut().find(|l| l.0 == t.0) {
                        Some(l) => *l = t,
                        None => last.push(t),
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    })
}

fn flood_run(kind: PathKind, n: usize, journal: Option<&Path>) -> FloodRun {
    eprintln!("bench: flood {} × {n}", kind.name());
    let agent = vec![me(), "__flood".into(), n.to_string(), SEED.to_string()];
    let session = Flood::new(SEED).session;
    let mut child = kind
        .command(&agent, journal)
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {}: {e}", kind.name()));
    let mut stdin = child.stdin.take().expect("piped");
    let mut stdout = child.stdout.take().expect("piped");

    let pid = child.id();
    let poll = (kind != PathKind::Direct).then(|| {
        let seen = Arc::new(ProcSample::default());
        let stop = Arc::new(AtomicBool::new(false));
        let handle = proc_poller(pid, seen.clone(), stop.clone());
        (seen, stop, handle)
    });

    let mut buf = vec![0u8; 1 << 20];
    // Handshake: the agent answers `initialize` once its lines are generated.
    stdin.write_all(INIT_REQUEST.as_bytes()).expect("write");
    let mut got = Vec::new();
    while !got.contains(&b'\n') {
        let k = stdout.read(&mut buf).expect("read");
        assert!(k > 0, "{}: EOF before the initialize response", kind.name());
        got.extend_from_slice(&buf[..k]);
    }
    // The proxy may add to the agent's capabilities; only the id and a result are required.
    assert!(
        got.ends_with(b"\n")
            && memchr::memmem::find(&got, br#""id":0"#).is_some()
            && memchr::memmem::find(&got, br#""result""#).is_some(),
        "{}: unexpected initialize response: {}",
        kind.name(),
        String::from_utf8_lossy(&got)
    );

    let mut lines = 0usize;
    let mut bytes = 0u64;
    let mut hwm_progress = Vec::new();
    let mut next_mark = 1;
    let ticks0 = thread_ticks(pid);
    let t0 = Instant::now();
    stdin
        .write_all(prompt_request(&session).as_bytes())
        .expect("write");
    while lines < n {
        let k = stdout.read(&mut buf).expect("read");
        assert!(k > 0, "{}: EOF after {lines} of {n} lines", kind.name());
        lines += memchr::memchr_iter(b'\n', &buf[..k]).count();
        bytes += k as u64;
        if let Some((seen, _, _)) = &poll {
            while next_mark <= 10 && lines * 10 >= n * next_mark {
                hwm_progress.push(seen.hwm_kib.load(Ordering::Relaxed));
                next_mark += 1;
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(lines, n, "{}: line count", kind.name());
    drop(stdin);
    let mut rest = Vec::new();
    let _ = stdout.read_to_end(&mut rest);
    assert!(rest.is_empty(), "{}: bytes after the flood", kind.name());
    let status = child.wait().expect("wait");
    assert!(status.success(), "{} exited with {status}", kind.name());
    let expected = Flood::new(SEED).lines(n).len() as u64;
    assert!(
        bytes == expected || !kind.transparent(),
        "{}: bytes received ({bytes}) differ from the bytes the agent wrote ({expected})",
        kind.name()
    );
    let (peak_kib, rss_samples, cpu) = match poll {
        Some((seen, stop, handle)) => {
            stop.store(true, Ordering::Relaxed);
            handle.join().expect("poller");
            // SAFETY: sysconf has no preconditions.
            let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
            let last = seen.threads.lock().expect("lock");
            let cpu = last
                .iter()
                .map(|(tid, name, ticks)| {
                    let before = ticks0.iter().find(|t| t.0 == *tid).map_or(0, |t| t.2);
                    (name.clone(), ticks.saturating_sub(before) as f64 / hz)
                })
                .collect();
            (
                Some(seen.hwm_kib.load(Ordering::Relaxed)),
                seen.samples.load(Ordering::Relaxed),
                cpu,
            )
        }
        None => (None, 0, Vec::new()),
    };
    let run = FloodRun {
        kind,
        messages: n,
        bytes,
        secs,
        peak_kib,
        hwm_progress,
        rss_samples,
        cpu,
    };
    eprintln!(
        "bench:   {:.3} s, {:.1} MB/s, {:.0} msg/s{}",
        run.secs,
        run.mb_s(),
        run.msg_s(),
        peak_kib.map_or(String::new(), |k| format!(", peak RSS {k} KiB"))
    );
    run
}

// --- 3. journal size ---------------------------------------------------------------------------

struct Sizes {
    messages: usize,
    raw: u64,
    /// Checked against what the runs received.
    journal: u64,
    journal_all_files: u64,
    journal_segments: usize,
    journal_decoded: u64,
    journal_recompressed: u64,
    gzip6: u64,
    gzip6_secs: f64,
    zstd3: u64,
    zstd3_secs: f64,
    /// zstd -19 on the first `prefix_lines` lines, with raw and gzip -6 of the same prefix.
    prefix_lines: usize,
    prefix_raw: u64,
    prefix_gzip6: u64,
    prefix_zstd19: u64,
    zstd19_secs: f64,
    mean_line: f64,
    /// Bytes of the mix, per kind of update (name, count, bytes).
    mix: Vec<(String, usize, u64)>,
}

fn run_sizes(scale: &Scale, journal: &StoreBytes) -> Sizes {
    let n = scale.flood_journal;
    eprintln!("bench: compressing {n} raw lines (gzip -6, zstd -3, zstd -19 on a prefix)");
    let raw = Flood::new(SEED).lines(n);
    let gzip = |data: &[u8]| -> (u64, f64) {
        let t = Instant::now();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
        enc.write_all(data).expect("gzip");
        let len = enc.finish().expect("gzip").len() as u64;
        (len, t.elapsed().as_secs_f64())
    };
    let zstd = |data: &[u8], level: i32| -> (u64, f64) {
        let t = Instant::now();
        let len = zstd::stream::encode_all(data, level).expect("zstd").len() as u64;
        (len, t.elapsed().as_secs_f64())
    };
    let (gzip6, gzip6_secs) = gzip(&raw);
    eprintln!("bench:   gzip -6: {gzip6} B in {gzip6_secs:.1} s");
    let (zstd3, zstd3_secs) = zstd(&raw, 3);
    let prefix_lines = scale.zstd19_lines.min(n);
    let prefix_end = memchr::memchr_iter(b'\n', &raw)
        .nth(prefix_lines - 1)
        .map_or(raw.len(), |i| i + 1);
    let prefix = &raw[..prefix_end];
    let (prefix_gzip6, _) = gzip(prefix);
    let (prefix_zstd19, zstd19_secs) = zstd(prefix, 19);
    eprintln!("bench:   zstd -19 on {prefix_lines} lines: {prefix_zstd19} B in {zstd19_secs:.1} s");

    // The mix, for the report.
    let mut mix: Vec<(String, usize, u64)> = Vec::new();
    for line in raw.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let kind = match memchr::memmem::find(line, b"\"sessionUpdate\":\"") {
            Some(i) => {
                let rest = &line[i + 17..];
                let end = memchr::memchr(b'"', rest).unwrap_or(0);
                let mut k = String::from_utf8_lossy(&rest[..end]).into_owned();
                if k == "tool_call_update"
                    && memchr::memmem::find(line, b"\"type\":\"diff\"").is_some()
                {
                    k.push_str(" (diff)");
                } else if k == "tool_call_update"
                    && memchr::memmem::find(line, b"\"content\":[").is_some()
                {
                    k.push_str(" (text)");
                }
                k
            }
            None => "response".into(),
        };
        match mix.iter_mut().find(|m| m.0 == kind) {
            Some(m) => {
                m.1 += 1;
                m.2 += line.len() as u64 + 1;
            }
            None => mix.push((kind, 1, line.len() as u64 + 1)),
        }
    }
    mix.sort_by_key(|m| std::cmp::Reverse(m.1));

    Sizes {
        messages: n,
        raw: raw.len() as u64,
        journal: journal.segments,
        journal_all_files: journal.all,
        journal_segments: journal.count,
        journal_decoded: journal.decoded,
        journal_recompressed: journal.recompressed,
        gzip6,
        gzip6_secs,
        zstd3,
        zstd3_secs,
        prefix_lines,
        prefix_raw: prefix.len() as u64,
        prefix_gzip6,
        prefix_zstd19,
        zstd19_secs,
        mean_line: raw.len() as f64 / n as f64,
        mix,
    }
}

// --- report ------------------------------------------------------------------------------------

fn machine() -> String {
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            let l = s.lines().find(|l| l.starts_with("MemTotal:"))?.to_string();
            let kib: u64 = l.split_whitespace().nth(1)?.parse().ok()?;
            Some(format!("{:.0} GiB", kib as f64 / (1u64 << 20) as f64))
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    format!("nproc {nproc}, {cpu}, {mem} RAM, Linux {kernel}")
}

fn pass(ok: bool) -> &'static str {
    if ok { "**pass**" } else { "**MISS**" }
}

fn render(
    scale: &Scale,
    load: &Load,
    lat: &[Latency; 2],
    tp: &Throughput,
    sz: &Sizes,
    elapsed: Duration,
) -> String {
    let mut r = String::new();
    let _ = writeln!(r, "# acp-journal proxy benchmark\n");
    let _ = writeln!(r, "- Machine: {}", machine());
    let _ = writeln!(
        r,
        "- Proxy: `{}` (release), options: {}; journal store on {}",
        Path::new(PROXY)
            .file_name()
            .map_or("".into(), |f| f.to_string_lossy()),
        match extra_proxy_args() {
            a if a.is_empty() => "defaults (`--fsync interval`, redaction on)".to_string(),
            a => format!("`{}` (from BENCH_PROXY_ARGS)", a.join(" ")),
        },
        tempfile_fs()
    );
    let _ = writeln!(
        r,
        "- Scale: {}; bench wall time {:.0} s",
        if scale.quick {
            "BENCH_QUICK (≈1/10)"
        } else {
            "full"
        },
        elapsed.as_secs_f64(),
    );
    let _ = writeln!(r, "- Other load: {}", load.report(elapsed));
    let _ = writeln!(
        r,
        "- Paths: (a) direct pipe to the agent; (b) minimal relay (two threads copying 64 KiB buffers, no parsing, no journal); (c) `acp-journal --journal-dir <tmp> -- <agent>`. The agents are this bench binary re-executed (`__echo`, `__flood`).\n"
    );

    // 1. latency
    let _ = writeln!(r, "## 1. Latency (echo agent)\n");
    let _ = writeln!(
        r,
        "{} round trips of a {}-byte `session/update` line per path, one at a time, after {} warm-up round trips; the three paths are interleaved in blocks of {}. Added latency per hop = (RTT(path) − RTT(direct)) / 2, since each round trip crosses the proxy twice. Measured twice: unpinned (the scheduler spreads the processes over the CPUs, so hand-offs between threads may wake an idle vCPU), and with every process pinned to CPU 0 (no cross-CPU wake-ups: the software cost alone).\n",
        scale.latency_msgs,
        lat[0].msg_bytes,
        scale.latency_warmup,
        (scale.latency_msgs / 20).max(1)
    );
    let _ = writeln!(
        r,
        "| CPUs | path | RTT p50 (µs) | RTT p99 (µs) | added/hop p50 (µs) | added/hop p99 (µs) |"
    );
    let _ = writeln!(r, "|---|---|---:|---:|---:|---:|");
    for l in lat {
        for (i, kind) in l.kinds.iter().enumerate() {
            let (a50, a99) = if i == 0 {
                ("—".to_string(), "—".to_string())
            } else {
                (
                    format!("{:.1}", l.added(i, 0.5)),
                    format!("{:.1}", l.added(i, 0.99)),
                )
            };
            let _ = writeln!(
                r,
                "| {} | {} | {:.1} | {:.1} | {a50} | {a99} |",
                l.label(),
                kind.name(),
                us(l.rtt(i, 0.5)),
                us(l.rtt(i, 0.99))
            );
        }
    }
    let show =
        |x: Option<f64>| x.map_or("n/a (relay adds < 0.5 µs)".into(), |x| format!("{x:.2}×"));
    let _ = writeln!(r);
    for l in lat {
        let _ = writeln!(
            r,
            "Ratio added(acp-journal) / added(relay), {}: **{}** at p50, **{}** at p99.",
            l.label(),
            show(l.ratio(0.5)),
            show(l.ratio(0.99))
        );
    }
    let _ = writeln!(r);

    // 2. throughput
    let _ = writeln!(r, "## 2. Throughput (flood agent)\n");
    let _ = writeln!(
        r,
        "The flood agent pre-generates its messages, answers `initialize` (untimed), then on `session/prompt` writes N lines (N−1 `session/update`s + the prompt response) and exits. Time = from writing the prompt line to reading the N-th line. MB = 10⁶ bytes. Direct and relay: median of 3 runs.\n"
    );
    let _ = writeln!(r, "| path | messages | MB | seconds | MB/s | messages/s |");
    let _ = writeln!(r, "|---|---:|---:|---:|---:|---:|");
    for run in tp
        .baselines
        .iter()
        .chain([&tp.journal_small, &tp.journal_big])
    {
        let _ = writeln!(
            r,
            "| {} | {} | {:.1} | {:.3} | {:.1} | {:.0} |",
            run.kind.name(),
            run.messages,
            run.bytes as f64 / 1e6,
            run.secs,
            run.mb_s(),
            run.msg_s()
        );
    }
    let _ = writeln!(
        r,
        "\nCPU time (user + system, from /proc/<pid>/task/*/stat, 10 ms ticks, so runs shorter than 0.2 s are left out) of the relaying process between the start line and its exit:\n"
    );
    let _ = writeln!(
        r,
        "| path | messages | wall s | thread | CPU s | % of wall | CPU µs/message |"
    );
    let _ = writeln!(r, "|---|---:|---:|---|---:|---:|---:|");
    for run in tp
        .baselines
        .iter()
        .chain([&tp.journal_small, &tp.journal_big])
        .filter(|run| !run.cpu.is_empty() && run.secs >= 0.2)
    {
        let mut threads = run.cpu.clone();
        threads.retain(|t| t.1 > 0.0);
        let total: f64 = run.cpu.iter().map(|t| t.1).sum();
        threads.push(("**all threads**".into(), total));
        for (name, secs) in threads {
            let _ = writeln!(
                r,
                "| {} | {} | {:.3} | {name} | {secs:.2} | {:.0} % | {:.2} |",
                run.kind.name(),
                run.messages,
                run.secs,
                secs * 100.0 / run.secs,
                secs * 1e6 / run.messages as f64
            );
        }
    }
    let _ = writeln!(
        r,
        "\nMessage mix ({} messages, mean line {:.0} B):\n",
        sz.messages, sz.mean_line
    );
    let _ = writeln!(r, "| kind | share | mean bytes |");
    let _ = writeln!(r, "|---|---:|---:|");
    for (kind, count, bytes) in &sz.mix {
        let _ = writeln!(
            r,
            "| {kind} | {:.2} % | {:.0} |",
            *count as f64 * 100.0 / sz.messages as f64,
            *bytes as f64 / *count as f64
        );
    }

    // 3. journal size
    let per = |b: u64, n: usize| b as f64 / n as f64;
    let _ = writeln!(r, "\n## 3. Journal size\n");
    let _ = writeln!(
        r,
        "Journal = the {} segment file(s) (`*.acpj.zst`) of the {}-message acp-journal run ({} B with the catalog). The journal stores more than the raw lines (a CRC-32C, seq, timestamps and side per record) and ends a zstd block at every batch it forwards; the two \"journal records\" rows separate those costs. zstd -19 takes {:.1} s on {} lines, so it is measured on the first {} lines ({:.1} MB; gzip -6 of that prefix is shown for comparison).\n",
        sz.journal_segments,
        sz.messages,
        sz.journal_all_files,
        sz.zstd19_secs,
        sz.prefix_lines,
        sz.prefix_lines,
        sz.prefix_raw as f64 / 1e6
    );
    let _ = writeln!(r, "| format | messages | bytes | bytes/message | raw/x |");
    let _ = writeln!(r, "|---|---:|---:|---:|---:|");
    let row = |r: &mut String, name: &str, n: usize, raw: u64, b: u64| {
        let _ = writeln!(
            r,
            "| {name} | {n} | {b} | {:.1} | {:.1} |",
            per(b, n),
            raw as f64 / b as f64
        );
    };
    row(&mut r, "raw NDJSON", sz.messages, sz.raw, sz.raw);
    row(
        &mut r,
        "**acp-journal journal**",
        sz.messages,
        sz.raw,
        sz.journal,
    );
    row(
        &mut r,
        "journal records, decompressed",
        sz.messages,
        sz.raw,
        sz.journal_decoded,
    );
    row(
        &mut r,
        "journal records, recompressed whole-file zstd -3",
        sz.messages,
        sz.raw,
        sz.journal_recompressed,
    );
    row(
        &mut r,
        &format!("gzip -6 whole file ({:.1} s)", sz.gzip6_secs),
        sz.messages,
        sz.raw,
        sz.gzip6,
    );
    row(
        &mut r,
        &format!("zstd -3 whole file ({:.1} s)", sz.zstd3_secs),
        sz.messages,
        sz.raw,
        sz.zstd3,
    );
    row(
        &mut r,
        "gzip -6, prefix",
        sz.prefix_lines,
        sz.prefix_raw,
        sz.prefix_gzip6,
    );
    row(
        &mut r,
        "zstd -19, prefix",
        sz.prefix_lines,
        sz.prefix_raw,
        sz.prefix_zstd19,
    );

    // 4. RSS
    let _ = writeln!(r, "\n## 4. Peak RSS of the acp-journal process\n");
    let _ = writeln!(
        r,
        "VmHWM from /proc/<pid>/status, polled every ~10 ms during the flood runs; the last value read before exit.\n"
    );
    let _ = writeln!(
        r,
        "| messages | peak RSS (MiB) | samples | VmHWM at 10 %, 20 %, … 100 % of the lines (MiB) |"
    );
    let _ = writeln!(r, "|---:|---:|---:|---|");
    for run in [&tp.journal_small, &tp.journal_big] {
        let prog: Vec<String> = run
            .hwm_progress
            .iter()
            .map(|k| format!("{:.1}", *k as f64 / 1024.0))
            .collect();
        let _ = writeln!(
            r,
            "| {} | {:.1} | {} | {} |",
            run.messages,
            run.peak_kib.unwrap_or(0) as f64 / 1024.0,
            run.rss_samples,
            prog.join(", ")
        );
    }

    if let Some(c) = &tp.conductor {
        peers::render(&mut r, lat, &tp.baselines[1], &tp.journal_small, c);
    }

    // targets
    let small = tp.journal_small.peak_kib.unwrap_or(0) as f64;
    let big = tp.journal_big.peak_kib.unwrap_or(0) as f64;
    let rss_flat = big <= small * 1.25 + 1024.0;
    let journal_ratio = sz.raw as f64 / sz.journal as f64;
    let _ = writeln!(r, "\n## Targets\n");
    let _ = writeln!(r, "| target | measured | |");
    let _ = writeln!(r, "|---|---|---|");
    for l in lat {
        for (q, name) in [(0.5, "p50"), (0.99, "p99")] {
            let x = l.ratio(q);
            let _ = writeln!(
                r,
                "| added latency ≤ 1.5× the minimal relay's ({name}, {}) | {} | {} |",
                l.label(),
                show(x),
                pass(x.is_some_and(|x| x <= 1.5))
            );
        }
        let a50 = l.added(2, 0.5);
        let _ = writeln!(
            r,
            "| added latency per hop p50 < 50 µs ({}) | {a50:.1} µs | {} |",
            l.label(),
            pass(a50 < 50.0)
        );
    }
    let _ = writeln!(
        r,
        "| throughput with journaling ≥ 100 MB/s | {:.1} MB/s ({} messages) | {} |",
        tp.journal_big.mb_s(),
        tp.journal_big.messages,
        pass(tp.journal_big.mb_s() >= 100.0)
    );
    let _ = writeln!(
        r,
        "| journal ≤ 1/7 of raw NDJSON | 1/{journal_ratio:.1} | {} |",
        pass(journal_ratio >= 7.0)
    );
    let _ = writeln!(
        r,
        "| RSS flat (peak at {} ≤ 1.25× peak at {} + 1 MiB) | {:.1} MiB vs {:.1} MiB | {} |",
        tp.journal_big.messages,
        tp.journal_small.messages,
        big / 1024.0,
        small / 1024.0,
        pass(rss_flat && big > 0.0)
    );
    r
}

/// The file system type of the temp dir, for the report.
fn tempfile_fs() -> String {
    let tmp = std::env::temp_dir();
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let mut best: Option<(usize, String)> = None;
    for line in mounts.lines() {
        let mut f = line.split_whitespace();
        let (Some(_), Some(mnt), Some(fs)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if tmp.starts_with(mnt) && best.as_ref().is_none_or(|(len, _)| mnt.len() > *len) {
            best = Some((mnt.len(), fs.to_string()));
        }
    }
    format!(
        "{} ({})",
        tmp.display(),
        best.map_or("unknown fs".into(), |b| b.1)
    )
}
