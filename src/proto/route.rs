//! Where a line goes, decided once, up front: [`client`] and [`agent`] read the line's peek
//! and what the core holds (the handshake, the line's session, the loads and lists under way,
//! the proxy's own request ids) and name the one component that owns the line
//! ([`ClientRoute`], [`AgentRoute`]), changing nothing but, for an agent's answer the relay
//! takes, the pending table: the entry of the request it answers is taken out once and handed
//! on with the line (to [`super::edits::relay`]), with the slot of the answer's session, looked
//! up once, as a client line's session was as it arrived ([`Resolved`]: the steps after the
//! route reach the session by it); [`take_client`] and [`take_agent`] then hand
//! it to its owner, with the components it needs ([`Owners`]), and say what became of it
//! ([`Taken`]: what follows is the proxy's). A client request's handling follows from its method, the mode (`--load`) and what
//! the agent declared ([`Handling`]): served from the journal, passed on with what serves it
//! should the agent fail it, answered here, or passed as it came.

use bytes::Bytes;

use super::clients::{self, Join};
use super::closing;
use super::connection::Connections;
use super::context::Cx;
use super::edits::{self, Relaying};
use super::fork::Forks;
use super::holding::{self, Hold, Holding};
use super::listing::{ListAnswer, Lists};
use super::load_request::tail_turns;
use super::load_state::Progress;
use super::loading::Loads;
use super::native::{self, NativeAnswer, replay_from};
use super::pending::{Purpose, Resolved};
use super::restart::{self, Handshake, Restore};
use super::reused_ids::ReusedIds;
use super::sessions::{Session, Slot};
use super::vocab::{AgentRef, AgentSessionId, Line, LoadMode, SessionId};
use crate::wire::Side;
use crate::wire::envelope::{self, Kind, Peek, RequestId};

/// The component that owns a client line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ClientRoute {
    /// A restarted agent is being initialized: the line waits for it ([`Handshake`]).
    AwaitAgent,
    /// The client answers a request of an agent that died since: journaled, dropped.
    DeadAgentAnswer,
    /// Its session is being restored: it waits behind the restore (load `op`).
    BehindRestore(u64),
    /// It names a session lost in an agent restart ([`super::restart::restore_first`]).
    Restore(Restore),
    /// A host's connection joins or leaves a live session ([`super::clients::join_or_leave`]).
    Join(Join),
    /// A client request the core handles ([`Handling`]).
    Request(Handling),
    /// A `$/cancel_request` or `session/cancel` of an operation the core serves (`op`, why).
    Cancel(u64, &'static str),
    /// Nobody's but the session's: edited where it must be, journaled, forwarded.
    Relay,
}

/// The component that owns an agent line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum AgentRoute {
    /// The answer to a load or resume the client sent the agent itself, kept by its session
    /// ([`super::native::native_answered`]).
    NativeAnswer,
    /// The answer to a request of the proxy's own (a load's step, the handshake told again).
    OwnAnswer,
    /// The answer to a `session/list` the core merges with the journal's.
    ListAnswer,
    /// The successful answer to a client's `session/new`, while the store can be asked whether
    /// the ID it names is an earlier run's ([`super::reused_ids::ReusedIds::ask`]).
    NewSession,
    /// A line of a session whose lines are held or hidden ([`super::holding`]).
    Held(Hold),
    /// Nobody's but the session's: edited where it must be, journaled, forwarded.
    Relay,
}

/// The owner of a client line (`peek`; its session in `slot` when it was looked up as the line
/// arrived), among the components (`owners`).
pub(super) fn client(
    cx: &Cx,
    owners: &Owners<'_>,
    peek: &Peek<'_>,
    slot: Option<Slot>,
) -> ClientRoute {
    let (handshake, connections) = (&*owners.handshake, &*owners.connections);
    if handshake.reinit.is_some() && peek.is_message() {
        return ClientRoute::AwaitAgent;
    }
    if cx.config.load == LoadMode::Off {
        return ClientRoute::Relay;
    }
    if let Kind::Response { id, .. } = &peek.kind {
        return match handshake.dead.contains_key(id) {
            true => ClientRoute::DeadAgentAnswer,
            false => ClientRoute::Relay,
        };
    }
    let method = peek.method();
    // The line's session: in its slot, else looked up (it may have been made since).
    let session = |s: &str| {
        slot.or_else(|| cx.sessions.slot(s))
            .map(|x| &cx.sessions[x])
    };
    if let (Some(s), Some(method)) = (peek.session.as_deref(), method) {
        let session = session(s);
        if let Some(route) = session.and_then(|x| restoring(x, method, &peek.kind)) {
            return route;
        }
        if let Kind::Request { id, .. } = &peek.kind
            && connections.is_hosted()
            && let Some(join) = joining(cx, connections, id, method, session, peek)
        {
            return ClientRoute::Join(join);
        }
    }
    match (&peek.kind, method) {
        (Kind::Request { .. }, Some(method)) => match handling(cx, method, peek) {
            Handling::Pass => ClientRoute::Relay,
            handling => ClientRoute::Request(handling),
        },
        (Kind::Notification { method }, _) => {
            let (loads, lists) = (&*owners.loads, &*owners.lists);
            match cancelled(cx, loads, lists, connections.is_hosted(), method, peek) {
                Some((op, why)) => ClientRoute::Cancel(op, why),
                None => ClientRoute::Relay,
            }
        }
        _ => ClientRoute::Relay,
    }
}

