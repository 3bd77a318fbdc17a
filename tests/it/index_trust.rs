//! The team index as hostile input (issue 50), through the built binary against s3s-fs: each
//! finding of a bucket writer's probe, written into the store's files as that writer would —
//! a manifest that tells a host to delete another host's segment, lease and catalog; parts whose
//! rows hide, retitle and invent sessions; an erasure marker planted on a live session; a
//! manifest of 70 MB. Compression bombs in the tables are `index_bounds`'.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::fleet::{Host, converse, listed};
use crate::index_complete::indexed;
use crate::stores::S3sFs;
use crate::util::Peers;

/// The store's directory of prefix `team` in s3s-fs (one file per object).
fn bucket(store: &S3sFs) -> PathBuf {
    store.root.path().join(&store.bucket).join("team")
}

/// The manifest as the store holds it.
fn manifest(store: &S3sFs) -> Value {
    serde_json::from_slice(&std::fs::read(bucket(store).join("index/snapshot.json")).unwrap())
        .unwrap()
}

/// Write `manifest` as the store's manifest.
fn plant_manifest(store: &S3sFs, manifest: &Value) {
    std::fs::write(
        bucket(store).join("index/snapshot.json"),
        serde_json::to_vec(manifest).unwrap(),
    )
    .unwrap();
}

