//! The agent as the main loop sees it ([`Agent`]: its pipes and its [`Process`]), and the real
//! one: spawning the subprocess in a process group of its own so it — and what it starts —
//! dies with us ([`super::reaper`]), signalling that group, its exit code.
//!
//! The agent is reaped only once what it left in its group has been found: until then its
//! number, the group's, is still ours (a zombie keeps it), so signals to the group reach our
//! processes only ([`super::group`]).

use std::ffi::OsString;
use std::future::Future;
use std::io;
use std::os::fd::OwnedFd;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::unix::AsyncFd;
use tokio::process::{Child, Command};

use super::group::{self, Group, Members};
use super::pipes::{Output, Reader};
use super::reaper::Reaper;

/// The agent's end of the proxy: lines for its stdin, its stdout and stderr, its process.
pub struct Agent<P> {
    /// The agent's stdin.
    pub stdin: Output,
    /// The agent's stdout (its lines).
    pub stdout: Reader,
    /// The agent's stderr (copied to ours and journaled).
    pub stderr: Reader,
    /// Its process.
    pub process: P,
}

/// The agent's process, as the main loop drives it.
pub trait Process {
    /// Wait for it to exit: the proxy's exit code for its status (see [`exit_code`]).
    fn wait(&mut self) -> impl Future<Output = io::Result<i32>>;
    /// Send it `signal` (ignored once it has exited).
    fn signal(&mut self, signal: i32);
    /// Kill it (SIGKILL).
    fn kill(&mut self);
}

/// The real agent: the child process, leader of its own process group.
#[derive(Debug)]
pub struct AgentProcess {
    child: Child,
    /// Its group and exit, while it is not reaped (`None` without pidfds).
    leader: Option<Leader>,
    /// What it left in its group, found once it exited and before it was reaped.
    left: Option<Members>,
    reaper: Arc<Reaper>,
}

/// The agent as the leader of its group, not reaped yet.
#[derive(Debug)]
struct Leader {
    group: Group,
    /// Its pidfd: readable once it has exited, before it is reaped.
    exit: AsyncFd<OwnedFd>,
}

impl Process for AgentProcess {
    /// Cancel-safe: what it left is looked for once, after it exited and before it is reaped.
    async fn wait(&mut self) -> io::Result<i32> {
        if let Some(leader) = &self.leader {
            let _exited = leader.exit.readable().await?;
            // Exited, not reaped: the group's number is still ours while we look.
            self.left = Some(Members::find(leader.group));
            self.leader = None;
        }
        let status = self.child.wait().await?;
        if let Some(left) = self.left.take() {
            self.reaper.end_group(left);
        }
        Ok(exit_code(status))
    }

    /// The whole group gets it, as a terminal's Ctrl-C reaches every process of a job (while
    /// the agent is not reaped, so the group is the one it leads; after, nothing).
    fn signal(&mut self, sig: i32) {
        let target = match (&self.leader, self.child.id()) {
            (Some(leader), _) => -(leader.group.pgid as libc::pid_t),
            // Without pidfds: the agent alone, while it is not reaped.
            (None, Some(pid)) if self.left.is_none() => pid as libc::pid_t,
            (None, _) => return,
        };
        // SAFETY: kill(2) has no memory-safety preconditions; the target is our unreaped child
        // or the group it leads.
        unsafe { libc::kill(target, sig) };
    }

    fn kill(&mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.child.start_kill();
    }
}

impl Agent<AgentProcess> {
    /// The spawned agent ([`spawn`]) with its stdin as a non-blocking pipe on the reactor; its
    /// process group is listed with `reaper`, which ends it if the proxy dies.
    ///
    /// # Errors
    /// Making its stdin non-blocking.
    pub fn from_child(mut child: Child, reaper: Arc<Reaper>) -> io::Result<Agent<AgentProcess>> {
        // The child is not reaped: its number is the process we started.
        let leader = child.id().and_then(|pid| {
            let group = Group::of_leader(pid)?;
            let pidfd = group::pidfd_open(pid)?;
            // SAFETY: the AsyncFd owns the pidfd, open until it is dropped.
            let exit =
                unsafe { AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE) }
                    .ok()?;
            reaper.watch(group);
            Some(Leader { group, exit })
        });
        Ok(Agent {
            stdin: Output::pipe(child.stdin.take().expect("piped").into_owned_fd()?)?,
            stdout: Box::new(child.stdout.take().expect("piped")),
            stderr: Box::new(child.stderr.take().expect("piped")),
            process: AgentProcess {
                child,
                leader,
                left: None,
                reaper,
            },
        })
    }
}

/// The `SIGXFSZ` disposition the proxy was started with, restored for the agent.
static INHERITED_SIGXFSZ: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);

/// Ignore `SIGXFSZ` in the proxy, so a journal reaching a file-size limit (`ulimit -f`) fails
/// that write with `EFBIG` (the journal stops, the relay goes on) instead of killing the
/// proxy. The agent gets the disposition back ([`spawn`]).
pub fn ignore_file_size_signal() {
    // SAFETY: signal(2) with SIG_IGN installs no handler code.
    let previous = unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    if previous != libc::SIG_ERR {
        INHERITED_SIGXFSZ.store(previous, Ordering::Relaxed);
    }
}

/// Spawn the agent with piped stdio, as the leader of a new process group. Unless `reaped`
/// (a reaper ends its group if the proxy dies), on Linux it gets `PR_SET_PDEATHSIG(SIGKILL)`, so
/// it dies even if the proxy is killed with SIGKILL. Must be called from the thread that lives
/// as long as the proxy (the parent-death signal follows the spawning thread).
///
/// # Errors
/// The spawn error (command not found, not executable).
pub fn spawn(argv: &[OsString], reaped: bool) -> io::Result<Child> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no agent command given"))?;
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let sigxfsz = INHERITED_SIGXFSZ.load(Ordering::Relaxed);
    // SAFETY: signal(2) is async-signal-safe; it restores the disposition the proxy inherited.
    unsafe {
        command.pre_exec(move || {
            libc::signal(libc::SIGXFSZ, sigxfsz);
            Ok(())
        });
    }
    #[cfg(target_os = "linux")]
    if !reaped {
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: only async-signal-safe calls (prctl, getppid, _exit) run between fork and exec.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                if libc::getppid() != parent {
                    // The proxy died before the signal was armed.
                    libc::_exit(1);
                }
                Ok(())
            });
        }
    }
    command.spawn()
}

/// The proxy's exit code for the agent's status: its code, or 128 + the signal that killed it.
pub fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    }
}
