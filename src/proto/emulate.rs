//! What the proxy adds for agents that lack it: `session/load` served from the journal,
//! `session/resume`, `session/list`, `session/close` and `session/delete`.
//!
//! - **Capabilities.** The initialize response gets `agentCapabilities.loadSession: true` and
//!   `sessionCapabilities.{list,resume,close,delete}: {}` where the agent lacks them; nothing
//!   else in that message changes ([`crate::wire::rewrite`]).
//! - **Synthetic load** of session S: the journal is replayed to the client
//!   ([`super::history::Replay`], through `FetchHistory`) *before* the answer; then the agent is
//!   brought to a live session: `session/resume` when it has it, else `session/new` with the
//!   load's `cwd`/`mcpServers`/`additionalDirectories`, after which S (client-facing) and the new
//!   agent ID U are mapped in every message of the session, both directions, and the recorded
//!   mode and config options are restored. The first prompt then carries a bounded transcript
//!   of the earlier conversation (re-priming), since a fresh agent session remembers nothing.
//! - **Requests the proxy makes** use ids `"acp-journal:N"`, never one the client has pending;
//!   a client request that reuses one of ours while it is pending is renumbered on the way to
//!   the agent and back. Their responses are consumed, never forwarded.
//! - Agent-side ids of a mapped session (`toolCallId`, `messageId`) get a prefix unique to the
//!   load, so they never collide with replayed ones on the client.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use serde_json::{Value, json};

use super::history::{ClientSupport, Summary};
use super::{
    Action, Body, CatalogUpdate, HistoryChunk, ListedSession, LoadMode, Proxy, Record, SessionId,
    Side, Stamp, Target,
};
use crate::journal::Event;
use crate::wire::envelope::{self, Kind, Peek, RequestId, error_json, response_line};
use crate::wire::rewrite::{RawObject, edit_line, json_string};

/// Sessions per `session/list` page served from the journal.
const PAGE: usize = 50;

/// What the agent advertised.
#[derive(Clone, Copy, Debug, Default)]
struct AgentCaps {
    load: bool,
    list: bool,
    resume: bool,
    close: bool,
    delete: bool,
    additional_directories: bool,
}

/// A client-facing session continued on a different agent-side session.
#[derive(Debug)]
struct Mapping {
    agent: SessionId,
    /// Prefix for the agent's `toolCallId`/`messageId`s.
    prefix: String,
    /// Transcript to send with the next prompt.
    reprime: Option<String>,
}

/// What brings the agent to a live session under a synthetic load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Underneath {
    Load,
    Resume,
    New,
}

/// Why the proxy sent a request to the agent.
#[derive(Clone, Debug)]
enum Step {
    Setup(Underneath),
    SetMode(String),
    SetConfig,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Fetching,
    Starting,
    Restoring,
}

/// A `session/load` (or `session/resume`) the proxy is answering.
#[derive(Debug)]
struct Load {
    client_id: RequestId,
    session: SessionId,
    /// Replay the history (load) or not (resume).
    replay: bool,
    cwd: Option<String>,
    mcp_servers: String,
    additional: Option<String>,
    /// The client's request, journaled once the session is known to exist.
    request: Option<Record>,
    phase: Phase,
    summary: Summary,
    answer: RawObject,
    outstanding: usize,
    replayed: u64,
}

impl Load {
    /// The load's `cwd`, `mcpServers` and (when the agent takes them) `additionalDirectories`,
    /// as params for the request that brings the agent up.
    fn setup_params(&self, additional_directories: bool) -> RawObject {
        let mut params = RawObject::default();
        if let Some(cwd) = &self.cwd {
            params.set("cwd", json_string(cwd));
        }
        params.set("mcpServers", self.mcp_servers.clone());
        if let (Some(dirs), true) = (&self.additional, additional_directories) {
            params.set("additionalDirectories", dirs.clone());
        }
        params
    }
}

/// A `session/list` the proxy answers or merges.
#[derive(Debug)]
struct List {
    client_id: RequestId,
    cwd: Option<String>,
    cursor: Option<String>,
    /// Forwarded to the agent (which has `list`): merge its answer.
    forwarded: bool,
    listed: Option<Vec<ListedSession>>,
    /// The agent's answer, held until `listed` arrives.
    response: Option<Bytes>,
}

#[derive(Debug)]
enum Op {
    Load(Box<Load>),
    List(List),
}

/// The emulation state of one connection.
#[derive(Debug, Default)]
pub(super) struct Emulation {
    agent: AgentCaps,
    client: ClientSupport,
    notices: bool,
    /// Client-facing sessions live on the agent in this connection.
    live: HashSet<SessionId>,
    mapped: HashMap<SessionId, Mapping>,
    by_agent: HashMap<SessionId, SessionId>,
    /// Sessions the agent is replaying natively (its replay is forwarded, not journaled).
    native_loading: HashSet<SessionId>,
    /// Sessions whose native replay is hidden from the client (`--load journal`).
    hidden: HashSet<SessionId>,
    ops: HashMap<u64, Op>,
    next_op: u64,
    /// Requests the proxy sent to the agent.
    ours: HashMap<RequestId, (u64, Step)>,
    next_id: u64,
    /// Client ids renumbered because they collided with ours: sent id → client's id.
    aliases: HashMap<RequestId, RequestId>,
    /// Agent lines held while a load is bringing its session up.
    held: Vec<Bytes>,
}

fn present(v: &Value) -> bool {
    !v.is_null()
}

impl Proxy {
    fn emulates_loading(&self) -> bool {
        matches!(self.config.load, LoadMode::Auto | LoadMode::Journal)
    }

