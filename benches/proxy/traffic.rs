//! The ACP traffic, generated deterministically: the handshake and prompt messages, the flood
//! agent's realistic mix of `session/update`s ([`Flood`]), and the latency test's small messages.

use std::fmt::Write as _;

/// The seed of the flood agents' traffic: every run and every path relays the same messages.
pub const SEED: u64 = 0xACB_2026;

pub const INIT_REQUEST: &str = concat!(
    r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"#,
    r#""clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true},"#,
    r#""clientInfo":{"name":"acp-journal-bench","version":"0"}}}"#,
    "\n"
);
/// The agents' answer to `initialize` request `id` (JSON text).
pub fn init_response(id: &str) -> String {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"protocolVersion\":1,\"agentCapabilities\":{{\"loadSession\":true,\"promptCapabilities\":{{\"image\":false,\"audio\":false,\"embeddedContext\":true}}}},\"authMethods\":[]}}}}\n"
    )
}
pub const PROMPT_RESPONSE: &str =
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"stopReason\":\"end_turn\"}}\n";

pub fn prompt_request(session: &str) -> String {
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
pub struct Flood {
    rng: Rng,
    pub session: String,
    calls: u64,
    call: String,
    used: u64,
}

impl Flood {
    pub fn new(seed: u64) -> Flood {
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
    pub fn lines(&mut self, n: usize) -> Vec<u8> {
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
pub fn latency_messages(count: usize) -> Vec<Vec<u8>> {
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
