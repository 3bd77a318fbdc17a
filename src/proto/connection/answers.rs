//! Clients' answers to agent requests: a permission request asked of several connections is
//! settled by the first answer that is not an error (the others asked get `$/cancel_request`,
//! every other attached connection the outcome, and later answers are dropped); a
//! `terminal/create` answer records which connection owns the terminal, a `terminal/release`
//! forgets it.

use serde_json::{Value, json};

use super::super::sessions::SessionTable;
use super::super::vocab::ConnId;
use super::lines::{notification_line, terminal_of};
use super::state::{Asked, Connections};
use crate::wire::envelope::{self, Peek, RequestId};

/// How many settled permission requests are remembered (to drop the later answers).
const SETTLED_MEMORY: usize = 256;

impl Connections {
    /// A client's answer to an agent request: true when it goes on to the agent. A permission
    /// request's first answer (not an error) wins: the others asked are told it is settled. A
    /// later answer is dropped, and so is an error while others asked may still answer.
    pub(super) fn answered(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        is_error: bool,
        peek: &Peek<'_>,
        sessions: &SessionTable,
    ) -> bool {
        let Some(asked) = self.asked.get_mut(id) else {
            return !self.settled.contains(id);
        };
        if is_error && asked.conns.len() > 1 && asked.conns.contains(&conn) {
            // Wait for another connection's answer.
            asked.conns.retain(|c| *c != conn);
            return false;
        }
        let Some(asked) = self.asked.remove(id) else {
            return true;
        };
        match asked.method.as_str() {
            "session/request_permission" => self.settle(conn, id, &asked, peek, sessions),
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
        true
    }

    /// Connection `winner` answered permission request `id`: the others asked get
    /// `$/cancel_request` for it, and every other connection attached to its session a
    /// `session/update` with the outcome (a `tool_call_update` whose
    /// `_meta.acpJournal.permission` says what was chosen and by whom; `session/attach`ed
    /// connections also the draft's `permission_resolved`).
    fn settle(
        &mut self,
        winner: ConnId,
        id: &RequestId,
        asked: &Asked,
        peek: &Peek<'_>,
        sessions: &SessionTable,
    ) {
        if self.settled.len() >= SETTLED_MEMORY {
            self.settled.pop_front();
        }
        self.settled.push_back(id.clone());
        let cancel = notification_line("$/cancel_request", json!({"requestId": id_value(id)}));
        for c in asked.conns.iter().filter(|c| **c != winner) {
            self.send_or_hold(*c, cancel.clone());
        }
        let Some(s) = &asked.session else { return };
        let request: Value = envelope::peek(&asked.line)
            .params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let Some(tool) = request["toolCall"]["toolCallId"].as_str() else {
            return;
        };
        let result: Value = peek
            .result
            .and_then(|r| serde_json::from_str(r.get()).ok())
            .unwrap_or(Value::Null);
        let outcome = &result["outcome"];
        let by = format!("c{}", winner.0);
        let client = self.views.get(&winner).and_then(|v| v.name.clone());
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
                "resolvedBy": {"name": client, "version": self.views.get(&winner).and_then(|v| v.version.clone())},
            }}),
        );
        for c in self.others_attached(sessions, s, winner) {
            self.send_or_hold(c, update.clone());
            if self.drafted.contains(&(c, s.clone())) {
                self.send_or_hold(c, resolved.clone());
            }
        }
    }
}

/// A request id as a JSON value.
fn id_value(id: &RequestId) -> Value {
    serde_json::from_str(&id.to_json()).unwrap_or(Value::Null)
}
