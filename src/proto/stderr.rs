//! The agent's stderr, journaled by whole lines: a line split across writes stays one record,
//! so redaction sees it whole; a partial line is held until its newline, 64 KiB, or the
//! agent's end.

use bytes::Bytes;

use super::effects::Effects;
use super::vocab::{Stamp, Target};
use crate::journal::format::Body;

/// Past this many bytes without a newline, a partial line is journaled as it is.
const PARTIAL_LINE_LIMIT: usize = 64 * 1024;

/// Agent stderr not journaled yet.
#[derive(Debug, Default)]
pub(super) struct StderrLines(Vec<u8>);

impl StderrLines {
    /// A chunk of the agent's stderr: its whole lines are journaled.
    pub(super) fn push(&mut self, fx: &mut Effects, at: Stamp, chunk: &[u8]) {
        self.0.extend_from_slice(chunk);
        let all = self.0.len() > PARTIAL_LINE_LIMIT;
        self.flush(fx, at, all);
    }

    /// Journal the whole lines held (`all`: and a partial last line: the agent ended).
    pub(super) fn flush(&mut self, fx: &mut Effects, at: Stamp, all: bool) {
        let cut = if all {
            self.0.len()
        } else {
            memchr::memrchr(b'\n', &self.0).map_or(0, |i| i + 1)
        };
        if cut == 0 {
            return;
        }
        let rest = self.0.split_off(cut);
        let text = std::mem::replace(&mut self.0, rest);
        let text = fx.stderr_text(text);
        let record = fx.record(at, Body::Stderr(Bytes::from(text)));
        fx.journal(Target::Run, record);
    }
}
