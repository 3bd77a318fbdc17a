//! The team index is complete whatever happens at a run's end (issue 50), through the built
//! binary against s3s-fs made distant by a relay (tens of milliseconds each way, as an S3
//! region from a laptop): many short runs in a row, each session listed and searchable; a run
//! killed with `kill -9` during its last flush, then started again; a host never started again,
//! repaired by another host's pass while a reader is told the index lags; and the requests a new
//! session costs, counted at the relay.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::Value;

use crate::fleet::{Host, eventually};
use crate::relay::Relay;
use crate::stores::{ACCESS_KEY, S3sFs, SECRET_KEY, s3_env};
use crate::util::{Peers, TestClient};

/// What the index in the store holds of each session: its latest row's turns and state (the
/// parts the manifest lists, read from s3s-fs's files with the crate's own decoder; rows taken
/// as they are, the latest version of each).
pub fn indexed(store: &S3sFs, prefix: &str) -> BTreeMap<String, (u32, String)> {
    let root = store.root.path().join(&store.bucket).join(prefix);
    let Ok(manifest) = std::fs::read(root.join("index/snapshot.json")) else {
        return BTreeMap::new();
    };
    let manifest: Value = serde_json::from_slice(&manifest).unwrap();
    let mut latest: BTreeMap<String, (i64, u32, String)> = BTreeMap::new();
    for part in manifest["parts"].as_array().unwrap() {
        if part["table"] != "sessions" {
            continue;
        }
        let bytes = std::fs::read(root.join(part["path"].as_str().unwrap())).unwrap();
        for row in acp_journal::fleet::index::table::decode_sessions(bytes.into()).unwrap() {
            let newer = latest
                .get(&row.session)
                .is_none_or(|(v, _, _)| *v < row.version);
            if newer {
                latest.insert(row.session.clone(), (row.version, row.turns, row.state));
            }
        }
    }
    latest
        .into_iter()
        .map(|(s, (_, turns, state))| (s, (turns, state)))
        .collect()
}

/// A host in front of the Python SDK's echo agent running `sessions` sessions of two turns in
/// one proxy run, each with a word of its own (`w<run>x<n>`); their IDs, and the client.
fn run_sessions(host: &Host, run: usize, sessions: usize) -> (Vec<String>, TestClient) {
    let mut client = host.proxy(&Peers::get().py_echo_agent(), &[]);
    client.initialize();
    let mut ids = Vec::new();
    for n in 0..sessions {
        let session = client.new_session("/tmp");
        for turn in ["first", "second"] {
            let answer = client.prompt(&session, &format!("{turn} turn of w{run}x{n}"));
            assert!(answer.get("result").is_some(), "{answer}");
        }
        ids.push(session);
    }
    (ids, client)
}

/// The environment of a host that reaches the store through `relay`.
fn through(relay: &Relay) -> Vec<(String, String)> {
    s3_env(relay.port, ACCESS_KEY, SECRET_KEY, "us-east-1")
}

