//! Guessing the token is bounded, per source address (an IPv4 address, an IPv6 /64) and in all.
//!
//! A guesser learns from *when* an answer comes as much as from what it says: if a right token
//! were answered at once and a wrong one later, any answer not there at once would be a wrong
//! guess, and delaying wrong answers would slow no one. So a request that names no live
//! connection (a new one: `initialize`, a WebSocket upgrade) and shows a token is answered —
//! right or wrong alike — only after its source's delay ([`Throttle::decide`]): none while the
//! source and all sources have had no wrong token for [`FORGET`], else [`FIRST`] doubled with
//! each of the source's wrong tokens (or each [`ALL_PER_STEP`] of all sources') to [`MAX`].
//! At most [`SLOTS`] of a source's such requests (and [`ALL_SLOTS`] of all) wait out their delay
//! at once; more wait their turn undecided. A guesser that keeps [`SLOTS`] guesses in the air
//! from one address gets [`SLOTS`] answers per [`MAX`] once it has failed a few times, and all
//! sources together [`ALL_SLOTS`] per [`MAX`].
//!
//! A request that names a live connection (its `Acp-Connection-Id`, 128 random bits only a
//! token holder was given) is answered at once when its token is right; a wrong one waits the
//! delay and counts ([`Throttle::wrong`]). A source is forgotten [`FORGET`] after its last
//! failure; the table holds at most [`SOURCES`].
//!
//! Share links' secrets are guessed against a throttle of their own with no global tier
//! ([`Throttle::per_source`]): a secret is 128 random bits, so all sources together guessing
//! at [`SLOTS`] per [`MAX`] each find nothing in the life of the universe, and one address's
//! wrong links cost that address only. The token keeps the global tier: it may be one a person
//! chose (at least 16 characters, of unknown randomness), which many addresses together could
//! otherwise guess faster.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::summary::Summary;

/// The delay after a source's first wrong token.
pub(super) const FIRST: Duration = Duration::from_millis(100);
/// The longest delay.
pub(super) const MAX: Duration = Duration::from_secs(5);
/// A source with no failure for this long starts again from no delay (and all sources, when
/// none failed for this long).
pub(super) const FORGET: Duration = Duration::from_secs(600);
/// Sources held at once (past it, the one that failed least recently is forgotten).
pub(super) const SOURCES: usize = 4096;
/// A source's requests waiting out their delay at once.
pub(super) const SLOTS: usize = 4;
/// All sources' requests waiting out their delay at once.
pub(super) const ALL_SLOTS: usize = 64;
/// Wrong tokens of all sources that count as one step of everyone's delay.
pub(super) const ALL_PER_STEP: u32 = 16;

/// The failures of every source, and the slots of those waiting.
pub(super) struct Throttle {
    state: Mutex<State>,
    /// Requests waiting out their delay, of all sources; `None` without the global tier.
    slots: Option<Arc<Semaphore>>,
    log: Arc<Summary>,
}

#[derive(Default)]
struct State {
    sources: HashMap<Source, Entry>,
    /// Every source's failures together.
    all: Failures,
}

struct Entry {
    failures: Failures,
    /// This source's requests waiting out their delay.
    slots: Arc<Semaphore>,
}

/// A source address as counted: IPv6 by /64 (one host usually holds a whole /64).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Source(u128);

impl From<IpAddr> for Source {
    fn from(ip: IpAddr) -> Source {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Source(u128::from(u32::from(v4))),
            IpAddr::V6(v6) => Source(u128::from(v6) & !((1u128 << 64) - 1) | (1 << 127)),
        }
    }
}

#[derive(Clone, Copy, Default)]
struct Failures {
    count: u32,
    last: Option<Instant>,
}

impl Failures {
    /// The count at `now` (none once [`FORGET`] has passed since the last).
    fn at(&self, now: Instant) -> u32 {
        match self.last {
            Some(last) if now.duration_since(last) < FORGET => self.count,
            _ => 0,
        }
    }

