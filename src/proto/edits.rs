//! The edits lines get on their way through, and what the agent's answers teach the core as
//! they pass. To the agent: ids renumbered per connection, mapped sessions' IDs, the re-prime
//! ([`super::mapping`]); the client's `initialize` and `authenticate` kept for a restart. To the
//! client: the `initialize` answer advertising what the proxy adds ([`super::capabilities`]),
//! restored ids, mapped sessions' IDs, a new session's fresh ID; and from the answers, the
//! agent's capabilities. What a line changes in its sessions the route applied before
//! ([`super::route::relay`]), through the sessions' own methods; the edits read the table,
//! and what those transitions left them ([`super::pending::Carried`]). Every edit keeps the
//! members it does not change byte for byte ([`crate::wire::rewrite`]).

use bytes::Bytes;

use super::capabilities::{self, AgentCaps, ClientCaps};
use super::context::Cx;
use super::listing::Lists;
use super::mapping;
use super::offer;
use super::pending::{Carried, Pending, Resolved};
use super::restart::Handshake;
use super::reused_ids::ReusedIds;
use super::sessions::SessionTable;
use super::vocab::{Action, AgentRef, AgentSessionId, Line, LoadMode, SessionId, Target};
use crate::journal::Event;
use crate::wire::Side;
use crate::wire::envelope::{self, Kind, Peek, RequestId};
use crate::wire::rewrite;

/// The components the relay of a line reads and changes beside the context and the session
/// table: the handshake (what the client sent to set up, the dead agent's requests), the lists
/// (a `session/list` request's cursor), the session IDs the agent uses again (a new session's
/// fresh ID, taken as the route applies its answer: [`super::route::relay`]), and whether the
/// proxy is a host's.
pub(super) struct Relaying<'a> {
    pub(super) handshake: &'a mut Handshake,
    pub(super) lists: &'a Lists,
    pub(super) reused: &'a mut ReusedIds,
    pub(super) hosted: bool,
}

/// A relayed line as edited ([`edit`]).
#[derive(Debug)]
pub(super) struct Edited {
    /// The line as it goes on, when an edit changed it.
    pub(super) line: Option<Bytes>,
    /// What the proxy changed in it that the journal would not show otherwise (the journal
    /// holds what the client sent and what it received), journaled after it.
    pub(super) event: Option<Event>,
}

/// The edits of a line the proxy does not consume (`msg`, from `from`), with what `with` holds
/// and what the route resolved of it (`resolved`: its session's slot; an agent's answer's
/// pending entry, when the route took it out of the table; what its session's transition left
/// the edits); what it did not resolve is looked up.
pub(super) fn edit(
    cx: &mut Cx,
    sessions: &SessionTable,
    with: &mut Relaying<'_>,
    from: Side,
    msg: Line<'_>,
    resolved: &Resolved,
) -> Edited {
    let Line {
        peek, bytes: line, ..
    } = msg;
    let rewritten = match (cx.config().load, from) {
        (LoadMode::Off, _) => None,
        (_, Side::Client) => rewrite_client(cx, sessions, with, msg, resolved),
        (_, Side::Agent) => rewrite_agent(cx, sessions, with, peek, line, resolved),
    };
    // --offer-history: the journal's MCP server added to a setup request (`offer`).
    let offered = match (cx.config().offer_history, from, &peek.kind) {
        (Some(offer), Side::Client, Kind::Request { .. }) => {
            offer::offered(offer, &cx.peers().agent, peek)
        }
        _ => None,
    };
    let (rewritten, event) = match offered {
        Some(offered) => {
            let added = rewrite::edit_line(rewritten.as_deref().unwrap_or(line), |m| {
                m.edit("params", |p| p.set("mcpServers", offered.servers));
            });
            let server = offered.journaled;
            match added {
                Some(out) => (Some(out), Some(Event::HistoryOffered { server })),
                None => (rewritten, None),
            }
        }
        None => (rewritten, None),
    };
    Edited {
        line: rewritten.map(Bytes::from),
        event,
    }
}