#[test]
fn runs_in_a_row_on_a_distant_store_leave_every_session_indexed_for_a_few_requests_each() {
    let store = S3sFs::start();
    let relay = Relay::start(store.port, Duration::from_millis(15));
    let url = store.url("team");
    let env = through(&relay);
    let mut all = Vec::new();
    let (runs, per_run) = (4, 25);
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for run in 0..runs {
        // Each run on a journal directory of its own: twenty hosts one after the other, in
        // the finding; a host's next run would commit what its last could not.
        let host = Host::new(&url, &env);
        let (ids, client) = run_sessions(&host, run, per_run);
        let (code, _) = client.finish();
        assert_eq!(code, 0);
        for (k, n) in relay.take_counts() {
            *counts.entry(k).or_default() += n;
        }
        all.extend(ids);
    }
    // Every session of every run is in the index as its run ended: none waits for a repair.
    let index = indexed(&store, "team");
    for s in &all {
        assert_eq!(index.get(s).map(|r| r.0), Some(2), "{s}: {index:?}");
    }
    let sessions = all.len();
    let total: usize = counts.values().sum();
    eprintln!(
        "requests for {sessions} new sessions of 2 turns, {runs} runs: {total} ({:.1} a session): {counts:?}",
        total as f64 / sessions as f64
    );
    let n = |kind: &str| counts.get(kind).copied().unwrap_or(0);
    // A session's lease: created, its epoch recorded, given back; no listing or read. Each run
    // also looks at the index's compaction lease (a read, or a take: a few requests).
    assert!(n("LIST leases") + n("GET leases") <= 3 * runs, "{counts:?}");
    assert!(n("PUT leases") <= 3 * sessions + 4 * runs, "{counts:?}");
    // Everything a run asked of the store, its probe, catalog, index and connections included,
    // shipping every 0.2 s (a part per interval a session spans, then one merged): under 10
    // requests a session (the lease's part alone took about 9 before issue 50).
    assert!(total < 10 * sessions, "{total} requests: {counts:?}");
    // A teammate lists every one, searches each by its own word.
    let teammate = Host::new(&url, &store.env());
    let (code, out, err) = teammate.cli(&["list", "--json"]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<Value> = serde_json::from_str(&out).unwrap();
    let listed: BTreeSet<&str> = rows.iter().filter_map(|r| r["session"].as_str()).collect();
    assert_eq!(listed.len(), sessions, "{err}");
    assert!(!err.contains("behind"), "{err}");
    for (run, n) in [(0, 0), (runs - 1, per_run - 1), (2, 7)] {
        let (code, out, err) = teammate.cli(&["search", &format!("w{run}x{n}")]);
        assert_eq!(code, 0, "{err}");
        let session = &all[run * per_run + n];
        assert!(
            out.contains(&session[..6]),
            "w{run}x{n} in {session}: {out}{err}"
        );
    }
}

#[test]
fn a_run_killed_during_its_last_flush_loses_no_session() {
    let store = S3sFs::start();
    let relay = Relay::start(store.port, Duration::from_millis(30));
    let url = store.url("team");
    let host = Host::new(&url, &through(&relay));
    let (ids, mut client) = run_sessions(&host, 0, 20);
    // The end of the run: its last bytes and rows go while it is killed.
    client.close_stdin();
    std::thread::sleep(Duration::from_millis(600));
    unsafe { libc::kill(client.child.id() as i32, libc::SIGKILL) };
    let _ = client.finish();
    let at_kill = indexed(&store, "team");
    eprintln!(
        "indexed when killed: {} of {} sessions whole",
        ids.iter()
            .filter(|s| at_kill.get(*s).is_some_and(|r| r.0 == 2))
            .count(),
        ids.len()
    );
    // Started again: while it runs, what the killed run left is committed, each turn once…
    // (a session whose lease the killed run took, killed before the take's second write, its
    // epoch record, is shipped under the lease's epoch: it was stranded before)
    let mut again = host.proxy(&Peers::get().py_echo_agent(), &[]);
    again.initialize();
    let more = again.new_session("/tmp");
    again.prompt(&more, "first turn of the next run");
    again.prompt(&more, "second turn of the next run");
    let restarted = std::time::Instant::now();
    eventually("every session of the killed run is in the index", || {
        let index = indexed(&store, "team");
        let missing: Vec<&String> = ids
            .iter()
            .filter(|s| index.get(*s).is_none_or(|r| r.0 != 2))
            .collect();
        (!missing.is_empty()).then(|| format!("{missing:?} of {index:?}"))
    });
    eprintln!(
        "every session of the killed run indexed {:.1} s after the restart",
        restarted.elapsed().as_secs_f64()
    );
    // …and its own at its end.
    let (code, _) = again.finish();
    assert_eq!(code, 0);
    eventually("the next run's session is in the index", || {
        let index = indexed(&store, "team");
        (index.get(&more).is_none_or(|r| r.0 != 2)).then(|| format!("{index:?}"))
    });
}

#[test]
fn a_host_never_started_again_is_repaired_by_another_host_while_readers_say_the_index_lags() {
    let store = S3sFs::start();
    let url = store.url("team");
    let gone = Host::new(&url, &store.env());
    // Shipped, and killed before its index's first flush; never started again.
    let (ids, client) = run_sessions(&gone, 0, 3);
    std::thread::sleep(Duration::from_secs(2));
    unsafe { libc::kill(client.child.id() as i32, libc::SIGKILL) };
    let _ = client.finish();
    assert!(ids.iter().all(|s| !indexed(&store, "team").contains_key(s)));
    // Another host runs on (its index task looks at the compaction lease every 30 s).
    let keeper = Host::new(&url, &store.env());
    let mut on = keeper.proxy(&Peers::get().py_echo_agent(), &[]);
    on.initialize();
    let kept = on.new_session("/tmp");
    on.prompt(&kept, "the keeper's turn");
    // A reader lists the lost sessions (from the catalogs) and, past half a minute, says the
    // index is behind them.
    let reader = Host::new(&url, &store.env());
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (code, out, err) = reader.cli(&["list", "--json"]);
        assert_eq!(code, 0, "{err}");
        let rows: Vec<Value> = serde_json::from_str(&out).unwrap();
        let listed = ids.iter().all(|s| {
            rows.iter()
                .any(|r| r["session"] == s.as_str() && r["turns"] == 2)
        });
        if listed && err.contains("behind the hosts' catalogs on 3 sessions") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{out}{err}");
        std::thread::sleep(Duration::from_secs(1));
    }
    // Within two minutes the keeper's repair pass has indexed them, and the reader is quiet.
    let deadline = std::time::Instant::now() + Duration::from_secs(150);
    loop {
        let index = indexed(&store, "team");
        if ids.iter().all(|s| index.get(s).is_some_and(|r| r.0 == 2)) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not repaired: {index:?}"
        );
        std::thread::sleep(Duration::from_secs(2));
    }
    let (code, _, err) = reader.cli(&["list", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("behind"), "{err}");
    let (code, _) = on.finish();
    assert_eq!(code, 0);
}

