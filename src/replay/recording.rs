//! A recording read into exchanges: what the client asked and everything the agent did about it.
//!
//! Each client request (or notification) of a session becomes an [`Exchange`]. Agent messages
//! are attached to the oldest client request of the session still waiting for its response
//! (`during`: the updates of a prompt turn, the permission requests it raised), or, when nothing
//! is pending, to the latest exchange (`after`: e.g. the `available_commands_update` that follows
//! a `session/new` response). Agent requests carry the answer the client gave. The proxy's own
//! exchanges with the agent (ids `acp-journal:N`) are not the client's view and are left out;
//! answers the proxy gave the client itself (an emulated `session/load`) are kept.

use std::collections::HashMap;
use std::path::PathBuf;

use bytes::Bytes;
use serde_json::Value;

use crate::journal::{Body, Event, Header, Record, SegmentKind, SegmentReader};

use crate::wire::Side;
use crate::wire::envelope::{self, Kind, RequestId};

/// Something the agent sent.
#[derive(Clone, Debug)]
pub struct AgentStep {
    /// Monotonic time of the record (microseconds since its proxy run started).
    pub at_us: u64,
    /// The line as recorded (without its line ending).
    pub line: Bytes,
    /// For an agent request: its method and the client's recorded answer (a whole response).
    pub request: Option<AgentRequest>,
}

/// An agent→client request of the recording.
#[derive(Clone, Debug)]
pub struct AgentRequest {
    /// The method, e.g. `session/request_permission`.
    pub method: String,
    /// The request's params.
    pub params: Value,
    /// The client's response (`{"result":…}` or `{"error":…}`), when it was recorded.
    pub answer: Option<Value>,
    /// When the answer was recorded.
    pub answered_us: Option<u64>,
}

/// One client message and what the agent did about it.
#[derive(Clone, Debug)]
pub struct Exchange {
    /// The method.
    pub method: String,
    /// The params (`null` when absent).
    pub params: Value,
    /// A notification (no response expected), e.g. `session/cancel`.
    pub notification: bool,
    /// The prompt turn this exchange belongs to: the number of `session/prompt` requests so far
    /// in its session, this one included.
    pub turn: usize,
    /// When the client sent it.
    pub at_us: u64,
    /// Where its request is in the session's [`SessionRecording::records`].
    pub record: usize,
    /// Agent messages while it was pending.
    pub during: Vec<AgentStep>,
    /// The agent's response line, and when it came.
    pub response: Option<(u64, Bytes)>,
    /// Agent messages after the response, before the client's next message.
    pub after: Vec<AgentStep>,
}

impl Exchange {
    /// The parsed response, if one was recorded.
    pub fn response_value(&self) -> Option<Value> {
        serde_json::from_slice(&self.response.as_ref()?.1).ok()
    }
}

/// One ACP session of a recording.
#[derive(Clone, Debug)]
pub struct SessionRecording {
    /// The session ID the client saw.
    pub id: String,
    /// Working directory, as recorded.
    pub cwd: Option<String>,
    /// The client's messages, in order.
    pub exchanges: Vec<Exchange>,
    /// Every record of the session, for replaying its history on `session/load`.
    pub records: Vec<Record>,
}

impl SessionRecording {
    /// Number of prompt turns.
    pub fn turns(&self) -> usize {
        self.exchanges.last().map_or(0, |e| e.turn)
    }
}

/// A recording: the initialize exchange and its sessions.
#[derive(Clone, Debug, Default)]
pub struct Recording {
    /// Where it was read from (for messages).
    pub source: String,
    /// The client's `initialize` request, as recorded.
    pub initialize_request: Option<Value>,
    /// The agent's `initialize` response, as the client saw it.
    pub initialize_response: Option<Value>,
    /// The bundle manifest, when the recording is a bundle.
    pub manifest: Option<Value>,
    /// Sessions, in the order they were first recorded.
    pub sessions: Vec<SessionRecording>,
    /// Damage found while reading (a torn or corrupt tail), one line each.
    pub notes: Vec<String>,
}

impl Recording {
    /// Read the segments of one or more sessions (a session's segments oldest first).
    ///
    /// # Errors
    /// A file that cannot be opened as a journal.
    pub fn read(source: &str, segments: &[PathBuf]) -> anyhow::Result<Recording> {
        let mut builder = Builder::default();
        builder.recording.source = source.to_string();
        for path in segments {
            let mut reader = SegmentReader::open(path)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            let header = reader.header().clone();
            builder.segment(&header, reader.by_ref());
            if let Some(tail) = reader.tail()
                && tail.is_damaged()
            {
                builder
                    .recording
                    .notes
                    .push(format!("{}: {tail}; read up to there", path.display()));
            }
        }
        Ok(builder.recording)
    }

    /// A recording of segments already in memory: each a header and its records.
    pub fn from_segments(
        source: &str,
        segments: impl IntoIterator<Item = (Header, Vec<Record>)>,
    ) -> Recording {
        let mut builder = Builder::default();
        builder.recording.source = source.to_string();
        for (header, records) in segments {
            builder.segment(&header, records.into_iter());
        }
        builder.recording
    }

    /// Where the session with this ID is in [`Recording::sessions`].
    pub fn session_index(&self, id: &str) -> Option<usize> {
        self.sessions.iter().position(|s| s.id == id)
    }
}

/// Where an agent message goes.
#[derive(Clone, Copy)]
enum Slot {
    During(usize),
    After(usize),
}

