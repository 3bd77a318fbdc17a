//! The index's task without a server: runs of one journal directory shipping and indexing to
//! the crate's `InMemory` store on the paused runtime clock, ended in time, out of time, or
//! killed between commits; the rows each leaves behind are committed by the next run, each
//! turn once; and what the index says of a session never goes past what the store holds.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use object_store::memory::InMemory;
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::*;
use crate::fleet::clock::RuntimeClock;
use crate::fleet::faults::Faulty;
use crate::fleet::index::reader::{self, Found};
use crate::fleet::index::rows::{SessionRow, TurnRow};
use crate::fleet::layout::SessionId;
use crate::fleet::lease::{self, Identity, Leases, Policy};
use crate::fleet::liveness::ProcessTable;
use crate::fleet::shipper::{Shipper, ShipperMessage};
use crate::fleet::status::Status;
use crate::fleet::store::Store;
use crate::journal::format::{Body, Payload, Record};
use crate::journal::{JournalDir, SegmentWriter};
use crate::wire::Side;

const INTERVAL: Duration = Duration::from_secs(1);
const TTL: Duration = Duration::from_secs(15);

fn memory() -> (Store, Arc<Faulty>) {
    let faulty = Faulty::new(Arc::new(InMemory::new()));
    (Store::over(faulty.clone(), "", "memory://"), faulty)
}

/// A run of a host over journal directory `dir`: its shipper and its index's task.
struct Run {
    shared: Arc<Shared>,
    notes: mpsc::UnboundedSender<ShipperMessage>,
    index: mpsc::UnboundedSender<IndexerMessage>,
    tasks: Vec<JoinHandle<()>>,
}

