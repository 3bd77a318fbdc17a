//! The index without a server, on the crate's `InMemory` store: parts written and committed by
//! several writers at once, read back as one snapshot, looked up by word, compacted by two
//! hosts racing (one merge wins, no row lost or doubled), and a manifest that is garbage.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use object_store::memory::InMemory;

use super::compact;
use super::reader::{self, Found};
use super::rows::{SessionRow, TurnRow};
use super::snapshot;
use super::table::{self, Table};
use super::writer::{self, put_part};
use crate::fleet::faults::Faulty;
use crate::fleet::store::{Store, Write};
use crate::journal::JournalDir;
use crate::journal::format::{Body, Payload, Record};
use crate::wire::Side;

fn memory() -> (Store, Arc<Faulty>) {
    let faulty = Faulty::new(Arc::new(InMemory::new()));
    (Store::over(faulty.clone(), "team", "memory://team"), faulty)
}

fn session(id: &str, version: i64, turns: u32) -> SessionRow {
    SessionRow {
        session: id.into(),
        title: Some(format!("title of {id}")),
        host: "h".into(),
        started_us: 1_795_000_000_000_000,
        last_activity_us: 1_795_000_000_000_000 + version,
        turns,
        state: "idle".into(),
        version,
        ..SessionRow::default()
    }
}

/// One writer's flush: a sessions part, a turns part and a postings part, committed.
async fn write(store: &Store, host: &str, id: &str, version: i64, words: &[&str]) {
    let day = Some("2026-11-28");
    let rows = [session(id, version, 1)];
    let sessions = table::encode_sessions(&rows).unwrap();
    let turn = TurnRow {
        session: id.into(),
        turn: 1,
        host: host.into(),
        started_us: 1_795_000_000_000_000 + version,
        prompt: words.join(" "),
        ..TurnRow::default()
    };
    let turns = table::encode_turns(&[turn]).unwrap();
    let mut postings: Vec<(String, String)> = words
        .iter()
        .map(|w| (w.to_string(), id.to_string()))
        .collect();
    postings.sort();
    let range = Some((postings[0].0.clone(), postings.last().unwrap().0.clone()));
    let postings = table::encode_postings(&postings).unwrap();
    let parts = [
        put_part(store, Table::Sessions, day, host, 1, None, sessions)
            .await
            .unwrap(),
        put_part(store, Table::Turns, day, host, 1, None, turns)
            .await
            .unwrap(),
        put_part(
            store,
            Table::Postings,
            None,
            host,
            words.len() as u64,
            range,
            postings,
        )
        .await
        .unwrap(),
    ];
    snapshot::commit(store, |s| {
        let missing: Vec<_> = parts
            .iter()
            .filter(|p| !s.parts.contains(p))
            .cloned()
            .collect();
        let changed = !missing.is_empty();
        s.parts.extend(missing);
        changed
    })
    .await
    .unwrap();
}

/// `part` listed in the manifest, committed (a part written beside the writer, as a host of
/// another build writes one).
async fn list_in_manifest(store: &Store, part: &snapshot::Part) {
    snapshot::commit(store, |s| {
        let changed = !s.parts.contains(part);
        if changed {
            s.parts.push(part.clone());
        }
        changed
    })
    .await
    .unwrap();
}

