//! What the catalog learns from the agent's notifications passing through: `usage_update`,
//! `session_info_update` and (v2) `state_update`; and that what it learned goes before anything
//! else written to it or read from it ([`facts_before`]). The facts gather in each session's
//! [`super::turn_facts::Facts`] until the shell takes them (what a session's own requests and
//! their answers teach is the facts' own learning).

use super::context::Cx;
use super::effects::Effects;
use super::sessions::SessionMut;
use super::turn_facts::Fields;
use super::vocab::{Action, CatalogUpdate, SessionId};
use crate::wire::envelope::Peek;

/// What an agent's `session/update` passing through teaches the catalog, read from its
/// params ([`UpdateFact::of`]).
pub(super) enum UpdateFact<'a> {
    /// A `usage_update`: token counts, cost (the session's facts).
    Usage(Fields<'a>),
    /// A `session_info_update`: title and time (the catalog's, told at once). `reprime`: the
    /// agent made the title of a re-prime (its first prompt): that title is not the
    /// session's, and is not passed on either.
    Info {
        title: Option<String>,
        updated_at: Option<String>,
        reprime: bool,
    },
    /// A v2 `state_update`: the session's state (for the catalog, and for an agent that dies
    /// while busy); an `idle` one with a `stopReason` ends a turn (`ends_turn`), with its
    /// `usage` when given.
    State {
        state: &'static str,
        ends_turn: bool,
        usage: Option<Fields<'a>>,
    },
}

impl<'a> UpdateFact<'a> {
    /// What the update `peek` carries teaches, if anything.
    pub(super) fn of(peek: &Peek<'a>) -> Option<UpdateFact<'a>> {
        #[derive(serde::Deserialize)]
        struct Params<'a> {
            #[serde(borrow)]
            update: Fields<'a>,
        }
        let Params { update } = serde_json::from_str::<Params<'a>>(peek.params?.get()).ok()?;
        match update.text("sessionUpdate").as_deref()? {
            "usage_update" => Some(UpdateFact::Usage(update)),
            "session_info_update" => {
                let title = update.text("title");
                let reprime = title.as_deref().is_some_and(crate::acp::is_reprime_title);
                Some(UpdateFact::Info {
                    title: title.filter(|_| !reprime),
                    updated_at: update.text("updatedAt"),
                    reprime,
                })
            }
            "state_update" => {
                let state = match update.text("state").as_deref()? {
                    "idle" => "idle",
                    "running" => "running",
                    "requires_action" => "requires_action",
                    _ => return None,
                };
                Some(UpdateFact::State {
                    state,
                    ends_turn: state == "idle" && update.text("stopReason").is_some(),
                    usage: update.get("usage").and_then(|raw| Fields::parse(raw.get())),
                })
            }
            _ => None,
        }
    }

    /// True when the session's own state learns it (its facts, its turn), not only the
    /// catalog.
    pub(super) fn is_the_session_s(&self) -> bool {
        !matches!(self, UpdateFact::Info { .. })
    }
}

/// What the client-facing `session` learnt of an update passed through, when only the catalog
/// learns it ([`UpdateFact::is_the_session_s`] false: a `session_info_update`). True when its
/// title is a re-prime's.
pub(super) fn tell(cx: &mut Cx, session: SessionId, learnt: UpdateFact<'_>) -> bool {
    let UpdateFact::Info {
        title,
        updated_at,
        reprime,
    } = learnt
    else {
        return false;
    };
    cx.fx().push(Action::Catalog(CatalogUpdate::Info {
        session,
        title,
        updated_at,
    }));
    reprime
}

/// What `session` (the client-facing one; `found`, for a state update: the table had it
/// before the update) learns of an update passed through that is its own ([`UpdateFact::is_the_session_s`]).
pub(super) fn learn(cx: &Cx, mut session: SessionMut<'_>, found: bool, learnt: UpdateFact<'_>) {
    let t = cx.now().unix_us;
    match learnt {
        UpdateFact::Usage(update) => {
            let skip = ["sessionUpdate", "_meta"];
            session.facts().usage(&update, &skip, t);
        }
        UpdateFact::State {
            state,
            ends_turn,
            usage,
        } => {
            if found {
                session.set_foreground(state != "idle");
                if state == "idle" {
                    session.end_prompt(None);
                }
            }
            let facts = session.facts();
            facts.state(state, t);
            if ends_turn {
                facts.turn_ended(t);
                if let Some(usage) = usage {
                    facts.usage(&usage, &[], t);
                }
            }
        }
        UpdateFact::Info { .. } => {}
    }
}

/// `action`, which reads or writes the catalog ([`Action::FetchSessions`],
/// [`Action::Catalog`]), unless facts wait (`facts`, taken from the sessions): then the facts
/// go first ([`Action::TurnFacts`]) and `action` right after them (at the front of the output
/// queue, `fx`).
pub(super) fn facts_before(
    facts: Vec<(CatalogUpdate, i64)>,
    fx: &mut Effects,
    action: Action,
) -> Action {
    if facts.is_empty() {
        return action;
    }
    fx.push_front(action);
    Action::TurnFacts(facts)
}
