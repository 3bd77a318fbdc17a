//! The client terminals of a replayed history.
//!
//! Tool call content can embed a client terminal (`{"type":"terminal","terminalId":"…"}`); after
//! a restart that terminal no longer exists and editors drop the update. In `tool_call` and
//! `tool_call_update` updates each such item is replayed as text content
//! (`{"type":"content","content":{"type":"text","text":"…"}}`, the item's own `_meta` is not
//! kept); the other items and the rest of the line stay byte for byte (only the `content` array
//! is rewritten, items separated by bare commas; a line the fast path cannot peek is
//! re-serialized instead). This holds wherever a [`super::Replay`] goes: loads served by the proxy and
//! the histories `replay` plays to a client. The first pass learns each terminal's
//! output from the client's answers to the agent's `terminal/output` (`{output, truncated,
//! exitStatus?}`) and `terminal/wait_for_exit` (`{exitCode, signal}`) requests, paired by
//! JSON-RPC id (the agent's ids: `1` and `"1"` differ). The text is the latest recorded output
//! (ACP output is cumulative), then the exit status on a line of its own:
//!
//! ```text
//! [earlier output truncated]      <- when the client or the replay cut the output
//! …the output…
//! [exit status 1]                 <- or [killed by signal SIGTERM], or [exited]
//! ```
//!
//! `[terminal output was not recorded]` stands for an output never answered (an exit status may
//! follow), `[no output]` for an empty one. Bounds: the last [`TERMINAL_OUTPUT_LIMIT`] bytes of
//! output per terminal, at most [`TERMINAL_LIMIT`] terminals (once more were seen, a terminal
//! without output replays as `[terminal output was not kept]`), and at most
//! [`TERMINAL_ASKS_LIMIT`] requests awaiting an answer (the oldest are forgotten), so the first
//! pass keeps at most 8 MiB of output whatever the session's length.

use std::collections::VecDeque;

use bytes::Bytes;
use serde_json::{Value, json};

use super::super::vocab::HashMap;
use crate::wire::Side;

/// Output kept per terminal (the latest bytes).
pub const TERMINAL_OUTPUT_LIMIT: usize = 64 * 1024;
/// Terminals whose output a replay keeps.
pub const TERMINAL_LIMIT: usize = 128;
/// Agent terminal requests awaiting the client's answer (the oldest are forgotten).
pub const TERMINAL_ASKS_LIMIT: usize = 64;

/// What the first pass learned of one client terminal.
#[derive(Default)]
struct Terminal {
    /// The latest recorded output (its last [`TERMINAL_OUTPUT_LIMIT`] bytes).
    output: Option<String>,
    /// The client or the replay cut the beginning of `output`.
    truncated: bool,
    /// `[exit status N]`, `[killed by signal S]` or `[exited]`.
    exit: Option<String>,
}

/// An agent request for a terminal's output or exit, awaiting the client's answer.
struct TerminalAsk {
    /// The request's id as compact JSON.
    id: String,
    terminal: String,
    /// `terminal/output` (else `terminal/wait_for_exit`).
    output: bool,
}

/// What a replay's first pass learned of the client's terminals, and their replacement in
/// the second: the component [`super::Replay`] holds, bounded as the module says.
#[derive(Default)]
pub(super) struct Terminals {
    /// By terminal ID.
    known: HashMap<String, Terminal>,
    /// More than [`TERMINAL_LIMIT`] terminals were seen: the rest were not kept.
    dropped: bool,
    /// The agent's requests still waiting for the client's answer.
    asks: VecDeque<TerminalAsk>,
}

/// A terminal's exit status as replayed: `[exit status N]`, `[killed by signal S]` or `[exited]`.
fn exit_text(code: &Value, signal: &Value) -> String {
    match (signal.as_str(), code) {
        (Some(signal), _) => format!("[killed by signal {signal}]"),
        (None, Value::Number(code)) => format!("[exit status {code}]"),
        _ => "[exited]".to_string(),
    }
}

impl Terminals {
    /// Requests wait for the client's answer (the first pass must see answers).
    pub(super) fn awaits_answers(&self) -> bool {
        !self.asks.is_empty()
    }