async fn snapshot(store: &Store) -> snapshot::Snapshot {
    match reader::open(store).await.unwrap() {
        Found::Index(s) => s,
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn writers_committing_at_once_lose_nothing_and_a_reader_sees_one_snapshot() {
    let (store, faulty) = memory();
    // The store checks then writes: racing commits are told apart by reading back.
    faulty.set_racy(true);
    let writes = (0..6).map(|i| {
        let store = store.clone();
        async move {
            write(
                &store,
                &format!("h{i}"),
                &format!("s{i}"),
                i,
                &["flaky", &format!("w{i}")],
            )
            .await
        }
    });
    futures_util::future::join_all(writes).await;
    let snap = snapshot(&store).await;
    assert_eq!(snap.of(Table::Sessions).count(), 6, "{snap:?}");
    let rows = reader::sessions(&store, &snap).await.unwrap();
    assert_eq!(rows.len(), 6);
    let found = reader::candidates(&store, &snap, &["flaky".into()], None)
        .await
        .unwrap();
    assert_eq!(found.len(), 6);
    let found = reader::candidates(&store, &snap, &["flaky".into(), "w3".into()], None)
        .await
        .unwrap();
    assert_eq!(found, BTreeSet::from(["s3".to_string()]));
    // A word's beginning finds it too.
    let found = reader::candidates(&store, &snap, &["fla".into()], None)
        .await
        .unwrap();
    assert_eq!(found.len(), 6);
    let found = reader::candidates(&store, &snap, &["nowhere".into()], None)
        .await
        .unwrap();
    assert!(found.is_empty());
    // Through a cache far too small to keep anything, and one that keeps it: the same answer;
    // the second lookup through the kept ranges asks the store nothing.
    let dir = tempfile::tempdir().unwrap();
    for limit in [1, 1 << 20] {
        let cache = Arc::new(super::cache::Cache::new(
            dir.path().join(format!("{limit}")),
            limit,
        ));
        let first = reader::candidates(&store, &snap, &["w3".into()], Some(&cache))
            .await
            .unwrap();
        let asked = faulty.requests.load(std::sync::atomic::Ordering::SeqCst);
        let again = reader::candidates(&store, &snap, &["w3".into()], Some(&cache))
            .await
            .unwrap();
        assert_eq!((&first, &again), (&found_w3(), &found_w3()));
        let asked_again = faulty.requests.load(std::sync::atomic::Ordering::SeqCst) - asked;
        assert_eq!(
            asked_again == 0,
            limit > 1,
            "{asked_again} requests through a cache of {limit}"
        );
    }
}

fn found_w3() -> BTreeSet<String> {
    BTreeSet::from(["s3".to_string()])
}

#[tokio::test(start_paused = true)]
async fn two_hosts_racing_to_compact_lose_and_double_nothing() {
    let (store, _) = memory();
    for i in 0..compact::COMPACT_AT as i64 {
        // The same session written again and again: the latest version is the one kept.
        write(&store, "h", "s", i, &["alpha", &format!("word{i}")]).await;
    }
    let before = snapshot(&store).await;
    assert!(compact::needed(&before, 0));
    let now = 1_795_000_000_000_000;
    let (a, b) = tokio::join!(
        compact::compact(&store, "a", now),
        compact::compact(&store, "b", now)
    );
    let merged = a.unwrap() + b.unwrap();
    let after = snapshot(&store).await;
    // Each table's parts merged once: by one host or the other, or part by each.
    assert_eq!(merged, before.parts.len(), "{after:?}");
    assert_eq!(after.parts.len(), 3, "{after:?}");
    let rows = reader::sessions(&store, &after).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].version,
        compact::COMPACT_AT as i64 - 1,
        "the latest kept"
    );
    let turns_part = after.of(Table::Turns).next().unwrap();
    assert_eq!(
        turns_part.rows,
        compact::COMPACT_AT as u64,
        "every turn once"
    );
    for i in 0..compact::COMPACT_AT {
        let found = reader::candidates(&store, &after, &[format!("word{i}")], None)
            .await
            .unwrap();
        assert_eq!(found.len(), 1, "word{i}");
    }
    // The parts merged away are deleted once readers are done with them, not before.
    let listed = |r: &Store| {
        let r = r.clone();
        async move { r.list("index").await.unwrap().len() }
    };
    let with_old = listed(&store).await;
    compact::compact(&store, "a", now + 1).await.unwrap();
    assert_eq!(listed(&store).await, with_old);
    compact::compact(&store, "a", now + compact::GRACE)
        .await
        .unwrap();
    assert_eq!(listed(&store).await, 3 + 1, "three parts and the manifest");
    assert!(snapshot(&store).await.removed.is_empty());
}

#[tokio::test]
async fn a_manifest_that_is_garbage_is_unreadable_and_the_next_commit_starts_afresh() {
    let (store, _) = memory();
    store
        .put_versioned(
            snapshot::MANIFEST,
            bytes::Bytes::from_static(b"{\"format\": 1, \"parts\": 7}"),
            Write::Overwrite,
        )
        .await
        .unwrap();
    assert!(matches!(
        reader::open(&store).await.unwrap(),
        Found::Unreadable(_)
    ));
    write(&store, "h", "s", 1, &["after"]).await;
    let snap = snapshot(&store).await;
    assert_eq!(snap.parts.len(), 3);
    // A part the manifest lists that is not Parquet: the reader says so, it does not crash.
    let mut hostile = snap.clone();
    let path = hostile.parts[0].path.clone();
    store.delete(&path).await.unwrap();
    store
        .put_new(&path, bytes::Bytes::from_static(b"PAR1 not really"))
        .await
        .unwrap();
    hostile.version += 1;
    assert!(reader::sessions(&store, &hostile).await.is_err());
}

/// Time on the paused runtime clock since `start`, moved on to `at`.
async fn advance_to(start: tokio::time::Instant, at: Duration) {
    let now = start.elapsed();
    assert!(at >= now, "{at:?} < {now:?}");
    tokio::time::advance(at - now).await;
    assert_eq!(start.elapsed(), at);
}

