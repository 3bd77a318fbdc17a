//! The protocol core: a deterministic state machine with no I/O.
//!
//! It contains no file, process or clock code: the shell stamps every input with a [`Stamp`]
//! and applies the [`Action`]s it polls, in order. That makes every attribution rule testable
//! with literal JSON lines (see `tests.rs`).
//!
//! # Driving contract
//! - Inputs (`handle_*`, return `()`): [`Proxy::handle_line`] for every whole line read from a
//!   peer (line ending included), [`Proxy::handle_eof`] when a peer closes its stream,
//!   [`Proxy::handle_stderr`] for agent stderr chunks, [`Proxy::handle_event`] for things the
//!   shell observed (agent exit, signals).
//! - Output: after each input, drain [`Proxy::poll_action`] until `None` and apply the actions
//!   in order. Every `Journal` for a line precedes its `Forward`, and an `OpenSession` precedes
//!   the first `Journal` to that session, so applying in order gives write-before-forward.
//!
//! # Attribution
//! Requests and notifications belong to `params.sessionId`. Responses carry no session: they
//! belong to the session of the request they answer, found in a pending table per sender
//! (both peers number their requests independently; `1` and `"1"` are different ids).
//! `$/cancel_request` belongs to the session of the request it cancels. A `session/new`
//! (or `session/fork`) response names the new session: the request is copied into that
//! session's journal before the response. Updates for a session whose `session/new` response
//! has not arrived yet open the session early (and take the copy of the only pending
//! `session/new`, if there is exactly one). Everything else goes to the connection journal.
//!
//! This proxy edits no message: every `Forward` carries the bytes received.

pub mod envelope;
pub mod redact;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use bytes::Bytes;

pub use crate::journal::format::Side;
use crate::journal::format::{Body, Encoding, Payload, Record};
use envelope::{Kind, Peek, RequestId};

/// When an input happened, read by the shell (the core never reads a clock).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamp {
    /// Wall clock, Unix microseconds.
    pub unix_us: i64,
    /// Monotonic microseconds since the run started.
    pub mono_us: u64,
}

/// An ACP session ID, exactly as on the wire.
pub type SessionId = Arc<str>;

/// Which journal a record goes to.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// The run's connection journal.
    Connection,
    /// A session's journal.
    Session(SessionId),
}

/// The `initialize` request and response lines (without line endings), once seen.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Initialize {
    /// The client's request.
    pub request: Option<Bytes>,
    /// The agent's response.
    pub response: Option<Bytes>,
}

/// An instruction for the shell. Apply in the order polled.
#[must_use]
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Write exactly these bytes to `to`.
    Forward {
        /// The receiving peer.
        to: Side,
        /// The line, terminator included: the bytes received.
        line: Bytes,
    },
    /// Create a journal segment for a session seen for the first time in this run.
    OpenSession {
        /// The session.
        session: SessionId,
        /// Its working directory, when known.
        cwd: Option<String>,
        /// The initialize exchange, copied into the segment header.
        initialize: Initialize,
    },
    /// Append a record to a journal (before any later `Forward`).
    Journal {
        /// The journal.
        target: Target,
        /// The record.
        record: Record,
    },
    /// The client closed its stream: close the agent's stdin.
    CloseAgentStdin,
}

/// Core settings.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Redact secrets in journal copies.
    pub redact: bool,
}

/// A request awaiting its response.
#[derive(Debug)]
struct Pending {
    method: String,
    session: Option<SessionId>,
    /// For `session/new` / `session/fork`: the request record, to copy into the new session.
    setup: Option<Setup>,
}

#[derive(Debug)]
struct Setup {
    record: Record,
    cwd: Option<String>,
    /// The session it was already copied into (an early update opened it).
    copied_to: Option<SessionId>,
}

/// Methods whose response creates a session.
const CREATES_SESSION: &[&str] = &["session/new", "session/fork"];

/// The proxy state machine.
#[derive(Debug)]
pub struct Proxy {
    config: Config,
    seq: u64,
    actions: VecDeque<Action>,
    pending: HashMap<(Side, RequestId), Pending>,
    sessions: HashSet<SessionId>,
    initialize: Initialize,
}

impl Proxy {
    /// A fresh core for one connection.
    pub fn new(config: Config) -> Proxy {
        Proxy {
            config,
            seq: 0,
            actions: VecDeque::new(),
            pending: HashMap::new(),
            sessions: HashSet::new(),
            initialize: Initialize::default(),
        }
    }

    /// The next action to apply, in order.
    #[must_use]
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Requests still awaiting a response (both directions).
    pub fn pending_requests(&self) -> usize {
        self.pending.len()
    }

    /// Sequence number of the next record.
    pub fn next_seq(&self) -> u64 {
        self.seq
    }

    fn record(&mut self, at: Stamp, body: Body) -> Record {
        let seq = self.seq;
        self.seq += 1;
        Record {
            seq,
            unix_us: at.unix_us,
            mono_us: at.mono_us,
            body,
        }
    }

    fn journal(&mut self, target: Target, record: Record) {
        self.actions.push_back(Action::Journal { target, record });
    }

    /// A whole line from `from` (terminator included; a final line at EOF may lack it).
    pub fn handle_line(&mut self, at: Stamp, from: Side, line: Bytes) {
        let peek = envelope::peek(&line);
        let record = {
            let payload = self.journal_payload(&peek, line.clone());
            self.record(at, Body::Message { from, payload })
        };
        let target = self.attribute(from, &peek, &record);
        if let Target::Session(session) = &target
            && !self.sessions.contains(session)
        {
            // A setup request names its cwd; early agent traffic may claim a pending
            // session/new.
            let cwd = envelope::str_field(peek.params, "cwd");
            self.open_session(session, cwd, from == Side::Agent);
        }
        self.journal(target, record);
        self.actions.push_back(Action::Forward {
            to: from.other(),
            line,
        });
    }

