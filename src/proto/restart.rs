//! Sessions that outlive their agent: what the core keeps to restart an agent (the client lines
//! that wait while the new agent is initialized) and to notice a stalled prompt
//! (`--stall-timeout`).
//!
//! When the agent dies while the client is connected, the shell starts it again and calls
//! [`super::Proxy::handle_agent_restart`]: every client request still waiting is answered with an
//! error that says so (a prompt is never retried: tools may have run), requests of the dead agent
//! still open at the client are answered into the journal only, the recorded `initialize` (and
//! `authenticate`) go to the new agent, and every live session becomes lost: the next client
//! request that names it brings it up again ([`super::loading`], a restore) before it is sent.
//! Requests that wait for the new agent wait at most `--init-timeout`, then are answered with
//! -32603. For the bridge (`Config::remote`) the agent is a host and a restart a connection
//! made again: the log and the client's errors say so, and the client is told when the host has
//! been unreachable for a few seconds and when it is back.
//! When the agent is gone for good, every client request still waiting on it — loads,
//! restores, merged lists, forwarded requests — is answered with -32603, in arrival order.

use bytes::Bytes;

use serde_json::json;

use super::capabilities::AgentCaps;
use super::clients;
use super::context::Cx;
use super::held::HeldLines;
use super::listing::Lists;
use super::load_request::{LoadRequest, SetupParams};
use super::loading::Loads;
use super::pending::Purpose;
use super::sessions::{SessionMut, SessionTable};
use super::vocab::{Action, Config, HashMap, Line, LoadMode, SessionId, Stamp, Target, secs};
use crate::journal::Event;
use crate::wire::Side;
use crate::wire::envelope::RequestId;
use crate::wire::envelope::{self, Kind, Peek, error_json};

/// How long a host may be unreachable before the client is told (where it accepts notices).
const NOTICE_AFTER_US: u64 = 3_000_000;

/// A restarted agent being initialized, and what waits for it. When it dies (or is given up
/// on) before it answered, the next one takes over what waits: [`Reinit::next`].
#[derive(Debug)]
pub(super) struct Reinit {
    /// When the recorded `initialize` was sent again (monotonic microseconds): past
    /// `Config::reinit_timeout_us` without an answer the agent is taken for failed.
    since: u64,
    /// When the agent that answered `initialize` last was lost (for a host: when the
    /// connection dropped).
    lost_since: u64,
    /// The first agent restart of this reinit (`Handshake::restarts` then): the sessions lost
    /// in it or in the restarts after it (their `Session::lost_in`) are told of a host's
    /// absence and return ([`Reinit::lost`]).
    first_restart: u64,
    /// The client was told the host is unreachable.
    told: bool,
    /// Client lines that arrived meanwhile, in order.
    held: HeldLines,
    /// When the oldest request among them arrived: it is answered `reinit_timeout_us` after.
    oldest_request: Option<u64>,
    /// The proxy gave up on this agent (it asked the shell to restart it).
    timed_out: bool,
}

impl Reinit {
    fn new(at: Stamp, first_restart: u64) -> Reinit {
        Reinit {
            since: at.mono_us,
            lost_since: at.mono_us,
            first_restart,
            told: false,
            held: HeldLines::default(),
            oldest_request: None,
            timed_out: false,
        }
    }

    /// Another agent takes the place of this one before it answered: it gets its own time to
    /// answer, and what waited waits on (the requests keep their own time).
    fn next(mut self, at: Stamp) -> Reinit {
        self.since = at.mono_us;
        self.timed_out = false;
        self
    }

    /// The sessions that were live on the agents restarted since this reinit began, by ID
    /// (the table's sessions lost in those restarts: no list of its own).
    fn lost(&self, sessions: &SessionTable) -> Vec<SessionId> {
        let mut lost: Vec<SessionId> = (sessions.iter())
            .filter(|(_, session)| session.lost_in() >= self.first_restart)
            .map(|(id, _)| id.clone())
            .collect();
        lost.sort_unstable();
        lost
    }

