//! The fleet's clocks, injected: a monotonic one that decides (how long a lease has been seen
//! unchanged, how long this host's own lease is good for) and a wall clock that only informs
//! (times written into the store for people to read, never compared between hosts).

use std::sync::Arc;
use std::time::Duration;

/// Where the fleet reads the time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Monotonic time since an arbitrary origin, counting time the machine was suspended.
    fn now(&self) -> Duration;
    /// Wall-clock time in Unix microseconds: written for people, never compared.
    fn wall_us(&self) -> i64;
}

/// A shared clock.
pub type SharedClock = Arc<dyn Clock>;

/// The machine's clocks: `CLOCK_BOOTTIME` (monotonic, and unlike `CLOCK_MONOTONIC` it goes on
/// while the machine is suspended, so a laptop that slept through its lease knows it) and the
/// system time.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec; CLOCK_BOOTTIME exists on every Linux
        // since 2.6.39. On failure `ts` stays zero and the fall-back below is used.
        let ok = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) } == 0;
        if !ok {
            return tokio::time::Instant::now().elapsed();
        }
        Duration::new(
            u64::try_from(ts.tv_sec).unwrap_or(0),
            u32::try_from(ts.tv_nsec).unwrap_or(0),
        )
    }

    fn wall_us(&self) -> i64 {
        jiff::Timestamp::now().as_microsecond()
    }
}

/// The runtime's clock (tokio's, which a test pauses and advances), with a wall clock set off
/// by a fixed amount: what the fleet's unit tests run on.
#[derive(Debug, Clone, Copy)]
pub struct RuntimeClock {
    origin: tokio::time::Instant,
    /// Added to the wall clock (a host whose clock is fast or slow).
    pub wall_skew_us: i64,
}

impl RuntimeClock {
    /// Starting now, with the wall clock set off by `wall_skew_us`.
    pub fn new(wall_skew_us: i64) -> RuntimeClock {
        RuntimeClock {
            origin: tokio::time::Instant::now(),
            wall_skew_us,
        }
    }
}

impl Clock for RuntimeClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn wall_us(&self) -> i64 {
        jiff::Timestamp::now().as_microsecond() + self.wall_skew_us
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_clock_moves_forward() {
        let a = SystemClock.now();
        std::thread::sleep(Duration::from_millis(5));
        assert!(SystemClock.now() > a);
    }
}
