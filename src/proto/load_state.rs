//! One load in progress, as [`super::loading::Loads`] keeps it: who asked, what it replays,
//! where it stands ([`Phase`]), and what brings a fresh agent session back to the recorded
//! mode and config.

use bytes::Bytes;
use serde_json::{Value, json};

use super::agent_side::Mapping;
use super::capabilities::AgentCaps;
use super::context::Cx;
use super::load_request::{Asker, SetupParams};
use super::mapping;
use super::pending::{Step, Underneath};
use super::vocab::{
    Action, AgentCopy, AgentSessionId, CatalogUpdate, ClientSupport, Config, LoadMode, SessionId,
    Stamp, Summary, Target,
};
use crate::journal::Event;
use crate::journal::format::Record;
use crate::wire::Side;
use crate::wire::envelope::{Peek, RequestId, error_json};
use crate::wire::rewrite::{RawObject, json_string};

/// Where a load stands, with what only that step needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// The journal is replayed to the client: the lines sent so far.
    Fetching { replayed: u64 },
    /// The agent is asked to bring the session up.
    Starting,
    /// The recorded mode and config options are set again: the requests not answered yet.
    Restoring { outstanding: usize },
}

/// Whether a step of a load was taken. When it ends, the agent lines held meanwhile are
/// released; a restore's waiting client lines go on to the agent (`Restored`) or are answered
/// with `error` (`Unrestored`).
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Progress {
    Going,
    Done,
    Restored(Vec<Bytes>),
    Unrestored { lines: Vec<Bytes>, error: String },
}

/// `data.reason` of the error a host gives a load it refuses because another host continues the
/// session.
pub(super) const LEASE_REFUSED: &str = "lease";

/// A `session/load` (or `session/resume`) the proxy is answering, or a restore.
#[derive(Debug)]
pub(super) struct Load {
    pub(super) asker: Asker,
    pub(super) session: SessionId,
    /// Replay the history (load, v2 resume with `replayFrom`) or not (resume, restore).
    pub(super) replay: bool,
    /// What the client takes (a v2 client is told the current state before the answer; one
    /// that takes cursors, the session's cursors when they are still the agent's).
    pub(super) support: ClientSupport,
    pub(super) setup: SetupParams,
    /// The client's request, journaled once the session is known to exist.
    pub(super) request: Option<Record>,
    /// See [`LoadRequest::agent_failed`].
    pub(super) agent_failed: Option<Bytes>,
    /// See [`LoadRequest::fork`].
    pub(super) fork: bool,
    pub(super) phase: Phase,
    pub(super) summary: Summary,
    pub(super) answer: RawObject,
    /// It is the latest load of its session ([`super::loading::Loads::of_session`]): the one
    /// started last, while it goes on (an earlier one still going on is not).
    pub(super) latest: bool,
}

/// How a load's session is brought up on the agent ([`Load::bring_up_by`]): the request
/// (`method`, `params`, the offered MCP server's `secret` to leave out of the journal), what it
/// does (`how`), the agent's own copy it brings up (`underneath`), and whether the agent's own
/// replay is hidden.
pub(super) struct BringUp {
    pub(super) method: &'static str,
    pub(super) how: Underneath,
    pub(super) underneath: Option<AgentSessionId>,
    pub(super) hide: bool,
    pub(super) params: RawObject,
    pub(super) secret: Option<String>,
}

