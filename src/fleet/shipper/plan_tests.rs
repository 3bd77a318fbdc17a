//! The shipper's plan of a round, without files, a store or a clock: each way a file can go,
//! from the facts a round reads and the time given.

use super::*;
use crate::fleet::layout;
use crate::fleet::lease::{Held, Lease, Standing};
use crate::fleet::store::Version;

const ROOT: &str = "/journals";
/// The inode the tests' files were seen at before.
const INODE: u64 = 7;
const SECOND: Duration = Duration::from_secs(1);

/// Session `key`'s segment of this run, in the journal directory.
fn segment(key: &str) -> PathBuf {
    PathBuf::from(format!(
        "{ROOT}/sessions/{key}/20261127T100000.000000Z-42.acpj.zst"
    ))
}

fn catalog() -> PathBuf {
    PathBuf::from(format!("{ROOT}/catalog.ndjson"))
}

fn lease(epoch: u64, host: &str) -> Lease {
    Lease {
        session: "s".into(),
        epoch,
        host: host.into(),
        run: "20261127T100000.000000Z-42".into(),
        pid: 42,
        ttl_ms: 15_000,
        beat: 0,
        released: false,
    }
}

/// This process holds the lease at `epoch`, good until `valid_until`.
fn held(epoch: u64, valid_until: Duration) -> Standing {
    Standing::Held(Held {
        lease: lease(epoch, "a"),
        version: Version {
            e_tag: Some("1".into()),
            version: None,
        },
        valid_until,
        renew_at: Duration::ZERO,
    })
}

/// The parts `[10 n, 10 n + 10)` for n below `count`.
fn parts(count: u64) -> Vec<(u64, u64)> {
    (0..count).map(|n| (10 * n, 10 * n + 10)).collect()
}

/// The files a shipper follows, what the disk holds of them, and what else a round knows.
struct Scene {
    local: JournalDir,
    tracked: HashMap<PathBuf, Tracked>,
    on_disk: HashMap<PathBuf, OnDisk>,
    leases: Leases,
    erased: HashSet<SessionKey>,
    failing: bool,
}

impl Scene {
    fn new() -> Scene {
        Scene {
            local: JournalDir::new(ROOT),
            tracked: HashMap::new(),
            on_disk: HashMap::new(),
            leases: Leases::default(),
            erased: HashSet::new(),
            failing: false,
        }
    }

    /// Follow `path` under `leased`, the store holding `shipped` bytes of it, seen before at
    /// [`INODE`]; the disk holds `len` bytes of it (`None`: not on the disk).
    fn follow(
        &mut self,
        path: &Path,
        leased: Leased,
        shipped: Option<u64>,
        len: Option<u64>,
    ) -> &mut Tracked {
        self.on_disk(path, len);
        let file = self.local.relative(path);
        let mut t = Tracked::new(path.to_path_buf(), file, shipped, leased);
        t.inode = INODE;
        self.tracked.entry(path.to_path_buf()).or_insert(t)
    }

    /// The disk holds `len` bytes of `path` at [`INODE`] (`None`: not at all).
    fn on_disk(&mut self, path: &Path, len: Option<u64>) {
        match len {
            Some(len) => {
                let inode = INODE;
                self.on_disk
                    .insert(path.to_path_buf(), OnDisk { len, inode })
            }
            None => self.on_disk.remove(path),
        };
    }

    fn file(&mut self, path: &Path) -> &mut Tracked {
        self.tracked.get_mut(path).unwrap()
    }

    /// A round looking at `now`, the one before having looked at `last_look`.
    fn plan_at(&mut self, now: Duration, last_look: Duration) -> Plan {
        let round = Round {
            now,
            last_look,
            failing: self.failing,
            leases: &self.leases,
            erased: &self.erased,
            local: &self.local,
        };
        plan(&mut self.tracked, &self.on_disk, &round)
    }

    fn plan(&mut self) -> Plan {
        self.plan_at(SECOND * 2, SECOND)
    }
}

fn key(name: &str) -> SessionKey {
    SessionKey::named(name)
}

fn ship(start: u64, end: u64, epoch: Option<u64>) -> FileRequest {
    FileRequest::Ship { start, end, epoch }
}

fn fence(at: u64) -> Mark {
    Mark {
        fence: Some(at),
        ..Mark::default()
    }
}

fn epoch_mark(epoch: u64) -> Mark {
    Mark {
        epoch: Some(epoch),
        ..Mark::default()
    }
}

