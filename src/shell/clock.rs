//! [`RunClock`]: the stamps of a run (wall clock, and monotonic time since the run started, on
//! tokio's clock) and the instants of the core's deadlines.

use std::time::{Duration, SystemTime};

use crate::proto::Stamp;

/// The run's clock, for stamps: wall clock plus monotonic time since the run started. The monotonic part
/// is tokio's clock, so a test that pauses time drives every timer of the loop and the core.
#[derive(Clone, Copy)]
pub(super) struct RunClock(pub(super) tokio::time::Instant);

impl RunClock {
    pub(super) fn now(&self) -> Stamp {
        let unix_us = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0);
        Stamp {
            unix_us,
            mono_us: self.0.elapsed().as_micros() as u64,
        }
    }

    /// The instant of a core deadline (monotonic microseconds, as in [`Stamp::mono_us`]).
    pub(super) fn at(&self, mono_us: u64) -> tokio::time::Instant {
        self.0 + Duration::from_micros(mono_us)
    }
}