impl Load {
    /// How its session is brought up on an agent that declared `caps` (`config`: the mode, the
    /// history offered). The agent's own copy is resumed only when it holds every turn of the
    /// journal (the journal says which of this agent's agent-side sessions on this host does);
    /// a fork exists only in the journal. Otherwise the session starts afresh, re-primed. A
    /// restore prefers the agent's resume, then its own load (hidden); a load served from the
    /// journal uses the agent's load only under `--load journal`, or when the client asked for
    /// the tail of the history only; a session the journal lacks is loaded by the agent, its
    /// replay shown.
    pub(super) fn bring_up_by(&self, caps: &AgentCaps, config: &Config) -> BringUp {
        let mut setup = self.setup.clone();
        if setup.cwd.is_none() {
            setup.cwd.clone_from(&self.summary.cwd);
        }
        let (mut params, secret) = setup.to_params(caps, config.offer_history);
        let unjournaled = self.summary.agent_copy == AgentCopy::Unjournaled;
        let copy = match &self.summary.agent_copy {
            AgentCopy::Whole(copy) if self.agent_failed.is_none() && !self.fork => {
                Some(copy.clone())
            }
            AgentCopy::Unjournaled => Some(self.session.to_string()),
            _ => None,
        };
        let native_load = caps.load
            && copy.is_some()
            && (config.load == LoadMode::Journal
                || self.support.tail.is_some()
                || (self.is_restore() && !caps.resume)
                || (unjournaled && self.replay));
        let (method, how, underneath) = match copy {
            Some(copy) if native_load => ("session/load", Underneath::Load, Some(copy)),
            Some(copy) if caps.resume => ("session/resume", Underneath::Resume, Some(copy)),
            _ => ("session/new", Underneath::New, None),
        };
        if let Some(copy) = &underneath {
            params.set("sessionId", json_string(copy));
        }
        BringUp {
            method,
            how,
            underneath: underneath.map(|copy| AgentSessionId::from(copy.as_str())),
            hide: native_load && !unjournaled,
            params,
            secret,
        }
    }

    /// Whether the agent may hold the load's session when the journal does not: a client's own
    /// load or resume (not a restore, not a fork, not one the agent already failed) of an
    /// agent that loads or resumes sessions.
    pub(super) fn agent_may_have_it(&self, cx: &Cx) -> bool {
        matches!(self.asker, Asker::Client(_))
            && self.agent_failed.is_none()
            && !self.fork
            && (cx.peers().agent.load || cx.peers().agent.resume)
    }

    /// The load's session has no journal: the load ends. The client gets the agent's own
    /// failed answer when there is one (the load fell back on the journal), else -32002; a
    /// restore cannot go on (`Unrestored`).
    pub(super) fn journal_missing(self, cx: &mut Cx, at: Stamp) -> Progress {
        let l = self;
        let id = match l.asker {
            Asker::Client(id) => id,
            Asker::Restore(mut lines) => {
                let error = "acp-journal could not restore the session after the agent restarted: its journal is missing";
                return Progress::Unrestored {
                    lines: lines.take(),
                    error: error_json(-32603, error, None),
                };
            }
        };
        if let Some(failed) = l.agent_failed {
            // Nothing to fall back on: the client gets the agent's answer.
            let record = cx.fx().agent_record(at, failed.clone());
            cx.fx().journal(Target::Session(l.session.clone()), record);
            cx.fx().forward(Side::Client, failed);
            return Progress::Done;
        }
        if let Some(request) = l.request {
            cx.fx().journal(Target::Run, request);
        }
        let error = error_json(
            -32002,
            "Resource not found: no journal for this session",
            Some(json!({"sessionId": &*l.session})),
        );
        cx.fx().answer(at, Target::Run, &id, Err(&error));
        Progress::Done
    }

    /// The load's session may not be continued here (`why`: another host holds it): the load
    /// fails with that reason (-32000, `data.reason` `"lease"`), in place of the agent's own
    /// answer if it failed; a restore cannot go on.
    pub(super) fn journal_refused(self, cx: &mut Cx, at: Stamp, why: &str) -> Progress {
        let l = self;
        let error = error_json(
            -32000,
            why,
            Some(json!({"sessionId": &*l.session, "reason": LEASE_REFUSED})),
        );
        let id = match l.asker {
            Asker::Client(id) => id,
            Asker::Restore(mut lines) => {
                return Progress::Unrestored {
                    lines: lines.take(),
                    error,
                };
            }
        };
        if let Some(request) = l.request {
            cx.fx().journal(Target::Run, request);
        }
        if let Some(failed) = l.agent_failed {
            let record = cx.fx().proxy_record(at, Side::Agent, failed);
            cx.fx().journal(Target::Run, record);
        }
        cx.fx().answer(at, Target::Run, &id, Err(&error));
        Progress::Done
    }

