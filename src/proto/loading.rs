//! Loads the proxy serves: a synthetic `session/load` (or `session/resume`) of session S.
//!
//! 1. **Fetching**: the journal is replayed to the client ([`super::history::Replay`], through
//!    `FetchHistory`) *before* the answer (a resume replays nothing).
//! 2. **Starting**: the agent is brought to a live session. When one of its own agent-side
//!    sessions on this host holds every turn of the journal ([`super::history`]'s
//!    `Summary::agent_copy`), that one: its own `session/load` with the replay hidden
//!    (`--load journal`, agents with `loadSession`), else `session/resume` when it has it;
//!    otherwise `session/new` with the load's `cwd`/`mcpServers`/`additionalDirectories`,
//!    after which S and the new agent ID U are mapped ([`super::sessions`]). A session the
//!    journal lacks is the agent's own to load, its replay shown.
//! 3. **Restoring**: on a fresh session the recorded mode and config options are set again.
//! 4. The load is answered (with the agent's `modes`/`configOptions`), and the agent lines held
//!    meanwhile are released. The first prompt then carries a bounded transcript of the earlier
//!    conversation (re-priming), since a fresh agent session remembers nothing.
//!
//! A load changes its session and no other, through the [`ScopedSession`] the route (or the
//! proxy, for a history's chunk or the agent's end) hands it with each input.

use bytes::Bytes;
use serde_json::json;

use super::agent_side::Mapping;
use super::context::Cx;
use super::load_request::{Asker, LoadRequest};
use super::load_state::{
    BringUp, Load, Phase, Progress, error_of, present, refused_by_lease, result_of,
    still_the_agents_cursors,
};
use super::mapping;
use super::pending::{Step, Underneath};
use super::sessions::{ScopedSession, Session};
use super::vocab::{
    Action, AgentCopy, AgentSessionId, ClientSupport, HashMap, HistoryChunk, Line, SessionId,
    Stamp, Summary, Target,
};
use crate::journal::Event;
use crate::wire::Side;
use crate::wire::envelope::{Peek, RequestId, error_json};
use crate::wire::rewrite::{RawObject, json_string};

/// Every load in progress.
#[derive(Debug, Default)]
pub(super) struct Loads {
    loads: HashMap<u64, Load>,
    /// Client request id → load. (A session's latest load is the one of its loads marked
    /// [`Load::latest`]: a load may start before the table has the session, and a session's
    /// entry is what attaches a host's joining connection to it.)
    by_request: HashMap<RequestId, u64>,
}

impl Loads {
    /// The load a client request id names.
    pub(super) fn by_request(&self, id: &RequestId) -> Option<u64> {
        self.by_request.get(id).copied()
    }

    /// The latest load of client-facing session `s`, while it goes on: found among the loads
    /// in progress (none, the common case, costs nothing; else a few).
    pub(super) fn of_session(&self, s: &str) -> Option<u64> {
        if self.loads.is_empty() {
            return None;
        }
        let mut loads = self.loads.iter();
        loads
            .find(|(_, l)| l.latest && *l.session == *s)
            .map(|(op, _)| *op)
    }

    /// Queue a client line behind the restore of its session (load `op`: its session's
    /// [`super::sessions::Session::restored_by`]); false when that load restores nothing.
    pub(super) fn wait_for_restore(&mut self, op: u64, line: &Bytes) -> bool {
        let load = self.loads.get_mut(&op);
        match load {
            Some(Load {
                asker: Asker::Restore(lines),
                ..
            }) => {
                lines.push(line.clone());
                true
            }
            _ => false,
        }
    }

    /// Bytes of the client lines waiting for their sessions' restores.
    pub(super) fn held_bytes(&self) -> usize {
        let waiting = self.loads.values().map(|l| match &l.asker {
            Asker::Restore(lines) => lines.bytes(),
            Asker::Client(_) => 0,
        });
        waiting.sum()
    }

