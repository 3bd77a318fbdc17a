//! The team index in the store (issue 41), through the built binary against s3s-fs: three
//! hosts index what they journal; a teammate with an empty cache lists and searches from the
//! index alone (every host's catalog removed from the store), with the same answers as a
//! search of the hosts' own journals; pyarrow and DuckDB read the tables; a garbage manifest
//! makes the readers fall back on the journals and say so; `index rebuild` writes it anew.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::fleet::{Host, converse, eventually, listed};
use crate::stores::S3sFs;

/// The store's objects under `prefix` of the test bucket, as s3s-fs keeps them (one file each).
fn objects(store: &S3sFs, prefix: &str) -> std::path::PathBuf {
    store.root.path().join(&store.bucket).join(prefix)
}

/// The lines a search printed, as a set.
fn lines(out: &str) -> BTreeSet<String> {
    out.lines().map(str::to_string).collect()
}

fn python(script: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(crate::util::root().join(".peers/venv/bin/python"))
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("the peers' Python (scripts/install-peers.sh)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Reads the manifest and prints, as JSON: the sessions (latest version of each) and the turns,
/// through pyarrow; and the same counts through DuckDB.
const READ_TABLES: &str = r#"
import json, sys
import pyarrow.parquet as pq, pyarrow as pa, duckdb
root = sys.argv[1]
snap = json.load(open(f"{root}/index/snapshot.json"))
files = lambda t: [f"{root}/{p['path']}" for p in snap["parts"] if p["table"] == t]
sessions = pa.concat_tables([pq.read_table(f) for f in files("sessions")]).to_pylist()
latest = {}
for s in sessions:
    if s["session"] not in latest or latest[s["session"]]["version"] < s["version"]:
        latest[s["session"]] = s
turns = pa.concat_tables([pq.read_table(f) for f in files("turns")]).to_pylist()
con = duckdb.connect()
n = con.execute("select count(distinct session), sum(1) from read_parquet(?)", [files("turns")]).fetchone()
print(json.dumps({
    "sessions": {k: {"turns": v["turns"], "title": v["title"]} for k, v in latest.items()},
    "prompts": sorted([t["prompt"] for t in turns]),
    "duckdb": [n[0], int(n[1])],
}))
"#;

#[test]
fn three_hosts_index_their_sessions_and_a_teammate_reads_the_index_alone() {
    let store = S3sFs::start();
    let url = store.url("fleet");
    let hosts: Vec<Host> = (0..3).map(|_| Host::new(&url, &store.env())).collect();
    let mut sessions = Vec::new();
    for (i, host) in hosts.iter().enumerate() {
        for j in 0..2 {
            let first = format!("alpha{i}x{j} first");
            let second = format!("shared beta{i} second");
            sessions.push(converse(host, &[&first, &second]));
        }
    }
    let reader = Host::new(&url, &store.env());
    // Written by the hosts as they journaled (each process flushes its index at its end).
    eventually("the index lists every session", || {
        let (_, out, _) = reader.cli(&["list", "--json"]);
        let rows: Vec<Value> = serde_json::from_str(&out).unwrap_or_default();
        (rows.len() != 6).then_some(out)
    });
    // The tables, read by pyarrow and DuckDB straight from the store's files.
    let tables: Value = serde_json::from_str(&python(
        READ_TABLES,
        &[&objects(&store, "fleet").display().to_string()],
    ))
    .unwrap();
    assert_eq!(tables["sessions"].as_object().unwrap().len(), 6, "{tables}");
    for s in &sessions {
        assert_eq!(tables["sessions"][s]["turns"], 2, "{tables}");
    }
    assert_eq!(tables["prompts"].as_array().unwrap().len(), 12, "{tables}");
    assert_eq!(tables["duckdb"], serde_json::json!([6, 12]), "{tables}");
    // What a search of the hosts' own journals finds…
    let local = |pattern: &str| -> BTreeSet<String> {
        hosts
            .iter()
            .flat_map(|h| {
                let (_, out, _) = crate::util::run_cli_store(&h.journals(), &["search", pattern]);
                lines(&out)
            })
            .collect()
    };
    let (shared, alpha) = (local("shared"), local("alpha1x0"));
    assert!(!shared.is_empty() && !alpha.is_empty());
    // …a teammate finds from the index alone: every host's catalog is gone from the store.
    std::fs::remove_dir_all(objects(&store, "fleet/hosts")).unwrap();
    let fresh = Host::new(&url, &store.env());
    let rows = listed(&fresh);
    assert_eq!(rows.len(), 6, "{rows:?}");
    for row in &rows {
        assert_eq!(row["turns"], 2, "{row}");
        assert!(row["title"].as_str().unwrap().contains("first"), "{row}");
    }
    let (code, out, err) = fresh.cli(&["search", "shared"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(lines(&out), shared, "{err}");
    let (_, out, _) = fresh.cli(&["search", "alpha1x0"]);
    assert_eq!(lines(&out), alpha);
    // A reader whose index cache holds nothing finds the same.
    let (code, out, err) = fresh.cli(&["--index-cache", "1", "search", "shared"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(lines(&out), shared, "{err}");
    // The team's figures, from the index's tables alone.
    let (code, out, err) = fresh.cli(&["stats"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("from the store's index"), "{err}");
    assert!(
        out.contains("6 sessions, 12 turns, 0 input and 0 output tokens, from 3 hosts"),
        "{out}"
    );
    // Only the sessions the answer needs were copied.
    let copied = std::fs::read_dir(fresh.dir.path().join("cache/acp-journal/stores"))
        .unwrap()
        .flatten()
        .map(|d| std::fs::read_dir(d.path().join("sessions")).map_or(0, |s| s.count()))
        .sum::<usize>();
    assert!(copied <= 6, "{copied}");
    // A turn of a host still running is found within seconds of its end.
    let mut live = hosts[0].proxy(&crate::util::Peers::get().py_echo_agent(), &[]);
    live.initialize();
    let session = live.new_session("/tmp");
    live.prompt(&session, "freshly said zanzibar");
    eventually("the live turn in the index", || {
        let (_, out, _) = fresh.cli(&["search", "zanzibar"]);
        (!out.contains(&session)).then_some(out)
    });
    assert_eq!(live.finish().0, 0);
}

#[test]
fn a_garbage_index_is_said_and_the_journals_read_and_rebuild_writes_it_anew() {
    let store = S3sFs::start();
    let url = store.url("fleet");
    let a = Host::new(&url, &store.env());
    let session = converse(&a, &["gamma delta"]);
    let manifest = objects(&store, "fleet/index/snapshot.json");
    eventually("indexed", || {
        (!manifest.exists()).then(|| "no manifest".to_string())
    });
    std::fs::write(
        &manifest,
        b"{\"format\": 1, \"parts\": [{\"table\": \"sessions\"",
    )
    .unwrap();
    let reader = Host::new(&url, &store.env());
    let (code, out, err) = reader.cli(&["list", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("the index cannot be read"), "{err}");
    assert!(out.contains(&session), "read from the journals: {out}");
    let (code, out, err) = reader.cli(&["search", "gamma"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&session), "{out}{err}");
    // Rebuilt from the journals, it answers again.
    let (code, _, err) = reader.cli(&["index", "rebuild"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = reader.cli(&["list", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("cannot be read"), "{err}");
    assert!(out.contains(&session), "{out}");
}

/// Every zstd frame inside `bytes`, wherever it starts (a Parquet page, a catalog part, a
/// segment), decompressed; and the bytes themselves.
fn every_reading(bytes: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = bytes.to_vec();
    let magic = [0x28, 0xb5, 0x2f, 0xfd];
    for at in memchr::memmem::find_iter(bytes, &magic) {
        if let Ok(mut decoder) = zstd::stream::read::Decoder::new(&bytes[at..]) {
            let mut plain = Vec::new();
            let _ = decoder.read_to_end(&mut plain);
            out.extend(plain);
        }
    }
    out
}

#[test]
fn an_erased_session_leaves_no_trace_in_the_store_and_prune_reaches_it() {
    let store = S3sFs::start();
    let url = store.url("fleet");
    let a = Host::new(&url, &store.env());
    let secret = "PINEAPPLE-ERASE-77";
    let gone = converse(
        &a,
        &[&format!("remember {secret} for me"), "and then forget it"],
    );
    let kept = converse(&a, &["nothing to hide here"]);
    let reader = Host::new(&url, &store.env());
    eventually("both listed", || {
        let (_, out, _) = reader.cli(&["list", "--json"]);
        (!(out.contains(&gone) && out.contains(&kept))).then_some(out)
    });
    let (_, found, _) = reader.cli(&["search", "PINEAPPLE"]);
    assert!(found.contains(&gone), "{found}");
    let (code, out, err) = reader.cli(&["erase", &gone[..10]]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("erased"), "{out}");
    // In no object of the store, compressed or not.
    let holding: Vec<String> = store
        .object_files()
        .into_iter()
        .filter(|f| {
            let bytes = std::fs::read(f).unwrap_or_default();
            let all = every_reading(&bytes);
            memchr::memmem::find(&all, secret.as_bytes()).is_some()
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(holding.is_empty(), "the secret is still in {holding:?}");
    // Gone from every reader, the copy it had read included; the other session is whole.
    for host in [&reader, &Host::new(&url, &store.env())] {
        let (_, out, _) = host.cli(&["list", "--json"]);
        assert!(!out.contains(&gone) && out.contains(&kept), "{out}");
        let (_, found, _) = host.cli(&["search", "PINEAPPLE"]);
        assert!(!found.contains(&gone), "{found}");
        let (_, found, _) = host.cli(&["search", "--scan", "PINEAPPLE"]);
        assert!(!found.contains(secret), "{found}");
    }
    let (_, found, _) = reader.cli(&["search", "hide"]);
    assert!(found.contains(&kept), "{found}");
    // Retention: older than a second, all but the newest go.
    let newest = converse(&a, &["the newest"]);
    std::thread::sleep(std::time::Duration::from_secs(2));
    let (code, out, err) = reader.cli(&["prune", "--older-than", "1s", "--keep", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&kept) && !out.contains(&newest), "{out}");
    let rows = listed(&Host::new(&url, &store.env()));
    let ids: Vec<&str> = rows.iter().filter_map(|r| r["session"].as_str()).collect();
    assert_eq!(ids, [newest.as_str()], "{rows:?}");
}
