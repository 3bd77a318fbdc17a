//! What a replay reads of a recorded agent update: the message a record carries, the fields of
//! a `session/update` peeked without building a `Value` (the fast path), how each update kind is
//! replayed ([`Class`], from the table of kinds), and which kinds are the conversation a v2
//! client is replayed.

use serde_json::Value;

use super::super::vocab::ClientSupport;
use crate::acp::updates::{self, Need, Replay};
use crate::journal::format::{Body, Record};
use crate::wire::Side;

/// How an update kind is replayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Class {
    /// In order, as recorded (translated to the client's version).
    History,
    /// The latest only, after the history.
    State,
    /// Materialized, once, at its first place.
    Compaction,
    /// A child's announcement or state the client cannot take: the parent's view of it.
    Collapsed,
    /// A cursor: the latest of each, sent only if the session comes back on the agent session
    /// that made it.
    Cursor,
    /// Not replayed.
    Never,
}

/// How an update kind is replayed to a client with `support`: what the table of kinds says
/// ([`crate::acp::updates::KINDS`]); a kind not in it is never replayed.
pub(super) fn classify(kind: &str, support: ClientSupport) -> Class {
    let Some(k) = updates::kind(kind) else {
        return Class::Never;
    };
    let has = |need: Option<Need>| need.is_none_or(|n| support.has(n));
    match k.replay {
        Replay::History(need) if has(need) => Class::History,
        // v2's items plan, as v1's `plan` (see `emit_update`).
        Replay::History(Some(Need::Plan)) if kind == "plan_update" && !support.v2 => Class::History,
        Replay::Subagent(need) if support.has(need) => Class::History,
        Replay::Subagent(_) => Class::Collapsed,
        Replay::Latest(need) if has(need) => Class::State,
        Replay::Materialized if support.has(Need::Compaction) => Class::Compaction,
        Replay::Cursors if support.has(Need::Cursors) => Class::Cursor,
        Replay::History(_)
        | Replay::Latest(_)
        | Replay::Materialized
        | Replay::Cursors
        | Replay::Never => Class::Never,
    }
}

/// Whether an update kind is part of the conversation a v2 client is replayed (messages, tool
/// calls, plans, terminals, subagents and the messages sessions send each other; v1's
/// `tool_call` and `plan` included, which are translated), as opposed to state (commands,
/// usage, config, title, the state itself) and notices.
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
            | "subagent_update"
            | "session_message"
            | "session_message_chunk"
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
#[serde(rename_all = "camelCase")]
pub(super) struct ParamsPeek<'a> {
    #[serde(borrow)]
    pub(super) session_id: Option<std::borrow::Cow<'a, str>>,
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

impl UpdateFields<'_> {
    /// The text of its `content` block (an `agent_message_chunk`'s), if it has one.
    pub(super) fn text(&self) -> Option<std::borrow::Cow<'_, str>> {
        #[derive(serde::Deserialize)]
        struct Text<'a> {
            #[serde(borrow)]
            text: Option<std::borrow::Cow<'a, str>>,
        }
        let content = self.content?;
        serde_json::from_str::<Text<'_>>(content.get()).ok()?.text
    }
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