    fn synthesizes_load(&self) -> bool {
        match self.config.load {
            LoadMode::Journal => true,
            LoadMode::Auto => !self.emulation.agent.load,
            LoadMode::Agent | LoadMode::Off => false,
        }
    }

    /// A journal record of a line the proxy made or consumed itself (redacted as configured:
    /// a `session/new` it sends carries the load's `mcpServers`).
    fn proxy_record(&mut self, at: Stamp, from: Side, line: Bytes) -> Record {
        let mut payload = self.journal_payload(&envelope::peek(&line), line.clone());
        payload.proxy = true;
        self.record(at, Body::Message { from, payload })
    }

    /// The journal record of a client line the proxy consumes (redacted as configured).
    fn client_record(&mut self, at: Stamp, peek: &Peek<'_>, line: &Bytes) -> Record {
        let payload = self.journal_payload(peek, line.clone());
        self.record(
            at,
            Body::Message {
                from: Side::Client,
                payload,
            },
        )
    }

    /// Answer a client request ourselves: journal (to `target`) and forward.
    fn answer(&mut self, at: Stamp, target: Target, id: &RequestId, outcome: Result<&str, &str>) {
        let line = response_line(id, outcome);
        let record = self.proxy_record(at, Side::Agent, line.clone());
        self.journal(target, record);
        self.actions.push_back(Action::Forward {
            to: Side::Client,
            line,
        });
    }

    /// Send a request of our own to the agent, journaled with `session`.
    fn request_agent(
        &mut self,
        at: Stamp,
        session: &SessionId,
        op: u64,
        step: Step,
        method: &str,
        params: String,
    ) {
        let id = loop {
            let id = RequestId::String(format!("acp-journal:{}", self.emulation.next_id));
            self.emulation.next_id += 1;
            if !self.pending.contains_key(&(Side::Client, id.clone())) {
                break id;
            }
        };
        let line = Bytes::from(
            format!(
                r#"{{"jsonrpc":"2.0","id":{},"method":{},"params":{params}}}"#,
                id.to_json(),
                json_string(method)
            ) + "\n",
        );
        let record = self.proxy_record(at, Side::Client, line.clone());
        self.journal(Target::Session(session.clone()), record);
        self.emulation.ours.insert(id, (op, step));
        self.actions.push_back(Action::Forward {
            to: Side::Agent,
            line,
        });
    }

    fn notify_agent(&mut self, at: Stamp, session: &SessionId, method: &str, params: String) {
        let line = Bytes::from(
            format!(
                r#"{{"jsonrpc":"2.0","method":{},"params":{params}}}"#,
                json_string(method)
            ) + "\n",
        );
        let record = self.proxy_record(at, Side::Client, line.clone());
        self.journal(Target::Session(session.clone()), record);
        self.actions.push_back(Action::Forward {
            to: Side::Agent,
            line,
        });
    }

    fn notify_client(&mut self, at: Stamp, session: &SessionId, update: Value) {
        let msg = json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": &**session, "update": update}});
        let mut line = msg.to_string().into_bytes();
        line.push(b'\n');
        let line = Bytes::from(line);
        let record = self.proxy_record(at, Side::Agent, line.clone());
        self.journal(Target::Session(session.clone()), record);
        self.actions.push_back(Action::Forward {
            to: Side::Client,
            line,
        });
    }

    /// Client lines the proxy handles itself. Returns true when the line was consumed.
    pub(super) fn intercept_client(&mut self, at: Stamp, peek: &Peek<'_>, line: &Bytes) -> bool {
        let session = || peek.session.as_deref().map(SessionId::from);
        match &peek.kind {
            Kind::Request { id, method } => match method.as_ref() {
                "session/load" if self.synthesizes_load() => {
                    self.start_load(at, id, peek, line, true)
                }
                "session/load" => {
                    if let Some(s) = session() {
                        self.emulation.native_loading.insert(s);
                    }
                    false
                }
                "session/resume" if !self.emulation.agent.resume && self.emulates_loading() => {
                    self.start_load(at, id, peek, line, false)
                }
                "session/list" => self.start_list(at, id, peek, line),
                "session/close" if self.emulation.agent.close => {
                    // The agent closes it: a later load must bring it up again.
                    if let Some(s) = session() {
                        self.emulation.live.remove(&s);
                    }
                    false
                }
                "session/close" => {
                    let Some(s) = session() else { return false };
                    let record = self.client_record(at, peek, line);
                    self.open_known(&s);
                    self.journal(Target::Session(s.clone()), record);
                    // Closing cancels ongoing work, as `session/cancel` would.
                    let agent_side = self.agent_side(&s);
                    self.notify_agent(
                        at,
                        &s,
                        "session/cancel",
                        json!({"sessionId": &*agent_side}).to_string(),
                    );
                    self.emulation.live.remove(&s);
                    self.answer(at, Target::Session(s), id, Ok("{}"));
                    true
                }
                "session/delete" => {
                    let Some(s) = session() else { return false };
                    self.actions
                        .push_back(Action::Catalog(CatalogUpdate::Delete {
                            session: s.clone(),
                        }));
                    if self.emulation.agent.delete {
                        return false;
                    }
                    let record = self.client_record(at, peek, line);
                    self.journal(Target::Connection, record);
                    self.answer(at, Target::Connection, id, Ok("{}"));
                    true
                }
                _ => false,
            },
            Kind::Notification { method } => match method.as_ref() {
                "$/cancel_request" => {
                    let Some(rid) = envelope::request_id(peek.params) else {
                        return false;
                    };
                    let Some(op) = self.op_for_client(&rid) else {
                        return false;
                    };
                    self.cancel_op(at, op, line, "cancelled by $/cancel_request")
                }
                "session/cancel" => {
                    let Some(s) = session() else { return false };
                    let op = self.emulation.ops.iter().find_map(|(k, op)| match op {
                        Op::Load(l) if l.session == s => Some(*k),
                        _ => None,
                    });
                    match op {
                        Some(op) => self.cancel_op(at, op, line, "cancelled by session/cancel"),
                        None => false,
                    }
                }
                _ => false,
            },
            _ => false,
        }
    }