#[derive(Default)]
struct Builder {
    recording: Recording,
    /// Per session: pending client requests (id → exchange index), oldest first.
    pending: HashMap<usize, Vec<(RequestId, usize)>>,
    /// Per session: pending agent requests (id → where the step is).
    agent_pending: HashMap<usize, HashMap<RequestId, (Slot, usize)>>,
}

impl Builder {
    /// Take in one segment.
    fn segment(&mut self, header: &Header, records: impl Iterator<Item = Record>) {
        if let Some(init) = &header.initialize {
            if self.recording.initialize_request.is_none() {
                self.recording.initialize_request = init.request_value();
            }
            if self.recording.initialize_response.is_none() {
                self.recording.initialize_response = init.response_value();
            }
        }
        let (SegmentKind::Session, Some(session)) = (header.kind, header.session.as_deref()) else {
            return;
        };
        let index = self.session(session, header.cwd.clone());
        for record in records {
            self.record(index, record);
        }
        self.end_segment(index);
    }

    fn session(&mut self, id: &str, cwd: Option<String>) -> usize {
        if let Some(i) = self.recording.sessions.iter().position(|s| s.id == id) {
            return i;
        }
        self.recording.sessions.push(SessionRecording {
            id: id.to_string(),
            cwd,
            exchanges: Vec::new(),
            records: Vec::new(),
        });
        self.recording.sessions.len() - 1
    }

    /// A run ended: its pending requests will never be answered in a later segment.
    fn end_segment(&mut self, session: usize) {
        self.pending.remove(&session);
        self.agent_pending.remove(&session);
    }

    fn record(&mut self, session: usize, record: Record) {
        let Body::Message { from, payload } = &record.body else {
            if let Body::Event(Event::BundleManifest { manifest }) = &record.body {
                self.recording.manifest = Some(manifest.clone());
            }
            self.recording.sessions[session].records.push(record);
            return;
        };
        let (from, proxy, line) = (*from, payload.proxy, payload.bytes.clone());
        let at = record.mono_us;
        self.recording.sessions[session].records.push(record);
        let peek = envelope::peek(&line);
        let params = || {
            peek.params
                .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
                .unwrap_or(Value::Null)
        };
        match (from, peek.kind.clone()) {
            (Side::Client, _) if proxy => {}
            (_, Kind::OtherJson | Kind::Invalid) => {}
            (Side::Client, Kind::Request { id, method }) => {
                let index = self.exchange(session, &method, params(), false, at);
                self.pending.entry(session).or_default().push((id, index));
            }
            (Side::Client, Kind::Notification { method }) => {
                self.exchange(session, &method, params(), true, at);
            }
            (Side::Client, Kind::Response { id, .. }) => {
                let Some((slot, step)) = self
                    .agent_pending
                    .get_mut(&session)
                    .and_then(|p| p.remove(&id))
                else {
                    return;
                };
                let answer = serde_json::from_slice::<Value>(&line).ok().map(|mut v| {
                    if let Some(object) = v.as_object_mut() {
                        object.remove("jsonrpc");
                        object.remove("id");
                    }
                    v
                });
                if let Some(request) = self.step_mut(session, slot, step).request.as_mut() {
                    request.answer = answer;
                    request.answered_us = Some(at);
                }
            }
            (Side::Agent, Kind::Response { id, .. }) => {
                let pending = self.pending.entry(session).or_default();
                if let Some(i) = pending.iter().position(|(p, _)| *p == id) {
                    let (_, index) = pending.remove(i);
                    self.recording.sessions[session].exchanges[index].response = Some((at, line));
                }
            }
            (Side::Agent, kind) => {
                let Some(slot) = self.slot(session) else {
                    return;
                };
                let request = match &kind {
                    Kind::Request { method, .. } => Some(AgentRequest {
                        method: method.to_string(),
                        params: params(),
                        answer: None,
                        answered_us: None,
                    }),
                    _ => None,
                };
                let steps = self.steps_mut(session, slot);
                steps.push(AgentStep {
                    at_us: at,
                    line: line.clone(),
                    request,
                });
                let step = steps.len() - 1;
                if let Kind::Request { id, .. } = kind {
                    self.agent_pending
                        .entry(session)
                        .or_default()
                        .insert(id, (slot, step));
                }
            }
        }
    }

    fn exchange(
        &mut self,
        session: usize,
        method: &str,
        params: Value,
        notification: bool,
        at: u64,
    ) -> usize {
        let exchanges = &mut self.recording.sessions[session].exchanges;
        let turn = exchanges.last().map_or(0, |e| e.turn) + usize::from(method == "session/prompt");
        let record = self.recording.sessions[session].records.len() - 1;
        let exchanges = &mut self.recording.sessions[session].exchanges;
        exchanges.push(Exchange {
            record,
            method: method.to_string(),
            params,
            notification,
            turn,
            at_us: at,
            during: Vec::new(),
            response: None,
            after: Vec::new(),
        });
        exchanges.len() - 1
    }

    fn slot(&self, session: usize) -> Option<Slot> {
        if let Some((_, index)) = self.pending.get(&session).and_then(|p| p.first()) {
            return Some(Slot::During(*index));
        }
        let last = self.recording.sessions[session]
            .exchanges
            .len()
            .checked_sub(1)?;
        Some(Slot::After(last))
    }

    fn steps_mut(&mut self, session: usize, slot: Slot) -> &mut Vec<AgentStep> {
        let exchanges = &mut self.recording.sessions[session].exchanges;
        match slot {
            Slot::During(i) => &mut exchanges[i].during,
            Slot::After(i) => &mut exchanges[i].after,
        }
    }

    fn step_mut(&mut self, session: usize, slot: Slot, step: usize) -> &mut AgentStep {
        &mut self.steps_mut(session, slot)[step]
    }
}
