//! The relay of a line the route gives back, and what it changes in the sessions, applied here
//! through the sessions' own methods as the components that read the line decide it. Before
//! the line's edits ([`crate::proto::edits::edit`]): a client's prompt starts its turn's stall
//! watch and takes its session's re-prime; an agent's answer to `session/load` or
//! `session/resume` ends the native load and brings the session live; its answer to
//! `session/new` brings the new session live, or maps the fresh client-facing ID it takes
//! ([`crate::proto::reused_ids`]); its `session/update` teaches the session its facts
//! ([`crate::proto::update_facts`]); what the edits need of them goes on in [`Resolved`]. As it
//! is journaled ([`crate::proto::attribution`] decides where, and what it teaches): a child
//! announced joins its tree, the facts a request or answer teaches, a turn's end, a session an
//! answer created (opened, set up, its request copied in), and the session's journal opened
//! the first time a line of it is journaled; then it is forwarded.

use bytes::Bytes;

use super::super::agent_side::Mapping;
use super::super::attribution::{self, Attributed, FactsOf, Teaches};
use super::super::clients::{self, Asked};
use super::super::context::Cx;
use super::super::edits::{self, Edited, Relaying};
use super::super::pending::{Carried, Pending, Resolved};
use super::super::reused_ids::ReusedIds;
use super::super::sessions::{Session, SessionTable, Slot};
use super::super::stalls;
use super::super::update_facts::{self, UpdateFact};
use super::super::vocab::{
    Action, AgentRef, AgentSessionId, CatalogUpdate, Line, LoadMode, SessionId, Stamp, Target,
};
use crate::journal::Event;
use crate::journal::format::{Body, Record};
use crate::wire::Side;
use crate::wire::envelope::{self, Kind, Peek, RequestId};

/// A line (`msg`, from `from`) the route gives back, with what it resolved of it: its
/// sessions' transitions applied, then edited, journaled (with what journaling it teaches the
/// sessions) and forwarded.
pub(in crate::proto) fn relay(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    with: &mut Relaying<'_>,
    from: Side,
    msg: Line<'_>,
    mut resolved: Resolved,
) {
    transitions(cx, sessions, with.reused, from, msg, &mut resolved);
    let Edited { line, event } = edits::edit(cx, sessions, with, from, msg, &resolved);
    // The journal holds what the client sent and what it received.
    match (from, line) {
        (Side::Agent, Some(out)) => {
            let facing = envelope::peek(&out);
            // A mapped line names the client-facing session now, not the one resolved.
            let resolved = match facing.session == msg.peek.session {
                true => resolved,
                false => Resolved::default(),
            };
            let msg = Line {
                at: msg.at,
                peek: &facing,
                bytes: &out,
            };
            journal_and_forward(cx, sessions, from, msg, out.clone(), None, resolved);
        }
        (_, out) => {
            let forward = out.unwrap_or_else(|| msg.bytes.clone());
            journal_and_forward(cx, sessions, from, msg, forward, event, resolved);
        }
    }
}

/// A line the proxy made as the agent's (the agent's `session/list` answer merged with the
/// journal's): journaled and forwarded as it is.
pub(in crate::proto) fn forward_as_agent(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    at: Stamp,
    line: Bytes,
) {
    let facing = envelope::peek(&line);
    let msg = Line {
        at,
        peek: &facing,
        bytes: &line,
    };
    let resolved = Resolved::default();
    journal_and_forward(cx, sessions, Side::Agent, msg, line.clone(), None, resolved);
}

