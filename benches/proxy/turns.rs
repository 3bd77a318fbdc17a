//! Prompt turns, one at a time: what an editor's conversation costs, as opposed to a flood. The
//! `__turns` agent answers `initialize` and `session/new`, and each `session/prompt` with an
//! `agent_message_chunk`, a `usage_update` and the prompt's response. Each path (direct pipe,
//! minimal relay, acp-journal, and with `BENCH_PROXY_BASE=<binary>` another build of
//! acp-journal) plays the same turns, interleaved in blocks; measured: turns per second, CPU per
//! turn of the path's process, and the bytes its store holds afterwards per turn (segments and
//! catalog: everything a turn costs on disk).

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout};
use std::time::{Duration, Instant};

use crate::measure::files_under;
use crate::procfs::process_ticks;
use crate::roles::{PathKind, raw_fd, request_id};
use crate::traffic::{INIT_REQUEST, init_response};

/// The `__turns` agent (see the module documentation).
pub fn turns_agent() {
    let mut input = BufReader::new(raw_fd(0).try_clone().expect("stdin"));
    let mut out = raw_fd(1);
    let mut line = Vec::new();
    let mut used = 0u64;
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line).unwrap_or(0) == 0 {
            return;
        }
        let answer = if let Some(id) = request_id(&line, "initialize") {
            init_response(&id)
        } else if let Some(id) = request_id(&line, "session/new") {
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"sessionId\":\"turns-1\"}}}}\n"
            )
        } else if let Some(id) = request_id(&line, "session/prompt") {
            used += 1200;
            format!(
                concat!(
                    r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"turns-1","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"Done: the splitter keeps the terminator and the tests pass."}}}}}}}}"#,
                    "\n",
                    r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"turns-1","update":{{"sessionUpdate":"usage_update","used":{used},"size":200000,"cost":{{"amount":0.0123,"currency":"USD"}}}}}}}}"#,
                    "\n",
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"stopReason":"end_turn"}}}}"#,
                    "\n"
                ),
                used = used,
                id = id
            )
        } else {
            continue;
        };
        if out.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// One path in front of the turns agent, with a session started.
struct TurnsPath {
    kind: PathKind,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    store: Option<tempfile::TempDir>,
    next_id: u64,
    elapsed: Duration,
    turns: u64,
    /// CPU ticks of the path's process before the timed turns.
    ticks_before: u64,
}

impl TurnsPath {
    fn start(kind: PathKind) -> TurnsPath {
        let (mut child, store) = kind.start("__turns");
        let mut path = TurnsPath {
            kind,
            stdin: child.stdin.take().expect("piped"),
            stdout: BufReader::new(child.stdout.take().expect("piped")),
            child,
            store,
            next_id: 1,
            elapsed: Duration::ZERO,
            turns: 0,
            ticks_before: 0,
        };
        path.request(INIT_REQUEST.as_bytes(), "0");
        path.request(
            br#"{"jsonrpc":"2.0","id":"new","method":"session/new","params":{"cwd":"/tmp/bench","mcpServers":[]}}
"#,
            r#""new""#,
        );
        path
    }

    /// Send `line` and read until the response with id `id` (JSON text).
    fn request(&mut self, line: &[u8], id: &str) {
        self.stdin.write_all(line).expect("write to the path");
        let needle = format!("\"id\":{id},\"result\"");
        let mut got = Vec::new();
        loop {
            got.clear();
            let n = self.stdout.read_until(b'\n', &mut got).expect("read");
            assert!(n > 0, "{}: EOF before the answer to {id}", self.kind.name());
            if memchr::memmem::find(&got, needle.as_bytes()).is_some() {
                return;
            }
        }
    }

    fn turn(&mut self) {
        let id = self.next_id;
        self.next_id += 1;
        let prompt = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"session/prompt\",\"params\":{{\"sessionId\":\"turns-1\",\"prompt\":[{{\"type\":\"text\",\"text\":\"Refactor the line splitter, then run the tests.\"}}]}}}}\n"
        );
        self.request(prompt.as_bytes(), &id.to_string());
    }

    fn finish(mut self) -> TurnsFigures {
        let ticks = process_ticks(self.child.id()).saturating_sub(self.ticks_before);
        drop(self.stdin);
        let mut rest = Vec::new();
        let _ = self.stdout.read_to_end(&mut rest);
        let status = self.child.wait().expect("wait");
        assert!(
            status.success(),
            "{} exited with {status}",
            self.kind.name()
        );
        let all_turns = self.next_id - 1;
        TurnsFigures {
            kind: self.kind,
            turns_per_s: self.turns as f64 / self.elapsed.as_secs_f64(),
            cpu_us_per_turn: ticks as f64 * 10_000.0 / self.turns as f64,
            store_bytes_per_turn: self
                .store
                .as_ref()
                .map(|d| dir_bytes(d.path()) as f64 / all_turns as f64),
        }
    }
}

