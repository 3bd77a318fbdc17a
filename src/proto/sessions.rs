//! The session table: one [`Session`] per client-facing session ID, with an explicit
//! [`AgentSide`], and the index from agent-side IDs back to client-facing ones.
//!
//! Everything the core knows about a session lives here, so no two collections can disagree,
//! and every lookup a message needs is one hash probe (no scan over sessions or operations).

use bytes::Bytes;

use super::effects::Effects;
use super::held::HeldLines;
use super::load_request::{NativeLoad, SetupParams};
use super::membership::Membership;
use super::prompt::{PromptWatch, Prompter, Stall, Turn};
use super::tree::SessionTree;
use super::turn_facts::Facts;
use super::vocab::{
    Action, AgentRef, AgentSessionId, CatalogUpdate, ConnId, HashMap, Initialize, SessionId, Stamp,
};
use crate::wire::envelope::RequestId;

/// A client-facing session continued on a different agent-side session.
#[derive(Clone, Debug)]
pub(super) struct Mapping {
    /// The agent-side ID.
    pub(super) agent: AgentSessionId,
    /// Prefix for the agent's `toolCallId`/`messageId`s, unique to the load that mapped it.
    pub(super) prefix: String,
    /// Transcript to send with the next prompt (re-priming).
    pub(super) reprime: Option<String>,
}

/// Where a session stands on the agent in this connection.
#[derive(Debug, Default)]
pub(super) enum AgentSide {
    /// Not open on the agent (never brought up in this connection, or closed).
    #[default]
    NotLive,
    /// Live on the agent under the client-facing ID.
    Native,
    /// Live on the agent under another ID.
    Mapped(Mapping),
    /// It was live when the agent was restarted: the next client request that names it brings
    /// it up again on the new agent first.
    Lost,
    /// A load served by the proxy is bringing it up.
    Starting {
        /// The agent's own replay (a native `session/load` underneath) is hidden.
        hide_replay: bool,
        /// Set once the agent answered with a different session: agent lines for it are
        /// held until the load is answered.
        mapping: Option<Mapping>,
    },
}

/// One client-facing session.
#[derive(Debug, Default)]
pub(super) struct Session {
    /// Its journal segment is open in this run.
    pub(super) journal_open: bool,
    /// A `session/load` or `session/resume` the client sent the agent itself, until the agent
    /// answers it.
    pub(super) native_load: Option<NativeLoad>,
    /// Where it stands on the agent.
    pub(super) agent: AgentSide,
    /// The mapping of a mapped session the client closed: lines that still name it are mapped
    /// as before, until a load maps it anew.
    pub(super) closed_mapping: Option<Mapping>,
    /// What it was set up with in this connection: how to bring it up again.
    pub(super) setup: Option<SetupParams>,
    /// The client sent it a prompt in this run.
    pub(super) prompted: bool,
    /// The client connections attached to it, and how; a connection's end detaches it.
    pub(super) members: Membership,
    /// ACP v2: the agent reported foreground work (`running`, `requires_action`) and not yet
    /// its end (`idle`).
    pub(super) foreground: bool,
    /// Its prompt turn in flight: who prompted, its stall watch.
    turn: Turn,
    /// Agent lines held while a load brings it up (until the load ends).
    held: HeldLines,
    /// What the catalog learned of it and has not been told yet.
    facts: Facts,
}

impl Session {
    /// The mapping that applies to its lines, live or kept after a close.
    pub(super) fn mapping(&self) -> Option<&Mapping> {
        match &self.agent {
            AgentSide::Mapped(m) => Some(m),
            AgentSide::Starting { mapping, .. } => {
                mapping.as_ref().or(self.closed_mapping.as_ref())
            }
            AgentSide::NotLive | AgentSide::Native | AgentSide::Lost => {
                self.closed_mapping.as_ref()
            }
        }
    }

    fn mapping_mut(&mut self) -> Option<&mut Mapping> {
        match &mut self.agent {
            AgentSide::Mapped(m) => Some(m),
            AgentSide::Starting {
                mapping: Some(m), ..
            } => Some(m),
            _ => self.closed_mapping.as_mut(),
        }
    }

    /// Live on the agent (natively or mapped).
    pub(super) fn is_live(&self) -> bool {
        matches!(self.agent, AgentSide::Native | AgentSide::Mapped(_))
    }

    /// True when it must be restored before its next request.
    pub(super) fn is_lost(&self) -> bool {
        matches!(self.agent, AgentSide::Lost)
    }