fn note(seq: u64) -> Record {
    Record {
        seq,
        unix_us: 1_795_000_000_000_000,
        mono_us: seq,
        body: Body::Message {
            from: Side::Client,
            payload: Payload::from_line(
                format!(r#"{{"jsonrpc":"2.0","method":"note","params":{{"text":"n{seq}"}}}}"#)
                    .into_bytes()
                    .into(),
            ),
        },
    }
}

/// The index writer's [`writer::FLUSH`] over five periods on the paused runtime clock: rows
/// kept 1 s after a flush (or after the writer began) are not due 1 ms before
/// [`writer::FLUSH`] has passed since it, are due at exactly [`writer::FLUSH`], and the flush
/// then commits them and starts the next period. Nothing kept is never due, however long; rows
/// kept long after the last flush are due at once.
#[tokio::test(start_paused = true)]
async fn the_index_writer_is_due_every_flush_and_not_sooner() {
    let (store, _) = memory();
    let dir = tempfile::tempdir().unwrap();
    let local = JournalDir::new(dir.path());
    local.create_dirs().unwrap();
    let run = "20261128T100000.000000Z-1";
    let mut segment = local
        .create_segment_writer(
            &local.session_dir("s"),
            run,
            &crate::fleet::shipper::tests::header("s", run),
        )
        .unwrap();
    let start = tokio::time::Instant::now();
    let clock = std::sync::Arc::new(crate::fleet::clock::RuntimeClock::new(0));
    let mut index = writer::Writer::new(store.clone(), local.clone(), "h".into(), clock);
    // Everything written is in the store as soon as it is written.
    let shipped = crate::fleet::shipped::ShippedFiles::default();
    let path = segment.path().to_path_buf();
    index.follow(&path, Default::default(), shipped.of(&path));
    let ship = || shipped.shipped(&path, std::fs::metadata(&path).unwrap().len());
    let (flush, tick) = (writer::FLUSH, Duration::from_millis(1));
    // When the period began: the writer's start, then each flush's (a commit reads the
    // manifest back after SETTLE, so a flush ends a little after it began).
    let mut flushed = Duration::ZERO;
    for period in 0..5u32 {
        advance_to(start, flushed + Duration::from_secs(1)).await;
        segment.append(&note(u64::from(period))).unwrap();
        segment.flush().unwrap();
        ship();
        index.poll();
        assert!(!index.due(false), "period {period}: rows just kept");
        advance_to(start, flushed + flush - tick).await;
        index.poll();
        assert!(!index.due(false), "period {period}: 1 ms before {flush:?}");
        advance_to(start, flushed + flush).await;
        index.poll();
        assert!(index.due(false), "period {period}: at {flush:?}");
        flushed = start.elapsed();
        let committed = index.flush().await.unwrap().snapshot.unwrap();
        assert_eq!(
            committed.of(Table::Sessions).count(),
            period as usize + 1,
            "{committed:?}"
        );
        assert!(start.elapsed() < flushed + Duration::from_secs(1));
        assert!(!index.due(false), "period {period}: just flushed");
    }
    // Nothing kept: not due, whatever time passes.
    advance_to(start, flushed + flush * 3).await;
    index.poll();
    assert!(!index.due(false));
    // Rows kept three periods after the last flush: due at once.
    segment.append(&note(5)).unwrap();
    segment.flush().unwrap();
    ship();
    index.poll();
    assert!(index.due(false));
}

/// The index's objects in the store.
async fn listed(store: &Store) -> BTreeSet<String> {
    store.list("index").await.unwrap().into_iter().collect()
}

/// Write `n` parts of session `s` from host `h`, versions `*version` on (each with `alpha` and
/// a word of its own), and move `*version` past them.
async fn write_parts(store: &Store, version: &mut i64, n: usize) {
    for _ in 0..n {
        let v = *version;
        write(store, "h", "s", v, &["alpha", &format!("word{v}")]).await;
        *version += 1;
    }
}

/// Compaction's [`compact::GRACE`] over four periods, a compaction each period: the parts a
/// compaction at `t` merged away stay in the store (and `needed` says nothing is due) 1 µs
/// before `t` + [`compact::GRACE`], and at exactly `t` + [`compact::GRACE`] `needed` says so and
/// a compaction deletes them and takes them off the manifest, while the parts it merges then
/// wait their own [`compact::GRACE`].
#[tokio::test(start_paused = true)]
async fn parts_compacted_away_are_deleted_grace_after_and_not_sooner() {
    let (store, _) = memory();
    let base = 1_795_000_000_000_000;
    let mut version = 0;
    write_parts(&store, &mut version, compact::COMPACT_AT).await;
    assert_eq!(
        compact::compact(&store, "a", base).await.unwrap(),
        3 * compact::COMPACT_AT
    );
    let mut waiting: BTreeSet<String> = snapshot(&store)
        .await
        .removed
        .iter()
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(waiting.len(), 3 * compact::COMPACT_AT);
    for period in 1..=4i64 {
        let due_at = base + compact::GRACE * period;
        assert!(waiting.is_subset(&listed(&store).await), "period {period}");
        // 1 µs before: nothing due, nothing deleted.
        let snap = snapshot(&store).await;
        assert!(
            !compact::needed(&snap, due_at - 1),
            "period {period}: {snap:?}"
        );
        assert_eq!(compact::compact(&store, "a", due_at - 1).await.unwrap(), 0);
        assert!(
            waiting.is_subset(&listed(&store).await),
            "period {period}: 1 µs before"
        );
        assert_eq!(snapshot(&store).await.removed.len(), waiting.len());
        // Enough parts again for a merge at the boundary.
        write_parts(&store, &mut version, compact::COMPACT_AT - 1).await;
        // At GRACE: due, deleted, off the manifest; the parts merged now wait theirs.
        assert!(compact::needed(&snapshot(&store).await, due_at));
        let merged = compact::compact(&store, "a", due_at).await.unwrap();
        assert_eq!(merged, 3 * compact::COMPACT_AT, "period {period}");
        let now_listed = listed(&store).await;
        assert!(
            waiting.is_disjoint(&now_listed),
            "period {period}: at GRACE"
        );
        let snap = snapshot(&store).await;
        let merged_away: BTreeSet<String> = snap.removed.iter().map(|r| r.path.clone()).collect();
        assert!(waiting.is_disjoint(&merged_away), "period {period}");
        assert_eq!(merged_away.len(), 3 * compact::COMPACT_AT);
        assert!(snap.removed.iter().all(|r| r.at == due_at));
        assert!(merged_away.is_subset(&now_listed));
        waiting = merged_away;
    }
    // Every row kept once, whatever was deleted.
    let snap = snapshot(&store).await;
    assert_eq!(
        reader::sessions(&store, &snap).await.unwrap()[0].version,
        version - 1
    );
    let turns: u64 = snap.of(Table::Turns).map(|p| p.rows).sum();
    assert_eq!(turns, version as u64);
}

/// Write `manifest` as the store's manifest, whatever it holds.
async fn plant_manifest(store: &Store, manifest: &serde_json::Value) {
    store
        .put_versioned(
            snapshot::MANIFEST,
            bytes::Bytes::from(serde_json::to_vec(manifest).unwrap()),
            Write::Overwrite,
        )
        .await
        .unwrap();
}

/// A bucket writer's manifest names another host's segment, lease, epoch record and catalog
/// part as parts compacted away long ago (`at: 0`), and a segment as a part: a compaction
/// deletes only the genuine index part compacted away, readers never read what is no index
/// part, and the next commit writes none of it back.
#[tokio::test(start_paused = true)]
async fn a_manifest_makes_a_host_delete_nothing_but_index_parts_compacted_away() {
    let (store, _) = memory();
    write(&store, "h", "s", 1, &["alpha"]).await;
    let mut manifest = serde_json::to_value(snapshot(&store).await).unwrap();
    let precious = [
        "sessions/ss/20261129T100000.000000Z-7.acpj.zst/0000000000000000-0000000000000040",
        "sessions/ss/20261129T100000.000000Z-7.acpj.zst/epoch-1",
        "leases/ss/lease",
        "leases/ss/epoch-1",
        "hosts/b/catalog.ndjson/0000000000000000-0000000000000010",
        "index/../leases/ss/lease",
        "index/sessions/day=2026-11-28/../../../leases/ss/lease.parquet",
    ];
    // (A path with `..` cannot even be written: it only names the others.)
    for path in &precious[..5] {
        store
            .put_new(path, bytes::Bytes::from_static(b"precious"))
            .await
            .unwrap();
    }
    let genuine = "index/turns/day=2026-11-28/h-1-abc.parquet";
    store
        .put_new(genuine, bytes::Bytes::from_static(b"old"))
        .await
        .unwrap();
    let mut removed: Vec<serde_json::Value> = precious
        .iter()
        .map(|p| serde_json::json!({"path": p, "at": 0}))
        .collect();
    removed.push(serde_json::json!({"path": genuine, "at": 0}));
    manifest["removed"] = removed.into();
    manifest["parts"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "table": "sessions", "path": precious[0], "rows": 1, "bytes": 8, "day": "2026-11-28"
        }));
    plant_manifest(&store, &manifest).await;
    let read = snapshot(&store).await;
    assert_eq!(read.parts.len(), 3, "{read:?}");
    assert_eq!(read.removed.len(), 1, "{read:?}");
    assert_eq!(read.left_out, precious.len() + 1);
    compact::compact(&store, "a", 1_795_000_000_000_000)
        .await
        .unwrap();
    let now = listed(&store).await;
    assert!(
        !now.contains(genuine),
        "the genuine part compacted away is gone"
    );
    for path in &precious[..5] {
        assert_eq!(
            store.get(path).await.unwrap().as_ref(),
            b"precious",
            "{path} deleted"
        );
    }
    // The next commit writes back only what a manifest may name.
    write(&store, "h", "t", 2, &["beta"]).await;
    let raw: serde_json::Value =
        serde_json::from_slice(&store.get(snapshot::MANIFEST).await.unwrap()).unwrap();
    let text = raw.to_string();
    assert!(
        !text.contains("leases/") && !text.contains("acpj.zst"),
        "{text}"
    );
    assert_eq!(
        reader::sessions(&store, &snapshot(&store).await)
            .await
            .unwrap()
            .len(),
        2
    );
}