/// Client line edits on the way to the agent (`msg`; its session's slot in `resolved` when the
/// route resolved it, and a prompt's re-prime): renumbered ids, mapped session IDs, re-priming.
fn rewrite_client(
    cx: &mut Cx,
    sessions: &SessionTable,
    with: &mut Relaying<'_>,
    msg: Line<'_>,
    resolved: &Resolved,
) -> Option<Vec<u8>> {
    let Relaying {
        handshake, lists, ..
    } = with;
    let Line {
        at,
        peek,
        bytes: line,
    } = msg;
    let method = peek.method();
    match (&peek.kind, method) {
        (_, Some("initialize")) => {
            cx.peers_mut().client = ClientCaps::from_initialize(peek);
            handshake.client_init = Some(line.clone());
        }
        (Kind::Request { id, .. }, Some("authenticate")) => {
            handshake.auth_pending = Some((id.clone(), line.clone()));
        }
        (Kind::Response { id, .. }, _) => {
            let original = cx.ids().restore_agent(id)?;
            return rewrite::edit_line(line, |m| m.set("id", original.to_json()));
        }
        _ => {}
    }
    let new_id = match &peek.kind {
        Kind::Request { id, .. } => cx.ids().renumber(id),
        _ => None,
    };
    let cancel = match (method, envelope::request_id(peek.params)) {
        (Some("$/cancel_request"), Some(rid)) => cx.ids().sent_as(&rid).cloned(),
        _ => None,
    };
    let cursor = match (&peek.kind, method) {
        (Kind::Request { id, .. }, Some("session/list")) => lists
            .of_request(id)
            .and_then(|(_, l)| l.agent_cursor.clone()),
        _ => None,
    };
    // Only requests and notifications are mapped: an object without a method is no
    // message of the session, and passes unchanged.
    let session = peek.session.as_deref().filter(|_| method.is_some());
    let agent_session = session
        .and_then(|s| resolved.session.or_else(|| sessions.slot(s)))
        .and_then(|slot| Some(sessions[slot].mapping()?.agent.clone()));
    let reprime = match &resolved.carried {
        Some(Carried::Reprime(transcript)) => Some(transcript.as_str()),
        _ => None,
    };
    let edit = ClientEdit {
        id: new_id.as_ref(),
        cancel: cancel.as_ref(),
        agent_session: session.zip(agent_session.as_ref().map(AgentSessionId::as_str)),
        reprime,
        cursor: cursor.as_deref(),
    };
    if edit.is_empty() {
        return None;
    }
    let out = edit.apply(line)?;
    if let (Some(session), Some(_)) = (session, reprime) {
        let sent: serde_json::Value = serde_json::from_slice(&out).unwrap_or_default();
        let session = sessions.id(session);
        let sent = sent["params"]["prompt"].clone();
        cx.fx()
            .event(at, Target::Session(session), Event::Reprimed { sent });
    }
    Some(out)
}

/// What changes in a client line on its way to the agent.
#[derive(Debug, Default)]
struct ClientEdit<'a> {
    /// The id the request is sent under (renumbered).
    id: Option<&'a RequestId>,
    /// The id a `$/cancel_request` names (renumbered).
    cancel: Option<&'a RequestId>,
    /// The client-facing and agent-side session IDs.
    agent_session: Option<(&'a str, &'a str)>,
    /// The re-prime transcript, for a `session/prompt` (of a mapped session).
    reprime: Option<&'a str>,
    /// The agent's own cursor, for a `session/list` the client sent with a merged list's.
    cursor: Option<&'a str>,
}

impl ClientEdit<'_> {
    /// True when nothing changes (a re-prime comes with a mapped session only).
    fn is_empty(&self) -> bool {
        self.id.is_none()
            && self.cancel.is_none()
            && self.agent_session.is_none()
            && self.cursor.is_none()
    }

    /// The client line (`line`) edited; `None` when it cannot be.
    fn apply(&self, line: &[u8]) -> Option<Vec<u8>> {
        rewrite::edit_line(line, |msg| {
            if let Some(id) = self.id {
                msg.set("id", id.to_json());
            }
            msg.edit("params", |p| {
                if let Some(alias) = self.cancel {
                    p.set("requestId", alias.to_json());
                }
                if let Some(cursor) = self.cursor {
                    p.set("cursor", rewrite::json_string(cursor));
                }
                if let Some((client, agent)) = self.agent_session {
                    mapping::map_client_params(p, client, agent);
                }
                if let Some(transcript) = self.reprime
                    && let Some(prompt) = p.get("prompt")
                {
                    p.set("prompt", mapping::reprimed(prompt, transcript));
                }
            });
        })
    }
}

/// Agent line edits on the way to the client: capabilities, restored ids, mapped sessions
/// (`resolved`: an answer's pending entry, when the route took it out of the table, and its
/// session's slot).
fn rewrite_agent(
    cx: &mut Cx,
    sessions: &SessionTable,
    with: &mut Relaying<'_>,
    peek: &Peek<'_>,
    line: &Bytes,
    resolved: &Resolved,
) -> Option<Vec<u8>> {
    if let Kind::Response { id, is_error } = &peek.kind {
        let answer = Answer {
            id,
            is_error: *is_error,
            pending: resolved.answered.as_deref(),
            fresh: match &resolved.carried {
                Some(Carried::FreshId(fresh)) => Some(fresh),
                _ => None,
            },
        };
        return rewrite_agent_response(cx, with, peek, line, answer);
    }
    if let Kind::Request { id, .. } = &peek.kind
        && with.handshake.dead.contains_key(id)
    {
        // The client may still answer the dead agent's request with this id.
        let alias = cx.ids().renumber_agent(id);
        let mapped = map_agent_line(sessions, peek, line, untitled(resolved));
        return rewrite::edit_line(mapped.as_deref().unwrap_or(line), |m| {
            m.set("id", alias.to_json())
        });
    }
    map_agent_line(sessions, peek, line, untitled(resolved))
}

