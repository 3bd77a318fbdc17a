//! The agent as the main loop sees it ([`Agent`]: its pipes and its [`Process`]), and the real
//! one: spawning the subprocess in a process group of its own so it — and what it starts —
//! dies with us ([`super::reaper`]), signalling that group, its exit code.

use std::ffi::OsString;
use std::future::Future;
use std::io;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::process::{Child, Command};

use super::pipes::{Output, Reader};
use super::reaper::{Reaper, signal_group};

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
    /// Its process group (its pid).
    group: Option<u32>,
    reaper: Arc<Reaper>,
}

impl Process for AgentProcess {
    async fn wait(&mut self) -> io::Result<i32> {
        let status = self.child.wait().await?;
        if let Some(group) = self.group.take() {
            self.reaper.end_group(group);
        }
        Ok(exit_code(status))
    }

    /// The whole group gets it, as a terminal's Ctrl-C reaches every process of a job.
    fn signal(&mut self, sig: i32) {
        if let Some(group) = self.group {
            signal_group(group, sig);
        }
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
        let group = child.id();
        if let Some(group) = group {
            reaper.watch(group);
        }
        Ok(Agent {
            stdin: Output::pipe(child.stdin.take().expect("piped").into_owned_fd()?)?,
            stdout: Box::new(child.stdout.take().expect("piped")),
            stderr: Box::new(child.stderr.take().expect("piped")),
            process: AgentProcess {
                child,
                group,
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

/// Spawn the agent with piped stdio, as the leader of a new process group. On Linux it gets
/// `PR_SET_PDEATHSIG(SIGKILL)`, so it dies even if the proxy is killed with SIGKILL (and the
/// reaper ends the rest of its group). Must be called from the thread that lives as long as
/// the proxy (the parent-death signal follows the spawning thread).
///
/// # Errors
/// The spawn error (command not found, not executable).
pub fn spawn(argv: &[OsString]) -> io::Result<Child> {
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
    {
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
