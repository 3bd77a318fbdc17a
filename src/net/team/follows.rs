//! The slots of the sessions the team view's pages follow, by session ID: one per session,
//! shared by every page that asks about it (each asker waits for the slot, so pages asking at
//! once wait for one reading; see [`super::Reads::followed`]), and bounded: at most
//! [`MAX_FOLLOWED`] sessions and [`MAX_KEPT`] bytes of what they hold, the session asked about
//! longest ago dropped first; a session no page asked about for [`FORGET`] is dropped (on
//! tokio's clock, so that a test pauses it).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use parking_lot::Mutex;

/// Sessions followed at once, at most.
pub(super) const MAX_FOLLOWED: usize = 32;
/// Bytes held at once, at most (one session holding more is kept alone).
pub(super) const MAX_KEPT: usize = 64 << 20;
/// A session no page asked about for this long is dropped.
pub(super) const FORGET: Duration = Duration::from_secs(30);

/// A session's slot: when a page last asked, the bytes it holds.
#[derive(Debug)]
struct Kept<T> {
    asked: Instant,
    bytes: usize,
    slot: Arc<tokio::sync::Mutex<T>>,
}

/// The slots of the sessions followed, by ID.
#[derive(Debug)]
pub(super) struct Follows<T> {
    kept: Mutex<HashMap<String, Kept<T>>>,
}

impl<T> Default for Follows<T> {
    fn default() -> Self {
        Follows {
            kept: Mutex::new(HashMap::new()),
        }
    }
}

impl<T: Default> Follows<T> {
    /// Session `id`'s slot (a new one when there is none), asked about now; the sessions past
    /// the bounds dropped.
    pub(super) fn slot(&self, id: &str) -> Arc<tokio::sync::Mutex<T>> {
        let now = Instant::now();
        let mut kept = self.kept.lock();
        kept.retain(|key, k| key == id || now.duration_since(k.asked) < FORGET);
        if !kept.contains_key(id) {
            while kept.len() >= MAX_FOLLOWED && drop_oldest(&mut kept, id) {}
        }
        let k = kept.entry(id.to_string()).or_insert_with(|| Kept {
            asked: now,
            bytes: 0,
            slot: Arc::default(),
        });
        k.asked = now;
        k.slot.clone()
    }
}

impl<T> Follows<T> {
    /// Session `id`'s slot holds `bytes` now: the sessions asked about longest ago dropped
    /// past [`MAX_KEPT`].
    pub(super) fn sized(&self, id: &str, bytes: usize) {
        let mut kept = self.kept.lock();
        if let Some(k) = kept.get_mut(id) {
            k.bytes = bytes;
        }
        while kept.values().map(|k| k.bytes).sum::<usize>() > MAX_KEPT && drop_oldest(&mut kept, id)
        {
        }
    }

    /// Session `id` kept no more.
    pub(super) fn forget(&self, id: &str) {
        self.kept.lock().remove(id);
    }

    /// How many sessions are kept.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.kept.lock().len()
    }
}

/// Drop the session asked about longest ago, other than `id`; false when there is none.
fn drop_oldest<T>(kept: &mut HashMap<String, Kept<T>>, id: &str) -> bool {
    let oldest = kept
        .iter()
        .filter(|(key, _)| key.as_str() != id)
        .min_by_key(|(_, k)| k.asked)
        .map(|(key, _)| key.clone());
    oldest.is_some_and(|key| kept.remove(&key).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sessions_kept_are_bounded_in_number_and_bytes() {
        let follows: Follows<u8> = Follows::default();
        for n in 0..MAX_FOLLOWED + 5 {
            follows.slot(&format!("s{n}"));
        }
        assert_eq!(follows.len(), MAX_FOLLOWED);
        // The one asked about longest ago went first; asking keeps one.
        let last = format!("s{}", MAX_FOLLOWED + 4);
        let slot = follows.slot(&last);
        assert!(Arc::ptr_eq(&slot, &follows.slot(&last)));
        let first = follows.slot("s0");
        assert!(!Arc::ptr_eq(&first, &follows.slot("s1")));
        // Past the bytes, the others asked about longest ago go until it fits: all but the
        // last two asked about; one larger than all is kept alone.
        follows.sized(&last, MAX_KEPT / 2);
        follows.sized("s0", MAX_KEPT / 2);
        assert_eq!(follows.len(), MAX_FOLLOWED);
        follows.sized("s1", 1);
        assert_eq!(follows.len(), 2);
        follows.slot(&last);
        follows.sized("s1", MAX_KEPT + 1);
        assert_eq!(follows.len(), 1);
        follows.forget("s1");
        assert_eq!(follows.len(), 0);
    }

    /// [`FORGET`] over four periods on the paused clock: a session asked about just inside
    /// each period stays (the same slot), one not asked about for a whole period is dropped
    /// when the next page asks about anything.
    #[tokio::test(start_paused = true)]
    async fn a_session_no_page_asks_about_for_a_period_is_dropped_period_after_period() {
        let follows: Follows<u8> = Follows::default();
        let kept = follows.slot("kept");
        let tick = Duration::from_millis(1);
        for period in 1..=4 {
            let other = format!("other{period}");
            follows.slot(&other);
            tokio::time::advance(FORGET - tick).await;
            assert!(Arc::ptr_eq(&kept, &follows.slot("kept")), "period {period}");
            assert_eq!(
                follows.len(),
                2,
                "period {period}: {other} asked {FORGET:?} - 1 ms ago"
            );
            tokio::time::advance(tick).await;
            follows.slot("kept");
            assert_eq!(
                follows.len(),
                1,
                "period {period}: {other} dropped at {FORGET:?}"
            );
        }
    }
}