    /// The client sends it a prompt: true for its first in this run.
    pub(super) fn first_prompt(&mut self) -> bool {
        !std::mem::replace(&mut self.prompted, true)
    }

    /// Connection `prompter.conn` prompted it: the prompter it replaces, if any.
    pub(super) fn set_prompter(&mut self, prompter: Prompter) -> Option<Prompter> {
        self.turn.prompter.replace(prompter)
    }

    /// Who prompted the turn running in it.
    pub(super) fn prompter(&self) -> Option<&Prompter> {
        self.turn.prompter.as_ref()
    }

    /// The prompt sent to the agent as `sent` was answered: its prompter, if it is still the
    /// turn's.
    pub(super) fn end_prompter(&mut self, sent: &RequestId) -> Option<Prompter> {
        self.turn.prompter.take_if(|p| p.sent == *sent)
    }

    /// A line of it from the agent, or the client's answer to the agent's request in it, at
    /// `now`: its prompt is alive.
    pub(super) fn prompt_active(&mut self, now: u64) {
        if let Some(watch) = self.turn.watch.as_mut() {
            watch.active(now);
        }
    }

    /// A load starts bringing it up (`hide_replay`: the agent's own replay is hidden).
    pub(super) fn set_starting(&mut self, hide_replay: bool) {
        self.agent = AgentSide::Starting {
            hide_replay,
            mapping: None,
        };
    }

    /// The agent's own replay is no longer hidden (its answer came, or the load ended).
    pub(super) fn stop_hiding(&mut self) {
        if let AgentSide::Starting { hide_replay, .. } = &mut self.agent {
            *hide_replay = false;
        }
    }

    /// True while the agent's own replay of it is hidden from the client.
    pub(super) fn hides_replay(&self) -> bool {
        matches!(
            self.agent,
            AgentSide::Starting {
                hide_replay: true,
                ..
            }
        )
    }

    /// The agent answered client request `id`: the native load it was, if any, ends.
    pub(super) fn end_native_load(&mut self, id: &RequestId) {
        self.native_load.take_if(|load| load.id == *id);
    }
}

/// Every session of the connection.
#[derive(Debug, Default)]
pub(super) struct SessionTable {
    sessions: HashMap<SessionId, Session>,
    /// Agent-side ID → client-facing ID, for mapped sessions.
    by_agent: HashMap<AgentSessionId, SessionId>,
    /// Some session's [`Facts`] may hold something not taken yet.
    facts_wait: bool,
    /// How many sessions' prompts in flight are watched for stalls (the watch is the
    /// session's: [`Turn`]); none, the common case, costs no lookup.
    watched: usize,
    /// Agent lines naming an agent-side session the table does not know yet, held while a
    /// load waits for the agent's `session/new` answer (which may name it).
    unclaimed: HeldLines,
    /// The bytes held by every session and `unclaimed` together.
    held_bytes: usize,
    /// Holding them passed the bound: nothing more is held until a load ends.
    held_full: bool,
    /// The child sessions (subagents) announced in this run.
    tree: SessionTree,
}

impl SessionTable {
    /// The shared ID of a session already known (no allocation), or a new one.
    pub(super) fn id(&self, s: &str) -> SessionId {
        self.sessions
            .get_key_value(s)
            .map_or_else(|| SessionId::from(s), |(k, _)| k.clone())
    }

    /// The session whose journal, connections and activity `s`'s lines are: the root of its
    /// tree when `s` is a child session ([`super::tree`]), else `s` itself (the shared ID).
    pub(super) fn owner(&self, s: &str) -> SessionId {
        match self.tree.root_of(s) {
            Some(root) => root.clone(),
            None => self.id(s),
        }
    }

    /// `s` is a child session announced in this run.
    pub(super) fn is_child(&self, s: &str) -> bool {
        self.tree.is_child(s)
    }

    /// Session `parent` announced `child`: the root of its tree when `child` becomes a child
    /// (an ID the table holds no session under, announced for the first time).
    pub(super) fn announce_child(&mut self, parent: &SessionId, child: &str) -> Option<SessionId> {
        if self.sessions.contains_key(child) || self.by_agent.contains_key(child) {
            return None;
        }
        self.tree
            .announce(parent, child)
            .then(|| self.owner(parent))
    }

    /// Session `s`, made if the table has none.
    pub(super) fn entry(&mut self, s: &SessionId) -> &mut Session {
        self.sessions.entry(s.clone()).or_default()
    }

    /// Session `s`, if the table has it.
    pub(super) fn get(&self, s: &str) -> Option<&Session> {
        self.sessions.get(s)
    }