    fn op_for_client(&self, rid: &RequestId) -> Option<u64> {
        self.emulation.ops.iter().find_map(|(k, op)| match op {
            Op::Load(l) if &l.client_id == rid => Some(*k),
            Op::List(l) if &l.client_id == rid && !l.forwarded => Some(*k),
            _ => None,
        })
    }

    /// Stop a synthetic operation and answer it with -32800.
    fn cancel_op(&mut self, at: Stamp, op: u64, line: &Bytes, why: &str) -> bool {
        let Some(taken) = self.emulation.ops.remove(&op) else {
            return false;
        };
        let (client_id, target) = match &taken {
            Op::Load(l) => (l.client_id.clone(), Target::Session(l.session.clone())),
            Op::List(l) => (l.client_id.clone(), Target::Connection),
        };
        if let Op::Load(load) = taken {
            self.abandon_load(
                op,
                &load.session,
                load.phase == Phase::Fetching,
                load.request,
            );
        }
        let record = self.client_record(at, &envelope::peek(line), line);
        self.journal(target.clone(), record);
        self.answer(
            at,
            target,
            &client_id,
            Err(&error_json(
                -32800,
                "Request cancelled",
                Some(json!({"reason": why})),
            )),
        );
        self.release_held(at);
        true
    }

    /// A load given up on (cancelled, or its agent gone): stop reading its history, stop hiding
    /// the session's agent lines, and journal its request in the session's journal.
    fn abandon_load(
        &mut self,
        op: u64,
        session: &SessionId,
        fetching: bool,
        request: Option<Record>,
    ) {
        self.emulation.hidden.remove(session);
        if fetching {
            self.actions.push_back(Action::CancelHistory { load: op });
        }
        self.open_known(session);
        if let Some(request) = request {
            self.journal(Target::Session(session.clone()), request);
        }
    }

    /// Open the journal of a session we are about to write to (no early-copy claiming).
    fn open_known(&mut self, session: &SessionId) {
        if !self.sessions.contains(session) {
            self.open_session(session, None, false);
        }
    }

    fn agent_side(&self, session: &SessionId) -> SessionId {
        self.emulation
            .mapped
            .get(session)
            .map_or_else(|| session.clone(), |m| m.agent.clone())
    }

    fn start_load(
        &mut self,
        at: Stamp,
        id: &RequestId,
        peek: &Peek<'_>,
        line: &Bytes,
        replay: bool,
    ) -> bool {
        let params: Value = peek
            .params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let Some(session) = params["sessionId"].as_str().map(SessionId::from) else {
            let record = self.client_record(at, peek, line);
            self.journal(Target::Connection, record);
            self.answer(
                at,
                Target::Connection,
                id,
                Err(&error_json(
                    -32602,
                    "Invalid params: sessionId is required",
                    None,
                )),
            );
            return true;
        };
        let record = self.client_record(at, peek, line);
        let op = self.emulation.next_op;
        self.emulation.next_op += 1;
        let load = Load {
            client_id: id.clone(),
            session: session.clone(),
            replay,
            cwd: params["cwd"].as_str().map(str::to_string),
            mcp_servers: if present(&params["mcpServers"]) {
                params["mcpServers"].to_string()
            } else {
                "[]".into()
            },
            additional: present(&params["additionalDirectories"])
                .then(|| params["additionalDirectories"].to_string()),
            request: Some(record),
            phase: Phase::Fetching,
            summary: Summary::default(),
            answer: RawObject::default(),
            outstanding: 0,
            replayed: 0,
        };
        self.emulation.ops.insert(op, Op::Load(Box::new(load)));
        self.actions.push_back(Action::FetchHistory {
            load: op,
            session,
            support: self.emulation.client,
            transcript_limit: self.config.reprime_limit,
        });
        true
    }

    /// A chunk of a session's history, answering [`Action::FetchHistory`].
    pub fn handle_history(&mut self, at: Stamp, load: u64, chunk: HistoryChunk) {
        let Some(Op::Load(l)) = self.emulation.ops.get_mut(&load) else {
            return;
        };
        match chunk {
            HistoryChunk::Lines(lines) => {
                if l.replay {
                    l.replayed += lines.len() as u64;
                    for line in lines {
                        self.actions.push_back(Action::Forward {
                            to: Side::Client,
                            line,
                        });
                    }
                }
            }
            HistoryChunk::Missing => {
                let Some(Op::Load(l)) = self.emulation.ops.remove(&load) else {
                    return;
                };
                if let Some(request) = l.request {
                    self.journal(Target::Connection, request);
                }
                let error = error_json(
                    -32002,
                    "Resource not found: no journal for this session",
                    Some(json!({"sessionId": &*l.session})),
                );
                self.answer(at, Target::Connection, &l.client_id, Err(&error));
                self.release_held(at);
            }
            HistoryChunk::End(summary) => {
                let session = l.session.clone();
                let replayed = l.replayed;
                l.summary = summary;
                l.phase = Phase::Starting;
                let cwd = l.cwd.clone();
                let request = l.request.take();
                if !self.sessions.contains(&session) {
                    self.open_session(&session, cwd, false);
                }
                if let Some(request) = request {
                    self.journal(Target::Session(session.clone()), request);
                }
                let event = self.record(at, Body::Event(Event::Replayed { lines: replayed }));
                self.journal(Target::Session(session.clone()), event);
                self.bring_up(at, load);
            }
        }
    }