/// One path's figures.
pub struct TurnsFigures {
    kind: PathKind,
    turns_per_s: f64,
    /// From 10 ms ticks: meaningful over runs of a second or more.
    cpu_us_per_turn: f64,
    /// Bytes of every file in the store (segments and catalog) over every turn played.
    store_bytes_per_turn: Option<f64>,
}

/// The figures of every path, in [`paths`] order.
pub struct Turns {
    turns: usize,
    figures: Vec<TurnsFigures>,
}

/// The paths measured: direct, relay, acp-journal, and the base build when one is given.
fn paths() -> Vec<PathKind> {
    let mut paths = vec![PathKind::Direct, PathKind::Relay, PathKind::Journal];
    if crate::roles::base_proxy().is_some() {
        paths.push(PathKind::JournalBase);
    }
    paths
}

pub fn run_turns(turns: usize) -> Turns {
    let kinds = paths();
    let mut paths: Vec<TurnsPath> = kinds.iter().map(|&k| TurnsPath::start(k)).collect();
    for p in &mut paths {
        eprintln!("bench: turns warm-up: {}", p.kind.name());
        for _ in 0..(turns / 20).max(10) {
            p.turn();
        }
        p.ticks_before = process_ticks(p.child.id());
    }
    let block = (turns / 20).max(1);
    let mut done = 0;
    let mut round = 0;
    while done < turns {
        let n = block.min(turns - done);
        for j in 0..paths.len() {
            let p = &mut paths[(round + j) % kinds.len()];
            let t = Instant::now();
            for _ in 0..n {
                p.turn();
            }
            p.elapsed += t.elapsed();
            p.turns += n as u64;
        }
        done += n;
        round += 1;
    }
    let figures: Vec<TurnsFigures> = paths.into_iter().map(TurnsPath::finish).collect();
    for f in &figures {
        eprintln!(
            "bench: turns {}: {:.0} turns/s, {:.1} CPU µs/turn",
            f.kind.name(),
            f.turns_per_s,
            f.cpu_us_per_turn
        );
    }
    Turns { turns, figures }
}

/// Bytes of every file under `dir`.
fn dir_bytes(dir: &std::path::Path) -> u64 {
    files_under(dir).iter().map(|(_, len)| len).sum()
}

/// The report's section.
pub fn render(r: &mut String, t: &Turns) {
    let _ = writeln!(r, "\n## 6. Prompt turns (turns agent)\n");
    let _ = writeln!(
        r,
        "{} prompt turns per path, one at a time (prompt → `agent_message_chunk`, `usage_update`, response), interleaved in blocks of {}, after a warm-up; store bytes are every file the run left (segments and catalog) over every turn played.\n",
        t.turns,
        (t.turns / 20).max(1)
    );
    let _ = writeln!(r, "| path | turns/s | CPU µs/turn | store bytes/turn |");
    let _ = writeln!(r, "|---|---:|---:|---:|");
    for f in &t.figures {
        let _ = writeln!(
            r,
            "| {} | {:.0} | {:.1} | {} |",
            f.kind.name(),
            f.turns_per_s,
            f.cpu_us_per_turn,
            f.store_bytes_per_turn
                .map_or("—".into(), |b| format!("{b:.1}"))
        );
    }
    let get = |k: PathKind| t.figures.iter().find(|f| f.kind == k);
    if let (Some(head), Some(base)) = (get(PathKind::Journal), get(PathKind::JournalBase)) {
        let _ = writeln!(
            r,
            "\nacp-journal / the base build: {:.2}× turns/s, {:.2}× CPU per turn, {:.2}× store bytes per turn.",
            head.turns_per_s / base.turns_per_s,
            head.cpu_us_per_turn / base.cpu_us_per_turn,
            head.store_bytes_per_turn.unwrap_or(0.0) / base.store_bytes_per_turn.unwrap_or(1.0)
        );
    }
}