#[test]
fn an_erased_sessions_segments_are_forgotten_unshipped_and_settled_at_what_the_store_holds() {
    let mut scene = Scene::new();
    let (mine, left, other) = (segment("k1"), segment("k2"), segment("k3"));
    scene.follow(&mine, Leased::Mine(key("k1")), Some(100), Some(200));
    scene.follow(&left, Leased::Left(key("k2")), None, Some(50));
    scene.follow(&other, Leased::No, Some(100), Some(100));
    scene.erased = HashSet::from([key("k1"), key("k2")]);
    let mut plan = scene.plan();
    assert!(plan.requests.is_empty());
    assert!(plan.marks.is_empty() && plan.ledger.is_empty());
    plan.settled.sort();
    assert_eq!(plan.settled, vec![(mine, 100), (left, 0)]);
    assert_eq!(scene.tracked.keys().collect::<Vec<_>>(), vec![&other]);
}

#[test]
fn a_file_not_asked_about_yet_is_asked_whatever_the_disk_holds() {
    let mut scene = Scene::new();
    let (on_disk, absent) = (segment("k1"), catalog());
    scene.follow(&on_disk, Leased::Mine(key("k1")), None, Some(10));
    scene.follow(&absent, Leased::No, None, None).closed = true;
    let mut plan = scene.plan();
    plan.requests.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        plan.requests,
        vec![(absent, FileRequest::Ask), (on_disk, FileRequest::Ask)]
    );
    assert_eq!(scene.tracked.len(), 2);
    assert!(plan.settled.is_empty());
}

#[test]
fn a_file_gone_from_the_disk_waits_while_open_and_is_forgotten_once_closed() {
    let mut scene = Scene::new();
    let path = segment("k1");
    scene.follow(&path, Leased::Mine(key("k1")), Some(30), None);
    let plan = scene.plan();
    assert!(plan.requests.is_empty() && plan.settled.is_empty());
    assert!(scene.tracked.contains_key(&path));
    // Closed (pruned before it was all shipped): nothing is shipped, nothing in the ledger.
    scene.file(&path).closed = true;
    let plan = scene.plan();
    assert!(plan.requests.is_empty() && plan.ledger.is_empty() && plan.marks.is_empty());
    assert_eq!(plan.settled, vec![(path, 30)]);
    assert!(scene.tracked.is_empty());
}

#[test]
fn a_file_rewritten_in_place_new_inode_or_shorter_is_asked_about_again() {
    let mut scene = Scene::new();
    let path = catalog();
    scene.follow(&path, Leased::No, Some(100), Some(100));
    scene.on_disk.get_mut(&path).unwrap().inode = INODE + 1;
    let plan = scene.plan();
    assert_eq!(plan.requests, vec![(path.clone(), FileRequest::Ask)]);
    assert_eq!(
        (scene.file(&path).shipped, scene.file(&path).inode),
        (None, INODE + 1)
    );
    // Same inode, shorter than what the store holds.
    scene.file(&path).shipped = Some(100);
    scene.on_disk.get_mut(&path).unwrap().len = 60;
    let plan = scene.plan();
    assert_eq!(plan.requests, vec![(path.clone(), FileRequest::Ask)]);
    assert_eq!(scene.file(&path).shipped, None);
    // Seen for the first time (no inode known): its inode is taken, nothing asked.
    let mut scene = Scene::new();
    scene.follow(&path, Leased::No, Some(100), Some(60)).inode = 0;
    let plan = scene.plan();
    assert!(plan.requests.is_empty());
    assert_eq!(scene.file(&path).inode, INODE);
}

#[test]
fn growth_is_shipped_a_part_of_at_most_max_part_at_a_time() {
    let mut scene = Scene::new();
    let path = catalog();
    let len = 10 + MAX_PART + 5;
    scene.follow(&path, Leased::No, Some(10), Some(len));
    let plan = scene.plan();
    assert_eq!(
        plan.requests,
        vec![(path.clone(), ship(10, 10 + MAX_PART, None))]
    );
    // The store holds that part now: the rest.
    scene.file(&path).shipped = Some(10 + MAX_PART);
    let plan = scene.plan();
    assert_eq!(
        plan.requests,
        vec![(path.clone(), ship(10 + MAX_PART, len, None))]
    );
    assert!(plan.marks.is_empty() && plan.settled.is_empty());
}

