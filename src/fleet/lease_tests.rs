//! The lease, without a server: pure decisions, then hosts on the crate's `InMemory` store with
//! the runtime's clock paused (so minutes of renewals take no time), a store that fails on
//! cue, clocks set off and running at other rates, and seeded interleavings of three hosts.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::memory::InMemory;
use parking_lot::Mutex;

use super::take::SETTLE;
use super::*;
use crate::fleet::clock::{Clock, RuntimeClock};
use crate::fleet::faults::{Fault, Faulty};
use crate::fleet::layout;
use crate::fleet::layout::{SessionId, SessionKey};
use crate::fleet::liveness::ProcessTable;
use crate::fleet::store::{Store, Version, Write};
use crate::seeded::Seeded;

const TTL: Duration = Duration::from_secs(15);

fn me(host: &str, run: &str) -> Identity {
    Identity {
        host: host.into(),
        run: run.into(),
        pid: 0,
    }
}

fn policy() -> Policy {
    Policy {
        ttl: TTL,
        takeover: false,
        conditional: Some(true),
    }
}

fn version(tag: &str) -> Version {
    Version {
        e_tag: Some(tag.into()),
        version: None,
    }
}

fn lease(host: &str, run: &str, epoch: u64) -> Lease {
    Lease {
        session: "s".into(),
        epoch,
        host: host.into(),
        run: run.into(),
        pid: 0,
        ttl_ms: 15_000,
        beat: 0,
        released: false,
    }
}

fn never_alive(_: &Lease) -> bool {
    false
}

fn always_alive(_: &Lease) -> bool {
    true
}

#[test]
fn a_lease_runs_out_only_after_its_version_is_unchanged_for_ttl_and_margin_by_the_observer() {
    let b = me("b", "rb");
    let held = Seen::Lease(version("1"), lease("a", "ra", 3));
    let mut watched = None;
    let at = Duration::from_secs(1000);
    let wait = TTL + margin(TTL);
    // However old the lease may be by anyone's wall clock, the observer counts from its own
    // first sight.
    assert_eq!(
        judge(&held, &mut watched, &b, &policy(), at, always_alive),
        Verdict::Wait { until: at + wait }
    );
    assert_eq!(
        judge(
            &held,
            &mut watched,
            &b,
            &policy(),
            at + wait / 2,
            always_alive
        ),
        Verdict::Wait { until: at + wait }
    );
    assert_eq!(
        judge(&held, &mut watched, &b, &policy(), at + wait, always_alive),
        Verdict::Take(How::Expired)
    );
}

#[test]
fn a_lease_that_changes_while_watched_has_a_live_holder() {
    let b = me("b", "rb");
    let mut watched = None;
    let t = Duration::from_secs(5);
    let first = Seen::Lease(version("1"), lease("a", "ra", 1));
    let renewed = Seen::Lease(version("2"), lease("a", "ra", 1));
    judge(&first, &mut watched, &b, &policy(), t, always_alive);
    assert_eq!(
        judge(&renewed, &mut watched, &b, &policy(), t * 2, always_alive),
        Verdict::Refuse
    );
    // Watched again from the new version.
    assert_eq!(
        judge(&renewed, &mut watched, &b, &policy(), t * 3, always_alive),
        Verdict::Wait {
            until: t * 2 + TTL + margin(TTL)
        }
    );
}

#[test]
fn what_may_be_taken_at_once() {
    let b = me("b", "rb");
    let t = Duration::from_secs(1);
    let mut w = None;
    assert_eq!(
        judge(&Seen::Absent, &mut w, &b, &policy(), t, always_alive),
        Verdict::Take(How::New)
    );
    let mut released = lease("a", "ra", 2);
    released.released = true;
    assert_eq!(
        judge(
            &Seen::Lease(version("1"), released.clone()),
            &mut w,
            &b,
            &policy(),
            t,
            always_alive
        ),
        Verdict::Take(How::Released)
    );
    // A run of this host whose process is gone.
    assert_eq!(
        judge(
            &Seen::Lease(version("1"), lease("b", "old", 2)),
            &mut w,
            &b,
            &policy(),
            t,
            never_alive
        ),
        Verdict::Take(How::DeadRun)
    );
    // This run's own (a write whose answer was lost).
    assert_eq!(
        judge(
            &Seen::Lease(version("1"), lease("b", "rb", 2)),
            &mut w,
            &b,
            &policy(),
            t,
            always_alive
        ),
        Verdict::Adopt
    );
    // --takeover takes a live lease, and garbage.
    let takeover = Policy {
        takeover: true,
        ..policy()
    };
    for seen in [
        Seen::Lease(version("1"), lease("a", "ra", 2)),
        Seen::Garbage(version("1")),
    ] {
        assert_eq!(
            judge(&seen, &mut None, &b, &takeover, t, always_alive),
            Verdict::Take(How::Takeover)
        );
    }
    // A store that ignores conditional writes arbitrates nothing: a session another host had
    // moves only with --takeover, even released.
    let blind = Policy {
        conditional: Some(false),
        ..policy()
    };
    assert_eq!(
        judge(
            &Seen::Lease(version("1"), released),
            &mut None,
            &b,
            &blind,
            t,
            always_alive
        ),
        Verdict::Refuse
    );
}

