//! Which of this host's agent-side sessions knows every turn of a session: the journal
//! decides what the agent must know.
//!
//! An agent that keeps sessions (`loadSession`, `session/resume`) keeps a copy of each on its
//! machine, under the agent-side ID it ran it under. The journal records, in the shared
//! session's order, every prompt turn and the agent-side session it ran on: a segment's turns
//! run on the session's own ID at the agent until a `session_mapped` event names another
//! (the proxy resumed or made one), a `reprimed` event tells an agent-side session every turn
//! before it (the re-prime transcript), and a `forked_from` or `bundle_manifest` event starts
//! history copied from elsewhere, which no agent-side session ran. An agent-side session first
//! named in the journal is a new one: it knows no turn before it.
//!
//! [`Copies`] follows that over the records (pure: the replay feeds it), keeping for each
//! agent-side session of this host (the segments this journal directory wrote; another host's
//! run on its own agent's copies) and of which agent ([`AgentId`]) how many of the journal's
//! turns it holds from the first on. [`Copies::verdict`] then says which one a load may
//! resume: one of this agent's that holds every turn, whatever the host, the hops, the
//! restarts between them or which machine made the last turn; when none does, the session is
//! brought up afresh and re-primed.

use super::super::vocab::AgentCopy;
use super::tail::is_prompt_of;
use crate::acp::AgentId;
use crate::journal::Event;
use crate::journal::format::{Body, Record};
use crate::wire::Side;

/// One agent-side session of this host.
#[derive(Debug)]
struct Copy {
    agent: AgentId,
    session: String,
    /// It holds the journal's turns 1 to `knows` (and perhaps some after a turn it missed).
    knows: u64,
    /// When it was last used (the order of the records).
    used: u64,
}

/// The agent-side sessions of this host, followed over a session's records in order.
#[derive(Debug, Default)]
pub(super) struct Copies {
    /// The journal's prompt turns so far.
    turns: u64,
    /// The current segment: its agent, when this host wrote it.
    local: Option<AgentId>,
    /// The agent-side session the current segment's turns run on (an index in `copies`).
    current: Option<usize>,
    copies: Vec<Copy>,
    /// Events seen, for `used`.
    clock: u64,
}

impl Copies {
    /// The agent-side session `session` of `agent`, made when first named: it knows no turn.
    fn copy(&mut self, agent: &AgentId, session: &str) -> usize {
        self.clock += 1;
        let found = self
            .copies
            .iter()
            .position(|c| c.session == session && c.agent.is(agent));
        let i = found.unwrap_or_else(|| {
            self.copies.push(Copy {
                agent: agent.clone(),
                session: session.to_string(),
                knows: 0,
                used: 0,
            });
            self.copies.len() - 1
        });
        self.copies[i].used = self.clock;
        i
    }

    /// A segment of session `session` begins, recorded with `agent`; `local`: this host wrote
    /// it. Its turns run on `session` at the agent until a mapping says otherwise.
    pub(super) fn segment(&mut self, session: &str, agent: AgentId, local: bool) {
        self.current = None;
        self.local = local.then_some(agent);
        if let Some(agent) = self.local.clone() {
            self.current = Some(self.copy(&agent, session));
        }
    }

    /// From here on the segment's turns run on agent-side session `agent_session`.
    pub(super) fn mapped(&mut self, agent_session: &str) {
        if let Some(agent) = self.local.clone() {
            self.current = Some(self.copy(&agent, agent_session));
        }
    }

    /// The current agent-side session was told every turn so far (a re-prime).
    pub(super) fn reprimed(&mut self) {
        if let Some(i) = self.current {
            self.copies[i].knows = self.turns;
        }
    }

    /// What follows in the segment was copied from another session's journal (a fork, a
    /// bundle): no agent-side session of this session ran it.
    pub(super) fn copied(&mut self) {
        self.copies.clear();
        self.local = None;
        self.current = None;
    }

