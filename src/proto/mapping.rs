//! The edits a mapped session's lines get: a client-facing session S continued on agent-side
//! session U has S replaced by U on the way to the agent and U by S on the way back, the agent's
//! `toolCallId`/`messageId`s prefixed (so they never collide with replayed ones on the client),
//! and the first prompt after a fresh start carries the re-prime transcript. Client ids the
//! proxy renumbered ([`super::ids`]) are edited here too. Untouched members keep their bytes
//! ([`super::rewrite`]).

use serde_json::json;

use super::envelope::RequestId;
use super::rewrite::{edit_line, json_string};

/// What changes in a client line on its way to the agent.
#[derive(Debug, Default)]
pub(super) struct ClientEdit<'a> {
    /// The id the request is sent under (renumbered).
    pub(super) id: Option<&'a RequestId>,
    /// The id a `$/cancel_request` names (renumbered).
    pub(super) cancel: Option<&'a RequestId>,
    /// The agent-side session ID.
    pub(super) agent_session: Option<&'a str>,
    /// The re-prime transcript, for a `session/prompt`.
    pub(super) reprime: Option<&'a str>,
}

impl ClientEdit<'_> {
    pub(super) fn is_empty(&self) -> bool {
        self.id.is_none() && self.cancel.is_none() && self.agent_session.is_none()
    }
}

/// The re-prime text block put before the user's new message.
fn reprime_block(transcript: &str) -> serde_json::Value {
    json!({"type": "text", "text": format!("[Context restored by acp-journal: this conversation was interrupted and resumed in a new session. Earlier turns:]\n{transcript}[End of earlier turns. The user's new message follows.]")})
}

/// Apply `edit` to a client line; `None` when the line cannot be edited.
pub(super) fn edit_client_line(line: &[u8], edit: &ClientEdit<'_>) -> Option<Vec<u8>> {
    edit_line(line, |msg| {
        if let Some(id) = edit.id {
            msg.set("id", id.to_json());
        }
        msg.edit("params", |p| {
            if let Some(alias) = edit.cancel {
                p.set("requestId", alias.to_json());
            }
            if let Some(agent) = edit.agent_session {
                p.set("sessionId", json_string(agent));
            }
            if let Some(transcript) = edit.reprime
                && let Some(prompt) = p.get("prompt")
            {
                let block = reprime_block(transcript);
                let rest = prompt
                    .trim_start()
                    .strip_prefix('[')
                    .unwrap_or("]")
                    .trim_start();
                let joined = if rest.starts_with(']') {
                    format!("[{block}]")
                } else {
                    format!("[{block},{rest}")
                };
                p.set("prompt", joined);
            }
        });
    })
}

/// An agent line of mapped session: its session ID back to the client-facing one and the
/// agent's tool call and message ids prefixed; `None` when the line cannot be edited.
pub(super) fn edit_agent_line(line: &[u8], client_session: &str, prefix: &str) -> Option<Vec<u8>> {
    let prefixed = |v: Option<&str>| -> Option<String> {
        let s: String = serde_json::from_str(v?).ok()?;
        Some(json_string(&format!("{prefix}{s}")))
    };
    edit_line(line, |msg| {
        msg.edit("params", |p| {
            p.set("sessionId", json_string(client_session));
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

/// A prefix unique to a load made at `unix_us`: its time in base 36 and a dash.
pub(super) fn prefix_at(unix_us: i64) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut n = unix_us.unsigned_abs();
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    format!("{}-", String::from_utf8(out).expect("ascii"))
}
