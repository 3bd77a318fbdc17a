//! What the catalog learns from the agent's notifications passing through: `usage_update`,
//! `session_info_update` and (v2) `state_update`; and that what it learned goes before anything
//! else written to it or read from it ([`facts_before`]). The facts gather in each session's
//! [`super::turn_facts::Facts`] until the shell takes them (what a session's own requests and
//! their answers teach is the facts' own learning).

use super::context::Cx;
use super::effects::Effects;
use super::sessions::{SessionTable, Slot};
use super::turn_facts::Fields;
use super::vocab::{Action, AgentRef, CatalogUpdate, SessionId};
use crate::wire::envelope::Peek;

/// A `usage_update` (token counts, cost) or `session_info_update` (title, time) passed
/// through goes to the catalog. True when it is a `session_info_update` whose title the agent
/// made of a re-prime: that title is not the session's, and is not passed on either.
pub(super) fn update(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    peek: &Peek<'_>,
    session: &str,
    slot: Option<Slot>,
) -> bool {
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        #[serde(borrow)]
        update: Fields<'a>,
    }
    let Some(Params { update }) = peek
        .params
        .and_then(|p| serde_json::from_str::<Params<'_>>(p.get()).ok())
    else {
        return false;
    };
    // The client-facing session (in `slot` when it is the one the route found).
    let (session, slot) = sessions.client_of_at(AgentRef(session), slot);
    match update.text("sessionUpdate").as_deref() {
        Some("usage_update") => {
            let skip = ["sessionUpdate", "_meta"];
            let slot = slot.unwrap_or_else(|| sessions.made(&session));
            sessions.facts(slot).usage(&update, &skip, cx.now.unix_us);
        }
        Some("session_info_update") => {
            // A title an agent made of the re-prime (its first prompt) is not the session's.
            let title = update.text("title");
            let reprime = title.as_deref().is_some_and(crate::acp::is_reprime_title);
            cx.fx.push(Action::Catalog(CatalogUpdate::Info {
                session,
                title: title.filter(|_| !reprime),
                updated_at: update.text("updatedAt"),
            }));
            return reprime;
        }
        Some("state_update") => state_update(cx, sessions, &session, slot, &update),
        _ => {}
    }
    false
}

/// A v2 `state_update`: the session's state, for the catalog and for an agent that dies
/// while busy; an `idle` one with a `stopReason` ends a turn (with its `usage`, when
/// given).
fn state_update(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    session: &SessionId,
    slot: Option<Slot>,
    update: &Fields<'_>,
) {
    let t = cx.now.unix_us;
    let state = match update.text("state").as_deref() {
        Some("idle") => "idle",
        Some("running") => "running",
        Some("requires_action") => "requires_action",
        _ => return,
    };
    let ends_turn = state == "idle" && update.text("stopReason").is_some();
    // The session looked up once: made for its facts if the table has none.
    let found = slot.or_else(|| sessions.slot(session));
    if let Some(slot) = found {
        sessions[slot].set_foreground(state != "idle");
        if state == "idle" {
            sessions.end_prompt(slot, None);
        }
    }
    let slot = found.unwrap_or_else(|| sessions.made(session));
    let facts = sessions.facts(slot);
    facts.state(state, t);
    if ends_turn {
        facts.turn_ended(t);
        if let Some(usage) = update.get("usage").and_then(|raw| Fields::parse(raw.get())) {
            facts.usage(&usage, &[], t);
        }
    }
}

/// `action`, which reads or writes the catalog ([`Action::FetchSessions`],
/// [`Action::Catalog`]), unless facts wait: then the facts go first ([`Action::TurnFacts`]) and
/// `action` right after them (at the front of the output queue, `fx`).
pub(super) fn facts_before(
    sessions: &mut SessionTable,
    fx: &mut Effects,
    action: Action,
) -> Action {
    let facts = sessions.take_facts();
    if facts.is_empty() {
        return action;
    }
    fx.push_front(action);
    Action::TurnFacts(facts)
}