    /// A prompt turn of the session, on the current agent-side session.
    pub(super) fn prompt(&mut self) {
        if let Some(i) = self.current {
            let copy = &mut self.copies[i];
            if copy.knows == self.turns {
                copy.knows += 1;
            }
            self.clock += 1;
            copy.used = self.clock;
        }
        self.turns += 1;
    }

    /// What `record` (of session `session`) says of the agent-side sessions the turns ran on.
    pub(super) fn follow(&mut self, session: &str, record: &Record) {
        match &record.body {
            Body::Event(Event::SessionMapped { agent_session }) => self.mapped(agent_session),
            Body::Event(Event::Reprimed { .. }) => self.reprimed(),
            Body::Event(Event::ForkedFrom { .. } | Event::BundleManifest { .. }) => self.copied(),
            Body::Message {
                from: Side::Client,
                payload,
            } if is_prompt_of(session, &payload.bytes) => self.prompt(),
            _ => {}
        }
    }

    /// What `agent` (this run's) holds of the session on this host: the agent-side session of
    /// its that holds every turn (the one used last, should there be several), else how many
    /// turns the most knowing of its agent-side sessions holds.
    pub(super) fn verdict(&self, agent: &AgentId) -> AgentCopy {
        let mine = || self.copies.iter().filter(|c| c.agent.is(agent));
        let whole = mine()
            .filter(|c| c.knows == self.turns)
            .max_by_key(|c| c.used);
        if let Some(copy) = whole {
            return AgentCopy::Whole(copy.session.clone());
        }
        match mine().map(|c| c.knows).max() {
            Some(known) => AgentCopy::Behind {
                known,
                turns: self.turns,
            },
            None => AgentCopy::Absent { turns: self.turns },
        }
    }
}

#[cfg(test)]
mod tests {
    //! Hop sequences: the records each host's journal holds of one session, read as a load on
    //! one of them reads them.
    use super::*;

    fn claude() -> AgentId {
        AgentId {
            name: Some("@agentclientprotocol/claude-agent-acp".into()),
            version: Some("0.101.0".into()),
            command: Some("npx @agentclientprotocol/claude-agent-acp".into()),
        }
    }

    fn codex() -> AgentId {
        AgentId {
            name: Some("codex-acp".into()),
            version: Some("2.6.0".into()),
            command: Some("npx @agentclientprotocol/codex-acp".into()),
        }
    }