#[test]
fn garbage_is_a_version_that_runs_out_like_any_other() {
    let b = me("b", "rb");
    let mut watched = None;
    let t = Duration::from_secs(2);
    let garbage = Seen::Garbage(version("g"));
    let wait = TTL + margin(TTL);
    assert_eq!(
        judge(&garbage, &mut watched, &b, &policy(), t, always_alive),
        Verdict::Wait { until: t + wait }
    );
    assert_eq!(
        judge(
            &garbage,
            &mut watched,
            &b,
            &policy(),
            t + wait,
            always_alive
        ),
        Verdict::Take(How::Expired)
    );
}

#[test]
fn a_huge_ttl_waits_at_most_the_cap() {
    let mut l = lease("a", "ra", 1);
    l.ttl_ms = u64::MAX;
    assert_eq!(l.ttl(), MAX_TTL);
}

#[test]
fn names_from_the_store_are_shown_quoted_and_cut() {
    let text = shown("evil\u{1b}[2J\nhost");
    assert!(!text.contains('\n') && !text.contains('\u{1b}'), "{text}");
    let long = shown(&"x".repeat(500));
    assert!(long.chars().count() < 90, "{long}");
    let mut l = lease("a\nINFO forged", "r", 1);
    l.ttl_ms = 15_000;
    let message = Refusal::Held {
        lease: Some(l),
        unarbitrated: false,
    }
    .message("s");
    assert!(!message.contains('\n'), "{message}");
}

/// A host on the shared store: its identity, clock and leases.
struct Host {
    me: Identity,
    clock: Arc<dyn Clock>,
    leases: Mutex<Leases>,
    policy: Policy,
}

impl Host {
    fn new(name: &str, clock: impl Clock + 'static) -> Host {
        Host {
            me: me(name, &format!("run-{name}")),
            clock: Arc::new(clock),
            leases: Mutex::new(Leases::default()),
            policy: policy(),
        }
    }

    async fn acquire(&self, store: &Store, patience: Duration) -> Result<Acquired, Refusal> {
        let taker = Taker {
            me: &self.me,
            policy: &self.policy,
            clock: self.clock.as_ref(),
            liveness: &ProcessTable,
        };
        acquire(store, &self.leases, &taker, SessionId::new("s"), patience).await
    }

    async fn renew(&self, store: &Store) {
        let _ = renew_due(store, self.clock.as_ref(), &self.leases).await;
    }

    /// Whether it holds the session and believes it may write it now.
    fn writing(&self) -> bool {
        self.leases
            .lock()
            .held(&SessionKey::of(SessionId::new("s")))
            .is_some_and(|h| h.valid(self.clock.now()))
    }

    fn lost(&self) -> bool {
        matches!(
            self.leases.lock().get(&SessionKey::of(SessionId::new("s"))),
            Some(Standing::Lost(_))
        )
    }
}

fn memory() -> (Store, Arc<Faulty>) {
    let faulty = Faulty::new(Arc::new(InMemory::new()));
    (Store::over(faulty.clone(), "team", "memory://team"), faulty)
}

async fn records(store: &Store) -> Vec<EpochRecord> {
    let key = SessionKey::of(SessionId::new("s"));
    let mut out = Vec::new();
    for rel in store.list(&layout::lease_dir(&key)).await.unwrap() {
        if layout::parse_epoch_record(rel.rsplit('/').next().unwrap()).is_some() {
            let bytes = store.get(&rel).await.unwrap();
            out.push(serde_json::from_slice::<EpochRecord>(&bytes).unwrap());
        }
    }
    out.sort_by_key(|r| r.epoch);
    out
}

/// Advance the paused clock by `d`, renewing `hosts` as the shipper would every second.
async fn run_for(store: &Store, hosts: &[&Host], d: Duration) {
    let end = tokio::time::Instant::now() + d;
    while tokio::time::Instant::now() < end {
        tokio::time::sleep(Duration::from_secs(1)).await;
        for h in hosts {
            h.renew(store).await;
        }
    }
}