    /// True while some load waits for the agent to start a session it does not know yet.
    pub(super) fn awaiting_new_session(&self) -> bool {
        self.loads.values().any(|l| l.phase == Phase::Starting)
    }

    /// Operation ids of every load, oldest first.
    pub(super) fn ops(&self) -> Vec<u64> {
        let mut ops: Vec<u64> = self.loads.keys().copied().collect();
        ops.sort_unstable();
        ops
    }

    /// The session a load is for.
    pub(super) fn session(&self, op: u64) -> Option<SessionId> {
        self.loads.get(&op).map(|l| l.session.clone())
    }

    /// Start serving a load (or a resume): ask for the history.
    pub(super) fn start(&mut self, cx: &mut Cx, op: u64, request: LoadRequest) {
        let LoadRequest {
            asker,
            session,
            replay,
            setup,
            request,
            agent_failed,
            fork,
            live,
            tail,
        } = request;
        if let Asker::Client(id) = &asker {
            self.by_request.insert(id.clone(), op);
        }
        let support = ClientSupport {
            tail,
            ..cx.peers().replay_support()
        };
        let load = Load {
            asker,
            session: session.clone(),
            replay,
            support,
            setup,
            request,
            agent_failed,
            fork,
            phase: Phase::Fetching { replayed: 0 },
            summary: Summary::default(),
            answer: RawObject::default(),
            latest: true,
        };
        for other in self.loads.values_mut() {
            if other.session == load.session {
                other.latest = false;
            }
        }
        self.loads.insert(op, load);
        let fetch = Action::FetchHistory {
            load: op,
            session,
            support,
            transcript_limit: cx.config().reprime_limit,
            until: live.then(|| cx.fx().next_seq()),
            agent: cx.peers().initialize.response.clone(),
        };
        cx.fx().push(fetch);
    }

    fn remove(&mut self, op: u64) -> Option<Load> {
        let load = self.loads.remove(&op)?;
        if let Asker::Client(id) = &load.asker {
            self.by_request.remove(id);
        }
        Some(load)
    }

    fn set_phase(&mut self, op: u64, phase: Phase) {
        if let Some(l) = self.loads.get_mut(&op) {
            l.phase = phase;
        }
    }

    /// A chunk of `session`'s history (none: the load is gone), answering
    /// [`Action::FetchHistory`]; the children its end announced joined the tree before.
    pub(super) fn history(
        &mut self,
        cx: &mut Cx,
        session: Option<ScopedSession<'_>>,
        at: Stamp,
        op: u64,
        chunk: HistoryChunk,
    ) -> Progress {
        let (Some(l), Some(mut session)) = (self.loads.get_mut(&op), session) else {
            return Progress::Going;
        };
        match chunk {
            HistoryChunk::Lines(lines) => {
                if l.replay {
                    if let Phase::Fetching { replayed } = &mut l.phase {
                        *replayed += lines.len() as u64;
                    }
                    for line in lines {
                        match &l.asker {
                            Asker::Client(id) => cx.fx().forward_to_asker(id, line),
                            Asker::Restore(_) => cx.fx().forward(Side::Client, line),
                        }
                    }
                }
                Progress::Going
            }
            HistoryChunk::Missing if l.agent_may_have_it(cx) => {
                // A session the journal lacks that the agent may hold (one made without the
                // proxy, which the agent's own list shows): the agent brings it up, its own
                // replay shown (and journaled from now on).
                let summary = Summary {
                    agent_copy: AgentCopy::Unjournaled,
                    ..Summary::default()
                };
                self.history_end(cx, &mut session, at, op, summary)
            }
            HistoryChunk::Missing => self
                .remove(op)
                .map_or(Progress::Going, |l| l.journal_missing(cx, at)),
            HistoryChunk::Refused(why) => self
                .remove(op)
                .map_or(Progress::Going, |l| l.journal_refused(cx, at, &why)),
            HistoryChunk::End(summary) => self.history_end(cx, &mut session, at, op, summary),
        }
    }

