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

/// Decide the journal of a line and update the pending table, with what the route resolved of
/// it (`resolved`: the slot of its session, or of an answer's; an answer's pending entry, when
/// the route took it out of the table, else it is taken out here). The journal's session comes
/// with its slot when it is the one resolved (a child's root is not).
pub(super) fn attribute(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    from: Side,
    peek: &Peek<'_>,
    record: &Record,
    resolved: Resolved,
) -> (Target, Option<Slot>) {
    if from == Side::Agent {
        learn_child(cx, sessions, peek);
    }
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
            Some(pending) => response(cx, sessions, peek, record, *is_error, pending, slot),
            None => (Target::Run, None),
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
    let target = |session: Option<SessionId>, slot| match session {
        Some(session) => (Target::Session(session), slot),
        None => (Target::Run, None),
    };
    match &peek.kind {
        // It names a session only to ask what it would start with: it opens none.
        Kind::Request { method, .. } if method == "session/options" => {
            request(cx, sessions, from, peek, record, None, None);
            (Target::Run, None)
        }
        Kind::Request { .. } if session.is_some() => {
            request(cx, sessions, from, peek, record, session.clone(), slot);
            target(session, slot)
        }
        Kind::Request { .. } => {
            // Request-scoped messages (elicitation) name a request of the other peer.
            let key = envelope::request_id(peek.params).map(|rid| (from.other(), rid));
            let session = key.and_then(|key| cx.pending().get(&key)?.session.clone());
            request(cx, sessions, from, peek, record, session.clone(), None);
            target(session, None)
        }
        Kind::Notification { method } if session.is_none() && method == "$/cancel_request" => {
            let rid = envelope::request_id(peek.params);
            let session = rid.and_then(|rid| cx.pending().get(&(from, rid))?.session.clone());
            target(session, None)
        }
        Kind::Notification { .. } => target(session, slot),
        Kind::Response { .. } | Kind::OtherJson | Kind::Invalid => (Target::Run, None),
    }
}

/// An agent's `session/update` that announces a child session: the child joins the tree of
/// the session that announced it, and the catalog hears of it (once).
fn learn_child(cx: &mut Cx, sessions: &mut SessionTable, peek: &Peek<'_>) {
    let (Some(parent), Some(params)) = (peek.session.as_deref(), peek.params) else {
        return;
    };
    if peek.method() != Some("session/update")
        || !subagents::may_name_child(params.get().as_bytes())
    {
        return;
    }
    let Ok(params) = serde_json::from_str::<Value>(params.get()) else {
        return;
    };
    let Some(update) = subagents::child_update(&params["update"]) else {
        return;
    };
    let parent = sessions.id(parent);
    if let Some(root) = sessions.announce_child(&parent, update.child) {
        cx.fx().push(Action::Catalog(CatalogUpdate::Child {
            session: root,
            child: SessionId::from(update.child),
            parent,
        }));
    }
}

/// A request of `from` (`peek`) in `session` (if any; in `slot` when the route resolved it):
/// what the catalog learns of it (nothing when it is a child session's), and its entry in the
/// pending table.
fn request(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    from: Side,
    peek: &Peek<'_>,
    record: &Record,
    session: Option<SessionId>,
    slot: Option<Slot>,
) {
    let Kind::Request { id, method } = &peek.kind else {
        return;
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
    if let Some(s) = &learns
        && let Some(state) = turn_facts::state_of_request(from, method)
    {
        let redact = cx.config().redact;
        let slot = slot.unwrap_or_else(|| sessions.made(s));
        (sessions.facts(slot)).request(state, peek.params, redact, record.unix_us);
    }
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
}

/// A response (`peek`) to `pending` (its session in `slot` when the route resolved it): what
/// the catalog learns of it, the turn it ends, and the journal it goes to (a new session's,
/// with the request that created it copied in first), with its slot when it is `slot`'s.
fn response(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    peek: &Peek<'_>,
    record: &Record,
    is_error: bool,
    pending: Pending,
    slot: Option<Slot>,
) -> (Target, Option<Slot>) {
    let Kind::Response { id, .. } = &peek.kind else {
        return (Target::Run, None);
    };
    if pending.method == "initialize" {
        cx.peers_mut().initialize.response = Some(record_bytes(record));
    }
    if let Some(s) = &pending.session
        && turn_facts::answer_teaches(&pending.method, cx.peers().agent.v2)
    {
        let slot = slot.unwrap_or_else(|| sessions.made(s));
        (sessions.facts(slot)).answer(&pending.method, peek.result, record.unix_us);
    }
    if let Some(mut update) = pending.index.clone().filter(|_| !is_error) {
        if let CatalogUpdate::Rename { title, .. } = &mut update {
            *title = redact::redact_text(std::mem::take(title), cx.config().redact);
        }
        cx.fx().push(Action::Catalog(update));
    }
    // (A v2 answer only says the prompt was taken: the turn, and its watch, go on until the
    // agent reports the session idle.)
    if pending.method == "session/prompt"
        && !cx.peers().agent.v2
        && let Some(slot) =
            (pending.session.as_deref()).and_then(|s| slot.or_else(|| sessions.slot(s)))
    {
        sessions.end_prompt(slot, Some(id));
    }
    let created = match (&pending.setup, is_error) {
        (Some(_), false) => envelope::str_field(peek.result, "sessionId").map(SessionId::from),
        _ => None,
    };
    match (created, pending.setup) {
        (Some(new), Some(setup)) => {
            open_session(cx, sessions, &new, setup.cwd.clone(), false);
            tell_reused(cx, sessions, &new, record);
            sessions.entry(&new).set_up(setup.params);
            if setup.copied_to.as_ref() != Some(&new) {
                cx.fx().journal(Target::Session(new.clone()), setup.record);
                if let Some(edit) = setup.edit {
                    cx.fx().journal(Target::Session(new.clone()), edit);
                }
            }
            (Target::Session(new), None)
        }
        _ => match pending.session {
            Some(session) => (Target::Session(session), slot),
            None => (Target::Run, None),
        },
    }
}

/// A session the agent created under an ID the journals held (see
/// [`super::reused_ids`]): its journal and the catalog say which ID the agent uses.
fn tell_reused(cx: &mut Cx, sessions: &mut SessionTable, session: &SessionId, record: &Record) {
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

/// Emit `OpenSession` the first time a session is seen. With `claim`, a session first seen
/// through early agent traffic takes the copy of the only unclaimed pending `session/new`.
pub(super) fn open_session(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    session: &SessionId,
    cwd: Option<String>,
    claim: bool,
) {
    if sessions.journal_open(session) {
        return;
    }
    let early_copy = if claim {
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
    } else {
        None
    };
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