    /// After the replay: make the session live on the agent.
    fn bring_up(&mut self, at: Stamp, op: u64) {
        let Some(Op::Load(l)) = self.emulation.ops.get(&op) else {
            return;
        };
        let session = l.session.clone();
        if self.emulation.live.contains(&session) {
            // Still live on the agent in this connection: nothing to start.
            self.finish_load(at, op, Ok(()));
            return;
        }
        let caps = self.emulation.agent;
        let mut params = l.setup_params(caps.additional_directories);
        let (method, how) = if caps.load && self.config.load == LoadMode::Journal {
            self.emulation.hidden.insert(session.clone());
            params.set("sessionId", json_string(&session));
            ("session/load", Underneath::Load)
        } else if caps.resume {
            let target = l
                .summary
                .agent_session
                .clone()
                .unwrap_or_else(|| session.to_string());
            params.set("sessionId", json_string(&target));
            ("session/resume", Underneath::Resume)
        } else {
            ("session/new", Underneath::New)
        };
        self.request_agent(at, &session, op, Step::Setup(how), method, params.to_json());
    }

    /// Agent lines the proxy consumes or holds. Returns true when the line was consumed.
    pub(super) fn intercept_agent(&mut self, at: Stamp, peek: &Peek<'_>, line: &Bytes) -> bool {
        match &peek.kind {
            Kind::Response { id, is_error } => {
                if let Some((op, step)) = self.emulation.ours.remove(id) {
                    self.on_our_response(at, op, step, peek, line, *is_error);
                    return true;
                }
                let client_id = self
                    .emulation
                    .aliases
                    .get(id)
                    .cloned()
                    .unwrap_or_else(|| id.clone());
                let list = self.emulation.ops.iter().find_map(|(k, op)| match op {
                    Op::List(l) if l.forwarded && l.client_id == client_id => Some(*k),
                    _ => None,
                });
                if let Some(op) = list {
                    // The client gets its own id back, even if it was renumbered.
                    let line = match self.emulation.aliases.remove(id) {
                        Some(original) => edit_line(line, |m| m.set("id", original.to_json()))
                            .map_or_else(|| line.clone(), Bytes::from),
                        None => line.clone(),
                    };
                    if let Some(Op::List(l)) = self.emulation.ops.get_mut(&op) {
                        l.response = Some(line);
                    }
                    self.try_merge_list(at, op);
                    return true;
                }
                false
            }
            Kind::Notification { .. } | Kind::Request { .. } => {
                let Some(session) = peek.session.as_deref().map(SessionId::from) else {
                    return false;
                };
                if self.emulation.hidden.contains(&session)
                    && peek.method() == Some("session/update")
                {
                    return true; // the agent's own replay under `--load journal`
                }
                if self.is_starting(&session) {
                    self.emulation.held.push(line.clone());
                    return true;
                }
                false
            }
            _ => false,
        }
    }

    /// True while a load is bringing up the agent-side `session` (or an agent-side session not
    /// known yet, when a `session/new` underneath is in flight).
    fn is_starting(&self, session: &SessionId) -> bool {
        self.emulation.ops.values().any(|op| match op {
            Op::Load(l) if matches!(l.phase, Phase::Starting | Phase::Restoring) => {
                self.emulation
                    .mapped
                    .get(&l.session)
                    .is_some_and(|m| &m.agent == session)
                    || (l.phase == Phase::Starting
                        && !self.sessions.contains(session)
                        && !self.emulation.by_agent.contains_key(session))
            }
            _ => false,
        })
    }

    fn on_our_response(
        &mut self,
        at: Stamp,
        op: u64,
        step: Step,
        peek: &Peek<'_>,
        line: &Bytes,
        is_error: bool,
    ) {
        let session = match self.emulation.ops.get(&op) {
            Some(Op::Load(l)) => Some(l.session.clone()),
            _ => None,
        };
        let record = self.proxy_record(at, Side::Agent, line.clone());
        match &session {
            Some(s) => self.journal(Target::Session(s.clone()), record),
            None => self.journal(Target::Connection, record),
        }
        let Some(session) = session else { return }; // cancelled meanwhile
        let result: Value = peek
            .result
            .and_then(|r| serde_json::from_str(r.get()).ok())
            .unwrap_or(Value::Null);
        match step {
            Step::Setup(how) => {
                self.emulation.hidden.remove(&session);
                if is_error {
                    if how == Underneath::Resume {
                        // The agent lost it: start afresh.
                        self.request_new(at, op, &session);
                        return;
                    }
                    let error = serde_json::from_slice::<Value>(line)
                        .ok()
                        .map(|m| m["error"].to_string())
                        .unwrap_or_else(|| {
                            error_json(-32603, "the agent failed to start the session", None)
                        });
                    self.finish_load(at, op, Err(error));
                    return;
                }
                let agent_session = match how {
                    Underneath::New => result["sessionId"].as_str().map(SessionId::from),
                    Underneath::Resume => match self.emulation.ops.get(&op) {
                        Some(Op::Load(l)) => Some(
                            l.summary
                                .agent_session
                                .clone()
                                .map_or_else(|| session.clone(), SessionId::from),
                        ),
                        _ => None,
                    },
                    Underneath::Load => Some(session.clone()),
                };
                let Some(agent_session) = agent_session else {
                    self.finish_load(
                        at,
                        op,
                        Err(error_json(
                            -32603,
                            "the agent's session/new response has no sessionId",
                            None,
                        )),
                    );
                    return;
                };
                // A fresh session is mapped even when the agent reuses the ID (agents that count
                // sessions from 0 per process do): it needs re-priming and fresh tool ids.
                if agent_session != session || how == Underneath::New {
                    self.map_session(at, op, &session, &agent_session, how == Underneath::New);
                }
                let Some(Op::Load(l)) = self.emulation.ops.get_mut(&op) else {
                    return;
                };
                for key in ["modes", "configOptions"] {
                    if present(&result[key]) {
                        l.answer.set(key, result[key].to_string());
                    }
                }
                if how == Underneath::New {
                    self.restore_state(at, op, &agent_session, &result);
                }
                self.maybe_finish(at, op);
            }
            Step::SetMode(mode) => {
                if let Some(Op::Load(l)) = self.emulation.ops.get_mut(&op) {
                    l.outstanding -= 1;
                    if !is_error {
                        l.answer
                            .edit("modes", |m| m.set("currentModeId", json_string(&mode)));
                    }
                }
                self.maybe_finish(at, op);
            }
            Step::SetConfig => {
                if let Some(Op::Load(l)) = self.emulation.ops.get_mut(&op) {
                    l.outstanding -= 1;
                    if !is_error && present(&result["configOptions"]) {
                        l.answer
                            .set("configOptions", result["configOptions"].to_string());
                    }
                }
                self.maybe_finish(at, op);
            }
        }
    }

