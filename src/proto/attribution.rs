//! Which journal each record goes to. Requests and notifications belong to `params.sessionId`.
//! Responses carry no session: they belong to the session of the request they answer, found in
//! a pending table per sender (both peers number their requests independently; `1` and `"1"`
//! are different ids). `$/cancel_request` belongs to the session of the request it cancels. A
//! `session/new` (or `session/fork`) response names the new session: the request is copied into
//! that session's journal before the response. Updates for a session whose `session/new`
//! response has not arrived yet open the session early (and take the copy of the only pending
//! `session/new`, if there is exactly one). Everything else goes to the run's journal ([`Target::Run`]).
//! A session is opened (`OpenSession`) the first time it is seen; a new session the agent
//! names with an ID the journals already hold from an earlier run gets a fresh client-facing ID
//! (`s~2`, …) mapped to the agent's, so two conversations never share a journal. A child
//! session (a subagent its parent announced: [`super::tree`]) is no session of its own: its
//! lines go to the journal of the root of its tree, and teach the catalog nothing.
//!
//! Attribution reads the session table and decides: where a line is journaled and what
//! journaling it teaches its sessions ([`Teaches`]: the facts a request or answer teaches, a
//! turn's end, a session an answer created), the child an update announces
//! ([`announced_child`]), the pending `session/new` a session first seen early takes
//! ([`claim_early_copy`]). The route applies them, and opens a session's journal the first time
//! a line of it is journaled (`route::relay`).

use bytes::Bytes;
use serde_json::Value;

use super::context::Cx;
use super::load_request::SetupParams;
use super::pending::{Pending, Resolved, Setup};
use super::sessions::{SessionTable, Slot};
use super::turn_facts;
use super::vocab::{Action, CatalogUpdate, SessionId, Stamp, Target};
use crate::acp::subagents;
use crate::journal::Event;
use crate::journal::format::Body;
use crate::journal::format::Record;
use crate::redact;
use crate::wire::Side;
use crate::wire::envelope::{self, Kind, Peek};

/// Where a line is journaled, and what journaling it teaches its sessions ([`attribute`]).
#[derive(Debug)]
pub(super) struct Attributed {
    /// The journal.
    pub(super) target: Target,
    /// The journal's session's slot, when it is the one the route resolved (a child's root is
    /// not).
    pub(super) slot: Option<Slot>,
    pub(super) teaches: Teaches,
}

/// What journaling a line changes in its sessions, for the route to apply in this order
/// before the line is journaled.
#[derive(Debug, Default)]
pub(super) struct Teaches {
    /// The session whose facts learn from the line (made if the table has none; in its slot
    /// when the route resolved it), and what.
    pub(super) facts: Option<(SessionId, Option<Slot>, FactsOf)>,
    /// The answer (to a prompt, ACP v1) ends that session's turn.
    pub(super) prompt_end: bool,
    /// The session the answer created, with the request that created it: opened, told as the
    /// agent's ID when it took a fresh one, set up, the request copied in first (boxed: every
    /// line's attribution carries it on, few have one).
    pub(super) created: Option<Box<(SessionId, Setup)>>,
}