/// A line naming `session`, which is being restored or was lost in an agent restart.
fn restoring(session: &Session, method: &str, kind: &Kind) -> Option<ClientRoute> {
    if let Some(op) = session.restored_by() {
        return Some(ClientRoute::BehindRestore(op));
    }
    if !session.is_lost() {
        return None;
    }
    match (method, kind) {
        ("session/load" | "session/resume" | "session/delete", _) => None,
        ("session/cancel", _) => Some(ClientRoute::Restore(Restore::Cancel)),
        ("session/close", Kind::Request { .. }) => Some(ClientRoute::Restore(Restore::Close)),
        _ => Some(ClientRoute::Restore(Restore::First)),
    }
}

/// A host's request `id` (`method`) naming a session (`session`, when the table has it): how
/// its connection joins or leaves it, if it does.
fn joining(
    cx: &Cx,
    connections: &Connections,
    id: &RequestId,
    method: &str,
    session: Option<&Session>,
    peek: &Peek<'_>,
) -> Option<Join> {
    let live = session.is_some_and(Session::is_live);
    match method {
        "session/load" | "session/resume" if live && !cx.agent.v2 => Some(Join::Live {
            replay: method == "session/load",
        }),
        // ACP v2: a resume replays with `replayFrom: {type: "start"}`, else nothing; another
        // cursor is the agent's to take.
        "session/resume" if live => match replay_from(peek.params).as_deref() {
            None => Some(Join::Live { replay: false }),
            Some("start") => Some(Join::Live { replay: true }),
            Some(_) => None,
        },
        "session/attach" => Some(Join::Attach { live }),
        "session/detach" => Some(Join::Leave),
        "session/close" => {
            let conn = connections.conn_of(id);
            let attached = session.map_or(&[][..], |x| x.members().attached());
            let attached = attached.iter();
            let others = attached.filter(|c| **c != conn && connections.is_live(**c));
            (others.count() > 0).then_some(Join::Leave)
        }
        _ => None,
    }
}

/// The owner of an agent line (`peek`), and for an answer the owner relays, what it resolved:
/// the pending entry of the request it answers, taken out of the table (the one lookup of the
/// table on its way; none: the table had none, or the answer's owner is another and the entry
/// stays), and the slot of that request's session (its one lookup on the way); for a request
/// or notification, the slot of the session it names (its one lookup on the way).
pub(super) fn agent(
    cx: &mut Cx,
    loads: &Loads,
    lists: &Lists,
    peek: &Peek<'_>,
) -> (AgentRoute, Resolved) {
    if cx.config.load == LoadMode::Off {
        return (AgentRoute::Relay, Resolved::default());
    }
    match &peek.kind {
        Kind::Response { id, is_error } => answer(cx, lists, id, *is_error),
        Kind::Notification { .. } | Kind::Request { .. } => {
            let Some(named) = peek.session.as_deref() else {
                return (AgentRoute::Relay, Resolved::default());
            };
            // The session the line names, looked up once: the relay reaches it by its slot.
            let slot = cx.sessions.slot(named);
            let update = peek.method() == Some("session/update");
            match held(cx, loads, named, slot, update) {
                Some(hold) => (AgentRoute::Held(hold), Resolved::default()),
                None => (
                    AgentRoute::Relay,
                    Resolved {
                        session: slot,
                        answered: None,
                    },
                ),
            }
        }
        _ => (AgentRoute::Relay, Resolved::default()),
    }
}