    /// How the line is stored: classified, and redacted when configured.
    fn journal_payload(&self, peek: &Peek<'_>, line: Bytes) -> Payload {
        let mut payload = Payload::from_line_classified(line, peek.is_json());
        if self.config.redact
            && payload.encoding != Encoding::Binary
            && let Some(redacted) = redact::redact_message(peek.method(), &payload.bytes)
        {
            payload.bytes = Bytes::from(redacted);
            payload.redacted = true;
        }
        payload
    }

    /// Decide the journal of a line and update the pending table.
    fn attribute(&mut self, from: Side, peek: &Peek<'_>, record: &Record) -> Target {
        let session = envelope::str_field(peek.params, "sessionId").map(SessionId::from);
        match &peek.kind {
            Kind::Request { id, method } => {
                let session = session.or_else(|| {
                    // Request-scoped messages (elicitation) name a request of the other peer.
                    let rid = envelope::request_id(peek.params)?;
                    self.pending.get(&(from.other(), rid))?.session.clone()
                });
                if method == "initialize" {
                    self.initialize.request = Some(record_bytes(record));
                }
                let setup = CREATES_SESSION.contains(&method.as_ref()).then(|| Setup {
                    record: record.clone(),
                    cwd: envelope::str_field(peek.params, "cwd"),
                    copied_to: None,
                });
                self.pending.insert(
                    (from, id.clone()),
                    Pending {
                        method: method.to_string(),
                        session: session.clone(),
                        setup,
                    },
                );
                session.map_or(Target::Connection, Target::Session)
            }
            Kind::Notification { method } => {
                let session = session.or_else(|| {
                    if method != "$/cancel_request" {
                        return None;
                    }
                    let rid = envelope::request_id(peek.params)?;
                    self.pending.get(&(from, rid))?.session.clone()
                });
                session.map_or(Target::Connection, Target::Session)
            }
            Kind::Response { id, is_error } => {
                let Some(pending) = self.pending.remove(&(from.other(), id.clone())) else {
                    return Target::Connection;
                };
                if pending.method == "initialize" {
                    self.initialize.response = Some(record_bytes(record));
                }
                let created = match (&pending.setup, is_error) {
                    (Some(_), false) => {
                        envelope::str_field(peek.result, "sessionId").map(SessionId::from)
                    }
                    _ => None,
                };
                match (created, pending.setup) {
                    (Some(new), Some(setup)) => {
                        self.open_session(&new, setup.cwd.clone(), false);
                        if setup.copied_to.as_ref() != Some(&new) {
                            self.journal(Target::Session(new.clone()), setup.record);
                        }
                        Target::Session(new)
                    }
                    _ => pending.session.map_or(Target::Connection, Target::Session),
                }
            }
            Kind::OtherJson | Kind::Invalid => Target::Connection,
        }
    }

    /// Emit `OpenSession` the first time a session is seen. With `claim`, a session first seen
    /// through early agent traffic takes the copy of the only unclaimed pending `session/new`.
    fn open_session(&mut self, session: &SessionId, cwd: Option<String>, claim: bool) {
        if self.sessions.contains(session) {
            return;
        }
        self.sessions.insert(session.clone());
        let mut unclaimed = self
            .pending
            .iter_mut()
            .filter_map(|(_, p)| p.setup.as_mut())
            .filter(|s| s.copied_to.is_none() && s.record_is_client_new());
        let early_copy = match (claim, unclaimed.next(), unclaimed.next()) {
            (true, Some(setup), None) => {
                setup.copied_to = Some(session.clone());
                Some((setup.record.clone(), setup.cwd.clone()))
            }
            _ => None,
        };
        let cwd = cwd.or_else(|| early_copy.as_ref().and_then(|(_, c)| c.clone()));
        self.actions.push_back(Action::OpenSession {
            session: session.clone(),
            cwd,
            initialize: self.initialize.clone(),
        });
        if let Some((record, _)) = early_copy {
            self.journal(Target::Session(session.clone()), record);
        }
    }

    /// A peer closed its stream.
    pub fn handle_eof(&mut self, at: Stamp, from: Side) {
        let record = self.record(
            at,
            Body::Event(serde_json::json!({"type": "eof", "from": from.as_str()})),
        );
        self.journal(Target::Connection, record);
        if from == Side::Client {
            self.actions.push_back(Action::CloseAgentStdin);
        }
    }

    /// A chunk of the agent's stderr.
    pub fn handle_stderr(&mut self, at: Stamp, chunk: Bytes) {
        let record = self.record(at, Body::Stderr(chunk));
        self.journal(Target::Connection, record);
    }

    /// Something the shell observed (a JSON object with a `type`), journaled with the
    /// connection.
    pub fn handle_event(&mut self, at: Stamp, event: serde_json::Value) {
        let record = self.record(at, Body::Event(event));
        self.journal(Target::Connection, record);
    }
}

impl Setup {
    /// Only the client creates sessions.
    fn record_is_client_new(&self) -> bool {
        matches!(
            &self.record.body,
            Body::Message {
                from: Side::Client,
                ..
            }
        )
    }
}

/// The stored bytes of a message record (its wire form without line ending, as journaled).
fn record_bytes(record: &Record) -> Bytes {
    match &record.body {
        Body::Message { payload, .. } => payload.bytes.clone(),
        _ => Bytes::new(),
    }
}
