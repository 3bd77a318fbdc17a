//! Lines held back, in order, with their size: the one type for every place the core holds
//! lines — the agent's replay of a native load (until the agent's answer says whether it
//! stands), a session's agent lines while a load brings it up, the agent lines behind a question
//! to the journals, a joining connection's lines, the client lines that wait for a restarted agent
//! or a lost session's restore.
//!
//! The bound is the holder's, and it is kept one way: [`HeldLines::hold`] refuses a line that
//! would pass it, and every line after (the holder sends what it held and lets lines pass as they
//! come, or ends what it held them for), so a peer that floods never grows the proxy's memory.
//! Client lines need no bound here: the shell stops reading the client once they reach
//! `Config::held_limit` ([`super::Proxy::reads_client`]), so they are [`HeldLines::push`]ed.

use bytes::Bytes;

/// Held lines and their size.
#[derive(Debug, Default)]
pub(super) struct HeldLines {
    lines: Vec<Bytes>,
    bytes: usize,
    overflowed: bool,
}

impl HeldLines {
    /// Lines held from the start (`line`).
    pub(super) fn of(line: Bytes) -> HeldLines {
        let mut held = HeldLines::default();
        held.push(line);
        held
    }

    /// Hold `line`; `false` (and nothing held) once holding it would pass `limit` bytes, and
    /// from then on.
    pub(super) fn hold(&mut self, line: &Bytes, limit: usize) -> bool {
        if self.overflowed || self.bytes + line.len() > limit {
            self.overflowed = true;
            return false;
        }
        self.push(line.clone());
        true
    }

    /// Hold `line` whatever the size: for lines the shell stops reading past a bound.
    pub(super) fn push(&mut self, line: Bytes) {
        self.bytes += line.len();
        self.lines.push(line);
    }

    /// True once a line was refused for the bound.
    pub(super) fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// True when no line is held.
    pub(super) fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The bytes held.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// The lines held so far, in order (the bound stays passed if it was).
    pub(super) fn take(&mut self) -> Vec<Bytes> {
        self.bytes = 0;
        std::mem::take(&mut self.lines)
    }

    /// The lines held that `wanted` picks, in order; the others stay held.
    pub(super) fn take_where(&mut self, wanted: impl Fn(&Bytes) -> bool) -> Vec<Bytes> {
        let (taken, kept): (Vec<Bytes>, Vec<Bytes>) = std::mem::take(&mut self.lines)
            .into_iter()
            .partition(wanted);
        self.bytes = kept.iter().map(Bytes::len).sum();
        self.lines = kept;
        taken
    }
}

/// The agent lines held while loads bring their sessions up, under one bound: each session's
/// are the session's own ([`super::sessions::SessionTable::hold_starting`]); those naming an agent-side
/// session no mapping names yet are held here, unclaimed, while a load waits for the agent's
/// `session/new` answer (which may name it).
#[derive(Debug, Default)]
pub(super) struct HeldWhileStarting {
    unclaimed: HeldLines,
    /// The bytes held by every session and `unclaimed` together.
    bytes: usize,
    /// Holding them passed the bound: nothing more is held until a load ends.
    full: bool,
}

impl HeldWhileStarting {
    /// Hold an agent line in `session`'s held lines (`None`: unclaimed). False, and nothing
    /// held, once the lines held by every session would pass `limit` bytes; from then on
    /// nothing more is held until a load ends.
    pub(super) fn hold(
        &mut self,
        session: Option<&mut HeldLines>,
        line: &Bytes,
        limit: usize,
    ) -> bool {
        if self.full || self.bytes + line.len() > limit {
            self.full = true;
            return false;
        }
        session.unwrap_or(&mut self.unclaimed).push(line.clone());
        self.bytes += line.len();
        true
    }

    /// The lines held in `session`'s held lines (`None`: the unclaimed ones) so far, to pass
    /// before its next one.
    pub(super) fn take(&mut self, session: Option<&mut HeldLines>) -> Vec<Bytes> {
        let lines = session.unwrap_or(&mut self.unclaimed).take();
        self.bytes -= lines.iter().map(Bytes::len).sum::<usize>();
        lines
    }

    /// True while agent lines of sessions not known yet are held.
    pub(super) fn holds_unclaimed(&self) -> bool {
        !self.unclaimed.is_empty()
    }

    /// The unclaimed lines, once an agent answer may have named their sessions: to be taken
    /// again (held by the session now starting as one, passed, or held unclaimed again).
    pub(super) fn take_unclaimed(&mut self) -> Vec<Bytes> {
        self.bytes -= self.unclaimed.bytes();
        self.unclaimed.take()
    }

    /// A load ended (or the agent did): the unclaimed lines, then those of `sessions` (the
    /// held lines of every session no load is bringing up any more), in order within each;
    /// holding starts afresh.
    pub(super) fn release<'a>(
        &mut self,
        sessions: impl Iterator<Item = &'a mut HeldLines>,
    ) -> Vec<Bytes> {
        self.full = false;
        let mut lines = self.unclaimed.take();
        for held in sessions {
            lines.append(&mut held.take());
        }
        self.bytes -= lines.iter().map(Bytes::len).sum::<usize>();
        lines
    }

    /// True while nothing more is held for the bound.
    #[cfg(test)]
    pub(super) fn overflowed(&self) -> bool {
        self.full
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_bound_nothing_more_is_held() {
        let mut held = HeldLines::default();
        let line = Bytes::from_static(b"0123456789\n");
        assert!(held.hold(&line, 25));
        assert!(held.hold(&line, 25));
        assert!(!held.hold(&line, 25), "a third line passes 25 bytes");
        assert!(held.overflowed());
        assert_eq!(held.take().len(), 2);
        assert!(!held.hold(&line, 25), "still past the bound after take");
    }
}
