//! CPU per message against the minimal relay: the same floods ([`flood_run`]) through the
//! minimal relay, acp-journal and, with `BENCH_PROXY_BASE=<binary>`, another build of
//! acp-journal, at two sizes and with the flood agent writing in two ways ([`Writes`]). The
//! paths alternate run by run (relay, acp-journal, base, relay, …), three rounds on the smaller
//! flood and two on the larger; each figure is the median over the rounds. CPU time is the path's
//! process only, from writing the prompt to reading the last line ([`crate::procfs`]).

use std::fmt::Write as _;

use crate::measure::{FloodRun, Scale, flood_run};
use crate::procfs::CpuUse;
use crate::roles::{PathKind, Writes, base_proxy};

/// The runs of one path, writing mode and size.
struct Cell {
    writes: Writes,
    messages: usize,
    kind: PathKind,
    runs: Vec<FloodRun>,
}

impl Cell {
    /// The median over the runs of `figure`, per message.
    fn per_message(&self, figure: impl Fn(&FloodRun) -> f64) -> f64 {
        median(self.runs.iter().map(figure).collect()) / self.messages as f64
    }

    fn wall_s(&self) -> f64 {
        median(self.runs.iter().map(|r| r.secs).collect())
    }

    /// Microseconds of CPU per message of the threads `ns` picks.
    fn us(&self, ns: impl Fn(&CpuUse) -> u64) -> f64 {
        self.per_message(|r| r.cpu.as_ref().map_or(0, &ns) as f64 / 1e3)
    }

    fn all_us(&self) -> f64 {
        self.us(|c| c.total_ns())
    }
}

/// Every cell, in the order they are reported: writing mode, size, path.
pub struct CpuPerMessage {
    /// (messages, rounds) of the two sizes.
    rounds: [(usize, usize); 2],
    cells: Vec<Cell>,
}

/// The median (of an even count, the mean of the middle two).
fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let mid = xs.len() / 2;
    if xs.len().is_multiple_of(2) {
        (xs[mid - 1] + xs[mid]) / 2.0
    } else {
        xs[mid]
    }
}

pub fn run_cpu(scale: &Scale) -> CpuPerMessage {
    let mut kinds = vec![PathKind::Relay, PathKind::Journal];
    if base_proxy().is_some() {
        kinds.push(PathKind::JournalBase);
    }
    let rounds = [(scale.flood_small, 3), (scale.flood_journal, 2)];
    let mut cells = Vec::new();
    for writes in [Writes::Bulk, Writes::Line] {
        for (messages, count) in rounds {
            let first = cells.len();
            cells.extend(kinds.iter().map(|&kind| Cell {
                writes,
                messages,
                kind,
                runs: Vec::new(),
            }));
            for _ in 0..count {
                for cell in &mut cells[first..] {
                    let store = cell
                        .kind
                        .journals()
                        .then(|| tempfile::tempdir().expect("tempdir"));
                    let run = flood_run(
                        cell.kind,
                        messages,
                        store.as_ref().map(|d| d.path()),
                        writes,
                    );
                    cell.runs.push(run);
                }
            }
        }
    }
    for c in &cells {
        eprintln!(
            "bench: CPU per message, {} writes, {} messages, {}: {:.3} µs",
            c.writes.name(),
            c.messages,
            c.kind.name(),
            c.all_us()
        );
    }
    CpuPerMessage { rounds, cells }
}

/// The report's section.
pub fn render(r: &mut String, t: &CpuPerMessage) {
    let _ = writeln!(r, "\n## 7. CPU per message against the minimal relay\n");
    let _ = writeln!(
        r,
        "The flood agent's N messages through each path, the agent writing them in one `write_all` (**bulk**: pipe-sized writes, the most a proxy can be fed at once) or with one `write(2)` per message (**line**, as agents write). The paths alternate run by run, {} rounds of {} messages and {} of {}; every figure is the median over the rounds. CPU = nanoseconds on a CPU of the path's process, summed over its threads (`/proc/PID/task/TID/schedstat`, polled every ~10 ms so that a thread that ends is not lost), from writing the prompt to reading the N-th line, read before the path's stdin is closed (its shutdown is not counted); the agent, a child process, is not counted. Main thread: the process's first thread (acp-journal's runtime; the relay's agent-to-client copy). `/proc/PID/stat` is utime + stime of the whole process over the same interval, in 10 ms steps: the cross-check. × minimal relay: CPU per message, all threads, over the relay's in the same mode and size.\n",
        t.rounds[0].1, t.rounds[0].0, t.rounds[1].1, t.rounds[1].0
    );
    let _ = writeln!(
        r,
        "| writes | messages | path | wall s | CPU µs/message, all threads | main thread µs/message | compressor µs/message | /proc/PID/stat µs/message | × minimal relay |"
    );
    let _ = writeln!(r, "|---|---:|---|---:|---:|---:|---:|---:|---:|");
    let relay_of = |c: &Cell| {
        t.cells
            .iter()
            .find(|r| r.kind == PathKind::Relay && r.writes == c.writes && r.messages == c.messages)
    };
    for c in &t.cells {
        let compressor = match c.kind {
            PathKind::Relay => "—".to_string(),
            _ => format!("{:.3}", c.us(|u| u.named_ns("compressor"))),
        };
        let _ = writeln!(
            r,
            "| {} | {} | {} | {:.3} | {:.3} | {:.3} | {compressor} | {:.2} | {} |",
            c.writes.name(),
            c.messages,
            c.kind.name(),
            c.wall_s(),
            c.all_us(),
            c.us(|u| u.main_ns()),
            c.us(|u| u.stat_ns),
            relay_of(c).map_or("—".into(), |rel| format!(
                "{:.1}×",
                c.all_us() / rel.all_us()
            )),
        );
    }
    let of = |kind: PathKind| t.cells.iter().filter(move |c| c.kind == kind);
    let ratios: Vec<String> = of(PathKind::Journal)
        .zip(of(PathKind::JournalBase))
        .map(|(head, base)| {
            format!(
                "{} {}: {:.2}×",
                head.writes.name(),
                head.messages,
                head.all_us() / base.all_us()
            )
        })
        .collect();
    if !ratios.is_empty() {
        let _ = writeln!(
            r,
            "\nCPU per message, acp-journal / the base build: {}.",
            ratios.join(", ")
        );
    }
}
