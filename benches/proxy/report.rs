//! The markdown report: the machine, the measurements' tables, and the targets they are checked
//! against.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use crate::measure::{Latency, Load, Scale, Sizes, Throughput, us};
use crate::peers;
use crate::roles::{PROXY, extra_proxy_args};

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

pub fn pass(ok: bool) -> &'static str {
    if ok { "**pass**" } else { "**MISS**" }
}

/// What the bench measured, for [`render`].
pub struct Measured {
    pub latency: [Latency; 2],
    pub throughput: Throughput,
    pub sizes: Sizes,
    pub turns: crate::turns::Turns,
    pub cpu: crate::cpu::CpuPerMessage,
}

pub fn render(scale: &Scale, load: &Load, m: &Measured, elapsed: Duration) -> String {
    let (lat, tp, sz) = (&m.latency, &m.throughput, &m.sizes);
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
    for l in lat {
        let (j, o) = (2, 3);
        let _ = writeln!(
            r,
            "Added latency with `--otlp` (spans to a local sink that accepts and discards) vs without, {}: {:.1} vs {:.1} µs at p50, {:.1} vs {:.1} µs at p99.",
            l.label(),
            l.added(o, 0.5),
            l.added(j, 0.5),
            l.added(o, 0.99),
            l.added(j, 0.99)
        );
    }
    let _ = writeln!(r);

    // 2. throughput
    let _ = writeln!(r, "## 2. Throughput (flood agent)\n");
    let _ = writeln!(
        r,
        "The flood agent pre-generates its messages, answers `initialize` (untimed), then on `session/prompt` writes N lines (N−1 `session/update`s + the prompt response) and exits. Time = from writing the prompt line to reading the N-th line. MB = 10⁶ bytes. Direct and relay, and acp-journal with and without `--otlp` on the smaller flood: median of 3 runs.\n"
    );
    let _ = writeln!(r, "| path | messages | MB | seconds | MB/s | messages/s |");
    let _ = writeln!(r, "|---|---:|---:|---:|---:|---:|");
    for run in tp
        .baselines
        .iter()
        .chain([&tp.journal_small, &tp.journal_otlp, &tp.journal_big])
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
        "\nThroughput with `--otlp` / without (medians): **{:.2}×** ({} OTLP requests in all runs, {:.1} kB of spans taken by the sink).",
        tp.journal_otlp.mb_s() / tp.journal_small.mb_s(),
        crate::roles::SINK_REQUESTS.load(std::sync::atomic::Ordering::Relaxed),
        crate::roles::SINK_BYTES.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1e3
    );
    let _ = writeln!(
        r,
        "\nCPU time of the relaying process (the agent, its child, left out) from writing the prompt line to reading the last line, per thread (nanoseconds on a CPU from /proc/<pid>/task/*/schedstat; see section 7 for the method):\n"
    );
    let _ = writeln!(
        r,
        "| path | messages | wall s | thread | CPU s | % of wall | CPU µs/message |"
    );
    let _ = writeln!(r, "|---|---:|---:|---|---:|---:|---:|");
    for run in tp
        .baselines
        .iter()
        .chain([&tp.journal_small, &tp.journal_otlp, &tp.journal_big])
    {
        let Some(cpu) = &run.cpu else { continue };
        let mut threads: Vec<(&str, u64)> = cpu
            .threads
            .iter()
            .filter(|t| t.2 > 0)
            .map(|t| (t.0.as_str(), t.2))
            .collect();
        threads.push(("**all threads**", cpu.total_ns()));
        for (name, ns) in threads {
            let secs = ns as f64 / 1e9;
            let _ = writeln!(
                r,
                "| {} | {} | {:.3} | {name} | {secs:.3} | {:.0} % | {:.3} |",
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
    crate::turns::render(&mut r, &m.turns);
    crate::cpu::render(&mut r, &m.cpu);

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