    /// Load `op`'s history was all sent (its `summary` learnt): the session's journal is
    /// opened with the client's request (and the agent's failure it replaces), what was
    /// replayed is recorded, and the session is brought up on the agent.
    fn history_end(
        &mut self,
        cx: &mut Cx,
        scoped: &mut ScopedSession<'_>,
        at: Stamp,
        op: u64,
        summary: Summary,
    ) -> Progress {
        let Some(l) = self.loads.get_mut(&op) else {
            return Progress::Going;
        };
        let session = l.session.clone();
        let replayed = match l.phase {
            Phase::Fetching { replayed } => replayed,
            Phase::Starting | Phase::Restoring { .. } => 0,
        };
        l.summary = summary;
        let cwd = l.setup.cwd.clone();
        let request = l.request.take();
        if scoped.open_journal() {
            cx.open_journal(session.clone(), cwd);
        }
        if let Some(request) = request {
            cx.fx().journal(Target::Session(session.clone()), request);
        }
        if let Some(failed) = l.agent_failed.clone() {
            // Consumed: the client gets the load served from the journal instead.
            let record = cx.fx().proxy_record(at, Side::Agent, failed);
            cx.fx().journal(Target::Session(session.clone()), record);
        }
        // A load tells what it replayed; a resume or a restore replays nothing.
        if l.replay {
            cx.fx().event(
                at,
                Target::Session(session.clone()),
                Event::Replayed { lines: replayed },
            );
        }
        self.bring_up(cx, scoped, at, op)
    }

    /// After the replay: make the session live on the agent.
    fn bring_up(
        &mut self,
        cx: &mut Cx,
        scoped: &mut ScopedSession<'_>,
        at: Stamp,
        op: u64,
    ) -> Progress {
        let Some(l) = self.loads.get(&op) else {
            return Progress::Going;
        };
        let session = l.session.clone();
        if scoped.get().is_some_and(Session::is_live) {
            // Still live on the agent in this connection: nothing to start.
            return self.finish(cx, scoped, at, op, Ok(()));
        }
        let BringUp {
            method,
            how,
            underneath,
            hide,
            params,
            secret,
        } = l.bring_up_by(&cx.peers().agent, cx.config());
        scoped.made().set_starting(hide);
        if let Some(copy) = underneath.filter(|copy| copy.as_str() != &*session) {
            // Its lines (a native load's replay, to hide) are the session's from now on.
            scoped.map(Mapping {
                agent: copy,
                prefix: mapping::prefix_at(at.unix_us),
                reprime: None,
            });
        }
        self.set_phase(op, Phase::Starting);
        cx.request(
            at,
            &session,
            (op, Step::Setup(how)),
            (method, &params.to_json()),
            secret.as_deref(),
        );
        Progress::Going
    }

    /// The agent answered (`msg`) a request the proxy made for load `op` (of `session`; none:
    /// the load is gone).
    pub(super) fn on_response(
        &mut self,
        cx: &mut Cx,
        mut session: Option<ScopedSession<'_>>,
        (op, step): (u64, Step),
        msg: Line<'_>,
        is_error: bool,
    ) -> Progress {
        let Line {
            at,
            peek,
            bytes: line,
        } = msg;
        let record = cx.fx().proxy_record(at, Side::Agent, line.clone());
        let target = (session.as_ref()).map_or(Target::Run, |s| Target::Session(s.id().clone()));
        cx.fx().journal(target, record);
        let Some(scoped) = session.as_mut() else {
            return Progress::Going; // cancelled meanwhile
        };
        match step {
            Step::Setup(how) => self.on_setup(cx, scoped, op, how, msg, is_error),
            Step::SetMode(mode) => {
                if let Some(l) = self.loads.get_mut(&op) {
                    l.restore_answered();
                    if !is_error {
                        l.answer
                            .edit("modes", |m| m.set("currentModeId", json_string(&mode)));
                    }
                }
                self.maybe_finish(cx, scoped, at, op)
            }
            Step::SetConfig => {
                let result = result_of(peek);
                if let Some(l) = self.loads.get_mut(&op) {
                    l.restore_answered();
                    if !is_error && present(&result["configOptions"]) {
                        l.answer
                            .set("configOptions", result["configOptions"].to_string());
                    }
                }
                self.maybe_finish(cx, scoped, at, op)
            }
        }
    }

