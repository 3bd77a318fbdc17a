//! ACP content: what the parts of a message mean, shared by the core and the readers above the
//! journal (`proto`, `render`, `replay`, `otel`). Pure functions of parsed JSON; the table of
//! update kinds ([`updates`]) and what an update says of a child session ([`subagents`]) are
//! modules of their own.

pub mod subagents;
pub mod updates;

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

/// The name a person knows the agent by, from its `initialize` response: `agentInfo.title`,
/// else `agentInfo.name` (non-empty, control characters removed).
pub fn agent_title(response: &Value) -> Option<String> {
    let info = &response["result"]["agentInfo"];
    [&info["title"], &info["name"]]
        .into_iter()
        .filter_map(Value::as_str)
        .map(|s| s.chars().filter(|c| !c.is_control()).collect::<String>())
        .map(|s| s.trim().to_string())
        .find(|s| !s.is_empty())
}

/// The longest title taken from a prompt, in characters.
const PROMPT_TITLE_CHARS: usize = 80;

/// A title for a session that has none from its agent: the first non-empty line of its first
/// prompt's text blocks (`params.prompt`; of its other blocks when it has no text), trimmed, at
/// most 80 characters (`…` marks a cut).
pub fn prompt_title(prompt: &Value) -> Option<String> {
    let first_line = |text: &str| {
        text.lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_string)
    };
    let line = prompt
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "text")
        .find_map(|b| first_line(b["text"].as_str()?))
        .or_else(|| first_line(&prompt_text(prompt)))?;
    let line: String = line
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    Some(if line.chars().count() > PROMPT_TITLE_CHARS {
        let cut: String = line.chars().take(PROMPT_TITLE_CHARS - 1).collect();
        format!("{}…", cut.trim_end())
    } else {
        line
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_agent_title_is_its_title_else_its_name() {
        let r = |info: Value| json!({"result": {"agentInfo": info}});
        assert_eq!(
            agent_title(&r(
                json!({"name":"claude-agent-acp","title":"Claude Agent"})
            ))
            .as_deref(),
            Some("Claude Agent")
        );
        assert_eq!(
            agent_title(&r(json!({"name":"codex-acp","title":" "}))).as_deref(),
            Some("codex-acp")
        );
        assert_eq!(agent_title(&json!({"result": {}})), None);
    }

    #[test]
    fn a_prompt_title_is_its_first_line_trimmed_and_bounded() {
        let prompt = json!([{"type":"resource_link","uri":"file:///a.rs","name":"a"},
            {"type":"text","text":"\n  Fix the failing test\nin a.rs\n"}]);
        assert_eq!(
            prompt_title(&prompt).as_deref(),
            Some("Fix the failing test"),
            "the text, not the mention before it"
        );
        let long = json!([{"type":"text","text":"x".repeat(500)}]);
        let title = prompt_title(&long).unwrap();
        assert_eq!(title.chars().count(), 80);
        assert!(title.ends_with('…'));
        assert_eq!(prompt_title(&json!([{"type":"text","text":" \n\t"}])), None);
        assert_eq!(prompt_title(&json!("not blocks")), None);
        assert_eq!(
            prompt_title(&json!([{"type":"image","uri":"file:///x.png"}])).as_deref(),
            Some("[image file:///x.png]")
        );
    }
}
