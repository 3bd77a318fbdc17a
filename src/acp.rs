//! ACP content: what the parts of a message mean, shared by the readers above the journal
//! (`render`, `replay`). Pure functions of parsed JSON.

use serde_json::Value;

/// The option a permission answer chose (`result.outcome`): its `optionId` when selected, else
/// the outcome itself (`cancelled`).
pub fn permission_choice(outcome: &Value) -> Option<&str> {
    match outcome["outcome"].as_str()? {
        "selected" => outcome["optionId"].as_str(),
        other => Some(other),
    }
}

/// The text of a prompt's content blocks: text as is, other blocks as `[kind uri-or-name]`.
pub fn prompt_text(blocks: &Value) -> String {
    let parts: Vec<String> = blocks
        .as_array()
        .into_iter()
        .flatten()
        .map(|b| match b["type"].as_str() {
            Some("text") => b["text"].as_str().unwrap_or("").to_string(),
            Some(kind) => format!(
                "[{kind} {}]",
                b["uri"]
                    .as_str()
                    .or(b["resource"]["uri"].as_str())
                    .or(b["name"].as_str())
                    .unwrap_or("")
            ),
            None => String::new(),
        })
        .collect();
    parts.join(" ")
}