    /// Session `s`, to change, if the table has it.
    pub(super) fn get_mut(&mut self, s: &str) -> Option<&mut Session> {
        self.sessions.get_mut(s)
    }

    /// What the catalog learns of session `s`, to add to.
    pub(super) fn facts(&mut self, s: &SessionId) -> &mut Facts {
        self.facts_wait = true;
        &mut self.entry(s).facts
    }

    /// What the catalog learned and was not told yet, by session in order of ID
    /// ([`Facts::take`]).
    pub(super) fn take_facts(&mut self) -> Vec<(CatalogUpdate, i64)> {
        let mut out = Vec::new();
        if !std::mem::take(&mut self.facts_wait) {
            return out;
        }
        let mut sessions: Vec<(&SessionId, &mut Session)> = self.sessions.iter_mut().collect();
        sessions.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (s, session) in sessions {
            session.facts.take(s, &mut out);
        }
        out
    }

    /// Connection `conn` uses session `s` (one the table knows).
    pub(super) fn attach(&mut self, s: &str, conn: ConnId) {
        if let Some(session) = self.sessions.get_mut(s) {
            session.members.attach(conn);
        }
    }

    /// The client sent session `s` a prompt (request `id`), watched from `at`.
    pub(super) fn start_prompt(&mut self, s: &SessionId, id: RequestId, at: Stamp) {
        if self
            .entry(s)
            .turn
            .watch
            .replace(PromptWatch::new(id, at))
            .is_none()
        {
            self.watched += 1;
        }
    }

    /// True when a prompt is in flight in some session (the common case costs no lookup).
    pub(super) fn prompting(&self) -> bool {
        self.watched > 0
    }

    /// Session `s`'s prompt is over: answered (request `id`), or (`None`, ACP v2) the agent
    /// reported the session idle.
    pub(super) fn end_prompt(&mut self, s: &str, id: Option<&RequestId>) {
        let Some(session) = self.sessions.get_mut(s) else {
            return;
        };
        if session
            .turn
            .watch
            .as_ref()
            .is_some_and(|w| id.is_none_or(|id| w.is(id)))
        {
            session.turn.watch = None;
            self.watched -= 1;
        }
    }

    /// The agent is gone: its prompts are answered already.
    pub(super) fn end_prompts(&mut self) {
        if std::mem::take(&mut self.watched) > 0 {
            for session in self.sessions.values_mut() {
                session.turn.watch = None;
            }
        }
    }

    /// The sessions whose prompt in flight is watched, and their watches (a scan: only while
    /// [`SessionTable::prompting`]).
    fn watches(&self) -> impl Iterator<Item = (&SessionId, &PromptWatch)> {
        self.sessions
            .iter()
            .filter_map(|(s, session)| Some((s, session.turn.watch.as_ref()?)))
    }

    /// The next time [`SessionTable::prompt_stalls`] can find something to do.
    pub(super) fn next_prompt_check(&self, timeout: u64, grace: u64) -> Option<u64> {
        if !self.prompting() {
            return None;
        }
        self.watches()
            .filter_map(|(_, w)| w.next_check(timeout, grace))
            .min()
    }

    /// The stalls at `now`, by session in order of ID ([`PromptWatch::check`]).
    pub(super) fn prompt_stalls(
        &mut self,
        now: u64,
        timeout: u64,
        grace: u64,
        waiting_on_client: impl Fn(&str) -> bool,
    ) -> Vec<(SessionId, Stall)> {
        let mut sessions: Vec<SessionId> = self.watches().map(|(s, _)| s.clone()).collect();
        sessions.sort_unstable();
        sessions
            .into_iter()
            .filter_map(|s| {
                let waiting = waiting_on_client(&s);
                let watch = self.sessions.get_mut(&s)?.turn.watch.as_mut()?;
                let stall = watch.check(now, timeout, grace, waiting)?;
                Some((s, stall))
            })
            .collect()
    }

    /// Connection `conn` left session `s` (the session lives on).
    pub(super) fn detach_from(&mut self, s: &str, conn: ConnId) {
        if let Some(session) = self.sessions.get_mut(s) {
            session.members.detach(conn);
        }
    }

    /// Connection `conn` ended: its sessions live on without it.
    pub(super) fn detach(&mut self, conn: ConnId) {
        for session in self.sessions.values_mut() {
            session.members.detach(conn);
        }
    }

