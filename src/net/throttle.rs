//! Wrong tokens slow down, per source address (an IPv4 address, an IPv6 /64), on every route:
//! each wrong token is answered only after a delay that doubles with the source's recent
//! failures ([`FIRST`] to [`MAX`]), and a source's answers go out one after another, so sending
//! many at once gains nothing. A right token is never slowed (on loopback, an attacker and the
//! user share an address). A source is forgotten [`FORGET`] after its last failure; the table
//! holds at most [`SOURCES`].

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::summary::Summary;

/// The delay after a source's first wrong token.
pub(super) const FIRST: Duration = Duration::from_millis(100);
/// The longest delay.
pub(super) const MAX: Duration = Duration::from_secs(5);
/// A source with no failure for this long starts again from [`FIRST`].
pub(super) const FORGET: Duration = Duration::from_secs(600);
/// Sources held at once (past it, the one that failed least recently is forgotten).
pub(super) const SOURCES: usize = 4096;

/// The failures of every source.
pub(super) struct Throttle {
    sources: Mutex<HashMap<Source, Failures>>,
    log: Arc<Summary>,
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

struct Failures {
    count: u32,
    /// When this source's next wrong answer may go out (the last one's time, past).
    next: Instant,
    last: Instant,
}

impl Throttle {
    pub(super) fn new() -> Throttle {
        Throttle {
            sources: Mutex::new(HashMap::new()),
            log: Summary::new("a wrong token", "wrong tokens"),
        }
    }

    /// A wrong token from `ip`: wait until its answer may go, or for `within` at most (a socket
    /// that has not shown the token is gone by then: an answer later than that would reach
    /// nobody, and a waiting HTTP/2 request outlives its socket). Logged in a summary.
    pub(super) async fn wrong(&self, ip: IpAddr, within: Duration) {
        self.log.count(format_args!("from {ip}"));
        let now = Instant::now();
        let at = self.schedule(ip.into(), now);
        tokio::time::sleep_until(at.min(now + within)).await;
    }

    /// Count a failure of `source` at `now`; when its answer may go.
    fn schedule(&self, source: Source, now: Instant) -> Instant {
        let mut sources = self.sources.lock().expect("the throttle");
        if sources.len() >= SOURCES && !sources.contains_key(&source) {
            sources.retain(|_, f| now.duration_since(f.last) < FORGET);
            if sources.len() >= SOURCES
                && let Some(oldest) = sources.iter().min_by_key(|(_, f)| f.last).map(|(s, _)| *s)
            {
                sources.remove(&oldest);
            }
        }
        let failures = sources.entry(source).or_insert(Failures {
            count: 0,
            next: now,
            last: now,
        });
        if now.duration_since(failures.last) >= FORGET {
            failures.count = 0;
        }
        failures.count = failures.count.saturating_add(1);
        failures.last = now;
        let at = failures.next.max(now) + delay(failures.count);
        failures.next = at;
        at
    }
}

/// The delay of a source's `n`th wrong token (from 1): [`FIRST`] doubled `n - 1` times, at
/// most [`MAX`].
fn delay(n: u32) -> Duration {
    FIRST
        .checked_mul(1u32.checked_shl(n.saturating_sub(1)).unwrap_or(u32::MAX))
        .map_or(MAX, |d| d.min(MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_doubles_up_to_its_limit() {
        assert_eq!(delay(1), FIRST);
        assert_eq!(delay(2), FIRST * 2);
        assert_eq!(delay(4), FIRST * 8);
        assert_eq!(delay(7), MAX);
        assert_eq!(delay(u32::MAX), MAX);
    }

    #[tokio::test(start_paused = true)]
    async fn wrong_tokens_from_one_source_are_answered_one_after_another_ever_later() {
        let throttle = Throttle::new();
        let attacker: IpAddr = "192.0.2.7".parse().unwrap();
        let t0 = Instant::now();
        // Ten at once: the answers are spaced as if sent one after another.
        let all = (0..10).map(|_| throttle.wrong(attacker, Duration::from_secs(3600)));
        futures_util::future::join_all(all).await;
        let spent = t0.elapsed();
        let expected: Duration = (1..=10).map(delay).sum();
        assert_eq!(spent, expected);
        assert!(spent > Duration::from_secs(26), "{spent:?}");

        // Another source is not slowed by it.
        let t1 = Instant::now();
        throttle
            .wrong("192.0.2.8".parse().unwrap(), Duration::from_secs(3600))
            .await;
        assert_eq!(t1.elapsed(), FIRST);

        // An IPv6 /64 is one source; a v4-mapped address is its IPv4 address.
        let a: IpAddr = "2001:db8::1".parse().unwrap();
        let b: IpAddr = "2001:db8::2:3".parse().unwrap();
        assert_eq!(Source::from(a), Source::from(b));
        assert_ne!(
            Source::from(a),
            Source::from("2001:db8:0:1::1".parse::<IpAddr>().unwrap())
        );
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(Source::from(mapped), Source::from(attacker));

        // Forgotten after a quiet spell.
        tokio::time::advance(FORGET).await;
        let t2 = Instant::now();
        throttle.wrong(attacker, Duration::from_secs(3600)).await;
        assert_eq!(t2.elapsed(), FIRST);
        // A wait is cut at `within`; the schedule goes on behind it.
        throttle.wrong(attacker, Duration::from_millis(10)).await;
        let t3 = Instant::now();
        throttle.wrong(attacker, Duration::from_millis(10)).await;
        assert_eq!(t3.elapsed(), Duration::from_millis(10));
    }

    #[tokio::test(start_paused = true)]
    async fn the_table_stays_bounded() {
        let throttle = Throttle::new();
        let now = Instant::now();
        for i in 0..(SOURCES as u32 + 100) {
            throttle.schedule(
                Source(u128::from(i)),
                now + Duration::from_millis(u64::from(i)),
            );
        }
        assert_eq!(throttle.sources.lock().unwrap().len(), SOURCES);
    }
}
