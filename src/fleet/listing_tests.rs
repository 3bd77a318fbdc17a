//! `Fleet::listing`'s sharing of one reading, on the injected clock: a reading is shared with
//! every request made within `LISTED_FOR` of its start (or while it runs), and a request after
//! that reads again, over several periods.

use std::sync::Arc;
use std::time::Duration;

use object_store::memory::InMemory;
use parking_lot::Mutex;

use crate::fleet::clock::Clock;
use crate::fleet::faults::Faulty;
use crate::fleet::store::Store;
use crate::fleet::{Fleet, LISTED_FOR, Options};
use crate::journal::JournalDir;

/// A clock the test moves by hand.
#[derive(Debug, Default)]
struct Hand(Mutex<Duration>);

impl Hand {
    fn set(&self, to: Duration) {
        *self.0.lock() = to;
    }
}

impl Clock for Hand {
    fn now(&self) -> Duration {
        *self.0.lock()
    }

    fn wall_us(&self) -> i64 {
        1_764_460_800_000_000 + i64::try_from(self.now().as_micros()).unwrap_or(i64::MAX)
    }
}

#[test]
fn a_reading_is_shared_for_two_seconds_from_its_start_then_read_again_over_five_periods() {
    let dir = tempfile::tempdir().unwrap();
    let faulty = Faulty::new(Arc::new(InMemory::new()));
    let store = Store::over(faulty.clone(), "team", "memory://team");
    let clock = Arc::new(Hand::default());
    let options = Options {
        ship_interval: Duration::from_secs(3600),
        lease_ttl: Duration::from_secs(60),
        takeover: false,
        index: false,
    };
    let local = JournalDir::new(dir.path());
    let fleet = Fleet::with_store(store, local, "run", options, clock.clone()).unwrap();
    let step = LISTED_FOR / 4;
    let mut last = None;
    let mut readings = Vec::new();
    // Five periods, asked four times in each: the first ask of each period reads, the three
    // after it (within LISTED_FOR of that reading's start) share it.
    for i in 0..20u32 {
        clock.set(step * i);
        let listing = fleet.listing().unwrap();
        let read = last
            .as_ref()
            .is_none_or(|l: &Arc<_>| !Arc::ptr_eq(l, &listing));
        if read {
            readings.push(step * i);
        }
        last = Some(listing);
    }
    let expected: Vec<Duration> = (0..5u32).map(|p| LISTED_FOR * p).collect();
    assert_eq!(
        readings, expected,
        "a reading every {LISTED_FOR:?}, shared in between"
    );
}
