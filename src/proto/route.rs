//! Where a line goes, decided once, up front: [`client`] and [`agent`] read the line's peek
//! and what the core holds (the handshake, the line's session, the loads and lists under way,
//! the proxy's own request ids, whether the journals are being asked about a new session's ID)
//! and name the one component that owns the line ([`ClientRoute`], [`AgentRoute`]), changing
//! nothing but, for an agent's answer, the pending table (the entry of the request it answers
//! is taken out once and handed on with the line, with the slot of the answer's session, looked
//! up once, as a client line's session was as it arrived: [`Resolved`]) and the proxy's own ids
//! (an answer's purpose). [`take_client`] and [`take_agent`] then hand the line to its owner,
//! with the components it needs ([`Owners`]) and what the route resolved (the session a
//! restore, a close or a native load acts on: [`super::sessions::SessionMut`]), writing to the
//! session table what the owner decided of it, and say what became of it ([`Taken`]: what
//! follows is the proxy's). A client request's handling follows from its method, the mode
//! (`--load`) and what the agent declared ([`Handling`]): served from the journal, passed on
//! with what serves it should the agent fail it, answered here, or passed as it came; its
//! owners are handed it in [`requests`].

mod relayed;
mod requests;

use bytes::Bytes;

use super::clients::{self, Join};
use super::connection::Connections;
use super::context::Cx;
use super::edits::Relaying;
use super::fork::Forks;
use super::holding::{self, Hold, Holding};
use super::listing::Lists;
use super::load_request::tail_turns;
use super::load_state::Progress;
use super::loading::Loads;
use super::native::{self, NativeAnswer, replay_from};
use super::pending::{Purpose, Resolved};
use super::restart::{self, Handshake, Restore};
use super::reused_ids::ReusedIds;
use super::sessions::{Session, SessionTable, Slot};
use super::vocab::{AgentRef, AgentSessionId, Line, LoadMode, SessionId};
use crate::wire::Side;
use crate::wire::envelope::{self, Kind, Peek, RequestId};

pub(super) use relayed::{forward_as_agent, relay, send_asked};
pub(super) use requests::Handling;

