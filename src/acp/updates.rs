//! Every `sessionUpdate` kind acp-journal knows, and what it does with each: one table
//! ([`KINDS`]), the source of docs/UPDATES.md and of the replay's classes.
//!
//! Every kind is journaled as it crossed (a child session's with its parent: FORMAT.md) and
//! forwarded untouched; the table says what the readers show of it ([`Kind::shown`]) and what a
//! `session/load` (or v2 `session/resume` with `replayFrom`) served from the journal replays of
//! it ([`Kind::replay`]). A kind not in the table is journaled and forwarded, shown by no
//! reader, and never replayed.
//!
//! The kinds are those of the JSON schema of `agent-client-protocol-schema` 1.20.0 (v1 stable,
//! v1 unstable, v2 draft: `tests/schema/`) and those claude-agent-acp 0.101 sends beyond it
//! (AIR's draft of subagents, its background tasks); `tests/it/schema.rs` checks that none is
//! missing.

#[cfg(test)]
use serde_json::{Value, json};

/// Where a kind comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// ACP v1, stable in schema 1.20.
    V1,
    /// ACP v1, unstable in schema 1.20.
    V1Unstable,
    /// ACP v1 and the v2 draft alike.
    Both,
    /// The ACP v2 draft only.
    V2,
    /// The v2 draft, unstable.
    V2Unstable,
    /// claude-agent-acp's extensions for JetBrains AIR (`_meta.jetbrains.air` capabilities).
    Air,
}

impl Origin {
    /// Its name in docs/UPDATES.md.
    pub fn label(self) -> &'static str {
        match self {
            Origin::V1 => "v1",
            Origin::V1Unstable => "v1 unstable",
            Origin::Both => "v1, v2",
            Origin::V2 => "v2",
            Origin::V2Unstable => "v2 unstable",
            Origin::Air => "claude-agent-acp (AIR)",
        }
    }
}

/// What a client must have declared to be replayed a kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// `clientCapabilities.subagents` (ACP v2: always).
    Subagents,
    /// `clientCapabilities.plan` (ACP v2: always).
    Plan,
    /// `clientCapabilities.session.compaction` (ACP v2: always).
    Compaction,
    /// `clientCapabilities.session.cursors` (unstable).
    Cursors,
    /// `clientCapabilities.session.promptSuggestions` (unstable).
    PromptSuggestions,
    /// AIR's `nativeSubagentSessions`.
    AirSubagents,
    /// AIR's `asyncTasks`.
    AirTasks,
    /// An ACP v2 connection.
    V2,
}

impl Need {
    /// Its name in docs/UPDATES.md.
    pub fn label(self) -> &'static str {
        match self {
            Need::Subagents => "`subagents` (v2: all)",
            Need::Plan => "`plan` (v2: all)",
            Need::Compaction => "`session.compaction` (v2: all)",
            Need::Cursors => "`session.cursors`",
            Need::PromptSuggestions => "`session.promptSuggestions`",
            Need::AirSubagents => "AIR `nativeSubagentSessions`",
            Need::AirTasks => "AIR `asyncTasks`",
            Need::V2 => "ACP v2",
        }
    }
}

/// What a replay from the journal does with a kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replay {
    /// In journal order, as recorded (translated to the client's ACP version), to every client
    /// or to those with the need.
    History(Option<Need>),
    /// A child session's announcement and state: in order, with the child's own updates under
    /// its ID, to a client with the need; to another, the parent's view only: a tool call of
    /// the parent standing for the child (its title, its state, its answer).
    Subagent(Need),
    /// Only the latest (a `session_info_update`'s fields merged), after the history, to every
    /// client or to those with the need.
    Latest(Option<Need>),
    /// One `compaction_update` per compaction, at its first place, with its final status and
    /// whole summary, to a client with `session.compaction`.
    Materialized,
    /// The latest of each cursor, after the history, only when the session comes back on
    /// the agent session that made them (cursor IDs are the agent's), to a client with
    /// `session.cursors`.
    Cursors,
    /// Never (the reason is in [`Kind::note`]).
    Never,
}