/// What a session's facts learn from a line ([`super::turn_facts::Facts`]).
#[derive(Debug)]
pub(super) enum FactsOf {
    /// A request of the turn, and the state it puts the session in.
    Request(&'static str),
    /// The answer to a request of this method ([`turn_facts::answer_teaches`]).
    Answer(&'static str),
}

/// Decide the journal of a line and update the pending table, with what the route resolved of
/// it (`resolved`: the slot of its session, or of an answer's; an answer's pending entry, when
/// the route took it out of the table, else it is taken out here); and what journaling it
/// teaches the sessions, for the route to apply.
pub(super) fn attribute(
    cx: &mut Cx,
    sessions: &SessionTable,
    from: Side,
    peek: &Peek<'_>,
    record: &Record,
    resolved: Resolved,
) -> Attributed {
    let Resolved {
        session: slot,
        answered,
        ..
    } = resolved;
    if let Kind::Response { id, is_error } = &peek.kind {
        // An answer's session is the one of the request it answers (in `slot` when the route
        // resolved it with the entry).
        let slot = slot.filter(|_| answered.is_some());
        let pending = answered.map(|pending| *pending);
        return match pending.or_else(|| cx.pending_mut().remove(&(from.other(), id.clone()))) {
            Some(pending) => response(cx, peek, record, *is_error, pending, slot),
            None => Attributed::run(Teaches::default()),
        };
    }
    // The session the line names, its tree's root when it is a child's (with the resolved
    // slot, when it is the session itself).
    let (session, slot) = match (peek.session.as_deref(), slot) {
        (Some(_), Some(slot)) => {
            let (owner, slot) = sessions.owner_at(slot);
            (Some(owner), slot)
        }
        (Some(s), None) => (Some(sessions.owner(s)), None),
        (None, _) => (None, None),
    };
    let target = |session: Option<SessionId>, slot, teaches| match session {
        Some(session) => Attributed {
            target: Target::Session(session),
            slot,
            teaches,
        },
        None => Attributed::run(teaches),
    };
    match &peek.kind {
        // It names a session only to ask what it would start with: it opens none.
        Kind::Request { method, .. } if method == "session/options" => {
            Attributed::run(request(cx, sessions, from, peek, record, (None, None)))
        }
        Kind::Request { .. } if session.is_some() => {
            let teaches = request(cx, sessions, from, peek, record, (session.clone(), slot));
            target(session, slot, teaches)
        }
        Kind::Request { .. } => {
            // Request-scoped messages (elicitation) name a request of the other peer.
            let key = envelope::request_id(peek.params).map(|rid| (from.other(), rid));
            let session = key.and_then(|key| cx.pending().get(&key)?.session.clone());
            let teaches = request(cx, sessions, from, peek, record, (session.clone(), None));
            target(session, None, teaches)
        }
        Kind::Notification { method } if session.is_none() && method == "$/cancel_request" => {
            let rid = envelope::request_id(peek.params);
            let session = rid.and_then(|rid| cx.pending().get(&(from, rid))?.session.clone());
            target(session, None, Teaches::default())
        }
        Kind::Notification { .. } => target(session, slot, Teaches::default()),
        Kind::Response { .. } | Kind::OtherJson | Kind::Invalid => {
            Attributed::run(Teaches::default())
        }
    }
}

impl Attributed {
    /// The run's journal.
    fn run(teaches: Teaches) -> Attributed {
        Attributed {
            target: Target::Run,
            slot: None,
            teaches,
        }
    }
}

/// The child session an agent's `session/update` (`peek`) announces, and the session that
/// announced it (its parent): the child joins its parent's tree, and the catalog hears of it
/// (once).
pub(super) fn announced_child(peek: &Peek<'_>) -> Option<(String, String)> {
    let (parent, params) = (peek.session.as_deref()?, peek.params?);
    if peek.method() != Some("session/update")
        || !subagents::may_name_child(params.get().as_bytes())
    {
        return None;
    }
    let params = serde_json::from_str::<Value>(params.get()).ok()?;
    let update = subagents::child_update(&params["update"])?;
    Some((parent.to_string(), update.child.to_string()))
}

/// A request of `from` (`peek`) in `session` (if any; in `slot` when the route resolved it):
/// its entry in the pending table, and what the catalog learns of it (nothing when it is a
/// child session's).
fn request(
    cx: &mut Cx,
    sessions: &SessionTable,
    from: Side,
    peek: &Peek<'_>,
    record: &Record,
    (session, slot): (Option<SessionId>, Option<Slot>),
) -> Teaches {
    let Kind::Request { id, method } = &peek.kind else {
        return Teaches::default();
    };
    let method = method.as_ref();
    let child = peek
        .session
        .as_deref()
        .is_some_and(|s| sessions.root_of(s).is_some());
    let learns = session.clone().filter(|_| !child);
    if method == "initialize" {
        cx.peers_mut().initialize.request = Some(record_bytes(record));
    }
    let facts = learns.as_ref().and_then(|s| {
        let state = turn_facts::state_of_request(from, method)?;
        Some((s.clone(), slot, FactsOf::Request(state)))
    });
    let setup = CREATES_SESSION.contains(&method).then(|| Setup {
        record: record.clone(),
        params: SetupParams::parse(
            &peek
                .params
                .and_then(|p| serde_json::from_str(p.get()).ok())
                .unwrap_or_default(),
        ),
        cwd: envelope::str_field(peek.params, "cwd"),
        copied_to: None,
        edit: None,
    });
    let index = match (from, &learns) {
        (Side::Client, Some(s)) => session_index_update(method, s, peek),
        _ => None,
    };
    let pending = Pending {
        method: method.to_string(),
        seq: record.seq,
        session,
        setup,
        index,
    };
    cx.pending_mut().insert((from, id.clone()), pending);
    Teaches {
        facts,
        ..Teaches::default()
    }
}

/// A response (`peek`) to `pending` (its session in `slot` when the route resolved it): what
/// the catalog learns of it, the turn it ends, and the journal it goes to (a new session's,
/// with the request that created it copied in first), with its slot when it is `slot`'s.
fn response(
    cx: &mut Cx,
    peek: &Peek<'_>,
    record: &Record,
    is_error: bool,
    pending: Pending,
    slot: Option<Slot>,
) -> Attributed {
    if !matches!(peek.kind, Kind::Response { .. }) {
        return Attributed::run(Teaches::default());
    }
    if pending.method == "initialize" {
        cx.peers_mut().initialize.response = Some(record_bytes(record));
    }
    let v2 = cx.peers().agent.v2;
    let facts = turn_facts::answer_teaches(&pending.method, v2)
        .and_then(|method| Some((pending.session.clone()?, slot, FactsOf::Answer(method))));
    if let Some(mut update) = pending.index.clone().filter(|_| !is_error) {
        if let CatalogUpdate::Rename { title, .. } = &mut update {
            *title = redact::redact_text(std::mem::take(title), cx.config().redact);
        }
        cx.fx().push(Action::Catalog(update));
    }
    // (A v2 answer only says the prompt was taken: the turn, and its watch, go on until the
    // agent reports the session idle.)
    let prompt_end = pending.method == "session/prompt" && !v2 && facts.is_some();
    let created = match (&pending.setup, is_error) {
        (Some(_), false) => envelope::str_field(peek.result, "sessionId").map(SessionId::from),
        _ => None,
    };
    let (target, slot, created) = match (created, pending.setup) {
        (Some(new), Some(setup)) => {
            let target = Target::Session(new.clone());
            (target, None, Some(Box::new((new, setup))))
        }
        _ => match pending.session {
            Some(session) => (Target::Session(session), slot, None),
            None => (Target::Run, None, None),
        },
    };
    let teaches = Teaches {
        facts,
        prompt_end,
        created,
    };
    Attributed {
        target,
        slot,
        teaches,
    }
}

/// A session the agent created under an ID the journals held (see
/// [`super::reused_ids`]): its journal and the catalog say which ID the agent uses.
pub(super) fn tell_reused(
    cx: &mut Cx,
    sessions: &SessionTable,
    session: &SessionId,
    record: &Record,
) {
    let agent = sessions.agent_id(session);
    if agent.as_str() == &**session {
        return;
    }
    let at = Stamp {
        unix_us: record.unix_us,
        mono_us: record.mono_us,
    };
    let event = Event::SessionMapped {
        agent_session: agent.to_string(),
    };
    cx.fx().event(at, Target::Session(session.clone()), event);
    cx.fx().push(Action::Catalog(CatalogUpdate::Alias {
        session: session.clone(),
        agent,
    }));
}

/// What a session first seen through early agent traffic takes when it opens: the copy of the
/// only unclaimed pending `session/new` (its record, the proxy's edit of it, its cwd), marked
/// as claimed; none while there is none, or several.
pub(super) fn claim_early_copy(cx: &mut Cx, session: &SessionId) -> Option<EarlyCopy> {
    let mut unclaimed = cx
        .pending_mut()
        .values_mut()
        .filter_map(|p| p.setup.as_mut())
        .filter(|s| s.copied_to.is_none() && s.record_is_client_new());
    match (unclaimed.next(), unclaimed.next()) {
        (Some(setup), None) => {
            setup.copied_to = Some(session.clone());
            Some((setup.record.clone(), setup.edit.clone(), setup.cwd.clone()))
        }
        _ => None,
    }
}

/// A pending `session/new`'s copy a session takes ([`claim_early_copy`]): its record, the
/// proxy's edit of it, its cwd.
pub(super) type EarlyCopy = (Record, Option<Record>, Option<String>);

/// What the catalog learns from a client request of the vendor session-index extensions
/// (`_session/rename`, `_session/archive`, `_session/unarchive`) once the agent does it.
fn session_index_update(
    method: &str,
    session: &SessionId,
    peek: &Peek<'_>,
) -> Option<CatalogUpdate> {
    let session = session.clone();
    match method {
        "_session/rename" => {
            let title = envelope::str_field(peek.params, "title")?;
            let title = title.trim();
            (!title.is_empty()).then(|| CatalogUpdate::Rename {
                session,
                title: title
                    .chars()
                    .filter(|c| !c.is_control())
                    .take(200)
                    .collect(),
            })
        }
        "_session/archive" => Some(CatalogUpdate::Archive {
            session,
            archived: true,
        }),
        "_session/unarchive" => Some(CatalogUpdate::Archive {
            session,
            archived: false,
        }),
        _ => None,
    }
}

fn record_bytes(record: &Record) -> Bytes {
    match &record.body {
        Body::Message { payload, .. } => payload.bytes.clone(),
        _ => Bytes::new(),
    }
}

/// Methods whose response creates a session.
const CREATES_SESSION: &[&str] = &["session/new", "session/fork"];
