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

/// Which agent recorded a session, as the journal tells it (docs/FORMAT.md, "Which agent"): the
/// `agentInfo` `name` and `version` it reported in its `initialize` response, and the command
/// line that started it (as journaled, redacted). `session/list` shows a session to the agent
/// it [`AgentId::is`], and a load resumes only that agent's own copies of a session.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentId {
    /// `agentInfo.name` (non-empty, control characters removed).
    pub name: Option<String>,
    /// `agentInfo.version`.
    pub version: Option<String>,
    /// The command line, its arguments joined by spaces.
    pub command: Option<String>,
}

impl AgentId {
    /// The agent that answered `initialize` with `response` (the whole answer:
    /// `{"result": {"agentInfo": …}}`), started by `command`.
    pub fn of(response: Option<&Value>, command: Option<String>) -> AgentId {
        let info = response.map(|r| &r["result"]["agentInfo"]);
        let text = |key: &str| {
            info.and_then(|i| i[key].as_str())
                .map(|s| s.chars().filter(|c| !c.is_control()).collect::<String>())
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        };
        AgentId {
            name: text("name"),
            version: text("version"),
            command: command.filter(|c| !c.is_empty()),
        }
    }

    /// Whether `other` is the same agent: the same `agentInfo` name when both report one
    /// (whatever their versions: an upgraded agent keeps its sessions, and its other commands
    /// reach the same ones), else the same command line when both are known, else when
    /// neither says more than the other.
    pub fn is(&self, other: &AgentId) -> bool {
        match (&self.name, &other.name, &self.command, &other.command) {
            (Some(a), Some(b), _, _) => a == b,
            (_, _, Some(a), Some(b)) => a == b,
            _ => self == other,
        }
    }
}

/// How the re-prime text block the proxy puts before the first prompt on a fresh agent session
/// begins.
pub const REPRIME_OPENING: &str = "[Context restored by acp-journal";

/// Whether `title` (an agent's `session_info_update` title) was made of a re-prime: an agent that
/// titles a session after its first prompt's text names a re-primed session this (whole, or
/// cut short, `…` or `...` marking the cut). Such a title is not the session's.
pub fn is_reprime_title(title: &str) -> bool {
    let title = title.trim_start();
    if title.starts_with(REPRIME_OPENING) {
        return true;
    }
    let cut = title
        .trim_end()
        .trim_end_matches('…')
        .trim_end_matches("...")
        .trim_end();
    cut.len() >= "[Context".len() && REPRIME_OPENING.starts_with(cut)
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

    #[test]
    fn a_title_made_of_the_reprime_is_told_whole_or_cut() {
        let block = "[Context restored by acp-journal: this conversation was interrupted and resumed in a new session. Earlier turns:] User: hi";
        assert!(is_reprime_title(block));
        assert!(is_reprime_title("  [Context restored by acp-j…"));
        assert!(is_reprime_title("[Context restored..."));
        assert!(!is_reprime_title("Fix the parser"));
        assert!(!is_reprime_title("[Con…"));
        assert!(!is_reprime_title("[Context] of the bug"));
    }

    #[test]
    fn an_agent_is_its_name_whatever_its_version_else_its_command() {
        let init = |name: &str, version: &str| serde_json::json!({"result": {"agentInfo": {"name": name, "title": "T", "version": version}}});
        let a = AgentId::of(
            Some(&init("claude-agent-acp", "0.101.0")),
            Some("npx a".into()),
        );
        let b = AgentId::of(
            Some(&init("claude-agent-acp", "0.102.0")),
            Some("/bin/b".into()),
        );
        let c = AgentId::of(Some(&init("codex-acp", "2.6.0")), Some("npx a".into()));
        assert!(a.is(&b) && !a.is(&c));
        assert_eq!(a.version.as_deref(), Some("0.101.0"));
        let unnamed = AgentId::of(None, Some("npx a".into()));
        assert!(unnamed.is(&a), "the command, when one has no name");
        assert!(!unnamed.is(&AgentId::of(None, Some("npx b".into()))));
    }
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
