//! What the first pass over a session's records learns ahead of the second ([`Learnt`]).

use super::compactions::Compactions;
use super::terminals::Terminals;
use super::updates::update_of;
use crate::journal::format::Record;
use crate::wire::Side;

/// What the first pass over a session's records learns, for the second to use.
#[derive(Default)]
pub(super) struct Learnt {
    /// The compactions' final forms (and, in the second pass, those replayed).
    pub(super) compactions: Compactions,
    /// The client's terminals' output.
    pub(super) terminals: Terminals,
    /// The session was recorded under v2 (its agent reported `state_update`s).
    pub(super) recorded_v2: bool,
}

impl Learnt {
    /// Whether it needs journal line `line` (`tail`: the replay counts prompt turns too).
    pub(super) fn needs(&self, line: &[u8], tail: bool) -> bool {
        use memchr::memmem::find;
        find(line, b"\"compactionId\"").is_some()
            || (tail && find(line, b"\"session/prompt\"").is_some())
            || (!self.recorded_v2 && find(line, b"\"state_update\"").is_some())
            || find(line, b"\"terminal/").is_some()
            || (self.terminals.awaits_answers()
                && (find(line, b"\"result\"").is_some() || find(line, b"\"error\"").is_some()))
    }

    /// A record (its message `bytes`, from `from`) it needs.
    pub(super) fn observe(&mut self, from: Side, bytes: &[u8], record: &Record) {
        if from == Side::Agent && memchr::memmem::find(bytes, b"\"state_update\"").is_some() {
            // Only v2 agents report their state: the session was recorded under v2.
            self.recorded_v2 = true;
        }
        if memchr::memmem::find(bytes, b"\"compactionId\"").is_none() {
            return self.terminals.observe(from, bytes);
        }
        let Some((Side::Agent, msg)) = update_of(record) else {
            return;
        };
        if msg["method"] != "session/update" {
            return;
        }
        self.compactions.observe(&msg["params"]["update"]);
    }
}
