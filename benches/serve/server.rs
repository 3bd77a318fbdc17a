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
    /// (c2) The same over HTTP/2 by prior knowledge (h2c): one socket, 64 KiB windows.
    Http2,
    /// (d) The TypeScript SDK 2.4.0's own server (`tests/agents/ts_sdk_server.mjs`), WebSocket.
    Sdk,
}

impl Target {
    pub fn name(self) -> &'static str {
        match self {
            Target::Direct => "direct pipe (no proxy)",
            Target::Stdio => "(a) stdio proxy",
            Target::Ws => "(b) serve, WebSocket",
            Target::Http => "(c) serve, HTTP+SSE",
            Target::Http2 => "(c2) serve, HTTP/2+SSE (h2c)",
            Target::Sdk => "(d) TS SDK 2.4.0 server, WebSocket",
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
        Target::Sdk => {
            let serve = Serve::start_sdk(&agent);
            let client = Client::ws(&serve.endpoint).await;
            let running = Running {
                target,
                pid: serve.pid(),
                child: None,
                serve: Some(serve),
                _store: None,
            };
            (running, client)
        }
        Target::Ws | Target::Http | Target::Http2 => {
            let serve = Serve::start(&agent);
            let client = match target {
                Target::Ws => Client::ws(&serve.endpoint).await,
                Target::Http2 => Client::http2(&serve.endpoint).await,
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
    /// CPU ticks of the measured process; for (d), the node server's plus its children's (the
    /// agent it started for this connection).
    pub fn ticks(&self) -> u64 {
        match self.target {
            Target::Sdk => ticks(self.pid) + children(self.pid).into_iter().map(ticks).sum::<u64>(),
            _ => ticks(self.pid),
        }
    }

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

/// An `acp-journal serve` process on a loopback port chosen by the kernel, with a fresh store
/// (or, from [`Serve::start_sdk`], the TypeScript SDK's server, no store).
pub struct Serve {
    child: std::process::Child,
    pub endpoint: Endpoint,
    _store: Option<tempfile::TempDir>,
}

/// The TypeScript SDK 2.4.0's server script, copied beside the SDK it imports (as the tests'
/// `Peers::ts_sdk_server` does), as a command line; `Err` says why (d) cannot run.
pub fn sdk_server() -> Result<Vec<String>, String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let peers = std::env::var_os("ACP_JOURNAL_PEERS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root.join(".peers"));
    let sdk = peers.join("node-v2/node_modules/@agentclientprotocol/sdk");
    if !peers.join(".stamp").exists() || !sdk.exists() {
        return Err(format!(
            "the reference peers (TypeScript SDK 2.4.0 in {}) are not installed: run scripts/install-peers.sh",
            peers.join("node-v2").display()
        ));
    }
    let node_ok = Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !node_ok {
        return Err("`node` is not on PATH".into());
    }
    let script = peers.join("node-v2/ts_sdk_server.mjs");
    std::fs::copy(root.join("tests/agents/ts_sdk_server.mjs"), &script)
        .map_err(|e| format!("copying tests/agents/ts_sdk_server.mjs beside the SDK: {e}"))?;
    Ok(vec!["node".into(), script.display().to_string()])
}

/// The direct children of process `pid` (from `/proc/*/stat`).
fn children(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    let close = s.rfind(')')?;
                    s[close + 1..]
                        .split_whitespace()
                        .nth(1)?
                        .parse::<u32>()
                        .ok()
                })
                == Some(pid)
        })
        .collect()
}

impl Serve {
    /// Start `serve` in front of `agent` and wait for the address it logs.
    pub fn start(agent: &[String]) -> Serve {
        let store = tempfile::tempdir().expect("tempdir");
        let token = token();
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
            _store: Some(store),
        }
    }

    /// Start the TypeScript SDK's server (see [`sdk_server`]) in front of `agent` (one agent
    /// process per connection) and wait for the `listening` line it prints.
    pub fn start_sdk(agent: &[String]) -> Serve {
        let command = sdk_server().expect("the TypeScript SDK's server");
        let token = token();
        let mut child = Command::new(&command[0])
            .args(&command[1..])
            .args(["--port", "0", "--token", &token, "--"])
            .args(agent)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the TypeScript SDK's server");
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped");
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let msg: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
                if let (Some(port), Some(tx)) = (msg["port"].as_u64(), tx.take()) {
                    let _ = tx.send(format!("127.0.0.1:{port}"));
                }
            }
        });
        // Its diagnostics, passed on except the per-connection agent starts and exits.
        let stderr = child.stderr.take().expect("piped");
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                if !line.contains("exited (") && !line.contains(": agent pid ") {
                    eprintln!("bench: [ts-sdk-server] {line}");
                }
            }
        });
        let authority = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(a) => a,
            Err(_) => {
                let _ = child.kill();
                panic!("the TypeScript SDK's server did not print its port within 30 s");
            }
        };
        Serve {
            child,
            endpoint: Endpoint { authority, token },
            _store: None,
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
        eprintln!("bench: server did not stop within 10 s of SIGTERM: killing it");
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

/// A fresh bearer token.
fn token() -> String {
    format!(
        "bench-{}-{:x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos()
    )
}

/// CPU ticks (user + system, all threads) of process `pid`.
pub fn ticks(pid: u32) -> u64 {
    crate::procfs::process_ticks(pid)
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
