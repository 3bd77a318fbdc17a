//! The session table: one [`Session`] per client-facing session ID, with an explicit
//! [`AgentSide`], and the index from agent-side IDs back to client-facing ones.
//!
//! What the core knows about a session lives here, so no two collections can disagree, and
//! every lookup a message needs is one hash probe (no scan over sessions); a line's session is
//! looked up once, as the route resolves it, and reached again by its place in the table
//! ([`Slot`]: the table never removes a session). A [`Session`] holds where it stands on the
//! agent, its turn (who prompted, its stall watch, ACP v2 foreground work), its held lines,
//! its native load, its catalog facts, its connections' membership, the agent restart it was
//! lost in, and, for a child session (a subagent's), the root of its tree ([`super::tree`]: a
//! child is the table's entry for its ID). What concerns one session is a [`Session`] method,
//! called on the session the route resolved ([`SessionMut`]); what goes over every session is
//! the table's own (the stall watches checked, [`SessionTable::watches_mut`]; an agent's end,
//! [`SessionTable::lose_live`] and [`SessionTable::agent_gone`]; a connection's,
//! [`SessionTable::detach_everywhere`]), applied by the proxy that owns the table, and read
//! through [`SessionTable::iter`]; the bound on the agent lines held while loads start is
//! `held.rs`'s.
//!
//! The core's collections keyed by session are three: the table ([`SessionTable`]'s
//! `sessions`), the index from agent-side IDs (`by_agent`), and one ordered queue outside the
//! table, routing's attachments (`connection::routing::Unsettled::attachments`): a connection
//! is attached to a session (or detached) as routing decides, which can be before the table has
//! the session (a host's join begins with its request; the session's entry comes later, or
//! never), and the core applies them in order when it settles, to the sessions the table has
//! by then. A session's entry is made only when the session is (a table entry is what attaches
//! a host's joining connection): a load that starts before it keeps its session in the load
//! (`load_state::Load::latest` says which is the session's latest), not in the table.

mod session;

pub(super) use session::Session;

use bytes::Bytes;

use super::agent_side::Mapping;
use super::held::{HeldLines, HeldWhileStarting};
use super::lookups::Lookups;
use super::prompt::PromptWatch;
use super::tree::TREE_LIMIT;
use super::turn_facts::Facts;
use super::vocab::{
    AgentRef, AgentSessionId, CatalogUpdate, ConnId, HashMap, IndexMap, SessionId, Stamp,
};
use crate::wire::envelope::RequestId;

/// A session's place in the table, found once by its ID ([`SessionTable::slot`],
/// [`SessionTable::made`]): it reaches the session again without a lookup (the table indexed
/// by it), and stays that session's (the table never removes a session).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Slot(usize);

/// A session the route resolved, handed to the component that owns the line: its ID (the
/// table's own) and the session, changed through its methods (it derefs to [`Session`]); the
/// table's tallies of what its sessions hold go with it, and follow its changes.
#[derive(Debug)]
pub(super) struct SessionMut<'a> {
    id: &'a SessionId,
    session: &'a mut Session,
    tally: &'a mut Tally,
}

/// A session by its ID, handed by the route (or the proxy) to the component that changes that
/// session over several inputs and no other (a load: the session it brings up): read while the
/// table may not have it yet, made in the table by the first change that needs it.
#[derive(Debug)]
pub(super) struct ScopedSession<'a> {
    table: &'a mut SessionTable,
    id: SessionId,
}

impl ScopedSession<'_> {
    /// Its ID.
    pub(super) fn id(&self) -> &SessionId {
        &self.id
    }

    /// The session, if the table has it.
    pub(super) fn get(&self) -> Option<&Session> {
        self.table.get(&self.id)
    }

    /// The session, to change, if the table has it.
    pub(super) fn get_mut(&mut self) -> Option<&mut Session> {
        self.table.get_mut(&self.id)
    }

    /// The session, to change, made if the table has none.
    pub(super) fn made(&mut self) -> &mut Session {
        self.table.entry(&self.id)
    }

    /// Mapped to agent-side `mapping.agent` ([`SessionTable::map`]).
    pub(super) fn map(&mut self, mapping: Mapping) {
        self.table.map(&self.id, mapping);
    }

    /// Its journal open in this run ([`SessionTable::open_journal`]).
    pub(super) fn open_journal(&mut self) -> bool {
        self.table.open_journal(&self.id)
    }

    /// The ID the agent knows it by.
    pub(super) fn agent_id(&self) -> AgentSessionId {
        self.table.agent_id(&self.id)
    }
}

