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

mod emulate;
#[cfg(test)]
mod emulate_tests;
pub mod history;
pub mod redact;
#[cfg(test)]
mod redact_tests;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use bytes::Bytes;

use crate::journal::Event;
use crate::journal::format::{Body, Payload, Record};
use crate::wire::Side;
use crate::wire::envelope::{self, Kind, Peek, RequestId};
use emulate::Emulation;
pub use history::{ClientSupport, Summary};

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
    /// Read a session's journals and answer with [`Proxy::handle_history`] chunks: the replay
    /// built by [`history::Replay`], then its summary (or `Missing`).
    FetchHistory {
        /// Names the answer.
        load: u64,
        /// The client-facing session ID.
        session: SessionId,
        /// What the client accepts.
        support: ClientSupport,
        /// Bound of the transcript kept for re-priming.
        transcript_limit: usize,
    },
    /// Stop a `FetchHistory` (its chunks are no longer wanted).
    CancelHistory {
        /// The fetch.
        load: u64,
    },
    /// Read the session list from the store and answer with [`Proxy::handle_sessions`].
    FetchSessions {
        /// Names the answer.
        request: u64,
    },
    /// Record session metadata in the store's catalog.
    Catalog(CatalogUpdate),
    /// Tell the user (log at info level).
    Log(String),
}

/// Session metadata for the catalog.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CatalogUpdate {
    /// The client-facing `session` continues on the agent as `agent`.
    Alias {
        /// Client-facing ID.
        session: SessionId,
        /// Agent-side ID.
        agent: SessionId,
    },
    /// A `session_info_update` passed through.
    Info {
        /// The session.
        session: SessionId,
        /// New title, if set.
        title: Option<String>,
        /// New `updatedAt`, if set.
        updated_at: Option<String>,
    },
    /// The client deleted the session.
    Delete {
        /// The session.
        session: SessionId,
    },
}

/// One answer to [`Action::FetchHistory`].
#[derive(Clone, Debug, PartialEq)]
pub enum HistoryChunk {
    /// Replay lines (`session/update` notifications, newline-terminated), in order.
    Lines(Vec<Bytes>),
    /// The replay is complete.
    End(Summary),
    /// The store has no journal for the session.
    Missing,
}

/// A session as the store lists it, for `session/list`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListedSession {
    /// Client-facing ID.
    pub session: String,
    /// Working directory.
    pub cwd: Option<String>,
    /// Latest title.
    pub title: Option<String>,
    /// Last activity, ISO 8601.
    pub updated_at: Option<String>,
    /// Agent-side IDs it was continued under.
    pub agent_ids: Vec<String>,
}

/// How the proxy handles session loading (`--load`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LoadMode {
    /// Agents with `loadSession` load natively; for the others the proxy serves loads from the
    /// journal.
    #[default]
    Auto,
    /// Always serve loads from the journal, hiding the agent's own replay.
    Journal,
    /// Never emulate loading (list, close and delete are still served for agents that lack
    /// them).
    Agent,
    /// Change nothing: a pure recorder.
    Off,
}

/// Core settings.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Redact secrets in journal copies.
    pub redact: bool,
    /// Session loading.
    pub load: LoadMode,
    /// Send a transcript of the earlier conversation with the first prompt after a load that
    /// had to start a fresh agent session.
    pub reprime: bool,
    /// Bound of that transcript, in bytes.
    pub reprime_limit: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            redact: true,
            load: LoadMode::Auto,
            reprime: true,
            reprime_limit: 32 * 1024,
        }
    }
}

/// A request awaiting its response.
#[derive(Debug)]
struct Pending {
    method: String,
    /// Sequence number of the request's record (answers to an exited agent's requests go out
    /// in arrival order).
    seq: u64,
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
    /// Agent stderr not yet journaled (journaled by whole lines).
    stderr: Vec<u8>,
    emulation: Emulation,
    /// The agent's output ended: client requests are answered by the proxy from now on.
    agent_ended: bool,
    /// The client closed its stream: it expects no more answers.
    client_ended: bool,
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
            stderr: Vec::new(),
            emulation: Emulation::default(),
            agent_ended: false,
            client_ended: false,
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

    /// Queue a record. Every record passes here: events (which may quote a prompt) are
    /// redacted here, messages by [`Proxy::journal_payload`] and stderr by its flush.
    fn journal(&mut self, target: Target, mut record: Record) {
        if self.config.redact
            && let Body::Event(event) = &mut record.body
        {
            redact::redact_event(event);
        }
        self.actions.push_back(Action::Journal { target, record });
    }

