//! The agent's whole process tree ends with it. The agent runs in a process group of its own
//! (the agent module spawns it so); whatever it starts (MCP servers, tools, a `sleep &` in a wrapper
//! script) is in that group unless it leaves it (`setsid`, `setpgid`). When the agent exits —
//! on its own, killed, or to be restarted — the rest of its group gets SIGTERM, then SIGKILL
//! after `--grace` ([`Reaper::end_group`]). Only processes proven to be of the group the proxy
//! started are signalled, one by one ([`super::group`]): never a group by a number that may
//! have been given to another since.
//!
//! A proxy killed with SIGKILL can do nothing, so a small process of ours does it: the reaper
//! (`acp-journal __reap`, started once per proxy, in a group of its own so a terminal's
//! Ctrl-C does not reach it). The proxy tells it each group it starts (`+PGID START`: the
//! leader's number and start time), the processes a group's leader left when it exited
//! (`=PGID START PID:START…`: the leader is reaped then, and these prove the group ours) and
//! each group that has ended (`-PGID START`), one line each, over a pipe only the proxy holds.
//! When that pipe closes — the proxy exited, however it died — the reaper ends every group still
//! listed, its leader included (SIGTERM, then SIGKILL after the grace period), and exits. Without a reaper (it could not start, or the system has
//! no pidfds), the agent gets SIGKILL from the kernel when the proxy dies
//! (`PR_SET_PDEATHSIG`), and what it started is left alone.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::group::{self, Group, Members};

/// The proxy's side of the reaper: where it lists the agents' process groups.
#[derive(Debug)]
pub struct Reaper {
    /// The reaper's stdin; `None` when it could not be started (groups still end when the
    /// proxy exits normally, not when it is killed with SIGKILL).
    pipe: Mutex<Option<ChildStdin>>,
    grace: Duration,
}

impl Reaper {
    /// Start the reaper process (this binary's `__reap`). If that fails, or this system has no
    /// pidfds, a warning is logged and the proxy goes on without it.
    pub fn start(grace: Duration) -> Arc<Reaper> {
        let pipe = match group::pidfd_open(std::process::id()) {
            None => {
                tracing::warn!(
                    "this system has no pidfds (Linux 5.3 and later): the processes the agent starts are not ended with it"
                );
                None
            }
            Some(_) => match spawn_reaper(grace) {
                Ok(pipe) => Some(pipe),
                Err(e) => {
                    tracing::warn!(
                        "cannot start the reaper process ({e}): if the proxy is killed with SIGKILL, the processes its agent started will outlive it"
                    );
                    None
                }
            },
        };
        Arc::new(Reaper {
            pipe: Mutex::new(pipe),
            grace,
        })
    }

    /// Whether the reaper process runs: it ends the agent's group if the proxy dies.
    pub fn is_running(&self) -> bool {
        self.pipe.lock().is_some()
    }

    /// The group was started: the reaper ends it if the proxy dies.
    pub fn watch(&self, group: Group) {
        self.tell(&format!("+{} {}\n", group.pgid, group.start));
    }

    /// The group's leader has exited and left `members`.
    fn left(&self, members: &Members) {
        let group = members.group();
        let mut line = format!("={} {}", group.pgid, group.start);
        for (pid, start) in members.list() {
            line.push_str(&format!(" {pid}:{start}"));
        }
        line.push('\n');
        self.tell(&line);
    }

    /// The group has ended: the reaper forgets it.
    fn forget(&self, group: Group) {
        self.tell(&format!("-{} {}\n", group.pgid, group.start));
    }

    fn tell(&self, line: &str) {
        let mut pipe = self.pipe.lock();
        // A few bytes into a pipe the reaper drains: this does not block. If the reaper is
        // gone, there is no one left to tell.
        if let Some(stdin) = pipe.as_mut()
            && stdin.write_all(line.as_bytes()).is_err()
        {
            *pipe = None;
        }
    }

