//! Benchmark of journals in a shared object store (`--store`), against a real S3-compatible
//! server on loopback (s3s-fs, installed by `scripts/install-object-stores.sh`).
//!
//! Run with `cargo bench --bench fleet` (`BENCH_QUICK=1`: ~10× smaller; `BENCH_FLEET_ONLY=flood,team`:
//! those sections alone (turns, flood, load, list, fleet, team, cost, page); `BENCH_PROXY_STDERR=1`: the proxies' logs on stderr). The markdown report
//! goes to stdout and `target/bench-fleet.md`; progress to stderr. Measured, both sides in one
//! run:
//! 1. prompt turns through the stdio proxy with shipping off and on (every second, the
//!    default), interleaved: turns per second and the proxy's CPU per message;
//! 2. a flood (one prompt answered by N updates) off and on: CPU per message, and the ship lag
//!    (bytes seen on disk → in the store) p50/p99 the shipper reports; the bytes in the store
//!    against the local journal;
//! 3. loading that session (N updates) on another host, from the store, against loading it
//!    on its own host from the local disk;
//! 4. `list` over 10 000 sessions in the store (a cold and a warm local copy);
//! 5. a fleet of 4 hosts on this machine, 50 live sessions each, turns round-robin: turns per
//!    second, ship lag; then one host `kill -9`ed: what the store lacked of its journals, and
//!    how long until another host continues one of its sessions (its lease running out);
//! 6. the team index ([`team`]): 100 hosts × 10 sessions recorded through the proxy; `list`
//!    and `search` from an empty cache, from the index and as before it;
//! 7. what a new session and a turn cost the store, and the end of a run with 100 sessions
//!    open, on a store 30 ms away each way ([`cost`]; `BENCH_BASE_BIN`: another revision's
//!    binary measured in the same run).
//! 8. the team page over 10 000 sessions ([`page`]): the list's first rows, a search and the
//!    usage's first chart in headless chromium from a new profile and an empty cache, and warm,
//!    with the store requests each caused, beside `list` and `search` from an empty cache.
//!
//! The binary re-executes itself as the agent (`__agent`): it answers `initialize`,
//! `session/new` (a new ID each time), `session/load` (nothing to replay: the proxy serves
//! it), and each `session/prompt` with one chunk, a usage update and the response, or with
//! `BENCH_FLOOD` chunks when set.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "../page/browser.rs"]
mod browser;
mod cost;
mod page;
/// Garage, as the integration tests start it (`tests/it/stores.rs`).
#[path = "../../tests/it/stores.rs"]
#[allow(dead_code)]
mod stores;
mod team;

/// What `stores` asks of the integration tests' helpers.
mod util {
    /// The bench runs whatever the test tier.
    pub fn full_tier(_: &str) {}

    /// The binary under bench.
    pub fn bin() -> std::path::PathBuf {
        env!("CARGO_BIN_EXE_acp-journal").into()
    }
}

const KEY: &str = "benchkey";
const SECRET: &str = "benchsecret0123456789";

fn main() {
    if std::env::args().nth(1).as_deref() == Some("__agent") {
        agent();
        return;
    }
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(1800));
        eprintln!("bench: watchdog: no result after 30 minutes; aborting");
        std::process::exit(2);
    });
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let scale = |n: usize| if quick { n / 10 } else { n };
    let store = S3::start();
    let mut report = String::new();
    writeln!(report, "# acp-journal fleet benchmark\n").unwrap();
    writeln!(
        report,
        "s3s-fs 0.14.1 on loopback; acp-journal {}; {} CPUs.\n",
        env!("CARGO_PKG_VERSION"),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    )
    .unwrap();
    // BENCH_FLEET_ONLY=flood,team…: only those sections (turns, flood, load, list, fleet, team,
    // cost, page).
    let only = std::env::var("BENCH_FLEET_ONLY").ok();
    let runs = |section: &str| {
        only.as_ref()
            .is_none_or(|o| o.split(',').any(|s| s == section))
    };
    if runs("turns") {
        turns(&store, scale(20_000), &mut report);
    }
    if runs("flood") || runs("load") {
        let session = flood(&store, scale(100_000), &mut report);
        if runs("load") {
            load(&store, &session, &mut report);
        }
    }
    if runs("list") {
        list(&store, scale(10_000).max(1_000), &mut report);
    }
    if runs("fleet") {
        fleet(&store, 4, 50, scale(20_000), &mut report);
    }
    // 1 000 sessions, from 100 hosts (10 with BENCH_QUICK), in a store of their own: s3s-fs
    // answers every listing by walking the whole bucket, and a new session's lease take lists
    // its key's objects, so recording costs grow with the square of the bucket's objects
    // (10 000 sessions would take hours here; S3 lists by prefix).
    let (hosts, per_host) = if quick { (10, 100) } else { (100, 10) };
    if runs("team") {
        team::bench(&S3::start(), hosts, per_host, &mut report);
    }
    if runs("cost") {
        cost::bench(&S3::start(), scale(100).max(20), &mut report);
    }
    // 10 000 sessions (1 000 with BENCH_QUICK): 8 hosts × 25 days × 50 (4 × 5 × 50).
    let (hosts, days) = if quick { (4, 5) } else { (8, 25) };
    if runs("page") {
        let scale = page::Scale {
            hosts,
            days,
            per_run: 50,
        };
        page::bench(&S3::start(), &scale, &mut report);
    }
    print!("{report}");
    let _ = std::fs::write(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-fleet.md"),
        &report,
    );
}

