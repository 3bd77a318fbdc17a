//! The shipper and the pull, without a server: a journal directory shipped to the crate's
//! `InMemory` store with the runtime's clock paused (many ship intervals and lease periods in
//! no time), through outages, a lost lease and compaction, then read back by a pull.

use crate::fleet::layout::{SessionId, SessionKey};
use std::sync::Arc;
use std::time::Duration;

use object_store::memory::InMemory;
use parking_lot::Mutex;
use tokio::sync::mpsc;

use super::*;
use crate::fleet::clock::RuntimeClock;
use crate::fleet::faults::Faulty;
use crate::fleet::lease::{self, Identity, Leases, Policy};
use crate::fleet::liveness::ProcessTable;
use crate::fleet::pull;
use crate::journal::format::{Body, FORMAT_VERSION, Header, Payload, Record, SegmentKind};
use crate::journal::{SegmentReader, SegmentWriter};
use crate::wire::Side;

const INTERVAL: Duration = Duration::from_secs(1);
const TTL: Duration = Duration::from_secs(15);

/// A session segment's header (the index's tests write segments too).
pub(in crate::fleet) fn header(session: &str, run: &str) -> Header {
    Header {
        acpj: FORMAT_VERSION,
        kind: SegmentKind::Session,
        session: Some(session.into()),
        run: run.into(),
        proxy: "acp-journal test".into(),
        started: 1,
        pid: std::process::id(),
        argv: vec!["agent".into()],
        cwd: None,
        connection: None,
        initialize: None,
    }
}

