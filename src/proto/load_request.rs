//! What a load is asked to do, apart from how it is done: the client's `session/load` or
//! `session/resume` ([`LoadRequest`], with who waits for it and what the session was set up
//! with), and the state of one the client sent the agent itself ([`NativeLoad`], owned by its
//! session until the agent answers).

use bytes::Bytes;
use serde_json::Value;

use super::capabilities::AgentCaps;
use super::held::HeldLines;
use super::vocab::{HistoryOffer, SessionId};
use crate::journal::format::Record;
use crate::wire::envelope::{Peek, RequestId};
use crate::wire::rewrite::{RawObject, json_string};

/// What a session was set up with in this connection (`session/new`, `session/load`,
/// `session/resume` params), as raw JSON: what brings it up again on a fresh agent session.
#[derive(Clone, Debug)]
pub(super) struct SetupParams {
    /// The working directory (a load fills it from the journal when the client gave none).
    pub(super) cwd: Option<String>,
    mcp_servers: String,
    additional: Option<String>,
}

impl SetupParams {
    /// From a setup request's params.
    pub(super) fn parse(params: &Value) -> SetupParams {
        SetupParams {
            cwd: params["cwd"].as_str().map(str::to_string),
            mcp_servers: if !params["mcpServers"].is_null() {
                params["mcpServers"].to_string()
            } else {
                "[]".into()
            },
            additional: (!params["additionalDirectories"].is_null())
                .then(|| params["additionalDirectories"].to_string()),
        }
    }

    /// The `cwd`, `mcpServers` (with `--offer-history`'s server, `offer`, over HTTP when the
    /// agent takes it) and (when the agent takes them) `additionalDirectories`, as params for
    /// the request that brings the agent up; and the offer's token, which the journal's copy
    /// of the request leaves out.
    pub(super) fn to_params(
        &self,
        agent: &AgentCaps,
        offer: Option<&HistoryOffer>,
    ) -> (RawObject, Option<String>) {
        let mut params = RawObject::default();
        if let Some(cwd) = &self.cwd {
            params.set("cwd", json_string(cwd));
        }
        let offered = offer.zip(self.cwd.as_deref()).and_then(|(offer, cwd)| {
            let servers = serde_json::from_str(&self.mcp_servers).ok()?;
            super::offer::add(offer, agent, &servers, cwd)
        });
        let secret = match offered {
            Some(offered) => {
                params.set("mcpServers", offered.servers);
                offered.secret
            }
            None => {
                params.set("mcpServers", self.mcp_servers.clone());
                None
            }
        };
        if let (Some(dirs), true) = (&self.additional, agent.additional_directories) {
            params.set("additionalDirectories", dirs.clone());
        }
        (params, secret)
    }
}

/// Who waits for a load.
#[derive(Debug)]
pub(super) enum Asker {
    /// The client's `session/load` or `session/resume` (this request id): answered when done.
    Client(RequestId),
    /// Nobody asked: the session was live when the agent was restarted, and these client lines
    /// (the first names the session) go to the agent once it is up again.
    Restore(HeldLines),
}

/// A `session/load` or `session/resume` as the client asked for it, or a restore.
#[derive(Debug)]
pub(super) struct LoadRequest {
    pub(super) asker: Asker,
    pub(super) session: SessionId,
    /// Replay the history (load) or not (resume, restore).
    pub(super) replay: bool,
    pub(super) setup: SetupParams,
    /// The client's request, journaled once the session is known to exist (`None` when it
    /// was journaled as it passed to the agent).
    pub(super) request: Option<Record>,
    /// The agent's own load (or resume) of the session failed with this answer: it is what the
    /// client gets when the journal has no such session, and the agent's own load is not tried
    /// again.
    pub(super) agent_failed: Option<Bytes>,
    /// A fork the proxy made in the journal for an agent without `session/fork`: brought up
    /// on a fresh agent session, and the answer names it.
    pub(super) fork: bool,
    /// The session is live (a host's client joins it): the history replayed is what the
    /// journal held when the load began, and the live lines follow it.
    pub(super) live: bool,
    /// Replay only the last this many prompt turns (`tail`).
    pub(super) tail: Option<u64>,
}

impl LoadRequest {
    /// The request's params; `None` without a `sessionId`.
    pub(super) fn parse(id: &RequestId, peek: &Peek<'_>, replay: bool) -> Option<LoadRequest> {
        let params: Value = peek
            .params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        Some(LoadRequest {
            asker: Asker::Client(id.clone()),
            session: SessionId::from(params["sessionId"].as_str()?),
            replay,
            setup: SetupParams::parse(&params),
            request: None,
            agent_failed: None,
            fork: false,
            live: false,
            tail: tail_turns(&params),
        })
    }

    /// Bring `session` up again on a restarted agent, then pass `line` (a client line that
    /// names it) on.
    pub(super) fn restore(session: SessionId, setup: SetupParams, line: Bytes) -> LoadRequest {
        LoadRequest {
            asker: Asker::Restore(HeldLines::of(line)),
            session,
            replay: false,
            setup,
            request: None,
            agent_failed: None,
            fork: false,
            live: false,
            tail: None,
        }
    }
}

/// The most agent replay held for a native load at a time; past it the replay is forwarded
/// as it comes (and a failing load is then served from the journal without replaying it again).
pub(super) const NATIVE_HOLD_BYTES: usize = 16 << 20;

/// A `session/load` or `session/resume` the client sent the agent itself, owned by its session
/// until the agent answers. While the agent replays the history its replay is forwarded but not
/// journaled again; with a `fallback` (`auto` and `journal` modes) the replay is held meanwhile
/// (up to [`NATIVE_HOLD_BYTES`]): shown if the load succeeds, dropped if the journal's replay
/// replaces it.
#[derive(Debug)]
pub(super) struct NativeLoad {
    /// The client's request id.
    pub(super) id: RequestId,
    /// The agent replays the history (a load; a v2 resume from the start).
    pub(super) replaying: bool,
    /// The request as asked, to serve it from the journal should the agent fail it.
    pub(super) fallback: Option<LoadRequest>,
    pub(super) held: HeldLines,
}

impl NativeLoad {
    pub(super) fn new(id: RequestId, replaying: bool, fallback: Option<LoadRequest>) -> NativeLoad {
        NativeLoad {
            id,
            replaying,
            fallback,
            held: HeldLines::default(),
        }
    }

    /// True while its replay is held (until the agent answers).
    pub(super) fn holds_replay(&self) -> bool {
        self.replaying && self.fallback.is_some()
    }
}

/// The prompt turns a load asks for when it asks for the tail of the history only: a v1
/// `session/load`'s `_meta.acpJournal.tail.turns`, or a v2 `session/resume`'s
/// `replayFrom: {"type": "_acpJournal/tail", "turns": N}`.
pub(super) fn tail_turns(params: &Value) -> Option<u64> {
    let from = &params["replayFrom"];
    match from["type"].as_str() {
        Some(TAIL_CURSOR) => from["turns"].as_u64(),
        _ => params["_meta"]["acpJournal"]["tail"]["turns"].as_u64(),
    }
}

/// The v2 `replayFrom` cursor type of a tail replay.
pub(super) const TAIL_CURSOR: &str = "_acpJournal/tail";