/// The owner of the agent's answer to request `id`, decided by the one request it answers:
/// the client's (its pending entry, under the client's own id should the proxy have
/// renumbered it), else the proxy's own. The entry is taken out of the table, and its session
/// looked up; an owner other than the relay finds the entry there again.
fn answer(cx: &mut Cx, lists: &Lists, id: &RequestId, failed: bool) -> (AgentRoute, Resolved) {
    let key = (Side::Client, cx.ids.client_id(id));
    let client_id = &key.1;
    let pending = cx.pending.remove(&key).map(Box::new);
    let slot = pending
        .as_ref()
        .and_then(|p| p.session.as_deref())
        .and_then(|s| cx.sessions.slot(s));
    let route = match pending.as_ref().map(|p| p.method.as_str()) {
        Some("session/new") if !failed && cx.config.asks_store => AgentRoute::NewSession,
        Some("session/load" | "session/resume")
            if slot
                .and_then(|x| cx.sessions[x].native_load())
                .is_some_and(|n| n.id == *client_id && n.fallback.is_some()) =>
        {
            AgentRoute::NativeAnswer
        }
        _ if cx.ids.is_own(id) => AgentRoute::OwnAnswer,
        Some("session/list")
            if lists
                .of_request(client_id)
                .is_some_and(|(_, l)| l.forwarded) =>
        {
            AgentRoute::ListAnswer
        }
        _ => AgentRoute::Relay,
    };
    match (route, pending) {
        (AgentRoute::Relay, answered) => {
            let session = slot;
            (AgentRoute::Relay, Resolved { session, answered })
        }
        (route, Some(pending)) => {
            cx.pending.insert(key, *pending);
            (route, Resolved::default())
        }
        (route, None) => (route, Resolved::default()),
    }
}

/// Why an agent line naming `named` (in `slot` when the table has it; `update`: a
/// `session/update`) is held, if it is: its
/// session (a child's root: in a native load's replay the agent replays its children too)
/// hides the agent's own replay, a native load holds its replay, or a load is bringing the
/// session up.
fn held(cx: &Cx, loads: &Loads, named: &str, slot: Option<Slot>, update: bool) -> Option<Hold> {
    let sessions = &cx.sessions;
    let root = slot.and_then(|slot| sessions.root_at(slot));
    let root = root.map(|root| sessions.agent_id(root));
    let s = root.as_ref().map_or(named, |r| r.as_str());
    let session = match (&root, slot) {
        (None, Some(slot)) => Some(&sessions[slot]),
        (None, None) => None,
        (Some(_), _) => sessions.get(s),
    };
    // The agent-side session a load brings up natively may be another than the session's
    // own ID (the one of the agent's copies that holds every turn): its replay is the
    // session's, hidden too.
    let mapped_from = || {
        sessions
            .mapping_of_agent(AgentRef(s))
            .and_then(|(client, _)| sessions.get(client))
    };
    if update && (session.or_else(mapped_from)).is_some_and(Session::hides_replay) {
        Some(Hold::Hidden)
    } else if update
        && session
            .and_then(|x| x.native_load())
            .is_some_and(|n| n.holds_replay())
    {
        Some(Hold::NativeReplay(AgentSessionId::native(
            &SessionId::from(s),
        )))
    } else if sessions.starting_as(AgentRef(s))
        || (!session.is_some_and(|x| x.journal_open())
            && !sessions.knows(AgentRef(s))
            && loads.awaiting_new_session())
    {
        // A load is bringing the session up, or waits for the agent to start one it does not
        // know yet.
        Some(Hold::Starting(AgentSessionId::native(&SessionId::from(s))))
    } else {
        None
    }
}

/// What the core does with a client request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Handling {
    /// `session/load` or `session/resume` served from the journal (`replay`: the history
    /// goes first).
    FromJournal { replay: bool },
    /// A load or resume the agent does itself, kept by its session until answered.
    Native { replay: bool },
    /// An ACP v2 `session/resume` (its `replayFrom` decides).
    ResumeV2,
    /// `session/fork` made in the journal.
    Fork,
    /// `session/list`: the journal's, or merged with the agent's.
    List,
    /// `session/close` the agent does.
    CloseByAgent,
    /// `session/close` answered here.
    Close,
    /// `session/delete`.
    Delete,
    /// Nothing to do: the request passes.
    Pass,
}