    /// First pass: an agent terminal request, or the client's answer to one.
    pub(super) fn observe(&mut self, from: Side, line: &[u8]) {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Params<'a> {
            #[serde(borrow)]
            terminal_id: Option<std::borrow::Cow<'a, str>>,
        }
        #[derive(serde::Deserialize)]
        struct Message<'a> {
            #[serde(borrow)]
            id: Option<&'a serde_json::value::RawValue>,
            #[serde(borrow)]
            method: Option<std::borrow::Cow<'a, str>>,
            #[serde(borrow)]
            params: Option<Params<'a>>,
            #[serde(borrow)]
            result: Option<&'a serde_json::value::RawValue>,
        }
        let Ok(msg) = serde_json::from_slice::<Message<'_>>(line) else {
            return;
        };
        let Some(id) = msg
            .id
            .and_then(|id| serde_json::from_str::<Value>(id.get()).ok())
        else {
            return;
        };
        let id = id.to_string();
        match (from, msg.method.as_deref()) {
            (Side::Agent, Some(method @ ("terminal/output" | "terminal/wait_for_exit"))) => {
                let Some(terminal) = msg.params.and_then(|p| p.terminal_id) else {
                    return;
                };
                self.asks.retain(|ask| ask.id != id);
                if self.asks.len() >= TERMINAL_ASKS_LIMIT {
                    self.asks.pop_front();
                }
                self.asks.push_back(TerminalAsk {
                    id,
                    terminal: terminal.into_owned(),
                    output: method == "terminal/output",
                });
            }
            (Side::Client, None) => {
                let Some(at) = self.asks.iter().position(|ask| ask.id == id) else {
                    return;
                };
                let ask = self.asks.remove(at).expect("found");
                if let Some(result) = msg.result {
                    self.learn(ask, result.get());
                }
            }
            _ => {}
        }
    }

    /// First pass: what a `terminal/output` or `terminal/wait_for_exit` result says.
    fn learn(&mut self, ask: TerminalAsk, result: &str) {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Output<'a> {
            #[serde(borrow)]
            output: Option<std::borrow::Cow<'a, str>>,
            truncated: Option<bool>,
            exit_status: Option<Value>,
            #[serde(default)]
            exit_code: Value,
            #[serde(default)]
            signal: Value,
        }
        let Ok(result) = serde_json::from_str::<Output<'_>>(result) else {
            return;
        };
        if !self.known.contains_key(&ask.terminal) && self.known.len() >= TERMINAL_LIMIT {
            self.dropped = true;
            return;
        }
        let terminal = self.known.entry(ask.terminal).or_default();
        if !ask.output {
            terminal.exit = Some(exit_text(&result.exit_code, &result.signal));
        } else if let Some(output) = result.output {
            let mut cut = output.len().saturating_sub(TERMINAL_OUTPUT_LIMIT);
            while !output.is_char_boundary(cut) {
                cut += 1;
            }
            terminal.output = Some(output[cut..].to_string());
            terminal.truncated = cut > 0 || result.truncated == Some(true);
            if let Some(status) = result.exit_status.filter(Value::is_object) {
                terminal.exit = Some(exit_text(&status["exitCode"], &status["signal"]));
            }
        }
    }

    /// The text a terminal is replayed as.
    fn text(&self, id: Option<&str>) -> String {
        let Some(terminal) = id.and_then(|id| self.known.get(id)) else {
            return if self.dropped {
                "[terminal output was not kept]".to_string()
            } else {
                "[terminal output was not recorded]".to_string()
            };
        };
        let mut text = String::new();
        match &terminal.output {
            None => text.push_str("[terminal output was not recorded]"),
            Some(output) => {
                if terminal.truncated {
                    text.push_str("[earlier output truncated]\n");
                }
                text.push_str(output);
            }
        }
        if let Some(exit) = &terminal.exit {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(exit);
        }
        if text.is_empty() {
            text.push_str("[no output]");
        }
        text
    }

    /// The text content item replacing a terminal item.
    fn item(&self, id: Option<&str>) -> Value {
        json!({"type": "content", "content": {"type": "text", "text": self.text(id)}})
    }

    /// A tool call's raw `content` array with its terminal items replaced, the other items kept
    /// byte for byte; `None` if it has none (or is not an array).
    fn content_without_terminals(&self, content: &str) -> Option<String> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Item<'a> {
            #[serde(borrow, rename = "type")]
            kind: Option<std::borrow::Cow<'a, str>>,
            terminal_id: Option<Value>,
        }
        let items: Vec<&serde_json::value::RawValue> = serde_json::from_str(content).ok()?;
        let mut changed = false;
        let mut out = String::with_capacity(content.len() + 64);
        out.push('[');
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            match serde_json::from_str::<Item<'_>>(item.get()) {
                Ok(peek) if peek.kind.as_deref() == Some("terminal") => {
                    changed = true;
                    let id = peek.terminal_id.as_ref().and_then(Value::as_str);
                    out.push_str(&self.item(id).to_string());
                }
                _ => out.push_str(item.get()),
            }
        }
        out.push(']');
        changed.then_some(out)
    }

    /// A recorded tool call line with its terminal items replaced (see the module doc), or
    /// `None` if it names no terminal. `content` is the update's raw `content`, borrowed from
    /// `line` (then only it is rewritten); without it the line is re-serialized.
    pub(super) fn rewrite(
        &self,
        line: &[u8],
        content: Option<&serde_json::value::RawValue>,
    ) -> Option<Bytes> {
        if let Some(content) = content {
            let raw = content.get();
            memchr::memmem::find(raw.as_bytes(), b"\"terminal\"")?;
            let start = (raw.as_ptr() as usize).wrapping_sub(line.as_ptr() as usize);
            let end = start.wrapping_add(raw.len());
            if start <= end && end <= line.len() && &line[start..end] == raw.as_bytes() {
                let items = self.content_without_terminals(raw)?;
                let mut out = Vec::with_capacity(line.len() - raw.len() + items.len() + 1);
                out.extend_from_slice(&line[..start]);
                out.extend_from_slice(items.as_bytes());
                out.extend_from_slice(&line[end..]);
                out.push(b'\n');
                return Some(Bytes::from(out));
            }
        }
        let mut msg: Value = serde_json::from_slice(line).ok()?;
        let items = msg["params"]["update"]["content"].as_array_mut()?;
        let mut changed = false;
        for item in items.iter_mut() {
            if item["type"] == "terminal" {
                *item = self.item(item["terminalId"].as_str());
                changed = true;
            }
        }
        if !changed {
            return None;
        }
        let mut out = serde_json::to_vec(&msg).ok()?;
        out.push(b'\n');
        Some(Bytes::from(out))
    }
}
