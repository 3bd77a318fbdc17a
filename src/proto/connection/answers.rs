//! The agent requests asked of connections ([`Asks`]) and clients' answers to them: which
//! connection an agent request is asked of; a permission request asked of several connections
//! is settled by the first answer that is not an error (the others asked get
//! `$/cancel_request`, every other attached connection the outcome, and later answers are
//! dropped); a `terminal/create` answer records which connection owns the terminal, a
//! `terminal/release` forgets it.

use std::collections::VecDeque;

use bytes::Bytes;
use serde_json::{Value, json};

use super::super::sessions::SessionTable;
use super::super::vocab::{ConnId, HashMap, SessionId};
use super::lines::{notification_line, terminal_of};
use super::roster::Roster;
use crate::wire::envelope::{self, Peek, RequestId};

/// How many settled permission requests are remembered (to drop the later answers).
const SETTLED_MEMORY: usize = 256;

/// The agent requests asked of connections, and the terminals connections created.
#[derive(Debug, Default)]
pub(super) struct Asks {
    /// Agent requests sent to connections and not answered yet.
    asked: HashMap<RequestId, Asked>,
    /// Permission requests lately settled by one connection: the others' answers are dropped.
    settled: VecDeque<RequestId>,
    /// Terminals a client created for the agent, and that client.
    terminals: HashMap<String, ConnId>,
}

/// An agent request sent (or held) for connections, and not answered yet.
#[derive(Debug)]
pub(super) struct Asked {
    /// The connections asked. A permission request asks every attached controller; any other
    /// request one connection.
    pub(super) conns: Vec<ConnId>,
    pub(super) line: Bytes,
    pub(super) method: String,
    pub(super) session: Option<SessionId>,
}

impl Asks {
    /// Agent request `id` is asked as `asked` says.
    pub(super) fn ask(&mut self, id: RequestId, asked: Asked) {
        self.asked.insert(id, asked);
    }

    /// True while agent request `id` is asked of some connection.
    pub(super) fn is_asked(&self, id: &RequestId) -> bool {
        self.asked.contains_key(id)
    }

    /// Take the connections matching `gone` (a connection, with the session asked about) out
    /// of the agent requests they were asked: those asked of nobody else, with their lines.
    pub(super) fn forget(
        &mut self,
        gone: impl Fn(ConnId, Option<&SessionId>) -> bool,
    ) -> Vec<(RequestId, Bytes)> {
        let mut left = Vec::new();
        for (id, asked) in &mut self.asked {
            asked.conns.retain(|c| !gone(*c, asked.session.as_ref()));
            if asked.conns.is_empty() {
                left.push(id.clone());
            }
        }
        left.into_iter()
            .filter_map(|id| self.asked.remove_entry(&id))
            .map(|(id, asked)| (id, asked.line))
            .collect()
    }

    /// Connection `conn` ended: its terminals are gone, and the agent requests asked of it and
    /// of no other connection are taken out (ids and lines, in no order).
    pub(super) fn end(&mut self, conn: ConnId) -> Vec<(RequestId, Bytes)> {
        self.terminals.retain(|_, c| *c != conn);
        self.forget(|c, _| c == conn)
    }

    /// Connection `conn` joined session `s`: the permission requests about it that others were
    /// asked and have not answered are asked of it too (their lines, in the order of their ids).
    pub(super) fn ask_joiner(&mut self, conn: ConnId, s: &SessionId) -> Vec<Bytes> {
        let mut pending: Vec<(&RequestId, &mut Asked)> = self
            .asked
            .iter_mut()
            .filter(|(_, a)| {
                a.method == "session/request_permission"
                    && a.session.as_ref() == Some(s)
                    && !a.conns.contains(&conn)
            })
            .collect();
        pending.sort_by_key(|(id, _)| id.to_json());
        pending
            .into_iter()
            .map(|(_, asked)| {
                asked.conns.push(conn);
                asked.line.clone()
            })
            .collect()
    }

