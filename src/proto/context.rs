//! What the components of the core share while they handle one input ([`Cx`]): the
//! configuration and what both peers declared at `initialize`, the output queue, the request
//! ids (the proxy's own, and the requests in flight both ways, which its own must not collide
//! with and which an answer is matched to) and the time. The components own everything else
//! and are called with a `&mut Cx` beside their own state; the session table is the
//! [`super::Proxy`]'s, handed to those that read or change it (or, resolved by the route, the
//! one session a line concerns: [`super::sessions::SessionMut`]).

use bytes::Bytes;

use super::capabilities::Declared;
use super::effects::Effects;
use super::ids::OwnIds;
use super::pending::{PendingTable, Purpose, Step};
use super::sessions::SessionTable;
use super::vocab::{Config, LoadMode, SessionId, Stamp, Target};
use crate::wire::Side;
use crate::wire::envelope::{self, Kind};

/// The state every component of the core may read and write.
#[derive(Debug)]
pub(super) struct Cx {
    pub(super) config: Config,
    /// The output: actions in order.
    pub(super) fx: Effects,
    /// Requests awaiting their response, by sender and id.
    pub(super) pending: PendingTable,
    pub(super) ids: OwnIds,
    /// What both peers declared as they set the connection up: read by every component, as
    /// the configuration is.
    pub(super) peers: Declared,
    /// The latest input's time.
    pub(super) now: Stamp,
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

    /// Journal a client line that cannot go to the agent (with its session, or the run's
    /// journal when the session has none) and, if it is a request, answer it with `error`.
    pub(super) fn refuse(&mut self, sessions: &SessionTable, at: Stamp, line: &Bytes, error: &str) {
        let peek = envelope::peek(line);
        let target = match peek.session.as_deref() {
            Some(s) if sessions.journal_open(s) => Target::Session(sessions.id(s)),
            _ => Target::Run,
        };
        self.fx.journal_client(at, target.clone(), &peek, line);
        if let Kind::Request { id, .. } = &peek.kind {
            self.fx.answer(at, target, id, Err(error));
        }
    }
}