    /// Hold a client line (described by `peek`) until the agent is ready.
    pub(super) fn hold(&mut self, at: Stamp, peek: &Peek<'_>, line: Bytes) {
        if matches!(peek.kind, Kind::Request { .. }) {
            self.oldest_request.get_or_insert(at.mono_us);
        }
        self.held.push(line);
    }

    /// Take the requests held, in order; notifications and answers wait on.
    fn take_requests(&mut self) -> Vec<Bytes> {
        self.oldest_request = None;
        self.held
            .take_where(|line| matches!(envelope::peek(line).kind, Kind::Request { .. }))
    }

    /// When the agent's silence on `initialize` becomes a failure (monotonic microseconds),
    /// unless the proxy already gave up on it.
    fn deadline(&self, timeout: u64) -> Option<u64> {
        (!self.timed_out).then(|| self.since.saturating_add(timeout))
    }

    /// When the oldest request held has waited `timeout`.
    fn requests_deadline(&self, timeout: u64) -> Option<u64> {
        self.oldest_request.map(|t| t.saturating_add(timeout))
    }

    /// When a host's client is told it is unreachable, unless it was: [`NOTICE_AFTER_US`]
    /// after the connection dropped, or at the first timeout if that is sooner.
    fn notice_due(&self, timeout: u64) -> Option<u64> {
        (!self.told).then(|| self.lost_since.saturating_add(NOTICE_AFTER_US.min(timeout)))
    }
}

/// The handshake a restarted agent is told again, where the current agent's stands, and what
/// the agent before it left open.
#[derive(Debug, Default)]
pub(super) struct Handshake {
    /// The client's `initialize` line, as received.
    pub(super) client_init: Option<Bytes>,
    /// The client's last `authenticate` the agent accepted, as received.
    pub(super) client_auth: Option<Bytes>,
    /// An `authenticate` the agent has not answered yet.
    pub(super) auth_pending: Option<(RequestId, Bytes)>,
    /// The current agent answered `initialize`: it can be restarted should it die.
    pub(super) agent_initialized: bool,
    /// A restarted agent is being initialized: client lines wait.
    pub(super) reinit: Option<Reinit>,
    /// Requests of an agent that was restarted, still open at the client: its answers are
    /// journaled and dropped (by id, with the session they belong to).
    pub(super) dead: HashMap<RequestId, Option<SessionId>>,
    /// How many times the agent was lost in this run (restarted, or a host's connection
    /// dropped): a lost session's `Session::lost_in`.
    restarts: u64,
}

impl Handshake {
    /// True when the agent could be restarted should it die now (the client still there): the
    /// proxy is not a pure recorder (`--load off`), the current agent answered `initialize`
    /// (or a restarted one is being initialized), and the client's `initialize` is recorded.
    pub(super) fn can_restart(&self, config: &Config) -> bool {
        config.load != LoadMode::Off
            && (self.agent_initialized || self.reinit.is_some())
            && self.client_init.is_some()
    }

    /// The bytes of the client lines held for a restarted agent.
    pub(super) fn held_bytes(&self) -> usize {
        self.reinit.as_ref().map_or(0, |r| r.held.bytes())
    }

    /// When a restarted agent's `initialize` runs out of time, a request held for it has
    /// waited its longest, or a host's client is to be told it is unreachable.
    pub(super) fn next_timer(&self, config: &Config) -> Option<u64> {
        let timeout = config.reinit_timeout_us;
        self.reinit.as_ref().and_then(|r| {
            let notice = r.notice_due(timeout).filter(|_| config.remote);
            [r.deadline(timeout), r.requests_deadline(timeout), notice]
                .into_iter()
                .flatten()
                .min()
        })
    }

    /// The agent died: one restart more, its number (the sessions it loses are lost in it:
    /// `Session::lost_in`).
    pub(super) fn count_restart(&mut self) -> u64 {
        self.restarts += 1;
        self.restarts
    }