    fn request_new(&mut self, at: Stamp, op: u64, session: &SessionId) {
        let Some(Op::Load(l)) = self.emulation.ops.get(&op) else {
            return;
        };
        let params = l.setup_params(self.emulation.agent.additional_directories);
        self.request_agent(
            at,
            session,
            op,
            Step::Setup(Underneath::New),
            "session/new",
            params.to_json(),
        );
    }

    /// Map client-facing `session` to `agent`, persistently.
    fn map_session(
        &mut self,
        at: Stamp,
        op: u64,
        session: &SessionId,
        agent: &SessionId,
        fresh: bool,
    ) {
        let (reprime, turns) = match self.emulation.ops.get(&op) {
            Some(Op::Load(l)) if fresh && self.config.reprime && l.summary.turns > 0 => {
                (Some(l.summary.transcript.clone()), l.summary.turns)
            }
            _ => (None, 0),
        };
        let prefix = format!("{}-", base36(at.unix_us.unsigned_abs()));
        self.emulation.mapped.insert(
            session.clone(),
            Mapping {
                agent: agent.clone(),
                prefix,
                reprime: reprime.clone(),
            },
        );
        self.emulation
            .by_agent
            .insert(agent.clone(), session.clone());
        self.emulation.live.insert(session.clone());
        let event = self.record(
            at,
            Body::Event(Event::SessionMapped {
                agent_session: agent.to_string(),
            }),
        );
        self.journal(Target::Session(session.clone()), event);
        self.actions
            .push_back(Action::Catalog(CatalogUpdate::Alias {
                session: session.clone(),
                agent: agent.clone(),
            }));
        if fresh {
            let what = if reprime.is_some() {
                format!(
                    "the earlier conversation ({turns} turns) will be sent as context with your next prompt"
                )
            } else {
                "it does not remember the earlier conversation".to_string()
            };
            let message = format!(
                "The agent cannot load sessions: acp-journal replayed session {session} from its journal and started a new agent session ({agent}); {what}."
            );
            self.actions.push_back(Action::Log(message.clone()));
            if self.emulation.notices {
                self.notify_client(at, session, json!({"sessionUpdate": "notice", "severity": "info", "title": "Conversation restored from the journal", "description": message}));
            }
        }
    }

    /// Restore the recorded mode and config options on a fresh agent session.
    fn restore_state(&mut self, at: Stamp, op: u64, agent: &SessionId, result: &Value) {
        let Some(Op::Load(l)) = self.emulation.ops.get(&op) else {
            return;
        };
        let session = l.session.clone();
        let summary = l.summary.clone();
        let mut requests = Vec::new();
        if let Some(mode) = &summary.mode
            && result["modes"]["currentModeId"].as_str() != Some(mode.as_str())
            && result["modes"]["availableModes"]
                .as_array()
                .is_some_and(|modes| modes.iter().any(|m| m["id"] == mode.as_str()))
        {
            let params = json!({"sessionId": &**agent, "modeId": mode}).to_string();
            requests.push((Step::SetMode(mode.clone()), "session/set_mode", params));
        }
        for option in result["configOptions"].as_array().into_iter().flatten() {
            let Some(id) = option["id"].as_str() else {
                continue;
            };
            let Some(recorded) = summary.config.get(id) else {
                continue;
            };
            if &option["currentValue"] == recorded {
                continue;
            }
            let mut params = json!({"sessionId": &**agent, "configId": id, "value": recorded});
            if recorded.is_boolean() {
                params["type"] = json!("boolean");
            }
            requests.push((
                Step::SetConfig,
                "session/set_config_option",
                params.to_string(),
            ));
        }
        if let Some(Op::Load(l)) = self.emulation.ops.get_mut(&op) {
            l.outstanding += requests.len();
            l.phase = Phase::Restoring;
        }
        for (step, method, params) in requests {
            self.request_agent(at, &session, op, step, method, params);
        }
    }

    fn maybe_finish(&mut self, at: Stamp, op: u64) {
        if let Some(Op::Load(l)) = self.emulation.ops.get(&op)
            && l.outstanding == 0
        {
            self.finish_load(at, op, Ok(()));
        }
    }