/// A manifest past its bounds (bytes, or entries) is unreadable: readers fall back without
/// reading it whole, and the next writer starts it afresh.
#[tokio::test(start_paused = true)]
async fn a_manifest_past_its_bounds_is_unreadable_and_the_next_writer_starts_it_afresh() {
    let (store, faulty) = memory();
    let entry = |n: usize| serde_json::json!({"table": "postings", "path": format!("index/postings/x-{n}.parquet"), "rows": 1, "bytes": 1});
    let many: Vec<serde_json::Value> = (0..=snapshot::MAX_ENTRIES).map(entry).collect();
    let huge = "x".repeat(usize::try_from(snapshot::MAX_MANIFEST).unwrap());
    for manifest in [
        serde_json::json!({"format": 1, "version": 7, "parts": many}),
        serde_json::json!({"format": 1, "version": 7, "parts": [], "pad": huge}),
    ] {
        plant_manifest(&store, &manifest).await;
        faulty.take_counts();
        assert!(matches!(
            reader::open(&store).await.unwrap(),
            Found::Unreadable(_)
        ));
        write(&store, "h", "s", 1, &["after"]).await;
        let snap = snapshot(&store).await;
        assert_eq!(snap.parts.len(), 3, "started afresh");
        assert_eq!(reader::sessions(&store, &snap).await.unwrap().len(), 1);
    }
}