/// Journal `facing` (the client's view of the line) and forward `forward` to the other side;
/// `edit`, what the proxy changed in it that the journal would not show otherwise, is
/// journaled after it; `resolved`, what the route resolved of it ([`relay`]). What journaling
/// it teaches the sessions is applied before it is journaled.
fn journal_and_forward(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    from: Side,
    facing: Line<'_>,
    forward: Bytes,
    edit: Option<Event>,
    resolved: Resolved,
) {
    let Line { at, peek, .. } = facing;
    let record = {
        let payload = cx.fx().payload(peek, facing.bytes.clone());
        cx.fx().record(at, Body::Message { from, payload })
    };
    if from == Side::Agent {
        learn_child(cx, sessions, peek);
    }
    let Attributed {
        target,
        slot,
        teaches,
    } = attribution::attribute(cx, sessions, from, peek, &record, resolved);
    learn(cx, sessions, peek, &record, teaches);
    if let Target::Session(session) = &target
        && !match slot {
            Some(slot) => sessions[slot].journal_open(),
            None => sessions.journal_open(session),
        }
    {
        // A setup request names its cwd; early agent traffic may claim a pending
        // session/new.
        let cwd = envelope::str_field(peek.params, "cwd");
        open_session(cx, sessions, session, cwd, from == Side::Agent);
    }
    // The agent's own replay during a native load is forwarded, not journaled again.
    let native_replay = from == Side::Agent
        && peek.method() == Some("session/update")
        && match (&target, slot) {
            (Target::Session(_), Some(slot)) => sessions[slot].replays_native_load(),
            (Target::Session(s), None) => sessions.get(s).is_some_and(Session::replays_native_load),
            (Target::Run, _) => false,
        };
    if !native_replay {
        cx.fx().journal(target.clone(), record);
    }
    if let Some(edit) = edit {
        let record = cx.fx().record(at, Body::Event(edit));
        // A `session/new`'s goes with the request into the new session's journal.
        let setup = match &peek.kind {
            Kind::Request { id, .. } if target == Target::Run => cx
                .pending_mut()
                .get_mut(&(from, id.clone()))
                .and_then(|p| p.setup.as_mut()),
            _ => None,
        };
        match setup {
            Some(setup) => setup.edit = Some(record),
            None => cx.fx().journal(target, record),
        }
    }
    cx.fx().forward(from.other(), forward);
}

/// An agent's `session/update` (`peek`) that announces a child session: the child joins the
/// tree of the session that announced it, and the catalog hears of it (once).
fn learn_child(cx: &mut Cx, sessions: &mut SessionTable, peek: &Peek<'_>) {
    let Some((parent, child)) = attribution::announced_child(peek) else {
        return;
    };
    let parent = sessions.id(&parent);
    if let Some(root) = sessions.announce_child(&parent, &child) {
        cx.fx().push(Action::Catalog(CatalogUpdate::Child {
            session: root,
            child: SessionId::from(child.as_str()),
            parent,
        }));
    }
}

/// What journaling a line (`peek`, its `record`) teaches its sessions ([`Teaches`]), learnt:
/// the facts of a request or answer, the turn an answer ends, the session an answer created
/// (opened, told as the agent's ID when it took a fresh one, set up, the request that created
/// it copied in first, with the proxy's edit of it).
fn learn(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    peek: &Peek<'_>,
    record: &Record,
    teaches: Teaches,
) {
    let Teaches {
        facts,
        prompt_end,
        created,
    } = teaches;
    if let Some((s, slot, of)) = facts {
        let redact = cx.config().redact;
        let slot = slot.unwrap_or_else(|| sessions.made(&s));
        let facts = sessions.facts(slot);
        match of {
            FactsOf::Request(state) => facts.request(state, peek.params, redact, record.unix_us),
            FactsOf::Answer(method) => facts.answer(method, peek.result, record.unix_us),
        }
        if prompt_end && let Kind::Response { id, .. } = &peek.kind {
            sessions.end_prompt(slot, Some(id));
        }
    }
    if let Some((new, setup)) = created.map(|created| *created) {
        open_session(cx, sessions, &new, setup.cwd.clone(), false);
        attribution::tell_reused(cx, sessions, &new, record);
        sessions.entry(&new).set_up(setup.params);
        if setup.copied_to.as_ref() != Some(&new) {
            cx.fx().journal(Target::Session(new.clone()), setup.record);
            if let Some(edit) = setup.edit {
                cx.fx().journal(Target::Session(new.clone()), edit);
            }
        }
    }
}