    /// The sessions the agent was busy in (ACP v2), no longer so: the agent is gone.
    pub(super) fn take_foreground(&mut self) -> Vec<SessionId> {
        let mut busy: Vec<SessionId> = self
            .sessions
            .iter_mut()
            .filter_map(|(id, session)| std::mem::take(&mut session.foreground).then(|| id.clone()))
            .collect();
        busy.sort_unstable();
        busy
    }

    /// The connections attached to `s`.
    pub(super) fn attached(&self, s: &str) -> &[ConnId] {
        self.sessions
            .get(s)
            .map_or(&[], |session| session.members.attached())
    }

    pub(super) fn journal_open(&self, s: &str) -> bool {
        self.sessions.get(s).is_some_and(|s| s.journal_open)
    }

    /// Emit `OpenSession` unless the session's journal is already open; returns true when it
    /// opened it.
    pub(super) fn open_journal(
        &mut self,
        fx: &mut Effects,
        session: &SessionId,
        cwd: Option<String>,
        initialize: &Initialize,
    ) -> bool {
        let entry = self.entry(session);
        if entry.journal_open {
            return false;
        }
        entry.journal_open = true;
        fx.push(Action::OpenSession {
            session: session.clone(),
            cwd,
            initialize: initialize.clone(),
        });
        true
    }

    /// True when the client-facing session is live on the agent.
    pub(super) fn is_live(&self, s: &str) -> bool {
        self.sessions.get(s).is_some_and(Session::is_live)
    }

    /// The session became live on the agent (its `session/new` or native load succeeded, or a
    /// load brought it up).
    pub(super) fn set_live(&mut self, s: &SessionId) {
        let entry = self.entry(s);
        entry.agent = match std::mem::take(&mut entry.agent) {
            AgentSide::Starting {
                mapping: Some(m), ..
            }
            | AgentSide::Mapped(m) => AgentSide::Mapped(m),
            _ => match entry.closed_mapping.take() {
                Some(m) => AgentSide::Mapped(m),
                None => AgentSide::Native,
            },
        };
    }

    /// The session is no longer open on the agent (closed, or a load of it failed).
    pub(super) fn set_not_live(&mut self, s: &SessionId) {
        if let Some(entry) = self.sessions.get_mut(s) {
            let mapping = match std::mem::take(&mut entry.agent) {
                AgentSide::Mapped(m)
                | AgentSide::Starting {
                    mapping: Some(m), ..
                } => Some(m),
                _ => None,
            };
            if mapping.is_some() {
                entry.closed_mapping = mapping;
            }
        }
    }

    /// The agent was restarted: every live session is lost (to be restored on its next
    /// request); returns them.
    pub(super) fn lose_live(&mut self) -> Vec<SessionId> {
        let mut lost = Vec::new();
        for (id, session) in &mut self.sessions {
            if session.is_live() {
                if let AgentSide::Mapped(m) = std::mem::take(&mut session.agent) {
                    session.closed_mapping = Some(m);
                }
                session.agent = AgentSide::Lost;
                lost.push(id.clone());
            }
        }
        lost.sort_unstable();
        lost
    }

    /// Mark a session lost (its restore failed, or was cut short by another restart).
    pub(super) fn set_lost(&mut self, s: &SessionId) {
        self.set_not_live(s);
        self.entry(s).agent = AgentSide::Lost;
    }

    /// Map client-facing `session` to agent-side `mapping.agent`, persistently. While the session
    /// is starting the mapping waits in its state; otherwise the session is live, mapped.
    pub(super) fn map(&mut self, session: &SessionId, mapping: Mapping) {
        self.by_agent.insert(mapping.agent.clone(), session.clone());
        let entry = self.entry(session);
        entry.closed_mapping = None;
        match &mut entry.agent {
            AgentSide::Starting { mapping: slot, .. } => *slot = Some(mapping),
            other => *other = AgentSide::Mapped(mapping),
        }
    }

    /// The ID the agent knows the session by.
    pub(super) fn agent_id(&self, session: &SessionId) -> AgentSessionId {
        self.sessions
            .get(session)
            .and_then(Session::mapping)
            .map_or_else(|| AgentSessionId::native(session), |m| m.agent.clone())
    }

    /// The client-facing session an agent-side ID was mapped from.
    pub(super) fn client_id(&self, agent: AgentRef<'_>) -> Option<&SessionId> {
        self.by_agent.get(agent.0)
    }

    /// The client-facing session of an agent-side ID: the one it was mapped from, else the
    /// same ID (a session live natively).
    pub(super) fn client_of(&self, agent: AgentRef<'_>) -> SessionId {
        self.client_id(agent)
            .cloned()
            .unwrap_or_else(|| self.id(agent.0))
    }