    /// The agent died (exit `code`; for a host: the connection dropped), and the table lost
    /// its live sessions in the restart counted ([`Handshake::count_restart`]; `lost`, in
    /// order): the run's journal, every lost session's and the log say so, the client is told
    /// of a restarted process. Returns the restarted agent that was still being initialized
    /// (what waited for it waits on).
    pub(super) fn agent_lost(
        &mut self,
        cx: &mut Cx,
        lost: &[SessionId],
        at: Stamp,
        code: i32,
    ) -> Option<Reinit> {
        let remote = cx.config().remote;
        let event = || match remote {
            true => Event::HostDropped,
            false => Event::AgentRestarted { code },
        };
        cx.fx().event(at, Target::Run, event());
        let waiting = self.reinit.take();
        let message = match (remote, &waiting) {
            (false, _) => format!(
                "The agent exited (status {code}) and acp-journal restarted it; the conversation continues with your next message (a message that was in progress must be sent again)."
            ),
            (true, None) => format!(
                "the connection to the host dropped: connecting again; requests wait for it up to {} s (--init-timeout)",
                secs(cx.config().reinit_timeout_us)
            ),
            (true, Some(_)) => "connecting to the host again".to_string(),
        };
        cx.fx().push(Action::Log(message.clone()));
        // Each session tells of the restart first, then of the requests it failed.
        for s in lost {
            cx.fx().event(at, Target::Session(s.clone()), event());
        }
        if !remote {
            notice(cx, at, lost, "warning", "The agent was restarted", &message);
        }
        waiting
    }

    /// The new agent takes over (after [`Handshake::agent_lost`] and the requests it failed
    /// were answered): requests of the dead agent still open at the client are kept to be
    /// journaled and dropped, and the client's recorded `initialize` goes to the new agent;
    /// client lines wait until it has answered.
    pub(super) fn restart(&mut self, cx: &mut Cx, at: Stamp, waiting: Option<Reinit>) {
        let dead = &mut self.dead;
        cx.pending_mut().retain(|(side, id), p| {
            if *side == Side::Agent {
                dead.insert(id.clone(), p.session.take());
            }
            *side != Side::Agent
        });
        self.agent_initialized = false;
        let Some(init) = self.client_init.clone() else {
            return;
        };
        self.reinit = Some(match waiting {
            Some(reinit) => reinit.next(at),
            None => Reinit::new(at, self.restarts),
        });
        cx.send_recorded(at, Purpose::Reinitialize, &init);
    }

    /// The restarted agent answered the `initialize` or `authenticate` the proxy sent again.
    /// Returns the client lines that waited, to go on, once it is ready (or will not be).
    pub(super) fn answered(
        &mut self,
        cx: &mut Cx,
        sessions: &SessionTable,
        purpose: Purpose,
        msg: Line<'_>,
        failed: bool,
    ) -> Vec<Bytes> {
        let Line {
            at,
            peek,
            bytes: line,
        } = msg;
        let record = cx.fx().proxy_record(at, Side::Agent, line.clone());
        cx.fx().journal(Target::Run, record);
        match purpose {
            Purpose::Reinitialize if !failed => {
                self.agent_initialized = true;
                if let Some(agent) = AgentCaps::from_initialize(peek) {
                    cx.peers_mut().agent = agent;
                }
                self.host_back(cx, sessions, at);
                if let Some(auth) = self.client_auth.clone() {
                    cx.send_recorded(at, Purpose::Reauthenticate, &auth);
                    return Vec::new();
                }
            }
            Purpose::Reinitialize | Purpose::Reauthenticate if failed => {
                cx.fx().push(Action::Log(format!(
                    "the restarted agent refused the client's recorded request: {}",
                    String::from_utf8_lossy(line).trim_end()
                )));
            }
            _ => {}
        }
        self.end_reinit()
    }

