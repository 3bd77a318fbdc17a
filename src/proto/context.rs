//! What the components of the core share while they handle one input ([`Cx`]): the
//! configuration and what both peers declared at `initialize`, the output queue, the request
//! ids (the proxy's own, and the requests in flight both ways, which its own must not collide
//! with and which an answer is matched to) and the time. The components own everything else
//! and are called with a `&mut Cx` beside their own state, reaching its parts through its
//! methods (no field of it is visible outside this file); the session table is the
//! [`super::Proxy`]'s, handed to those that read or change it (or, resolved by the route, the
//! one session a line concerns: [`super::sessions::SessionMut`]).

use bytes::Bytes;

use super::capabilities::Declared;
use super::effects::Effects;
use super::ids::OwnIds;
use super::pending::{PendingTable, Purpose, Step};
use super::vocab::{Action, Config, LoadMode, SessionId, Stamp, Target};
use crate::wire::Side;
use crate::wire::envelope;

/// The state every component of the core may read and write.
#[derive(Debug)]
pub(super) struct Cx {
    config: Config,
    /// The output: actions in order.
    fx: Effects,
    /// Requests awaiting their response, by sender and id.
    pending: PendingTable,
    ids: OwnIds,
    /// What both peers declared as they set the connection up: read by every component, as
    /// the configuration is.
    peers: Declared,
    /// The latest input's time.
    now: Stamp,
    /// Operation numbers (loads, lists, forks), naming what they ask of the journals.
    next_op: u64,
}

impl Cx {
    pub(super) fn new(config: Config) -> Cx {
        Cx {
            config,
            fx: Effects::new(config.redact),
            pending: PendingTable::default(),
            ids: OwnIds::default(),
            peers: Declared::default(),
            now: Stamp::default(),
            next_op: 0,
        }
    }

    /// The settings.
    pub(super) fn config(&self) -> &Config {
        &self.config
    }

    /// The output queue.
    pub(super) fn fx(&mut self) -> &mut Effects {
        &mut self.fx
    }

    /// Requests awaiting their response, by sender and id.
    pub(super) fn pending(&self) -> &PendingTable {
        &self.pending
    }

    /// The requests in flight, to add to or answer.
    pub(super) fn pending_mut(&mut self) -> &mut PendingTable {
        &mut self.pending
    }

    /// The request ids: the proxy's own and the renumbered.
    pub(super) fn ids(&mut self) -> &mut OwnIds {
        &mut self.ids
    }

    /// What both peers declared as they set the connection up.
    pub(super) fn peers(&self) -> &Declared {
        &self.peers
    }

    /// What the peers declared, as `initialize` (or a restart's) teaches it.
    pub(super) fn peers_mut(&mut self) -> &mut Declared {
        &mut self.peers
    }

    /// The latest input's time.
    pub(super) fn now(&self) -> Stamp {
        self.now
    }

    /// An input arrived `at`.
    pub(super) fn arrived(&mut self, at: Stamp) {
        self.now = at;
    }

    /// Time passed to `mono_us` (a tick: the wall clock of the last input stays).
    pub(super) fn passed(&mut self, mono_us: u64) {
        self.now.mono_us = mono_us;
    }

    /// Sequence number of the next record.
    pub(super) fn next_seq(&self) -> u64 {
        self.fx.next_seq()
    }

    /// Open `session`'s journal (in `cwd`), headed by the handshake both peers made.
    pub(super) fn open_journal(&mut self, session: SessionId, cwd: Option<String>) {
        let initialize = self.peers.initialize.clone();
        (self.fx).push(Action::OpenSession {
            session,
            cwd,
            initialize,
        });
    }

    /// A fresh operation number.
    pub(super) fn next_op(&mut self) -> u64 {
        let op = self.next_op;
        self.next_op += 1;
        op
    }

    /// The journal serves loads (`--load auto` or `journal`).
    pub(super) fn emulates_loading(&self) -> bool {
        matches!(self.config.load, LoadMode::Auto | LoadMode::Journal)
    }

    /// A `session/load` is served from the journal rather than passed to the agent.
    pub(super) fn synthesizes_load(&self) -> bool {
        match self.config.load {
            LoadMode::Journal => true,
            LoadMode::Auto => !self.peers.agent.load,
            LoadMode::Agent | LoadMode::Off => false,
        }
    }

    /// Send a request of the proxy's own (`call`: its method and params) to the agent for
    /// operation `op`, journaled with `session`, `secret` (an offered MCP server's token)
    /// left out of the journal's copy.
    pub(super) fn request(
        &mut self,
        at: Stamp,
        session: &SessionId,
        (op, step): (u64, Step),
        (method, params): (&str, &str),
        secret: Option<&str>,
    ) {
        let id = self.own_id(Purpose::Load(op, step));
        let line = super::effects::request_line(Some(&id), method, params);
        let journaled = match secret {
            Some(secret) => {
                Bytes::from(String::from_utf8_lossy(&line).replace(secret, crate::redact::REDACTED))
            }
            None => line.clone(),
        };
        let record = self.fx.proxy_record(at, Side::Client, journaled);
        self.fx.journal(Target::Session(session.clone()), record);
        self.fx.forward(Side::Agent, line);
    }

    /// Send a request the client made earlier (`initialize`, `authenticate`) again, under an
    /// id of ours.
    pub(super) fn send_recorded(&mut self, at: Stamp, purpose: Purpose, line: &Bytes) {
        let peek = envelope::peek(line);
        let (Some(method), Some(params)) = (peek.method(), peek.params) else {
            return;
        };
        let id = self.own_id(purpose);
        self.fx
            .send_agent(at, Target::Run, Some(&id), method, params.get());
    }

    /// An id of ours for a request to the agent, clear of the client's pending ones.
    fn own_id(&mut self, purpose: Purpose) -> envelope::RequestId {
        let pending = &self.pending;
        let id = self.ids.request(purpose, |id| {
            pending.contains_key(&(Side::Client, id.clone()))
        });
        id.request_id().clone()
    }
}