    /// The connection to ask an agent request of `method` (not a permission request) that
    /// `line` is, among the `ready` controllers of its session (those not joining it; `turn`:
    /// the connection whose prompt runs there): a terminal's request the connection that
    /// created the terminal; an fs or `terminal/create` request the turn's connection, else
    /// one that declared the capability; anything else the turn's connection, else the first
    /// ready. `None` when none is ready; `Err` with why no connection can answer it.
    pub(super) fn answerer(
        &self,
        method: &str,
        turn: Option<ConnId>,
        line: &[u8],
        ready: &[ConnId],
        roster: &Roster,
    ) -> Result<Option<ConnId>, &'static str> {
        let turn = turn.filter(|c| ready.contains(c));
        let can = |c: &ConnId| roster.view(*c).is_none_or(|v| v.can(method));
        if let Some(terminal) = terminal_of(line).filter(|_| method != "terminal/create") {
            return match self.terminals.get(&terminal) {
                Some(c) if roster.is_live(*c) => Ok(Some(*c)),
                _ => Err("the client connection that created this terminal has ended"),
            };
        }
        if method.starts_with("fs/") || method.starts_with("terminal/") {
            return match turn.filter(can).or_else(|| ready.iter().copied().find(can)) {
                Some(c) => Ok(Some(c)),
                None if !ready.is_empty() => Err(
                    "no client connection attached to the session declared the capability this request needs",
                ),
                None => Ok(None),
            };
        }
        Ok(turn.or_else(|| ready.first().copied()))
    }

    /// A client's answer to an agent request: `Some` when it goes on to the agent, with the
    /// lines for connections it makes. A permission request's first answer (not an error)
    /// wins: the others asked are told it is settled. A later answer is dropped, and so is an
    /// error while others asked may still answer.
    pub(super) fn answered(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        is_error: bool,
        peek: &Peek<'_>,
        roster: &Roster,
        sessions: &SessionTable,
    ) -> Option<Vec<(ConnId, Bytes)>> {
        let Some(asked) = self.asked.get_mut(id) else {
            return (!self.settled.contains(id)).then(Vec::new);
        };
        if is_error && asked.conns.len() > 1 && asked.conns.contains(&conn) {
            // Wait for another connection's answer.
            asked.conns.retain(|c| *c != conn);
            return None;
        }
        let Some(asked) = self.asked.remove(id) else {
            return Some(Vec::new());
        };
        match asked.method.as_str() {
            "session/request_permission" => {
                return Some(self.settle(conn, id, &asked, peek, roster, sessions));
            }
            "terminal/create" => {
                if let Some(terminal) = envelope::str_field(peek.result, "terminalId") {
                    self.terminals.insert(terminal.to_string(), conn);
                }
            }
            "terminal/release" => {
                if let Some(terminal) = terminal_of(&asked.line) {
                    self.terminals.remove(&terminal);
                }
            }
            _ => {}
        }
        Some(Vec::new())
    }

    /// Connection `winner` answered permission request `id`: the lines that say so. The others
    /// asked get `$/cancel_request` for it, and every other connection attached to its session
    /// a `session/update` with the outcome (a `tool_call_update` whose
    /// `_meta.acpJournal.permission` says what was chosen and by whom; `session/attach`ed
    /// connections also the draft's `permission_resolved`).
    fn settle(
        &mut self,
        winner: ConnId,
        id: &RequestId,
        asked: &Asked,
        peek: &Peek<'_>,
        roster: &Roster,
        sessions: &SessionTable,
    ) -> Vec<(ConnId, Bytes)> {
        if self.settled.len() >= SETTLED_MEMORY {
            self.settled.pop_front();
        }
        self.settled.push_back(id.clone());
        let cancel = notification_line("$/cancel_request", json!({"requestId": id_value(id)}));
        let mut lines: Vec<(ConnId, Bytes)> = asked
            .conns
            .iter()
            .filter(|c| **c != winner)
            .map(|c| (*c, cancel.clone()))
            .collect();
        let Some(s) = &asked.session else {
            return lines;
        };
        let request: Value = envelope::peek(&asked.line)
            .params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let Some(tool) = request["toolCall"]["toolCallId"].as_str() else {
            return lines;
        };
        let result: Value = peek
            .result
            .and_then(|r| serde_json::from_str(r.get()).ok())
            .unwrap_or(Value::Null);
        let outcome = &result["outcome"];
        let by = format!("c{}", winner.0);
        let view = roster.view(winner);
        let client = view.and_then(|v| v.name.clone());
        let permission = json!({
            "outcome": outcome["outcome"],
            "optionId": outcome["optionId"],
            "by": by,
            "client": client,
        });
        let update = notification_line(
            "session/update",
            json!({"sessionId": &**s, "update": {
                "sessionUpdate": "tool_call_update",
                "toolCallId": tool,
                "_meta": {"acpJournal": {"permission": permission}},
            }}),
        );
        let resolved = notification_line(
            "session/update",
            json!({"sessionId": &**s, "update": {
                "sessionUpdate": "permission_resolved",
                "toolCallId": tool,
                "chosenOptionId": outcome["optionId"],
                "resolvedBy": {"name": client, "version": view.and_then(|v| v.version.clone())},
            }}),
        );
        for c in roster.others_attached(sessions, s, winner) {
            lines.push((c, update.clone()));
            if sessions.get(s).is_some_and(|x| x.members().is_drafted(c)) {
                lines.push((c, resolved.clone()));
            }
        }
        lines
    }
}

/// A request id as a JSON value.
fn id_value(id: &RequestId) -> Value {
    serde_json::from_str(&id.to_json()).unwrap_or(Value::Null)
}
