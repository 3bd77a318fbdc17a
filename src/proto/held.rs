//! Lines held back, in order and bounded: the agent's replay of a native load, which must not
//! reach the client before the agent's answer says whether it stands. Past the bound nothing
//! more is held (the caller sends what was held, then lets lines pass as they come), so an agent
//! that floats a flood never grows the proxy's memory.

use bytes::Bytes;

/// Held lines and their size.
#[derive(Debug, Default)]
pub(super) struct HeldLines {
    lines: Vec<Bytes>,
    bytes: usize,
    overflowed: bool,
}

impl HeldLines {
    /// Hold `line`; `false` (and nothing held) once holding it would pass `limit` bytes, and
    /// from then on.
    pub(super) fn hold(&mut self, line: &Bytes, limit: usize) -> bool {
        if self.overflowed || self.bytes + line.len() > limit {
            self.overflowed = true;
            return false;
        }
        self.bytes += line.len();
        self.lines.push(line.clone());
        true
    }

    /// True once a line was refused for the bound.
    pub(super) fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// The lines held so far, in order (the bound stays passed if it was).
    pub(super) fn take(&mut self) -> Vec<Bytes> {
        self.bytes = 0;
        std::mem::take(&mut self.lines)
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
