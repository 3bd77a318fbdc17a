//! The agent's whole process tree ends with it, through the built binary with a real peer (the
//! Python SDK's echo agent) behind a wrapper script that starts a child of its own first, as
//! agents start MCP servers and tools:
//!
//! - `*_when_the_session_ends`: the editor closes the proxy's stdin.
//! - `*_after_every_respawn`: the agent is killed with SIGKILL; its child ends while the
//!   proxy, with a restarted agent, goes on; a child that ignores SIGTERM gets SIGKILL after
//!   `--grace`.
//! - `*_after_kill_9_of_the_proxy`: the reaper process ends the group, SIGKILL included.

use std::path::Path;

use crate::respawn::{agent_pid, kill9};
use crate::util::{Peers, TestClient, proxied, wait_gone};

/// The echo agent behind `sh`, which first starts `sleep 1000` in the background (ignoring
/// SIGTERM when `stubborn`) and appends its pid to `pids`.
fn agent_with_a_child(pids: &Path, stubborn: bool) -> Vec<String> {
    let trap = if stubborn { "trap '' TERM; " } else { "" };
    let script = format!(
        "({trap}exec sleep 1000) </dev/null >/dev/null 2>&1 & echo $! >> '{}'; exec \"$@\"",
        pids.display()
    );
    let mut argv = vec!["sh".into(), "-c".into(), script, "sh".into()];
    argv.extend(Peers::get().py_echo_agent());
    argv
}

/// The pids the wrapper wrote, waiting (up to 10 s) until there are `n`.
fn children(pids: &Path, n: usize) -> Vec<i32> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let listed: Vec<i32> = std::fs::read_to_string(pids)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if listed.len() >= n {
            return listed;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the wrapper started {listed:?}, not {n} children"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A proxy (`--grace 2`) in front of the wrapped agent, with one session that took a prompt.
fn started(pids: &Path, stubborn: bool) -> (tempfile::TempDir, TestClient, String) {
    let store = tempfile::tempdir().unwrap();
    let agent = agent_with_a_child(pids, stubborn);
    let mut client = TestClient::spawn(&proxied(store.path(), &agent));
    let session = client.start_session("/tmp");
    let answer = client.prompt(&session, "hello");
    assert!(answer.get("result").is_some(), "{answer}");
    (store, client, session)
}

/// Kill what a failing test leaves behind.
fn cleanup(pids: &[i32]) {
    for &pid in pids {
        kill9(pid);
    }
}

#[test]
fn the_agents_child_ends_when_the_session_ends() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let (_store, client, _session) = started(&pids, false);
    let child = children(&pids, 1);
    let (code, _) = client.finish();
    assert_eq!(code, 0);
    let gone = wait_gone(child[0]);
    cleanup(&child);
    assert!(gone, "the agent's child outlived the proxy");
}

#[test]
fn the_agents_child_ends_after_every_respawn() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let (_store, mut client, session) = started(&pids, true);
    let proxy = client.child.id();
    let agent = agent_pid(proxy, None);
    kill9(agent);
    agent_pid(proxy, Some(agent));
    // The restarted agent answers; the first agent's child (which ignores SIGTERM) is gone,
    // killed after --grace, while the proxy goes on.
    let answer = client.prompt(&session, "after the restart");
    assert!(answer.get("result").is_some(), "{answer}");
    let listed = children(&pids, 2);
    let first_gone = wait_gone(listed[0]);
    let second_alive = !gone_now(listed[1]);
    let (code, _) = client.finish();
    let second_gone = wait_gone(listed[1]);
    cleanup(&listed);
    assert!(first_gone, "the killed agent's child outlived it");
    assert!(second_alive, "the restarted agent's child ended early");
    assert_eq!(code, 0);
    assert!(
        second_gone,
        "the restarted agent's child outlived the proxy"
    );
}

#[test]
fn the_agents_child_ends_after_kill_9_of_the_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let (_store, mut client, _session) = started(&pids, true);
    let proxy = client.child.id();
    let agent = agent_pid(proxy, None);
    let child = children(&pids, 1);
    kill9(proxy as i32);
    let _ = client.child.wait();
    let agent_gone = wait_gone(agent);
    let child_gone = wait_gone(child[0]);
    cleanup(&[agent, child[0]]);
    assert!(agent_gone, "the agent outlived the proxy");
    assert!(
        child_gone,
        "the agent's child outlived the proxy (the reaper did not end it)"
    );
}

/// Whether `pid` is gone or a zombie right now.
fn gone_now(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.contains(") Z "))
}

/// The proxy in a PID namespace of its own (`unshare --pid --fork --mount-proc`, as root), under
/// an init that reaps every orphan, so that a process number can be made to be reused at will
/// (`/proc/sys/kernel/ns_last_pid`, as CRIU does). The proxy's stdio is the editor's.
struct Namespace {
    editor: TestClient,
    /// The init's pid outside the namespace.
    init: u32,
}

/// The init: run the command given, reap every process that ends, forever.
const INIT: &str = "import os, subprocess, sys, time
subprocess.Popen(sys.argv[1:])
while True:
    try:
        os.waitpid(-1, 0)
    except ChildProcessError:
        time.sleep(0.05)
";