/// One kind of `session/update`.
#[derive(Clone, Copy, Debug)]
pub struct Kind {
    /// The `sessionUpdate` value.
    pub name: &'static str,
    /// Where it comes from.
    pub origin: Origin,
    /// What `show`, `export`, `watch` print of it (`None`: nothing, it is state kept aside).
    pub shown: Option<&'static str>,
    /// What a replay does with it.
    pub replay: Replay,
    /// Why, or what else to know (shown in docs/UPDATES.md).
    pub note: &'static str,
}

/// Every kind, in the schema's order (v1, then v2, then claude-agent-acp's).
pub const KINDS: &[Kind] = &[
    Kind {
        name: "user_message_chunk",
        origin: Origin::Both,
        shown: Some("the user's line (`❯`)"),
        replay: Replay::History(None),
        note: "v1 prompts are replayed as these, made from the recorded `session/prompt`",
    },
    Kind {
        name: "agent_message_chunk",
        origin: Origin::Both,
        shown: Some("the agent's paragraph"),
        replay: Replay::History(None),
        note: "v2: a `messageId` is made up when the recording has none",
    },
    Kind {
        name: "agent_thought_chunk",
        origin: Origin::Both,
        shown: Some("a thought paragraph"),
        replay: Replay::History(None),
        note: "",
    },
    Kind {
        name: "tool_call",
        origin: Origin::V1,
        shown: Some("a tool line (`⏺`): kind, title, status, diffs, locations"),
        replay: Replay::History(None),
        note: "client terminals replayed as their recorded output; v2: as `tool_call_update`",
    },
    Kind {
        name: "tool_call_update",
        origin: Origin::Both,
        shown: Some("a tool line with the new status"),
        replay: Replay::History(None),
        note: "calls a crash left open are closed `failed` at the end",
    },
    Kind {
        name: "plan",
        origin: Origin::V1,
        shown: Some("the plan (`[x] a  [>] b`)"),
        replay: Replay::History(None),
        note: "v2: as a `plan_update` of an items plan",
    },
    Kind {
        name: "plan_update",
        origin: Origin::Both,
        shown: Some("the plan"),
        replay: Replay::History(Some(Need::Plan)),
        note: "to a v1 client without `plan`: an items plan as v1's `plan`",
    },
    Kind {
        name: "plan_removed",
        origin: Origin::Both,
        shown: Some("`── plan removed`"),
        replay: Replay::History(Some(Need::Plan)),
        note: "",
    },
    Kind {
        name: "available_commands_update",
        origin: Origin::Both,
        shown: None,
        replay: Replay::Latest(None),
        note: "",
    },
    Kind {
        name: "current_mode_update",
        origin: Origin::V1,
        shown: Some("`── mode → …`"),
        replay: Replay::Latest(None),
        note: "v2 has no modes: not replayed to a v2 client",
    },
    Kind {
        name: "config_option_update",
        origin: Origin::Both,
        shown: Some("`── config: …`"),
        replay: Replay::Latest(None),
        note: "",
    },
    Kind {
        name: "session_info_update",
        origin: Origin::Both,
        shown: Some("`── title: …`"),
        replay: Replay::Latest(None),
        note: "its fields merged; titles also go to the catalog",
    },
    Kind {
        name: "usage_update",
        origin: Origin::Both,
        shown: Some("`── context: used / size tokens, cost`"),
        replay: Replay::Latest(None),
        note: "also to the catalog (`list`, `session/list`)",
    },
    Kind {
        name: "notice",
        origin: Origin::Both,
        shown: Some("`! info notice (not part of the history): …`"),
        replay: Replay::Never,
        note: "the schema: not part of session history",
    },
    Kind {
        name: "compaction_update",
        origin: Origin::Both,
        shown: Some("`── compaction <status>`, with its summary when it is whole"),
        replay: Replay::Materialized,
        note: "",
    },
    Kind {
        name: "compaction_summary_chunk",
        origin: Origin::Both,
        shown: Some("the compaction's summary paragraph"),
        replay: Replay::Materialized,
        note: "folded into its compaction's `summary`",
    },
    Kind {
        name: "prompt_suggestions_update",
        origin: Origin::V1Unstable,
        shown: None,
        replay: Replay::Latest(Some(Need::PromptSuggestions)),
        note: "",
    },
    Kind {
        name: "cursor_update",
        origin: Origin::V1Unstable,
        shown: None,
        replay: Replay::Cursors,
        note: "cursor IDs belong to the agent that made them",
    },
    Kind {
        name: "subagent_update",
        origin: Origin::Both,
        shown: Some(
            "`⇢ subagent …` with its state (its end `⇠ …` with its duration); its timeline indented under `┌ title`",
        ),
        replay: Replay::Subagent(Need::Subagents),
        note: "names a child session: journaled with its parent (FORMAT.md)",
    },
    Kind {
        name: "session_message",
        origin: Origin::Both,
        shown: Some("`✉ from → to: …`, once, where it arrived"),
        replay: Replay::Subagent(Need::Subagents),
        note: "collapsed: a child's message to the parent is its tool call's content",
    },
    Kind {
        name: "session_message_chunk",
        origin: Origin::Both,
        shown: Some("the message's paragraph"),
        replay: Replay::Subagent(Need::Subagents),
        note: "collapsed: left out",
    },
    Kind {
        name: "user_message",
        origin: Origin::V2,
        shown: Some("the user's line, unless it echoes the prompt"),
        replay: Replay::History(Some(Need::V2)),
        note: "a v2 prompt replays as one, under the agent's echo's `messageId`",
    },
    Kind {
        name: "agent_message",
        origin: Origin::V2,
        shown: Some("the agent's paragraph, unless its chunks were streamed"),
        replay: Replay::History(Some(Need::V2)),
        note: "",
    },
    Kind {
        name: "agent_thought",
        origin: Origin::V2,
        shown: Some("a thought paragraph, unless streamed"),
        replay: Replay::History(Some(Need::V2)),
        note: "",
    },
    Kind {
        name: "state_update",
        origin: Origin::V2,
        shown: Some("`idle` ends the turn (its stop reason and duration)"),
        replay: Replay::Never,
        note: "the served load sends the current state before its answer",
    },
    Kind {
        name: "tool_call_content_chunk",
        origin: Origin::V2,
        shown: Some("the tool's output paragraph"),
        replay: Replay::History(Some(Need::V2)),
        note: "",
    },
    Kind {
        name: "terminal_update",
        origin: Origin::V2,
        shown: Some("`$ command` and its exit"),
        replay: Replay::History(Some(Need::V2)),
        note: "",
    },
    Kind {
        name: "terminal_output_chunk",
        origin: Origin::V2,
        shown: Some("the terminal's output paragraph"),
        replay: Replay::History(Some(Need::V2)),
        note: "",
    },
    Kind {
        name: "replay_complete",
        origin: Origin::V2,
        shown: None,
        replay: Replay::Never,
        note: "ends the agent's own replay; a replay from the journal ends with its own",
    },
    Kind {
        name: "subagent_spawned",
        origin: Origin::Air,
        shown: Some("`⇢ subagent …`; its timeline indented"),
        replay: Replay::Subagent(Need::AirSubagents),
        note: "names a child session: journaled with its parent",
    },
    Kind {
        name: "subagent_state_update",
        origin: Origin::Air,
        shown: Some("`⇠ subagent …` with its state and duration"),
        replay: Replay::Subagent(Need::AirSubagents),
        note: "",
    },
    Kind {
        name: "async_task_spawned",
        origin: Origin::Air,
        shown: Some("`⧗ task …`"),
        replay: Replay::History(Some(Need::AirTasks)),
        note: "",
    },
    Kind {
        name: "async_task_progress",
        origin: Origin::Air,
        shown: Some("`⧗ task …` with its progress"),
        replay: Replay::History(Some(Need::AirTasks)),
        note: "",
    },
    Kind {
        name: "async_task_state_update",
        origin: Origin::Air,
        shown: Some("`⧗ task …` with its state"),
        replay: Replay::History(Some(Need::AirTasks)),
        note: "",
    },
];