/// The agent role (see the module documentation).
fn agent() {
    let flood: usize = std::env::var("BENCH_FLOOD")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    // Named (the team page's hosts): its name, and each prompt's answer tells its tokens.
    let named = std::env::args().nth(2);
    let stdin = std::io::stdin().lock();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut sessions = 0u64;
    let mut used = 0u64;
    for line in stdin.lines() {
        let Ok(line) = line else { return };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let id = msg["id"].clone();
        let reply = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
        let update = |session: &Value, update: Value| {
            json!({"jsonrpc": "2.0", "method": "session/update",
                   "params": {"sessionId": session, "update": update}})
        };
        let mut lines = Vec::new();
        match msg["method"].as_str() {
            Some("initialize") => lines.push(reply(json!({
                "protocolVersion": 1,
                "agentCapabilities": {"loadSession": false},
                "agentInfo": {"name": named.as_deref().unwrap_or("bench-agent"), "version": "1"}
            }))),
            Some("session/new") => {
                sessions += 1;
                let id = format!("bench-{}-{sessions}", std::process::id());
                lines.push(reply(json!({"sessionId": id})));
            }
            Some("session/prompt") => {
                let session = msg["params"]["sessionId"].clone();
                let text = "Done: the splitter keeps the terminator and the tests pass.";
                for n in 0..flood.max(1) {
                    lines.push(update(
                        &session,
                        json!({"sessionUpdate": "agent_message_chunk",
                               "content": {"type": "text", "text": format!("{text} {n}")}}),
                    ));
                }
                used += 1200;
                lines.push(update(
                    &session,
                    json!({"sessionUpdate": "usage_update", "used": used, "size": 200000}),
                ));
                lines.push(reply(match named {
                    Some(_) => json!({"stopReason": "end_turn",
                                      "usage": {"inputTokens": 1000 + used % 7000, "outputTokens": 200}}),
                    None => json!({"stopReason": "end_turn"}),
                }));
            }
            Some(_) if !id.is_null() => lines.push(reply(json!({}))),
            _ => continue,
        }
        for l in lines {
            if writeln!(out, "{l}").is_err() {
                return;
            }
        }
        if out.flush().is_err() {
            return;
        }
    }
}

/// s3s-fs on loopback with bucket `bench`.
struct S3 {
    child: Child,
    port: u16,
    root: tempfile::TempDir,
}