    /// A whole line from `from` (terminator included; a final line at EOF may lack it).
    pub fn handle_line(&mut self, at: Stamp, from: Side, line: Bytes) {
        let peek = envelope::peek(&line);
        if self.config.load != LoadMode::Off {
            let consumed = match from {
                Side::Client => self.intercept_client(at, &peek, &line),
                Side::Agent => self.intercept_agent(at, &peek, &line),
            };
            if consumed {
                return;
            }
        }
        let rewritten = match self.config.load {
            LoadMode::Off => None,
            _ => self.rewrite(at, from, &peek, &line).map(Bytes::from),
        };
        // The journal holds what the client sent and what it received.
        match (from, rewritten) {
            (Side::Agent, Some(out)) => {
                let facing = envelope::peek(&out);
                self.relay(at, from, &facing, out.clone(), out.clone());
            }
            (_, out) => {
                let forward = out.unwrap_or_else(|| line.clone());
                self.relay(at, from, &peek, line.clone(), forward);
            }
        }
        if from == Side::Client && self.agent_ended {
            // Nobody will answer it: say so at once.
            self.agent_gone(at);
        }
    }

    /// Journal `facing` (the client's view of the line, described by `peek`) and forward
    /// `forward` to the other side.
    fn relay(&mut self, at: Stamp, from: Side, peek: &Peek<'_>, facing: Bytes, forward: Bytes) {
        let record = {
            let payload = self.journal_payload(peek, facing);
            self.record(at, Body::Message { from, payload })
        };
        let target = self.attribute(from, peek, &record);
        if let Target::Session(session) = &target
            && !self.sessions.contains(session)
        {
            // A setup request names its cwd; early agent traffic may claim a pending
            // session/new.
            let cwd = envelope::str_field(peek.params, "cwd");
            self.open_session(session, cwd, from == Side::Agent);
        }
        if !self.is_native_replay(from, peek, &target) {
            self.journal(target, record);
        }
        self.actions.push_back(Action::Forward {
            to: from.other(),
            line: forward,
        });
    }

    /// The shared ID of a session already seen (no allocation), or a new one.
    fn session_id(&self, s: &str) -> SessionId {
        self.sessions
            .get(s)
            .cloned()
            .unwrap_or_else(|| SessionId::from(s))
    }

    /// How the line is stored: classified, and redacted when configured.
    fn journal_payload(&self, peek: &Peek<'_>, line: Bytes) -> Payload {
        let mut payload = Payload::from_line_classified(line, peek.is_json());
        if self.config.redact
            && let Some(redacted) = redact::redact_line(peek, &payload.bytes)
        {
            payload.bytes = Bytes::from(redacted);
            payload.redacted = true;
        }
        payload
    }

    /// Decide the journal of a line and update the pending table.
    fn attribute(&mut self, from: Side, peek: &Peek<'_>, record: &Record) -> Target {
        let session = peek.session.as_deref().map(|s| self.session_id(s));
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
                        seq: record.seq,
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

    /// A peer closed its stream. When the agent's ends while the client is still there, every
    /// client request still waiting for an answer (and any the client sends later) is answered
    /// with error -32603 ("the agent exited"), journaled as a line the proxy made. After the
    /// client closed its stream (a normal shutdown) nothing is answered.
    pub fn handle_eof(&mut self, at: Stamp, from: Side) {
        if from == Side::Agent {
            self.flush_stderr(at, true);
            self.agent_ended = true;
            if !self.client_ended {
                self.agent_gone(at);
            }
        } else {
            self.client_ended = true;
        }
        let record = self.record(at, Body::Event(Event::Eof { from }));
        self.journal(Target::Connection, record);
        if from == Side::Client {
            self.actions.push_back(Action::CloseAgentStdin);
        }
    }

    /// A chunk of the agent's stderr. It is journaled by whole lines (a line split across
    /// writes stays one record, so redaction sees it whole); a partial line is held until its
    /// newline, 64 KiB, or the agent's end.
    pub fn handle_stderr(&mut self, at: Stamp, chunk: Bytes) {
        self.stderr.extend_from_slice(&chunk);
        self.flush_stderr(at, self.stderr.len() > 64 * 1024);
    }

    fn flush_stderr(&mut self, at: Stamp, all: bool) {
        let cut = if all {
            self.stderr.len()
        } else {
            memchr::memrchr(b'\n', &self.stderr).map_or(0, |i| i + 1)
        };
        if cut == 0 {
            return;
        }
        let rest = self.stderr.split_off(cut);
        let mut text = std::mem::replace(&mut self.stderr, rest);
        if self.config.redact
            && let Some(redacted) = redact::redact_tokens(&text)
        {
            text = redacted;
        }
        let record = self.record(at, Body::Stderr(Bytes::from(text)));
        self.journal(Target::Connection, record);
    }

    /// Something the shell observed, journaled with the connection.
    pub fn handle_event(&mut self, at: Stamp, event: Event) {
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
