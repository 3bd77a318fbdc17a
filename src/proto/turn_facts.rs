//! What the catalog learns with every turn (a session's first prompt, its state, its turns'
//! ends, its usage; its title and time from the agent's `session_info_update`, passed on at
//! once), the facts coalesced per session in the core until the shell takes them
//! ([`super::Proxy::take_turn_facts`], about once a second and before anything else is written
//! to the catalog or read from it). A turn thus costs a few field updates, not an action each,
//! and what waits is bounded by the sessions of the run.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use super::vocab::{Action, AgentRef, CatalogUpdate, SessionId};
use super::{Proxy, redact};
use crate::wire::envelope::{Name, Peek};

/// One session's facts not taken yet, each with the time (Unix microseconds) it was learned.
#[derive(Debug, Default)]
struct Facts {
    prompt: Option<(String, i64)>,
    usage: Option<(Members, i64)>,
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

    /// Usage the agent reported (`report`'s members but those named in `skip`): merged into
    /// what waits.
    pub(super) fn usage(&mut self, s: &SessionId, report: &Fields<'_>, skip: &[&str], t: i64) {
        let (usage, at) = self
            .of(s)
            .usage
            .get_or_insert_with(|| (Members::default(), t));
        usage.absorb(report, skip);
        *at = t;
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
                let (session, usage) = (session.clone(), usage.into_value());
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

/// The most members a [`Fields`] reads and a [`Members`] keeps (a hostile agent's object of a
/// million keys costs no more than this many).
const MEMBERS_LIMIT: usize = 64;

/// A JSON object's members as read, in order, borrowed from its text (no copy, no allocation
/// beyond the list): a `session/update`'s `update`, a usage report.
#[derive(Debug, Default)]
pub(super) struct Fields<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'a> Fields<'a> {
    fn parse(json: &'a str) -> Option<Fields<'a>> {
        serde_json::from_str(json).ok()
    }

    /// A member's raw value (the last of that name).
    fn get(&self, name: &str) -> Option<&'a RawValue> {
        let (_, value) = self.0.iter().rev().find(|(member, _)| member == name)?;
        Some(*value)
    }

    /// A member's text, when it is a string.
    fn text(&self, name: &str) -> Option<String> {
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

impl Proxy {
    /// The first prompt of session `s` in this run (at `t`): its title for the catalog.
    pub(super) fn catalog_prompt(&mut self, s: &SessionId, peek: &Peek<'_>, t: i64) {
        let Some(params) = peek
            .params
            .and_then(|p| serde_json::from_str::<serde_json::Value>(p.get()).ok())
        else {
            return;
        };
        let Some(title) = crate::acp::prompt_title(&params["prompt"]) else {
            return;
        };
        let title = self.redacted(title);
        self.facts.prompt(s, title, t);
    }

    /// Text for the catalog, its token-shaped parts redacted as configured.
    pub(super) fn redacted(&self, text: String) -> String {
        match redact::redact_tokens(text.as_bytes()).filter(|_| self.config.redact) {
            Some(redacted) => String::from_utf8_lossy(&redacted).into_owned(),
            None => text,
        }
    }

    /// A response (at `t`) in session `s` to a `method` request: a prompt's ends the turn
    /// (with the usage it reports), the answer to a permission or elicitation request lets it
    /// run on.
    pub(super) fn catalog_turn(&mut self, s: &SessionId, method: &str, peek: &Peek<'_>, t: i64) {
        match method {
            // A v2 answer only says the prompt was taken: its `state_update` ends the turn.
            "session/prompt" if self.agent.v2 => {}
            "session/prompt" => {
                self.facts.turn_ended(s, t);
                self.facts.state(s, "idle", t);
                #[derive(serde::Deserialize)]
                struct Answer<'a> {
                    #[serde(borrow)]
                    usage: Option<Fields<'a>>,
                }
                if let Some(usage) = peek
                    .result
                    .filter(|r| r.get().contains("\"usage\""))
                    .and_then(|r| serde_json::from_str::<Answer<'_>>(r.get()).ok())
                    .and_then(|a| a.usage)
                {
                    self.facts.usage(s, &usage, &[], t);
                }
            }
            "session/request_permission" | "elicitation/create" => {
                self.facts.state(s, "running", t);
            }
            _ => {}
        }
    }

    /// What the catalog learned with the turns since the last call (coalesced per session,
    /// each with its time): take it about once a second, and before anything else is written
    /// to the catalog or read from it.
    pub fn take_turn_facts(&mut self) -> Vec<(CatalogUpdate, i64)> {
        self.facts.take()
    }

    /// A `usage_update` (token counts, cost) or `session_info_update` (title, time) passed
    /// through goes to the catalog.
    pub(super) fn catalog_update(&mut self, peek: &Peek<'_>, session: &str) {
        #[derive(serde::Deserialize)]
        struct Params<'a> {
            #[serde(borrow)]
            update: Fields<'a>,
        }
        let Some(Params { update }) = peek
            .params
            .and_then(|p| serde_json::from_str::<Params<'_>>(p.get()).ok())
        else {
            return;
        };
        let session = || self.sessions.client_of(AgentRef(session));
        match update.text("sessionUpdate").as_deref() {
            Some("usage_update") => {
                let session = session();
                let skip = ["sessionUpdate", "_meta"];
                self.facts.usage(&session, &update, &skip, self.unix_now);
            }
            Some("session_info_update") => {
                let session = session();
                self.fx.push(Action::Catalog(CatalogUpdate::Info {
                    session,
                    title: update.text("title"),
                    updated_at: update.text("updatedAt"),
                }));
            }
            Some("state_update") => {
                let session = session();
                self.state_update(&session, &update);
            }
            _ => {}
        }
    }

    /// A v2 `state_update`: the session's state, for the catalog and for an agent that dies
    /// while busy; an `idle` one with a `stopReason` ends a turn (with its `usage`, when
    /// given).
    fn state_update(&mut self, session: &SessionId, update: &Fields<'_>) {
        let t = self.unix_now;
        let state = match update.text("state").as_deref() {
            Some("idle") => "idle",
            Some("running") => "running",
            Some("requires_action") => "requires_action",
            _ => return,
        };
        let ends_turn = state == "idle" && update.text("stopReason").is_some();
        self.sessions.set_foreground(session, state != "idle");
        if state == "idle" {
            self.sessions.end_prompt(session, None);
        }
        self.facts.state(session, state, t);
        if ends_turn {
            self.facts.turn_ended(session, t);
            if let Some(usage) = update.get("usage").and_then(|raw| Fields::parse(raw.get())) {
                self.facts.usage(session, &usage, &[], t);
            }
        }
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
            let usage = json!({"used": turn, "size": 9}).to_string();
            facts.usage(&s, &Fields::parse(&usage).unwrap(), &[], turn * 2);
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

    #[test]
    fn usage_reports_merge_by_member_in_first_seen_order_and_stay_bounded() {
        let mut facts = TurnFacts::default();
        let s = SessionId::from("S");
        let mut report = |json: &str, t| facts.usage(&s, &Fields::parse(json).unwrap(), &[], t);
        report(r#"{"used":1,"size":9,"cost":{"amount":0.5}}"#, 1);
        report(r#"{"size":10,"used":2,"extra":[1]}"#, 2);
        let hostile: Vec<String> = (0..1000).map(|n| format!(r#""k{n}":{n}"#)).collect();
        report(&format!("{{{}}}", hostile.join(",")), 3);
        let [(CatalogUpdate::Usage { usage, .. }, 3)] = &facts.take()[..] else {
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