/// The table's entry for `name`.
pub fn kind(name: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.name == name)
}

/// One update of `kind`, as an agent would send it (enough for a reader to read it): the
/// tests of each reader take every kind of the table through it.
#[cfg(test)]
pub(crate) fn sample(kind: &str) -> Value {
    let text = json!({"type": "text", "text": format!("{kind} text")});
    let mut u = match kind {
        "tool_call" | "tool_call_update" => {
            json!({"toolCallId": format!("{kind}-1"), "title": "Read", "status": "completed"})
        }
        "plan" => json!({"entries": [{"content": "a", "priority": "high", "status": "pending"}]}),
        "plan_update" => json!({"plan": {"type": "items", "planId": "p", "entries": []}}),
        "plan_removed" => json!({"planId": "p"}),
        "available_commands_update" => json!({"availableCommands": []}),
        "current_mode_update" => json!({"currentModeId": "code"}),
        "config_option_update" => json!({"configOptions": []}),
        "session_info_update" => json!({"title": "T"}),
        "usage_update" => json!({"used": 1, "size": 2}),
        "notice" => json!({"severity": "info", "title": "N"}),
        "compaction_update" => json!({"compactionId": "k", "status": "completed"}),
        "compaction_summary_chunk" => json!({"compactionId": "k", "content": text}),
        "prompt_suggestions_update" => json!({"suggestions": []}),
        "cursor_update" => {
            json!({"cursorId": "cur", "anchor": {"type": "tool_call", "toolCallId": "x"}})
        }
        "subagent_update" => {
            json!({"sessionId": "child-rfd", "title": "R", "state": {"state": "running"}})
        }
        "subagent_spawned" => {
            json!({"subagentSessionId": "child-air", "name": "A", "task": "t", "capabilities": {}})
        }
        "subagent_state_update" => json!({"subagentSessionId": "child-air", "state": "completed"}),
        "session_message" => {
            json!({"messageId": "m", "senderSessionId": "child-rfd", "recipientSessionId": "S", "content": [text]})
        }
        "session_message_chunk" => json!({"messageId": "m", "content": text}),
        "state_update" => json!({"state": "idle", "stopReason": "end_turn"}),
        "terminal_update" => json!({"terminalId": "term", "command": "ls"}),
        "terminal_output_chunk" => json!({"terminalId": "term", "data": "out"}),
        "tool_call_content_chunk" => {
            json!({"toolCallId": "tool_call-1", "content": {"type": "content", "content": text}})
        }
        "replay_complete" => json!({}),
        "async_task_spawned" => {
            json!({"asyncTaskId": "a1", "name": "build", "taskType": "local_bash", "description": "d", "showInTranscript": true, "canStop": true})
        }
        "async_task_progress" => json!({"asyncTaskId": "a1", "summary": "half"}),
        "async_task_state_update" => json!({"asyncTaskId": "a1", "state": "completed"}),
        "user_message" | "agent_message" | "agent_thought" => {
            json!({"messageId": format!("{kind}-m"), "content": [text]})
        }
        _ => json!({"content": text}),
    };
    u["sessionUpdate"] = json!(kind);
    u
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table as docs/UPDATES.md shows it.
    fn markdown() -> String {
        let mut out = String::from(
            "| `sessionUpdate` | from | shown by the readers | replayed from the journal | note |\n|---|---|---|---|---|\n",
        );
        for k in KINDS {
            let replay = match k.replay {
                Replay::History(None) => "in order".to_string(),
                Replay::History(Some(need)) => format!("in order, to {}", need.label()),
                Replay::Subagent(need) => format!(
                    "in order, the child's updates under its ID, to {}; else the parent's view (a tool call)",
                    need.label()
                ),
                Replay::Latest(None) => "the latest".to_string(),
                Replay::Latest(Some(need)) => format!("the latest, to {}", need.label()),
                Replay::Materialized => {
                    format!("materialized, to {}", Need::Compaction.label())
                }
                Replay::Cursors => format!(
                    "the latest of each, on the same agent session, to {}",
                    Need::Cursors.label()
                ),
                Replay::Never => "never".to_string(),
            };
            out.push_str(&format!(
                "| `{}` | {} | {} | {replay} | {} |\n",
                k.name,
                k.origin.label(),
                k.shown.unwrap_or("not shown"),
                k.note
            ));
        }
        out
    }

    #[test]
    fn docs_updates_md_holds_the_table_as_the_code_has_it() {
        let docs = include_str!("../../docs/UPDATES.md");
        let table = markdown();
        assert!(
            docs.contains(&table),
            "docs/UPDATES.md is not the table; it should contain:\n{table}"
        );
    }

    #[test]
    fn each_kind_is_in_the_table_once() {
        let mut names: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
        assert!(kind("subagent_update").is_some() && kind("nope").is_none());
    }
}
