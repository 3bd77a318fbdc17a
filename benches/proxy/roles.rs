//! The processes on the wire. This binary re-executes itself as the helper roles (the echo and
//! flood agents, the minimal relay; see the crate documentation), and [`PathKind`] names the paths
//! measured in front of them: direct pipe, minimal relay, acp-journal, the ACP conductor
//! ([`crate::peers`]).

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::mem::ManuallyDrop;
use std::net::{TcpListener, TcpStream};
use std::os::fd::FromRawFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::peers;
use crate::traffic::{Flood, PROMPT_RESPONSE, init_response};

/// The proxy under test.
pub const PROXY: &str = env!("CARGO_BIN_EXE_acp-journal");

/// An unbuffered handle on one of our standard file descriptors (never closed by us).
pub fn raw_fd(fd: i32) -> ManuallyDrop<File> {
    // SAFETY: fds 0 and 1 are open for the life of the process, and `ManuallyDrop` keeps the
    // `File` from closing them.
    ManuallyDrop::new(unsafe { File::from_raw_fd(fd) })
}

/// Echo agent: answers `initialize`, and writes every other line it reads back with one
/// `write(2)`.
pub fn echo_agent() {
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
pub fn request_id(line: &[u8], method: &str) -> Option<String> {
    let needle = format!("\"method\":\"{method}\"");
    memchr::memmem::find(line, needle.as_bytes())?;
    let msg: serde_json::Value = serde_json::from_slice(line).ok()?;
    Some(msg.get("id")?.to_string())
}

/// Flood agent: see the crate documentation.
pub fn flood_agent(n: usize, seed: u64) {
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
    match Writes::from_env() {
        Writes::Line => {
            for line in updates.split_inclusive(|&b| b == b'\n') {
                if out.write_all(line).is_err() {
                    return;
                }
            }
        }
        Writes::Bulk => {
            let _ = out.write_all(updates);
        }
    }
    let _ = out.write_all(
        PROMPT_RESPONSE
            .replacen("\"id\":1", &format!("\"id\":{id}"), 1)
            .as_bytes(),
    );
}

/// How the flood agent writes its messages, from `BENCH_FLOOD_WRITES` in its environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writes {
    /// All of them with one `write_all` (pipe-sized `write(2)`s): the most a proxy can be fed.
    Bulk,
    /// One `write(2)` per message, as agents write (`BENCH_FLOOD_WRITES=line`).
    Line,
}

impl Writes {
    pub const ENV: &str = "BENCH_FLOOD_WRITES";

    pub fn name(self) -> &'static str {
        match self {
            Writes::Bulk => "bulk",
            Writes::Line => "line",
        }
    }

    fn from_env() -> Writes {
        match std::env::var_os(Writes::ENV) {
            Some(w) if w == "line" => Writes::Line,
            _ => Writes::Bulk,
        }
    }
}