/// The handling of a client request of `method` (`peek`): a `session/load` that asks for the
/// tail of the history only is served from the journal, whatever the agent can load.
fn handling(cx: &Cx, method: &str, peek: &Peek<'_>) -> Handling {
    if !matches!(
        method,
        "session/load"
            | "session/resume"
            | "session/fork"
            | "session/list"
            | "session/close"
            | "session/delete"
    ) {
        return Handling::Pass;
    }
    let emulates = cx.emulates_loading();
    let agent = &cx.agent;
    match method {
        "session/load" if cx.synthesizes_load() || (emulates && asks_tail(peek)) => {
            Handling::FromJournal { replay: true }
        }
        "session/load" => Handling::Native { replay: true },
        "session/resume" if agent.v2 && emulates => Handling::ResumeV2,
        "session/resume" if !agent.resume && emulates => Handling::FromJournal { replay: false },
        "session/resume" if emulates => Handling::Native { replay: false },
        "session/fork" if !agent.fork && emulates => Handling::Fork,
        "session/list" => Handling::List,
        "session/close" if agent.close => Handling::CloseByAgent,
        "session/close" => Handling::Close,
        "session/delete" => Handling::Delete,
        _ => Handling::Pass,
    }
}

/// A `session/load` that asks for the tail of the history only
/// ([`super::load_request::tail_turns`]).
fn asks_tail(peek: &Peek<'_>) -> bool {
    peek.params
        .filter(|p| p.get().contains("\"tail\""))
        .and_then(|p| serde_json::from_str(p.get()).ok())
        .is_some_and(|params| tail_turns(&params).is_some())
}

/// The operation a client's `$/cancel_request` or `session/cancel` notification (`method`)
/// cancels, and why: a load or restore served from the journal, or a list served here. On a
/// host's live session a `session/cancel` is for the turn, not for a client joining it.
fn cancelled(
    cx: &Cx,
    loads: &Loads,
    lists: &Lists,
    hosted: bool,
    method: &str,
    peek: &Peek<'_>,
) -> Option<(u64, &'static str)> {
    match method {
        "$/cancel_request" => {
            let rid = envelope::request_id(peek.params)?;
            let op = loads.by_request(&rid).or_else(|| {
                let (op, list) = lists.of_request(&rid)?;
                (!list.forwarded).then_some(op)
            })?;
            Some((op, "cancelled by $/cancel_request"))
        }
        "session/cancel" => {
            let s = peek.session.as_deref().map(SessionId::from)?;
            if hosted && cx.sessions.get(&s).is_some_and(Session::is_live) {
                return None;
            }
            Some((loads.of_session(&s)?, "cancelled by session/cancel"))
        }
        _ => None,
    }
}

/// What the owner of a line did with it ([`take_client`], [`take_agent`]).
pub(super) enum Taken {
    /// Given back: it is relayed.
    Relay,
    /// Taken.
    Done,
    /// Taken: a step of a load ([`Progress`]; a load cancelled is [`Progress::Done`]).
    Load(Progress),
    /// Taken: the client lines held for a restarted agent go on.
    Again(Vec<Bytes>),
}

/// The components a line may be handed to, besides the context.
pub(super) struct Owners<'a> {
    pub(super) handshake: &'a mut Handshake,
    pub(super) reused: &'a mut ReusedIds,
    pub(super) loads: &'a mut Loads,
    pub(super) lists: &'a mut Lists,
    pub(super) connections: &'a mut Connections,
    pub(super) forks: &'a mut Forks,
}

/// A client line (`msg`), handed to the component `route` names.
pub(super) fn take_client(
    cx: &mut Cx,
    owners: Owners<'_>,
    route: ClientRoute,
    msg: Line<'_>,
) -> Taken {
    let Owners {
        handshake,
        loads,
        lists,
        connections,
        forks,
        ..
    } = owners;
    let Line {
        at,
        peek,
        bytes: line,
    } = msg;
    let session = || peek.session.as_deref().map(SessionId::from);
    let taken = |taken: bool| if taken { Taken::Done } else { Taken::Relay };
    match route {
        ClientRoute::AwaitAgent | ClientRoute::Relay => Taken::Relay,
        ClientRoute::DeadAgentAnswer => {
            handshake.answer_dead_agent(cx, at, peek, line);
            Taken::Done
        }
        ClientRoute::BehindRestore(op) => taken(loads.wait_for_restore(op, line)),
        ClientRoute::Restore(step) => {
            let s = session().unwrap_or_default();
            restart::restore_first(cx, loads, at, &s, step, peek, line);
            Taken::Done
        }
        ClientRoute::Join(join) => {
            let (Kind::Request { id, .. }, Some(s)) = (&peek.kind, session()) else {
                return Taken::Relay;
            };
            clients::join_or_leave(cx, connections, loads, id, &s, join, msg);
            Taken::Done
        }
        ClientRoute::Request(handling) => {
            let Kind::Request { id, .. } = &peek.kind else {
                return Taken::Relay;
            };
            taken(take_request(cx, loads, lists, forks, handling, id, msg))
        }
        ClientRoute::Cancel(op, why) => {
            // Stop a synthetic operation and answer it with -32800.
            if !lists.cancel(cx, at, op, line, why) {
                loads.cancel(cx, at, op, line, why);
            }
            Taken::Load(Progress::Done)
        }
    }
}

