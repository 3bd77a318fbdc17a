//! What the catalog learns with every turn (a session's first prompt, its state, its turns'
//! ends, its usage), coalesced per session in the core until the shell takes it
//! ([`super::Proxy::take_turn_facts`], about once a second and before anything else is written
//! to the catalog or read from it). A turn thus costs a few field updates, not an action each,
//! and what waits is bounded by the sessions of the run.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{CatalogUpdate, SessionId};

/// One session's facts not taken yet, each with the time (Unix microseconds) it was learned.
#[derive(Debug, Default)]
struct Facts {
    prompt: Option<(String, i64)>,
    usage: Option<(Map<String, Value>, i64)>,
    turns: Option<(u64, i64)>,
    state: Option<(&'static str, i64)>,
}

/// The facts of every session, until taken.
#[derive(Debug, Default)]
pub(super) struct TurnFacts {
    by_session: BTreeMap<SessionId, Facts>,
}

impl TurnFacts {
    fn of(&mut self, s: &SessionId) -> &mut Facts {
        if !self.by_session.contains_key(s) {
            self.by_session.insert(s.clone(), Facts::default());
        }
        self.by_session.get_mut(s).expect("inserted above")
    }

    /// The session's first prompt in this run (the first one kept).
    pub(super) fn prompt(&mut self, s: &SessionId, title: String, t: i64) {
        self.of(s).prompt.get_or_insert((title, t));
    }

    /// The session's state now.
    pub(super) fn state(&mut self, s: &SessionId, state: &'static str, t: i64) {
        self.of(s).state = Some((state, t));
    }

    /// A turn of the session ended.
    pub(super) fn turn_ended(&mut self, s: &SessionId, t: i64) {
        let turns = &mut self.of(s).turns;
        *turns = Some((turns.map_or(0, |(n, _)| n) + 1, t));
    }

    /// Usage the agent reported: merged into what waits.
    pub(super) fn usage(&mut self, s: &SessionId, usage: Map<String, Value>, t: i64) {
        match &mut self.of(s).usage {
            Some((old, at)) => {
                old.extend(usage);
                *at = t;
            }
            slot @ None => *slot = Some((usage, t)),
        }
    }

    /// Everything that waits, as catalog updates with their times: per session its first
    /// prompt, usage, turn ends and state, in that order.
    pub(super) fn take(&mut self) -> Vec<(CatalogUpdate, i64)> {
        let mut out = Vec::new();
        for (session, facts) in std::mem::take(&mut self.by_session) {
            if let Some((title, t)) = facts.prompt {
                let session = session.clone();
                out.push((CatalogUpdate::Prompt { session, title }, t));
            }
            if let Some((usage, t)) = facts.usage {
                let (session, usage) = (session.clone(), Value::Object(usage));
                out.push((CatalogUpdate::Usage { session, usage }, t));
            }
            if let Some((turns, t)) = facts.turns {
                let session = session.clone();
                out.push((CatalogUpdate::TurnEnded { session, turns }, t));
            }
            if let Some((state, t)) = facts.state {
                out.push((CatalogUpdate::State { session, state }, t));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_thousand_turns_are_four_facts_with_every_turn_counted_and_usage_merged() {
        let mut facts = TurnFacts::default();
        let s = SessionId::from("S");
        facts.prompt(&s, "first".into(), 1);
        for turn in 0..1000 {
            facts.state(&s, "running", turn * 2);
            facts.prompt(&s, "later".into(), turn * 2);
            let Value::Object(usage) = json!({"used": turn, "size": 9}) else {
                unreachable!()
            };
            facts.usage(&s, usage, turn * 2);
            facts.turn_ended(&s, turn * 2 + 1);
            facts.state(&s, "idle", turn * 2 + 1);
        }
        assert_eq!(
            facts.take(),
            [
                (
                    CatalogUpdate::Prompt {
                        session: s.clone(),
                        title: "first".into()
                    },
                    1
                ),
                (
                    CatalogUpdate::Usage {
                        session: s.clone(),
                        usage: json!({"used": 999, "size": 9})
                    },
                    1998
                ),
                (
                    CatalogUpdate::TurnEnded {
                        session: s.clone(),
                        turns: 1000
                    },
                    1999
                ),
                (
                    CatalogUpdate::State {
                        session: s,
                        state: "idle"
                    },
                    1999
                ),
            ]
        );
        assert!(facts.take().is_empty(), "taken");
    }
}