/// Minimal relay: copy stdin → child stdin and child stdout → stdout, big buffers, no parsing.
pub fn relay(cmd: &[String]) -> ! {
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathKind {
    Direct,
    Relay,
    Journal,
    /// acp-journal exporting spans live (`--otlp`) to [`otlp_sink`].
    JournalOtlp,
    /// The official Rust ACP conductor with its trace on (see `peers.rs`).
    Conductor,
    /// Another build of acp-journal (`BENCH_PROXY_BASE`), for before/after figures in one run
    /// (prompt turns, and CPU per message in [`crate::cpu`]).
    JournalBase,
}

/// The other build of acp-journal `BENCH_PROXY_BASE` names, if any.
pub fn base_proxy() -> Option<String> {
    std::env::var("BENCH_PROXY_BASE")
        .ok()
        .filter(|p| !p.is_empty())
}

const PATHS: [PathKind; 4] = [
    PathKind::Direct,
    PathKind::Relay,
    PathKind::Journal,
    PathKind::JournalOtlp,
];

/// The paths measured: [`PATHS`], then the conductor when it is installed.
pub fn paths() -> Vec<PathKind> {
    let mut all = PATHS.to_vec();
    if peers::conductor().is_some() {
        all.push(PathKind::Conductor);
    }
    all
}

impl PathKind {
    pub fn name(self) -> &'static str {
        match self {
            PathKind::Direct => "direct pipe",
            PathKind::Relay => "minimal relay",
            PathKind::Journal => "acp-journal",
            PathKind::JournalOtlp => "acp-journal --otlp",
            PathKind::Conductor => "ACP conductor --trace",
            PathKind::JournalBase => "acp-journal (base build)",
        }
    }

    /// True when the path keeps a store (a journal, or the conductor's trace).
    pub fn journals(self) -> bool {
        !matches!(self, PathKind::Direct | PathKind::Relay)
    }

    /// True when the path relays every byte unchanged (the conductor re-encodes messages and
    /// renumbers requests).
    pub fn transparent(self) -> bool {
        self != PathKind::Conductor
    }

    /// Start this path in front of this bench binary's helper agent `role`, with a fresh store
    /// when the path keeps one.
    pub fn start(self, role: &str) -> (std::process::Child, Option<tempfile::TempDir>) {
        let store = self
            .journals()
            .then(|| tempfile::tempdir().expect("tempdir"));
        let agent = vec![me(), role.to_string()];
        let child = self
            .command(&agent, store.as_ref().map(|d| d.path()))
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {}: {e}", self.name()));
        (child, store)
    }

    /// The command line of this path in front of `agent` (`journal` is the store for
    /// acp-journal, the directory of the trace file for the conductor).
    pub fn command(self, agent: &[String], journal: Option<&Path>) -> Command {
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
            PathKind::Journal | PathKind::JournalOtlp | PathKind::JournalBase => {
                let binary = match self {
                    PathKind::JournalBase => base_proxy().expect("BENCH_PROXY_BASE"),
                    _ => PROXY.to_string(),
                };
                let mut c = Command::new(binary);
                if std::env::var_os("ACP_JOURNAL_LOG").is_none() {
                    c.env("ACP_JOURNAL_LOG", "warn");
                }
                c.arg("--journal-dir")
                    .arg(journal.expect("a journal dir"))
                    .args(extra_proxy_args());
                if self == PathKind::JournalOtlp {
                    c.arg("--otlp").arg(otlp_sink());
                }
                c.arg("--").args(agent);
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
pub fn extra_proxy_args() -> Vec<String> {
    std::env::var("BENCH_PROXY_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect()
}

pub fn me() -> String {
    std::env::current_exe()
        .expect("current_exe")
        .display()
        .to_string()
}

/// OTLP requests and body bytes the sink has taken.
pub static SINK_REQUESTS: AtomicU64 = AtomicU64::new(0);
pub static SINK_BYTES: AtomicU64 = AtomicU64::new(0);

/// The URL of an OTLP/HTTP sink in this process that reads every request and answers `200`
/// at once (started on first use): the backend of [`PathKind::JournalOtlp`].
pub fn otlp_sink() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the OTLP sink");
        let url = format!("http://{}", listener.local_addr().expect("local_addr"));
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                std::thread::spawn(move || sink_connection(conn));
            }
        });
        url
    })
}

fn sink_connection(conn: TcpStream) {
    let mut out = conn.try_clone().expect("clone the socket");
    let mut input = BufReader::new(conn);
    let mut line = String::new();
    loop {
        let mut length = 0usize;
        loop {
            line.clear();
            match input.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" {
                break;
            }
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; length];
        if input.read_exact(&mut body).is_err() {
            return;
        }
        SINK_REQUESTS.fetch_add(1, Ordering::Relaxed);
        SINK_BYTES.fetch_add(length as u64, Ordering::Relaxed);
        if out
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            .is_err()
        {
            return;
        }
    }
}
