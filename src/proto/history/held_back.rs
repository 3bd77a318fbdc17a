//! What a replay holds back to its end: the latest state updates (commands, mode, config
//! options, session info, usage), the latest `cursor_update` of each cursor of the agent
//! session the records end in, and the tool calls left open (closed as `failed` at the end: a
//! crash left them pending; unless the session is live and their updates follow).

use std::collections::BTreeMap;

use bytes::Bytes;
use serde_json::{Value, json};

use super::super::vocab::{Cursors, Summary};
use super::lines::notification;

/// The most cursors a replay keeps.
const CURSOR_LIMIT: usize = 1024;

/// The state updates, cursors and open tool calls held back.
#[derive(Default)]
pub(super) struct HeldBack {
    /// The latest state update of each kind.
    state: BTreeMap<String, Value>,
    /// The latest `cursor_update` of each cursor since the session last changed agent
    /// session, by cursor ID, in the order first announced.
    cursors: Vec<(String, Value)>,
    /// The agent that recorded the segment being read (for its cursors).
    agent: Option<String>,
    /// Tool calls left open so far, by session (the replay's own, or a child's) and ID.
    open_tools: BTreeMap<(String, String), ()>,
    /// The session is live: tool calls still open at the end stay open.
    keep_open: bool,
}

impl HeldBack {
    /// A segment of the session recorded by `agent` begins: cursors an earlier agent made are
    /// not this one's.
    pub(super) fn segment(&mut self, agent: Option<String>) {
        if agent != self.agent {
            self.cursors.clear();
            self.agent = agent;
        }
    }

    /// The session went on under another agent session, whose cursors the earlier one's are
    /// not.
    pub(super) fn remapped(&mut self) {
        self.cursors.clear();
    }

    /// A state update of `kind`: the latest of its kind (`session_info_update`s merged).
    pub(super) fn state(&mut self, kind: &str, update: &Value) {
        if kind == "session_info_update" {
            let merged = self
                .state
                .entry(kind.to_string())
                .or_insert_with(|| json!({}));
            // A title the agent made of a re-prime is not the session's (journals of runs
            // before issue 51 hold some).
            let reprime = |k: &str, v: &Value| {
                k == "title" && v.as_str().is_some_and(crate::acp::is_reprime_title)
            };
            for (k, v) in update.as_object().into_iter().flatten() {
                if !reprime(k, v) {
                    merged[k] = v.clone();
                }
            }
        } else {
            self.state.insert(kind.to_string(), update.clone());
        }
    }

    /// A `cursor_update`: the cursor's fields merged over what was known of it (a patch).
    pub(super) fn cursor(&mut self, update: &Value) {
        let Some(id) = update["cursorId"].as_str() else {
            return;
        };
        let full = self.cursors.len() >= CURSOR_LIMIT;
        match self.cursors.iter_mut().find(|(c, _)| c == id) {
            Some((_, known)) => {
                for (k, v) in update.as_object().into_iter().flatten() {
                    known[k] = v.clone();
                }
            }
            None if !full => self.cursors.push((id.to_string(), update.clone())),
            None => {}
        }
    }

    /// A tool call's status in `session`.
    pub(super) fn tool_status(&mut self, session: &str, id: &str, status: &str) {
        let key = (session.to_string(), id.to_string());
        match status {
            "completed" | "failed" => {
                self.open_tools.remove(&key);
            }
            "pending" | "in_progress" => {
                self.open_tools.insert(key, ());
            }
            _ => {}
        }
    }

    /// The tool calls open so far are the client's no more (a tail replay leaves them out).
    pub(super) fn forget_tools(&mut self) {
        self.open_tools.clear();
    }

    /// Tool calls still open at the end stay open.
    pub(super) fn keep_tools_open(&mut self) {
        self.keep_open = true;
    }

    /// End of the records: the latest state updates of `session` and a `failed` update for
    /// each tool call left open (none kept open) appended to `out`, the cursors put in
    /// `summary` (under its agent session, else `session`).
    pub(super) fn finish(self, session: &str, summary: &mut Summary, out: &mut Vec<Bytes>) {
        for update in self.state.into_values() {
            out.push(notification(session, update));
        }
        if !self.keep_open {
            for (session, id) in self.open_tools.into_keys() {
                out.push(notification(
                    &session,
                    json!({"sessionUpdate": "tool_call_update", "toolCallId": id, "status": "failed"}),
                ));
            }
        }
        if !self.cursors.is_empty() {
            summary.cursors = Some(Box::new(Cursors {
                agent: self.agent,
                agent_session: summary
                    .agent_session
                    .clone()
                    .unwrap_or_else(|| session.to_string()),
                updates: self.cursors.into_iter().map(|(_, u)| u).collect(),
            }));
        }
    }
}
