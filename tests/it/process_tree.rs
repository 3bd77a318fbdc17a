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
