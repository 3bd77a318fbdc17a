//! When a dead agent is started again (`--respawn N`): at most `N` restarts within any minute,
//! so an agent that dies at once ends the proxy instead of looping.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// The window the limit counts restarts in.
const WINDOW: Duration = Duration::from_secs(60);

/// Restarts allowed and done.
#[derive(Debug)]
pub struct Respawn {
    limit: u32,
    recent: VecDeque<Instant>,
}

impl Respawn {
    /// At most `limit` restarts per minute (`0`: never restart).
    pub fn new(limit: u32) -> Respawn {
        Respawn {
            limit,
            recent: VecDeque::new(),
        }
    }

    /// True when restarts are enabled at all.
    pub fn enabled(&self) -> bool {
        self.limit > 0
    }

    /// Take a restart at `now` if the limit allows one.
    pub fn take(&mut self, now: Instant) -> bool {
        while self
            .recent
            .front()
            .is_some_and(|t| now.duration_since(*t) >= WINDOW)
        {
            self.recent.pop_front();
        }
        if self.recent.len() >= self.limit as usize {
            return false;
        }
        self.recent.push_back(now);
        true
    }

    /// The restarts allowed per minute (`--respawn`).
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Restarts taken within the last minute.
    pub fn recent(&self) -> usize {
        self.recent.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_the_limit_within_a_minute_then_again_after_it() {
        let start = Instant::now();
        let mut respawn = Respawn::new(3);
        assert!(respawn.take(start));
        assert!(respawn.take(start + Duration::from_secs(1)));
        assert!(respawn.take(start + Duration::from_secs(2)));
        assert!(
            !respawn.take(start + Duration::from_secs(3)),
            "a fourth within the minute"
        );
        assert!(
            respawn.take(start + Duration::from_secs(61)),
            "the first has aged out"
        );
        assert_eq!(respawn.recent(), 2, "the second went at 60 s too");
    }

    #[test]
    fn zero_never_restarts() {
        let mut respawn = Respawn::new(0);
        assert!(!respawn.enabled());
        assert!(!respawn.take(Instant::now()));
    }
}
