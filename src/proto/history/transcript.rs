//! The transcript a replay keeps for re-priming: its turns' text.

use std::collections::VecDeque;

/// One turn of the transcript.
#[derive(Default)]
pub(super) struct TurnText {
    pub(super) user: String,
    pub(super) agent: String,
}

/// Cut `text` to (about) its last `n` bytes, at a character boundary; returns the bytes cut.
pub(super) fn keep_tail(text: &mut String, n: usize) -> usize {
    let mut cut = text.len().saturating_sub(n);
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    text.drain(..cut);
    cut
}

/// The transcript of `turns`: its last `limit` bytes (`…` where it was cut).
pub(super) fn transcript(turns: &VecDeque<TurnText>, limit: usize) -> String {
    let mut transcript = String::new();
    for turn in turns {
        transcript.push_str("User: ");
        transcript.push_str(turn.user.trim());
        transcript.push_str("\nAgent: ");
        transcript.push_str(turn.agent.trim());
        transcript.push('\n');
    }
    if transcript.len() > limit {
        let mut cut = transcript.len() - limit;
        while !transcript.is_char_boundary(cut) {
            cut += 1;
        }
        transcript = format!("…{}", &transcript[cut..]);
    }
    transcript
}
