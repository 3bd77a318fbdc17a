//! Subagents: child sessions a parent session announces, in the two forms agents send them.
//!
//! - The subagents RFD (schema 1.20, v1 and v2): `subagent_update {sessionId, title?,
//!   description?, state?: {state: running | idle (+ stopReason, usage) | requires_action |
//!   unknown}}` on the parent; the child's own updates arrive under its `sessionId`, with
//!   `session_message` / `session_message_chunk` for what the sessions say to each other.
//! - The earlier draft AIR implements (claude-agent-acp 0.101 sends it to JetBrains AIR):
//!   `subagent_spawned {subagentSessionId, name, task, prompt?}` and `subagent_state_update
//!   {subagentSessionId, state: completed | failed | cancelled | disconnected}`.
//!
//! Pure functions of a parsed `update` object; what each reader does with them is its own.

use std::sync::LazyLock;

use memchr::memmem;
use serde_json::Value;

/// Which form of the subagents protocol an update is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// The subagents RFD: `subagent_update`, `session_message`.
    Rfd,
    /// AIR's earlier draft: `subagent_spawned`, `subagent_state_update`.
    Air,
}

/// A child session's state, as the last update about it says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State<'a> {
    /// Foreground work in progress (`running`).
    Running,
    /// Blocked on the user (`requires_action`).
    RequiresAction,
    /// Its work ended: RFD `idle` (with its `stopReason`, if any).
    Idle(Option<&'a str>),
    /// Its work ended: AIR's `completed`, `failed`, `cancelled` or `disconnected`.
    Ended(&'a str),
    /// Anything else (`unknown`, a future or custom state).
    Other(&'a str),
}

impl<'a> State<'a> {
    fn parse(form: Form, state: &'a Value) -> Option<State<'a>> {
        let name = match form {
            Form::Rfd => state["state"].as_str()?,
            Form::Air => state.as_str()?,
        };
        Some(match (form, name) {
            (Form::Rfd, "running") => State::Running,
            (Form::Rfd, "requires_action") => State::RequiresAction,
            (Form::Rfd, "idle") => State::Idle(state["stopReason"].as_str()),
            (Form::Air, "completed" | "failed" | "cancelled" | "disconnected") => {
                State::Ended(name)
            }
            (_, other) => State::Other(other),
        })
    }

    /// The child's work is over (for now: an RFD child may be given more).
    pub fn is_end(&self) -> bool {
        matches!(self, State::Idle(_) | State::Ended(_))
    }

    /// One word for people: `running`, `waiting for the user`, the stop reason of an idle
    /// child (`end_turn`, `cancelled`…, else `idle`), AIR's state, or the state as sent.
    pub fn word(&self) -> &'a str {
        match self {
            State::Running => "running",
            State::RequiresAction => "waiting for the user",
            State::Idle(reason) => reason.unwrap_or("idle"),
            State::Ended(s) | State::Other(s) => s,
        }
    }

    /// The status of a tool call standing for the child (for clients that do not know
    /// subagents): `in_progress` while it works, `completed` when it ended well, `failed`
    /// when it ended otherwise; `None` when the state says neither.
    pub fn tool_status(&self) -> Option<&'static str> {
        match self {
            State::Running | State::RequiresAction => Some("in_progress"),
            State::Idle(None | Some("end_turn")) | State::Ended("completed") => Some("completed"),
            State::Idle(_) | State::Ended(_) => Some("failed"),
            State::Other(_) => None,
        }
    }
}

/// What one update says about a child session.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChildUpdate<'a> {
    /// The child's session ID.
    pub child: &'a str,
    /// The form it was sent in.
    pub form: Form,
    /// Its title (RFD `title`, AIR `name`), when this update sets one.
    pub title: Option<&'a str>,
    /// What it is for (RFD `description`, AIR `task`), when this update sets one.
    pub description: Option<&'a str>,
    /// Its state, when this update reports one.
    pub state: Option<State<'a>>,
    /// Token usage of its work (an RFD `idle` state's `usage`).
    pub usage: Option<&'a Value>,
}