    /// The agent answered (`msg`) the request bringing load `op`'s session (`scoped`) up by
    /// `how`.
    fn on_setup(
        &mut self,
        cx: &mut Cx,
        scoped: &mut ScopedSession<'_>,
        op: u64,
        how: Underneath,
        msg: Line<'_>,
        is_error: bool,
    ) -> Progress {
        let Line { at, peek, .. } = msg;
        if let Some(session) = scoped.get_mut() {
            session.stop_hiding();
        }
        self.set_phase(op, Phase::Restoring { outstanding: 0 });
        if is_error {
            return self.setup_failed(cx, scoped, op, how, msg);
        }
        let session = &scoped.id().clone();
        let Some(l) = self.loads.get(&op) else {
            return Progress::Going;
        };
        let result = &result_of(peek);
        let agent_session = match (how, &l.summary.agent_copy) {
            (Underneath::New, _) => result["sessionId"].as_str().map(AgentSessionId::from),
            (Underneath::Resume | Underneath::Load, AgentCopy::Whole(copy)) => {
                Some(AgentSessionId::from(copy.as_str()))
            }
            (Underneath::Resume | Underneath::Load, _) => Some(AgentSessionId::native(session)),
        };
        let Some(agent_session) = agent_session else {
            let error = "the agent's session/new response has no sessionId";
            return self.finish(cx, scoped, at, op, Err(error_json(-32603, error, None)));
        };
        // A fresh session is mapped even when the agent reuses the ID (agents that count
        // sessions from 0 per process do): it needs re-priming and fresh tool ids.
        if (agent_session.as_str() != &**session || how == Underneath::New)
            && let Some(l) = self.loads.get(&op)
        {
            scoped.map(l.mapping(cx, at, &agent_session, how == Underneath::New));
        }
        let Some(l) = self.loads.get_mut(&op) else {
            return Progress::Going;
        };
        for key in ["modes", "configOptions"] {
            if present(&result[key]) {
                l.answer.set(key, result[key].to_string());
            }
        }
        let restore = l.is_restore();
        if how == Underneath::New || restore {
            l.restore_state(cx, at, op, &agent_session, result);
        }
        if restore {
            let how = match how {
                Underneath::Load => "session/load",
                Underneath::Resume => "session/resume",
                Underneath::New => "session/new",
            };
            cx.fx().event(
                at,
                Target::Session(session.clone()),
                Event::SessionRestored { how: how.into() },
            );
        }
        self.maybe_finish(cx, scoped, at, op)
    }

    /// The agent failed (its error answer: `msg`) to bring load `op`'s `session` up by `how`:
    /// a load or resume falls back on a new session (the journal has the history); a failed
    /// `session/new` ends the load with the agent's error.
    fn setup_failed(
        &mut self,
        cx: &mut Cx,
        scoped: &mut ScopedSession<'_>,
        op: u64,
        how: Underneath,
        msg: Line<'_>,
    ) -> Progress {
        let Line {
            at, bytes: line, ..
        } = msg;
        let unjournaled = self
            .loads
            .get(&op)
            .is_some_and(|l| l.summary.agent_copy == AgentCopy::Unjournaled);
        if how != Underneath::New && (refused_by_lease(line) || unjournaled) {
            // The host (acp-journal serve) refused it: another host continues the session. A
            // new session here would split the conversation in two: the asker gets the
            // refusal, and a later request tries again. Or neither the journal nor the agent
            // has it: the agent's answer.
            return self.finish(cx, scoped, at, op, Err(error_of(line).unwrap_or_default()));
        }
        if how != Underneath::New {
            // The agent lost it (or cannot load it): start afresh; the journal has it.
            if let Some(l) = self.loads.get_mut(&op) {
                l.agent_failed.get_or_insert_with(|| line.clone());
            }
            return self.request_new(cx, at, op, &scoped.id().clone());
        }
        let error = error_of(line)
            .unwrap_or_else(|| error_json(-32603, "the agent failed to start the session", None));
        self.finish(cx, scoped, at, op, Err(error))
    }