#[test]
fn a_segment_of_this_run_ships_only_under_its_lease_held_and_good_its_epoch_marked_first() {
    let mut scene = Scene::new();
    let path = segment("k1");
    scene.follow(&path, Leased::Mine(key("k1")), Some(0), Some(40));
    // Not held (another host's, watched; or never looked at): not now, nothing said.
    for standing in [None, Some(Standing::Watching(None))] {
        scene.leases = standing.into_iter().map(|s| (key("k1"), s)).collect();
        let plan = scene.plan();
        assert!(plan.requests.is_empty() && plan.marks.is_empty() && plan.settled.is_empty());
        assert_eq!(scene.file(&path).stranded, None);
    }
    // Held, good until 10 s: its first part goes under epoch 3, marked beside it first.
    scene.leases = [(key("k1"), held(3, SECOND * 10))].into_iter().collect();
    let plan = scene.plan();
    assert_eq!(plan.requests, vec![(path.clone(), ship(0, 40, Some(3)))]);
    assert_eq!(plan.marks, vec![(path.clone(), epoch_mark(3))]);
    assert_eq!(scene.file(&path).epoch, Some(3));
    // Its next part: the marker is there already.
    scene.file(&path).shipped = Some(40);
    scene.on_disk(&path, Some(90));
    let plan = scene.plan();
    assert_eq!(plan.requests, vec![(path.clone(), ship(40, 90, None))]);
    assert!(plan.marks.is_empty());
    // At 10 s, by this process's clock, the lease is no longer good: not now.
    let plan = scene.plan_at(SECOND * 10, SECOND * 9);
    assert!(plan.requests.is_empty() && plan.marks.is_empty());
    assert_eq!(scene.file(&path).stranded, None);
}

#[test]
fn a_segment_whose_session_another_host_took_is_stranded_fenced_settled_then_ledgered() {
    let mut scene = Scene::new();
    let path = segment("k1");
    scene.follow(&path, Leased::Mine(key("k1")), Some(40), Some(90));
    scene.file(&path).epoch = Some(3);
    scene.leases = [(key("k1"), Standing::Lost(Some(lease(4, "b"))))]
        .into_iter()
        .collect();
    let plan = scene.plan();
    assert!(plan.requests.is_empty() && plan.ledger.is_empty());
    assert_eq!(plan.marks, vec![(path.clone(), fence(40))]);
    assert_eq!(plan.settled, vec![(path.clone(), 40)]);
    assert_eq!(scene.file(&path).stranded.as_deref(), Some("b"));
    // It grows on: nothing more is shipped, fenced or settled.
    scene.on_disk(&path, Some(120));
    let plan = scene.plan();
    assert!(plan.requests.is_empty() && plan.marks.is_empty() && plan.settled.is_empty());
    // Closed: written to the ledger as stranded, forgotten.
    scene.file(&path).closed = true;
    let plan = scene.plan();
    let file = format!(
        "sessions/k1/{}",
        path.file_name().unwrap().to_string_lossy()
    );
    let stranded = Some("b".to_string());
    let line = LedgerLine {
        file,
        bytes: 40,
        stranded,
    };
    assert_eq!(plan.ledger, vec![line]);
    assert_eq!(plan.settled, vec![(path, 40)]);
    assert!(scene.tracked.is_empty());
}

#[test]
fn a_segment_under_an_epoch_this_run_lost_then_took_again_is_stranded_by_no_one_named() {
    let mut scene = Scene::new();
    let path = segment("k1");
    scene.follow(&path, Leased::Mine(key("k1")), Some(40), Some(90));
    scene.file(&path).epoch = Some(2);
    scene.leases = [(key("k1"), held(3, SECOND * 10))].into_iter().collect();
    let plan = scene.plan();
    assert!(plan.requests.is_empty());
    assert_eq!(plan.marks, vec![(path.clone(), fence(40))]);
    assert_eq!(plan.settled, vec![(path.clone(), 40)]);
    assert_eq!(scene.file(&path).stranded.as_deref(), Some(""));
}

#[test]
fn a_segment_a_gone_run_left_ships_under_its_runs_epoch_its_marker_written_once() {
    let mut scene = Scene::new();
    let path = segment("k1");
    scene.follow(&path, Leased::Left(key("k1")), Some(0), Some(40));
    // No epoch known for it yet: not now.
    let plan = scene.plan();
    assert!(plan.requests.is_empty() && plan.marks.is_empty());
    // Its run's epoch found (or a lease made for it), its marker not in the store.
    scene.file(&path).epoch = Some(5);
    scene.file(&path).unmarked = true;
    let plan = scene.plan();
    assert_eq!(plan.requests, vec![(path.clone(), ship(0, 40, Some(5)))]);
    assert!(
        plan.marks.is_empty(),
        "its mark was written when its epoch was found"
    );
    assert!(!scene.file(&path).unmarked);
    let plan = scene.plan();
    assert_eq!(plan.requests, vec![(path, ship(0, 40, None))]);
}

/// The plan of a round for one file whose store holds `count` parts of 10 bytes (or a
/// `shipped` length given), all of the file; the file then.
fn compaction(count: u64, closed: bool, shipped: Option<u64>, failing: bool) -> (Plan, bool) {
    let mut scene = Scene::new();
    let path = segment("k1");
    let shipped = shipped.unwrap_or(10 * count);
    let t = scene.follow(&path, Leased::Mine(key("k1")), Some(shipped), Some(shipped));
    t.parts = parts(count);
    t.closed = closed;
    scene.failing = failing;
    let plan = scene.plan();
    (plan, scene.tracked.contains_key(&path))
}