impl S3 {
    fn start() -> S3 {
        let home = std::env::var_os("STORES_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(std::env::var_os("HOME").expect("HOME"))
                    .join(".cache/acp-journal/object-stores")
            });
        let bin = home.join("s3s-fs-0.14.1/bin/s3s-fs");
        if !bin.exists() {
            let script =
                Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/install-object-stores.sh");
            let ok = Command::new(script).status().is_ok_and(|s| s.success());
            assert!(
                ok && bin.exists(),
                "s3s-fs is not installed: run scripts/install-object-stores.sh"
            );
        }
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("bench")).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(bin)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--access-key", KEY, "--secret-key", SECRET])
            .arg(root.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "s3s-fs did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        S3 { child, port, root }
    }

    fn env(&self) -> Vec<(String, String)> {
        vec![
            (
                "AWS_ENDPOINT_URL".into(),
                format!("http://127.0.0.1:{}", self.port),
            ),
            ("AWS_ACCESS_KEY_ID".into(), KEY.into()),
            ("AWS_SECRET_ACCESS_KEY".into(), SECRET.into()),
            ("AWS_REGION".into(), "us-east-1".into()),
            ("AWS_ALLOW_HTTP".into(), "true".into()),
            (
                "ACP_JOURNAL_LOG".into(),
                std::env::var("ACP_JOURNAL_LOG").unwrap_or_else(|_| "warn".into()),
            ),
        ]
    }

    /// Bytes of the objects under `prefix` (s3s-fs keeps one file per object).
    fn bytes(&self, prefix: &str) -> u64 {
        files_bytes(&self.root.path().join("bench").join(prefix))
    }
}

impl Drop for S3 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Bytes of every file under `dir`, but for segments' local `.mark`s.
fn files_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_none_or(|x| x != "mark") {
                // A segment's `.mark` (its lease epoch) stays beside it, never shipped.
                total += e.metadata().map_or(0, |m| m.len());
            }
        }
    }
    total
}

/// The run of the proxy that journals in `dir` (its connection segment's name).
fn run_of(dir: &Path) -> String {
    std::fs::read_dir(dir.join("connections"))
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .next()
        .unwrap()
        .trim_end_matches(".acpj.zst")
        .to_string()
}

/// Bytes in the store (under `prefix`) of the segments of run `run` (s3s-fs keeps one file per
/// object, under a directory per segment).
fn run_bytes(s3: &S3, prefix: &str, run: &str) -> u64 {
    let mut total = 0;
    let mut dirs = vec![s3.root.path().join("bench").join(prefix)];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() && name.starts_with(run) {
                total += files_bytes(&p);
            } else if p.is_dir() {
                dirs.push(p);
            }
        }
    }
    total
}

/// Bytes of the journal segments (and catalog) of a journal directory.
fn journal_bytes(dir: &Path) -> u64 {
    files_bytes(&dir.join("sessions"))
        + files_bytes(&dir.join("connections"))
        + std::fs::metadata(dir.join("catalog.ndjson")).map_or(0, |m| m.len())
}

/// How a proxy is started beyond its journal directory, store and options.
#[derive(Default)]
struct Launch {
    /// The command that runs it (`faketime -f -3d`: a host whose clock says three days ago).
    wrapper: Vec<String>,
    /// The agent's name (its `agentInfo`, and an argument of its command line, so that the
    /// journal's agent differs too), answering each prompt with its tokens; none: `bench-agent`.
    agent: Option<String>,
}

