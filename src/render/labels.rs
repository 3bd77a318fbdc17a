//! The short texts the text and HTML renderers both print: a message's direction ([`arrow`]), a
//! config change and a plan on one line ([`config_summary`], [`plan_summary`]), a plan entry's
//! checkbox ([`plan_mark`]), and a timeline event that both tell in words: a load served from
//! the journal ([`replay_note`]), what the proxy did ([`proxy_note`]), the newer update kinds
//! ([`update_note`]).

use serde_json::Value;

use super::timeline_event::Event;
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

/// A load served from the journal, in words.
pub(super) fn replay_note(updates: u64, agent_failed: Option<&str>) -> String {
    let served = format!("loaded from the journal ({updates} updates replayed)");
    match agent_failed {
        Some(failed) => format!("{failed}; {served}"),
        None => served,
    }
}

/// What the proxy did to keep a session alive, or gave its agent, in words (for
/// [`Event::Restarted`], [`Event::HostDropped`], [`Event::Restored`], [`Event::Stalled`],
/// [`Event::Forked`] and [`Event::Offered`]; empty for other events).
pub(super) fn proxy_note(event: &Event<'_>) -> String {
    match event {
        Event::Offered { server } => {
            format!("acp-journal offered the agent the journal's history: MCP server {server}")
        }
        Event::Restarted { code } => {
            format!("the agent exited (status {code}) and acp-journal restarted it")
        }
        Event::HostDropped => {
            "the connection to the host dropped: acp-journal connects again".into()
        }
        Event::Restored {
            how,
            agent_session,
            host,
        } => {
            let on = if *host {
                "the host"
            } else {
                "the restarted agent"
            };
            match agent_session {
                None => format!("restored on {on} ({how})"),
                Some(agent) => format!("restored on {on} ({how}, as agent session {agent})"),
            }
        }
        Event::Stalled { action: "cancel" } => {
            "the agent was silent past --stall-timeout: acp-journal cancelled the prompt".into()
        }
        Event::Stalled { action } => {
            format!("the agent stayed silent after the cancel: acp-journal did `{action}`")
        }
        Event::Forked {
            parent,
            turns,
            message,
        } => {
            let s = if *turns == 1 { "" } else { "s" };
            match message {
                Some(m) => {
                    format!("forked from session {parent} at message {m} ({turns} turn{s} kept)")
                }
                None => format!("forked from session {parent} ({turns} turn{s} kept)"),
            }
        }
        _ => String::new(),
    }
}

/// What happened, in one line, for the events of the newer update kinds
/// ([`Event::Subagent`], [`Event::Message`], [`Event::Task`], [`Event::Compaction`],
/// [`Event::Notice`], [`Event::Usage`], [`Event::PlanRemoved`], [`Event::Terminal`]); empty for
/// other events. Both renderers print it.
pub(super) fn update_note(event: &Event<'_>) -> String {
    match event {
        Event::Subagent {
            title,
            description,
            state,
            seconds: Some(seconds),
            ..
        } => {
            let about = description.map(|d| format!(" ({d})")).unwrap_or_default();
            let state = state.unwrap_or("ended");
            format!("⇠ subagent {title}{about}: {state} ({seconds:.1} s)")
        }
        Event::Subagent {
            title,
            description,
            state,
            ..
        } => {
            let about = description.map(|d| format!(" ({d})")).unwrap_or_default();
            match state {
                Some(state) => format!("⇢ subagent {title}{about}: {state}"),
                None => format!("⇢ subagent {title}{about}"),
            }
        }
        Event::Message { from, to, text } => format!("✉ {from} → {to}: {text}"),
        Event::Task {
            name,
            state,
            detail,
        } => match detail {
            Some(detail) => format!("⧗ task {name}: {state} — {detail}"),
            None => format!("⧗ task {name}: {state}"),
        },
        Event::Compaction { status, summary } if summary.is_empty() => {
            format!("── compaction {status}")
        }
        Event::Compaction { status, summary } => format!("── compaction {status}: {summary}"),
        Event::Notice {
            severity,
            title,
            description,
        } => match description {
            Some(d) => format!("! {severity} notice (not part of the history): {title}: {d}"),
            None => format!("! {severity} notice (not part of the history): {title}"),
        },
        Event::Usage { used, size, cost } => {
            let window = match (used, size) {
                (Some(used), Some(size)) => Some(format!("{used} / {size} tokens")),
                (Some(used), None) => Some(format!("{used} tokens")),
                _ => None,
            };
            let parts: Vec<String> = window.into_iter().chain(cost.clone()).collect();
            format!("── context: {}", parts.join(", "))
        }
        Event::PlanRemoved => "── plan removed".to_string(),
        Event::Terminal { command, exit } => match (command, exit) {
            (Some(command), Some(exit)) => format!("$ {command} ({exit})"),
            (Some(command), None) => format!("$ {command}"),
            (None, Some(exit)) => format!("$ terminal: {exit}"),
            (None, None) => "$ terminal".to_string(),
        },
        _ => String::new(),
    }
}