/// A client request (`msg`, its id `id`) the core handles as `handling` says (true: taken
/// here).
fn take_request(
    cx: &mut Cx,
    loads: &mut Loads,
    lists: &mut Lists,
    forks: &mut Forks,
    handling: Handling,
    id: &RequestId,
    msg: Line<'_>,
) -> bool {
    let Line {
        at,
        peek,
        bytes: line,
    } = msg;
    let session = || peek.session.as_deref().map(SessionId::from);
    match handling {
        Handling::FromJournal { replay } => {
            loads.serve(cx, id, msg, replay, false);
            true
        }
        Handling::Native { replay } => {
            native::begin_native_load(cx, id, peek, replay);
            false
        }
        Handling::ResumeV2 => native::resume_v2(cx, loads, id, msg),
        Handling::Fork => {
            forks.start(cx, at, id, peek, line);
            true
        }
        Handling::List => lists.start(cx, at, id, peek, line),
        Handling::CloseByAgent => {
            if let Some(s) = session() {
                closing::closed_by_agent(cx, &s);
            }
            false
        }
        Handling::Close => session().is_some_and(|s| {
            closing::close(cx, at, &s, id, peek, line);
            true
        }),
        Handling::Delete => session().is_some_and(|s| closing::delete(cx, at, s, id, peek, line)),
        Handling::Pass => false,
    }
}

/// An agent line (`msg`), handed to the component `route` names.
pub(super) fn take_agent(
    cx: &mut Cx,
    owners: Owners<'_>,
    route: AgentRoute,
    msg: Line<'_>,
) -> Taken {
    let Owners {
        handshake,
        reused,
        loads,
        lists,
        connections,
        ..
    } = owners;
    let hosted = connections.is_hosted();
    let Line {
        at,
        peek,
        bytes: line,
    } = msg;
    let relay_held = |cx: &mut Cx, handshake: &mut Handshake, reused: &mut ReusedIds, held| {
        let mut with = Relaying {
            handshake,
            lists,
            reused,
            hosted,
        };
        edits::relay_held(cx, &mut with, at, held);
    };
    let Kind::Response { id, is_error } = &peek.kind else {
        let AgentRoute::Held(hold) = route else {
            return Taken::Relay;
        };
        return match holding::hold_agent_line(cx, &hold, line) {
            Holding::Taken => Taken::Done,
            Holding::Passes(held) => {
                relay_held(cx, handshake, reused, held);
                Taken::Relay
            }
        };
    };
    let failed = *is_error;
    match route {
        AgentRoute::NativeAnswer => match native::native_answered(cx, loads, id, line, failed) {
            NativeAnswer::NotNative => Taken::Relay,
            NativeAnswer::Passes(held) => {
                relay_held(cx, handshake, reused, held);
                Taken::Relay
            }
            NativeAnswer::Served => Taken::Done,
        },
        AgentRoute::OwnAnswer => match cx.ids.answered(id) {
            Some(Purpose::Load(op, step)) => {
                Taken::Load(loads.on_response(cx, op, step, msg, failed))
            }
            Some(purpose) => Taken::Again(handshake.answered(cx, at, purpose, peek, line, failed)),
            None => Taken::Relay,
        },
        AgentRoute::ListAnswer => match lists.agent_answered(&mut cx.ids, &cx.sessions, id, line) {
            ListAnswer::NotList => Taken::Relay,
            ListAnswer::Taken(Some(merged)) => {
                edits::forward_as_agent(cx, at, merged);
                Taken::Done
            }
            ListAnswer::Taken(None) => Taken::Done,
        },
        AgentRoute::NewSession => {
            // The answer waits while the store is asked about the ID it names, unless this
            // run opened it already.
            match reused.ask(peek, line, &cx.sessions, &mut cx.fx) {
                true => Taken::Done,
                false => Taken::Relay,
            }
        }
        AgentRoute::Held(_) | AgentRoute::Relay => Taken::Relay,
    }
}