    fn request_new(&mut self, cx: &mut Cx, at: Stamp, op: u64, session: &SessionId) -> Progress {
        let Some(l) = self.loads.get(&op) else {
            return Progress::Going;
        };
        let (params, secret) = l
            .setup
            .to_params(&cx.peers().agent, cx.config().offer_history);
        self.set_phase(op, Phase::Starting);
        cx.request(
            at,
            session,
            (op, Step::Setup(Underneath::New)),
            ("session/new", &params.to_json()),
            secret.as_deref(),
        );
        Progress::Going
    }

    fn maybe_finish(
        &mut self,
        cx: &mut Cx,
        scoped: &mut ScopedSession<'_>,
        at: Stamp,
        op: u64,
    ) -> Progress {
        match self.loads.get(&op) {
            Some(l) if !l.restoring() => self.finish(cx, scoped, at, op, Ok(())),
            _ => Progress::Going,
        }
    }

    /// Answer the client's load (of `scoped`).
    fn finish(
        &mut self,
        cx: &mut Cx,
        scoped: &mut ScopedSession<'_>,
        at: Stamp,
        op: u64,
        outcome: Result<(), String>,
    ) -> Progress {
        let Some(l) = self.remove(op) else {
            return Progress::Going;
        };
        let target = Target::Session(l.session.clone());
        if outcome.is_ok() {
            scoped.made().set_up(l.setup.clone());
        }
        match (outcome, l.asker) {
            (Ok(()), Asker::Client(id)) => {
                scoped.made().set_live();
                if l.replay && l.support.v2 {
                    // v2: the replay's end is told (the schema's `replay_complete`).
                    cx.fx().notify_client(
                        at,
                        &l.session,
                        json!({"sessionUpdate": "replay_complete"}),
                    );
                }
                if l.support.cursors {
                    let agent = scoped.agent_id();
                    still_the_agents_cursors(cx, at, (&l.session, &agent), &l.summary);
                }
                if l.support.v2 {
                    // v2: the current state follows any replay and comes before the answer.
                    cx.fx().notify_client(
                        at,
                        &l.session,
                        json!({"sessionUpdate": "state_update", "state": "idle"}),
                    );
                }
                let mut answer = l.answer;
                if l.fork {
                    answer.set("sessionId", json_string(&l.session));
                }
                cx.fx().answer(at, target, &id, Ok(&answer.to_json()));
                Progress::Done
            }
            (Ok(()), Asker::Restore(mut lines)) => {
                scoped.made().set_live();
                Progress::Restored(lines.take())
            }
            (Err(error), Asker::Client(id)) => {
                if let Some(session) = scoped.get_mut() {
                    session.set_not_live();
                }
                cx.fx().answer(at, target, &id, Err(&error));
                Progress::Done
            }
            (Err(error), Asker::Restore(mut lines)) => {
                scoped.made().set_lost();
                let lines = lines.take();
                Progress::Unrestored { lines, error }
            }
        }
    }

