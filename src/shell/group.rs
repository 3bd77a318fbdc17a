//! The agent's process group, known by more than its number, and signalled only where it is
//! provably ours.
//!
//! Process numbers are reused, a group's number with them: once the last process of a group is
//! gone, its number may become any new process's, which may lead a group of its own (a shell's
//! job, a daemon, another proxy's agent). Sending a signal to "group N" after that reaches a
//! stranger. So a group is known by its leader's number *and start time* ([`Group`], from
//! `/proc/PID/stat`: a number with another start time is another process), and its processes
//! are found and signalled one by one through pidfds ([`Members`]) — a pidfd names one process
//! for as long as it is held, never a later one with the same number — each of them proven a
//! member of our group:
//!
//! - the leader is ours while a process with its number and its start time is there (alive, or
//!   exited and not yet reaped: a zombie keeps its number);
//! - a process in the group is ours when, checked after it was seen in the group, a process
//!   already proven ours is still there and in the group: the kernel does not give a number to a
//!   new process while any process still has it as its process group ID (the number's
//!   `struct pid` is freed only when no task uses it as PID, process group or session, see
//!   `free_pid` in the kernel's `kernel/pid.c`), so the group seen was ours.
//!
//! A process of the group that shows up after every process proven ours has ended cannot be
//! told from a stranger's and is left alone. Needs Linux ≥ 5.3 (`pidfd_open`); without it the
//! group is not signalled at all.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// A process group, known by its leader's number and start time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Group {
    /// The group's number: its leader's pid.
    pub pgid: u32,
    /// The leader's start time (clock ticks after boot, `/proc/PID/stat` field 22).
    pub start: u64,
}

/// What `/proc/PID/stat` says of a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stat {
    pgrp: u32,
    start: u64,
}

impl Group {
    /// The group led by `pid`, which must be our child not reaped yet (so the number is the
    /// process we started); `None` when `/proc` does not show it.
    pub fn of_leader(pid: u32) -> Option<Group> {
        let stat = stat(pid)?;
        Some(Group {
            pgid: pid,
            start: stat.start,
        })
    }

    /// Whether its leader is still there (alive, or not yet reaped).
    fn leader_there(self) -> bool {
        stat(self.pgid).is_some_and(|s| s.start == self.start && s.pgrp == self.pgid)
    }
}

/// `/proc/PID/stat`: the process group (field 5) and start time (field 22). The command name
/// (field 2) may hold spaces and parentheses: fields are counted after its last `)`.
fn stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