    fn add(&mut self, now: Instant) {
        self.count = self.at(now).saturating_add(1);
        self.last = Some(now);
    }
}

impl Throttle {
    /// The token's: per source, and in all.
    pub(super) fn new() -> Throttle {
        Throttle {
            state: Mutex::new(State::default()),
            slots: Some(Arc::new(Semaphore::new(ALL_SLOTS))),
            log: Summary::new("a wrong token", "wrong tokens"),
        }
    }

    /// Share links': per source only (no source's failures slow another, and all of them
    /// together are not limited).
    pub(super) fn per_source() -> Throttle {
        Throttle {
            state: Mutex::new(State::default()),
            slots: None,
            log: Summary::new("a wrong share link", "wrong share links"),
        }
    }

    /// A token from `ip` that was `right` (or not) on a request that names no live connection:
    /// returns when its answer may go, after the same delay either way (see the module's text),
    /// once one of the source's [`SLOTS`] and of the [`ALL_SLOTS`] is free; a wrong one is
    /// counted (and logged in a summary). Waits `within` at most (a socket that has not shown
    /// the token is gone by then, and an answer would reach nobody): false then, whatever the
    /// token.
    pub(super) async fn decide(&self, ip: IpAddr, within: Duration, right: bool) -> bool {
        self.decide_on(ip, within, async { right }).await
    }

    /// [`decide`](Self::decide), the answer found by `check` once the slots are held (so a
    /// source has at most [`SLOTS`] checks under way: a check that reads the store costs it
    /// its slots), its time part of the delay.
    pub(super) async fn decide_on(
        &self,
        ip: IpAddr,
        within: Duration,
        check: impl Future<Output = bool>,
    ) -> bool {
        let source = Source::from(ip);
        let slots = self.source_slots(source, Instant::now());
        let hold = async {
            let Ok(_mine) = slots.acquire().await else {
                return false;
            };
            let _all = match &self.slots {
                Some(all) => match all.acquire().await {
                    Ok(permit) => Some(permit),
                    Err(_) => return false,
                },
                None => None,
            };
            let now = Instant::now();
            let right = check.await;
            let delay = self.count(source, ip, now, right);
            // No delay, no timer (a timer would cost its next tick, a millisecond).
            if !delay.is_zero() {
                tokio::time::sleep_until(now + delay).await;
            }
            right
        };
        tokio::time::timeout(within, hold).await.unwrap_or(false)
    }

    /// A wrong token from `ip` on a request that names a live connection: counted, and
    /// returns after the source's delay, or `within` at most.
    pub(super) async fn wrong(&self, ip: IpAddr, within: Duration) {
        let now = Instant::now();
        let delay = self.count(ip.into(), ip, now, false);
        if !delay.is_zero() {
            tokio::time::sleep(delay.min(within)).await;
        }
    }

    /// The slots of `source`, its entry made if need be (the table kept within [`SOURCES`]).
    fn source_slots(&self, source: Source, now: Instant) -> Arc<Semaphore> {
        let mut state = self.state.lock();
        let sources = &mut state.sources;
        if sources.len() >= SOURCES && !sources.contains_key(&source) {
            // Forget the quiet ones, else the one that failed least recently (not one with a
            // request waiting: its slots would be made anew).
            let idle = |e: &Entry| e.slots.available_permits() == SLOTS;
            sources.retain(|_, e| !idle(e) || e.failures.at(now) > 0);
            if sources.len() >= SOURCES
                && let Some(oldest) = sources
                    .iter()
                    .filter(|(_, e)| idle(e))
                    .min_by_key(|(_, e)| e.failures.last)
                    .map(|(s, _)| *s)
            {
                sources.remove(&oldest);
            }
        }
        sources
            .entry(source)
            .or_insert_with(|| Entry {
                failures: Failures::default(),
                slots: Arc::new(Semaphore::new(SLOTS)),
            })
            .slots
            .clone()
    }

