//! search, stats, prune, repair, completions and the man page on recorded journals.

use crate::util::{first_entry, run_cli, sample_copy};

#[test]
fn search_finds_messages_with_session_and_turn() {
    let store = sample_copy("typescript-agent");
    let dir = store.path().to_str().unwrap();
    let (code, out, _) = run_cli(&["search", "--journal-dir", dir, "Modifying critical"]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines.len(),
        4,
        "the tool call and its permission request, per turn: {out}"
    );
    assert!(lines[0].contains("turn 1") && lines.last().unwrap().contains("turn 2"));
    let (code, out, _) = run_cli(&["search", "--journal-dir", dir, "no such text anywhere"]);
    assert_eq!((code, out.as_str()), (1, ""));
    let (code, _, err) = run_cli(&["search", "--journal-dir", dir, "(unclosed"]);
    assert_eq!(code, 2);
    assert!(err.contains("bad pattern"), "{err}");
}

#[test]
fn stats_counts_by_kind_and_direction() {
    let store = sample_copy("typescript-agent");
    let (code, out, _) = run_cli(&["stats", "--journal-dir", store.path().to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.contains("agent    session/request_permission"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("client   session/prompt") && l.contains(" 2 ")),
        "{out}"
    );
    assert!(out.contains("1 sessions, 2 turns"), "{out}");
}

#[test]
fn prune_removes_old_sessions_unless_dry_run_or_kept() {
    let store = sample_copy("python-echo-agent");
    let dir = store.path().to_str().unwrap();
    let (_, out, _) = run_cli(&[
        "prune",
        "--journal-dir",
        dir,
        "--older-than",
        "1s",
        "--dry-run",
    ]);
    assert!(
        out.contains("would remove") && out.contains("1 sessions"),
        "{out}"
    );
    let (_, listed, _) = run_cli(&["list", "--journal-dir", dir, "--json"]);
    assert_ne!(listed.trim(), "[]", "a dry run removes nothing");
    let (_, out, _) = run_cli(&[
        "prune",
        "--journal-dir",
        dir,
        "--older-than",
        "1s",
        "--keep",
        "1",
    ]);
    assert!(out.contains("0 sessions"), "{out}");
    let (_, out, _) = run_cli(&["prune", "--journal-dir", dir, "--older-than", "1s"]);
    assert!(out.contains("removed"), "{out}");
    let (_, listed, _) = run_cli(&["list", "--journal-dir", dir, "--json"]);
    assert_eq!(listed.trim(), "[]");
    let (code, _, err) = run_cli(&["prune", "--journal-dir", dir, "--older-than", "3 parsecs"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn repair_salvages_a_damaged_segment_into_a_clean_copy() {
    let store = sample_copy("typescript-agent");
    let seg = first_entry(&first_entry(&store.path().join("sessions")));
    let bytes = std::fs::read(&seg).unwrap();
    let torn = store.path().join("torn.acpj.zst");
    std::fs::write(&torn, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let (code, out, _) = run_cli(&["repair", torn.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("kept") && out.contains("the original is unchanged"),
        "{out}"
    );
    let repaired = store.path().join("torn.repaired.acpj.zst");
    let (code, out, _) = run_cli(&["verify", repaired.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.trim_end().ends_with("clean"), "{out}");
    assert_eq!(std::fs::read(&torn).unwrap().len(), bytes.len() * 2 / 3);
}

#[test]
fn completions_and_man_page_come_from_the_command_line_definition() {
    for shell in ["bash", "zsh", "fish"] {
        let (code, out, _) = run_cli(&["completions", shell]);
        assert_eq!(code, 0);
        assert!(
            out.contains("verify") && out.contains("journal-dir"),
            "{shell}"
        );
    }
    // A reader that goes away early (`completions bash | head -1`) is no error.
    let mut child = std::process::Command::new(crate::util::bin())
        .args(["completions", "bash"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let done = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(
        done.status.success() && !stderr.contains("panicked"),
        "{stderr}"
    );
    let (code, out, _) = run_cli(&["man"]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with(".ie") && out.contains("acp\\-journal"),
        "{}",
        &out[..200]
    );
}

#[test]
fn export_redacts_again_unless_asked_not_to() {
    use crate::util::{TestClient, proxied_with};
    let store = tempfile::tempdir().unwrap();
    let mut client = TestClient::spawn(&proxied_with(
        store.path(),
        &["--load", "off", "--no-redact"],
        &["cat".into()],
    ));
    client.send(&serde_json::json!({"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"exp-1","cwd":"/p","mcpServers":[{"name":"m","command":"x","args":[],"env":[{"name":"TOKEN","value":"hunter2-seeded-secret"}]}]}}));
    client.recv().unwrap();
    client.send(&serde_json::json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"exp-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"key sk-ant-abcdefghijklmnopqrstuvwxyz012345"}}}}));
    client.recv().unwrap();
    assert_eq!(client.finish().0, 0);
    let dir = store.path().to_str().unwrap();
    let (code, ndjson, _) = run_cli(&[
        "export",
        "--journal-dir",
        dir,
        "exp-1",
        "--format",
        "ndjson",
    ]);
    assert_eq!(code, 0);
    assert_eq!(ndjson.lines().count(), 4, "both directions, as recorded");
    assert!(
        !ndjson.contains("hunter2-seeded-secret") && !ndjson.contains("sk-ant-abcdef"),
        "{ndjson}"
    );
    for format in ["ndjson", "html"] {
        let export = ["export", "--journal-dir", dir, "exp-1", "--format", format];
        let (_, clean, _) = run_cli(&export);
        assert!(clean.contains("[REDACTED]"), "{format}: {clean}");
        assert!(!clean.contains("hunter2-seeded-secret"), "{format}");
        let (_, raw, _) = run_cli(&[&export[..], &["--no-redact"]].concat());
        assert!(raw.contains("hunter2-seeded-secret"), "{format}");
    }
    let out = store.path().join("bug.md");
    let (code, _, err) = run_cli(&[
        "export",
        "--journal-dir",
        dir,
        "exp-1",
        "--format",
        "markdown",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let md = std::fs::read_to_string(&out).unwrap();
    assert!(
        md.starts_with("# ACP session `exp-1`")
            && md.contains("```text")
            && md.contains("key [REDACTED]"),
        "{md}"
    );
}