impl Namespace {
    fn start(argv: &[String]) -> Namespace {
        crate::util::full_tier("a PID namespace of its own (unshare, as root)");
        let mut wrapped: Vec<String> = ["unshare", "--pid", "--fork", "--mount-proc", "--"]
            .map(String::from)
            .to_vec();
        wrapped.extend([crate::util::python(), "-c".into(), INIT.into()]);
        wrapped.extend(argv.iter().cloned());
        let editor = TestClient::spawn(&wrapped);
        let unshare = editor.child.id();
        let deadline = std::time::Instant::now() + crate::util::TIMEOUT;
        let init = loop {
            let children =
                std::fs::read_to_string(format!("/proc/{unshare}/task/{unshare}/children"))
                    .unwrap_or_default();
            if let Some(pid) = children.split_whitespace().find_map(|p| p.parse().ok()) {
                break pid;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no init under unshare"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        Namespace { editor, init }
    }

    /// `script` run by `sh` inside the namespace: its output, trimmed.
    fn sh(&self, script: &str) -> String {
        let out = std::process::Command::new("nsenter")
            .args([
                "-t",
                &self.init.to_string(),
                "-p",
                "-m",
                "--",
                "sh",
                "-c",
                script,
            ])
            .output()
            .expect("nsenter (util-linux)");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Whether `pid` (inside) is alive and not a zombie.
    fn alive(&self, pid: i32) -> bool {
        self.sh(&format!(
            "grep -v '^State:.*Z' /proc/{pid}/status | grep -c '^State:'"
        )) == "1"
    }

    /// A stranger: `sleep`, the leader of a new session and group, given the number `pid`
    /// (free by then): `ns_last_pid` set to the number before it, tried until it takes.
    fn stranger_with_the_number(&self, pid: i32) -> i32 {
        let script = format!(
            "echo {} > /proc/sys/kernel/ns_last_pid; setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!",
            pid - 1
        );
        for _ in 0..100 {
            let got: i32 = self.sh(&script).parse().unwrap();
            if got == pid {
                return pid;
            }
            self.sh(&format!("kill -KILL {got}"));
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!("the number {pid} was not given again");
    }

    fn log(&self) -> String {
        String::from_utf8_lossy(&self.editor.stderr.lock().unwrap()).into_owned()
    }

    /// The proxy's log once it contains one of `wanted`.
    fn log_until(&self, wanted: &[&str]) -> String {
        let deadline = std::time::Instant::now() + crate::util::TIMEOUT;
        loop {
            let log = self.log();
            if wanted.iter().any(|w| log.contains(w)) {
                return log;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no {wanted:?} in: {log}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        // The init's end ends every process of the namespace.
        kill9(self.init as i32);
    }
}

/// The `n`th agent's pid and its child's, inside (as the wrapper wrote them).
fn agent_and_child(pids: &Path, n: usize) -> (i32, i32) {
    let deadline = std::time::Instant::now() + crate::util::TIMEOUT;
    loop {
        let text = std::fs::read_to_string(pids).unwrap_or_default();
        if let Some(line) = text.lines().nth(n) {
            let mut both = line.split_whitespace().map(|p| p.parse().unwrap());
            return (both.next().unwrap(), both.next().unwrap());
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no agent {n} in {text:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_group_number_given_to_a_stranger_is_never_signalled() {
    let dir = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    // The agent's wrapper starts a child that ignores SIGTERM, and notes both pids.
    let script = format!(
        "(trap '' TERM; exec sleep 1000) </dev/null >/dev/null 2>&1 & echo $$ $! >> '{}'; exec \"$@\"",
        pids.display()
    );
    let mut agent = vec!["sh".into(), "-c".into(), script, "sh".into()];
    agent.extend(Peers::get().py_echo_agent());
    let argv = proxied(store.path(), &agent);
    let mut ns = Namespace::start(&argv);
    ns.editor.initialize();

    // The proxy ends what its killed agent left behind. Meanwhile that child ends, and the
    // group's number goes to a stranger leading a group of its own: the proxy must leave it be.
    let (leader, child) = agent_and_child(&pids, 0);
    ns.sh(&format!("kill -KILL {leader}"));
    ns.log_until(&[&format!("the agent left processes behind (group {leader})")]);
    ns.sh(&format!("kill -KILL {child}"));
    let stranger = ns.stranger_with_the_number(leader);
    let log = ns.log_until(&[
        &format!("(group {leader}) have ended"),
        &format!("the agent's group {leader} outlived SIGTERM"),
    ]);
    assert!(ns.alive(stranger), "the proxy signalled a stranger: {log}");

    // The same when the proxy is killed while it ends a group: the reaper leaves it be too.
    let (leader, child) = agent_and_child(&pids, 1);
    ns.sh(&format!("kill -KILL {leader}"));
    ns.log_until(&[&format!("the agent left processes behind (group {leader})")]);
    ns.sh(&format!("kill -KILL {child}"));
    let stranger = ns.stranger_with_the_number(leader);
    ns.sh("for p in $(cat /proc/1/task/1/children); do grep -q journal-dir /proc/$p/cmdline && kill -KILL $p; done");
    // The reaper's work is done once it has exited.
    let reapers = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '^[^ ]*acp-journal __reap'";
    let deadline = std::time::Instant::now() + crate::util::TIMEOUT;
    while ns.sh(reapers) != "0" {
        assert!(
            std::time::Instant::now() < deadline,
            "the reaper did not end"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(ns.alive(stranger), "the reaper signalled a stranger");
    // And the third agent's child, which ignores SIGTERM, was ended by the reaper.
    let (_, child) = agent_and_child(&pids, 2);
    assert!(!ns.alive(child), "the reaper left the third agent's child");
    let _ = ns.editor.child.kill();
}