/// A sessions part written by `writer` (its name in the path) with `rows`, added to the
/// manifest as a bucket writer would.
async fn forge_sessions(store: &Store, writer: &str, rows: &[SessionRow]) {
    let bytes = table::encode_sessions(rows).unwrap();
    let day = Some("2026-11-28");
    let part = put_part(
        store,
        Table::Sessions,
        day,
        writer,
        rows.len() as u64,
        None,
        bytes,
    )
    .await
    .unwrap();
    snapshot::commit(store, |s| {
        let missing = !s.parts.contains(&part);
        if missing {
            s.parts.push(part.clone());
        }
        missing
    })
    .await
    .unwrap();
}

/// The catalogs as a reader believes them: each session and the hosts that opened it.
fn catalogs(claims: &[(&str, &str)]) -> crate::fleet::pull::Catalogs {
    let mut c = crate::fleet::pull::Catalogs::default();
    for (session, host) in claims {
        c.claims
            .entry(session.to_string())
            .or_default()
            .insert(host.to_string());
    }
    c
}

/// A session the catalogs list: opened at `started`, with `turns` turns, closed or not.
fn listed_session(
    id: &str,
    started: i64,
    turns: u64,
    open: bool,
) -> crate::catalog::SessionSummary {
    crate::catalog::SessionSummary {
        session: id.into(),
        started,
        updated: started,
        turns,
        open,
        ..Default::default()
    }
}

/// A bucket writer's sessions part hides one host's session (`hidden`, the highest version
/// there is), retitles it, and invents sessions, under its own host name or the real host's:
/// a reader believes none of its rows, and still lists the session as its host wrote it.
#[tokio::test(start_paused = true)]
async fn forged_rows_hide_retitle_and_invent_nothing() {
    let (store, _) = memory();
    write(&store, "h", "s", 5, &["alpha"]).await;
    let now = 1_795_000_000_000_000 + 10_000_000;
    let forged = |id: &str, host: &str, version: i64| SessionRow {
        host: host.into(),
        hidden: true,
        title: Some("forged".into()),
        version,
        ..session(id, 5, 1)
    };
    forge_sessions(
        &store,
        "mallory",
        &[
            forged("s", "mallory", i64::MAX),
            forged("s", "mallory", 6),
            forged("z", "mallory", 6),
            forged("z", "h", 6),
        ],
    )
    .await;
    // The session's own host, with a version past any clock.
    forge_sessions(&store, "h", &[forged("s", "h", i64::MAX)]).await;
    let snap = snapshot(&store).await;
    let claims = catalogs(&[("s", "h")]);
    let view = super::view::sessions(&store, &snap, &claims, &[], now)
        .await
        .unwrap();
    assert_eq!(view.rows.len(), 1, "{:?}", view.rows);
    let row = &view.rows[0];
    assert_eq!((row.session.as_str(), row.hidden), ("s", false));
    assert_eq!(row.title.as_deref(), Some("title of s"));
    assert_eq!(view.disbelieved, 5);
    assert!(
        view.said("memory://team")
            .iter()
            .any(|s| s.contains("5 rows"))
    );
    // Its host's next row (a later activity) is the one listed.
    write(&store, "h", "s", 7, &["beta"]).await;
    let view = super::view::sessions(&store, &snapshot(&store).await, &claims, &[], now)
        .await
        .unwrap();
    assert_eq!(view.rows[0].version, 7);
}

/// Sessions the catalogs list that the index lacks, or knows less of, are behind; past
/// [`super::view::IN_FLIGHT_US`] they lag, and a reader says how many and since when.
#[tokio::test(start_paused = true)]
async fn a_reader_says_how_far_the_index_is_behind_the_catalogs() {
    let (store, _) = memory();
    write(&store, "h", "s", 1, &["alpha"]).await;
    let now = 1_795_000_000_000_000 + 600_000_000;
    let claims = catalogs(&[("s", "h"), ("t", "h"), ("u", "h")]);
    let in_flight = super::view::IN_FLIGHT_US;
    let listed = [
        // In the index with 1 turn, the catalogs say 3, long ago.
        listed_session("s", now - 5 * in_flight, 3, true),
        // Not in the index: opened long ago, and just now.
        listed_session("t", now - 2 * in_flight, 0, true),
        listed_session("u", now - in_flight + 1, 0, true),
    ];
    let view = super::view::sessions(&store, &snapshot(&store).await, &claims, &listed, now)
        .await
        .unwrap();
    let lagging: Vec<&str> = view.lagging.iter().map(|l| l.session.as_str()).collect();
    assert_eq!(lagging, ["s", "t"]);
    assert_eq!(view.behind.len(), 3);
    let said = view.said("memory://team").join("\n");
    assert!(
        said.contains("behind the hosts' catalogs on 2 sessions"),
        "{said}"
    );
    // The list takes the catalogs' word for the sessions the index is behind on.
    let mut whole = catalogs(&[("s", "h")]);
    whole.lines = vec![(Some("s".into()), b"{\"from\":\"catalog\"}".to_vec())];
    let lines = view.catalog_lines(&whole);
    assert_eq!(lines, [b"{\"from\":\"catalog\"}".to_vec()]);
}