    /// Answer the client's load and release what was held.
    fn finish_load(&mut self, at: Stamp, op: u64, outcome: Result<(), String>) {
        let Some(Op::Load(l)) = self.emulation.ops.remove(&op) else {
            return;
        };
        let target = Target::Session(l.session.clone());
        match outcome {
            Ok(()) => {
                self.emulation.live.insert(l.session.clone());
                self.answer(at, target, &l.client_id, Ok(&l.answer.to_json()));
            }
            Err(error) => self.answer(at, target, &l.client_id, Err(&error)),
        }
        self.release_held(at);
    }

    /// Forward the agent lines held during a load, through the normal path.
    fn release_held(&mut self, at: Stamp) {
        let held = std::mem::take(&mut self.emulation.held);
        for line in held {
            self.handle_line(at, Side::Agent, line);
        }
    }

    fn start_list(&mut self, at: Stamp, id: &RequestId, peek: &Peek<'_>, line: &Bytes) -> bool {
        let op = self.emulation.next_op;
        self.emulation.next_op += 1;
        let forwarded = self.emulation.agent.list;
        self.emulation.ops.insert(
            op,
            Op::List(List {
                client_id: id.clone(),
                cwd: envelope::str_field(peek.params, "cwd"),
                cursor: envelope::str_field(peek.params, "cursor"),
                forwarded,
                listed: None,
                response: None,
            }),
        );
        self.actions
            .push_back(Action::FetchSessions { request: op });
        if forwarded {
            return false;
        }
        let record = self.client_record(at, peek, line);
        self.journal(Target::Connection, record);
        true
    }

    /// The store's sessions, answering [`Action::FetchSessions`].
    pub fn handle_sessions(&mut self, at: Stamp, request: u64, sessions: Vec<ListedSession>) {
        let Some(Op::List(l)) = self.emulation.ops.get_mut(&request) else {
            return;
        };
        l.listed = Some(sessions);
        if l.forwarded {
            self.try_merge_list(at, request);
            return;
        }
        let Some(Op::List(l)) = self.emulation.ops.remove(&request) else {
            return;
        };
        let offset = match l.cursor.as_deref().map(decode_cursor) {
            None => 0,
            Some(Some(n)) => n,
            Some(None) => {
                let error = error_json(-32602, "Invalid params: unknown cursor", None);
                self.answer(at, Target::Connection, &l.client_id, Err(&error));
                return;
            }
        };
        let all: Vec<Value> = l
            .listed
            .unwrap_or_default()
            .iter()
            .filter(|s| l.cwd.is_none() || s.cwd == l.cwd)
            .filter_map(session_info)
            .collect();
        let page: Vec<Value> = all.iter().skip(offset).take(PAGE).cloned().collect();
        let mut result = json!({"sessions": page});
        if offset.saturating_add(PAGE) < all.len() {
            result["nextCursor"] = json!(encode_cursor(offset + PAGE));
        }
        self.answer(
            at,
            Target::Connection,
            &l.client_id,
            Ok(&result.to_string()),
        );
    }

    /// Merge the agent's `session/list` answer with the journal's sessions.
    fn try_merge_list(&mut self, at: Stamp, op: u64) {
        let ready = matches!(self.emulation.ops.get(&op), Some(Op::List(l)) if l.listed.is_some() && l.response.is_some());
        if !ready {
            return;
        }
        let Some(Op::List(l)) = self.emulation.ops.remove(&op) else {
            return;
        };
        let listed = l.listed.unwrap_or_default();
        let response = l.response.expect("checked");
        let mut to_client: HashMap<String, String> = self
            .emulation
            .by_agent
            .iter()
            .map(|(a, s)| (a.to_string(), s.to_string()))
            .collect();
        for s in &listed {
            for a in &s.agent_ids {
                to_client.insert(a.clone(), s.session.clone());
            }
        }
        let merged = edit_line(&response, |msg| {
            let Some(result) = msg
                .get("result")
                .and_then(|r| serde_json::from_str::<Value>(r).ok())
            else {
                return;
            };
            let mut seen = HashSet::new();
            let mut sessions = Vec::new();
            for mut info in result["sessions"].as_array().cloned().unwrap_or_default() {
                if let Some(id) = info["sessionId"].as_str()
                    && let Some(client) = to_client.get(id)
                {
                    info["sessionId"] = json!(client);
                }
                if seen.insert(info["sessionId"].to_string()) {
                    sessions.push(info);
                }
            }
            if l.cursor.is_none() {
                for s in listed.iter().filter(|s| l.cwd.is_none() || s.cwd == l.cwd) {
                    if let Some(info) = session_info(s)
                        && seen.insert(info["sessionId"].to_string())
                    {
                        sessions.push(info);
                    }
                }
            }
            msg.edit("result", |r| {
                r.set("sessions", Value::Array(sessions).to_string())
            });
        });
        let line = merged.map(Bytes::from).unwrap_or(response);
        let facing = envelope::peek(&line);
        self.relay(at, Side::Agent, &facing, line.clone(), line.clone());
    }

    /// Edits on the way through: capabilities, mapped session IDs, renumbered ids, re-priming.
    pub(super) fn rewrite(
        &mut self,
        at: Stamp,
        from: Side,
        peek: &Peek<'_>,
        line: &Bytes,
    ) -> Option<Vec<u8>> {
        match from {
            Side::Client => self.rewrite_client(at, peek, line),
            Side::Agent => self.rewrite_agent(peek, line),
        }
    }