    /// A host connected to again answered `initialize`: the log says it is back, and so is the
    /// client told if it was told the host is unreachable.
    fn host_back(&self, cx: &mut Cx, sessions: &SessionTable, at: Stamp) {
        let Some(reinit) = self.reinit.as_ref().filter(|_| cx.config().remote) else {
            return;
        };
        let lost = if reinit.told {
            reinit.lost(sessions)
        } else {
            Vec::new()
        };
        cx.fx().push(Action::Log(format!(
            "the host is back after {:.1} s; its sessions are restored on their next request",
            secs(at.mono_us.saturating_sub(reinit.lost_since))
        )));
        notice(
            cx,
            at,
            &lost,
            "info",
            "The host is back",
            "acp-journal is connected to the host again; the conversation continues with your next message.",
        );
    }

    /// Time passed while a restarted agent has not answered `initialize`. For a host, the
    /// client is told it is unreachable once it has been for [`NOTICE_AFTER_US`] (or the
    /// timeout, if sooner). An agent silent for `reinit_timeout_us` is taken for failed: every
    /// request held for it is answered with -32603 (`data` naming the cause and the method;
    /// notifications and answers wait on for the next agent, which journals and drops those
    /// meant for a lost session or the dead agent), and the shell kills it and starts another
    /// as after a crash (within `--respawn`; else the proxy ends, answering every waiting
    /// request). A request that waited `reinit_timeout_us` across restarts is answered so too.
    pub(super) fn check(&mut self, cx: &mut Cx, sessions: &SessionTable, at: Stamp) {
        let timeout = cx.config().reinit_timeout_us;
        let remote = cx.config().remote;
        let Some(reinit) = self.reinit.as_mut() else {
            return;
        };
        let due = |deadline: Option<u64>| deadline.is_some_and(|d| d <= at.mono_us);
        let tell = remote && due(reinit.notice_due(timeout));
        let give_up = due(reinit.deadline(timeout));
        let requests = if give_up || due(reinit.requests_deadline(timeout)) {
            reinit.take_requests()
        } else {
            Vec::new()
        };
        reinit.told |= tell;
        reinit.timed_out |= give_up;
        if tell {
            let down = secs(at.mono_us.saturating_sub(reinit.lost_since));
            let lost = reinit.lost(sessions);
            tell_unreachable(cx, at, down, &lost);
        }
        let after_ms = at.mono_us.saturating_sub(reinit.since) / 1000;
        let answered = requests.len();
        for line in requests {
            let method = envelope::peek(&line).method().unwrap_or("").to_string();
            clients::refuse(cx, sessions, at, &line, &not_back(remote, timeout, &method));
        }
        let what = if remote {
            "the host"
        } else {
            "the restarted agent"
        };
        let told = match answered {
            0 => String::new(),
            n => format!("; {n} request(s) waiting for it answered with an error"),
        };
        if give_up {
            cx.fx()
                .event(at, Target::Run, Event::InitTimeout { after_ms });
            let again = if remote {
                "connecting again"
            } else {
                "restarting it"
            };
            cx.fx().push(Action::Log(format!(
                "{what} did not answer initialize within {} s: {again}{told}",
                secs(timeout)
            )));
            cx.fx().push(Action::RestartAgent);
        } else if answered > 0 {
            cx.fx().push(Action::Log(format!(
                "{answered} request(s) waited {} s for {what} to answer initialize: answered with an error",
                secs(timeout)
            )));
        }
    }

    /// The client answered request `id` of an agent that died since (the route found it in
    /// `dead`): journaled with the session it was in, and dropped.
    pub(super) fn answer_dead_agent(
        &mut self,
        cx: &mut Cx,
        at: Stamp,
        peek: &Peek<'_>,
        line: &Bytes,
    ) {
        let Kind::Response { id, .. } = &peek.kind else {
            return;
        };
        let session = self.dead.remove(id).flatten();
        let target = session.map_or(Target::Run, Target::Session);
        cx.fx().journal_client(at, target, peek, line);
    }

