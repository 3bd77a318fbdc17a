//! What the catalog learns with every turn (a session's first prompt, its state, its turns'
//! ends, its usage; its title and time from the agent's `session_info_update`, passed on at
//! once), the facts coalesced in each session ([`Facts`], the session's own:
//! [`super::sessions::SessionTable::facts`]) until they leave as one
//! [`super::Action::TurnFacts`] (about once a second, [`super::Proxy::handle_facts_due`], and
//! before anything else is written to the catalog or read from it). What a session's own
//! requests and their answers teach is learned here ([`Facts::request`], [`Facts::answer`]);
//! what the agent's notifications teach, [`super::update_facts`]'s. A turn thus costs a few field
//! updates, not an action each, and what waits is bounded by the sessions of the run.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use super::vocab::{CatalogUpdate, SessionId};
use crate::redact;
use crate::wire::Side;
use crate::wire::envelope::{Name, Raw};

/// The state a request of `from` (`method`) sets its session in, if it teaches anything: a
/// prompt sets it running, the agent's permission or elicitation request makes it wait for
/// the client ([`Facts::request`]).
pub(super) fn state_of_request(from: Side, method: &str) -> Option<&'static str> {
    match (from, method) {
        (Side::Client, "session/prompt") => Some("running"),
        (Side::Agent, "session/request_permission" | "elicitation/create") => {
            Some("requires_action")
        }
        _ => None,
    }
}

/// The method of a request whose answer teaches its session anything, as [`Facts::answer`]
/// takes it; none when it teaches nothing (`v2`: the agent speaks ACP v2, whose answer to a
/// prompt only says the prompt was taken: its `state_update` ends the turn).
pub(super) fn answer_teaches(method: &str, v2: bool) -> Option<&'static str> {
    match method {
        "session/prompt" if !v2 => Some("session/prompt"),
        "session/request_permission" => Some("session/request_permission"),
        "elicitation/create" => Some("elicitation/create"),
        _ => None,
    }
}

/// One session's facts not taken yet, each with the time (Unix microseconds) it was learned,
/// and whether the client prompted it in this run (its first prompt names it).
#[derive(Debug, Default)]
pub(super) struct Facts {
    prompt: Option<(String, i64)>,
    usage: Option<(Members, i64)>,
    turns: Option<(u64, i64)>,
    state: Option<(&'static str, i64)>,
    prompted: bool,
}

impl Facts {
    /// A request in the session that sets it in `state` ([`state_of_request`]), at `t`: the
    /// client's first prompt of the run (`prompt`: the request's `params`) also names it, its
    /// title's token-shaped parts redacted when `redact`.
    pub(super) fn request(
        &mut self,
        state: &'static str,
        prompt: Option<Raw<'_>>,
        redact: bool,
        t: i64,
    ) {
        self.state(state, t);
        if state != "running" || std::mem::replace(&mut self.prompted, true) {
            return;
        }
        let Some(params) = prompt.and_then(|p| serde_json::from_str::<Value>(p.get()).ok()) else {
            return;
        };
        if let Some(title) = crate::acp::prompt_title(&params["prompt"]) {
            self.prompt(redact::redact_text(title, redact), t);
        }
    }

    /// The answer (`result`, at `t`) to a `method` request of the session that teaches
    /// ([`answer_teaches`]): a prompt's ends the turn (with the usage it reports), the answer
    /// to a permission or elicitation request lets it run on.
    pub(super) fn answer(&mut self, method: &str, result: Option<Raw<'_>>, t: i64) {
        if method != "session/prompt" {
            self.state("running", t);
            return;
        }
        self.turn_ended(t);
        self.state("idle", t);
        #[derive(serde::Deserialize)]
        struct Answer<'a> {
            #[serde(borrow)]
            usage: Option<Fields<'a>>,
        }
        if let Some(usage) = result
            .filter(|r| r.get().contains("\"usage\""))
            .and_then(|r| serde_json::from_str::<Answer<'_>>(r.get()).ok())
            .and_then(|a| a.usage)
        {
            self.usage(&usage, &[], t);
        }
    }

    /// The session's first prompt in this run (the first one kept).
    pub(super) fn prompt(&mut self, title: String, t: i64) {
        self.prompt.get_or_insert((title, t));
    }

    /// The session's state now.
    pub(super) fn state(&mut self, state: &'static str, t: i64) {
        self.state = Some((state, t));
    }

    /// A turn of the session ended.
    pub(super) fn turn_ended(&mut self, t: i64) {
        self.turns = Some((self.turns.map_or(0, |(n, _)| n) + 1, t));
    }

    /// Usage the agent reported (`report`'s members but those named in `skip`): merged into
    /// what waits.
    pub(super) fn usage(&mut self, report: &Fields<'_>, skip: &[&str], t: i64) {
        let (usage, at) = self.usage.get_or_insert_with(|| (Members::default(), t));
        usage.absorb(report, skip);
        *at = t;
    }