/// What the table's sessions hold, kept as they change so that the common case asks none of
/// them: facts not taken yet, prompts watched for stalls.
#[derive(Debug, Default)]
struct Tally {
    /// Some session's [`Facts`] may hold something not taken yet.
    facts_wait: bool,
    /// How many sessions' prompts in flight are watched for stalls (the watch is the
    /// session's: [`Turn`]); none, the common case, costs no lookup.
    watched: usize,
}

impl<'a> SessionMut<'a> {
    /// Its ID, as the table holds it.
    pub(super) fn id(&self) -> &SessionId {
        self.id
    }

    /// What the catalog learns of it, to add to.
    pub(super) fn facts(self) -> &'a mut Facts {
        self.tally.facts_wait = true;
        self.session.facts_mut()
    }

    /// The client sent it a prompt (request `id`), watched from `at`.
    pub(super) fn start_prompt(&mut self, id: RequestId, at: Stamp) {
        if self.session.start_watch(PromptWatch::new(id, at)) {
            self.tally.watched += 1;
        }
    }

    /// Its prompt is over: answered (request `id`), or (`None`, ACP v2) the agent reported it
    /// idle.
    pub(super) fn end_prompt(&mut self, id: Option<&RequestId>) {
        if self.session.end_watch(id) {
            self.tally.watched -= 1;
        }
    }

    /// Its journal open in this run: true when it opened now, and the context must say so
    /// ([`super::context::Cx::open_journal`]).
    pub(super) fn open_journal(&mut self) -> bool {
        self.session.open_journal()
    }
}

impl std::ops::Deref for SessionMut<'_> {
    type Target = Session;
    fn deref(&self) -> &Session {
        self.session
    }
}

impl std::ops::DerefMut for SessionMut<'_> {
    fn deref_mut(&mut self) -> &mut Session {
        self.session
    }
}

/// Every session of the connection, in the order they were made (a session's place: its
/// [`Slot`]); a test build counts its lookups by ID ([`SessionTable::lookups`]).
#[derive(Debug, Default)]
pub(super) struct SessionTable {
    sessions: IndexMap<SessionId, Session>,
    /// Agent-side ID → client-facing ID, for mapped sessions.
    by_agent: HashMap<AgentSessionId, SessionId>,
    tally: Tally,
    /// How many child sessions (subagents) were announced in this run (bounded:
    /// [`TREE_LIMIT`]).
    children: usize,
    /// The agent lines held while loads bring their sessions up: the bound across the table,
    /// and those of no session known yet.
    held: HeldWhileStarting,
    lookups: Lookups,
}

impl SessionTable {
    /// Lookups by ID so far (a test build's).
    #[cfg(test)]
    pub(super) fn lookups(&self) -> usize {
        self.lookups.get()
    }

    /// The shared ID of a session already known (no allocation), or a new one.
    pub(super) fn id(&self, s: &str) -> SessionId {
        self.lookups.count();
        self.sessions
            .get_key_value(s)
            .map_or_else(|| SessionId::from(s), |(k, _)| k.clone())
    }

    /// The session whose journal, connections and activity `s`'s lines are: the root of its
    /// tree when `s` is a child session ([`super::tree`]), else `s` itself (the shared ID).
    pub(super) fn owner(&self, s: &str) -> SessionId {
        self.lookups.count();
        match self.sessions.get_key_value(s) {
            Some((k, session)) => session.root().unwrap_or(k).clone(),
            None => SessionId::from(s),
        }
    }

    /// The session in `slot` as [`SessionTable::owner`] says (the root of its tree when it is a
    /// child session, else itself), and its slot when it is the session itself.
    pub(super) fn owner_at(&self, slot: Slot) -> (SessionId, Option<Slot>) {
        match self[slot].root() {
            Some(root) => (root.clone(), None),
            None => (self.key_at(slot).clone(), Some(slot)),
        }
    }