/// The process a wrapper (`faketime`) with this PID started.
fn wrapped(wrapper: u32) -> u32 {
    let children = format!("/proc/{wrapper}/task/{wrapper}/children");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(&children).unwrap_or_default();
        if let Some(pid) = text.split_whitespace().next().and_then(|p| p.parse().ok()) {
            return pid;
        }
        assert!(Instant::now() < deadline, "{children}: no process started");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A proxy in front of the agent, on journal directory `dir`, shipping to `url` when given.
struct Proxy {
    child: Child,
    /// The proxy's process: the child, or the child of its wrapper.
    pid: u32,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Proxy {
    /// `store`: the store's environment and URL.
    fn start(
        dir: &Path,
        store: Option<(&[(String, String)], &str)>,
        extra: &[&str],
        flood: usize,
    ) -> Proxy {
        let bin = Path::new(env!("CARGO_BIN_EXE_acp-journal"));
        Proxy::launch(&Launch::default(), bin, dir, store, extra, flood)
    }

    /// As [`Proxy::start`], of the `acp-journal` at `bin`, started as `how` says.
    fn launch(
        how: &Launch,
        bin: &Path,
        dir: &Path,
        store: Option<(&[(String, String)], &str)>,
        extra: &[&str],
        flood: usize,
    ) -> Proxy {
        let mut cmd = match how.wrapper.split_first() {
            Some((first, rest)) => {
                let mut cmd = Command::new(first);
                cmd.args(rest).arg(bin);
                cmd
            }
            None => Command::new(bin),
        };
        cmd.arg("--journal-dir").arg(dir);
        cmd.env("ACP_JOURNAL_LOG", "warn")
            .env_remove("ACP_JOURNAL_STORE");
        if let Some((env, url)) = store {
            cmd.args(["--store", url])
                .envs(env.iter().map(|(k, v)| (k, v)));
        }
        cmd.args(extra)
            .arg("--")
            .arg(std::env::current_exe().unwrap())
            .arg("__agent")
            .args(&how.agent)
            .env("BENCH_FLOOD", flood.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // BENCH_PROXY_STDERR: the proxies' logs (ACP_JOURNAL_LOG, default warn) on stderr.
            .stderr(match std::env::var_os("BENCH_PROXY_STDERR") {
                Some(_) => Stdio::inherit(),
                None => Stdio::null(),
            });
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::with_capacity(1 << 20, child.stdout.take().unwrap());
        let pid = match how.wrapper.is_empty() {
            true => child.id(),
            false => wrapped(child.id()),
        };
        let mut proxy = Proxy {
            child,
            pid,
            stdin,
            stdout,
            next: 0,
        };
        proxy.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        );
        proxy
    }

    /// Send a request; read until its answer; returns it and the lines before it.
    fn call(&mut self, method: &str, params: Value) -> (Value, usize) {
        self.next += 1;
        let id = self.next;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
        let mut before = 0;
        let mut buf = String::new();
        loop {
            buf.clear();
            assert!(self.stdout.read_line(&mut buf).unwrap() > 0, "proxy ended");
            // Cheap check first: most lines are updates.
            if buf.contains("\"result\"") || buf.contains("\"error\"") {
                let msg: Value = serde_json::from_str(&buf).unwrap();
                if msg["id"] == id {
                    return (msg, before);
                }
            }
            before += 1;
        }
    }

    fn new_session(&mut self) -> String {
        let (answer, _) = self.call("session/new", json!({"cwd": "/tmp", "mcpServers": []}));
        answer["result"]["sessionId"].as_str().unwrap().to_string()
    }

    fn prompt(&mut self, session: &str) -> usize {
        self.prompt_text(session, "go on")
    }

    fn prompt_text(&mut self, session: &str, text: &str) -> usize {
        let (answer, before) = self.call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        );
        assert!(answer.get("result").is_some(), "{answer}");
        before
    }

    /// Waits until this proxy (journaling in `dir`) has shipped every file it wrote, at most
    /// `most`.
    fn wait_shipped(&self, dir: &Path, most: Duration) {
        let deadline = Instant::now() + most;
        while Instant::now() < deadline
            && self
                .shipping(dir)
                .is_none_or(|s| s["behind_files"] != 0 || s["shipped_bytes"] == 0)
        {
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The proxy's CPU so far (user + system), in seconds.
    fn cpu(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap_or_default();
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks: f64 = fields.get(11).and_then(|t| t.parse().ok()).unwrap_or(0.0)
            + fields.get(12).and_then(|t| t.parse().ok()).unwrap_or(0.0);
        ticks / 100.0
    }

    /// The shipper's status file of this proxy, if it wrote one.
    fn shipping(&self, dir: &Path) -> Option<Value> {
        let text = std::fs::read(dir.join("shipping").join(format!("{}.json", self.pid))).ok()?;
        serde_json::from_slice(&text).ok()
    }

    fn finish(mut self) {
        drop(self.stdin);
        let _ = self.child.wait();
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// 1: prompt turns, shipping off and on, interleaved in blocks.
fn turns(s3: &S3, n: usize, report: &mut String) {
    eprintln!("bench: {n} prompt turns, shipping off and on, the index on and off");
    let rounds = 5;
    let arms: [(&str, bool, &[&str]); 3] = [
        ("off", false, &[]),
        ("on (every 1 s), index on", true, &[]),
        ("on (every 1 s), `--no-index`", true, &["--no-index"]),
    ];
    let mut results = [(0.0f64, 0.0f64, 0usize); 3];
    for _ in 0..rounds {
        for (i, (_, ship, extra)) in arms.iter().enumerate() {
            let dir = tempfile::tempdir().unwrap();
            let url = format!("s3://bench/turns-{}", rand_tag());
            let env = s3.env();
            let store = ship.then_some((env.as_slice(), url.as_str()));
            let mut proxy = Proxy::start(dir.path(), store, extra, 0);
            let session = proxy.new_session();
            // The turns' CPU only: a store client's start (its TLS roots, the probe) is not a
            // turn's.
            let cpu0 = proxy.cpu();
            let started = Instant::now();
            let mut messages = 0;
            for _ in 0..n / rounds {
                messages += proxy.prompt(&session) + 2;
            }
            results[i].0 += started.elapsed().as_secs_f64();
            results[i].1 += proxy.cpu() - cpu0;
            results[i].2 += messages;
            proxy.finish();
        }
    }
    let turns = (n / rounds * rounds) as f64;
    writeln!(
        report,
        "## Prompt turns through the stdio proxy ({n} turns, {rounds} rounds interleaved)\n"
    )
    .unwrap();
    writeln!(
        report,
        "| shipping | turns/s | CPU µs/turn | CPU µs/message |\n|---|---:|---:|---:|"
    )
    .unwrap();
    for ((name, _, _), (wall, cpu, messages)) in arms.iter().zip(results) {
        writeln!(
            report,
            "| {name} | {:.0} | {:.1} | {:.2} |",
            turns / wall,
            cpu * 1e6 / turns,
            cpu * 1e6 / messages as f64
        )
        .unwrap();
    }
    let per_message = |r: (f64, f64, usize)| r.1 / r.2 as f64;
    let (off, on, unindexed) = (results[0], results[1], results[2]);
    writeln!(
        report,
        "\nShipping on/off: turns/s {:.3}×, CPU per message {:.3}×. The index on/off (both \
         shipping): turns/s {:.3}×, CPU per message {:.3}× (the index is written on the \
         shipper's thread: this is what it costs the process, not the relay's path).\n",
        off.0 / on.0,
        per_message(on) / per_message(off),
        unindexed.0 / on.0,
        per_message(on) / per_message(unindexed)
    )
    .unwrap();
}

fn rand_tag() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// 2: a flood, shipping off and on; returns the shipped session (host A at `flood-a`).
fn flood(s3: &S3, n: usize, report: &mut String) -> (String, tempfile::TempDir) {
    eprintln!("bench: a flood of {n} updates, shipping off and on");
    let mut rows = Vec::new();
    let mut kept = None;
    for ship in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let env = s3.env();
        let store = ship.then_some((env.as_slice(), "s3://bench/flood"));
        let mut proxy = Proxy::start(dir.path(), store, &[], n);
        let session = proxy.new_session();
        let cpu0 = proxy.cpu();
        let started = Instant::now();
        let messages = proxy.prompt(&session) + 2;
        let wall = started.elapsed().as_secs_f64();
        let cpu = proxy.cpu() - cpu0;
        let mut lag = None;
        if ship {
            // Until the store has it all (the shipper's own figures).
            let deadline = Instant::now() + Duration::from_secs(60);
            while Instant::now() < deadline {
                if let Some(s) = proxy.shipping(dir.path())
                    && s["behind_bytes"] == 0
                    && s["parts"].as_u64() > Some(0)
                {
                    lag = Some(s["lag_ms"].clone());
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        proxy.finish();
        rows.push((ship, wall, cpu, messages, lag, journal_bytes(dir.path())));
        if ship {
            kept = Some((session, dir));
        }
    }
    writeln!(report, "## A flood of {n} updates in one prompt\n").unwrap();
    writeln!(report, "| shipping | messages/s | CPU µs/message | ship lag p50 / p99 / max (ms) |\n|---|---:|---:|---|").unwrap();
    for (ship, wall, cpu, messages, lag, _) in &rows {
        let lag = lag
            .as_ref()
            .map_or("-".into(), |l| format!("{} / {} / {}", l[0], l[1], l[2]));
        writeln!(
            report,
            "| {} | {:.0} | {:.2} | {lag} |",
            if *ship { "on (every 1 s)" } else { "off" },
            *messages as f64 / wall,
            cpu * 1e6 / *messages as f64
        )
        .unwrap();
    }
    let local = rows[1].5;
    let shipped = s3.bytes("flood");
    writeln!(
        report,
        "\nBytes: local journal {local}, in the store {shipped} ({:.3}× the local journal; the \
         catalog parts are compressed, the segments shipped as they are, then compacted).\n",
        shipped as f64 / local as f64
    )
    .unwrap();
    kept.unwrap()
}

/// 3: loading the flood's session on another host (from the store) and on its own (local).
fn load(s3: &S3, shipped: &(String, tempfile::TempDir), report: &mut String) {
    let (session, home) = shipped;
    eprintln!("bench: loading the flood's session");
    let params = json!({"sessionId": session, "cwd": "/tmp", "mcpServers": []});
    let mut rows = Vec::new();
    for (name, from_store) in [
        ("its own host, local disk", false),
        ("another host, from the store", true),
    ] {
        let other = tempfile::tempdir().unwrap();
        let env = s3.env();
        let (dir, store) = if from_store {
            (other.path(), Some((env.as_slice(), "s3://bench/flood")))
        } else {
            (home.path(), None)
        };
        let mut proxy = Proxy::start(dir, store, &[], 0);
        let started = Instant::now();
        let (answer, replayed) = proxy.call("session/load", params.clone());
        let took = started.elapsed();
        assert!(answer.get("result").is_some(), "{answer}");
        proxy.finish();
        rows.push((name, took, replayed));
    }
    writeln!(
        report,
        "## Loading that session (`session/load`, replayed by the proxy)\n"
    )
    .unwrap();
    writeln!(
        report,
        "| from | time to the answer | updates replayed |\n|---|---:|---:|"
    )
    .unwrap();
    for (name, took, replayed) in &rows {
        writeln!(
            report,
            "| {name} | {:.0} ms | {replayed} |",
            took.as_secs_f64() * 1e3
        )
        .unwrap();
    }
    writeln!(
        report,
        "\nFrom the store / local: {:.2}×.\n",
        rows[1].1.as_secs_f64() / rows[0].1.as_secs_f64()
    )
    .unwrap();
}

/// 4: `list` over `n` sessions in the store, with a cold and a warm local copy.
fn list(s3: &S3, n: usize, report: &mut String) {
    eprintln!("bench: list over {n} sessions");
    let dir = tempfile::tempdir().unwrap();
    let journals = dir.path().join("journals");
    std::fs::create_dir_all(journals.join("sessions")).unwrap();
    let mut catalog = String::new();
    let t0 = 1_795_000_000_000_000i64;
    for i in 0..n {
        let t = t0 + i as i64 * 1_000_000;
        let id = format!("sess-{i:06}");
        let segment = format!("sessions/s{id}/20261126T000000.000000Z-{i}.acpj.zst");
        writeln!(catalog, "{}", json!({"ev": "open", "session": id, "segment": segment, "cwd": "/home/me/project", "agent": "npx @agentclientprotocol/claude-agent-acp", "t": t})).unwrap();
        writeln!(catalog, "{}", json!({"ev": "prompt", "session": id, "title": format!("Fix the flaky test number {i}"), "t": t + 1})).unwrap();
        writeln!(catalog, "{}", json!({"ev": "close", "segment": segment, "records": 120, "bytes": 5210, "turns": 3, "t": t + 2})).unwrap();
    }
    std::fs::write(journals.join("catalog.ndjson"), &catalog).unwrap();
    // Shipped by a proxy's start on that directory (it ships what the store lacks).
    let env = s3.env();
    let proxy = Proxy::start(&journals, Some((env.as_slice(), "s3://bench/list")), &[], 0);
    proxy.finish();
    let cache = dir.path().join("cache");
    let mut times = Vec::new();
    for _ in 0..2 {
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_acp-journal"))
            .args(["--store", "s3://bench/list", "list", "--json"])
            .envs(s3.env())
            .env("XDG_CACHE_HOME", &cache)
            .env("ACP_JOURNAL_DIR", dir.path().join("reader"))
            .output()
            .unwrap();
        times.push(started.elapsed());
        let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
        assert_eq!(rows.len(), n, "{}", String::from_utf8_lossy(&out.stderr));
    }
    writeln!(
        report,
        "## `list --store` over {n} sessions ({} KiB of catalog)\n",
        catalog.len() / 1024
    )
    .unwrap();
    writeln!(
        report,
        "Cold local copy: {:.0} ms; warm: {:.0} ms (one listing and one read per host; no read per session).\n",
        times[0].as_secs_f64() * 1e3,
        times[1].as_secs_f64() * 1e3
    )
    .unwrap();
}

/// 5: `hosts` proxies, `per_host` sessions each, `turns` turns in all, round-robin; then one
/// host killed.
fn fleet(s3: &S3, hosts: usize, per_host: usize, turns: usize, report: &mut String) {
    eprintln!("bench: a fleet of {hosts} hosts, {per_host} sessions each");
    let url = "s3://bench/fleet";
    let dirs: Vec<tempfile::TempDir> = (0..hosts).map(|_| tempfile::tempdir().unwrap()).collect();
    // The default lease: the failover measured is what a user gets.
    let ttl = "15";
    let drivers: Vec<std::thread::JoinHandle<(Proxy, Vec<String>, f64)>> = dirs
        .iter()
        .map(|d| {
            let dir = d.path().to_path_buf();
            let env = s3.env();
            let n = turns / hosts;
            std::thread::spawn(move || {
                let mut proxy = Proxy::start(&dir, Some((&env, url)), &["--lease-ttl", ttl], 0);
                let sessions: Vec<String> = (0..per_host).map(|_| proxy.new_session()).collect();
                let started = Instant::now();
                for i in 0..n {
                    proxy.prompt(&sessions[i % per_host]);
                }
                (proxy, sessions, started.elapsed().as_secs_f64())
            })
        })
        .collect();
    let mut running: Vec<(Proxy, Vec<String>, f64)> =
        drivers.into_iter().map(|d| d.join().unwrap()).collect();
    let wall = running.iter().map(|r| r.2).fold(0.0, f64::max);
    // Until every host's journals are all in the store (counted in the store).
    let runs: Vec<String> = dirs.iter().map(|d| run_of(d.path())).collect();
    let local = |d: &tempfile::TempDir| {
        files_bytes(&d.path().join("sessions")) + files_bytes(&d.path().join("connections"))
    };
    let caught_up = Instant::now();
    let deadline = caught_up + Duration::from_secs(60);
    while dirs
        .iter()
        .zip(&runs)
        .any(|(d, run)| run_bytes(s3, "fleet", run) < local(d))
    {
        assert!(Instant::now() < deadline, "the fleet did not catch up");
        std::thread::sleep(Duration::from_millis(50));
    }
    let drained = caught_up.elapsed();
    let lags: Vec<String> = running
        .iter()
        .zip(&dirs)
        .filter_map(|(r, d)| r.0.shipping(d.path()))
        .map(|s| format!("{} / {}", s["lag_ms"][0], s["lag_ms"][1]))
        .collect();
    // One more turn on every session of host 0, then kill -9 right away.
    let (mut victim, sessions, _) = running.remove(0);
    for s in &sessions {
        victim.prompt(s);
    }
    let run = &runs[0];
    let local_at_kill = local(&dirs[0]);
    victim.kill();
    let killed = Instant::now();
    let stored = run_bytes(s3, "fleet", run);
    // Another host is asked for one of its sessions: the load waits for the dead host's lease
    // to run out (timed from its first look), then continues it.
    let (mut heir, _, _) = running.remove(0);
    let (answer, replayed) = heir.call(
        "session/load",
        json!({"sessionId": sessions[0], "cwd": "/tmp", "mcpServers": []}),
    );
    assert!(answer.get("result").is_some(), "{answer}");
    let waited = killed.elapsed();
    heir.finish();
    for (p, _, _) in running {
        p.finish();
    }
    writeln!(
        report,
        "## A fleet: {hosts} hosts on this machine, {per_host} live sessions each, one store\n"
    )
    .unwrap();
    writeln!(
        report,
        "{turns} turns round-robin over {} sessions: {:.0} turns/s in all ({} proxies on 2 cores). \
         Ship lag p50 / p99 per host (ms): {}.\n",
        hosts * per_host,
        (turns / hosts * hosts) as f64 / wall,
        hosts,
        lags.join("; ")
    )
    .unwrap();
    writeln!(
        report,
        "Every host's journals were all in the store {:.1} s after the last turn. `kill -9` of one host \
         right after a turn on each of its {per_host} sessions: its journals held {local_at_kill} \
         bytes, the store {stored} (lost with the machine: {} bytes, the turns since its last \
         shipment); another host, asked for one of its sessions right after the kill, answered \
         the load {:.1} s after it (the default `--lease-ttl {ttl}`: the load waits until the dead \
         host's lease has not changed for the TTL plus a tenth, on its own clock), replaying \
         {replayed} updates. A held session costs one conditional PUT every TTL/3 (5 s).\n",
        drained.as_secs_f64(),
        local_at_kill.saturating_sub(stored),
        waited.as_secs_f64()
    )
    .unwrap();
}
