//! What /proc tells of a process while it runs: the CPU time of its threads and its peak RSS,
//! read at a given moment or polled.
//!
//! CPU time comes from two files. `/proc/PID/task/TID/schedstat` (its first field) is the
//! nanoseconds the thread has been on a CPU, by the scheduler's clock: precise, but a thread
//! that has ended is gone from `/proc/PID/task`, and its time with it, so [`Poller`] reads it
//! every ~10 ms and keeps each thread's last value (a thread that ends loses at most its last
//! ~10 ms). `/proc/PID/stat` (utime + stime) is the whole process, its ended threads included,
//! but in clock ticks (10 ms): the cross-check. Neither counts the process's children: an agent
//! the path spawned is a process of its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// The name and CPU ticks (user + system, 10 ms) in a `/proc/…/stat` line.
pub fn stat_ticks(stat: &str) -> Option<(&str, u64)> {
    let (open, close) = (stat.find('(')?, stat.rfind(')')?);
    // After the name: state (field 3) … utime (14), stime (15).
    let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Some((&stat[open + 1..close], ticks(11) + ticks(12)))
}

/// User + system CPU ticks (10 ms) of process `pid`, its threads (live and ended) included.
pub fn process_ticks(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat_ticks(&stat).map(|(_, ticks)| ticks))
        .unwrap_or(0)
}

/// Nanoseconds per clock tick of `/proc/…/stat`.
fn tick_ns() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    1_000_000_000 / hz
}

fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// One thread's CPU time so far.
#[derive(Clone)]
struct ThreadTime {
    tid: u32,
    /// Its `comm`.
    name: String,
    /// On CPU, from schedstat.
    ns: u64,
}

/// The CPU time of every live thread of `pid`, from schedstat.
fn thread_times(pid: u32) -> Vec<ThreadTime> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        let (Ok(schedstat), Ok(comm)) = (
            std::fs::read_to_string(task.path().join("schedstat")),
            std::fs::read_to_string(task.path().join("comm")),
        ) else {
            continue;
        };
        let Some(ns) = schedstat
            .split_whitespace()
            .next()
            .and_then(|f| f.parse().ok())
        else {
            continue;
        };
        out.push(ThreadTime {
            tid: task.file_name().to_string_lossy().parse().unwrap_or(0),
            name: comm.trim_end().to_string(),
            ns,
        });
    }
    out
}

/// The CPU time a process used between a [`CpuMark`] and a later reading.
#[derive(Clone)]
pub struct CpuUse {
    /// Per thread, from schedstat: (name, is the main thread, nanoseconds). Threads of one name
    /// are listed apart.
    pub threads: Vec<(String, bool, u64)>,
    /// The whole process from `/proc/PID/stat`, in 10 ms steps.
    pub stat_ns: u64,
}

impl CpuUse {
    /// Every thread's, from schedstat.
    pub fn total_ns(&self) -> u64 {
        self.threads.iter().map(|t| t.2).sum()
    }

    /// The main thread's.
    pub fn main_ns(&self) -> u64 {
        self.threads.iter().filter(|t| t.1).map(|t| t.2).sum()
    }

    /// The threads called `name`'s, the main thread left out.
    pub fn named_ns(&self, name: &str) -> u64 {
        self.threads
            .iter()
            .filter(|t| !t.1 && t.0 == name)
            .map(|t| t.2)
            .sum()
    }
}

/// The CPU time of a process at one moment: what a [`CpuUse`] is counted from.
pub struct CpuMark {
    threads: Vec<ThreadTime>,
    stat_ticks: u64,
}

/// What the poller saw last.
#[derive(Default)]
struct Seen {
    hwm_kib: AtomicU64,
    samples: AtomicU64,
    /// Every thread seen, with its last value.
    threads: parking_lot::Mutex<Vec<ThreadTime>>,
}

impl Seen {
    /// Read the threads of `pid` now, keeping the last value of those that have ended.
    fn merge_threads(&self, pid: u32) -> Vec<ThreadTime> {
        let now = thread_times(pid);
        let mut last = self.threads.lock();
        for t in now {
            match last.iter_mut().find(|l| l.tid == t.tid) {
                Some(l) => *l = t,
                None => last.push(t),
            }
        }
        last.clone()
    }
}

/// Polls a process's VmHWM and its threads' CPU time every ~10 ms until stopped.
pub struct Poller {
    pid: u32,
    seen: Arc<Seen>,
    stop: Arc<AtomicBool>,
    handle: JoinHandle<()>,
}

impl Poller {
    pub fn start(pid: u32) -> Poller {
        let seen = Arc::new(Seen::default());
        let stop = Arc::new(AtomicBool::new(false));
        let handle = {
            let (seen, stop) = (seen.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(kib) = vm_hwm_kib(pid) {
                        seen.hwm_kib.store(kib, Ordering::Relaxed);
                        seen.samples.fetch_add(1, Ordering::Relaxed);
                    }
                    seen.merge_threads(pid);
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
        };
        Poller {
            pid,
            seen,
            stop,
            handle,
        }
    }

    /// The last VmHWM read (KiB).
    pub fn hwm_kib(&self) -> u64 {
        self.seen.hwm_kib.load(Ordering::Relaxed)
    }

    /// The process's CPU time now.
    pub fn mark(&self) -> CpuMark {
        CpuMark {
            threads: self.seen.merge_threads(self.pid),
            stat_ticks: process_ticks(self.pid),
        }
    }

    /// The CPU time used since `mark`, read now: the threads alive now, and those seen alive
    /// since that have ended, at their last reading.
    pub fn cpu_since(&self, mark: &CpuMark) -> CpuUse {
        let stat_ticks = process_ticks(self.pid).saturating_sub(mark.stat_ticks);
        let threads = self
            .seen
            .merge_threads(self.pid)
            .into_iter()
            .map(|t| {
                let before = mark
                    .threads
                    .iter()
                    .find(|m| m.tid == t.tid)
                    .map_or(0, |m| m.ns);
                (t.name, t.tid == self.pid, t.ns.saturating_sub(before))
            })
            .collect();
        CpuUse {
            threads,
            stat_ns: stat_ticks * tick_ns(),
        }
    }

    /// Stop polling: the last VmHWM read (KiB) and the number of readings.
    pub fn stop(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("poller");
        let seen = &self.seen;
        (
            seen.hwm_kib.load(Ordering::Relaxed),
            seen.samples.load(Ordering::Relaxed),
        )
    }
}