    /// The restarted agent is ready (or will not be): the client lines that waited, to go on.
    pub(super) fn end_reinit(&mut self) -> Vec<Bytes> {
        self.reinit
            .take()
            .map(|mut r| r.held.take())
            .unwrap_or_default()
    }

    /// The agent is gone for good: the client lines held for a restarted agent that never
    /// answered `initialize` are answered (requests) or journaled and dropped.
    pub(super) fn refuse_held(&mut self, cx: &mut Cx, sessions: &SessionTable, at: Stamp) {
        for line in self.end_reinit() {
            let error = agent_exited(envelope::peek(&line).method().unwrap_or(""));
            clients::refuse(cx, sessions, at, &line, &error);
        }
    }
}

/// The log says a host has been unreachable for `down` seconds, and the client is told.
fn tell_unreachable(cx: &mut Cx, at: Stamp, down: f64, lost: &[SessionId]) {
    cx.fx().push(Action::Log(format!(
        "the host has been unreachable for {down:.1} s"
    )));
    let description = format!(
        "acp-journal lost its connection to the host and is connecting again; a message waits up to {} s for it (--init-timeout).",
        secs(cx.config().reinit_timeout_us)
    );
    notice(
        cx,
        at,
        lost,
        "warning",
        "The host is unreachable",
        &description,
    );
}

/// Tell the client of each of `sessions` (where it accepts notices).
fn notice(
    cx: &mut Cx,
    at: Stamp,
    sessions: &[SessionId],
    severity: &str,
    title: &str,
    description: &str,
) {
    if !cx.peers().client.notices {
        return;
    }
    for s in sessions {
        cx.fx().notify_client(
            at,
            s,
            json!({"sessionUpdate": "notice", "severity": severity, "title": title, "description": description}),
        );
    }
}

/// What becomes of a client line naming a session lost in an agent restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Restore {
    /// `session/cancel`: nothing runs on the new agent yet; journaled only.
    Cancel,
    /// `session/close`: answered here.
    Close,
    /// Anything else: the session is brought up again first, the line waits.
    First,
}

/// A client line (`msg`) that names `session`, lost in an agent restart, as the route decided
/// (`step`): journaled (`session/cancel`: nothing runs on the new agent yet), answered here
/// (`session/close`), or waiting while the session is brought up again first.
pub(super) fn restore_first(
    cx: &mut Cx,
    loads: &mut Loads,
    mut session: SessionMut<'_>,
    step: Restore,
    msg: Line<'_>,
) {
    let Line {
        at,
        peek,
        bytes: line,
    } = msg;
    let s = session.id().clone();
    match (step, &peek.kind) {
        (Restore::Cancel, _) => {
            cx.fx().journal_client(at, Target::Session(s), peek, line);
        }
        (Restore::Close, Kind::Request { id, .. }) => {
            cx.fx()
                .journal_client(at, Target::Session(s.clone()), peek, line);
            session.set_not_live();
            cx.fx().answer(at, Target::Session(s), id, Ok("{}"));
        }
        _ => {
            let setup = (session.setup().cloned())
                .unwrap_or_else(|| SetupParams::parse(&serde_json::Value::Null));
            let request = LoadRequest::restore(s, setup, line.clone());
            let op = cx.next_op();
            loads.start(cx, op, request);
            session.set_restoring(op);
        }
    }
}

/// The agent is gone, and the loads it was bringing sessions up for were answered
/// ([`super::loading::Loads::agent_gone`]): answer every client request still waiting on it
/// with `error(method)` (merged lists, forwarded requests, in arrival order), and forget
/// everything it was asked.
pub(super) fn drop_agent(
    cx: &mut Cx,
    sessions: &SessionTable,
    lists: &mut Lists,
    at: Stamp,
    error: fn(&str) -> String,
) {
    // A list forwarded to the agent is answered through the pending table below.
    for op in lists.forwarded() {
        lists.remove(op);
    }
    let mut waiting: Vec<(u64, RequestId)> = cx
        .pending()
        .iter()
        .filter(|((side, _), _)| *side == Side::Client)
        .map(|((_, id), p)| (p.seq, id.clone()))
        .collect();
    waiting.sort_unstable_by_key(|(seq, _)| *seq);
    for (_, id) in waiting {
        let Some(pending) = cx.pending_mut().remove(&(Side::Client, id.clone())) else {
            continue;
        };
        let target = match pending.session {
            Some(s) if sessions.journal_open(&s) => Target::Session(s),
            _ => Target::Run,
        };
        cx.fx()
            .answer(at, target, &id, Err(&error(&pending.method)));
    }
    cx.ids().forget_agent();
}