    /// The mapping of the load's client-facing session to agent-side session `agent` (`fresh`:
    /// one the agent started new for it, re-primed when the configuration says so), for the
    /// table to keep persistently; its journal, the catalog and the client are told of it.
    pub(super) fn mapping(
        &self,
        cx: &mut Cx,
        at: Stamp,
        agent: &AgentSessionId,
        fresh: bool,
    ) -> Mapping {
        let session = &self.session;
        let (reprime, turns) = match fresh && cx.config().reprime && self.summary.turns > 0 {
            true => (Some(self.summary.transcript.clone()), self.summary.turns),
            false => (None, 0),
        };
        let (agent_failed, fork) = (self.agent_failed.is_some(), self.fork);
        let has_reprime = reprime.is_some();
        let mapping = Mapping {
            agent: agent.clone(),
            prefix: mapping::prefix_at(at.unix_us),
            reprime,
        };
        cx.fx().event(
            at,
            Target::Session(session.clone()),
            Event::SessionMapped {
                agent_session: agent.to_string(),
            },
        );
        cx.fx().push(Action::Catalog(CatalogUpdate::Alias {
            session: session.clone(),
            agent: agent.clone(),
        }));
        if fresh {
            let what = if has_reprime {
                format!(
                    "the earlier conversation ({turns} turns) will be sent as context with your next prompt"
                )
            } else {
                "it does not remember the earlier conversation".to_string()
            };
            // Why the agent's own copy was not used, as it is.
            let can_load = cx.peers().agent.load || cx.peers().agent.resume;
            let why = if fork {
                "The agent cannot fork sessions".to_string()
            } else if agent_failed {
                "The agent could not load this session".to_string()
            } else if !can_load {
                "The agent cannot load sessions".to_string()
            } else {
                match self.summary.agent_copy {
                    AgentCopy::Behind { known, turns } => format!(
                        "This agent's own copies of session {session} on this host hold {known} of its {turns} turns (it went on on another host or in another agent since)"
                    ),
                    AgentCopy::Absent { .. } | AgentCopy::Whole(_) | AgentCopy::Unjournaled => {
                        format!(
                            "This agent has no copy of session {session} on this host (the session ran elsewhere)"
                        )
                    }
                }
            };
            let message = format!(
                "{why}: acp-journal replayed session {session} from its journal and started a new agent session ({agent}); {what}."
            );
            cx.fx().push(Action::Log(message.clone()));
            if cx.peers().client.notices {
                cx.fx().notify_client(at, session, json!({"sessionUpdate": "notice", "severity": "info", "title": "Conversation restored from the journal", "description": message}));
            }
        }
        mapping
    }

    /// Restore the recorded mode and config options on a fresh agent session.
    pub(super) fn restore_state(
        &mut self,
        cx: &mut Cx,
        at: Stamp,
        op: u64,
        agent: &AgentSessionId,
        result: &Value,
    ) {
        let requests = restore_requests(&self.summary, agent, result);
        self.phase = match self.phase {
            Phase::Restoring { outstanding } => Phase::Restoring {
                outstanding: outstanding + requests.len(),
            },
            Phase::Fetching { .. } | Phase::Starting => Phase::Restoring {
                outstanding: requests.len(),
            },
        };
        let session = self.session.clone();
        for (step, method, params) in requests {
            cx.request(at, &session, (op, step), (method, &params), None);
        }
    }