impl Run {
    async fn start(store: &Store, dir: &Path, host: &str, run: &str) -> Run {
        let local = JournalDir::new(dir);
        local.create_dirs().unwrap();
        let shared = Arc::new(Shared {
            store: store.clone(),
            local,
            me: Identity {
                host: host.into(),
                run: run.into(),
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
        let shipped = Arc::new(ShippedFiles::default());
        let (index, index_rx) = mpsc::unbounded_channel();
        let (notes, notes_rx) = mpsc::unbounded_channel();
        let indexer = Indexer::new(shared.clone(), shipped.clone(), index_rx);
        let shipper = Shipper::new(
            shared.clone(),
            INTERVAL,
            notes_rx,
            Some((index.clone(), shipped)),
        );
        let tasks = vec![tokio::spawn(indexer.run()), tokio::spawn(shipper.run())];
        tokio::task::yield_now().await;
        Run {
            shared,
            notes,
            index,
            tasks,
        }
    }

    /// A new segment of `session`, told to the shipper.
    fn open(&self, session: &str) -> SegmentWriter {
        let local = &self.shared.local;
        let run = &self.shared.me.run;
        let writer = local
            .create_segment_writer(
                &local.session_dir(session),
                run,
                &crate::fleet::shipper::tests::header(session, run),
            )
            .unwrap();
        self.notes
            .send(ShipperMessage::Opened(writer.path().to_path_buf()))
            .unwrap();
        self.index
            .send(IndexerMessage::Follow(writer.path().to_path_buf()))
            .unwrap();
        writer
    }

    /// The end of the run, within `within`.
    async fn finish(self, within: Duration) {
        let deadline = self.shared.clock.now() + within;
        let (shipped, shipping) = oneshot::channel();
        let (indexed, indexing) = oneshot::channel();
        self.notes
            .send(ShipperMessage::Finish(deadline, shipped))
            .unwrap();
        self.index
            .send(IndexerMessage::Finish(deadline, indexed))
            .unwrap();
        let _ = futures_util::future::join(shipping, indexing).await;
        for task in self.tasks {
            task.await.unwrap();
        }
    }

    /// The run killed: its tasks stop wherever they are.
    fn kill(self) {
        for task in self.tasks {
            task.abort();
        }
    }
}

/// Prompt turn `n` of `session` (its prompt and the agent's answer).
fn turn(w: &mut SegmentWriter, session: &str, n: u64) {
    let at = 1_795_000_000_000_000 + i64::try_from(n).unwrap() * 1_000_000;
    let line = |seq: u64, from: Side, unix_us: i64, text: String| Record {
        seq,
        unix_us,
        mono_us: 0,
        body: Body::Message {
            from,
            payload: Payload::from_line(text.into_bytes().into()),
        },
    };
    w.append(&line(
        n * 2,
        Side::Client,
        at,
        format!(
            r#"{{"jsonrpc":"2.0","id":{n},"method":"session/prompt","params":{{"sessionId":"{session}","prompt":[{{"type":"text","text":"prompt {n} of {session}"}}]}}}}"#
        ),
    ))
    .unwrap();
    w.append(&line(
        n * 2 + 1,
        Side::Agent,
        at + 1000,
        format!(r#"{{"jsonrpc":"2.0","id":{n},"result":{{"stopReason":"end_turn"}}}}"#),
    ))
    .unwrap();
    w.flush().unwrap();
}

/// The index as committed: every session's latest row, every turn row.
async fn index_of(store: &Store) -> (Vec<SessionRow>, Vec<TurnRow>) {
    let Found::Index(snapshot) = reader::open(store).await.unwrap() else {
        return (Vec::new(), Vec::new());
    };
    (
        reader::sessions(store, &snapshot).await.unwrap(),
        reader::turns(store, &snapshot).await.unwrap(),
    )
}

/// The turn numbers of `session` among `turns`, as many times as they are there.
fn turns_of(turns: &[TurnRow], session: &str) -> Vec<u32> {
    let mut n: Vec<u32> = turns
        .iter()
        .filter(|t| t.session == session)
        .map(|t| t.turn)
        .collect();
    n.sort_unstable();
    n
}

#[tokio::test(start_paused = true)]
async fn rows_a_run_could_not_commit_are_committed_by_the_next_run_each_turn_once() {
    let (store, faulty) = memory();
    let dir = tempfile::tempdir().unwrap();
    let first = Run::start(&store, dir.path(), "a", "20261129T100000.000000Z-1").await;
    let mut w = first.open("s");
    turn(&mut w, "s", 1);
    tokio::time::sleep(FLUSH + INTERVAL * 3).await;
    let (_, turns) = index_of(&store).await;
    assert_eq!(turns_of(&turns, "s"), [1], "committed within a flush");
    turn(&mut w, "s", 2);
    turn(&mut w, "s", 3);
    w.close(8, 1, 1).unwrap();
    // The store goes away just as the run ends: neither the last bytes nor the last rows go.
    faulty.set_down(true);
    first.finish(Duration::from_secs(5)).await;
    faulty.set_down(false);
    let (_, turns) = index_of(&store).await;
    assert_eq!(turns_of(&turns, "s"), [1]);
    // The next run of the directory ships the rest and indexes it: turns 2 and 3, once.
    let second = Run::start(&store, dir.path(), "a", "20261129T110000.000000Z-2").await;
    tokio::time::sleep(FLUSH + INTERVAL * 3).await;
    let (sessions, turns) = index_of(&store).await;
    assert_eq!(turns_of(&turns, "s"), [1, 2, 3]);
    let row = sessions.iter().find(|r| r.session == "s").unwrap();
    assert_eq!((row.turns, row.state.as_str()), (3, "closed"), "{row:?}");
    second.finish(Duration::from_secs(5)).await;
    // Done with: a third run indexes nothing again.
    let third = Run::start(&store, dir.path(), "a", "20261129T120000.000000Z-3").await;
    tokio::time::sleep(FLUSH * 2).await;
    let (_, turns) = index_of(&store).await;
    assert_eq!(turns_of(&turns, "s"), [1, 2, 3]);
    third.finish(Duration::from_secs(5)).await;
}

#[tokio::test(start_paused = true)]
async fn a_run_killed_between_commits_loses_no_row_for_good() {
    let (store, _) = memory();
    let dir = tempfile::tempdir().unwrap();
    let first = Run::start(&store, dir.path(), "a", "20261129T100000.000000Z-1").await;
    let mut w = first.open("s");
    let mut other = first.open("t");
    for n in 1..=2 {
        turn(&mut w, "s", n);
        turn(&mut other, "t", n);
    }
    tokio::time::sleep(FLUSH + INTERVAL * 3).await;
    for n in 3..=5 {
        turn(&mut w, "s", n);
    }
    // Shipped, not yet indexed (a flush is seconds away), when the run is killed.
    tokio::time::sleep(INTERVAL * 2).await;
    first.kill();
    drop((w, other));
    let (_, turns) = index_of(&store).await;
    assert_eq!(turns_of(&turns, "s"), [1, 2]);
    let second = Run::start(&store, dir.path(), "a", "20261129T110000.000000Z-2").await;
    tokio::time::sleep(FLUSH + INTERVAL * 3).await;
    let (sessions, turns) = index_of(&store).await;
    assert_eq!(turns_of(&turns, "s"), [1, 2, 3, 4, 5]);
    assert_eq!(turns_of(&turns, "t"), [1, 2]);
    let row = sessions.iter().find(|r| r.session == "s").unwrap();
    assert_eq!(row.turns, 5, "{row:?}");
    second.finish(Duration::from_secs(5)).await;
}

#[tokio::test(start_paused = true)]
async fn the_index_says_nothing_of_a_session_past_what_the_store_holds() {
    let (store, _) = memory();
    let dir = tempfile::tempdir().unwrap();
    let a = Run::start(&store, dir.path(), "a", "20261129T100000.000000Z-1").await;
    let mut w = a.open("s");
    turn(&mut w, "s", 1);
    tokio::time::sleep(INTERVAL * 3).await;
    // Another host takes the session over: A's segment is fenced where the store has it.
    let b = Identity {
        host: "b".into(),
        run: "20261129T100500.000000Z-2".into(),
        pid: 0,
    };
    let takeover = Policy {
        ttl: TTL,
        takeover: true,
        conditional: Some(true),
    };
    let taker = lease::Taker {
        me: &b,
        policy: &takeover,
        clock: &RuntimeClock::new(0),
        liveness: &ProcessTable,
    };
    lease::acquire(
        &store,
        &Mutex::new(Leases::default()),
        &taker,
        SessionId::new("s"),
        Duration::ZERO,
    )
    .await
    .unwrap();
    // A goes on on its own disk, stranded: two more turns the store never gets.
    tokio::time::sleep(TTL).await;
    turn(&mut w, "s", 2);
    turn(&mut w, "s", 3);
    tokio::time::sleep(FLUSH * 3).await;
    w.close(6, 1, 1).unwrap();
    a.finish(Duration::from_secs(5)).await;
    let (sessions, turns) = index_of(&store).await;
    assert_eq!(turns_of(&turns, "s"), [1]);
    let row = sessions.iter().find(|r| r.session == "s").unwrap();
    assert_eq!(row.turns, 1, "{row:?}");
}

/// A host's session as its catalog opens it, dated `ago` before now by the wall clock.
fn open_in_catalog(run: &Run, w: &SegmentWriter, session: &str, ago: Duration) {
    use crate::catalog::{Catalog, CatalogEntry};
    let t = jiff::Timestamp::now().as_microsecond() - i64::try_from(ago.as_micros()).unwrap();
    let local = &run.shared.local;
    local
        .append_catalog(&CatalogEntry::Open {
            session: session.into(),
            segment: local.relative(w.path()),
            cwd: None,
            agent: Some("agent".into()),
            agent_name: None,
            git_branch: None,
            t,
            agent_info: None,
        })
        .unwrap();
}

/// [`UPKEEP`] over three periods on the paused runtime clock: each period a host journals a
/// session, ships it and its catalog, and is killed before its index commits, never to start
/// again; another host, holding the compaction lease, indexes it from the store's journals at
/// its next look, and not before.
#[tokio::test(start_paused = true)]
async fn a_host_never_started_again_leaves_no_hole_after_the_next_upkeep() {
    let (store, _) = memory();
    let keeper_dir = tempfile::tempdir().unwrap();
    let keeper = Run::start(
        &store,
        keeper_dir.path(),
        "keeper",
        "20261129T090000.000000Z-9",
    )
    .await;
    // Its first look is at its start: the compaction lease is its.
    tokio::time::sleep(INTERVAL).await;
    let start = tokio::time::Instant::now() - INTERVAL;
    let mut dirs = Vec::new();
    for period in 1..=3u32 {
        let dir = tempfile::tempdir().unwrap();
        let host = format!("gone{period}");
        let run = Run::start(
            &store,
            dir.path(),
            &host,
            &format!("20261129T10000{period}.000000Z-{period}"),
        )
        .await;
        let session = format!("s{period}");
        let mut w = run.open(&session);
        open_in_catalog(&run, &w, &session, Duration::from_secs(300));
        turn(&mut w, &session, 1);
        turn(&mut w, &session, 2);
        // Shipped, catalog and all; killed before its first commit.
        tokio::time::sleep(INTERVAL * 3).await;
        run.kill();
        drop(w);
        dirs.push(dir);
        let next = UPKEEP * period;
        let now = start.elapsed();
        tokio::time::sleep(next - Duration::from_millis(500) - now).await;
        let (sessions, _) = index_of(&store).await;
        assert!(
            sessions.iter().all(|r| r.session != session),
            "period {period}: indexed before the keeper's next look"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (sessions, turns) = index_of(&store).await;
        let row = sessions.iter().find(|r| r.session == session);
        assert!(
            row.is_some(),
            "period {period}: not repaired at the next look"
        );
        let row = row.unwrap();
        assert_eq!(
            (row.turns, row.host.as_str()),
            (2, host.as_str()),
            "{row:?}"
        );
        assert_eq!(turns_of(&turns, &session), [1, 2]);
    }
    keeper.finish(Duration::from_secs(5)).await;
}
