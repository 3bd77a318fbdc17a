//! One client-facing session ([`Session`]): where it stands on the agent, its turn, its held
//! lines, its native load, its catalog facts, its connections and its place in a tree. Its
//! fields are private: the session table ([`super::SessionTable`], the parent module) and the
//! rest of the core change a session through its methods.

use crate::proto::agent_side::{AgentSide, Mapping};
use crate::proto::held::HeldLines;
use crate::proto::load_request::{NativeLoad, SetupParams};
use crate::proto::membership::Membership;
use crate::proto::prompt::{PromptWatch, Prompter, Turn};
use crate::proto::turn_facts::Facts;
use crate::proto::vocab::{AgentSessionId, ConnId, SessionId};
use crate::wire::envelope::RequestId;

/// One client-facing session.
#[derive(Debug, Default)]
pub(in crate::proto) struct Session {
    /// Its journal segment is open in this run.
    journal_open: bool,
    /// A `session/load` or `session/resume` the client sent the agent itself, until the agent
    /// answers it.
    native_load: Option<NativeLoad>,
    /// Where it stands on the agent.
    agent: AgentSide,
    /// The mapping of a mapped session the client closed: lines that still name it are mapped
    /// as before, until a load maps it anew.
    closed_mapping: Option<Mapping>,
    /// What it was set up with in this connection: how to bring it up again.
    setup: Option<SetupParams>,
    /// The client connections attached to it, and how; a connection's end detaches it.
    members: Membership,
    /// Its prompt turn in flight: who prompted, its stall watch, whether the agent reports
    /// foreground work (ACP v2).
    turn: Turn,
    /// The agent restart it was last lost in (`Handshake::restarts` then; 0: none): the
    /// sessions lost since a restarted agent began being initialized are told of a host's
    /// absence and return.
    lost_in: u64,
    /// Agent lines held while a load brings it up (until the load ends).
    held: HeldLines,
    /// What the catalog learned of it and has not been told yet.
    facts: Facts,
    /// A child session (a subagent's) announced in this run: the root of its tree, found once,
    /// when it was announced ([`super::tree`]).
    root: Option<SessionId>,
}

impl Session {
    /// A child session (a subagent's) of the tree whose root is `root`.
    pub(super) fn child_of(root: SessionId) -> Session {
        Session {
            root: Some(root),
            ..Session::default()
        }
    }

    /// The root of its tree, when it is a child session.
    pub(super) fn root(&self) -> Option<&SessionId> {
        self.root.as_ref()
    }

    /// What the catalog learns of it, to add to.
    pub(super) fn facts_mut(&mut self) -> &mut Facts {
        &mut self.facts
    }

    /// Its stall watch, replaced by `watch`: true when it had none.
    pub(super) fn start_watch(&mut self, watch: PromptWatch) -> bool {
        self.turn.watch.replace(watch).is_none()
    }

    /// Its stall watch ended, when it watches the prompt `id` (`None`: any): true when it did.
    pub(super) fn end_watch(&mut self, id: Option<&RequestId>) -> bool {
        let ends = (self.turn.watch.as_ref()).is_some_and(|w| id.is_none_or(|id| w.is(id)));
        if ends {
            self.turn.watch = None;
        }
        ends
    }

    /// Its journal marked open in this run: false when it was already.
    pub(super) fn open_journal(&mut self) -> bool {
        !std::mem::replace(&mut self.journal_open, true)
    }

    /// Mapped to `mapping` (while it is starting, the mapping waits in its state).
    pub(super) fn map(&mut self, mapping: Mapping) {
        self.closed_mapping = None;
        match &mut self.agent {
            AgentSide::Starting { mapping: slot, .. } => *slot = Some(mapping),
            other => *other = AgentSide::Mapped(mapping),
        }
    }

    /// A load is bringing it up.
    pub(super) fn is_starting(&self) -> bool {
        matches!(self.agent, AgentSide::Starting { .. })
    }

    /// Its agent lines held while a load brings it up.
    pub(super) fn held_mut(&mut self) -> &mut HeldLines {
        &mut self.held
    }

    /// Its journal segment is open in this run.
    pub(in crate::proto) fn journal_open(&self) -> bool {
        self.journal_open
    }

    /// What it was set up with in this connection (how to bring it up again), if it was.
    pub(in crate::proto) fn setup(&self) -> Option<&SetupParams> {
        self.setup.as_ref()
    }