    /// The client's method: a load replays; a resume does not, except in v2 (`replayFrom`).
    pub(super) fn method(&self) -> &'static str {
        if self.replay && !self.support.v2 {
            "session/load"
        } else {
            "session/resume"
        }
    }

    /// A request that restores the recorded mode or config was answered.
    pub(super) fn restore_answered(&mut self) {
        if let Phase::Restoring { outstanding } = &mut self.phase {
            *outstanding = outstanding.saturating_sub(1);
        }
    }

    /// True while requests restoring the recorded mode or config wait for their answers.
    pub(super) fn restoring(&self) -> bool {
        matches!(self.phase, Phase::Restoring { outstanding } if outstanding > 0)
    }

    pub(super) fn is_restore(&self) -> bool {
        matches!(self.asker, Asker::Restore(_))
    }

    pub(super) fn client_id(&self) -> Option<&RequestId> {
        match &self.asker {
            Asker::Client(id) => Some(id),
            Asker::Restore(_) => None,
        }
    }
}

/// A member the agent's answer has (not `null`).
pub(super) fn present(v: &Value) -> bool {
    !v.is_null()
}

/// The `session/set_mode` and `session/set_config_option` requests that bring a fresh agent
/// session (which answered `result`) to the recorded mode and config.
pub(super) fn restore_requests(
    summary: &Summary,
    agent: &AgentSessionId,
    result: &Value,
) -> Vec<(Step, &'static str, String)> {
    let mut requests = Vec::new();
    if let Some(mode) = &summary.mode
        && result["modes"]["currentModeId"].as_str() != Some(mode.as_str())
        && result["modes"]["availableModes"]
            .as_array()
            .is_some_and(|modes| modes.iter().any(|m| m["id"] == mode.as_str()))
    {
        let params = json!({"sessionId": agent.as_str(), "modeId": mode}).to_string();
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
        let mut params = json!({"sessionId": agent.as_str(), "configId": id, "value": recorded});
        if recorded.is_boolean() {
            params["type"] = json!("boolean");
        }
        requests.push((
            Step::SetConfig,
            "session/set_config_option",
            params.to_string(),
        ));
    }
    requests
}

/// Whether an error answer is a host's refusal of a load because another host continues the
/// session (see [`LEASE_REFUSED`]): nothing may continue that session as a new one instead.
pub(super) fn refused_by_lease(line: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Answer<'a> {
        #[serde(borrow)]
        error: Option<Error<'a>>,
    }
    #[derive(serde::Deserialize)]
    struct Error<'a> {
        code: i64,
        #[serde(borrow)]
        data: Option<Data<'a>>,
    }
    #[derive(serde::Deserialize)]
    struct Data<'a> {
        #[serde(borrow)]
        reason: Option<&'a str>,
    }
    serde_json::from_slice::<Answer<'_>>(line).is_ok_and(|a| {
        a.error.is_some_and(|e| {
            e.code == -32000 && e.data.and_then(|d| d.reason) == Some(LEASE_REFUSED)
        })
    })
}

/// The cursors `summary` recorded, told to the client when session `session` came back on the
/// agent session that made them (`agent_session`, the one it is on now), of the same agent
/// (cursor IDs are the agent's: another agent, or another session of it, would refuse them).
pub(super) fn still_the_agents_cursors(
    cx: &mut Cx,
    at: Stamp,
    (session, agent_session): (&SessionId, &AgentSessionId),
    summary: &Summary,
) {
    let Some(cursors) = &summary.cursors else {
        return;
    };
    let agent = (cx.peers().initialize.response.as_ref())
        .and_then(|r| serde_json::from_slice(r).ok())
        .and_then(|r| crate::acp::agent_title(&r));
    if agent != cursors.agent || agent_session.as_str() != cursors.agent_session {
        return;
    }
    for update in &cursors.updates {
        cx.fx().notify_client(at, session, update.clone());
    }
}

/// The `result` of an agent's answer (`peek`), parsed (null when it has none).
pub(super) fn result_of(peek: &Peek<'_>) -> Value {
    peek.result
        .and_then(|r| serde_json::from_str(r.get()).ok())
        .unwrap_or(Value::Null)
}

/// The `error` of an agent's error answer (`line`), as JSON text.
pub(super) fn error_of(line: &[u8]) -> Option<String> {
    serde_json::from_slice::<Value>(line)
        .ok()
        .map(|m| m["error"].to_string())
}