    /// Give up on a load (cancelled, or its agent gone): stop reading its history, stop hiding
    /// the session's agent lines, and journal its request in the session's journal. Returns its
    /// client id and session (`scoped`; none: the load is gone, nothing to give up).
    fn abandon(
        &mut self,
        cx: &mut Cx,
        scoped: &mut Option<ScopedSession<'_>>,
        op: u64,
    ) -> Option<Load> {
        let scoped = scoped.as_mut()?;
        let mut l = self.remove(op)?;
        if matches!(l.phase, Phase::Fetching { .. }) {
            cx.fx().push(Action::CancelHistory { load: op });
        } else if let Some(session) = scoped.get_mut() {
            session.set_not_live();
        }
        if let Some(session) = scoped.get_mut() {
            session.stop_hiding();
        }
        if scoped.open_journal() {
            cx.open_journal(l.session.clone(), None);
        }
        if let Some(request) = l.request.take() {
            cx.fx().journal(Target::Session(l.session.clone()), request);
        }
        Some(l)
    }

    /// The client cancelled load `op` (of `session`; none: the load is gone; `line` is its
    /// cancel): answer it with -32800.
    pub(super) fn cancel(
        &mut self,
        cx: &mut Cx,
        mut session: Option<ScopedSession<'_>>,
        (at, op): (Stamp, u64),
        line: &Bytes,
        why: &str,
    ) {
        let Some(l) = self.abandon(cx, &mut session, op) else {
            return;
        };
        let Some(id) = l.client_id() else {
            return;
        };
        let target = Target::Session(l.session.clone());
        cx.fx()
            .journal_client(at, target.clone(), &crate::wire::envelope::peek(line), line);
        cx.fx().answer(
            at,
            target,
            id,
            Err(&error_json(
                -32800,
                "Request cancelled",
                Some(json!({"reason": why})),
            )),
        );
    }

    /// The agent is gone (`error(method)` says how): answer load `op` (of `session`; none: the
    /// load is gone); a restore's waiting lines are given back to be answered.
    pub(super) fn agent_gone(
        &mut self,
        cx: &mut Cx,
        mut session: Option<ScopedSession<'_>>,
        at: Stamp,
        op: u64,
        error: impl Fn(&str) -> String,
    ) -> Progress {
        let Some(l) = self.abandon(cx, &mut session, op) else {
            return Progress::Going;
        };
        let error = error(l.method());
        match l.asker {
            Asker::Client(id) => {
                cx.fx()
                    .answer(at, Target::Session(l.session.clone()), &id, Err(&error));
                Progress::Done
            }
            Asker::Restore(mut lines) => {
                if let Some(session) = &mut session {
                    session.made().set_lost();
                }
                let lines = lines.take();
                Progress::Unrestored { lines, error }
            }
        }
    }

    /// Serve the client's `session/load` or `session/resume` from the journal (`replay`: the
    /// history goes first; `live`: a host's client joins a session live on the agent).
    pub(super) fn serve(
        &mut self,
        cx: &mut Cx,
        id: &RequestId,
        msg: Line<'_>,
        replay: bool,
        live: bool,
    ) {
        let Line {
            at,
            peek,
            bytes: line,
        } = msg;
        let Some(mut request) = parse_request(cx, at, id, peek, line, replay) else {
            return;
        };
        request.request = Some(cx.fx().client_record(at, peek, line));
        request.live = live;
        let op = cx.next_op();
        self.start(cx, op, request);
    }
}

/// The load, resume or fork the client asks for with request `id` (`line`, described by `peek`),
/// or `None` when it names no session: then the line is journaled and answered -32602.
pub(super) fn parse_request(
    cx: &mut Cx,
    at: Stamp,
    id: &RequestId,
    peek: &Peek<'_>,
    line: &Bytes,
    replay: bool,
) -> Option<LoadRequest> {
    let request = LoadRequest::parse(id, peek, replay);
    if request.is_none() {
        cx.fx().journal_client(at, Target::Run, peek, line);
        let error = error_json(-32602, "Invalid params: sessionId is required", None);
        cx.fx().answer(at, Target::Run, id, Err(&error));
    }
    request
}
