//! The agent's whole process tree ends with it. The agent runs in a process group of its own
//! (the agent module spawns it so); whatever it starts (MCP servers, tools, a `sleep &` in a wrapper
//! script) is in that group unless it leaves it (`setsid`, `setpgid`). When the agent exits —
//! on its own, killed, or to be restarted — the rest of its group gets SIGTERM, then SIGKILL
//! after `--grace` ([`Reaper::end_group`]).
//!
//! A proxy killed with SIGKILL can do nothing, so a small process of ours does it: the reaper
//! (`acp-journal __reap`, started once per proxy, in a group of its own so a terminal's
//! Ctrl-C does not reach it). The proxy tells it each group it starts (`+PGID`) and each group
//! that has ended (`-PGID`), one line each, over a pipe only the proxy holds. When that pipe
//! closes — the proxy exited, however it died — the reaper ends every group still listed
//! (SIGTERM, then SIGKILL after the grace period) and exits.

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The proxy's side of the reaper: where it lists the agents' process groups.
#[derive(Debug)]
pub struct Reaper {
    /// The reaper's stdin; `None` when it could not be started (groups still end when the
    /// proxy exits normally, not when it is killed with SIGKILL).
    pipe: Mutex<Option<ChildStdin>>,
    grace: Duration,
}

impl Reaper {
    /// Start the reaper process (this binary's `__reap`). If that fails, a warning is logged
    /// and the proxy goes on without it.
    pub fn start(grace: Duration) -> Arc<Reaper> {
        let pipe = match spawn_reaper(grace) {
            Ok(pipe) => Some(pipe),
            Err(e) => {
                tracing::warn!(
                    "cannot start the reaper process ({e}): if the proxy is killed with SIGKILL, the processes its agent started will outlive it"
                );
                None
            }
        };
        Arc::new(Reaper {
            pipe: Mutex::new(pipe),
            grace,
        })
    }

    /// The group `pgid` was started: the reaper ends it if the proxy dies.
    pub fn watch(&self, pgid: u32) {
        self.tell(&format!("+{pgid}\n"));
    }

    /// The group `pgid` has ended: the reaper forgets it (its number may be reused).
    fn forget(&self, pgid: u32) {
        self.tell(&format!("-{pgid}\n"));
    }

    fn tell(&self, line: &str) {
        let mut pipe = self.pipe.lock().unwrap_or_else(|e| e.into_inner());
        // A few bytes into a pipe the reaper drains: this does not block. If the reaper is
        // gone, there is no one left to tell.
        if let Some(stdin) = pipe.as_mut()
            && stdin.write_all(line.as_bytes()).is_err()
        {
            *pipe = None;
        }
    }

    /// The agent (the leader of group `pgid`) has exited: end what it left behind, SIGTERM now
    /// and SIGKILL after the grace period, on a task of the runtime (if the proxy exits first,
    /// the reaper finishes the job).
    pub fn end_group(self: &Arc<Self>, pgid: u32) {
        if !signal_group(pgid, libc::SIGTERM) {
            self.forget(pgid);
            return;
        }
        tracing::info!("the agent left processes behind (group {pgid}): ending them");
        let reaper = self.clone();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + reaper.grace;
            while group_exists(pgid) && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            if signal_group(pgid, libc::SIGKILL) {
                tracing::warn!("processes of the agent's group {pgid} outlived SIGTERM: killed");
            }
            reaper.forget(pgid);
        });
    }
}

/// Start `acp-journal __reap --grace SECS` in a group of its own, reading our pipe.
fn spawn_reaper(grace: Duration) -> std::io::Result<ChildStdin> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .arg("__reap")
        .arg("--grace")
        .arg(grace.as_secs_f64().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()?;
    Ok(child.stdin.take().expect("piped"))
}

/// Send `signal` to every process of group `pgid`; false when the group has no process left.
pub fn signal_group(pgid: u32, signal: i32) -> bool {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return false;
    };
    // SAFETY: kill(2) has no memory-safety preconditions; a negative pid names a group.
    unsafe { libc::kill(-pgid, signal) == 0 }
}

/// Whether group `pgid` still has a process.
fn group_exists(pgid: u32) -> bool {
    signal_group(pgid, 0)
}

/// The `__reap` process: read `+PGID` / `-PGID` lines until the proxy's end of the pipe
/// closes, then end every group still listed — SIGTERM, and SIGKILL to what is left after
/// `grace` — and return.
pub fn run(input: impl BufRead, grace: Duration) {
    // SAFETY: signal(2) with SIG_IGN installs no handler code. A hangup or an interrupt meant
    // for the proxy's terminal must not stop the reaper before its work.
    unsafe {
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
    }
    let mut groups = BTreeSet::new();
    for line in input.lines() {
        let Ok(line) = line else { break };
        let (sign, number) = line.split_at(line.len().min(1));
        match (sign, number.parse::<u32>()) {
            ("+", Ok(pgid)) if pgid > 1 => {
                groups.insert(pgid);
            }
            ("-", Ok(pgid)) => {
                groups.remove(&pgid);
            }
            _ => {}
        }
    }
    groups.retain(|&pgid| signal_group(pgid, libc::SIGTERM));
    let deadline = Instant::now() + grace;
    while !groups.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        groups.retain(|&pgid| group_exists(pgid));
    }
    for pgid in groups {
        signal_group(pgid, libc::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reaper_ends_the_groups_still_listed_when_its_input_ends() {
        use std::os::unix::process::CommandExt;
        let spawn_group = || {
            Command::new("sleep")
                .arg("1000")
                .process_group(0)
                .spawn()
                .unwrap()
        };
        let mut listed = spawn_group();
        let mut forgotten = spawn_group();
        let input = format!(
            "+{}\n+{}\n-{}\nnoise\n+1\n+0\n",
            listed.id(),
            forgotten.id(),
            forgotten.id()
        );
        run(input.as_bytes(), Duration::from_millis(200));
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(listed.wait().unwrap().signal(), Some(libc::SIGTERM));
        assert_eq!(
            forgotten.try_wait().unwrap(),
            None,
            "a forgotten group is left alone"
        );
        forgotten.kill().unwrap();
        forgotten.wait().unwrap();
    }
}
