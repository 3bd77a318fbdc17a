//! A journal directory that runs out of room while recording: a file-size limit (`EFBIG`, one
//! journal stops) and a full filesystem (`ENOSPC`, every journal stops). Either way the relay goes
//! on, the failure is said once on stderr and the journals written so far stay readable.

use std::path::Path;

use acp_journal::journal::SegmentReader;

use acp_journal::wire::Side;
use serde_json::{Value, json};

use crate::util::{TestClient, journaled, proxied, run_cli, segment_paths};

/// An update for `session`, numbered `i`, with text that compresses poorly.
fn update(session: &str, i: u64) -> Value {
    let text: String = (0..6)
        .map(|k| format!("{:016x}", (i * 6 + k).wrapping_mul(0x9e37_79b9_7f4a_7c15)))
        .collect();
    json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":session,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":text}}}})
}

/// Send `count` updates round-robin over `sessions` through a `cat` agent, checking each comes
/// back unchanged; returns the lines sent.
fn echo_updates(client: &mut TestClient, sessions: &[&str], count: u64) -> Vec<Vec<u8>> {
    let mut sent = Vec::new();
    for i in 0..count {
        let msg = update(sessions[(i as usize) % sessions.len()], i);
        client.send(&msg);
        sent.push(client.sent.last().unwrap().clone());
        let got = client.recv().expect("the relay goes on").raw.clone();
        assert_eq!(&got, sent.last().unwrap(), "line {i} changed");
    }
    sent
}

/// The messages journaled from each side are a prefix of what passed (`sent`, echoed back).
fn assert_journal_is_a_prefix(store: &Path, sent: &[Vec<u8>]) -> usize {
    for side in [Side::Client, Side::Agent] {
        let journal = journaled(store, side);
        assert!(journal.len() < sent.len(), "the journal stopped");
        assert_eq!(journal[..], sent[..journal.len()], "{side:?}");
    }
    journaled(store, Side::Client).len()
}

/// Lines of the proxy's stderr that contain `needle`.
fn log_lines(client: &TestClient, needle: &str) -> Vec<String> {
    String::from_utf8_lossy(&client.stderr.lock().unwrap())
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_file_size_limit_stops_that_journal_and_the_relay_goes_on() {
    let store = tempfile::tempdir().unwrap();
    let limit = 48 * 1024;
    let mut argv = vec![
        "prlimit".to_string(),
        format!("--fsize={limit}"),
        "--".into(),
    ];
    argv.extend(proxied(store.path(), &["cat".into()]));
    let mut client = TestClient::spawn(&argv);
    let sent = echo_updates(&mut client, &["big"], 3000);
    let logged = log_lines(&client, "suspended after a write error");
    let (code, _) = client.finish();
    assert_eq!(code, 0, "the proxy was not killed by SIGXFSZ");
    assert_eq!(logged.len(), 1, "said once: {logged:?}");
    assert!(logged[0].contains("File too large"), "{logged:?}");

    let kept = assert_journal_is_a_prefix(store.path(), &sent);
    assert!(
        kept > 0,
        "the journal holds what was written before the limit"
    );
    for path in segment_paths(store.path()) {
        assert!(std::fs::metadata(&path).unwrap().len() <= limit);
    }
    // The connection journal, still writable, tells what happened.
    let conn = crate::util::read_store(store.path());
    let event = conn[0]
        .2
        .iter()
        .filter_map(|r| r.get("event"))
        .find(|e| e["type"] == "journal_error")
        .expect("a journal_error event")
        .clone();
    assert_eq!(event["journal"], r#"session "big""#);
    assert_eq!(event["store_full"], false);
    let (code, out, _) = run_cli(&["verify", "--journal-dir", store.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn a_full_store_stops_every_journal_once_and_the_relay_goes_on() {
    // A 160 KiB tmpfs in a mount namespace of its own; the store is copied out when the proxy
    // has exited, with the proxy's exit code kept.
    let dir = tempfile::tempdir().unwrap();
    let (mount, copy) = (dir.path().join("mnt"), dir.path().join("copy"));
    std::fs::create_dir_all(&mount).unwrap();
    std::fs::create_dir_all(&copy).unwrap();
    let proxy = proxied(&mount.join("store"), &["cat".into()]);
    let script = r#"mount -t tmpfs -o size=160k tmpfs "$1" || exit 99
store="$1/store"; out="$2"; shift 2
"$@"; code=$?
cp -a "$store/." "$out/"; exit $code"#;
    crate::util::full_tier("a mount namespace of its own (unshare: root or user namespaces)");
    // SAFETY: geteuid(2) has no preconditions. Root needs no user namespace to mount.
    let namespaces = if unsafe { libc::geteuid() } == 0 {
        "-m"
    } else {
        "-rm"
    };
    let mut argv: Vec<String> = ["unshare", namespaces, "sh", "-c", script, "sh"]
        .map(String::from)
        .to_vec();
    argv.push(mount.display().to_string());
    argv.push(copy.display().to_string());
    argv.extend(proxy);
    let mut client = TestClient::spawn(&argv);
    let sent = echo_updates(&mut client, &["a", "b", "c"], 6000);
    // A session first seen once the disk is full gets no segment at all.
    let late = echo_updates(&mut client, &["late"], 3);
    let logged = log_lines(&client, "journal directory's disk is full");
    let (code, received) = client.finish();
    assert_eq!(code, 0);
    assert_eq!(
        received.len(),
        sent.len() + late.len(),
        "everything relayed"
    );
    assert_eq!(logged.len(), 1, "said once for every journal: {logged:?}");
    assert!(logged[0].contains("No space left on device"), "{logged:?}");

    let sessions = crate::util::session_messages(&copy);
    assert!(!sessions.contains_key("late"), "no segment once full");
    for s in ["a", "b", "c"] {
        assert!(
            !sessions[s].is_empty(),
            "{s} was journaled until the store filled"
        );
    }
    for side in [Side::Client, Side::Agent] {
        let journal = journaled(&copy, side);
        assert!(journal.len() < sent.len() && journal.len() > 100);
        assert_eq!(journal[..], sent[..journal.len()], "{side:?}");
    }
    // Every file is a journal (no empty or headless segment), none is corrupt.
    for path in segment_paths(&copy) {
        let mut reader = SegmentReader::open(&path).unwrap();
        reader.by_ref().count();
        assert!(!reader.tail().unwrap().is_corrupt(), "{}", path.display());
    }
    let (code, out, _) = run_cli(&["verify", "--journal-dir", copy.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
}