/// Wait until the index holds `sessions` with `turns` turns each.
fn until_indexed(store: &S3sFs, sessions: &[&str], turns: u32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let index = indexed(store, "team");
        if sessions
            .iter()
            .all(|s| index.get(*s).is_some_and(|r| r.0 == turns))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{sessions:?} not indexed: {index:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A sessions part of `rows`, written by `writer` (the host its name gives), added to the
/// manifest.
fn forge_part(store: &S3sFs, writer: &str, rows: &[acp_journal::fleet::index::rows::SessionRow]) {
    let bytes = acp_journal::fleet::index::table::encode_sessions(rows).unwrap();
    let path = format!("index/sessions/day=2026-11-29/{writer}-1795000000000000-abcdef.parquet");
    let file = bucket(store).join(&path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, &bytes).unwrap();
    let mut m = manifest(store);
    m["parts"].as_array_mut().unwrap().push(serde_json::json!({
        "table": "sessions", "path": path, "rows": rows.len(), "bytes": bytes.len(), "day": "2026-11-29"
    }));
    m["version"] = (m["version"].as_u64().unwrap() + 1).into();
    plant_manifest(store, &m);
}

#[test]
fn forged_rows_neither_hide_nor_retitle_nor_invent_a_session() {
    let store = S3sFs::start();
    let url = store.url("team");
    let a = Host::new(&url, &store.env());
    let first = converse(&a, &["the real title", "second turn"]);
    let second = converse(&a, &["another session"]);
    until_indexed(&store, &[&first], 2);
    until_indexed(&store, &[&second], 1);
    let host_a = std::fs::read_to_string(a.journals().join("host-id"))
        .unwrap()
        .trim()
        .to_string();
    let row = |session: &str, host: &str, title: &str, hidden: bool, version: i64| {
        acp_journal::fleet::index::rows::SessionRow {
            session: session.into(),
            title: Some(title.into()),
            host: host.into(),
            started_us: 1_795_000_000_000_000,
            last_activity_us: 1_795_000_000_000_000,
            turns: 9,
            state: "idle".into(),
            hidden,
            version,
            ..Default::default()
        }
    };
    let now = jiff::Timestamp::now().as_microsecond();
    forge_part(
        &store,
        "mallory",
        &[
            // Hide it, with the highest version there is, as another host and as its own.
            row(&first, "mallory", "hidden", true, i64::MAX),
            row(&first, &host_a, "hidden", true, i64::MAX),
            // Retitle it, dated now.
            row(&first, "mallory", "pwned", false, now),
            // Invent sessions, under another host's name and under a name of its own.
            row("invented-1", &host_a, "invented", false, now),
            row("invented-2", "mallory", "invented", false, now),
        ],
    );
    let teammate = Host::new(&url, &store.env());
    let (code, out, err) = teammate.cli(&["list", "--json"]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<Value> = serde_json::from_str(&out).unwrap();
    let ids: Vec<&str> = rows.iter().filter_map(|r| r["session"].as_str()).collect();
    assert_eq!(ids.len(), 2, "{out}");
    assert!(ids.contains(&first.as_str()) && ids.contains(&second.as_str()));
    let shown = rows
        .iter()
        .find(|r| r["session"] == first.as_str())
        .unwrap();
    assert_eq!(shown["title"], "the real title", "{shown}");
    assert_eq!(shown["turns"], 2, "{shown}");
    assert!(err.contains("5 rows of the index"), "{err}");
    let (code, out, err) = teammate.cli(&["stats"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("invented"), "{out}");
    // The editor's list through a proxy of another host: the same two.
    let b = Host::new(&url, &store.env());
    let mut client = b.proxy(&Peers::get().py_echo_agent(), &["--list-scope", "all"]);
    client.initialize();
    let answer = client.request("session/list", serde_json::json!({}));
    let listed_ids: Vec<&str> = answer["result"]["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .iter()
        .filter_map(|s| s["sessionId"].as_str())
        .collect();
    assert!(listed_ids.contains(&first.as_str()), "{answer}");
    assert!(
        !listed_ids.iter().any(|s| s.starts_with("invented")),
        "{answer}"
    );
    let (code, _) = client.finish();
    assert_eq!(code, 0);
    // Its own host continues it: the list follows, hidden by nothing.
    let mut on_a = a.proxy(&Peers::get().py_echo_agent(), &[]);
    on_a.initialize();
    let (_, loaded) = on_a.load(&first, "/tmp");
    assert!(loaded.get("result").is_some(), "{loaded}");
    on_a.prompt(&first, "a third turn");
    let (code, _) = on_a.finish();
    assert_eq!(code, 0);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let rows = listed(&teammate);
        let shown = rows
            .iter()
            .find(|r| r["session"] == first.as_str())
            .unwrap();
        if shown["turns"] == 3 {
            assert_eq!(shown["title"], "the real title", "{shown}");
            break;
        }
        assert!(Instant::now() < deadline, "{shown}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn a_manifest_makes_no_host_delete_another_hosts_segment_lease_or_catalog() {
    let store = S3sFs::start();
    let url = store.url("team");
    let a = Host::new(&url, &store.env());
    let session = converse(&a, &["keep me"]);
    until_indexed(&store, &[&session], 1);
    // Every object of the store but the index's, named in `removed` as compacted away long ago.
    let root = bucket(&store);
    let precious: Vec<String> = store
        .object_files()
        .into_iter()
        .map(|f| f.strip_prefix(&root).unwrap().display().to_string())
        .filter(|p| !p.starts_with("index/"))
        .collect();
    assert!(
        precious.iter().any(|p| p.starts_with("sessions/")),
        "{precious:?}"
    );
    assert!(
        precious.iter().any(|p| p.starts_with("leases/")),
        "{precious:?}"
    );
    assert!(
        precious.iter().any(|p| p.starts_with("hosts/")),
        "{precious:?}"
    );
    let mut m = manifest(&store);
    m["removed"] = precious
        .iter()
        .map(|p| serde_json::json!({"path": p, "at": 0}))
        .collect::<Vec<_>>()
        .into();
    plant_manifest(&store, &m);
    // A host runs long enough for its index's look at compaction (at its start).
    let b = Host::new(&url, &store.env());
    converse(&b, &["a run of another host"]);
    for path in &precious {
        assert!(root.join(path).exists(), "{path} deleted");
    }
    let reader = Host::new(&url, &store.env());
    let (code, out, err) = reader.cli(&["show", &session]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("keep me"), "{out}");
    // The manifest the next commit wrote names none of them.
    let text = manifest(&store).to_string();
    for path in &precious {
        assert!(!text.contains(&format!("\"{path}\"")), "{path} in {text}");
    }
}

#[test]
fn an_erasure_marker_planted_on_a_live_session_stops_nothing_and_is_said() {
    let store = S3sFs::start();
    let url = store.url("team");
    let a = Host::new(&url, &store.env());
    let mut client = a.proxy(&Peers::get().py_echo_agent(), &[]);
    client.initialize();
    let session = client.new_session("/tmp");
    client.prompt(&session, "before the marker");
    let key = acp_journal::journal::dir::session_key(&session);
    let markers = bucket(&store).join("erased");
    std::fs::create_dir_all(&markers).unwrap();
    std::fs::write(markers.join(&key), session.as_bytes()).unwrap();
    // The shipper lists the markers every 30 s: two periods of turns.
    let stderr = client.stderr.clone();
    let until = Instant::now() + Duration::from_secs(65);
    let mut n = 0;
    while Instant::now() < until {
        n += 1;
        client.prompt(&session, &format!("turn {n} after the marker"));
        std::thread::sleep(Duration::from_secs(5));
    }
    let said = String::from_utf8_lossy(&stderr.lock().unwrap()).to_string();
    assert!(said.contains("goes on being shipped"), "{said}");
    assert_eq!(
        said.matches("goes on being shipped").count(),
        1,
        "said once: {said}"
    );
    let reader = Host::new(&url, &store.env());
    let (code, out, err) = reader.cli(&["show", &session]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("turn {n} after the marker")), "{out}");
    assert!(err.contains("not honoured"), "{err}");
    let (code, _) = client.finish();
    assert_eq!(code, 0);
}

#[test]
fn a_manifest_of_70_mb_wedges_nothing() {
    let store = S3sFs::start();
    let url = store.url("team");
    let a = Host::new(&url, &store.env());
    let first = converse(&a, &["before the huge manifest"]);
    until_indexed(&store, &[&first], 1);
    let mut m = manifest(&store);
    m["pad"] = "x".repeat(70 << 20).into();
    plant_manifest(&store, &m);
    // Readers fall back on the journals, and say why.
    let reader = Host::new(&url, &store.env());
    let (code, out, err) = reader.cli(&["list", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&first), "{out}");
    assert!(err.contains("the index cannot be read"), "{err}");
    // A host's shipping goes on, and its next commit starts the manifest afresh.
    let second = converse(&a, &["after the huge manifest"]);
    let (code, out, err) = reader.cli(&["show", &second]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("after the huge manifest"), "{out}");
    until_indexed(&store, &[&second], 1);
    let size = std::fs::metadata(bucket(&store).join("index/snapshot.json"))
        .unwrap()
        .len();
    assert!(size < 1 << 20, "{size} bytes");
    // And a rebuild writes every session into it.
    let (code, _, err) = reader.cli(&["index", "rebuild"]);
    assert_eq!(code, 0, "{err}");
    until_indexed(&store, &[&first, &second], 1);
}