    /// What waits, taken out as catalog updates of `session` with their times: its first
    /// prompt, usage, turn ends and state, in that order.
    pub(super) fn take(&mut self, session: &SessionId, out: &mut Vec<(CatalogUpdate, i64)>) {
        let (prompt, usage) = (self.prompt.take(), self.usage.take());
        let (turns, state) = (self.turns.take(), self.state.take());
        let session = || session.clone();
        let updates = [
            prompt.map(|(title, t)| {
                let session = session();
                (CatalogUpdate::Prompt { session, title }, t)
            }),
            usage.map(|(usage, t)| {
                let (session, usage) = (session(), usage.into_value());
                (CatalogUpdate::Usage { session, usage }, t)
            }),
            turns.map(|(turns, t)| {
                let session = session();
                (CatalogUpdate::TurnEnded { session, turns }, t)
            }),
            state.map(|(state, t)| {
                let session = session();
                (CatalogUpdate::State { session, state }, t)
            }),
        ];
        out.extend(updates.into_iter().flatten());
    }
}

/// The most members a [`Fields`] reads and a [`Members`] keeps (a hostile agent's object of a
/// million keys costs no more than this many).
const MEMBERS_LIMIT: usize = 64;

/// A JSON object's members as read, in order, borrowed from its text (no copy, no allocation
/// beyond the list): a `session/update`'s `update`, a usage report.
#[derive(Debug, Default)]
pub(super) struct Fields<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'a> Fields<'a> {
    pub(super) fn parse(json: &'a str) -> Option<Fields<'a>> {
        serde_json::from_str(json).ok()
    }

    /// A member's raw value (the last of that name).
    pub(super) fn get(&self, name: &str) -> Option<&'a RawValue> {
        let (_, value) = self.0.iter().rev().find(|(member, _)| member == name)?;
        Some(*value)
    }

    /// A member's text, when it is a string.
    pub(super) fn text(&self, name: &str) -> Option<String> {
        serde_json::from_str(self.get(name)?.get()).ok()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Fields<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Fields<'a>, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for Visit<'a> {
            type Value = Fields<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields<'a>, A::Error> {
                let mut fields = Vec::new();
                while let Some(Name(name)) = map.next_key::<Name<'de>>()? {
                    if fields.len() < MEMBERS_LIMIT {
                        fields.push((name, map.next_value::<&'de RawValue>()?));
                    } else {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
                Ok(Fields(fields))
            }
        }
        deserializer.deserialize_map(Visit(std::marker::PhantomData))
    }
}

/// A usage report as the catalog will take it: members in the order first seen, each value
/// kept raw and parsed once, when taken; a later report's members replace the earlier ones of
/// the same name (a value that did not change is not copied again).
#[derive(Debug, Default)]
pub(super) struct Members(Vec<(String, Box<RawValue>)>);

impl Members {
    /// Take in a report's members, but those named in `skip`.
    fn absorb(&mut self, report: &Fields<'_>, skip: &[&str]) {
        for (name, value) in &report.0 {
            if skip.contains(&name.as_ref()) {
                continue;
            }
            match self.0.iter().position(|(old, _)| old == name) {
                Some(at) if self.0[at].1.get() == value.get() => {}
                Some(at) => self.0[at].1 = (*value).to_owned(),
                None if self.0.len() < MEMBERS_LIMIT => {
                    self.0.push((name.to_string(), (*value).to_owned()));
                }
                None => {}
            }
        }
    }

    fn into_value(self) -> Value {
        let members = self.0.into_iter();
        Value::Object(
            members
                .filter_map(|(name, raw)| Some((name, serde_json::from_str(raw.get()).ok()?)))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// What waits in `facts`, taken as `s`'s.
    fn take(facts: &mut Facts, s: &SessionId) -> Vec<(CatalogUpdate, i64)> {
        let mut out = Vec::new();
        facts.take(s, &mut out);
        out
    }

    #[test]
    fn a_thousand_turns_are_four_facts_with_every_turn_counted_and_usage_merged() {
        let mut facts = Facts::default();
        let s = SessionId::from("S");
        facts.prompt("first".into(), 1);
        for turn in 0..1000 {
            facts.state("running", turn * 2);
            facts.prompt("later".into(), turn * 2);
            let usage = json!({"used": turn, "size": 9}).to_string();
            facts.usage(&Fields::parse(&usage).unwrap(), &[], turn * 2);
            facts.turn_ended(turn * 2 + 1);
            facts.state("idle", turn * 2 + 1);
        }
        assert_eq!(
            take(&mut facts, &s),
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
                        session: s.clone(),
                        state: "idle"
                    },
                    1999
                ),
            ]
        );
        assert!(take(&mut facts, &s).is_empty(), "taken");
    }

    #[test]
    fn usage_reports_merge_by_member_in_first_seen_order_and_stay_bounded() {
        let mut facts = Facts::default();
        let s = SessionId::from("S");
        let mut report = |json: &str, t| facts.usage(&Fields::parse(json).unwrap(), &[], t);
        report(r#"{"used":1,"size":9,"cost":{"amount":0.5}}"#, 1);
        report(r#"{"size":10,"used":2,"extra":[1]}"#, 2);
        let hostile: Vec<String> = (0..1000).map(|n| format!(r#""k{n}":{n}"#)).collect();
        report(&format!("{{{}}}", hostile.join(",")), 3);
        let [(CatalogUpdate::Usage { usage, .. }, 3)] = &take(&mut facts, &s)[..] else {
            panic!("one usage fact");
        };
        let Value::Object(members) = usage else {
            panic!("an object")
        };
        assert_eq!(members.len(), MEMBERS_LIMIT);
        let names: Vec<&str> = members.keys().take(5).map(String::as_str).collect();
        assert_eq!(names, ["used", "size", "cost", "extra", "k0"]);
        assert_eq!(members["used"], json!(2));
        assert_eq!(members["cost"], json!({"amount": 0.5}));
    }
}