/// The `sessionUpdate` kinds that speak of a child session on its parent.
pub const CHILD_KINDS: [&str; 3] = [
    "subagent_update",
    "subagent_spawned",
    "subagent_state_update",
];

/// What `update` (a `session/update`'s `params.update`) says about a child session, if it is
/// one of [`CHILD_KINDS`] naming a child.
pub fn child_update(update: &Value) -> Option<ChildUpdate<'_>> {
    let (form, child) = match update["sessionUpdate"].as_str()? {
        "subagent_update" => (Form::Rfd, update["sessionId"].as_str()?),
        "subagent_spawned" | "subagent_state_update" => {
            (Form::Air, update["subagentSessionId"].as_str()?)
        }
        _ => return None,
    };
    let (title, description) = match form {
        Form::Rfd => (update["title"].as_str(), update["description"].as_str()),
        Form::Air => (update["name"].as_str(), update["task"].as_str()),
    };
    Some(ChildUpdate {
        child,
        form,
        title,
        description,
        state: State::parse(form, &update["state"]),
        usage: Some(&update["state"]["usage"]).filter(|u| u.is_object()),
    })
}

/// A line may speak of a child session (a cheap look before parsing it).
pub fn may_name_child(line: &[u8]) -> bool {
    static SUBAGENT: LazyLock<memmem::Finder<'static>> =
        LazyLock::new(|| memmem::Finder::new(b"\"subagent_"));
    SUBAGENT.find(line).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_forms_name_the_child_its_title_and_its_state() {
        let rfd = json!({"sessionUpdate": "subagent_update", "sessionId": "c1", "title": "Explore",
            "description": "explorer", "state": {"state": "idle", "stopReason": "end_turn",
            "usage": {"totalTokens": 30}}});
        let u = child_update(&rfd).unwrap();
        assert_eq!(
            (u.child, u.form, u.title),
            ("c1", Form::Rfd, Some("Explore"))
        );
        assert_eq!(u.state, Some(State::Idle(Some("end_turn"))));
        assert_eq!(u.usage, Some(&json!({"totalTokens": 30})));
        assert_eq!(u.state.unwrap().tool_status(), Some("completed"));

        let air = json!({"sessionUpdate": "subagent_spawned", "subagentSessionId": "c2",
            "name": "Explore", "task": "find it", "capabilities": {}});
        let u = child_update(&air).unwrap();
        assert_eq!(
            (u.child, u.form, u.description),
            ("c2", Form::Air, Some("find it"))
        );
        assert_eq!(u.state, None);
        let ended = json!({"sessionUpdate": "subagent_state_update", "subagentSessionId": "c2",
            "state": "cancelled"});
        let state = child_update(&ended).unwrap().state.unwrap();
        assert!(state.is_end());
        assert_eq!(
            (state.word(), state.tool_status()),
            ("cancelled", Some("failed"))
        );
    }

    #[test]
    fn other_updates_and_odd_shapes_name_no_child() {
        for update in [
            json!({"sessionUpdate": "agent_message_chunk", "sessionId": "x"}),
            json!({"sessionUpdate": "subagent_update", "sessionId": 7}),
            json!({"sessionUpdate": "subagent_spawned"}),
            json!("subagent_update"),
        ] {
            assert_eq!(child_update(&update), None, "{update}");
        }
        let odd = json!({"sessionUpdate": "subagent_update", "sessionId": "c", "state": "idle"});
        assert_eq!(child_update(&odd).unwrap().state, None);
        let custom = json!({"sessionUpdate": "subagent_update", "sessionId": "c",
            "state": {"state": "_paused"}});
        let state = child_update(&custom).unwrap().state.unwrap();
        assert_eq!((state.word(), state.tool_status()), ("_paused", None));
    }
}