/// A turn committed twice (a run that indexed it again after a kill) counts once, and a turn
/// a host that never opened its session claims counts not at all.
#[tokio::test(start_paused = true)]
async fn a_turn_counts_once_and_only_from_a_host_that_may_speak_for_it() {
    let (store, _) = memory();
    write(&store, "h", "s", 1, &["alpha"]).await;
    write(&store, "h", "s", 1, &["alpha"]).await;
    write(&store, "mallory", "s", 2, &["beta"]).await;
    let claims = catalogs(&[("s", "h")]);
    let snap = snapshot(&store).await;
    let view = super::view::sessions(&store, &snap, &claims, &[], 1_795_000_000_000_000)
        .await
        .unwrap();
    let (turns, skipped) = super::view::turns(&store, &snap, &view).await;
    assert!(skipped.is_empty());
    assert_eq!(turns.len(), 1, "{turns:?}");
}

/// Parts in the store the manifest does not list — a writer killed between writing them and
/// committing, or a manifest that dropped them — are taken in by a compaction once unlisted
/// for [`compact::ORPHAN_AFTER`], and not before; one that is not Parquet of its table is left
/// out.
#[tokio::test]
async fn parts_the_manifest_lost_are_taken_in_by_a_compaction() {
    let (store, _) = memory();
    write(&store, "h", "s", 1, &["alpha"]).await;
    let rows = [session("lost", 2, 1)];
    let bytes = table::encode_sessions(&rows).unwrap();
    let lost = put_part(
        &store,
        Table::Sessions,
        Some("2026-11-28"),
        "h",
        1,
        None,
        bytes,
    )
    .await
    .unwrap();
    store
        .put_new(
            "index/postings/h-1-garbage.parquet",
            bytes::Bytes::from_static(b"PAR1 no"),
        )
        .await
        .unwrap();
    let now = jiff::Timestamp::now().as_microsecond();
    let snap = snapshot(&store).await;
    assert_eq!(
        compact::adopt(&store, &snap, now).await.unwrap(),
        0,
        "too young"
    );
    let later = now + compact::ORPHAN_AFTER + 1_000_000;
    assert_eq!(compact::adopt(&store, &snap, later).await.unwrap(), 1);
    let snap = snapshot(&store).await;
    assert!(snap.parts.contains(&lost), "{snap:?}");
    assert_eq!(snap.parts.len(), 4);
    let sessions = reader::sessions(&store, &snap).await.unwrap();
    assert_eq!(sessions.len(), 2);
    assert_eq!(
        compact::adopt(&store, &snap, later).await.unwrap(),
        0,
        "taken in once"
    );
}

/// A table that outgrows one part is written as several, each within what a reader takes; a
/// compaction merges only the small parts of a day (full ones stay), and leaves a part it
/// cannot read where it is.
#[tokio::test(start_paused = true)]
async fn parts_are_written_within_what_readers_take_and_only_small_ones_merged() {
    let (store, _) = memory();
    let many: BTreeSet<(String, String)> = (0..writer::PART_ROWS + 10)
        .map(|n| (format!("w{n:07}"), "s".to_string()))
        .collect();
    let rows = writer::Rows {
        postings: many,
        ..writer::Rows::default()
    };
    let parts = writer::put_rows(&store, "h", &rows).await.unwrap();
    assert_eq!(parts.len(), 2, "{parts:?}");
    assert!(parts.iter().all(|p| p.rows as usize <= writer::PART_ROWS));
    snapshot::commit(&store, |s| {
        let missing: Vec<_> = parts
            .iter()
            .filter(|p| !s.parts.contains(p))
            .cloned()
            .collect();
        let changed = !missing.is_empty();
        s.parts.extend(missing);
        changed
    })
    .await
    .unwrap();
    // Small parts of the postings, one of them garbage: merged but it.
    let mut version = 0;
    write_parts(&store, &mut version, compact::COMPACT_AT).await;
    let garbage = snapshot(&store)
        .await
        .of(Table::Postings)
        .last()
        .unwrap()
        .clone();
    store.delete(&garbage.path).await.unwrap();
    store
        .put_new(&garbage.path, bytes::Bytes::from_static(b"PAR1 garbage"))
        .await
        .unwrap();
    let base = 1_795_000_000_000_000;
    assert!(compact::needed(&snapshot(&store).await, base));
    compact::compact(&store, "a", base).await.unwrap();
    let snap = snapshot(&store).await;
    let postings: Vec<&snapshot::Part> = snap.of(Table::Postings).collect();
    // The full part, the garbage one, and the merge of the rest (the small tail of the large
    // write among them).
    assert_eq!(postings.len(), 3, "{postings:?}");
    assert!(snap.parts.contains(&parts[0]), "a full part stays");
    assert!(snap.parts.contains(&garbage));
    assert!(!compact::needed(&snap, base), "{snap:?}");
}

