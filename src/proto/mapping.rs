//! The edits a mapped session's lines get: a client-facing session S continued on agent-side
//! session U has S replaced by U on the way to the agent and U by S on the way back, the agent's
//! `toolCallId`/`messageId`s prefixed (so they never collide with replayed ones on the client),
//! and the first prompt after a fresh start carries the re-prime transcript. A session ID inside
//! a `_meta` object (of the params, the update or the tool call) is mapped like `sessionId`
//! wherever it appears as a whole string value. The edit of a client line as a whole (ids
//! renumbered too) is [`super::edits`]'s. Untouched members keep their bytes
//! ([`crate::wire::rewrite`]).

use serde_json::{Value, json};

use crate::wire::rewrite::{RawObject, edit_line, json_string};

/// Objects of a message's params whose `_meta` may name the session.
const META_HOLDERS: &[&str] = &["update", "toolCall"];

/// Replace every string value equal to `from` by `to`; true when something changed.
fn replace_strings(value: &mut Value, from: &str, to: &str) -> bool {
    match value {
        Value::String(s) if s == from => {
            *s = to.to_string();
            true
        }
        Value::Array(items) => {
            let mut changed = false;
            for v in items {
                changed |= replace_strings(v, from, to);
            }
            changed
        }
        Value::Object(members) => {
            let mut changed = false;
            for v in members.values_mut() {
                changed |= replace_strings(v, from, to);
            }
            changed
        }
        _ => false,
    }
}

/// Map the session ID in `object._meta` (only that member is rewritten, and only if it names
/// the session).
fn map_meta(object: &mut RawObject, from: &str, to: &str) {
    let Some(raw) = object.get("_meta") else {
        return;
    };
    if !raw.contains(from) {
        return;
    }
    let Ok(mut meta) = serde_json::from_str::<Value>(raw) else {
        return;
    };
    if replace_strings(&mut meta, from, to) {
        object.set("_meta", meta.to_string());
    }
}

/// Map the session ID in the `_meta` of the params and of the objects in it that carry one.
fn map_metas(params: &mut RawObject, from: &str, to: &str) {
    map_meta(params, from, to);
    for holder in META_HOLDERS {
        if params.get(holder).is_some_and(|o| o.contains("\"_meta\"")) {
            params.edit(holder, |o| map_meta(o, from, to));
        }
    }
}

/// The re-prime text block put before the user's new message.
fn reprime_block(transcript: &str) -> serde_json::Value {
    use crate::acp::REPRIME_OPENING;
    json!({"type": "text", "text": format!("{REPRIME_OPENING}: this conversation was interrupted and resumed in a new session. Earlier turns:]\n{transcript}[End of earlier turns. The user's new message follows.]")})
}

/// A `prompt` array (its JSON text) with the re-prime block of `transcript` put first.
pub(super) fn reprimed(prompt: &str, transcript: &str) -> String {
    let block = reprime_block(transcript);
    let rest = prompt
        .trim_start()
        .strip_prefix('[')
        .unwrap_or("]")
        .trim_start();
    if rest.starts_with(']') {
        format!("[{block}]")
    } else {
        format!("[{block},{rest}")
    }
}

/// A client line's params on the way to agent-side session `agent` of client-facing session
/// `client`: its `sessionId` and the session IDs in its `_meta`s mapped.
pub(super) fn map_client_params(params: &mut RawObject, client: &str, agent: &str) {
    params.set("sessionId", json_string(agent));
    map_metas(params, client, agent);
}

/// An agent line of mapped session: its session ID back to the client-facing one and the
/// agent's tool call and message ids prefixed; `None` when the line cannot be edited.
pub(super) fn edit_agent_line(
    line: &[u8],
    client_session: &str,
    agent_session: &str,
    prefix: &str,
) -> Option<Vec<u8>> {
    let prefixed = |v: Option<&str>| -> Option<String> {
        let s: String = serde_json::from_str(v?).ok()?;
        Some(json_string(&format!("{prefix}{s}")))
    };
    edit_line(line, |msg| {
        msg.edit("params", |p| {
            p.set("sessionId", json_string(client_session));
            map_metas(p, agent_session, client_session);
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