    /// It was set up (created, loaded or resumed) with `setup`: what brings it up again.
    pub(in crate::proto) fn set_up(&mut self, setup: SetupParams) {
        self.setup = Some(setup);
    }

    /// The agent restart it was last lost in (0: none).
    pub(in crate::proto) fn lost_in(&self) -> u64 {
        self.lost_in
    }

    /// The client connections attached to it, and how.
    pub(in crate::proto) fn members(&self) -> &Membership {
        &self.members
    }

    /// Connection `conn` uses it: attached, if it was not.
    pub(in crate::proto) fn attach(&mut self, conn: ConnId) {
        self.members.attach(conn);
    }

    /// Connection `conn` left it (detached, or ended).
    pub(in crate::proto) fn detach(&mut self, conn: ConnId) {
        self.members.detach(conn);
    }

    /// Connection `conn` joined it by `session/attach` (`observer`: in that role).
    pub(in crate::proto) fn join_draft(&mut self, conn: ConnId, observer: bool) {
        self.members.join_draft(conn, observer);
    }

    /// The load or resume the client sent the agent itself, until the agent answers it.
    pub(in crate::proto) fn native_load(&self) -> Option<&NativeLoad> {
        self.native_load.as_ref()
    }

    /// The native load under way, to hold its replay or take its fallback.
    pub(in crate::proto) fn native_load_mut(&mut self) -> Option<&mut NativeLoad> {
        self.native_load.as_mut()
    }

    /// The client sent the agent a load or resume of it itself (`load`), until it answers.
    pub(in crate::proto) fn begin_native_load(&mut self, load: NativeLoad) {
        self.native_load = Some(load);
    }

    /// The agent is gone: no native load it was running goes on.
    pub(super) fn forget_native_load(&mut self) {
        self.native_load = None;
    }

    /// The mapping that applies to its lines, live or kept after a close.
    pub(in crate::proto) fn mapping(&self) -> Option<&Mapping> {
        match &self.agent {
            AgentSide::Mapped(m) => Some(m),
            AgentSide::Starting { mapping, .. } => {
                mapping.as_ref().or(self.closed_mapping.as_ref())
            }
            AgentSide::NotLive | AgentSide::Native | AgentSide::Lost { .. } => {
                self.closed_mapping.as_ref()
            }
        }
    }

    /// The ID the agent knows it (`id`) by: its mapping's, else its own.
    pub(in crate::proto) fn agent_id(&self, id: &SessionId) -> AgentSessionId {
        self.mapping()
            .map_or_else(|| AgentSessionId::native(id), |m| m.agent.clone())
    }

    /// A prompt goes to the agent: the re-prime transcript it carries, when the session is
    /// mapped and this is the first prompt since the load that mapped it.
    pub(in crate::proto) fn take_reprime(&mut self) -> Option<String> {
        self.mapping_mut()?.reprime.take()
    }

    /// The mapping that applies to its lines, for editing them.
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
    pub(in crate::proto) fn is_live(&self) -> bool {
        matches!(self.agent, AgentSide::Native | AgentSide::Mapped(_))
    }

    /// True when it must be restored before its next request.
    pub(in crate::proto) fn is_lost(&self) -> bool {
        matches!(self.agent, AgentSide::Lost { .. })
    }

    /// The load restoring it, while one goes on.
    pub(in crate::proto) fn restored_by(&self) -> Option<u64> {
        match self.agent {
            AgentSide::Lost { restoring } | AgentSide::Starting { restoring, .. } => restoring,
            _ => None,
        }
    }

    /// Load `op` starts restoring it (it is lost).
    pub(in crate::proto) fn set_restoring(&mut self, op: u64) {
        if let AgentSide::Lost { restoring } = &mut self.agent {
            *restoring = Some(op);
        }
    }

    /// Connection `prompter.conn` prompted it: the prompter it replaces, if any.
    pub(in crate::proto) fn set_prompter(&mut self, prompter: Prompter) -> Option<Prompter> {
        self.turn.prompter.replace(prompter)
    }

    /// Who prompted the turn running in it.
    pub(in crate::proto) fn prompter(&self) -> Option<&Prompter> {
        self.turn.prompter.as_ref()
    }

    /// The prompt sent to the agent as `sent` was answered: its prompter, if it is still the
    /// turn's.
    pub(in crate::proto) fn end_prompter(&mut self, sent: &RequestId) -> Option<Prompter> {
        self.turn.prompter.take_if(|p| p.sent == *sent)
    }