/// The agent is gone, and the sessions it was busy in (ACP v2: `busy`, in order of ID,
/// [`SessionTable::agent_gone`]) no longer are: a turn's end is a state, not an answer, so each
/// is told it is idle, and why (`error`, as a prompt's).
pub(super) fn turns_ended(cx: &mut Cx, at: Stamp, busy: &[SessionId], error: fn(&str) -> String) {
    let reason = serde_json::from_str::<serde_json::Value>(&error("session/prompt"))
        .ok()
        .and_then(|e| e["data"]["reason"].as_str().map(str::to_string))
        .unwrap_or_default();
    for s in busy {
        cx.fx().notify_client(
            at,
            s,
            json!({"sessionUpdate": "notice", "severity": "error", "title": "The turn ended with the agent", "description": reason}),
        );
        cx.fx().notify_client(
            at,
            s,
            json!({"sessionUpdate": "state_update", "state": "idle"}),
        );
    }
}

/// The error a client request still waiting gets when the agent is lost and another takes
/// its place: a restarted agent's, or (`remote`) a host connected to again.
pub(super) fn lost_error(remote: bool) -> fn(&str) -> String {
    match remote {
        true => host_dropped,
        false => agent_restarted,
    }
}

/// The error a client request gets when the agent was restarted before answering it.
fn agent_restarted(method: &str) -> String {
    lost_before_answer(false, method)
}

/// The error a client request gets when the connection to the host (the bridge's agent)
/// dropped before it was answered.
fn host_dropped(method: &str) -> String {
    lost_before_answer(true, method)
}

/// What [`agent_restarted`] and [`host_dropped`] say: a prompt was not retried (tools may have
/// run), anything else may be sent again.
fn lost_before_answer(remote: bool, method: &str) -> String {
    let (what, reason) = match remote {
        true => (
            "the connection to the host dropped",
            "the connection to the host dropped; acp-journal is connecting again",
        ),
        false => (
            "the agent was restarted",
            "the agent exited and acp-journal restarted it",
        ),
    };
    let message = match (method, remote) {
        ("session/prompt", _) => {
            format!("{what}: send your message again (it was not retried: tools may have run)")
        }
        (_, true) => format!("{what} before the answer: send the request again"),
        (_, false) => format!("{what} before answering: send the request again"),
    };
    error_json(
        -32603,
        &message,
        Some(json!({"reason": reason, "method": method})),
    )
}

/// The error a client request gets when it waited `timeout_us` (`--init-timeout`) for a
/// restarted agent, or a host connected to again, to answer `initialize`.
fn not_back(remote: bool, timeout_us: u64, method: &str) -> String {
    let t = secs(timeout_us);
    let (message, reason) = if remote {
        (
            "the host is unreachable: send the request again once it is back",
            format!(
                "acp-journal lost its connection to the host and could not connect again within {t} s (--init-timeout)"
            ),
        )
    } else {
        (
            "the restarted agent does not answer initialize: send the request again",
            format!(
                "the agent was restarted and did not answer initialize within {t} s (--init-timeout)"
            ),
        )
    };
    error_json(
        -32603,
        message,
        Some(json!({"reason": reason, "method": method})),
    )
}

/// The error a client request gets when the agent exited before answering it.
pub(super) fn agent_exited(method: &str) -> String {
    error_json(
        -32603,
        "the agent exited",
        Some(json!({"reason": "the agent exited before answering", "method": method})),
    )
}