    fn rewrite_client(&mut self, at: Stamp, peek: &Peek<'_>, line: &Bytes) -> Option<Vec<u8>> {
        let method = peek.method();
        if method == Some("initialize") {
            self.learn_client(peek);
        }
        let mut new_id = None;
        if let Kind::Request { id, .. } = &peek.kind
            && self.emulation.ours.contains_key(id)
        {
            let alias = RequestId::String(format!("acp-journal:client:{}", self.emulation.next_id));
            self.emulation.next_id += 1;
            self.emulation.aliases.insert(alias.clone(), id.clone());
            new_id = Some(alias);
        }
        let cancel_alias = match (method, envelope::request_id(peek.params)) {
            (Some("$/cancel_request"), Some(rid)) => self
                .emulation
                .aliases
                .iter()
                .find_map(|(alias, orig)| (orig == &rid).then(|| alias.clone())),
            _ => None,
        };
        // Only requests and notifications are mapped: an object without a method is no
        // message of the session, and passes unchanged.
        let session = peek
            .session
            .as_deref()
            .filter(|_| method.is_some())
            .map(SessionId::from);
        let mapping = session
            .as_ref()
            .and_then(|s| self.emulation.mapped.get_mut(s));
        if new_id.is_none() && cancel_alias.is_none() && mapping.is_none() {
            return None;
        }
        let (agent, reprime) = match mapping {
            Some(m) => {
                let reprime = if method == Some("session/prompt") {
                    m.reprime.take()
                } else {
                    None
                };
                (Some(m.agent.clone()), reprime)
            }
            None => (None, None),
        };
        let out = edit_line(line, |msg| {
            if let Some(id) = &new_id {
                msg.set("id", id.to_json());
            }
            msg.edit("params", |p| {
                if let Some(alias) = &cancel_alias {
                    p.set("requestId", alias.to_json());
                }
                if let Some(agent) = &agent {
                    p.set("sessionId", json_string(agent.as_ref()));
                }
                if let Some(transcript) = &reprime
                    && let Some(prompt) = p.get("prompt")
                {
                    let block = json!({"type": "text", "text": format!("[Context restored by acp-journal: this conversation was interrupted and resumed in a new session. Earlier turns:]\n{transcript}[End of earlier turns. The user's new message follows.]")});
                    let rest = prompt.trim_start().strip_prefix('[').unwrap_or("]").trim_start();
                    let joined = if rest.starts_with(']') { format!("[{block}]") } else { format!("[{block},{rest}") };
                    p.set("prompt", joined);
                }
            });
        })?;
        if let (Some(session), Some(_)) = (&session, &reprime) {
            let sent: Value = serde_json::from_slice(&out).unwrap_or(Value::Null);
            let event = self.record(
                at,
                Body::Event(Event::Reprimed {
                    sent: sent["params"]["prompt"].clone(),
                }),
            );
            self.journal(Target::Session(session.clone()), event);
        }
        Some(out)
    }

    fn rewrite_agent(&mut self, peek: &Peek<'_>, line: &Bytes) -> Option<Vec<u8>> {
        let mut out: Option<Vec<u8>> = None;
        if let Kind::Response { id, is_error } = &peek.kind {
            let original = self.emulation.aliases.remove(id);
            let client_id = original.clone().unwrap_or_else(|| id.clone());
            let pending = self.pending.get(&(Side::Client, client_id.clone()));
            let method = pending.map(|p| p.method.clone());
            let session = pending.and_then(|p| p.session.clone());
            if method.as_deref() == Some("initialize") && !is_error {
                out = self.inject_capabilities(peek, line);
            }
            if let (Some("session/load"), Some(s)) = (method.as_deref(), &session) {
                self.emulation.native_loading.remove(s);
                if !is_error {
                    self.emulation.live.insert(s.clone());
                }
            }
            if let Some(original) = original {
                out = edit_line(out.as_deref().unwrap_or(line), |msg| {
                    msg.set("id", original.to_json())
                });
            }
            if method.as_deref() == Some("session/new")
                && !is_error
                && let Some(s) = envelope::str_field(peek.result, "sessionId")
            {
                self.emulation.live.insert(SessionId::from(s));
            }
            return out;
        }
        let method = peek.method()?;
        let session = peek.session.as_deref().map(SessionId::from)?;
        if method == "session/update" && session_info_finder().find(line).is_some() {
            self.catalog_info(peek, &session);
        }
        let client_session = self.emulation.by_agent.get(&session)?.clone();
        let prefix = self.emulation.mapped.get(&client_session)?.prefix.clone();
        let prefixed = |v: Option<&str>| -> Option<String> {
            let s: String = serde_json::from_str(v?).ok()?;
            Some(json_string(&format!("{prefix}{s}")))
        };
        edit_line(line, |msg| {
            msg.edit("params", |p| {
                p.set("sessionId", json_string(&client_session));
                for (object, fields) in [
                    ("update", &["toolCallId", "messageId"][..]),
                    ("toolCall", &["toolCallId"][..]),
                ] {
                    if p.get(object).is_some() {
                        p.edit(object, |o| {
                            for field in fields {
                                if let Some(v) = prefixed(o.get(field)) {
                                    o.set(field, v);
                                }
                            }
                        });
                    }
                }
                if let Some(v) = prefixed(p.get("toolCallId")) {
                    p.set("toolCallId", v);
                }
            });
        })
    }

    fn catalog_info(&mut self, peek: &Peek<'_>, session: &SessionId) {
        let params: Value = peek
            .params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let update = &params["update"];
        if update["sessionUpdate"] != "session_info_update" {
            return;
        }
        let client_session = self
            .emulation
            .by_agent
            .get(session)
            .cloned()
            .unwrap_or_else(|| session.clone());
        self.actions.push_back(Action::Catalog(CatalogUpdate::Info {
            session: client_session,
            title: update["title"].as_str().map(str::to_string),
            updated_at: update["updatedAt"].as_str().map(str::to_string),
        }));
    }