/// A turns part of a later schema than the reader's (a column more, as a part of schema 2 is
/// to a build of before issue 54): the reader cannot read it, so a compaction merges the day's
/// other parts and leaves it listed and stored, for the builds that read it.
#[tokio::test(start_paused = true)]
async fn a_turns_part_of_a_later_schema_is_left_where_it_is_by_a_compaction() {
    use arrow_array::{RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let (store, _) = memory();
    let mut version = 0;
    write_parts(&store, &mut version, compact::COMPACT_AT - 1).await;
    let turn = TurnRow {
        session: "s".into(),
        turn: 1,
        host: "h".into(),
        started_us: 1_795_000_000_000_000,
        prompt: "later".into(),
        ..TurnRow::default()
    };
    let ours = table::encode_turns(&[turn]).unwrap();
    let batch = ParquetRecordBatchReaderBuilder::try_new(ours)
        .unwrap()
        .build()
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let mut fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("later", DataType::Utf8, true));
    let mut columns = batch.columns().to_vec();
    columns.push(Arc::new(StringArray::from(vec![Some("x")])));
    let later = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
    let properties = parquet::file::properties::WriterProperties::builder()
        .set_compression(parquet::basic::Compression::ZSTD(Default::default()))
        .build();
    let mut bytes = Vec::new();
    let mut w = ArrowWriter::try_new(&mut bytes, later.schema(), Some(properties)).unwrap();
    w.write(&later).unwrap();
    w.close().unwrap();
    assert!(table::decode_turns(bytes::Bytes::from(bytes.clone())).is_err());
    let part = put_part(
        &store,
        Table::Turns,
        Some("2026-11-28"),
        "h",
        1,
        None,
        bytes.into(),
    )
    .await
    .unwrap();
    list_in_manifest(&store, &part).await;
    let base = 1_795_000_000_000_000;
    assert!(compact::needed(&snapshot(&store).await, base));
    compact::compact(&store, "a", base).await.unwrap();
    let snap = snapshot(&store).await;
    let turns: Vec<&snapshot::Part> = snap.of(Table::Turns).collect();
    assert_eq!(turns.len(), 2, "the merge and the later part: {turns:?}");
    assert!(snap.parts.contains(&part));
    assert!(listed(&store).await.contains(&part.path));
}

#[test]
fn a_reader_lists_a_rows_agent_by_its_name_with_its_size_and_last_turn() {
    use crate::catalog::Catalog;
    // Issue 51: `list --store` showed the agent as "Agent" (the last word of its title, taken
    // for a command line), 0 B and no last turn's end.
    let row = SessionRow {
        agent: Some("Claude Agent".into()),
        agent_name: Some("@agentclientprotocol/claude-agent-acp".into()),
        agent_version: Some("0.101.0".into()),
        agent_command: Some("npx @agentclientprotocol/claude-agent-acp".into()),
        bytes: Some(17_472),
        last_turn_ended_us: Some(1_795_000_000_000_007),
        state: "closed".into(),
        ..session("s", 9, 3)
    };
    let dir = tempfile::tempdir().unwrap();
    let copy = JournalDir::mirror(dir.path().join("copy"));
    copy.create_dirs().unwrap();
    copy.append_catalog_entries(&super::view::catalog_entries(&[row]))
        .unwrap();
    let listed = copy.sessions_with(false).unwrap();
    let s = listed.iter().find(|s| s.session == "s").unwrap();
    assert_eq!(s.agent_name.as_deref(), Some("Claude Agent"));
    assert_eq!(
        s.agent.as_deref(),
        Some("npx @agentclientprotocol/claude-agent-acp")
    );
    let info = s.agent_info.as_ref().unwrap();
    assert_eq!(
        (info.name.as_deref(), info.version.as_deref()),
        (
            Some("@agentclientprotocol/claude-agent-acp"),
            Some("0.101.0")
        )
    );
    assert_eq!(s.bytes, 17_472);
    assert_eq!(s.last_turn_ended, Some(1_795_000_000_000_007));
    assert_eq!(s.turns, 3);
    // A row of before: what its agent column says is the agent's name.
    let old = SessionRow {
        agent: Some("Claude Agent".into()),
        ..session("t", 9, 1)
    };
    copy.append_catalog_entries(&super::view::catalog_entries(&[old]))
        .unwrap();
    let listed = copy.sessions_with(false).unwrap();
    let t = listed.iter().find(|s| s.session == "t").unwrap();
    assert_eq!(t.agent_name.as_deref(), Some("Claude Agent"));
}

/// The manifest as a build of before the `edits` table reads and writes it: its `Table` knows
/// three tables, and what it does not know of the manifest it ignores and does not write back.
mod before_edits {
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub(super) enum Table {
        Sessions,
        Turns,
        Postings,
    }

    #[derive(Serialize, Deserialize)]
    pub(super) struct Part {
        pub(super) table: Table,
        pub(super) path: String,
        pub(super) rows: u64,
        pub(super) bytes: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub(super) day: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub(super) words: Option<(String, String)>,
    }

    #[derive(Serialize, Deserialize)]
    pub(super) struct Removed {
        pub(super) path: String,
        pub(super) at: i64,
    }

