//! The short texts the text and HTML renderers both print: a message's direction ([`arrow`]), a
//! config change and a plan on one line ([`config_summary`], [`plan_summary`]), a plan entry's
//! checkbox ([`plan_mark`]).

use serde_json::Value;

use crate::wire::Side;

/// The direction of a message from `from`: `client → agent` or `agent → client`.
pub fn arrow(from: Side) -> &'static str {
    match from {
        Side::Client => "client → agent",
        Side::Agent => "agent → client",
    }
}

/// Config options set, on one line: `config: model = opus, fast = true` (string values bare,
/// others as JSON).
pub fn config_summary(options: &[(&str, &Value)]) -> String {
    let set: Vec<String> = options
        .iter()
        .map(|(id, value)| match value.as_str() {
            Some(text) => format!("{id} = {text}"),
            None => format!("{id} = {value}"),
        })
        .collect();
    format!("config: {}", set.join(", "))
}

/// A `plan` update on one line: `plan: [x] done  [>] doing  [ ] to do`.
pub fn plan_summary(update: &Value) -> String {
    let entries: Vec<String> = update["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| format!("{} {}", plan_mark(e), e["content"].as_str().unwrap_or("")))
        .collect();
    format!("plan: {}", entries.join("  "))
}

/// The checkbox of a plan entry: `[x]` completed, `[>]` in progress, `[ ]` otherwise.
pub fn plan_mark(entry: &Value) -> &'static str {
    match entry["status"].as_str() {
        Some("completed") => "[x]",
        Some("in_progress") => "[>]",
        _ => "[ ]",
    }
}