    fn learn_client(&mut self, peek: &Peek<'_>) {
        let params: Value = peek
            .params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let caps = &params["clientCapabilities"];
        self.emulation.notices = present(&caps["session"]["notices"]);
        self.emulation.client = ClientSupport::from_capabilities(caps);
    }

    /// Learn the agent's capabilities and add what the proxy provides.
    fn inject_capabilities(&mut self, peek: &Peek<'_>, line: &Bytes) -> Option<Vec<u8>> {
        let result: Value = peek
            .result
            .and_then(|r| serde_json::from_str(r.get()).ok())?;
        let caps = &result["agentCapabilities"];
        let session = &caps["sessionCapabilities"];
        let agent = AgentCaps {
            load: caps["loadSession"] == true,
            list: present(&session["list"]),
            resume: present(&session["resume"]),
            close: present(&session["close"]),
            delete: present(&session["delete"]),
            additional_directories: present(&session["additionalDirectories"]),
        };
        self.emulation.agent = agent;
        let mut added = Vec::new();
        let loading = self.emulates_loading();
        if loading && !agent.load {
            added.push("loadSession");
        }
        for (name, has, wanted) in [
            ("list", agent.list, true),
            ("resume", agent.resume, loading),
            ("close", agent.close, true),
            ("delete", agent.delete, true),
        ] {
            if wanted && !has {
                added.push(name);
            }
        }
        if added.is_empty() {
            return None;
        }
        let out = edit_line(line, |msg| {
            msg.edit("result", |r| {
                r.edit("agentCapabilities", |c| {
                    if added.contains(&"loadSession") {
                        c.set("loadSession", "true".into());
                    }
                    if added.iter().any(|a| *a != "loadSession") {
                        c.edit("sessionCapabilities", |s| {
                            for name in added.iter().filter(|a| **a != "loadSession") {
                                s.set(name, "{}".into());
                            }
                        });
                    }
                });
            });
        })?;
        self.actions.push_back(Action::Log(format!(
            "advertising to the client on the agent's behalf: {}",
            added.join(", ")
        )));
        Some(out)
    }

    /// True for the agent's own replay during a native load (forwarded, not journaled again).
    pub(super) fn is_native_replay(&self, from: Side, peek: &Peek<'_>, target: &Target) -> bool {
        from == Side::Agent
            && peek.method() == Some("session/update")
            && matches!(target, Target::Session(s) if self.emulation.native_loading.contains(s))
    }

    /// The agent's output ended: answer every client request still waiting on it, whether
    /// the proxy was serving it (loads, merged lists) or the agent was, in arrival order.
    pub(super) fn agent_gone(&mut self, at: Stamp) {
        let mut ops: Vec<u64> = self.emulation.ops.keys().copied().collect();
        ops.sort_unstable();
        for op in ops {
            match self.emulation.ops.get_mut(&op) {
                Some(Op::Load(l)) => {
                    let method = if l.replay {
                        "session/load"
                    } else {
                        "session/resume"
                    };
                    let (session, fetching, request) = (
                        l.session.clone(),
                        l.phase == Phase::Fetching,
                        l.request.take(),
                    );
                    self.abandon_load(op, &session, fetching, request);
                    self.finish_load(at, op, Err(agent_exited(method)));
                }
                // A list forwarded to the agent is answered through the pending table below.
                Some(Op::List(l)) if l.forwarded => {
                    self.emulation.ops.remove(&op);
                }
                _ => {}
            }
        }
        let mut waiting: Vec<(u64, RequestId)> = self
            .pending
            .iter()
            .filter(|((side, _), _)| *side == Side::Client)
            .map(|((_, id), p)| (p.seq, id.clone()))
            .collect();
        waiting.sort_unstable_by_key(|(seq, _)| *seq);
        for (_, id) in waiting {
            let Some(pending) = self.pending.remove(&(Side::Client, id.clone())) else {
                continue;
            };
            let target = match pending.session {
                Some(s) if self.sessions.contains(&s) => Target::Session(s),
                _ => Target::Connection,
            };
            self.answer(at, target, &id, Err(&agent_exited(&pending.method)));
        }
        self.emulation.aliases.clear();
    }
}

/// The error a client request gets when the agent exited before answering it.
fn agent_exited(method: &str) -> String {
    error_json(
        -32603,
        "the agent exited",
        Some(json!({"reason": "the agent exited before answering", "method": method})),
    )
}

/// Finds `"session_info_update"` (built once: building a finder costs more than a search).
fn session_info_finder() -> &'static memchr::memmem::Finder<'static> {
    static FINDER: std::sync::OnceLock<memchr::memmem::Finder<'static>> =
        std::sync::OnceLock::new();
    FINDER.get_or_init(|| memchr::memmem::Finder::new(b"\"session_info_update\""))
}

/// The `SessionInfo` of a listed session (`None` without a cwd, which the schema requires).
fn session_info(s: &ListedSession) -> Option<Value> {
    let mut info = json!({"sessionId": s.session, "cwd": s.cwd.as_ref()?});
    if let Some(title) = &s.title {
        info["title"] = json!(title);
    }
    if let Some(at) = &s.updated_at {
        info["updatedAt"] = json!(at);
    }
    Some(info)
}

fn encode_cursor(offset: usize) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("acpj:{offset}"))
}

fn decode_cursor(cursor: &str) -> Option<usize> {
    use base64::Engine;
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()?;
    String::from_utf8(raw)
        .ok()?
        .strip_prefix("acpj:")?
        .parse()
        .ok()
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).expect("ascii")
}
