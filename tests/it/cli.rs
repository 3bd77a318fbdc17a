//! The inspection commands on recorded journals (list, verify: clean, torn, corrupt, foreign), and
//! the validation of numeric flags.

use std::path::Path;

use serde_json::json;

use crate::util::{TestClient, proxied_with, run_cli};

/// Record a small session through `cat` (which echoes each line back), as a pure recorder.
fn record(store: &Path) {
    let mut client = TestClient::spawn(&proxied_with(store, &["--load", "off"], &["cat".into()]));
    client.send(&json!({"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"sess-1","cwd":"/proj","mcpServers":[]}}));
    client.recv().unwrap();
    for i in 0..50 {
        client.send(&json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"n":i}}}));
        client.recv().unwrap();
    }
    assert_eq!(client.finish().0, 0);
}

#[test]
fn list_shows_sessions_with_cwd_and_counts() {
    let store = tempfile::tempdir().unwrap();
    record(store.path());
    let dir = store.path().to_str().unwrap();
    let (code, out, _) = run_cli(&["list", "--journal-dir", dir]);
    assert_eq!(code, 0);
    let row = out.lines().nth(1).unwrap();
    assert!(
        row.starts_with("sess-1 ") && row.contains("/proj") && row.ends_with("closed"),
        "{out}"
    );
    let (_, json, _) = run_cli(&["list", "--journal-dir", dir, "--json"]);
    let rows: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
    assert_eq!(
        rows[0]["records"], 102,
        "the load, 50 updates, and their echoes"
    );
    let (_, out, _) = run_cli(&[
        "list",
        "--journal-dir",
        dir,
        "--cwd",
        "/elsewhere",
        "--json",
    ]);
    assert_eq!(out.trim(), "[]");
    // Without the catalog, list rebuilds from the segments.
    std::fs::remove_file(store.path().join("catalog.ndjson")).unwrap();
    let (_, out, _) = run_cli(&["list", "--journal-dir", dir]);
    assert!(out.contains("sess-1"), "{out}");
}

