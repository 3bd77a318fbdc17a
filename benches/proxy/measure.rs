//! The measurements: their scale (`BENCH_QUICK`), the machine's load while they run, and the
//! three measurements the report shows first: latency (echo agent), throughput with peak RSS and
//! CPU per thread (flood agent, [`flood_run`], which [`crate::cpu`] runs too), and the journal's
//! size against gzip and zstd of the raw lines.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout};
use std::time::{Duration, Instant};

use crate::peers;
use crate::procfs::{CpuUse, Poller};
use crate::roles::{PathKind, Writes, me, paths};
use crate::traffic::{Flood, INIT_REQUEST, SEED, latency_messages, prompt_request};

pub struct Scale {
    pub quick: bool,
    pub latency_msgs: usize,
    pub latency_warmup: usize,
    pub flood_journal: usize,
    pub flood_small: usize,
    pub flood_baseline: usize,
    pub zstd19_lines: usize,
    pub turns: usize,
}

impl Scale {
    pub fn get() -> Scale {
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
            // Fewer would leave the CPU figure (10 ms ticks) too coarse.
            turns: if quick { 5_000 } else { 20_000 },
        }
    }
}

/// The machine's load, to tell how much other processes disturbed the bench.
pub struct Load {
    avg_start: String,
    /// (busy, steal) ticks from /proc/stat.
    stat_start: (u64, u64),
    /// CPU seconds of this process and its waited-for descendants.
    ours_start: f64,
}

impl Load {
    pub fn start() -> Load {
        Load {
            avg_start: loadavg(),
            stat_start: proc_stat(),
            ours_start: our_cpu_secs(),
        }
    }

