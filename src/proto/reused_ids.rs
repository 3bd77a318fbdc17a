//! Session IDs an agent uses again. An agent that numbers its sessions afresh in each process
//! (`session-1` once more) must not write a new conversation into an earlier run's journal.
//! When it answers a `session/new` with an ID this run has not opened, the core asks the journals
//! which of that ID and its fresh forms (`s~2`, `s~3`, …: [`reuse_candidates`]) it does not hold
//! yet ([`super::Action::FindFreeId`]), and holds that answer and the agent's later messages
//! (what is no JSON-RPC message passes as ever) until the journals' answer comes ([`super::Proxy::handle_free_id`]): the ID itself, which passes as
//! the agent gave it, or a fresh client-facing ID, mapped to the agent's. The journals' knowledge
//! arrives as an input, as history does. Without `Config::asks_free_ids` nothing is asked.

use bytes::Bytes;

use super::effects::Effects;
use super::held::HeldLines;
use super::sessions::SessionTable;
use super::vocab::{Action, SessionId};
use crate::wire::envelope::{self, Peek};

/// The first of the IDs a new session `s` may take that the journals do not hold (`holds`): the
/// answer to [`super::Action::FindFreeId`].
pub fn first_free(s: &str, holds: impl Fn(&str) -> bool) -> SessionId {
    let free = reuse_candidates(s).find(|id| !holds(id));
    free.unwrap_or_else(|| SessionId::from(s))
}

/// The IDs a new session `s` may take, in order: `s` itself, then `s~2`, `s~3`, … (the journals
/// give the first they do not hold).
pub fn reuse_candidates(s: &str) -> impl Iterator<Item = SessionId> + '_ {
    std::iter::once(SessionId::from(s))
        .chain((2u32..).map(move |n| SessionId::from(format!("{s}~{n}"))))
}

/// The question to the journals in flight, and what the journals said.
#[derive(Debug, Default)]
pub(super) struct ReusedIds {
    next_ask: u64,
    asking: Option<Question>,
    /// The journals' answer not used yet: the agent's ID, and the client-facing one it takes.
    /// One at most: a question is asked at a time, and its answer is used by the agent's line
    /// that named the session, handled again at once ([`ReusedIds::answered`]).
    answer: Option<(SessionId, SessionId)>,
}

/// A question to the journals, and the agent lines that wait for their answer.
#[derive(Debug)]
struct Question {
    ask: u64,
    /// The agent's ID for the new session.
    session: SessionId,
    /// The agent's answer to `session/new` that named the session.
    line: Bytes,
    /// The agent's lines since, in order.
    later: HeldLines,
}

impl ReusedIds {
    /// True while agent lines wait for the journals' answer.
    pub(super) fn asking(&self) -> bool {
        self.asking.is_some()
    }

    /// Hold an agent line behind the question: `None`, held; past `limit` bytes the question is
    /// given up (the agent's ID stands) and the lines go on: those that waited, then this one.
    pub(super) fn hold(&mut self, line: &Bytes, limit: usize) -> Option<Vec<Bytes>> {
        if (self.asking.as_mut()).is_some_and(|q| q.later.hold(line, limit)) {
            return None;
        }
        let waited = self.give_up().unwrap_or_default();
        Some(waited.into_iter().chain([line.clone()]).collect())
    }

    /// Ask the journals about the new session a successful answer to a client's `session/new`
    /// (`line`, described by `peek`) names, if it is one this run has not opened: the question
    /// goes out ([`Action::FindFreeId`]) and the line waits with it (true).
    pub(super) fn ask(
        &mut self,
        peek: &Peek<'_>,
        line: &Bytes,
        sessions: &SessionTable,
        fx: &mut Effects,
    ) -> bool {
        let Some(session) = envelope::str_field(peek.result, "sessionId").map(SessionId::from)
        else {
            return false;
        };
        if sessions.journal_open(&session)
            || self.answer.as_ref().is_some_and(|(a, _)| *a == session)
        {
            return false;
        }
        let ask = self.next_ask;
        self.next_ask += 1;
        self.asking = Some(Question {
            ask,
            session: session.clone(),
            line: line.clone(),
            later: HeldLines::default(),
        });
        fx.push(Action::FindFreeId { ask, session });
        true
    }

    /// The journals' answer to question `ask`: the first ID they do not hold (`None`: given up
    /// on, the agent's ID stands). Returns the lines that waited, the agent's answer first.
    pub(super) fn answered(&mut self, ask: u64, free: Option<SessionId>) -> Option<Vec<Bytes>> {
        let question = self.asking.take_if(|q| q.ask == ask)?;
        let session = question.session;
        self.answer = Some((session.clone(), free.unwrap_or(session)));
        let mut later = question.later;
        let mut lines = vec![question.line];
        lines.extend(later.take());
        Some(lines)
    }

    /// The client-facing ID the agent's new session `s` takes, when it is not `s` (the journals
    /// hold `s` from an earlier run).
    pub(super) fn fresh_id(&mut self, s: &str) -> Option<SessionId> {
        let (agent, client) = self.answer.take_if(|(agent, _)| &**agent == s)?;
        (agent != client).then_some(client)
    }

    /// The question in flight, if any, given up on (the agent is gone, or the lines waiting
    /// passed their bound): the agent's ID stands. Returns the lines that waited.
    pub(super) fn give_up(&mut self) -> Option<Vec<Bytes>> {
        let ask = self.asking.as_ref()?.ask;
        self.answered(ask, None)
    }
}