fn parse_stat(text: &str) -> Option<Stat> {
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts with field 3 (the state).
    Some(Stat {
        pgrp: fields.get(2)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// A process proven a member of the group, held by a pidfd.
#[derive(Debug)]
struct Member {
    pid: u32,
    start: u64,
    fd: OwnedFd,
}

impl Member {
    /// A pidfd of `pid`, if it is (still) in `group`, started no earlier than its leader (and
    /// at `start`, when given): the stat is read again after the pidfd is opened, so the pidfd
    /// is that process's.
    fn open(pid: u32, group: Group, start: Option<u64>) -> Option<Member> {
        let seen = stat(pid)?;
        if seen.pgrp != group.pgid
            || seen.start < group.start
            || start.is_some_and(|s| s != seen.start)
        {
            return None;
        }
        let fd = pidfd_open(pid)?;
        (stat(pid) == Some(seen)).then_some(Member {
            pid,
            start: seen.start,
            fd,
        })
    }

    /// Not exited, and still in `group`.
    fn in_group(&self, group: Group) -> bool {
        !self.exited() && stat(self.pid).is_some_and(|s| s.pgrp == group.pgid)
    }

    /// The pidfd is readable once the process has exited.
    fn exited(&self) -> bool {
        let mut poll = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no wait.
        let ready = unsafe { libc::poll(&mut poll, 1, 0) };
        ready != 0
    }

    fn signal(&self, signal: i32) {
        // SAFETY: pidfd_send_signal(2) with our own pidfd and no siginfo.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.fd.as_raw_fd(),
                signal,
                std::ptr::null::<libc::siginfo_t>(),
                0u32,
            );
        }
    }
}

/// A pidfd of `pid` (`pidfd_open(2)`); `None` when there is no such process or this system
/// has no pidfds.
pub fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    let pid = libc::pid_t::try_from(pid).ok()?;
    // SAFETY: pidfd_open(2) has no memory-safety preconditions.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) };
    let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: a new descriptor, ours alone.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The processes of a [`Group`] proven ours (see the module's text).
#[derive(Debug)]
pub struct Members {
    group: Group,
    known: Vec<Member>,
}

impl Members {
    /// The group's processes now, proven ours by its leader: none when the leader is gone.
    pub fn find(group: Group) -> Members {
        Members::known(group, &[])
    }

    /// The group's processes now, proven ours by its leader or by those of `listed` (pid and
    /// start time, as [`Members::list`] gave them) that are still there.
    pub fn known(group: Group, listed: &[(u32, u64)]) -> Members {
        let known = listed
            .iter()
            .filter_map(|&(pid, start)| Member::open(pid, group, Some(start)))
            .collect();
        let mut members = Members { group, known };
        members.refresh();
        members
    }

    /// Each member's pid and start time.
    pub fn list(&self) -> Vec<(u32, u64)> {
        self.known.iter().map(|m| (m.pid, m.start)).collect()
    }

    /// The group.
    pub fn group(&self) -> Group {
        self.group
    }

    /// Whether no process proven ours is left.
    pub fn is_empty(&self) -> bool {
        self.known.is_empty()
    }

    /// Forget the members that exited or left the group; add the processes now in it, when a
    /// process proven ours (the leader, a member) is still in it once they were seen. The number
    /// of members added.
    fn refresh(&mut self) -> usize {
        let group = self.group;
        self.known.retain(|m| m.in_group(group));
        let anchored =
            |known: &[Member]| group.leader_there() || known.iter().any(|m| m.in_group(group));
        if !anchored(&self.known) {
            return 0;
        }
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return 0;
        };
        let seen: Vec<Member> = entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| !self.known.iter().any(|m| m.pid == *pid))
            .filter_map(|pid| Member::open(pid, group, None))
            .collect();
        if seen.is_empty() || !anchored(&self.known) {
            return 0;
        }
        let added = seen.len();
        self.known.extend(seen);
        added
    }

    /// Send `signal` to every member.
    fn signal(&self, signal: i32) {
        for member in &self.known {
            member.signal(signal);
        }
    }
}

/// End every group of `all`: SIGTERM to each member (and to members found later), then SIGKILL
/// to what is left after `grace`. Blocks until done; the groups that outlived SIGTERM.
pub fn end(mut all: Vec<Members>, grace: Duration) -> Vec<Group> {
    for members in &all {
        members.signal(libc::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        for members in &mut all {
            // Those found since (added last) get the SIGTERM they missed.
            let added = members.refresh();
            let known = &members.known;
            for member in &known[known.len() - added..] {
                member.signal(libc::SIGTERM);
            }
        }
        all.retain(|m| !m.is_empty());
        if all.is_empty() {
            return Vec::new();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut stubborn = Vec::new();
    for members in &mut all {
        members.refresh();
        if !members.is_empty() {
            members.signal(libc::SIGKILL);
            stubborn.push(members.group);
        }
    }
    stubborn
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_is_read_after_the_last_parenthesis() {
        let line = "4242 (a) b (c)) S 1 4240 4240 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10\n";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                pgrp: 4240,
                start: 987654
            })
        );
        assert_eq!(parse_stat("4242 (x) S 1"), None);
        assert_eq!(parse_stat(""), None);
    }

    #[test]
    fn a_group_is_ended_member_by_member_and_a_stranger_with_its_number_is_not() {
        use std::os::unix::process::CommandExt;
        use std::process::Command;
        // Our group: a leader (not reaped by us while we look) and a member that ignores SIGTERM.
        let mut leader = Command::new("sh")
            .args(["-c", "(trap '' TERM; exec sleep 1000) & exec sleep 1000"])
            .process_group(0)
            .spawn()
            .unwrap();
        let group = Group::of_leader(leader.id()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut members = Members::find(group);
        while members.known.len() < 2 {
            assert!(Instant::now() < deadline, "the member did not show");
            std::thread::sleep(Duration::from_millis(10));
            members.refresh();
        }
        let stubborn = end(vec![members], Duration::from_millis(300));
        assert_eq!(stubborn, vec![group], "the member outlived SIGTERM");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(leader.wait().unwrap().signal(), Some(libc::SIGTERM));

        // Another start time under the same number is another process: nothing is ours.
        let other = Group {
            pgid: std::process::id(),
            start: 0,
        };
        assert!(Members::find(other).is_empty());
    }
}