    #[derive(Serialize, Deserialize)]
    pub(super) struct Snapshot {
        pub(super) format: u32,
        pub(super) version: u64,
        pub(super) parts: Vec<Part>,
        #[serde(default)]
        pub(super) removed: Vec<Removed>,
    }
}

/// A manifest that lists `edits` parts stays one a build of before reads (format 1, every part
/// it lists of a table it knows) and commits to, rather than one it finds unreadable and starts
/// afresh; the `edits` parts such a commit drops are taken in again by the next upkeep.
#[tokio::test]
async fn a_build_before_the_edits_table_reads_and_commits_the_manifest_and_loses_no_part() {
    let (store, _) = memory();
    write(&store, "h", "s", 1, &["alpha"]).await;
    let row = super::edits::EditRow {
        session: "s".into(),
        turn: 1,
        host: "h".into(),
        time_us: 1_795_000_000_000_000,
        prompt: "write it".into(),
        path: Some("/r/a.rs".into()),
        how: Some("diff".into()),
        written: vec![1, 2, 3],
        ..Default::default()
    };
    let edits = put_part(
        &store,
        Table::Edits,
        Some("2026-11-28"),
        "h",
        1,
        None,
        table::encode_edits(&[row]).unwrap(),
    )
    .await
    .unwrap();
    list_in_manifest(&store, &edits).await;
    assert!(snapshot(&store).await.parts.contains(&edits));

    // What a build of before reads: the manifest, of its format, with the three parts it knows.
    let (version, bytes) = store
        .get_versioned(snapshot::MANIFEST, snapshot::MAX_MANIFEST)
        .await
        .unwrap()
        .unwrap();
    let old: before_edits::Snapshot = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(old.format, 1);
    assert_eq!(old.parts.len(), 3);
    // It commits a part of its own, and writes back only what it knows.
    let mut old = old;
    old.version += 1;
    old.parts.push(before_edits::Part {
        table: before_edits::Table::Postings,
        path: "index/postings/old-1.parquet".into(),
        rows: 0,
        bytes: 0,
        day: None,
        words: None,
    });
    store
        .put_versioned(
            snapshot::MANIFEST,
            bytes::Bytes::from(serde_json::to_vec(&old).unwrap()),
            Write::Replace(version),
        )
        .await
        .unwrap();
    let after_old = snapshot(&store).await;
    assert_eq!(after_old.parts.len(), 4, "its part counts: {after_old:?}");
    assert!(
        !after_old.parts.contains(&edits),
        "dropped by the old build"
    );

    // The next upkeep takes the dropped part in again.
    let later = jiff::Timestamp::now().as_microsecond() + compact::ORPHAN_AFTER + 1_000_000;
    assert_eq!(compact::adopt(&store, &after_old, later).await.unwrap(), 1);
    assert!(snapshot(&store).await.parts.contains(&edits));
}

/// `index rebuild`'s commit changes the manifest once: read back, its parts of several tables
/// are listed in another order (the tables of format 1 first) and are still the same parts.
#[test]
fn a_rebuild_of_parts_of_every_table_is_committed_once() {
    let day = Some("2026-11-28".to_string());
    let part = |table, path: &str| snapshot::Part {
        table,
        path: path.into(),
        rows: 1,
        bytes: 1,
        day: day.clone(),
        words: None,
    };
    let parts = vec![
        part(Table::Edits, "index/edits/day=2026-11-28/h-1.parquet"),
        part(Table::Sessions, "index/sessions/day=2026-11-28/h-1.parquet"),
    ];
    let mut written = snapshot::Snapshot {
        format: snapshot::FORMAT,
        ..Default::default()
    };
    assert!(compact::replace_all(&mut written, &parts, 1));
    let mut read_back: snapshot::Snapshot =
        serde_json::from_slice(&serde_json::to_vec(&written).unwrap()).unwrap();
    assert_ne!(read_back.parts, parts, "the tables of format 1 first");
    assert!(!compact::replace_all(&mut read_back, &parts, 2));
}

/// `index rebuild` reads each segment to its end: a session whose run closed its segment (the
/// end marker) is closed in its row, as the writer that followed it would have said, so readers
/// do not take the index for behind on it; one still being written is not.
#[test]
fn a_rebuilt_sessions_row_is_closed_when_its_segment_was() {
    let dir = tempfile::tempdir().unwrap();
    let local = JournalDir::new(dir.path());
    local.create_dirs().unwrap();
    let run = "20261128T100000.000000Z-1";
    let segment = |id: &str| {
        let mut writer = local
            .create_segment_writer(
                &local.session_dir(id),
                run,
                &crate::fleet::shipper::tests::header(id, run),
            )
            .unwrap();
        writer.append(&note(0)).unwrap();
        writer.flush().unwrap();
        writer
    };
    let open = segment("open");
    let closed = segment("closed");
    let closed_path = closed.path().to_path_buf();
    closed.close(1, 1_795_000_000_000_001, 1).unwrap();
    let state = |path: &std::path::Path| {
        let rows = compact::rows_of(&[(path.to_path_buf(), "h".into())], &mut Default::default());
        rows.sessions[0].state.clone()
    };
    assert_eq!(state(&closed_path), "closed");
    assert_ne!(state(open.path()), "closed");
}
