//! A table's lookups, counted in a test build (issue 56: a prompt's session and an answer's
//! pending entry are looked up a known number of times, `proto::lookups_tests`); zero-sized and
//! free otherwise.

/// How many lookups a table made (a test build's count; nothing otherwise).
#[derive(Debug, Default)]
pub(super) struct Lookups {
    #[cfg(test)]
    count: std::cell::Cell<usize>,
}

impl Lookups {
    /// One more lookup.
    #[inline(always)]
    pub(super) fn count(&self) {
        #[cfg(test)]
        self.count.set(self.count.get() + 1);
    }

    /// Lookups so far.
    #[cfg(test)]
    pub(super) fn get(&self) -> usize {
        self.count.get()
    }
}