    /// The ID of the session in `slot`.
    fn key_at(&self, slot: Slot) -> &SessionId {
        let (s, _) = self
            .sessions
            .get_index(slot.0)
            .expect("a slot of the table");
        s
    }

    /// The root of the tree of the session in `slot`, when it is a child session.
    pub(super) fn root_at(&self, slot: Slot) -> Option<&SessionId> {
        self[slot].root()
    }

    /// Session `s`'s slot, if the table has it (the one lookup of a line's session).
    pub(super) fn slot(&self, s: &str) -> Option<Slot> {
        self.lookups.count();
        self.sessions.get_index_of(s).map(Slot)
    }

    /// Session `s`'s slot, the session made if the table has none.
    pub(super) fn made(&mut self, s: &SessionId) -> Slot {
        self.lookups.count();
        let entry = self.sessions.entry(s.clone());
        let slot = Slot(entry.index());
        entry.or_default();
        slot
    }

    /// Session `id`, made or not, to hand to the one component that changes it
    /// ([`ScopedSession`]).
    pub(super) fn scoped(&mut self, id: SessionId) -> ScopedSession<'_> {
        ScopedSession { table: self, id }
    }

    /// The session in `slot`, with its ID, to hand to the component that owns a line.
    pub(super) fn at_mut(&mut self, slot: Slot) -> SessionMut<'_> {
        let (id, session) = self
            .sessions
            .get_index_mut(slot.0)
            .expect("a slot of the table");
        let tally = &mut self.tally;
        SessionMut { id, session, tally }
    }

    /// The root of `s`'s tree, when `s` is a child session announced in this run (none
    /// announced, the common case, costs no lookup).
    pub(super) fn root_of(&self, s: &str) -> Option<&SessionId> {
        if self.children == 0 {
            return None;
        }
        self.lookups.count();
        self.sessions.get(s)?.root()
    }

    /// Session `parent` announced `child`: the root of its tree when `child` becomes a child
    /// (an ID the table holds no session under, announced for the first time, while the tree
    /// has room; an ID is never its own child).
    pub(super) fn announce_child(&mut self, parent: &SessionId, child: &str) -> Option<SessionId> {
        self.lookups.count();
        if self.sessions.contains_key(child)
            || self.by_agent.contains_key(child)
            || self.children >= TREE_LIMIT
            || **parent == *child
        {
            return None;
        }
        let root = self.owner(parent);
        self.children += 1;
        let session = Session::child_of(root.clone());
        self.sessions.insert(SessionId::from(child), session);
        Some(root)
    }

    /// Session `s`, made if the table has none.
    pub(super) fn entry(&mut self, s: &SessionId) -> &mut Session {
        let slot = self.made(s);
        &mut self[slot]
    }

    /// Session `s`, if the table has it.
    pub(super) fn get(&self, s: &str) -> Option<&Session> {
        self.lookups.count();
        self.sessions.get(s)
    }

    /// Session `s`, to change, if the table has it.
    pub(super) fn get_mut(&mut self, s: &str) -> Option<&mut Session> {
        self.lookups.count();
        self.sessions.get_mut(s)
    }

    /// What the catalog learns of the session in `slot`, to add to.
    pub(super) fn facts(&mut self, slot: Slot) -> &mut Facts {
        self.at_mut(slot).facts()
    }

    /// What the catalog learned and was not told yet, by session in order of ID
    /// ([`Facts::take`]).
    pub(super) fn take_facts(&mut self) -> Vec<(CatalogUpdate, i64)> {
        let mut out = Vec::new();
        if !std::mem::take(&mut self.tally.facts_wait) {
            return out;
        }
        let mut sessions: Vec<(&SessionId, &mut Session)> = self.sessions.iter_mut().collect();
        sessions.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (s, session) in sessions {
            session.facts_mut().take(s, &mut out);
        }
        out
    }

    /// True when a prompt is in flight in some session (the common case costs no lookup).
    pub(super) fn prompting(&self) -> bool {
        self.tally.watched > 0
    }

    /// The prompt of the session in `slot` is over: answered (request `id`), or (`None`, ACP
    /// v2) the agent reported the session idle.
    pub(super) fn end_prompt(&mut self, slot: Slot, id: Option<&RequestId>) {
        self.at_mut(slot).end_prompt(id);
    }

    /// The watches on the prompts in flight, by session, to check (a walk over the table: ask
    /// [`SessionTable::prompting`] first).
    pub(super) fn watches_mut(&mut self) -> impl Iterator<Item = (&SessionId, &mut PromptWatch)> {
        (self.sessions.iter_mut()).filter_map(|(s, session)| Some((s, session.watch_mut()?)))
    }

    /// The agent restarted (its `restart`th restart): every live session is lost in it
    /// ([`Session::lose`]); their IDs, in order.
    pub(super) fn lose_live(&mut self, restart: u64) -> Vec<SessionId> {
        let mut lost: Vec<SessionId> = (self.sessions.iter_mut())
            .filter_map(|(id, session)| session.lose(restart).then(|| id.clone()))
            .collect();
        lost.sort_unstable();
        lost
    }

    /// The agent is gone: no native load it was running goes on, its prompts are answered
    /// already (their watches end), and the sessions it was busy in (ACP v2: foreground work
    /// reported) no longer are; those, in order of ID.
    pub(super) fn agent_gone(&mut self) -> Vec<SessionId> {
        let mut busy: Vec<SessionId> = (self.sessions.iter_mut())
            .filter_map(|(id, session)| session.take_foreground().then(|| id.clone()))
            .collect();
        busy.sort_unstable();
        let watched = std::mem::take(&mut self.tally.watched) > 0;
        for session in self.sessions.values_mut() {
            session.forget_native_load();
            if watched {
                session.end_watch(None);
            }
        }
        busy
    }

    pub(super) fn journal_open(&self, s: &str) -> bool {
        self.lookups.count();
        self.sessions.get(s).is_some_and(Session::journal_open)
    }

    /// Session `session`'s journal open in this run (the session made if the table has none),
    /// unless it is already: true when it opened now, and the context must say so
    /// ([`super::context::Cx::open_journal`]).
    pub(super) fn open_journal(&mut self, session: &SessionId) -> bool {
        let slot = self.made(session);
        self.at_mut(slot).open_journal()
    }

    /// Map client-facing `session` to agent-side `mapping.agent`, persistently. While the session
    /// is starting the mapping waits in its state; otherwise the session is live, mapped.
    pub(super) fn map(&mut self, session: &SessionId, mapping: Mapping) {
        self.by_agent.insert(mapping.agent.clone(), session.clone());
        self.entry(session).map(mapping);
    }

    /// The ID the agent knows the session by.
    pub(super) fn agent_id(&self, session: &SessionId) -> AgentSessionId {
        self.lookups.count();
        (self.sessions.get(session))
            .map_or_else(|| AgentSessionId::native(session), |x| x.agent_id(session))
    }

    /// The client-facing session of an agent-side ID: the one it was mapped from, else the
    /// same ID (a session live natively).
    pub(super) fn client_of(&self, agent: AgentRef<'_>) -> SessionId {
        self.client_of_at(agent, None).0
    }

    /// [`Self::client_of`], with the agent-side ID's own slot when the route found it: the
    /// client-facing session, and its slot when that is the one found.
    pub(super) fn client_of_at(
        &self,
        agent: AgentRef<'_>,
        slot: Option<Slot>,
    ) -> (SessionId, Option<Slot>) {
        match (self.client_mapped(agent), slot) {
            (Some(client), _) => (client.clone(), None),
            (None, Some(slot)) => (self.key_at(slot).clone(), Some(slot)),
            (None, None) => (self.id(agent.0), None),
        }
    }

    /// The mapping of the client-facing session an agent-side ID belongs to.
    pub(super) fn mapping_of_agent(&self, agent: AgentRef<'_>) -> Option<(&SessionId, &Mapping)> {
        let client = self.client_mapped(agent)?;
        Some((client, self.sessions.get(client)?.mapping()?))
    }

    /// The client-facing session an agent-side ID is mapped from (none mapped, the common
    /// case, costs no lookup).
    fn client_mapped(&self, agent: AgentRef<'_>) -> Option<&SessionId> {
        if self.by_agent.is_empty() {
            return None;
        }
        self.lookups.count();
        self.by_agent.get(agent.0)
    }

    /// True while a load is bringing up the session the agent-side ID is mapped to: its lines
    /// are held until the load is answered.
    pub(super) fn starting_as(&self, agent: AgentRef<'_>) -> bool {
        let Some(client) = self.client_mapped(agent) else {
            return false;
        };
        self.sessions.get(client).is_some_and(|s| {
            s.is_starting() && s.mapping().is_some_and(|m| m.agent.as_str() == agent.0)
        })
    }

    /// True when the agent-side ID is known to the table, as a mapping or as a session
    /// (natively live sessions have the same ID on both sides).
    pub(super) fn knows(&self, agent: AgentRef<'_>) -> bool {
        self.journal_open(agent.0) || self.by_agent.contains_key(agent.0)
    }

    /// Every session, by ID (in no order).
    pub(super) fn iter(&self) -> impl Iterator<Item = (&SessionId, &Session)> {
        self.sessions.iter()
    }

    /// Connection `conn` ended: detached from every session (they live on).
    pub(super) fn detach_everywhere(&mut self, conn: ConnId) {
        for session in self.sessions.values_mut() {
            session.detach(conn);
        }
    }

    /// Hold an agent line of agent-side session `agent` while a load brings its session up
    /// (unclaimed when no mapping names it yet). False, and nothing held, once the lines held
    /// across the table would pass `limit` bytes ([`HeldWhileStarting::hold`]).
    pub(super) fn hold_starting(
        &mut self,
        agent: AgentRef<'_>,
        line: &Bytes,
        limit: usize,
    ) -> bool {
        self.lookups.count();
        let session = held_of(&self.by_agent, &mut self.sessions, agent);
        self.held.hold(session, line, limit)
    }

    /// The lines held so far for agent-side session `agent` (or unclaimed), to pass before its
    /// next one.
    pub(super) fn take_starting(&mut self, agent: AgentRef<'_>) -> Vec<Bytes> {
        self.lookups.count();
        let session = held_of(&self.by_agent, &mut self.sessions, agent);
        self.held.take(session)
    }

    /// True while agent lines of sessions not known yet are held.
    pub(super) fn holds_unclaimed(&self) -> bool {
        self.held.holds_unclaimed()
    }

    /// The unclaimed lines, once an agent answer may have named their sessions
    /// ([`HeldWhileStarting::take_unclaimed`]).
    pub(super) fn take_unclaimed(&mut self) -> Vec<Bytes> {
        self.held.take_unclaimed()
    }

    /// A load ended (or the agent did): the unclaimed lines, then those of every session no
    /// load is bringing up any more ([`HeldWhileStarting::release`]).
    pub(super) fn release_held(&mut self) -> Vec<Bytes> {
        let sessions = self.sessions.values_mut();
        let held = sessions.filter_map(Session::held_to_release);
        self.held.release(held)
    }

    /// The agent lines held while loads bring their sessions up, for tests of the core.
    #[cfg(test)]
    pub(super) fn held(&self) -> &HeldWhileStarting {
        &self.held
    }

    /// Agent-side ID → client-facing ID, for every mapping made in this connection.
    pub(super) fn agent_ids(&self) -> impl Iterator<Item = (&AgentSessionId, &SessionId)> {
        self.by_agent.iter()
    }
}

/// The held lines of the session agent-side session `agent` is mapped from (`by_agent`, in
/// `sessions`); `None` when no mapping names it.
fn held_of<'a>(
    by_agent: &HashMap<AgentSessionId, SessionId>,
    sessions: &'a mut IndexMap<SessionId, Session>,
    agent: AgentRef<'_>,
) -> Option<&'a mut HeldLines> {
    let client = by_agent.get(agent.0)?;
    Some(sessions.get_mut(client)?.held_mut())
}

/// The session in a slot (a slot is the table's own: [`SessionTable::slot`]).
impl std::ops::Index<Slot> for SessionTable {
    type Output = Session;
    fn index(&self, slot: Slot) -> &Session {
        &self.sessions[slot.0]
    }
}

/// The session in a slot, to change.
impl std::ops::IndexMut<Slot> for SessionTable {
    fn index_mut(&mut self, slot: Slot) -> &mut Session {
        &mut self.sessions[slot.0]
    }
}