/// Run `work` while `hosts` renew every second, as their shippers would.
async fn while_renewing<T>(
    store: &Store,
    hosts: &[&Host],
    work: impl std::future::Future<Output = T>,
) -> T {
    tokio::pin!(work);
    loop {
        tokio::select! {
            out = &mut work => return out,
            () = tokio::time::sleep(Duration::from_secs(1)) => {
                for h in hosts {
                    h.renew(store).await;
                }
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_continuing_host_keeps_shipping_through_many_renewals_after_a_takeover() {
    // Issue 37 (1) and (2): B continues a session A held for many renewals; B's renewals go on
    // for twenty periods, and A, which pruned nothing, can never take it back unseen.
    let (store, _) = memory();
    let a = Host::new("a", RuntimeClock::new(0));
    let b = Host::new("b", RuntimeClock::new(0));
    a.acquire(&store, Duration::ZERO).await.unwrap();
    run_for(&store, &[&a], TTL * 4).await;
    assert!(a.writing());
    // While A renews, B is refused within a renewal period.
    let refused = while_renewing(&store, &[&a], b.acquire(&store, TTL * 3)).await;
    assert!(matches!(refused, Err(Refusal::Held { .. })), "{refused:?}");
    // A goes silent (killed): B waits it out and takes the session, under a new epoch.
    let got = b.acquire(&store, TTL * 2).await.unwrap();
    assert_eq!(got.epoch, 2);
    assert!(
        !a.writing(),
        "A's own clock ended its lease before B took it"
    );
    run_for(&store, &[&b], TTL * 20).await;
    assert!(b.writing() && !b.lost());
    // A comes back: its renewal finds the session gone, and it says so.
    a.renew(&store).await;
    assert!(a.lost() && !a.writing());
    // A third host cannot take it from B either, while B renews.
    let c = Host::new("c", RuntimeClock::new(0));
    let refused = while_renewing(&store, &[&b], c.acquire(&store, TTL * 3)).await;
    assert!(matches!(refused, Err(Refusal::Held { .. })), "{refused:?}");
    let epochs: Vec<(u64, String)> = records(&store)
        .await
        .into_iter()
        .map(|r| (r.epoch, r.run))
        .collect();
    assert_eq!(epochs, [(1, "run-a".to_string()), (2, "run-b".to_string())]);
}

#[tokio::test(start_paused = true)]
async fn clocks_set_off_by_a_minute_decide_nothing() {
    // Issue 37 (3): a host whose wall clock is 60 s fast (or slow) takes nothing sooner.
    for skew in [60_000_000, -60_000_000] {
        let (store, _) = memory();
        let a = Host::new("a", RuntimeClock::new(0));
        let b = Host::new("b", RuntimeClock::new(skew));
        a.acquire(&store, Duration::ZERO).await.unwrap();
        run_for(&store, &[&a], TTL).await;
        let refused = while_renewing(&store, &[&a], b.acquire(&store, TTL * 2)).await;
        assert!(
            matches!(refused, Err(Refusal::Held { .. })),
            "{skew}: {refused:?}"
        );
        assert!(a.writing());
    }
}

#[tokio::test(start_paused = true)]
async fn a_garbage_lease_wedges_nothing() {
    // Issue 37 (4): a lease that is not JSON is waited out by anyone, replaced at once with
    // --takeover, and its holder learns it lost the session.
    let (store, _) = memory();
    let a = Host::new("a", RuntimeClock::new(0));
    a.acquire(&store, Duration::ZERO).await.unwrap();
    let key = SessionKey::of(SessionId::new("s"));
    store
        .put_versioned(
            &layout::lease_object(&key),
            Bytes::from_static(b"\x00not json"),
            Write::Overwrite,
        )
        .await
        .unwrap();
    let b = Host::new("b", RuntimeClock::new(0));
    let got = b.acquire(&store, TTL * 2).await.unwrap();
    assert_eq!(got.epoch, 2, "one past the highest epoch recorded");
    a.renew(&store).await;
    tokio::time::sleep(TTL).await;
    a.renew(&store).await;
    assert!(a.lost());
    // Garbage again, and a host with --takeover replaces it at once.
    store
        .put_versioned(
            &layout::lease_object(&key),
            Bytes::from_static(b"{]"),
            Write::Overwrite,
        )
        .await
        .unwrap();
    let mut c = Host::new("c", RuntimeClock::new(0));
    c.policy.takeover = true;
    let got = c.acquire(&store, Duration::ZERO).await.unwrap();
    assert_eq!(got.epoch, 3);
    // And the holder that was lost can continue it again, later, in the same run.
    tokio::time::sleep(TTL * 2).await;
    let again = a.acquire(&store, TTL * 2).await.unwrap();
    assert_eq!(
        again,
        Acquired {
            epoch: 4,
            again: true
        }
    );
}

#[tokio::test(start_paused = true)]
async fn a_renewal_whose_answer_was_lost_is_recognised() {
    let (store, faulty) = memory();
    let a = Host::new("a", RuntimeClock::new(0));
    a.acquire(&store, Duration::ZERO).await.unwrap();
    // The store applies A's renewal but the answer never comes; then it is down for a while.
    faulty.then(&[Fault::LoseAnswer]);
    run_for(&store, &[&a], TTL / 3 + Duration::from_secs(1)).await;
    assert!(a.writing() && !a.lost());
    run_for(&store, &[&a], TTL * 3).await;
    assert!(a.writing() && !a.lost(), "A adopted its own write");
    // A renewal that fails without being applied is retried; the lease runs out on A's clock
    // while the store is down, and A writes nothing meanwhile.
    faulty.set_down(true);
    run_for(&store, &[&a], TTL).await;
    assert!(!a.writing() && !a.lost());
    faulty.set_down(false);
    run_for(&store, &[&a], Duration::from_secs(2)).await;
    assert!(a.writing(), "nobody took it: renewed where it was");
}

#[tokio::test(start_paused = true)]
async fn a_taken_over_renewal_is_lost_not_overwritten() {
    // Issue 37 (1): a 412 in the middle of renewals means another host took the session.
    let (store, _) = memory();
    let a = Host::new("a", RuntimeClock::new(0));
    a.acquire(&store, Duration::ZERO).await.unwrap();
    let mut b = Host::new("b", RuntimeClock::new(0));
    b.policy.takeover = true;
    b.acquire(&store, Duration::ZERO).await.unwrap();
    run_for(&store, &[&a, &b], TTL).await;
    assert!(a.lost() && !a.writing());
    assert!(b.writing());
    let seen = read_lease(&store, &SessionKey::of(SessionId::new("s")))
        .await
        .unwrap();
    assert!(matches!(seen, Seen::Lease(_, l) if l.host == "b" && l.epoch == 2));
}

#[tokio::test(start_paused = true)]
async fn a_released_lease_is_taken_at_once_under_the_next_epoch() {
    let (store, _) = memory();
    let a = Host::new("a", RuntimeClock::new(0));
    a.acquire(&store, Duration::ZERO).await.unwrap();
    release_all(&store, a.clock.as_ref(), &a.leases, Duration::from_secs(5)).await;
    let b = Host::new("b", RuntimeClock::new(0));
    let started = tokio::time::Instant::now();
    let got = b.acquire(&store, Duration::ZERO).await.unwrap();
    assert_eq!(got.epoch, 2);
    assert_eq!(started.elapsed(), SETTLE, "no waiting but the read-back");
}

#[tokio::test(start_paused = true)]
async fn hosts_racing_on_a_store_that_checks_then_writes_are_told_apart_by_reading_back() {
    // s3s-fs checks a condition, then streams the body: two racing writers can both be told
    // yes. Read back a moment later, the lease names one of them.
    for round in 0..8 {
        let (store, faulty) = memory();
        let a = Host::new("a", RuntimeClock::new(0));
        a.acquire(&store, Duration::ZERO).await.unwrap();
        release_all(&store, a.clock.as_ref(), &a.leases, TTL).await;
        faulty.set_racy(true);
        let (b, c) = (
            Host::new("b", RuntimeClock::new(0)),
            Host::new("c", RuntimeClock::new(0)),
        );
        let (got_b, got_c) = tokio::join!(
            b.acquire(&store, Duration::ZERO),
            c.acquire(&store, Duration::ZERO)
        );
        let won = usize::from(got_b.is_ok()) + usize::from(got_c.is_ok());
        assert_eq!(won, 1, "round {round}: {got_b:?} {got_c:?}");
    }
}

/// A clock whose rate is off by `ppm` parts per million (a host whose clock runs fast or slow).
#[derive(Debug)]
struct Drifting {
    origin: tokio::time::Instant,
    ppm: i64,
}

impl Clock for Drifting {
    fn now(&self) -> Duration {
        let real = self.origin.elapsed().as_nanos() as i128;
        let scaled = real + real * i128::from(self.ppm) / 1_000_000;
        Duration::from_nanos(u64::try_from(scaled.max(0)).unwrap_or(u64::MAX))
    }

    fn wall_us(&self) -> i64 {
        0
    }
}

#[tokio::test(start_paused = true)]
async fn three_hosts_in_seeded_interleavings_never_write_one_session_at_once() {
    // Each step one host acts (takes, renews, gives back, or falls silent for a while) and
    // time moves on; the hosts' clocks run up to 5 % fast or slow. At every instant at most
    // one host believes it may write the session, and epochs only rise, each recorded once.
    let seed = std::env::var("ACPJ_LEASE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_0037_u64);
    for round in 0..24u64 {
        let seed = seed.wrapping_add(round);
        let mut rng = Seeded(seed);
        let (store, faulty) = memory();
        let hosts: Vec<Host> = ["a", "b", "c"]
            .iter()
            .map(|name| {
                let ppm = i64::try_from(rng.below(100_001)).unwrap() - 50_000;
                Host {
                    clock: Arc::new(Drifting {
                        origin: tokio::time::Instant::now(),
                        ppm,
                    }),
                    ..Host::new(name, RuntimeClock::new(0))
                }
            })
            .collect();
        let mut silent = [0u32; 3];
        let mut last_epoch = 0;
        for step in 0..120 {
            let i = usize::try_from(rng.below(3)).unwrap();
            let h = &hosts[i];
            if silent[i] > 0 {
                silent[i] -= 1;
            } else {
                match rng.below(10) {
                    0..=2 => {
                        let _ = h.acquire(&store, Duration::ZERO).await;
                    }
                    3 => release_all(&store, h.clock.as_ref(), &h.leases, TTL).await,
                    4 => silent[i] = u32::try_from(rng.below(40)).unwrap(),
                    5 => faulty.then(&[if rng.below(2) == 0 {
                        Fault::Fail
                    } else {
                        Fault::LoseAnswer
                    }]),
                    _ => h.renew(&store).await,
                }
            }
            tokio::time::sleep(Duration::from_millis(rng.below(3000))).await;
            let writing: Vec<&str> = hosts
                .iter()
                .filter(|h| h.writing())
                .map(|h| h.me.host.as_str())
                .collect();
            assert!(
                writing.len() <= 1,
                "seed {seed} step {step}: {writing:?} write the session at once (ACPJ_LEASE_SEED={seed} to replay)"
            );
            if let Ok(Seen::Lease(_, l)) =
                read_lease(&store, &SessionKey::of(SessionId::new("s"))).await
            {
                assert!(l.epoch >= last_epoch, "seed {seed} step {step}: epoch fell");
                last_epoch = l.epoch;
            }
        }
        let recorded: Vec<u64> = records(&store).await.iter().map(|r| r.epoch).collect();
        let mut sorted = recorded.clone();
        sorted.dedup();
        assert_eq!(recorded, sorted, "seed {seed}: an epoch recorded twice");
    }
}

#[tokio::test(start_paused = true)]
async fn a_run_killed_between_its_lease_and_its_epoch_record_keeps_its_epoch() {
    // A take writes the lease, then the epoch record; a run killed between the two left a
    // lease naming it and no record. Its segment, never shipped, is its own to ship (under
    // the lease's epoch, its record written now), not a branch another run continued.
    let (store, _) = memory();
    let clock = RuntimeClock::new(0);
    let run = "20261129T100000.000000Z-7";
    let key = SessionKey::of(SessionId::new("s"));
    let taken = lease("h", run, 1);
    store
        .put_versioned(
            &layout::lease_object(&key),
            serde_json::to_vec(&taken).unwrap().into(),
            Write::Create,
        )
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{run}.acpj.zst"));
    let header = crate::fleet::shipper::tests::header("s", run);
    crate::journal::SegmentWriter::create(&path, &header).unwrap();
    assert_eq!(
        recover(&store, &clock, "h", &key, &path).await.unwrap(),
        Some(1)
    );
    let written = records(&store).await;
    assert_eq!(written.len(), 1);
    assert_eq!((written[0].epoch, written[0].run.as_str()), (1, run));
    // Another run's lease (or another host's) is a continuation: nothing to ship.
    let other = "20261129T110000.000000Z-8";
    let path = dir.path().join(format!("{other}.acpj.zst"));
    crate::journal::SegmentWriter::create(&path, &crate::fleet::shipper::tests::header("s", other))
        .unwrap();
    assert_eq!(
        recover(&store, &clock, "h", &key, &path).await.unwrap(),
        None
    );
}
