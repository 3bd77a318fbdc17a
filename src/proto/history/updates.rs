//! What a replay reads of a recorded agent update: the message a record carries, the fields of
//! a `session/update` peeked without building a `Value` (the fast path), how each update kind is
//! replayed ([`Class`]), and which kinds are the conversation a v2 client is replayed.

use serde_json::Value;

use super::super::vocab::ClientSupport;
use crate::journal::format::{Body, Record};
use crate::wire::Side;

/// How an update kind is replayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Class {
    History,
    State,
    Compaction,
    Never,
}

/// How an update kind is replayed to a client with `support`.
pub(super) fn classify(kind: &str, support: ClientSupport) -> Class {
    match kind {
        "user_message_chunk"
        | "agent_message_chunk"
        | "agent_thought_chunk"
        | "tool_call"
        | "tool_call_update"
        | "plan" => Class::History,
        "plan_update" | "plan_removed" if support.plan_operations => Class::History,
        // v2's items plan, as v1's `plan` (see `emit_update`).
        "plan_update" if !support.v2 => Class::History,
        "subagent_update" | "session_message" | "session_message_chunk" if support.subagents => {
            Class::History
        }
        "available_commands_update"
        | "current_mode_update"
        | "config_option_update"
        | "session_info_update"
        | "usage_update" => Class::State,
        "compaction_update" | "compaction_summary_chunk" if support.compaction => Class::Compaction,
        _ => Class::Never,
    }
}

/// Whether an update kind is part of the conversation a v2 client is replayed (messages, tool
/// calls, plans, terminals; v1's `tool_call` and `plan` included, which are translated), as
/// opposed to state (commands, usage, config, title, the state itself) and notices.
pub(super) fn in_conversation(kind: &str) -> bool {
    matches!(
        kind,
        "user_message_chunk"
            | "user_message"
            | "agent_message_chunk"
            | "agent_message"
            | "agent_thought_chunk"
            | "agent_thought"
            | "tool_call"
            | "tool_call_update"
            | "tool_call_content_chunk"
            | "plan"
            | "plan_update"
            | "terminal_update"
            | "terminal_output_chunk"
    )
}

/// The fields of an agent `session/update` a replay needs, peeked without building a `Value`
/// (the common case, so replay stays fast on long sessions).
#[derive(serde::Deserialize)]
pub(super) struct UpdatePeek<'a> {
    #[serde(borrow)]
    pub(super) method: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) params: Option<ParamsPeek<'a>>,
}

#[derive(serde::Deserialize)]
pub(super) struct ParamsPeek<'a> {
    #[serde(borrow)]
    pub(super) update: Option<UpdateFields<'a>>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct UpdateFields<'a> {
    #[serde(borrow)]
    pub(super) session_update: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    pub(super) tool_call_id: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) status: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) content: Option<&'a serde_json::value::RawValue>,
}

/// The message a record carries, and who sent it.
pub(super) fn update_of(record: &Record) -> Option<(Side, Value)> {
    match &record.body {
        Body::Message { from, payload } => serde_json::from_slice(&payload.bytes)
            .ok()
            .map(|v| (*from, v)),
        _ => None,
    }
}