    /// The delay of a decision for `source` at `now`, from the failures so far; a wrong one
    /// (`right` false) is then counted.
    fn count(&self, source: Source, ip: IpAddr, now: Instant, right: bool) -> Duration {
        let mut state = self.state.lock();
        let all = match self.slots {
            Some(_) => state.all.at(now) / ALL_PER_STEP,
            None => 0,
        };
        let entry = state.sources.entry(source).or_insert_with(|| Entry {
            failures: Failures::default(),
            slots: Arc::new(Semaphore::new(SLOTS)),
        });
        let delay = delay(entry.failures.at(now).max(all));
        if !right {
            entry.failures.add(now);
            state.all.add(now);
            drop(state);
            self.log.count(format_args!("from {ip}"));
        }
        delay
    }
}

/// The delay after `n` failures: none for none, else [`FIRST`] doubled `n - 1` times, at most
/// [`MAX`].
fn delay(n: u32) -> Duration {
    if n == 0 {
        return Duration::ZERO;
    }
    FIRST
        .checked_mul(1u32.checked_shl(n - 1).unwrap_or(u32::MAX))
        .map_or(MAX, |d| d.min(MAX))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn the_delay_doubles_up_to_its_limit() {
        assert_eq!(delay(0), Duration::ZERO);
        assert_eq!(delay(1), FIRST);
        assert_eq!(delay(2), FIRST * 2);
        assert_eq!(delay(4), FIRST * 8);
        assert_eq!(delay(7), MAX);
        assert_eq!(delay(u32::MAX), MAX);
    }

    #[tokio::test(start_paused = true)]
    async fn a_right_and_a_wrong_token_are_answered_after_the_same_delay() {
        let throttle = Throttle::new();
        let attacker: IpAddr = "192.0.2.7".parse().unwrap();
        for (n, right) in [(0, false), (1, false), (2, true), (2, false), (3, true)] {
            let t = Instant::now();
            assert_eq!(throttle.decide(attacker, HOUR, right).await, right);
            assert_eq!(t.elapsed(), delay(n), "after {n} failures, right: {right}");
        }
        // A token on a live connection: a wrong one waits, and counts.
        let t = Instant::now();
        throttle.wrong(attacker, HOUR).await;
        assert_eq!(t.elapsed(), delay(3));
        // Another source is not slowed by it; a v4-mapped address is its IPv4 address; an
        // IPv6 /64 is one source.
        let t = Instant::now();
        assert!(
            throttle
                .decide("192.0.2.8".parse().unwrap(), HOUR, true)
                .await
        );
        assert_eq!(t.elapsed(), Duration::ZERO);
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(Source::from(mapped), Source::from(attacker));
        let a: IpAddr = "2001:db8::1".parse().unwrap();
        let b: IpAddr = "2001:db8::2:3".parse().unwrap();
        assert_eq!(Source::from(a), Source::from(b));
        assert_ne!(
            Source::from(a),
            Source::from("2001:db8:0:1::1".parse::<IpAddr>().unwrap())
        );
        // Forgotten after a quiet spell.
        tokio::time::advance(FORGET).await;
        let t = Instant::now();
        assert!(!throttle.decide(attacker, HOUR, false).await);
        assert_eq!(t.elapsed(), Duration::ZERO);
        // A wait cut at `within` answers nothing right.
        tokio::time::advance(Duration::ZERO).await;
        assert!(
            !throttle
                .decide(attacker, Duration::from_millis(10), true)
                .await
        );
    }

    #[tokio::test(start_paused = true)]
    async fn guesses_in_parallel_wait_their_turn_per_source_and_in_all() {
        let throttle = Arc::new(Throttle::new());
        let attacker: IpAddr = "192.0.2.7".parse().unwrap();
        // Seven failures: the delay is at its limit.
        for _ in 0..7 {
            throttle.decide(attacker, HOUR, false).await;
        }
        // 40 at once from one source: answered SLOTS per MAX.
        let t = Instant::now();
        let answered = Arc::new(Mutex::new(Vec::new()));
        let guesses: Vec<_> = (0..40)
            .map(|_| {
                let (throttle, answered) = (throttle.clone(), answered.clone());
                tokio::spawn(async move {
                    throttle.decide(attacker, HOUR, false).await;
                    answered.lock().push(t.elapsed());
                })
            })
            .collect();
        futures_util::future::join_all(guesses).await;
        let answered = answered.lock().clone();
        for (i, at) in answered.iter().enumerate() {
            let turn = u32::try_from(i / SLOTS + 1).unwrap();
            assert_eq!(*at, MAX * turn, "answer {i}");
        }

        // From many sources, once all sources together have failed enough for everyone's delay
        // to be at its limit: ALL_SLOTS per MAX in all.
        let ip = |i: usize| IpAddr::from(u32::to_be_bytes(0x0a00_0000 + u32::try_from(i).unwrap()));
        for i in 0..(ALL_PER_STEP * 7) as usize {
            throttle.decide(ip(i), HOUR, false).await;
        }
        let t = Instant::now();
        let many: Vec<_> = (0..ALL_SLOTS * 2)
            .map(|i| {
                let throttle = throttle.clone();
                let ip = ip(1000 + i);
                tokio::spawn(async move {
                    throttle.decide(ip, HOUR, false).await;
                    t.elapsed()
                })
            })
            .collect();
        let mut times: Vec<Duration> = futures_util::future::join_all(many)
            .await
            .into_iter()
            .map(|t| t.unwrap())
            .collect();
        times.sort();
        assert_eq!(times[ALL_SLOTS - 1], MAX);
        assert_eq!(times[ALL_SLOTS], MAX * 2);
    }

    #[tokio::test(start_paused = true)]
    async fn share_link_guesses_cost_their_own_source_only() {
        let throttle = Arc::new(Throttle::per_source());
        let ip = |i: usize| IpAddr::from(u32::to_be_bytes(0x0a00_0000 + u32::try_from(i).unwrap()));
        // Far past the token's global tier: 7 wrong links from each of 64 sources.
        for i in 0..64 {
            for _ in 0..7 {
                throttle.decide(ip(i), HOUR, false).await;
            }
        }
        // A new source is answered at once, and so are 128 at once.
        let t = Instant::now();
        assert!(throttle.decide(ip(1000), HOUR, true).await);
        assert_eq!(t.elapsed(), Duration::ZERO);
        let many: Vec<_> = (0..128)
            .map(|i| {
                let throttle = throttle.clone();
                tokio::spawn(async move { throttle.decide(ip(2000 + i), HOUR, true).await })
            })
            .collect();
        for answer in futures_util::future::join_all(many).await {
            assert!(answer.unwrap());
        }
        assert_eq!(t.elapsed(), Duration::ZERO);
        // The guessing source waits its own delay, its checks SLOTS at a time.
        let checks = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let guesses: Vec<_> = (0..12)
            .map(|_| {
                let (throttle, checks, most) = (throttle.clone(), checks.clone(), most.clone());
                tokio::spawn(async move {
                    let check = async {
                        let now = checks.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        checks.fetch_sub(1, Ordering::SeqCst);
                        false
                    };
                    throttle.decide_on(ip(0), HOUR, check).await;
                    t.elapsed()
                })
            })
            .collect();
        let times: Vec<Duration> = futures_util::future::join_all(guesses)
            .await
            .into_iter()
            .map(|t| t.unwrap())
            .collect();
        assert_eq!(most.load(Ordering::SeqCst), SLOTS);
        assert_eq!(times.iter().max(), Some(&(MAX * 3)));
    }

    #[tokio::test(start_paused = true)]
    async fn the_table_stays_bounded() {
        let throttle = Throttle::new();
        let now = Instant::now();
        for i in 0..(SOURCES as u32 + 100) {
            let ip = IpAddr::from(u32::to_be_bytes(0x0a00_0000 + i));
            throttle.source_slots(ip.into(), now);
            throttle.count(ip.into(), ip, now, false);
        }
        assert_eq!(throttle.state.lock().sources.len(), SOURCES);
    }
}
