//! The agent subprocess: spawning it so it dies with us, signalling it, its exit code.

use std::ffi::OsString;
use std::io;
use std::process::{ExitStatus, Stdio};

use tokio::process::{Child, Command};

/// Spawn the agent with piped stdio. On Linux it gets `PR_SET_PDEATHSIG(SIGKILL)`, so it dies
/// even if the proxy is killed with SIGKILL. Must be called from the thread that lives as long
/// as the proxy (the parent-death signal follows the spawning thread).
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
        .kill_on_drop(true);
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

/// Send `signal` to the process `pid` (ignored if it is already gone).
pub fn signal(pid: u32, signal: i32) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
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