    /// The agent (the leader of the group) has exited and left `members`: end them, SIGTERM
    /// now and SIGKILL after the grace period, on a thread of the runtime's (if the proxy exits
    /// first, the reaper finishes the job).
    pub fn end_group(self: &Arc<Self>, members: Members) {
        let group = members.group();
        if members.is_empty() {
            self.forget(group);
            return;
        }
        self.left(&members);
        let pgid = group.pgid;
        tracing::info!("the agent left processes behind (group {pgid}): ending them");
        let reaper = self.clone();
        tokio::task::spawn_blocking(move || {
            if group::end(vec![members], reaper.grace).is_empty() {
                tracing::info!("the processes the agent left behind (group {pgid}) have ended");
            } else {
                tracing::warn!("processes of the agent's group {pgid} outlived SIGTERM: killed");
            }
            reaper.forget(group);
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

/// The `__reap` process: read `+PGID START`, `=PGID START PID:START…` and `-PGID START` lines
/// until the proxy's end of the pipe closes, then end every group still listed — SIGTERM, and
/// SIGKILL to what is left after `grace`, to the processes proven of each group — and return.
pub fn run(input: impl BufRead, grace: Duration) {
    // SAFETY: signal(2) with SIG_IGN installs no handler code. A hangup or an interrupt meant
    // for the proxy's terminal must not stop the reaper before its work.
    unsafe {
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
    }
    // Each group still listed, with the processes its exited leader left (if told).
    let mut groups: BTreeMap<(u32, u64), Vec<(u32, u64)>> = BTreeMap::new();
    for line in input.lines() {
        let Ok(line) = line else { break };
        let (sign, rest) = line.split_at(line.len().min(1));
        let mut words = rest.split(' ');
        let (Some(Ok(pgid)), Some(Ok(start))) = (
            words.next().map(str::parse::<u32>),
            words.next().map(str::parse::<u64>),
        ) else {
            continue;
        };
        let group = (pgid, start);
        match sign {
            "+" if pgid > 1 => {
                groups.insert(group, Vec::new());
            }
            "=" => {
                if let Some(left) = groups.get_mut(&group) {
                    *left = words
                        .filter_map(|w| w.split_once(':'))
                        .filter_map(|(pid, start)| Some((pid.parse().ok()?, start.parse().ok()?)))
                        .collect();
                }
            }
            "-" => {
                groups.remove(&group);
            }
            _ => {}
        }
    }
    let listed = groups
        .into_iter()
        .map(|((pgid, start), left)| Members::known(Group { pgid, start }, &left))
        .filter(|members| !members.is_empty())
        .collect();
    group::end(listed, grace);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reaper_ends_the_groups_still_listed_when_its_input_ends() {
        use std::os::unix::process::CommandExt;
        let spawn_group = || {
            let child = Command::new("sleep")
                .arg("1000")
                .process_group(0)
                .spawn()
                .unwrap();
            let group = Group::of_leader(child.id()).unwrap();
            (child, group)
        };
        let (mut listed, a) = spawn_group();
        let (mut forgotten, b) = spawn_group();
        let (mut stranger, c) = spawn_group();
        // The stranger has the number of a group listed with another start time: not ours.
        let input = format!(
            "+{} {}\n+{} {}\n-{} {}\nnoise\n+1 0\n+0 0\n+{} {}\n",
            a.pgid,
            a.start,
            b.pgid,
            b.start,
            b.pgid,
            b.start,
            c.pgid,
            c.start + 1
        );
        run(input.as_bytes(), Duration::from_millis(200));
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(listed.wait().unwrap().signal(), Some(libc::SIGTERM));
        for (child, what) in [
            (&mut forgotten, "a forgotten group"),
            (&mut stranger, "a stranger"),
        ] {
            assert_eq!(child.try_wait().unwrap(), None, "{what} is left alone");
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    #[test]
    fn a_group_whose_leader_is_gone_is_ended_through_the_members_it_left() {
        use std::io::Read;
        use std::os::unix::process::CommandExt;
        // A leader that starts a member and tells its pid, then is killed and reaped: the
        // member is left in the group, which only the `=` line proves ours.
        let mut leader = Command::new("sh")
            .args([
                "-c",
                "sleep 1000 </dev/null >/dev/null 2>&1 & echo $!; exec sleep 1000",
            ])
            .process_group(0)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let group = Group::of_leader(leader.id()).unwrap();
        let mut out = leader.stdout.take().unwrap();
        let mut line = String::new();
        while !line.ends_with('\n') {
            let mut byte = [0u8; 1];
            out.read_exact(&mut byte).unwrap();
            line.push(char::from(byte[0]));
        }
        let member: u32 = line.trim().parse().unwrap();
        let left = Members::find(group).list();
        assert!(left.iter().any(|(pid, _)| *pid == member), "{left:?}");
        leader.kill().unwrap();
        leader.wait().unwrap();
        let mut input = format!(
            "+{} {}\n={} {}",
            group.pgid, group.start, group.pgid, group.start
        );
        for (pid, start) in left {
            input.push_str(&format!(" {pid}:{start}"));
        }
        input.push('\n');
        run(input.as_bytes(), Duration::from_millis(200));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::fs::read_to_string(format!("/proc/{member}/stat"))
            .is_ok_and(|s| !s.contains(") Z "))
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the member outlived the reaper"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
