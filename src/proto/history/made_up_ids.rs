//! The `messageId`s a replay makes up for messages recorded without one.

/// The `messageId`s a replay makes up (`acpj-user-12`, `acpj-agent_message-14`): named after
/// the record's sequence number, which counts within one proxy run. A session that went on in
/// several runs (a restart of `serve`, a load in a new proxy) has records with the same
/// numbers, and two messages under one ID would be one message to a client: the runs are told
/// apart by the numbers themselves (they rise within a run; one that does not starts another),
/// and from the second run on an ID carries the run's ordinal (`acpj-user-1.12`). A session of
/// one run keeps the IDs it always had.
#[derive(Debug, Default)]
pub struct MadeUpIds {
    ordinal: u32,
    last: Option<u64>,
}

impl MadeUpIds {
    /// The next record's sequence number (every record, in journal order).
    pub fn see(&mut self, seq: u64) {
        if self.last.is_some_and(|last| seq <= last) {
            self.ordinal += 1;
        }
        self.last = Some(seq);
    }

    /// The ID made up for a `kind` message (`user`, `agent_message`, …) recorded at `seq`.
    pub fn made(&self, kind: &str, seq: u64) -> String {
        match self.ordinal {
            0 => format!("acpj-{kind}-{seq}"),
            n => format!("acpj-{kind}-{n}.{seq}"),
        }
    }
}