    /// What a segment of a hop holds.
    #[derive(Clone, Copy)]
    enum Seg {
        /// Started by the client's `session/new`: `turns` turns on the session's own ID.
        New { turns: u64 },
        /// A load brought the session up on a new agent-side session, re-primed at its first
        /// prompt (when the journal had turns); then `turns` turns.
        Fresh { id: &'static str, turns: u64 },
        /// A load resumed agent-side session `id` (mapped when it is not the session's own);
        /// then `turns` turns.
        Resumed { id: &'static str, turns: u64 },
        /// A load with no prompt after it (the client closed): a new agent-side session made,
        /// never told the turns.
        Unprompted { id: &'static str },
    }

    /// Follow a session's segments in the shared order, each written by `host` with `agent`,
    /// as `reader` (a host) reads them.
    fn read(reader: &str, segments: &[(&str, AgentId, Seg)]) -> Copies {
        let mut copies = Copies::default();
        for (host, agent, seg) in segments {
            copies.segment("S", agent.clone(), *host == reader);
            match *seg {
                Seg::New { turns } => (0..turns).for_each(|_| copies.prompt()),
                Seg::Fresh { id, turns } => {
                    copies.mapped(id);
                    if turns > 0 {
                        copies.reprimed();
                    }
                    (0..turns).for_each(|_| copies.prompt());
                }
                Seg::Resumed { id, turns } => {
                    if id != "S" {
                        copies.mapped(id);
                    }
                    (0..turns).for_each(|_| copies.prompt());
                }
                Seg::Unprompted { id } => copies.mapped(id),
            }
        }
        copies
    }

    /// Play hops: each on a host, loading the session as the proxy decides (the verdict on
    /// that host's reading of the journal so far) and running one turn; returns the verdict
    /// each hop acted on.
    fn hops(sequence: &[&str], agent: &AgentId) -> Vec<AgentCopy> {
        let ids = [
            "U1", "U2", "U3", "U4", "U5", "U6", "U7", "U8", "U9", "U10", "U11", "U12",
        ];
        let mut segments: Vec<(&str, AgentId, Seg)> = Vec::new();
        let mut verdicts = Vec::new();
        for (i, host) in sequence.iter().enumerate() {
            if i == 0 {
                segments.push((host, agent.clone(), Seg::New { turns: 1 }));
                verdicts.push(AgentCopy::Absent { turns: 0 });
                continue;
            }
            let verdict = read(host, &segments).verdict(agent);
            let seg = match &verdict {
                AgentCopy::Whole(id) => Seg::Resumed {
                    id: ids.iter().find(|u| **u == id).copied().unwrap_or("S"),
                    turns: 1,
                },
                _ => Seg::Fresh {
                    id: ids[i],
                    turns: 1,
                },
            };
            segments.push((host, agent.clone(), seg));
            verdicts.push(verdict);
        }
        verdicts
    }

    #[test]
    fn a_session_never_moved_resumes_its_own_agent_session() {
        let copies = read("A", &[("A", claude(), Seg::New { turns: 3 })]);
        assert_eq!(copies.verdict(&claude()), AgentCopy::Whole("S".into()));
        // A restart of the agent resumed it, then two more turns.
        let copies = read(
            "A",
            &[
                ("A", claude(), Seg::New { turns: 3 }),
                ("A", claude(), Seg::Resumed { id: "S", turns: 2 }),
            ],
        );
        assert_eq!(copies.verdict(&claude()), AgentCopy::Whole("S".into()));
    }

    #[test]
    fn a_second_return_resumes_the_agent_session_that_holds_every_turn() {
        // Issue 51: A, B, A; then A again. A's own ID holds turn 1 only; the re-primed U3
        // holds all three.
        let segments = [
            ("A", claude(), Seg::New { turns: 1 }),
            ("B", claude(), Seg::Fresh { id: "U2", turns: 1 }),
            ("A", claude(), Seg::Fresh { id: "U3", turns: 1 }),
        ];
        let copies = read("A", &segments);
        assert_eq!(copies.verdict(&claude()), AgentCopy::Whole("U3".into()));
        // B's U2 holds turns 1 and 2 of 3: behind.
        let copies = read("B", &segments);
        assert_eq!(
            copies.verdict(&claude()),
            AgentCopy::Behind { known: 2, turns: 3 }
        );
    }

    #[test]
    fn every_hop_of_every_sequence_acts_on_an_agent_session_holding_every_turn_or_reprimes() {
        // Every sequence of up to 7 hops over three hosts: at each hop the verdict is
        // checked against the truth (replaying what each agent-side session was told).
        let hosts = ["A", "B", "C"];
        for len in 1..=7u32 {
            for n in 0..3usize.pow(len) {
                let sequence: Vec<&str> =
                    (0..len).map(|i| hosts[(n / 3usize.pow(i)) % 3]).collect();
                let verdicts = hops(&sequence, &claude());
                for (i, verdict) in verdicts.iter().enumerate().skip(1) {
                    // The previous hop's host is the only one whose agent-side session of
                    // the last turn is whole; a host's copy is whole only if it ran the last
                    // turn.
                    let expect_whole = sequence[i] == sequence[i - 1];
                    assert_eq!(
                        matches!(verdict, AgentCopy::Whole(_)),
                        expect_whole,
                        "{sequence:?} hop {i}: {verdict:?}"
                    );
                    if let AgentCopy::Behind { turns, .. } | AgentCopy::Absent { turns } = verdict {
                        assert_eq!(*turns as usize, i, "{sequence:?} hop {i}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_same_host_again_resumes_whichever_agent_session_ran_the_last_turn() {
        // A, B, A, B, then B again (the scripted run): B's U4 holds all four.
        let verdicts = hops(&["A", "B", "A", "B", "B"], &claude());
        assert_eq!(verdicts[4], AgentCopy::Whole("U4".into()));
        // A, A, A: the session's own ID throughout.
        let verdicts = hops(&["A", "A", "A"], &claude());
        assert_eq!(verdicts[1], AgentCopy::Whole("S".into()));
        assert_eq!(verdicts[2], AgentCopy::Whole("S".into()));
    }

    #[test]
    fn an_agent_session_made_but_never_told_the_turns_is_not_resumed() {
        // A load on A made U2 and the client closed before prompting: U2 knows nothing.
        let copies = read(
            "A",
            &[
                ("A", claude(), Seg::New { turns: 2 }),
                ("B", claude(), Seg::Fresh { id: "U1", turns: 1 }),
                ("A", claude(), Seg::Unprompted { id: "U2" }),
            ],
        );
        assert_eq!(
            copies.verdict(&claude()),
            AgentCopy::Behind { known: 2, turns: 3 }
        );
    }

    #[test]
    fn another_agents_sessions_are_not_this_agents() {
        // Recorded with claude, continued in codex on the same host, back in claude.
        let segments = [
            ("A", claude(), Seg::New { turns: 2 }),
            ("A", codex(), Seg::Fresh { id: "X", turns: 1 }),
        ];
        let copies = read("A", &segments);
        assert_eq!(
            copies.verdict(&claude()),
            AgentCopy::Behind { known: 2, turns: 3 }
        );
        assert_eq!(copies.verdict(&codex()), AgentCopy::Whole("X".into()));
        // An upgraded claude is the same agent, whatever its command.
        let upgraded = AgentId {
            version: Some("0.102.0".into()),
            command: Some("/usr/local/bin/claude-agent-acp".into()),
            ..claude()
        };
        assert_eq!(
            read("A", &[("A", claude(), Seg::New { turns: 2 })]).verdict(&upgraded),
            AgentCopy::Whole("S".into())
        );
    }

    #[test]
    fn a_host_that_never_had_the_session_has_no_agent_session_of_it() {
        let copies = read("B", &[("A", claude(), Seg::New { turns: 2 })]);
        assert_eq!(copies.verdict(&claude()), AgentCopy::Absent { turns: 2 });
    }

    #[test]
    fn a_forks_copied_history_is_no_agent_sessions() {
        let mut copies = Copies::default();
        copies.segment("F", claude(), true);
        copies.copied();
        copies.prompt();
        copies.prompt();
        assert_eq!(copies.verdict(&claude()), AgentCopy::Absent { turns: 2 });
        // Its next segment on the fork's own ID: new at the agent, it knows none of them.
        copies.segment("F", claude(), true);
        assert_eq!(
            copies.verdict(&claude()),
            AgentCopy::Behind { known: 0, turns: 2 }
        );
    }

    #[test]
    fn a_turn_an_agent_session_missed_keeps_it_behind_until_it_is_reprimed() {
        // The old proxy resumed A's own ID after B's turn (what issue 51 found): it missed
        // turn 2, and holds turn 3 without it.
        let mut copies = read(
            "A",
            &[
                ("A", claude(), Seg::New { turns: 1 }),
                ("B", claude(), Seg::Fresh { id: "U1", turns: 1 }),
                ("A", claude(), Seg::Resumed { id: "S", turns: 1 }),
            ],
        );
        assert_eq!(
            copies.verdict(&claude()),
            AgentCopy::Behind { known: 1, turns: 3 }
        );
        copies.reprimed();
        assert_eq!(copies.verdict(&claude()), AgentCopy::Whole("S".into()));
    }
}