#[test]
fn verify_reports_torn_tails_and_fails_on_corruption() {
    let store = tempfile::tempdir().unwrap();
    record(store.path());
    let dir = store.path().to_str().unwrap();
    let seg = crate::util::first_entry(&store.path().join("sessions/ssess-1"));
    let bytes = std::fs::read(&seg).unwrap();

    // By session prefix.
    let (code, out, _) = run_cli(&["verify", "--journal-dir", dir, "sess"]);
    assert_eq!(code, 0);
    assert!(out.contains("clean"), "{out}");

    // Torn tail: reported, not an error.
    let torn = store.path().join("torn.acpj.zst");
    std::fs::write(&torn, &bytes[..bytes.len() - 7]).unwrap();
    let (code, out, _) = run_cli(&["verify", torn.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with("ok") && (out.contains("torn") || out.contains("unfinished")),
        "{out}"
    );

    // A flipped byte in the middle: corrupt, exit 1.
    let mut bad = bytes.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x40;
    let corrupt = store.path().join("bad.acpj.zst");
    std::fs::write(&corrupt, &bad).unwrap();
    let (code, out, _) = run_cli(&["verify", corrupt.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.starts_with("CORRUPT"), "{out}");

    // Not a journal: exit 2 with a clear line.
    let foreign = store.path().join("notes.acpj.zst");
    std::fs::write(&foreign, b"hello").unwrap();
    let (code, out, _) = run_cli(&["verify", foreign.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(out.contains("not an acp-journal segment"), "{out}");

    // Unknown session.
    let (code, _, err) = run_cli(&["verify", "--journal-dir", dir, "nope"]);
    assert_eq!(code, 2);
    assert!(err.contains("no session or journal file \"nope\""), "{err}");
}

#[test]
fn journals_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let store = tempfile::tempdir().unwrap();
    let root = store.path().join("j");
    record(&root);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&root), 0o700);
    for entry in walk(&root) {
        let expected = if entry.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode(&entry), expected, "{}", entry.display());
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

#[test]
fn list_filters_and_states_over_ten_thousand_sessions() {
    use acp_journal::catalog::{Catalog, CatalogEntry};
    use acp_journal::journal::format::{FORMAT_VERSION, Header, SegmentKind};
    use acp_journal::journal::{JournalDir, SegmentWriter};
    let dir = tempfile::tempdir().unwrap();
    let journals = JournalDir::new(dir.path());
    journals.create_dirs().unwrap();
    let n = 10_000;
    let mut catalog = Vec::new();
    for i in 0..n {
        let session = format!("gen-{i:05}");
        let header = Header {
            acpj: FORMAT_VERSION,
            kind: SegmentKind::Session,
            session: Some(session.clone()),
            run: "gen".into(),
            proxy: "test".into(),
            started: 1_000_000 + i as i64,
            pid: 0,
            argv: vec![
                if i % 2 == 0 {
                    "npx claude-code-acp"
                } else {
                    "gemini --acp"
                }
                .into(),
            ],
            cwd: Some(format!("/p{}", i % 10)),
            connection: None,
            initialize: None,
        };
        let (path, file) = journals
            .create_segment(&journals.session_dir(&session), "20260101T000000.000000Z-1")
            .unwrap();
        let w = SegmentWriter::with_file(file, &path, &header).unwrap();
        let closed = i % 1000 != 0;
        if closed {
            let stats = w.close(1, header.started, 0).unwrap();
            catalog.push(CatalogEntry::Open {
                git_branch: None,
                session: session.clone(),
                segment: journals.relative(&path),
                cwd: header.cwd.clone(),
                agent: Some(header.argv[0].clone()),
                agent_name: None,
                t: header.started,
                agent_info: None,
            });
            catalog.push(CatalogEntry::Close {
                segment: journals.relative(&path),
                records: stats.records,
                bytes: stats.file_bytes,
                turns: 3,
                t: header.started,
            });
        } else {
            drop(w); // a writer that was killed: no close entry, no end marker
            catalog.push(CatalogEntry::Open {
                git_branch: None,
                session,
                segment: journals.relative(&path),
                cwd: header.cwd.clone(),
                agent: Some(header.argv[0].clone()),
                agent_name: None,
                t: header.started,
                agent_info: None,
            });
        }
    }
    for entry in &catalog {
        journals.append_catalog(entry).unwrap();
    }
    let root = dir.path().to_str().unwrap();
    let (code, out, _) = run_cli(&["list", "--journal-dir", root, "--json"]);
    assert_eq!(code, 0);
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(rows.len(), n);
    assert_eq!(rows[0]["session"], "gen-09999", "newest first");
    assert_eq!(rows.iter().filter(|r| r["state"] == "torn").count(), 10);
    assert_eq!(rows[0]["turns"], 3);
    let (_, out, _) = run_cli(&[
        "list",
        "--journal-dir",
        root,
        "--json",
        "--cwd",
        "/p3",
        "--agent",
        "gemini",
    ]);
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(rows.len(), 1000);
    let (_, out, _) = run_cli(&["list", "--journal-dir", root, "--since", "1d"]);
    assert!(
        out.starts_with("no sessions"),
        "all are from 1970: {}",
        &out[..80.min(out.len())]
    );
    let (_, table, _) = run_cli(&["list", "--journal-dir", root]);
    let first = table.lines().nth(1).unwrap();
    assert!(
        first.starts_with("gen-09999 ") && first.contains("gemini") && first.ends_with("closed"),
        "{first}"
    );
    // The catalog is derived: rebuilt from the journals it lists the same sessions.
    std::fs::remove_file(dir.path().join("catalog.ndjson")).unwrap();
    let (code, out, err) = run_cli(&["list", "--journal-dir", root, "--json", "--rebuild-catalog"]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(rows.len(), n);
}

#[test]
fn bad_numbers_in_flags_exit_2_naming_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["--grace", "nan", "--", "true"], "--grace"),
        (&["--grace=-1", "--", "true"], "--grace"),
        (&["--grace", "1e300", "--", "true"], "--grace"),
        (&["--stall-timeout", "nan", "--", "true"], "--stall-timeout"),
        (&["--stall-timeout", "0", "--", "true"], "--stall-timeout"),
        (&["--init-timeout", "inf", "--", "true"], "--init-timeout"),
        (&["--respawn=-1", "--", "true"], "--respawn"),
        (
            &["--reprime-limit", "lots", "--", "true"],
            "--reprime-limit",
        ),
        (&["replay", "x", "--pace", "x1e-300"], "--pace"),
        (&["replay", "x", "--pace", "xNaN"], "--pace"),
        (
            &["rerun", "x", "--timeout", "1e300", "--", "true"],
            "--timeout",
        ),
        (
            &["prune", "--older-than", "99999999999999999w"],
            "--older-than",
        ),
        (&["list", "--since", "999999999999w"], "--since"),
    ];
    for (args, flag) in cases {
        let (code, stdout, stderr) = run_cli(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        assert!(stderr.contains(flag), "{args:?} names {flag}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn list_shows_a_live_sessions_turns_its_first_prompt_as_title_and_the_agents_name() {
    let peers = crate::util::Peers::get();
    let store = tempfile::tempdir().unwrap();
    let dir = store.path().to_str().unwrap();
    let mut client = TestClient::spawn(&crate::util::proxied(store.path(), &peers.py_agent()));
    let session = client.start_session(dir);
    for text in ["\n  Fix the flaky test in ci.yml\nthen run it", "and again"] {
        assert!(client.prompt(&session, text).get("result").is_some());
    }
    let row = |args: &[&str]| -> serde_json::Value {
        let mut cmd = vec!["list", "--journal-dir", dir, "--json"];
        cmd.extend(args);
        let (code, out, err) = run_cli(&cmd);
        assert_eq!(code, 0, "{err}");
        let rows: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
        rows.into_iter()
            .find(|r| r["session"] == session.as_str())
            .unwrap_or_else(|| panic!("{session} not listed: {out}"))
    };
    // While its proxy runs, the catalog learns each turn's end (written within a second).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let live = loop {
        let live = row(&[]);
        if live["turns"] == 2 || std::time::Instant::now() > deadline {
            break live;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(live["turns"], 2, "{live}");
    assert_eq!(live["state"], "live", "{live}");
    assert_eq!(live["title"], "Fix the flaky test in ci.yml", "{live}");
    assert_eq!(live["agent_name"], "Example Agent", "{live}");
    for time in ["started", "updated", "last_turn_ended"] {
        let text = live[time].as_str().unwrap_or_default();
        assert!(
            text.len() == 27 && text.parse::<jiff::Timestamp>().is_ok(),
            "{time}: RFC 3339 with microseconds: {live}"
        );
    }
    assert!(
        live["agent"].as_str().unwrap().contains("agent.py"),
        "the command stays: {live}"
    );
    let (_, table, _) = run_cli(&["list", "--journal-dir", dir]);
    let line = table.lines().find(|l| l.contains("Fix the flaky")).unwrap();
    assert!(line.contains("Example Agent"), "{table}");
    assert_eq!(client.finish().0, 0);
    // Closed: the close entry's count, not twice; the same from the segments alone.
    assert_eq!(row(&[])["turns"], 2);
    let rebuilt = row(&["--rebuild-catalog"]);
    assert_eq!(
        (&rebuilt["turns"], &rebuilt["title"], &rebuilt["agent_name"]),
        (
            &json!(2),
            &json!("Fix the flaky test in ci.yml"),
            &json!("Example Agent")
        )
    );
}
