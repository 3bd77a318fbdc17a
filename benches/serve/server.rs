//! The paths measured and the processes behind them: a direct pipe to the agent, the stdio
//! proxy (`acp-journal --journal-dir <tmp> -- <agent>`), and `acp-journal serve` reached over
//! WebSocket or Streamable HTTP; plus what `/proc` tells of a process (CPU ticks, RSS).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::client::{Client, Endpoint};
use crate::roles::{PROXY, PathKind, extra_proxy_args, me};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The agent on pipes, no proxy.
    Direct,
    /// (a) The stdio proxy on pipes: the baseline.
    Stdio,
    /// (b) `serve`, WebSocket.
    Ws,
    /// (c) `serve`, Streamable HTTP (the connection's SSE stream).
    Http,
}

impl Target {
    pub fn name(self) -> &'static str {
        match self {
            Target::Direct => "direct pipe (no proxy)",
            Target::Stdio => "(a) stdio proxy",
            Target::Ws => "(b) serve, WebSocket",
            Target::Http => "(c) serve, HTTP+SSE",
        }
    }
}

/// A process in front of (or being) an agent role of this binary, with one client connected.
pub struct Running {
    pub target: Target,
    /// The process measured: the proxy or serve (the agent itself for [`Target::Direct`]).
    pub pid: u32,
    child: Option<tokio::process::Child>,
    serve: Option<Serve>,
    _store: Option<tempfile::TempDir>,
}

/// Start `target` in front of the agent `role` (this binary's arguments) and connect a client
/// (initialized, with a session).
pub async fn start(target: Target, role: &[String]) -> (Running, Client) {
    let agent: Vec<String> = std::iter::once(me()).chain(role.iter().cloned()).collect();
    match target {
        Target::Direct | Target::Stdio => {
            let kind = match target {
                Target::Direct => PathKind::Direct,
                _ => PathKind::Journal,
            };
            let store = kind
                .journals()
                .then(|| tempfile::tempdir().expect("tempdir"));
            let mut cmd = tokio::process::Command::from(
                kind.command(&agent, store.as_ref().map(|d| d.path())),
            );
            cmd.kill_on_drop(true);
            let mut child = cmd.spawn().expect("spawn the path");
            let pid = child.id().expect("a pid");
            let stdin = child.stdin.take().expect("piped");
            let stdout = child.stdout.take().expect("piped");
            let client = Client::pipe(stdin, stdout).await;
            let running = Running {
                target,
                pid,
                child: Some(child),
                serve: None,
                _store: store,
            };
            (running, client)
        }
        Target::Ws | Target::Http => {
            let serve = Serve::start(&agent);
            let client = match target {
                Target::Ws => Client::ws(&serve.endpoint).await,
                _ => Client::http(&serve.endpoint).await,
            };
            let running = Running {
                target,
                pid: serve.pid(),
                child: None,
                serve: Some(serve),
                _store: None,
            };
            (running, client)
        }
    }
}

impl Running {
    /// Close the client and end the process.
    pub async fn finish(mut self, client: Client) {
        client.close().await;
        if let Some(mut child) = self.child.take() {
            match tokio::time::timeout(Duration::from_secs(20), child.wait()).await {
                Ok(Ok(status)) => assert!(
                    status.success(),
                    "{} exited with {status}",
                    self.target.name()
                ),
                _ => panic!("{} did not exit after its stdin closed", self.target.name()),
            }
        }
        if let Some(serve) = self.serve.take() {
            serve.stop();
        }
    }
}

/// An `acp-journal serve` process on a loopback port chosen by the kernel, with a fresh store.
pub struct Serve {
    child: std::process::Child,
    pub endpoint: Endpoint,
    _store: tempfile::TempDir,
}

impl Serve {
    /// Start `serve` in front of `agent` and wait for the address it logs.
    pub fn start(agent: &[String]) -> Serve {
        let store = tempfile::tempdir().expect("tempdir");
        let token = format!(
            "bench-{}-{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos()
        );
        let log = std::env::var("ACP_JOURNAL_LOG")
            .unwrap_or_else(|_| "warn,acp_journal::cmd::serve=info".into());
        let mut child = Command::new(PROXY)
            .env("ACP_JOURNAL_TOKEN", &token)
            .env("ACP_JOURNAL_LOG", log)
            .env("NO_COLOR", "1")
            .arg("--journal-dir")
            .arg(store.path())
            .arg("serve")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .args(extra_proxy_args())
            .arg("--")
            .args(agent)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn acp-journal serve");
        // Its log: the address first, then passed on (warnings matter: a dropped client).
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().expect("piped");
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                if let Some(at) = line.find("serving ACP at http://") {
                    let url = &line[at + "serving ACP at http://".len()..];
                    let authority = url.split('/').next().unwrap_or_default().to_string();
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(authority);
                    }
                } else if !line.contains("token: from") {
                    eprintln!("bench: [serve] {line}");
                }
            }
        });
        let authority = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(a) => a,
            Err(_) => {
                let _ = child.kill();
                panic!("acp-journal serve did not log its address within 30 s");
            }
        };
        Serve {
            child,
            endpoint: Endpoint { authority, token },
            _store: store,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then SIGKILL if it is still there after 10 s.
    pub fn stop(mut self) {
        // SAFETY: kill(2) on our own child's pid, not yet waited for.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        for _ in 0..1000 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        eprintln!("bench: serve did not stop within 10 s of SIGTERM: killing it");
    }
}

impl Drop for Serve {
    /// Never left behind (a failed measurement unwinds through here).
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// CPU ticks (user + system, all threads) of process `pid`.
pub fn ticks(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| crate::measure::stat_ticks(&s).map(|(_, t)| t))
        .unwrap_or(0)
}

/// Microseconds per clock tick.
pub fn tick_us() -> f64 {
    // SAFETY: sysconf has no preconditions.
    1e6 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64
}

/// A `Vm…:` figure (KiB) of `/proc/PID/status`: `VmRSS`, `VmHWM`.
pub fn vm_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}
