//! `session/list`: answered from the journal's catalog for agents that lack it (pages of
//! [`PAGE`], an opaque cursor), or merged with the agent's own answer for agents that have it
//! (agent-side IDs of mapped sessions shown as the client-facing ones, journal sessions the agent
//! no longer lists added on the first page).

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use serde_json::{Value, json};

use super::ListedSession;
use crate::wire::envelope::{RequestId, error_json};
use crate::wire::rewrite::edit_line;

/// Sessions per `session/list` page served from the journal.
pub(super) const PAGE: usize = 50;

/// A `session/list` the proxy answers or merges.
#[derive(Debug)]
pub(super) struct List {
    pub(super) client_id: RequestId,
    pub(super) cwd: Option<String>,
    pub(super) cursor: Option<String>,
    /// Forwarded to the agent (which has `list`): merge its answer.
    pub(super) forwarded: bool,
    /// The store's sessions, once fetched.
    pub(super) listed: Option<Vec<ListedSession>>,
    /// The agent's answer, held until `listed` arrives.
    pub(super) response: Option<Bytes>,
}

impl List {
    fn wanted<'a>(
        &'a self,
        listed: &'a [ListedSession],
    ) -> impl Iterator<Item = &'a ListedSession> {
        listed
            .iter()
            .filter(|s| self.cwd.is_none() || s.cwd == self.cwd)
    }

    /// The answer served from the journal: `Ok(result)` or `Err(error)`, as JSON.
    pub(super) fn page(&self) -> Result<String, String> {
        let offset = match self.cursor.as_deref().map(decode_cursor) {
            None => 0,
            Some(Some(n)) => n,
            Some(None) => return Err(error_json(-32602, "Invalid params: unknown cursor", None)),
        };
        let listed = self.listed.as_deref().unwrap_or_default();
        let all: Vec<Value> = self.wanted(listed).filter_map(session_info).collect();
        let page: Vec<Value> = all.iter().skip(offset).take(PAGE).cloned().collect();
        let mut result = json!({"sessions": page});
        if offset.saturating_add(PAGE) < all.len() {
            result["nextCursor"] = json!(encode_cursor(offset + PAGE));
        }
        Ok(result.to_string())
    }

    /// The agent's answer merged with the journal's sessions, once both are here.
    /// `mapped` gives the client-facing ID of each agent-side ID mapped in this connection.
    pub(super) fn merged<'a>(
        &self,
        mapped: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> Option<Bytes> {
        let (Some(listed), Some(response)) = (&self.listed, &self.response) else {
            return None;
        };
        let mut to_client: HashMap<&str, &str> = mapped.collect();
        for s in listed {
            for a in &s.agent_ids {
                to_client.insert(a, &s.session);
            }
        }
        let merged = edit_line(response, |msg| {
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
            if self.cursor.is_none() {
                for s in self.wanted(listed) {
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
        Some(merged.map(Bytes::from).unwrap_or_else(|| response.clone()))
    }
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