/// An agent line of a mapped session, mapped; without a title the agent made of a re-prime
/// (`untitled`: the route found it one as its session learnt the update,
/// [`super::route::relay`]), which the client is not given either:
///
/// ```text
/// before: {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"U","update":{"sessionUpdate":"session_info_update","title":"[Context restored by acp-journal: this conv…","updatedAt":"2026-11-29T07:32:44Z"}}}
/// after:  {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"session_info_update","updatedAt":"2026-11-29T07:32:44Z"}}}
/// ```
fn map_agent_line(
    sessions: &SessionTable,
    peek: &Peek<'_>,
    line: &Bytes,
    untitled: bool,
) -> Option<Vec<u8>> {
    peek.method()?;
    let session = peek.session.as_deref()?;
    let untitled = untitled
        .then(|| {
            rewrite::edit_line(line, |m| {
                m.edit("params", |p| p.edit("update", |u| u.remove("title")));
            })
        })
        .flatten();
    let line = untitled.as_deref().unwrap_or(line);
    let Some((client_session, mapping)) = sessions.mapping_of_agent(AgentRef(session)) else {
        return untitled;
    };
    mapping::edit_agent_line(line, client_session, session, &mapping.prefix).or(untitled)
}

/// An agent's answer to request `id`, and the pending entry of that request when the route
/// took it out of the table, with the fresh ID of the new session it names, if it takes one
/// ([`super::route::relay`]).
struct Answer<'a> {
    id: &'a RequestId,
    is_error: bool,
    pending: Option<&'a Pending>,
    fresh: Option<&'a SessionId>,
}

/// The edits of an agent's answer (`line`, described by `peek`), and what it teaches the
/// handshake: the agent's capabilities, an `authenticate` to send again on a restart.
fn rewrite_agent_response(
    cx: &mut Cx,
    with: &mut Relaying<'_>,
    peek: &Peek<'_>,
    line: &Bytes,
    answer: Answer<'_>,
) -> Option<Vec<u8>> {
    let Relaying {
        handshake, hosted, ..
    } = with;
    let Answer {
        id,
        is_error,
        pending,
        fresh,
    } = answer;
    let original = cx.ids().restore(id);
    let client_id = original.clone().unwrap_or_else(|| id.clone());
    let pending = match pending {
        Some(pending) => Some(pending),
        None => cx.pending().get(&(Side::Client, client_id.clone())),
    };
    let method = pending.map(|p| p.method.as_str());
    let mut out = None;
    match method {
        Some("authenticate") => {
            let sent = handshake.auth_pending.take();
            if !is_error && let Some((sent_id, sent_line)) = sent {
                handshake.client_auth =
                    (sent_id == client_id_of(&original, id)).then_some(sent_line);
            }
        }
        Some("initialize") if !is_error => {
            handshake.agent_initialized = true;
            if let Some(agent) = AgentCaps::from_initialize(peek) {
                cx.peers_mut().agent = agent;
                cx.peers_mut().client.support.v2 = agent.v2;
                // v2 clients take `notice` updates as a matter of course.
                cx.peers_mut().client.notices |= agent.v2;
                let added = agent.missing(cx.emulates_loading(), *hosted);
                out = capabilities::advertise(line, &added, agent.v2);
                if out.is_some() {
                    cx.fx().push(Action::Log(format!(
                        "advertising to the client on the agent's behalf: {}",
                        added.join(", ")
                    )));
                }
            }
        }
        Some("session/new") => out = fresh.and_then(|fresh| said_fresh(line, fresh)),
        _ => {}
    }
    if let Some(original) = original {
        out = rewrite::edit_line(out.as_deref().unwrap_or(line), |msg| {
            msg.set("id", original.to_json())
        });
    }
    out
}

/// Whether an agent update's title is to go ([`Carried::Untitled`]).
fn untitled(resolved: &Resolved) -> bool {
    matches!(resolved.carried, Some(Carried::Untitled))
}

/// The agent's answer to `session/new` (`line`) saying the fresh client-facing ID its session
/// takes ([`super::reused_ids`]).
fn said_fresh(line: &Bytes, fresh: &SessionId) -> Option<Vec<u8>> {
    rewrite::edit_line(line, |m| {
        m.edit("result", |r| {
            r.set("sessionId", rewrite::json_string(fresh))
        })
    })
}

/// Whether `line` may carry a `usage_update`, `session_info_update` or (v2) `state_update` (one pass over the
/// line, with a finder built once: building one costs more than a search).
pub(super) fn names_catalog_update(line: &[u8]) -> bool {
    static FINDER: std::sync::OnceLock<memchr::memmem::Finder<'static>> =
        std::sync::OnceLock::new();
    let finder = FINDER.get_or_init(|| memchr::memmem::Finder::new(b"_update\""));
    finder.find_iter(line).any(|at| {
        let before = &line[..at];
        before.ends_with(b"\"usage")
            || before.ends_with(b"\"session_info")
            || before.ends_with(b"\"state")
    })
}

/// The JSON-RPC id a response answers: the client's own when it was renumbered.
fn client_id_of(original: &Option<RequestId>, id: &RequestId) -> RequestId {
    original.clone().unwrap_or_else(|| id.clone())
}