fn line(seq: u64, text: &str) -> Record {
    Record {
        seq,
        unix_us: 1,
        mono_us: 1,
        body: Body::Message {
            from: Side::Client,
            payload: Payload::from_line(
                format!(r#"{{"jsonrpc":"2.0","method":"note","params":{{"text":"{text}"}}}}"#)
                    .into_bytes()
                    .into(),
            ),
        },
    }
}

/// A host's journal directory and the shipper's shared state (on the runtime's clock).
fn shared(store: &Store, name: &str) -> (tempfile::TempDir, Arc<Shared>) {
    let dir = tempfile::tempdir().unwrap();
    let local = JournalDir::new(dir.path());
    local.create_dirs().unwrap();
    let shared = Arc::new(Shared {
        store: store.clone(),
        local,
        me: Identity {
            host: name.into(),
            run: format!("20261127T10000{}.000000Z-1", name.len()),
            pid: std::process::id(),
        },
        policy: Arc::new(Mutex::new(Policy {
            ttl: TTL,
            takeover: false,
            conditional: Some(true),
        })),
        leases: Arc::new(Mutex::new(Leases::default())),
        clock: Arc::new(RuntimeClock::new(0)),
        liveness: Arc::new(ProcessTable),
        status: Arc::new(Status::default()),
        probed: tokio::sync::watch::channel(true).1,
    });
    (dir, shared)
}

/// A host: its journal directory and the shipper's shared state.
struct Host {
    _dir: tempfile::TempDir,
    shared: Arc<Shared>,
    notes: mpsc::UnboundedSender<ShipperMessage>,
}

impl Host {
    async fn start(store: &Store, name: &str) -> (Host, tokio::task::JoinHandle<()>) {
        let (dir, shared) = shared(store, name);
        let (notes, rx) = mpsc::unbounded_channel();
        let shipper = tokio::spawn(Shipper::new(shared.clone(), INTERVAL, rx, None).run());
        // Its look at what the disk held before it (nothing) comes first.
        tokio::task::yield_now().await;
        (
            Host {
                _dir: dir,
                shared,
                notes,
            },
            shipper,
        )
    }

    /// A new segment of `session`, told to the shipper.
    fn open(&self, session: &str) -> SegmentWriter {
        let local = &self.shared.local;
        let writer = local
            .create_segment_writer(
                &local.session_dir(session),
                &self.shared.me.run,
                &header(session, &self.shared.me.run),
            )
            .unwrap();
        self.notes
            .send(ShipperMessage::Opened(writer.path().to_path_buf()))
            .unwrap();
        writer
    }
}

fn memory() -> (Store, Arc<Faulty>) {
    let faulty = Faulty::new(Arc::new(InMemory::new()));
    (Store::over(faulty.clone(), "", "memory://"), faulty)
}

/// The texts a pulled copy of `session` holds, in order.
async fn pulled_texts(store: &Store, session: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let copy = JournalDir::new(dir.path());
    let got = pull::session(store, &copy, SessionId::new(session))
        .await
        .unwrap();
    assert!(
        got.skipped.is_empty(),
        "{:?} {:?}",
        got.skipped,
        store.list("").await
    );
    let mut texts = Vec::new();
    for path in crate::journal::dir::segments_in(&copy.session_dir(session)).unwrap() {
        for record in SegmentReader::open(&path).unwrap() {
            if let Body::Message { payload, .. } = &record.body {
                let v: serde_json::Value = serde_json::from_slice(&payload.bytes).unwrap();
                if let Some(t) = v["params"]["text"].as_str() {
                    texts.push(t.to_string());
                }
            }
        }
    }
    texts
}

#[tokio::test(start_paused = true)]
async fn a_segment_is_shipped_under_its_lease_through_an_outage_then_compacted_whole() {
    let (store, faulty) = memory();
    let (a, shipper) = Host::start(&store, "a").await;
    let mut writer = a.open("s");
    for n in 0..5 {
        writer.append(&line(n, &format!("before {n}"))).unwrap();
        writer.flush().unwrap();
        tokio::time::sleep(INTERVAL * 2).await;
    }
    assert_eq!(pulled_texts(&store, "s").await.len(), 5);
    // The store goes down for longer than the lease: nothing is lost, the lease is renewed
    // once the store answers (nobody took it), and what waited is shipped.
    faulty.set_down(true);
    for n in 5..10 {
        writer.append(&line(n, &format!("during {n}"))).unwrap();
        writer.flush().unwrap();
        tokio::time::sleep(TTL / 2).await;
    }
    assert!(a.shared.status.failing());
    faulty.set_down(false);
    tokio::time::sleep(INTERVAL * 5).await;
    assert!(!a.shared.status.failing());
    assert_eq!(pulled_texts(&store, "s").await.len(), 10);
    // Closed: its parts become one object, the ledger says it is whole.
    let path = writer.path().to_path_buf();
    writer.close(11, 1, 1).unwrap();
    a.notes.send(ShipperMessage::Closed(path.clone())).unwrap();
    tokio::time::sleep(INTERVAL * 5).await;
    let rel = a.shared.local.relative(&path);
    let parts: Vec<_> = store
        .entries(&rel)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| matches!(e, layout::Entry::Part { .. }))
        .collect();
    assert_eq!(parts.len(), 1, "{parts:?}");
    let (tx, rx) = tokio::sync::oneshot::channel();
    a.notes
        .send(ShipperMessage::Finish(
            a.shared.clock.now() + Duration::from_secs(5),
            tx,
        ))
        .unwrap();
    let _ = rx.await;
    shipper.await.unwrap();
    let ledger = std::fs::read_to_string(Ledger::path(&a.shared.local, store.url())).unwrap();
    assert!(ledger.contains(&rel), "{ledger}");
    // And the session was given back.
    let seen = lease::read_lease(&store, &SessionKey::of(SessionId::new("s")))
        .await
        .unwrap();
    assert!(
        matches!(&seen, lease::Seen::Lease(_, l) if l.released),
        "{seen:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_segment_whose_session_another_host_took_is_stranded_never_called_shipped() {
    let (store, _) = memory();
    let (a, _shipper) = Host::start(&store, "a").await;
    let mut writer = a.open("s");
    writer.append(&line(0, "a before")).unwrap();
    writer.flush().unwrap();
    tokio::time::sleep(INTERVAL * 3).await;
    // Another host takes the session over (--takeover) and fences A's segment.
    let b = Identity {
        host: "b".into(),
        run: "20261127T110000.000000Z-2".into(),
        pid: 0,
    };
    let takeover = Policy {
        ttl: TTL,
        takeover: true,
        conditional: Some(true),
    };
    let leases_b = Mutex::new(Leases::default());
    let taker = lease::Taker {
        me: &b,
        policy: &takeover,
        clock: &RuntimeClock::new(0),
        liveness: &ProcessTable,
    };
    lease::acquire(
        &store,
        &leases_b,
        &taker,
        SessionId::new("s"),
        Duration::ZERO,
    )
    .await
    .unwrap();
    // Until its next renewal A does not know: what it ships meanwhile lands past the fence.
    writer.append(&line(1, "a after the takeover")).unwrap();
    writer.flush().unwrap();
    tokio::time::sleep(TTL).await;
    // A found out at that renewal: what it writes from then on stays on its disk, counted as
    // stranded, and marked beside the segment for list, stats and the exports.
    writer.append(&line(2, "a after it knows")).unwrap();
    writer.flush().unwrap();
    tokio::time::sleep(INTERVAL * 3).await;
    let report = a.shared.status.report(store.url());
    assert_eq!(report.behind_bytes, 0, "{report:?}");
    assert_eq!(report.stranded.len(), 1, "{report:?}");
    assert!(report.stranded[0].bytes > 0);
    assert!(crate::journal::mark::beyond_store(writer.path()).is_some());
    assert_eq!(pulled_texts(&store, "s").await, ["a before"]);
}

#[tokio::test]
async fn a_pull_admits_only_segments_their_lease_history_names() {
    let (store, _) = memory();
    let (a, shipper) = Host::start(&store, "a").await;
    let mut writer = a.open("s");
    writer.append(&line(0, "genuine")).unwrap();
    writer.close(1, 1, 1).unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    a.notes
        .send(ShipperMessage::Finish(
            a.shared.clock.now() + Duration::from_secs(10),
            tx,
        ))
        .unwrap();
    let _ = rx.await;
    shipper.await.unwrap();
    // A segment under a run no epoch names, and one whose header names another session.
    let key = SessionKey::of(SessionId::new("s"));
    for (run, session) in [
        ("20261127T120000.000000Z-9", "s"),
        ("20261127T130000.000000Z-9", "other"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("{run}.acpj.zst"));
        let mut forged = SegmentWriter::create(&path, &header(session, run)).unwrap();
        forged.append(&line(0, "forged")).unwrap();
        forged.close(1, 1, 1).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let file = format!("sessions/{key}/{run}.acpj.zst");
        store
            .put_new(
                &format!("{file}/{}", layout::part_name(0, bytes.len() as u64)),
                bytes.into(),
            )
            .await
            .unwrap();
        store
            .put_new(&format!("{file}/{}", layout::epoch_name(1)), Bytes::new())
            .await
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let copy = JournalDir::new(dir.path());
    let got = pull::session(&store, &copy, SessionId::new("s"))
        .await
        .unwrap();
    assert_eq!(got.skipped.len(), 2, "{:?}", got.skipped);
    assert_eq!(
        crate::journal::dir::segments_in(&copy.session_dir("s"))
            .unwrap()
            .len(),
        1
    );
}

/// Mark session `erased-{n}`, one of the journal directory at `root`, erased in the store (the
/// marker `erase` writes; the session never had a lease); its key.
async fn mark_erased(store: &Store, root: &std::path::Path, n: u32) -> SessionKey {
    let session = format!("erased-{n}");
    let key = SessionKey::of(SessionId::new(&session));
    std::fs::create_dir_all(root.join("sessions").join(key.as_str())).unwrap();
    store
        .put_new(&format!("erased/{key}"), Bytes::from(session))
        .await
        .unwrap();
    key
}

/// [`ERASED_EVERY`] over four periods, rounds driven by hand on the paused runtime clock: the
/// first round lists the erased sessions; a marker written 10 s after a listing is not seen by
/// a round 10 s after it nor by one 1 ms before [`ERASED_EVERY`] has passed since, and is seen
/// by the round at exactly [`ERASED_EVERY`]; and again, each period measured from the listing
/// before it.
#[tokio::test(start_paused = true)]
async fn the_erased_sessions_are_listed_again_every_erased_every_and_not_sooner() {
    let (store, _) = memory();
    let (_dir, shared) = shared(&store, "a");
    let root = shared.local.root().to_path_buf();
    let (_notes, rx) = mpsc::unbounded_channel();
    let mut shipper = Shipper::new(shared, INTERVAL, rx, None);
    let start = tokio::time::Instant::now();
    let advance_to = |at: Duration| async move {
        let now = start.elapsed();
        assert!(at >= now, "{at:?} < {now:?}");
        tokio::time::advance(at - now).await;
        assert_eq!(start.elapsed(), at);
    };
    let mut keys = vec![mark_erased(&store, &root, 0).await];
    shipper.round().await;
    assert!(shipper.erased.contains(&keys[0]), "{:?}", shipper.erased);
    let tick = Duration::from_millis(1);
    for period in 1..=4u32 {
        let listed = ERASED_EVERY * (period - 1);
        advance_to(listed + Duration::from_secs(10)).await;
        let key = mark_erased(&store, &root, period).await;
        shipper.round().await;
        assert!(!shipper.erased.contains(&key), "period {period}: at +10 s");
        advance_to(listed + ERASED_EVERY - tick).await;
        shipper.round().await;
        assert!(
            !shipper.erased.contains(&key),
            "period {period}: 1 ms before {ERASED_EVERY:?}"
        );
        advance_to(listed + ERASED_EVERY).await;
        shipper.round().await;
        assert!(
            shipper.erased.contains(&key),
            "period {period}: at {ERASED_EVERY:?}"
        );
        keys.push(key);
        // The rounds took no time of their own: the next period starts from this listing.
        assert_eq!(start.elapsed(), ERASED_EVERY * period);
        let listed: std::collections::BTreeSet<_> = shipper.erased.iter().cloned().collect();
        assert_eq!(
            listed,
            keys.iter()
                .cloned()
                .collect::<std::collections::BTreeSet<_>>()
        );
    }
}

/// What a new session costs the store: ten sessions, each written for a few ship intervals
/// (no renewal falls due), then closed and the run ended. Each takes its lease in two writes
/// (the lease created if absent, its first epoch's record) and no listing or read, and gives
/// it back in one; its segment goes as its epoch's marker, a part per interval with new
/// bytes, and the parts compacted into one.
#[tokio::test(start_paused = true)]
async fn a_new_session_takes_its_lease_in_two_writes_and_no_listing() {
    let (store, faulty) = memory();
    let (a, shipper) = Host::start(&store, "a").await;
    tokio::time::sleep(INTERVAL).await;
    faulty.take_counts();
    let sessions = 10;
    let mut writers: Vec<SegmentWriter> = (0..sessions).map(|n| a.open(&format!("s{n}"))).collect();
    for round in 0..3 {
        for (n, writer) in writers.iter_mut().enumerate() {
            writer
                .append(&line(round, &format!("s{n} {round}")))
                .unwrap();
            writer.flush().unwrap();
        }
        tokio::time::sleep(INTERVAL).await;
    }
    for writer in writers {
        let path = writer.path().to_path_buf();
        writer.close(4, 1, 1).unwrap();
        a.notes.send(ShipperMessage::Closed(path)).unwrap();
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    a.notes
        .send(ShipperMessage::Finish(
            a.shared.clock.now() + Duration::from_secs(30),
            tx,
        ))
        .unwrap();
    let _ = rx.await;
    shipper.await.unwrap();
    let counts = faulty.take_counts();
    eprintln!("requests for {sessions} new sessions: {counts:?}");
    let n = |k: &str| counts.get(k).copied().unwrap_or(0);
    assert_eq!(n("LIST leases") + n("LIST sessions"), 0, "{counts:?}");
    assert_eq!(n("GET leases") + n("HEAD leases"), 0, "{counts:?}");
    // Created, its epoch recorded, given back.
    assert_eq!(n("PUT leases"), 3 * sessions, "{counts:?}");
    for s in 0..sessions {
        assert_eq!(pulled_texts(&store, &format!("s{s}")).await.len(), 3);
    }
}

/// A marker planted in the store for a session this host continues (its lease still there)
/// stops nothing: the host goes on shipping it. A real erasure (`erase`: the lease gone first)
/// stops it for good, and what the host shipped before it knew is swept.
#[tokio::test(start_paused = true)]
async fn a_planted_erasure_marker_stops_nothing_and_a_real_erasure_stops_shipping() {
    let (store, _) = memory();
    let (a, _shipper) = Host::start(&store, "a").await;
    let mut writer = a.open("s");
    writer.append(&line(0, "before")).unwrap();
    writer.flush().unwrap();
    tokio::time::sleep(INTERVAL * 3).await;
    let key = SessionKey::of(SessionId::new("s"));
    store
        .put_new(&format!("erased/{key}"), Bytes::from_static(b"s"))
        .await
        .unwrap();
    writer.append(&line(1, "after the planted marker")).unwrap();
    writer.flush().unwrap();
    tokio::time::sleep(ERASED_EVERY + INTERVAL * 3).await;
    assert_eq!(
        pulled_texts(&store, "s").await,
        ["before", "after the planted marker"]
    );
    let erase = tokio::spawn({
        let store = store.clone();
        async move {
            crate::fleet::erase::erase(&store, SessionId::new("s"))
                .await
                .unwrap()
        }
    });
    tokio::time::sleep(INTERVAL / 2).await;
    writer.append(&line(2, "after the erasure")).unwrap();
    writer.flush().unwrap();
    erase.await.unwrap();
    tokio::time::sleep(ERASED_EVERY + INTERVAL * 3).await;
    writer.append(&line(3, "long after")).unwrap();
    writer.flush().unwrap();
    tokio::time::sleep(ERASED_EVERY + INTERVAL * 3).await;
    let left = store.list(&format!("sessions/{key}")).await.unwrap();
    assert!(left.is_empty(), "{left:?}");
}