    /// A line of it from the agent, or the client's answer to the agent's request in it, at
    /// `now`: its prompt is alive.
    pub(in crate::proto) fn prompt_active(&mut self, now: u64) {
        if let Some(watch) = self.turn.watch.as_mut() {
            watch.active(now);
        }
    }

    /// A load starts bringing it up (`hide_replay`: the agent's own replay is hidden); a
    /// restore goes on restoring it.
    pub(in crate::proto) fn set_starting(&mut self, hide_replay: bool) {
        self.agent = AgentSide::Starting {
            hide_replay,
            mapping: None,
            restoring: self.restored_by(),
        };
    }

    /// The agent's own replay is no longer hidden (its answer came, or the load ended).
    pub(in crate::proto) fn stop_hiding(&mut self) {
        if let AgentSide::Starting { hide_replay, .. } = &mut self.agent {
            *hide_replay = false;
        }
    }

    /// True while the agent's own replay of it is hidden from the client.
    pub(in crate::proto) fn hides_replay(&self) -> bool {
        matches!(
            self.agent,
            AgentSide::Starting {
                hide_replay: true,
                ..
            }
        )
    }

    /// True while the agent replays it for a native load (its `session/update`s are forwarded,
    /// not journaled again).
    pub(in crate::proto) fn replays_native_load(&self) -> bool {
        self.native_load.as_ref().is_some_and(|n| n.replaying)
    }

    /// The agent answered client request `id`: the native load it was, if any, ends.
    pub(in crate::proto) fn end_native_load(&mut self, id: &RequestId) {
        self.native_load.take_if(|load| load.id == *id);
    }

    /// It became live on the agent (its `session/new` or native load succeeded, or a load
    /// brought it up).
    pub(in crate::proto) fn set_live(&mut self) {
        self.agent = match std::mem::take(&mut self.agent) {
            AgentSide::Starting {
                mapping: Some(m), ..
            }
            | AgentSide::Mapped(m) => AgentSide::Mapped(m),
            _ => match self.closed_mapping.take() {
                Some(m) => AgentSide::Mapped(m),
                None => AgentSide::Native,
            },
        };
    }

    /// It is no longer open on the agent (closed, or a load of it failed).
    pub(in crate::proto) fn set_not_live(&mut self) {
        let mapping = match std::mem::take(&mut self.agent) {
            AgentSide::Mapped(m)
            | AgentSide::Starting {
                mapping: Some(m), ..
            } => Some(m),
            _ => None,
        };
        if mapping.is_some() {
            self.closed_mapping = mapping;
        }
    }

    /// It is lost (its restore failed, or was cut short by another restart).
    pub(in crate::proto) fn set_lost(&mut self) {
        self.set_not_live();
        self.agent = AgentSide::Lost { restoring: None };
    }

    /// The agent was restarted (the `restart`th time in this run): lost if it was live (to be
    /// restored on its next request); true then.
    pub(super) fn lose(&mut self, restart: u64) -> bool {
        if !self.is_live() {
            return false;
        }
        self.lost_in = restart;
        if let AgentSide::Mapped(m) = std::mem::take(&mut self.agent) {
            self.closed_mapping = Some(m);
        }
        self.agent = AgentSide::Lost { restoring: None };
        true
    }

    /// ACP v2: the agent reported foreground work in it (`running`, `requires_action`: true)
    /// or its end (`idle`: false).
    pub(in crate::proto) fn set_foreground(&mut self, foreground: bool) {
        self.turn.foreground = foreground;
    }

    /// True when the agent reported foreground work in it and not yet its end, which it forgets
    /// (the agent is gone).
    pub(super) fn take_foreground(&mut self) -> bool {
        std::mem::take(&mut self.turn.foreground)
    }

    /// The watch on its prompt in flight, if any.
    pub(in crate::proto) fn watch(&self) -> Option<&PromptWatch> {
        self.turn.watch.as_ref()
    }

    /// The watch on its prompt in flight, to update.
    pub(super) fn watch_mut(&mut self) -> Option<&mut PromptWatch> {
        self.turn.watch.as_mut()
    }

    /// Its agent lines held while a load brings it up, once no load does any more.
    pub(in crate::proto) fn held_to_release(&mut self) -> Option<&mut HeldLines> {
        (!matches!(self.agent, AgentSide::Starting { .. })).then_some(&mut self.held)
    }
}