    /// The mapping of a client-facing session, for editing its lines.
    pub(super) fn mapping_mut(&mut self, s: &str) -> Option<&mut Mapping> {
        self.sessions.get_mut(s).and_then(Session::mapping_mut)
    }

    /// The mapping of the client-facing session an agent-side ID belongs to.
    pub(super) fn mapping_of_agent(&self, agent: AgentRef<'_>) -> Option<(&SessionId, &Mapping)> {
        let client = self.by_agent.get(agent.0)?;
        Some((client, self.sessions.get(client)?.mapping()?))
    }

    /// True while a load is bringing up the session the agent-side ID is mapped to: its lines
    /// are held until the load is answered.
    pub(super) fn starting_as(&self, agent: AgentRef<'_>) -> bool {
        let Some(client) = self.by_agent.get(agent.0) else {
            return false;
        };
        match self.sessions.get(client) {
            Some(
                s @ Session {
                    agent: AgentSide::Starting { .. },
                    ..
                },
            ) => s.mapping().is_some_and(|m| m.agent.as_str() == agent.0),
            _ => false,
        }
    }

    /// True when the agent-side ID is known to the table, as a mapping or as a session
    /// (natively live sessions have the same ID on both sides).
    pub(super) fn knows(&self, agent: AgentRef<'_>) -> bool {
        self.journal_open(agent.0) || self.by_agent.contains_key(agent.0)
    }

    /// Hold an agent line of agent-side session `agent` while a load brings it up (the
    /// starting session's, or `unclaimed` for an agent-side session not known yet). False, and
    /// nothing held, once the lines held by every session would pass `limit` bytes; from then
    /// on nothing more is held until a load ends.
    pub(super) fn hold(&mut self, agent: AgentRef<'_>, line: &Bytes, limit: usize) -> bool {
        if self.held_full || self.held_bytes + line.len() > limit {
            self.held_full = true;
            return false;
        }
        let Some(held) = self.held_for(agent) else {
            return false;
        };
        held.push(line.clone());
        self.held_bytes += line.len();
        true
    }

    /// Where the lines of agent-side session `agent` are held: its session's, else (not known
    /// yet) `unclaimed`.
    fn held_for(&mut self, agent: AgentRef<'_>) -> Option<&mut HeldLines> {
        match self.by_agent.get(agent.0) {
            Some(client) => Some(&mut self.sessions.get_mut(client)?.held),
            None => Some(&mut self.unclaimed),
        }
    }

    /// The lines held for agent-side session `agent` so far, to pass before its next one.
    pub(super) fn take_held(&mut self, agent: AgentRef<'_>) -> Vec<Bytes> {
        let Some(held) = self.held_for(agent) else {
            return Vec::new();
        };
        let lines = held.take();
        self.held_bytes -= lines.iter().map(Bytes::len).sum::<usize>();
        lines
    }

    /// True while agent lines of sessions not known yet are held.
    pub(super) fn holds_unclaimed(&self) -> bool {
        !self.unclaimed.is_empty()
    }

    /// The unclaimed lines, once an agent answer may have named their sessions: to be taken
    /// again (held by the session now starting as one, passed, or held unclaimed again).
    pub(super) fn take_unclaimed(&mut self) -> Vec<Bytes> {
        self.held_bytes -= self.unclaimed.bytes();
        self.unclaimed.take()
    }

    /// A load ended (or the agent did): the lines held by every session no load is bringing
    /// up any more, and the unclaimed ones, in order within each session; holding starts
    /// afresh.
    pub(super) fn release_held(&mut self) -> Vec<Bytes> {
        self.held_full = false;
        let mut lines = self.unclaimed.take();
        for session in self.sessions.values_mut() {
            if !matches!(session.agent, AgentSide::Starting { .. }) {
                lines.append(&mut session.held.take());
            }
        }
        self.held_bytes -= lines.iter().map(Bytes::len).sum::<usize>();
        lines
    }

    /// True while nothing more is held for the bound.
    #[cfg(test)]
    pub(super) fn held_overflowed(&self) -> bool {
        self.held_full
    }

    /// The agent is gone: no native load it was running goes on.
    pub(super) fn end_native_loads(&mut self) {
        for session in self.sessions.values_mut() {
            session.native_load = None;
        }
    }

    /// Agent-side ID → client-facing ID, for every mapping made in this connection.
    pub(super) fn agent_ids(&self) -> impl Iterator<Item = (&AgentSessionId, &SessionId)> {
        self.by_agent.iter()
    }
}