/// Emit `OpenSession` the first time a session is seen. With `claim`, a session first seen
/// through early agent traffic takes the copy of the only unclaimed pending `session/new`
/// ([`attribution::claim_early_copy`]).
fn open_session(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    session: &SessionId,
    cwd: Option<String>,
    claim: bool,
) {
    if sessions.journal_open(session) {
        return;
    }
    let early_copy = claim
        .then(|| attribution::claim_early_copy(cx, session))
        .flatten();
    let cwd = cwd.or_else(|| early_copy.as_ref().and_then(|(_, _, c)| c.clone()));
    if sessions.open_journal(session) {
        cx.open_journal(session.clone(), cwd);
    }
    if let Some((record, edit, _)) = early_copy {
        cx.fx().journal(Target::Session(session.clone()), record);
        if let Some(edit) = edit {
            cx.fx().journal(Target::Session(session.clone()), edit);
        }
    }
}

/// What became of agent requests a connection left unanswered, sent in order: asked of the
/// clients again, or answered for them (journaled as the proxy's, what the answer teaches its
/// session learnt as a client's answer teaches it, sent to the agent).
pub(in crate::proto) fn send_asked(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    at: Stamp,
    asked: impl IntoIterator<Item = Asked>,
) {
    for asked in asked {
        let answer = match asked {
            Asked::Again(line) => {
                cx.fx().forward(Side::Client, line);
                continue;
            }
            Asked::ForClient(id, line, why) => clients::answer_unasked(cx, &id, &line, why),
        };
        let Some(answer) = answer else {
            continue; // Nobody waits for it any more.
        };
        let record = cx.fx().proxy_record(at, Side::Client, answer.clone());
        let peek = envelope::peek(&answer);
        let resolved = Resolved::default();
        let Attributed {
            target, teaches, ..
        } = attribution::attribute(cx, sessions, Side::Client, &peek, &record, resolved);
        learn(cx, sessions, &peek, &record, teaches);
        cx.fx().journal(target, record);
        cx.fx().forward(Side::Agent, answer);
    }
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
    // What the entry says: a load's or resume's answer (with its session), a new session's.
    let answers = |p: &Pending| match p.method.as_str() {
        "session/load" | "session/resume" => (p.session.clone(), false),
        method => (None, method == "session/new"),
    };
    // The entry the route took out with the answer; else (an answer given back after the
    // journals were asked about a new session's ID: its entry stayed in the table) the table's.
    let (loaded, new) = match resolved.answered.as_deref() {
        Some(pending) => answers(pending),
        None => {
            let key = (Side::Client, cx.ids().client_id(id));
            match cx.pending().get(&key) {
                Some(pending) => answers(pending),
                None => return,
            }
        }
    };
    if let Some(s) = loaded {
        let slot = resolved.session.or_else(|| sessions.slot(&s));
        if let Some(slot) = slot {
            let client_id = cx.ids().client_id(id);
            sessions.at_mut(slot).end_native_load(&client_id);
        }
        if !is_error {
            let slot = slot.unwrap_or_else(|| sessions.made(&s));
            sessions.at_mut(slot).set_live();
        }
    } else if new && !is_error {
        resolved.carried = new_session(sessions, reused, peek).map(Carried::FreshId);
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
    let Some(learnt) = UpdateFact::of(peek) else {
        return false;
    };
    // The client-facing session (in `slot` when it is the one the route found).
    let (session, slot) = sessions.client_of_at(AgentRef(session), slot);
    if !learnt.is_the_session_s() {
        return update_facts::tell(cx, session, learnt);
    }
    // A state update changes the session's turn only if the table had it.
    let found = match learnt {
        UpdateFact::State { .. } => slot.or_else(|| sessions.slot(&session)),
        _ => slot,
    };
    let slot = found.unwrap_or_else(|| sessions.made(&session));
    update_facts::learn(cx, sessions.at_mut(slot), found.is_some(), learnt);
    false
}
