//! A tail replay ([`super::ClientSupport::tail`]): only the last prompt turns are replayed;
//! what comes before is read for its state and left out, and one line says how much was.

use serde_json::{Value, json};

use crate::journal::format::{Body, Record};
use crate::wire::Side;

/// A tail replay in progress.
#[derive(Debug, Default)]
pub(super) struct Tail {
    /// Prompt turns to replay.
    keep: u64,
    /// Prompt turns in the history (the first pass counts them).
    total: u64,
    /// Prompt turns met so far by the second pass.
    turn: u64,
    /// Lines left out so far.
    left_out: u64,
    /// The replay has reached the turns it replays.
    started: bool,
}

impl Tail {
    /// A tail replay of the last `keep` prompt turns.
    pub(super) fn new(keep: u64) -> Tail {
        Tail {
            keep,
            ..Tail::default()
        }
    }

    /// The first pass met a prompt turn.
    pub(super) fn count_prompt(&mut self) {
        self.total += 1;
    }

    /// `lines` more lines were left out.
    pub(super) fn left_out(&mut self, lines: u64) {
        self.left_out += lines;
    }

    /// Where `record` (of a replay of `session`) stands.
    pub(super) fn step(&mut self, session: &str, record: &Record) -> TailStep {
        if self.started || self.total <= self.keep {
            self.started = true;
            return TailStep::Replay;
        }
        let prompt = matches!(&record.body, Body::Message { from: Side::Client, payload }
            if is_prompt_of(session, &payload.bytes));
        if prompt {
            self.turn += 1;
        }
        let first_kept = self.total.saturating_sub(self.keep) + 1;
        match prompt && self.turn >= first_kept {
            true => TailStep::Start,
            false => TailStep::LeaveOut,
        }
    }

    /// The tail begins: what the line saying what was left out says (its text and `_meta`),
    /// when something was.
    pub(super) fn begin(&mut self) -> Option<(String, Value)> {
        self.started = true;
        let turns = self.turn - 1;
        let (kept, left_out) = (self.total - turns, self.left_out);
        if turns == 0 {
            return None;
        }
        let s = if turns == 1 { "" } else { "s" };
        let text = format!(
            "acp-journal replayed the last {kept} of {} turns: {turns} earlier turn{s} ({left_out} updates) left out",
            self.total
        );
        let meta = json!({"acpJournal": {"tail": {"turns": turns, "updates": left_out}}});
        Some((text, meta))
    }
}

/// How a record stands in a tail replay.
pub(super) enum TailStep {
    /// Replayed.
    Replay,
    /// Before the turns replayed: read for its state, left out.
    LeaveOut,
    /// The first record of the turns replayed.
    Start,
}

/// `line` is a `session/prompt` of `session` (a prompt turn of it; a child's is not).
pub(super) fn is_prompt_of(session: &str, line: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Prompt<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow)]
        params: Option<PromptParams<'a>>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct PromptParams<'a> {
        #[serde(borrow)]
        session_id: Option<std::borrow::Cow<'a, str>>,
    }
    memchr::memmem::find(line, b"\"session/prompt\"").is_some()
        && serde_json::from_slice::<Prompt<'_>>(line).is_ok_and(|p| {
            p.method.as_deref() == Some("session/prompt")
                && p.params
                    .and_then(|p| p.session_id)
                    .is_some_and(|s| s == session)
        })
}