/// The component that owns a client line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ClientRoute {
    /// A later connection's `initialize`: answered with the agent's recorded answer (the
    /// agent is initialized once: [`super::clients::answer_initialize_again`]).
    InitializeAgain,
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
    /// A `$/cancel_request` or `session/cancel` of a load or restore the journal serves (`op`,
    /// why).
    CancelLoad(u64, &'static str),
    /// A `$/cancel_request` of a list served here (`op`, why).
    CancelList(u64, &'static str),
    /// Nobody's but the session's: edited where it must be, journaled, forwarded.
    Relay,
}

/// The component that owns an agent line.
#[derive(Debug)]
pub(super) enum AgentRoute {
    /// A message while the journals are asked about a session the agent created (the answer
    /// that named it first, [`super::reused_ids`]): it waits for their answer.
    AwaitFreeId,
    /// The answer to a load or resume the client sent the agent itself, kept by its session
    /// ([`super::native::native_answered`]).
    NativeAnswer,
    /// The answer to a request of the proxy's own (a load's step, the handshake told again),
    /// and why the proxy sent it (taken out of the proxy's ids).
    OwnAnswer(Purpose),
    /// The answer to `session/list` `op`, which the core merges with the journal's.
    ListAnswer(u64),
    /// The successful answer to a client's `session/new`, while the journals can be asked whether
    /// the ID it names is an earlier run's ([`super::reused_ids::ReusedIds::ask`]).
    NewSession,
    /// A line of a session whose lines are held or hidden ([`super::holding`]).
    Held(Hold),
    /// Nobody's but the session's: edited where it must be, journaled, forwarded.
    Relay,
}

/// How a client line arrived: from a later connection (a request renumbered for it), and its
/// session's slot when the line names one the table had (looked up once, as it arrived).
#[derive(Clone, Copy, Debug)]
pub(super) struct Arrival {
    pub(super) later: bool,
    pub(super) slot: Option<Slot>,
}

/// The owner of a client line (`peek`, as it arrived: `arrival`; none for a line handled again),
/// among the components (`owners`), and the slot of the session it names as the route
/// resolved it (looked up again when the line arrived before the session was made).
pub(super) fn client(
    cx: &Cx,
    sessions: &SessionTable,
    owners: &Owners<'_>,
    peek: &Peek<'_>,
    arrival: Option<Arrival>,
) -> (ClientRoute, Option<Slot>) {
    let (handshake, connections) = (&*owners.handshake, &*owners.connections);
    let slot = arrival.and_then(|a| a.slot);
    if arrival.is_some_and(|a| a.later) && initialize_again(cx, peek) {
        return (ClientRoute::InitializeAgain, slot);
    }
    if handshake.reinit.is_some() && peek.is_message() {
        return (ClientRoute::AwaitAgent, slot);
    }
    if cx.config().load == LoadMode::Off {
        return (ClientRoute::Relay, slot);
    }
    if let Kind::Response { id, .. } = &peek.kind {
        let route = match handshake.dead.contains_key(id) {
            true => ClientRoute::DeadAgentAnswer,
            false => ClientRoute::Relay,
        };
        return (route, slot);
    }
    let method = peek.method();
    let Some((s, method)) = peek.session.as_deref().zip(method) else {
        return (owner_of(cx, sessions, owners, peek), slot);
    };
    // The line's session: in its slot, else looked up (it may have been made since).
    let slot = slot.or_else(|| sessions.slot(s));
    let session = slot.map(|x| &sessions[x]);
    if let Some(route) = session.and_then(|x| restoring(x, method, &peek.kind)) {
        return (route, slot);
    }
    if let Kind::Request { id, .. } = &peek.kind
        && connections.is_hosted()
        && let Some(join) = joining(cx, connections, id, method, session, peek)
    {
        return (ClientRoute::Join(join), slot);
    }
    (owner_of(cx, sessions, owners, peek), slot)
}

/// The owner of a client request or notification (`peek`) by its method: a request the core
/// handles ([`Handling`]), the cancel of an operation it serves, else the relay.
fn owner_of(cx: &Cx, sessions: &SessionTable, owners: &Owners<'_>, peek: &Peek<'_>) -> ClientRoute {
    let connections = &*owners.connections;
    match (&peek.kind, peek.method()) {
        (Kind::Request { .. }, Some(method)) => match handling(cx, method, peek) {
            Handling::Pass => ClientRoute::Relay,
            handling => ClientRoute::Request(handling),
        },
        (Kind::Notification { method }, _) => {
            let (loads, lists) = (&*owners.loads, &*owners.lists);
            let hosted = connections.is_hosted();
            cancelled(sessions, loads, lists, hosted, method, peek).unwrap_or(ClientRoute::Relay)
        }
        _ => ClientRoute::Relay,
    }
}

/// A later connection's `initialize` request (`peek`), once the agent answered the first's.
fn initialize_again(cx: &Cx, peek: &Peek<'_>) -> bool {
    matches!(&peek.kind, Kind::Request { method, .. } if method == "initialize")
        && (cx.peers().initialize.response.as_deref())
            .is_some_and(|answer| envelope::peek(answer).result.is_some())
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
        "session/load" | "session/resume" if live && !cx.peers().agent.v2 => Some(Join::Live {
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
    sessions: &mut SessionTable,
    owners: &Owners<'_>,
    peek: &Peek<'_>,
) -> (AgentRoute, Resolved) {
    let (loads, lists) = (&*owners.loads, &*owners.lists);
    // Messages wait; anything else is no message of the protocol and passes as it always does.
    if owners.reused.asking() && peek.is_message() {
        return (AgentRoute::AwaitFreeId, Resolved::default());
    }
    if cx.config().load == LoadMode::Off {
        return (AgentRoute::Relay, Resolved::default());
    }
    match &peek.kind {
        Kind::Response { id, is_error } => answer(cx, sessions, lists, id, *is_error),
        Kind::Notification { .. } | Kind::Request { .. } => {
            let Some(named) = peek.session.as_deref() else {
                return (AgentRoute::Relay, Resolved::default());
            };
            // The session the line names, looked up once: the relay reaches it by its slot.
            let slot = sessions.slot(named);
            let update = peek.method() == Some("session/update");
            match held(sessions, loads, named, slot, update) {
                Some(hold) => (AgentRoute::Held(hold), Resolved::default()),
                None => (
                    AgentRoute::Relay,
                    Resolved {
                        session: slot,
                        ..Resolved::default()
                    },
                ),
            }
        }
        _ => (AgentRoute::Relay, Resolved::default()),
    }
}

/// The owner of the agent's answer to request `id`, decided by the one request it answers:
/// the client's (its pending entry, under the client's own id should the proxy have
/// renumbered it), else the proxy's own (why it was sent, taken out of the proxy's ids). The
/// entry is taken out of the table, and its session looked up, both handed on with the answer
/// to the relay, or to the native load it ends (its session's); the list merging the answer,
/// and a new session's answer waiting on the journals, find the entry in the table again when
/// the answer goes on.
fn answer(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    lists: &Lists,
    id: &RequestId,
    failed: bool,
) -> (AgentRoute, Resolved) {
    let key = (Side::Client, cx.ids().client_id(id));
    let client_id = &key.1;
    let pending = cx.pending_mut().remove(&key).map(Box::new);
    let slot = pending
        .as_ref()
        .and_then(|p| p.session.as_deref())
        .and_then(|s| sessions.slot(s));
    let route = match pending.as_ref().map(|p| p.method.as_str()) {
        Some("session/new") if !failed && cx.config().asks_free_ids => AgentRoute::NewSession,
        Some("session/load" | "session/resume")
            if slot
                .and_then(|x| sessions[x].native_load())
                .is_some_and(|n| n.id == *client_id && n.fallback.is_some()) =>
        {
            AgentRoute::NativeAnswer
        }
        _ if let Some(purpose) = cx.ids().answered(id) => AgentRoute::OwnAnswer(purpose),
        Some("session/list") if let Some(op) = forwarded_list(lists, client_id) => {
            AgentRoute::ListAnswer(op)
        }
        _ => AgentRoute::Relay,
    };
    match (route, pending) {
        (route @ (AgentRoute::Relay | AgentRoute::NativeAnswer), answered) => {
            let session = slot;
            let resolved = Resolved {
                session,
                answered,
                ..Resolved::default()
            };
            (route, resolved)
        }
        (route, Some(pending)) => {
            cx.pending_mut().insert(key, *pending);
            (route, Resolved::default())
        }
        (route, None) => (route, Resolved::default()),
    }
}

/// The list `op` the client's `session/list` request `id` is, when the core forwarded it to
/// the agent to merge its answer with the journal's.
fn forwarded_list(lists: &Lists, id: &RequestId) -> Option<u64> {
    let (op, list) = lists.of_request(id)?;
    list.forwarded.then_some(op)
}

/// Why an agent line naming `named` (in `slot` when the table has it; `update`: a
/// `session/update`) is held, if it is: its
/// session (a child's root: in a native load's replay the agent replays its children too)
/// hides the agent's own replay, a native load holds its replay, or a load is bringing the
/// session up.
fn held(
    sessions: &SessionTable,
    loads: &Loads,
    named: &str,
    slot: Option<Slot>,
    update: bool,
) -> Option<Hold> {
    let root = slot.and_then(|slot| sessions.root_at(slot));
    let root = root.map(|root| sessions.agent_id(root));
    let s = root.as_ref().map_or(named, |r| r.as_str());
    let found = match (&root, slot) {
        (None, slot) => slot,
        (Some(_), _) => sessions.slot(s),
    };
    let session = found.map(|x| &sessions[x]);
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
        && let Some(found) = found
        && (sessions[found].native_load()).is_some_and(|n| n.holds_replay())
    {
        Some(Hold::NativeReplay(found))
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

/// An agent request or notification (`line`) held as the route decided ([`Hold`]).
fn hold_agent_line(cx: &Cx, sessions: &mut SessionTable, hold: Hold, line: &Bytes) -> Holding {
    match hold {
        Hold::Hidden => Holding::Taken,
        Hold::NativeReplay(slot) => holding::hold_native_replay(sessions.at_mut(slot), line),
        Hold::Starting(session) => {
            let agent = AgentRef(session.as_str());
            if sessions.hold_starting(agent, line, cx.config().held_limit) {
                return Holding::Taken;
            }
            // Past the bound the lines go out as they come, after those held.
            Holding::Passes(sessions.take_starting(agent))
        }
    }
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
    let agent = cx.peers().agent;
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

/// The cancel of an operation a client's `$/cancel_request` or `session/cancel` notification
/// (`method`) is, and why: of a load or restore served from the journal, or of a list served
/// here. On a
/// host's live session a `session/cancel` is for the turn, not for a client joining it.
fn cancelled(
    sessions: &SessionTable,
    loads: &Loads,
    lists: &Lists,
    hosted: bool,
    method: &str,
    peek: &Peek<'_>,
) -> Option<ClientRoute> {
    match method {
        "$/cancel_request" => {
            let rid = envelope::request_id(peek.params)?;
            let why = "cancelled by $/cancel_request";
            if let Some(op) = loads.by_request(&rid) {
                return Some(ClientRoute::CancelLoad(op, why));
            }
            let (op, list) = lists.of_request(&rid)?;
            (!list.forwarded).then_some(ClientRoute::CancelList(op, why))
        }
        "session/cancel" => {
            let s = peek.session.as_deref().map(SessionId::from)?;
            if hosted && sessions.get(&s).is_some_and(Session::is_live) {
                return None;
            }
            let op = loads.of_session(&s)?;
            Some(ClientRoute::CancelLoad(op, "cancelled by session/cancel"))
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
    /// Taken: lines that waited go on, from `from` (the client lines held for a restarted
    /// agent, the agent lines held while the journals were asked about a new session's ID).
    Again { from: Side, lines: Vec<Bytes> },
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

/// A client line (`msg`; the session it names in `slot`, as [`client`] resolved it), handed
/// to the component `route` names.
pub(super) fn take_client(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    owners: Owners<'_>,
    route: ClientRoute,
    msg: Line<'_>,
    slot: Option<Slot>,
) -> Taken {
    let Line {
        at,
        peek,
        bytes: line,
    } = msg;
    let taken = |taken: bool| if taken { Taken::Done } else { Taken::Relay };
    match route {
        ClientRoute::AwaitAgent | ClientRoute::Relay => Taken::Relay,
        ClientRoute::InitializeAgain => {
            clients::answer_initialize_again(cx, msg);
            Taken::Done
        }
        ClientRoute::DeadAgentAnswer => {
            owners.handshake.answer_dead_agent(cx, at, peek, line);
            Taken::Done
        }
        ClientRoute::BehindRestore(op) => taken(owners.loads.wait_for_restore(op, line)),
        ClientRoute::Restore(step) => {
            // A session to restore is one the table has.
            let Some(slot) = slot else {
                return Taken::Relay;
            };
            restart::restore_first(cx, owners.loads, sessions.at_mut(slot), step, msg);
            Taken::Done
        }
        ClientRoute::Join(join) => {
            if let (Join::Leave, Some(slot), Kind::Request { id, .. }) = (join, slot, &peek.kind) {
                // The connection leaves the session.
                sessions.at_mut(slot).detach(owners.connections.conn_of(id));
            }
            let (connections, loads) = (owners.connections, owners.loads);
            match clients::join_or_leave(cx, sessions, connections, loads, join, msg) {
                Some(asked) => {
                    relayed::send_asked(cx, sessions, at, asked);
                    Taken::Done
                }
                None => Taken::Relay,
            }
        }
        ClientRoute::Request(handling) => {
            let owners = requests::Owners {
                loads: owners.loads,
                lists: owners.lists,
                forks: owners.forks,
            };
            taken(requests::take_request(
                cx, sessions, owners, handling, msg, slot,
            ))
        }
        // Stop a synthetic operation and answer it with -32800.
        ClientRoute::CancelLoad(op, why) => {
            let session = owners.loads.session(op).map(|s| sessions.scoped(s));
            owners.loads.cancel(cx, session, (at, op), line, why);
            Taken::Load(Progress::Done)
        }
        ClientRoute::CancelList(op, why) => {
            owners.lists.cancel(cx, at, op, line, why);
            Taken::Load(Progress::Done)
        }
    }
}

/// An agent line (`msg`; for an answer the route handed to a native load, the slot of its
/// session), handed to the component `route` names. Agent lines that were held and now pass
/// are relayed ahead of it.
pub(super) fn take_agent(
    cx: &mut Cx,
    sessions: &mut SessionTable,
    owners: Owners<'_>,
    route: AgentRoute,
    msg: Line<'_>,
    slot: Option<Slot>,
) -> Taken {
    let Line {
        at,
        peek,
        bytes: line,
    } = msg;
    let failed = matches!(peek.kind, Kind::Response { is_error: true, .. });
    let passing = match route {
        AgentRoute::Held(hold) => match hold_agent_line(cx, sessions, hold, line) {
            Holding::Taken => return Taken::Done,
            Holding::Passes(held) => held,
        },
        AgentRoute::NativeAnswer => {
            // The route hands a native load's answer on with its session's slot.
            let Some(slot) = slot else {
                return Taken::Relay;
            };
            match native::native_answered(cx, owners.loads, sessions.at_mut(slot), msg) {
                NativeAnswer::Passes(held) => held,
                NativeAnswer::Served => return Taken::Done,
            }
        }
        AgentRoute::OwnAnswer(Purpose::Load(op, step)) => {
            // The load acts on its session, handed over (none: the load is gone).
            let session = owners.loads.session(op).map(|s| sessions.scoped(s));
            let loads = owners.loads;
            return Taken::Load(loads.on_response(cx, session, (op, step), msg, failed));
        }
        AgentRoute::OwnAnswer(purpose) => {
            let lines = owners
                .handshake
                .answered(cx, sessions, purpose, msg, failed);
            return Taken::Again {
                from: Side::Client,
                lines,
            };
        }
        AgentRoute::AwaitFreeId => {
            return match owners.reused.hold(line, cx.config().held_limit) {
                None => Taken::Done,
                Some(lines) => Taken::Again {
                    from: Side::Agent,
                    lines,
                },
            };
        }
        AgentRoute::ListAnswer(op) => {
            if let Some(merged) = owners.lists.agent_answered(cx.ids(), sessions, op, msg) {
                relayed::forward_as_agent(cx, sessions, at, merged);
            }
            return Taken::Done;
        }
        AgentRoute::NewSession => {
            // The answer waits while the journals are asked about the ID it names, unless this
            // run opened it already.
            return match owners.reused.ask(peek, line, sessions, cx.fx()) {
                true => Taken::Done,
                false => Taken::Relay,
            };
        }
        AgentRoute::Relay => return Taken::Relay,
    };
    let mut with = Relaying {
        hosted: owners.connections.is_hosted(),
        handshake: owners.handshake,
        lists: owners.lists,
        reused: owners.reused,
    };
    relayed::relay_held(cx, sessions, &mut with, at, passing);
    Taken::Relay
}