/// The manifest's parts, by path: (table, rows), and the paths it lists as compacted away.
fn manifest_parts(
    store: &S3sFs,
    prefix: &str,
) -> (BTreeMap<String, (String, u64)>, BTreeSet<String>) {
    let root = store.root.path().join(&store.bucket).join(prefix);
    let Ok(bytes) = std::fs::read(root.join("index/snapshot.json")) else {
        return Default::default();
    };
    let m: Value = serde_json::from_slice(&bytes).unwrap();
    let parts = m["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let table = p["table"].as_str().unwrap().to_string();
            (
                p["path"].as_str().unwrap().to_string(),
                (table, p["rows"].as_u64().unwrap()),
            )
        })
        .collect();
    let removed = m["removed"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["path"].as_str().map(str::to_string))
        .collect();
    (parts, removed)
}

/// The index's part files in the store.
fn part_files(store: &S3sFs, prefix: &str) -> BTreeSet<String> {
    let root = store.root.path().join(&store.bucket).join(prefix);
    store
        .object_files()
        .into_iter()
        .filter_map(|f| {
            let rel = f.strip_prefix(&root).ok()?.display().to_string();
            (rel.starts_with("index/") && rel.ends_with(".parquet")).then_some(rel)
        })
        .collect()
}

/// The index's timers in real time, several periods each (their schedules are tested on paused
/// time in `fleet::index`): a host prompting every 3 s for four minutes has each turn in the
/// index within a few flushes (8 s each), its parts merged by 8 at the compaction lease's looks
/// (every 30 s), and the parts merged away deleted a minute (`GRACE`) after, never while the
/// manifest still lists them.
#[test]
fn the_index_over_minutes_of_turns_flushes_compacts_and_deletes_on_its_timers() {
    let store = S3sFs::start();
    let url = store.url("team");
    let host = Host::new(&url, &store.env());
    let mut client = host.proxy(&Peers::get().py_echo_agent(), &[]);
    client.initialize();
    let session = client.new_session("/tmp");
    let started = std::time::Instant::now();
    let mut ended: Vec<std::time::Instant> = Vec::new();
    let mut seen_files = BTreeSet::new();
    let mut ever_listed = BTreeSet::new();
    let mut next_look = started + Duration::from_secs(15);
    let mut looks = 0;
    while started.elapsed() < Duration::from_secs(240) {
        client.prompt(&session, &format!("turn {}", ended.len() + 1));
        ended.push(std::time::Instant::now());
        std::thread::sleep(Duration::from_secs(3));
        if std::time::Instant::now() < next_look {
            continue;
        }
        next_look += Duration::from_secs(15);
        looks += 1;
        let index = indexed(&store, "team");
        let turns = index.get(&session).map_or(0, |r| r.0);
        // Every turn that ended three flushes and a ship round ago is in.
        let due = ended
            .iter()
            .filter(|at| at.elapsed() > Duration::from_secs(30))
            .count();
        assert!(
            turns as usize >= due,
            "look {looks}: {turns} turns indexed, {due} due"
        );
        let (parts, removed) = manifest_parts(&store, "team");
        // Compaction keeps each table of the day to a few parts.
        for table in ["sessions", "turns", "postings"] {
            let n = parts.values().filter(|(t, _)| t == table).count();
            assert!(n < 2 * 8, "look {looks}: {n} {table} parts");
        }
        // Nothing the manifest lists is ever gone.
        let files = part_files(&store, "team");
        for path in parts.keys() {
            assert!(files.contains(path), "look {looks}: {path} listed, deleted");
        }
        ever_listed.extend(parts.keys().cloned());
        ever_listed.extend(removed);
        seen_files.extend(files);
    }
    let (code, _) = client.finish();
    assert_eq!(code, 0);
    let index = indexed(&store, "team");
    assert_eq!(index.get(&session).map(|r| r.0), Some(ended.len() as u32));
    let (parts, _) = manifest_parts(&store, "team");
    let merged = parts
        .values()
        .any(|(table, rows)| table == "turns" && *rows > 8);
    assert!(merged, "no compaction in four minutes: {parts:?}");
    let files = part_files(&store, "team");
    let deleted: Vec<&String> = seen_files.difference(&files).collect();
    assert!(
        !deleted.is_empty(),
        "nothing compacted away was deleted in four minutes"
    );
    assert!(
        deleted.iter().all(|p| ever_listed.contains(*p)),
        "{deleted:?}"
    );
}