    pub fn report(&self, elapsed: Duration) -> String {
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

// --- 1. latency ------------------------------------------------------------------------------

pub struct Latency {
    /// Every process on one CPU.
    pub pinned: bool,
    pub msg_bytes: usize,
    /// The paths measured: [`paths()`](crate::roles::paths).
    pub kinds: Vec<PathKind>,
    /// Sorted round-trip times in nanoseconds, per path (`kinds` order).
    pub rtt: Vec<Vec<u64>>,
}

impl Latency {
    /// RTT quantile `q` of path `i`, in nanoseconds.
    pub fn rtt(&self, i: usize, q: f64) -> u64 {
        pct(&self.rtt[i], q)
    }

    /// Added latency per hop of path `i` at quantile `q`, in microseconds.
    pub fn added(&self, i: usize, q: f64) -> f64 {
        (self.rtt(i, q) as f64 - self.rtt(0, q) as f64) / 2.0 / 1e3
    }

    /// added(acp-journal) / added(relay) at quantile `q`, when the relay adds anything.
    pub fn ratio(&self, q: f64) -> Option<f64> {
        let relay = self.added(1, q);
        (relay > 0.5).then(|| self.added(2, q) / relay)
    }

    pub fn label(&self) -> &'static str {
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
        let (mut child, journal) = kind.start("__echo");
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

pub fn run_latency(scale: &Scale, pinned: bool) -> Latency {
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

pub fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

// --- 2. throughput and 4. RSS ------------------------------------------------------------------

pub struct FloodRun {
    pub kind: PathKind,
    pub messages: usize,
    pub bytes: u64,
    pub secs: f64,
    /// Peak RSS (VmHWM, KiB) of the path's process, last value read before it exited.
    pub peak_kib: Option<u64>,
    /// VmHWM at 10 %, 20 %, … 100 % of the lines received.
    pub hwm_progress: Vec<u64>,
    pub rss_samples: u64,
    /// The CPU time of the path's process from writing the prompt to reading the last line (see
    /// [`crate::procfs`]); none for the direct pipe.
    pub cpu: Option<CpuUse>,
}

impl FloodRun {
    pub fn mb_s(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.secs
    }

    pub fn msg_s(&self) -> f64 {
        self.messages as f64 / self.secs
    }
}

pub struct Throughput {
    /// Median of three runs each (direct, relay).
    pub baselines: Vec<FloodRun>,
    pub journal_small: FloodRun,
    /// The same traffic with `--otlp` to the in-process sink (median of 3, as `journal_small`).
    pub journal_otlp: FloodRun,
    pub journal_big: FloodRun,
    /// The store of the big acp-journal run.
    pub store: StoreBytes,
    /// The conductor on the traffic of `journal_small`, compared with it.
    pub conductor: Option<peers::Compared>,
}
pub fn run_throughput(scale: &Scale) -> Throughput {
    let mut baselines = Vec::new();
    for kind in [PathKind::Direct, PathKind::Relay] {
        let mut runs: Vec<FloodRun> = (0..3)
            .map(|_| flood_run(kind, scale.flood_baseline, None, Writes::Bulk))
            .collect();
        runs.sort_by(|a, b| a.secs.total_cmp(&b.secs));
        baselines.push(runs.swap_remove(1));
    }
    // Without and with --otlp: alternated, median of 3 each (the conductor compares with the
    // journal of the median run without).
    let mut small: Vec<(FloodRun, tempfile::TempDir)> = Vec::new();
    let mut otlp: Vec<FloodRun> = Vec::new();
    for _ in 0..3 {
        let dir = tempfile::tempdir().expect("tempdir");
        small.push((
            flood_run(
                PathKind::Journal,
                scale.flood_small,
                Some(dir.path()),
                Writes::Bulk,
            ),
            dir,
        ));
        let dir = tempfile::tempdir().expect("tempdir");
        otlp.push(flood_run(
            PathKind::JournalOtlp,
            scale.flood_small,
            Some(dir.path()),
            Writes::Bulk,
        ));
    }
    small.sort_by(|a, b| a.0.secs.total_cmp(&b.0.secs));
    otlp.sort_by(|a, b| a.secs.total_cmp(&b.secs));
    let (journal_small, small_dir) = small.swap_remove(1);
    let journal_otlp = otlp.swap_remove(1);
    let conductor = peers::conductor().map(|_| {
        let trace_dir = tempfile::tempdir().expect("tempdir");
        let run = flood_run(
            PathKind::Conductor,
            scale.flood_small,
            Some(trace_dir.path()),
            Writes::Bulk,
        );
        peers::compare(run, trace_dir.path(), &journal_small, small_dir.path())
    });
    let big_dir = tempfile::tempdir().expect("tempdir");
    let journal_big = flood_run(
        PathKind::Journal,
        scale.flood_journal,
        Some(big_dir.path()),
        Writes::Bulk,
    );
    let store = store_bytes(big_dir.path());
    Throughput {
        baselines,
        journal_small,
        journal_otlp,
        journal_big,
        store,
        conductor,
    }
}

/// What a journal store holds.
pub struct StoreBytes {
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
    for (path, len) in files_under(dir) {
        sb.all += len;
        if path.to_string_lossy().ends_with(".acpj.zst") {
            sb.segments += len;
            sb.count += 1;
            let file = File::open(&path).expect("open segment");
            records.extend(zstd::stream::decode_all(file).expect("decode segment"));
        }
    }
    sb.decoded = records.len() as u64;
    sb.recompressed = zstd::stream::encode_all(&records[..], 3)
        .expect("zstd")
        .len() as u64;
    sb
}

/// Every file under `dir`, with its size.
pub fn files_under(dir: &Path) -> Vec<(std::path::PathBuf, u64)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let meta = e.metadata().expect("metadata");
            if meta.is_dir() {
                stack.push(e.path());
            } else {
                files.push((e.path(), meta.len()));
            }
        }
    }
    files
}

/// One flood of `n` messages through `kind` (its store in `journal`), the agent writing them
/// as `writes` says.
pub fn flood_run(kind: PathKind, n: usize, journal: Option<&Path>, writes: Writes) -> FloodRun {
    eprintln!(
        "bench: flood {} × {n} ({} writes)",
        kind.name(),
        writes.name()
    );
    let agent = vec![me(), "__flood".into(), n.to_string(), SEED.to_string()];
    let session = Flood::new(SEED).session;
    let mut child = kind
        .command(&agent, journal)
        .env(Writes::ENV, writes.name())
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {}: {e}", kind.name()));
    let mut stdin = child.stdin.take().expect("piped");
    let mut stdout = child.stdout.take().expect("piped");

    // The path's own process: with the direct pipe, that would be the agent.
    let poller = (kind != PathKind::Direct).then(|| Poller::start(child.id()));

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
    let mark = poller.as_ref().map(Poller::mark);
    let t0 = Instant::now();
    stdin
        .write_all(prompt_request(&session).as_bytes())
        .expect("write");
    while lines < n {
        let k = stdout.read(&mut buf).expect("read");
        assert!(k > 0, "{}: EOF after {lines} of {n} lines", kind.name());
        lines += memchr::memchr_iter(b'\n', &buf[..k]).count();
        bytes += k as u64;
        if let Some(poller) = &poller {
            while next_mark <= 10 && lines * 10 >= n * next_mark {
                hwm_progress.push(poller.hwm_kib());
                next_mark += 1;
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    // Read now, the flood relayed and the path still running (its stdin open): the CPU time of
    // the flood itself, not of the path's shutdown. acp-journal writes every line to its journal
    // before forwarding it, so the compression of the last line is done by now; what is left for
    // the exit (the segments' last flush) is not counted.
    let cpu = poller
        .as_ref()
        .zip(mark.as_ref())
        .map(|(p, m)| p.cpu_since(m));
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
    let (peak_kib, rss_samples) = match poller.map(Poller::stop) {
        Some((kib, samples)) => (Some(kib), samples),
        None => (None, 0),
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
        "bench:   {:.3} s, {:.1} MB/s, {:.0} msg/s{}{}",
        run.secs,
        run.mb_s(),
        run.msg_s(),
        peak_kib.map_or(String::new(), |k| format!(", peak RSS {k} KiB")),
        run.cpu.as_ref().map_or(String::new(), |c| format!(
            ", CPU {:.3} µs/message",
            c.total_ns() as f64 / 1e3 / n as f64
        ))
    );
    run
}

// --- 3. journal size ---------------------------------------------------------------------------

pub struct Sizes {
    pub messages: usize,
    pub raw: u64,
    /// Checked against what the runs received.
    pub journal: u64,
    pub journal_all_files: u64,
    pub journal_segments: usize,
    pub journal_decoded: u64,
    pub journal_recompressed: u64,
    pub gzip6: u64,
    pub gzip6_secs: f64,
    pub zstd3: u64,
    pub zstd3_secs: f64,
    /// zstd -19 on the first `prefix_lines` lines, with raw and gzip -6 of the same prefix.
    pub prefix_lines: usize,
    pub prefix_raw: u64,
    pub prefix_gzip6: u64,
    pub prefix_zstd19: u64,
    pub zstd19_secs: f64,
    pub mean_line: f64,
    /// Bytes of the mix, per kind of update (name, count, bytes).
    pub mix: Vec<(String, usize, u64)>,
}

pub fn run_sizes(scale: &Scale, journal: &StoreBytes) -> Sizes {
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
