//! What a line the route gives back to be relayed changes in its sessions, applied by the route
//! before the relay edits, journals and forwards it ([`crate::proto::edits::relay`]), through the
//! session's own methods: a client's prompt starts its turn's stall watch; an agent's answer to
//! `session/load` or `session/resume` ends the native load and brings the session live; its
//! answer to `session/new` brings the new session live, or maps the fresh client-facing ID it
//! takes ([`crate::proto::reused_ids`]); its `session/update` teaches the session its facts
//! ([`crate::proto::update_facts`]). What the relay's edits need of them goes on in [`Resolved`].

use bytes::Bytes;

use super::super::agent_side::Mapping;
use super::super::context::Cx;
use super::super::edits::{self, Relaying};
use super::super::pending::{Carried, Resolved};
use super::super::reused_ids::ReusedIds;
use super::super::sessions::{SessionTable, Slot};
use super::super::stalls;
use super::super::update_facts::{self, Learnt};
use super::super::vocab::{AgentRef, AgentSessionId, Line, LoadMode, SessionId, Stamp};
use crate::wire::Side;
use crate::wire::envelope::{self, Kind, Peek, RequestId};

/// A line (`msg`, from `from`) the route gives back, with what it resolved of it: its
/// sessions' transitions applied, then relayed.
pub(in crate::proto) fn relay(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    with: &mut Relaying<'_>,
    from: Side,
    msg: Line<'_>,
    mut resolved: Resolved,
) {
    transitions(cx, sessions, with.reused, from, msg, &mut resolved);
    edits::relay(cx, sessions, with, from, msg, resolved);
}

/// Agent lines that were held, relayed in order ([`relay`]).
pub(super) fn relay_held(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    with: &mut Relaying<'_>,
    at: Stamp,
    lines: Vec<Bytes>,
) {
    for line in lines {
        let peek = envelope::peek(&line);
        let msg = Line {
            at,
            peek: &peek,
            bytes: &line,
        };
        relay(cx, sessions, with, Side::Agent, msg, Resolved::default());
    }
}

/// The transitions a relayed line (`msg`) makes in its sessions; the slot of a session a
/// client's prompt made, a new session's fresh ID and whether an update's title is to go are
/// kept in `resolved` for the edits.
fn transitions(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    reused: &mut ReusedIds,
    from: Side,
    msg: Line<'_>,
    resolved: &mut Resolved,
) {
    let Line { at, peek, bytes } = msg;
    // A client's prompt starts its session's stall watch (`--stall-timeout`).
    if let Some((id, s)) = stalls::watched_prompt(cx, from, peek) {
        let made = resolved.session.unwrap_or_else(|| {
            let s = sessions.id(s);
            sessions.made(&s)
        });
        sessions.at_mut(made).start_prompt(id.clone(), at);
        resolved.session = Some(made);
    }
    if cx.config().load == LoadMode::Off {
        return;
    }
    if from == Side::Client {
        // A prompt of a mapped session carries the re-prime, the first since its load.
        if peek.method() == Some("session/prompt")
            && let Some(s) = peek.session.as_deref()
            && let Some(slot) = resolved.session.or_else(|| sessions.slot(s))
        {
            resolved.session = Some(slot);
            resolved.carried = sessions.at_mut(slot).take_reprime().map(Carried::Reprime);
        }
        return;
    }
    match &peek.kind {
        Kind::Response { id, is_error } => {
            answered(cx, sessions, reused, peek, id, *is_error, resolved)
        }
        _ => {
            if peek.method() == Some("session/update")
                && let Some(session) = peek.session.as_deref()
                && edits::names_catalog_update(bytes)
                && sessions.root_of(session).is_none()
            {
                let untitled = learn_update(cx, sessions, peek, session, resolved.session);
                resolved.carried = untitled.then_some(Carried::Untitled);
            }
        }
    }
}

/// What the agent's answer (`peek`, to request `id`) to a client's `session/load`,
/// `session/resume` or `session/new` changes in the session: the native load it ends, the
/// session live, a new session's fresh ID mapped (kept in `resolved`).
fn answered(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    reused: &mut ReusedIds,
    peek: &Peek<'_>,
    id: &RequestId,
    is_error: bool,
    resolved: &mut Resolved,
) {
    let client_id = cx.ids().client_id(id);
    let pending = match resolved.answered.as_deref() {
        Some(pending) => Some(pending),
        None => cx.pending().get(&(Side::Client, client_id.clone())),
    };
    let Some(pending) = pending else {
        return;
    };
    match (pending.method.as_str(), &pending.session) {
        ("session/load" | "session/resume", Some(s)) => {
            let slot = resolved.session.or_else(|| sessions.slot(s));
            if let Some(slot) = slot {
                sessions.at_mut(slot).end_native_load(&client_id);
            }
            if !is_error {
                let slot = slot.unwrap_or_else(|| sessions.made(s));
                sessions.at_mut(slot).set_live();
            }
        }
        ("session/new", _) if !is_error => {
            resolved.carried = new_session(sessions, reused, peek).map(Carried::FreshId);
        }
        _ => {}
    }
}

/// The agent's answer to `session/new` (`peek`): the session is live; one under an ID the
/// journals held from an earlier run takes its fresh client-facing ID
/// ([`crate::proto::reused_ids`]), mapped to the agent's, and returned for the answer to say.
fn new_session(
    sessions: &mut SessionTable,
    reused: &mut ReusedIds,
    peek: &Peek<'_>,
) -> Option<SessionId> {
    let s = envelope::str_field(peek.result, "sessionId")?;
    let Some(fresh) = reused.fresh_id(&s) else {
        let s = sessions.id(&s);
        sessions.entry(&s).set_live();
        return None;
    };
    // Mapped from the start (no prefix: nothing was replayed into it).
    let mapping = Mapping {
        agent: AgentSessionId::from(s.as_str()),
        prefix: String::new(),
        reprime: None,
    };
    sessions.map(&fresh, mapping);
    Some(fresh)
}

/// What an agent's update (`peek`, naming agent-side `session`, in `slot` when the route found
/// it) teaches: learnt by its client-facing session (made for its facts if the table has
/// none), or told to the catalog. True when it is a title the agent made of a re-prime.
fn learn_update(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    peek: &Peek<'_>,
    session: &str,
    slot: Option<Slot>,
) -> bool {
    let Some(learnt) = Learnt::of(peek) else {
        return false;
    };
    // The client-facing session (in `slot` when it is the one the route found).
    let (session, slot) = sessions.client_of_at(AgentRef(session), slot);
    if !learnt.is_the_session_s() {
        return update_facts::tell(cx, session, learnt);
    }
    // A state update changes the session's turn only if the table had it.
    let found = match learnt {
        Learnt::State { .. } => slot.or_else(|| sessions.slot(&session)),
        _ => slot,
    };
    let slot = found.unwrap_or_else(|| sessions.made(&session));
    update_facts::learn(cx, sessions.at_mut(slot), found.is_some(), learnt);
    false
}