#[test]
fn parts_are_compacted_past_their_thresholds_only_within_max_compact_and_a_store_that_answers() {
    let path = segment("k1");
    let compact = |end| vec![(path.clone(), FileRequest::Compact { start: 0, end })];
    // Closed, more than KEPT_AS_SHIPPED parts: one object.
    let kept = KEPT_AS_SHIPPED as u64;
    let (plan, followed) = compaction(kept + 1, true, None, false);
    assert_eq!(plan.requests, compact(10 * (kept + 1)));
    assert!(followed && plan.ledger.is_empty());
    // Closed, KEPT_AS_SHIPPED parts: left as they are, done with.
    let (plan, followed) = compaction(kept, true, None, false);
    assert!(plan.requests.is_empty() && !followed);
    assert_eq!(plan.ledger.len(), 1);
    // Open: compacted only from COMPACT_AT parts.
    let at = COMPACT_AT as u64;
    let (plan, followed) = compaction(at - 1, false, None, false);
    assert!(plan.requests.is_empty() && followed);
    let (plan, _) = compaction(at, false, None, false);
    assert_eq!(plan.requests, compact(10 * at));
    // Longer than MAX_COMPACT, or the store failing: never compacted; closed, done with.
    for (shipped, failing) in [(Some(MAX_COMPACT + 1), false), (None, true)] {
        let (plan, followed) = compaction(kept + 1, true, shipped, failing);
        assert!(plan.requests.is_empty() && !followed);
        assert_eq!(plan.ledger.len(), 1);
        let (plan, followed) = compaction(at, false, shipped, failing);
        assert!(plan.requests.is_empty() && followed);
    }
}

#[test]
fn a_closed_file_all_in_the_store_is_ledgered_if_a_segment_and_forgotten() {
    let mut scene = Scene::new();
    let (seg, cat) = (segment("k1"), catalog());
    scene
        .follow(&seg, Leased::Mine(key("k1")), Some(90), Some(90))
        .closed = true;
    let t = scene.follow(&cat, Leased::No, Some(30), Some(30));
    t.closed = true;
    t.file = layout::host_catalog("a");
    let mut plan = scene.plan();
    assert!(plan.requests.is_empty() && plan.marks.is_empty());
    let file = scene.local.relative(&seg);
    let line = LedgerLine {
        file,
        bytes: 90,
        stranded: None,
    };
    assert_eq!(plan.ledger, vec![line], "the catalog is not a segment");
    plan.settled.sort();
    assert_eq!(plan.settled, vec![(cat, 30), (seg, 90)]);
    assert!(scene.tracked.is_empty());
}

#[test]
fn bytes_waiting_are_dated_from_the_look_before_the_round_that_saw_them_over_many_rounds() {
    let mut scene = Scene::new();
    let path = segment("k1");
    scene.follow(&path, Leased::Mine(key("k1")), Some(0), Some(0));
    scene.file(&path).epoch = Some(3);
    scene.leases = [(key("k1"), held(3, SECOND * 10))].into_iter().collect();
    // Nothing waits: no date.
    scene.plan_at(SECOND, Duration::ZERO);
    assert_eq!(scene.file(&path).waiting_since, None);
    // Bytes seen at 2 s were written after the look at 1 s.
    scene.on_disk(&path, Some(40));
    let plan = scene.plan_at(SECOND * 2, SECOND);
    assert_eq!(plan.requests, vec![(path.clone(), ship(0, 40, None))]);
    assert_eq!(scene.file(&path).waiting_since, Some(SECOND));
    // The part not in the store yet (an outage), more written: still dated from 1 s, through
    // the lease running out at 10 s (nothing shipped then) and after.
    scene.on_disk(&path, Some(70));
    for at in [3, 9, 10, 11] {
        let plan = scene.plan_at(SECOND * at, SECOND * (at - 1));
        assert_eq!(plan.requests.is_empty(), at >= 10, "at {at} s");
        assert_eq!(scene.file(&path).waiting_since, Some(SECOND));
    }
    // Renewed, and all of it shipped (the answer clears the date): the next bytes are dated
    // from the look before the round that saw them.
    scene.leases = [(key("k1"), held(3, SECOND * 30))].into_iter().collect();
    scene.file(&path).shipped = Some(70);
    scene.file(&path).waiting_since = None;
    scene.plan_at(SECOND * 12, SECOND * 11);
    assert_eq!(scene.file(&path).waiting_since, None);
    scene.on_disk(&path, Some(80));
    let plan = scene.plan_at(SECOND * 13, SECOND * 12);
    assert_eq!(plan.requests, vec![(path.clone(), ship(70, 80, None))]);
    assert_eq!(scene.file(&path).waiting_since, Some(SECOND * 12));
}
