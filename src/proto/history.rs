//! Turning a session's journal into the `session/update` notifications of a `session/load`.
//!
//! Pure: it consumes [`Record`]s (the shell reads them from the store) and produces lines. Two
//! passes over the same records, so memory stays flat in the session's length:
//! 1. [`Replay::observe`] learns what must be known ahead: the final form of each compaction,
//!    and the recorded output of each client terminal (see [Terminals](#terminals)).
//! 2. [`Replay::emit`] produces the replay in journal order: a `user_message_chunk` per content
//!    block of each recorded `session/prompt`; history updates (message and thought chunks, tool
//!    calls, plans) verbatim, terminals aside; each compaction materialized once, at its first position; state
//!    updates (commands, mode, config options, session info, usage) held back, and `notice`
//!    dropped. [`Replay::finish`] then emits the latest state updates and closes the tool calls a
//!    crash left pending as `failed`, and returns what the proxy needs to continue the session.
//!
//! # Terminals
//! Tool call content can embed a client terminal (`{"type":"terminal","terminalId":"…"}`); after
//! a restart that terminal no longer exists and editors drop the update. In `tool_call` and
//! `tool_call_update` updates each such item is replayed as text content
//! (`{"type":"content","content":{"type":"text","text":"…"}}`, the item's own `_meta` is not
//! kept); the other items and the rest of the line stay byte for byte (only the `content` array
//! is rewritten, items separated by bare commas; a line the fast path cannot peek is
//! re-serialized instead). This holds wherever a [`Replay`] goes: loads served by the proxy and
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

use super::{HashMap, HashSet};
use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;
use serde_json::{Value, json};

use crate::journal::Event;
use crate::journal::format::{Body, Record};

use crate::wire::Side;

/// What the current client accepts, beyond the baseline update kinds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientSupport {
    /// `clientCapabilities.session.compaction`.
    pub compaction: bool,
    /// Unstable `clientCapabilities.plan` (`plan_update`, `plan_removed`).
    pub plan_operations: bool,
    /// Unstable `clientCapabilities.subagents`.
    pub subagents: bool,
    /// The connection speaks ACP v2 (the agent answered `protocolVersion: 2`): replays are
    /// shaped for it.
    pub v2: bool,
}

/// How an update kind is replayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    History,
    State,
    Compaction,
    Never,
}

impl ClientSupport {
    /// What a client supports, from the `clientCapabilities` of its `initialize` request.
    pub fn from_capabilities(caps: &Value) -> ClientSupport {
        let present = |v: &Value| !v.is_null();
        ClientSupport {
            compaction: present(&caps["session"]["compaction"]),
            plan_operations: present(&caps["plan"]),
            subagents: present(&caps["subagents"]),
            v2: false,
        }
    }
}

fn classify(kind: &str, support: ClientSupport) -> Class {
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
fn in_conversation(kind: &str) -> bool {
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

/// The end of a replay: what the proxy needs to bring the agent back.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// Prompt turns in the history.
    pub turns: usize,
    /// A bounded transcript of the conversation, for re-priming a fresh agent session.
    pub transcript: String,
    /// The latest mode (`currentModeId`), if the session had modes.
    pub mode: Option<String>,
    /// The latest value of each config option (`configId` → raw JSON value).
    pub config: BTreeMap<String, Value>,
    /// The agent-side session ID of the last run that mapped this session, if any.
    pub agent_session: Option<String>,
    /// The session's working directory as recorded.
    pub cwd: Option<String>,
}

/// One turn of the transcript.
#[derive(Default)]
struct Turn {
    user: String,
    agent: String,
}

/// Cut `text` to (about) its last `n` bytes, at a character boundary; returns the bytes cut.
fn keep_tail(text: &mut String, n: usize) -> usize {
    let mut cut = text.len().saturating_sub(n);
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    text.drain(..cut);
    cut
}

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

/// A replay in progress.
pub struct Replay {
    /// The session is live: tool calls still open stay open (see [`Replay::keep_tools_open`]).
    keep_open: bool,
    session: String,
    support: ClientSupport,
    transcript_limit: usize,
    compactions: HashMap<String, Value>,
    compactions_emitted: HashSet<String>,
    state: BTreeMap<String, Value>,
    open_tools: BTreeMap<String, ()>,
    turns: std::collections::VecDeque<Turn>,
    transcript_bytes: usize,
    summary: Summary,
    user_messages: u64,
    terminals: HashMap<String, Terminal>,
    terminals_dropped: bool,
    terminal_asks: VecDeque<TerminalAsk>,
    /// `_session/steering` requests (user input into the running turn, a vendor extension)
    /// waiting for the agent to take them, by request id: their record's sequence number and
    /// content blocks.
    steering: HashMap<String, (String, Value)>,
    /// The session was recorded under v2 (its agent reported `state_update`s): learnt by the
    /// first pass.
    recorded_v2: bool,
    /// v1, for a session recorded under v2: the tool calls replayed so far (v2 has no
    /// `tool_call`: its first `tool_call_update` of an ID becomes one).
    tools_seen: HashSet<String>,
    /// v2: the last recorded prompt (the `messageId` made up for it, and its content),
    /// replayed as a `user_message` under the `messageId` of the agent's echo of it when one
    /// follows.
    prompt: Option<(String, Value)>,
    /// v2, for a session recorded under v1: the chunk kind being replayed and the `messageId`
    /// given to its run of chunks.
    message: Option<(String, String)>,
    /// The `messageId`s made up for messages recorded without one.
    ids: MadeUpIds,
}

/// The `messageId`s a replay makes up (`acpj-user-12`, `acpj-agent_message-14`): named after
/// the record's sequence number, which counts within one proxy run. A session that went on in
/// several runs (a restart of `serve`, a load in a new proxy) has records with the same
/// numbers, and two messages under one ID would be one message to a client: the runs are told
/// apart by the numbers themselves (they rise within a run; one that does not starts another),
/// and from the second run on an ID carries the run's ordinal (`acpj-user-1.12`). A session of
/// one run keeps the IDs it always had.
#[derive(Debug, Default)]
pub struct MadeUpIds {
    ordinal: u32,
    last: Option<u64>,
}

impl MadeUpIds {
    /// The next record's sequence number (every record, in journal order).
    pub fn see(&mut self, seq: u64) {
        if self.last.is_some_and(|last| seq <= last) {
            self.ordinal += 1;
        }
        self.last = Some(seq);
    }

    /// The ID made up for a `kind` message (`user`, `agent_message`, …) recorded at `seq`.
    pub fn made(&self, kind: &str, seq: u64) -> String {
        match self.ordinal {
            0 => format!("acpj-{kind}-{seq}"),
            n => format!("acpj-{kind}-{n}.{seq}"),
        }
    }
}

/// The fields of an agent `session/update` a replay needs, peeked without building a `Value`
/// (the common case, so replay stays fast on long sessions).
#[derive(serde::Deserialize)]
struct UpdatePeek<'a> {
    #[serde(borrow)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    params: Option<ParamsPeek<'a>>,
}

#[derive(serde::Deserialize)]
struct ParamsPeek<'a> {
    #[serde(borrow)]
    update: Option<UpdateFields<'a>>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct UpdateFields<'a> {
    #[serde(borrow)]
    session_update: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    tool_call_id: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    status: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    content: Option<&'a serde_json::value::RawValue>,
}

/// A terminal's exit status as replayed: `[exit status N]`, `[killed by signal S]` or `[exited]`.
fn exit_text(code: &Value, signal: &Value) -> String {
    match (signal.as_str(), code) {
        (Some(signal), _) => format!("[killed by signal {signal}]"),
        (None, Value::Number(code)) => format!("[exit status {code}]"),
        _ => "[exited]".to_string(),
    }
}

fn update_of(record: &Record) -> Option<(Side, Value)> {
    match &record.body {
        Body::Message { from, payload } => serde_json::from_slice(&payload.bytes)
            .ok()
            .map(|v| (*from, v)),
        _ => None,
    }
}

impl Replay {
    /// A replay of `session` (client-facing ID) for a client with `support`. The transcript kept
    /// for re-priming is bounded by `transcript_limit` bytes (the latest turns are kept).
    pub fn new(session: &str, support: ClientSupport, transcript_limit: usize) -> Replay {
        Replay {
            keep_open: false,
            session: session.to_string(),
            support,
            transcript_limit,
            compactions: HashMap::default(),
            compactions_emitted: Default::default(),
            state: BTreeMap::new(),
            open_tools: BTreeMap::new(),
            turns: Default::default(),
            transcript_bytes: 0,
            summary: Summary::default(),
            user_messages: 0,
            terminals: HashMap::default(),
            terminals_dropped: false,
            terminal_asks: VecDeque::new(),
            steering: HashMap::default(),
            ids: MadeUpIds::default(),
            recorded_v2: false,
            tools_seen: Default::default(),
            prompt: None,
            message: None,
        }
    }

    /// Whether the first pass needs a journal line (the stored record or the bare message): a
    /// fast prefilter for readers that skip records; [`Replay::observe`] takes any record.
    pub fn observes(&self, line: &[u8]) -> bool {
        use memchr::memmem::find;
        find(line, b"\"compactionId\"").is_some()
            || (!self.recorded_v2 && find(line, b"\"state_update\"").is_some())
            || find(line, b"\"terminal/").is_some()
            || (!self.terminal_asks.is_empty()
                && (find(line, b"\"result\"").is_some() || find(line, b"\"error\"").is_some()))
    }

    /// First pass over a record.
    pub fn observe(&mut self, record: &Record) {
        let Body::Message { from, payload } = &record.body else {
            return;
        };
        if !self.observes(&payload.bytes) {
            return;
        }
        if *from == Side::Agent
            && memchr::memmem::find(&payload.bytes, b"\"state_update\"").is_some()
        {
            // Only v2 agents report their state: the session was recorded under v2.
            self.recorded_v2 = true;
        }
        if memchr::memmem::find(&payload.bytes, b"\"compactionId\"").is_none() {
            return self.observe_terminal(*from, &payload.bytes);
        }
        let Some((Side::Agent, msg)) = update_of(record) else {
            return;
        };
        if msg["method"] != "session/update" {
            return;
        }
        let update = &msg["params"]["update"];
        let Some(id) = update["compactionId"].as_str() else {
            return;
        };
        let entry = self
            .compactions
            .entry(id.to_string())
            .or_insert_with(|| json!({"sessionUpdate": "compaction_update", "compactionId": id}));
        match update["sessionUpdate"].as_str() {
            Some("compaction_update") => {
                for (k, v) in update.as_object().into_iter().flatten() {
                    if k != "sessionUpdate" {
                        entry[k] = v.clone();
                    }
                }
            }
            Some("compaction_summary_chunk") => {
                let summary = entry["summary"].as_array().cloned().unwrap_or_default();
                let mut summary = summary;
                summary.push(update["content"].clone());
                entry["summary"] = Value::Array(summary);
            }
            _ => {}
        }
    }

    /// First pass: an agent terminal request, or the client's answer to one.
    fn observe_terminal(&mut self, from: Side, line: &[u8]) {
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
                self.terminal_asks.retain(|ask| ask.id != id);
                if self.terminal_asks.len() >= TERMINAL_ASKS_LIMIT {
                    self.terminal_asks.pop_front();
                }
                self.terminal_asks.push_back(TerminalAsk {
                    id,
                    terminal: terminal.into_owned(),
                    output: method == "terminal/output",
                });
            }
            (Side::Client, None) => {
                let Some(at) = self.terminal_asks.iter().position(|ask| ask.id == id) else {
                    return;
                };
                let ask = self.terminal_asks.remove(at).expect("found");
                if let Some(result) = msg.result {
                    self.learn_terminal(ask, result.get());
                }
            }
            _ => {}
        }
    }

    /// First pass: what a `terminal/output` or `terminal/wait_for_exit` result says.
    fn learn_terminal(&mut self, ask: TerminalAsk, result: &str) {
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
        if !self.terminals.contains_key(&ask.terminal) && self.terminals.len() >= TERMINAL_LIMIT {
            self.terminals_dropped = true;
            return;
        }
        let terminal = self.terminals.entry(ask.terminal).or_default();
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
    fn terminal_text(&self, id: Option<&str>) -> String {
        let Some(terminal) = id.and_then(|id| self.terminals.get(id)) else {
            return if self.terminals_dropped {
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
    fn terminal_item(&self, id: Option<&str>) -> Value {
        json!({"type": "content", "content": {"type": "text", "text": self.terminal_text(id)}})
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
                    out.push_str(&self.terminal_item(id).to_string());
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
    fn without_terminals(
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
                *item = self.terminal_item(item["terminalId"].as_str());
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

    fn notification(&self, update: Value) -> Bytes {
        let msg = json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": self.session, "update": update}});
        let mut line = serde_json::to_vec(&msg).expect("a Value serializes");
        line.push(b'\n');
        Bytes::from(line)
    }

    /// Second pass over a record: append the lines it replays as to `out`.
    pub fn emit(&mut self, record: &Record, out: &mut Vec<Bytes>) {
        self.ids.see(record.seq);
        if self.support.v2 {
            return self.emit_v2(record, out);
        }
        let payload = match &record.body {
            Body::Event(event) => {
                if let Event::SessionMapped { agent_session } = event {
                    self.summary.agent_session = Some(agent_session.clone());
                }
                return;
            }
            Body::Message {
                from: Side::Agent,
                payload,
            } => payload,
            _ => return self.emit_slow(record, out),
        };
        // Fast path: history updates, the bulk of a session.
        // A line the strict peek rejects (a numeric `toolCallId`, say) takes the general path.
        let Ok(peek) = serde_json::from_slice::<UpdatePeek<'_>>(&payload.bytes) else {
            return self.emit_slow(record, out);
        };
        let update = match (peek.method.as_deref(), peek.params.and_then(|p| p.update)) {
            (Some("session/update"), Some(update)) => update,
            _ => return self.emit_slow(record, out),
        };
        let kind = update.session_update.as_ref();
        if classify(kind, self.support) != Class::History {
            return self.emit_slow(record, out);
        }
        match kind {
            "tool_call" | "tool_call_update" => {
                if let Some(id) = update.tool_call_id.as_deref() {
                    let default = if kind == "tool_call" { "pending" } else { "" };
                    self.tool_status(id, update.status.as_deref().unwrap_or(default));
                    if self.recorded_v2
                        && self.tools_seen.insert(id.to_string())
                        && kind == "tool_call_update"
                        && let Ok(mut msg) = serde_json::from_slice::<Value>(&payload.bytes)
                    {
                        // Recorded under v2, where the first upsert creates the call (and
                        // there are no client terminals).
                        msg["params"]["update"]["sessionUpdate"] = json!("tool_call");
                        out.push(self.notification(msg["params"]["update"].take()));
                        return;
                    }
                }
            }
            "plan_update" => return self.emit_slow(record, out),
            "agent_message_chunk" => {
                #[derive(serde::Deserialize)]
                struct Text<'a> {
                    #[serde(borrow)]
                    text: Option<std::borrow::Cow<'a, str>>,
                }
                let text = update
                    .content
                    .and_then(|c| serde_json::from_str::<Text<'_>>(c.get()).ok())
                    .and_then(|t| t.text);
                if let Some(text) = text {
                    self.agent_text(&text);
                }
            }
            _ => {}
        }
        if matches!(kind, "tool_call" | "tool_call_update")
            && let Some(content) = update.content
            && let Some(line) = self.without_terminals(&payload.bytes, Some(content))
        {
            out.push(line);
            return;
        }
        // The recorded line itself, byte for byte.
        let mut line = Vec::with_capacity(payload.bytes.len() + 1);
        line.extend_from_slice(&payload.bytes);
        line.push(b'\n');
        out.push(Bytes::from(line));
    }

    /// Agent text of the current turn, for the transcript.
    fn agent_text(&mut self, text: &str) {
        let Some(turn) = self.turns.back_mut() else {
            return;
        };
        turn.agent.push_str(text);
        self.transcript_bytes += text.len();
        // Only the latest `transcript_limit` bytes can reach the transcript: a long turn keeps
        // at most twice that.
        if turn.agent.len() > 2 * self.transcript_limit {
            self.transcript_bytes -= keep_tail(&mut turn.agent, self.transcript_limit);
        }
    }

    /// A tool call's status, to close the ones a crash left open.
    fn tool_status(&mut self, id: &str, status: &str) {
        match status {
            "completed" | "failed" => {
                self.open_tools.remove(id);
            }
            "pending" | "in_progress" => {
                self.open_tools.insert(id.to_string(), ());
            }
            _ => {}
        }
    }

    /// The replay for an ACP v2 client. A session recorded under v2 replays its messages as
    /// recorded, each prompt as a `user_message` of the client's recorded prompt (under the
    /// `messageId` of the agent's echo of it, which is not replayed); one recorded under v1 is translated: message chunks get a `messageId` (one per
    /// run of chunks), `tool_call` becomes the `tool_call_update` upsert, a `plan` becomes a
    /// `plan_update` of one items plan (`acpj-plan`), and `current_mode_update` (v2 has no
    /// modes) is left out. `state_update`s and
    /// `notice`s are never replayed: the current state follows the replay (the load sends it).
    fn emit_v2(&mut self, record: &Record, out: &mut Vec<Bytes>) {
        let Some((from, msg)) = update_of(record) else {
            if let Body::Event(Event::SessionMapped { agent_session }) = &record.body {
                self.summary.agent_session = Some(agent_session.clone());
            }
            return;
        };
        let update = &msg["params"]["update"];
        let kind = update["sessionUpdate"].as_str().unwrap_or("");
        if from == Side::Agent && msg["method"] == "session/update" {
            if kind == "user_message" && self.prompt.is_some() {
                // The agent's echo of the prompt: the prompt as the client sent it (a re-primed
                // one's echo holds the transcript), under the echo's `messageId`.
                self.user_message(update["messageId"].as_str(), out);
                return;
            }
            // Only the conversation comes after the prompt's message; state updates (commands,
            // usage, the state itself), which may come before the echo, do not.
            if in_conversation(kind) {
                self.user_message(None, out);
            }
        }
        match (from, msg["method"].as_str().unwrap_or("")) {
            (Side::Client, "session/prompt") => {
                self.user_message(None, out);
                self.message = None;
                self.summary.turns += 1;
                let prompt = &msg["params"]["prompt"];
                let mut turn = Turn::default();
                for block in prompt.as_array().into_iter().flatten() {
                    self.user_messages += 1;
                    turn.user
                        .push_str(block["text"].as_str().unwrap_or_default());
                }
                self.push_turn(turn);
                self.prompt = Some((self.ids.made("user", record.seq), prompt.clone()));
            }
            (Side::Agent, "session/update") => self.emit_update_v2(record, kind, update, out),
            _ => self.emit_message(record, from, &msg, out),
        }
    }

    /// The last prompt as a `user_message` (v2), under `id` (else one of its own), if it is
    /// still to be replayed.
    fn user_message(&mut self, id: Option<&str>, out: &mut Vec<Bytes>) {
        if let Some((made, content)) = self.prompt.take() {
            let id = id.map_or(made, str::to_string);
            out.push(self.notification(json!({
                "sessionUpdate": "user_message",
                "messageId": id,
                "content": content,
            })));
        }
    }

    /// One recorded agent update, for a v2 client.
    fn emit_update_v2(
        &mut self,
        record: &Record,
        kind: &str,
        update: &Value,
        out: &mut Vec<Bytes>,
    ) {
        let Body::Message { payload, .. } = &record.body else {
            return;
        };
        let chunk = matches!(
            kind,
            "user_message_chunk" | "agent_message_chunk" | "agent_thought_chunk"
        );
        if !chunk {
            self.message = None;
        }
        if kind == "agent_message_chunk"
            && let Some(text) = update["content"]["text"].as_str()
        {
            self.agent_text(text);
        }
        if let Some(id) = update["toolCallId"].as_str() {
            let default = if kind == "tool_call" { "pending" } else { "" };
            self.tool_status(id, update["status"].as_str().unwrap_or(default));
        }
        let edited = match kind {
            _ if chunk && update.get("messageId").is_none_or(Value::is_null) => {
                let id = match &self.message {
                    Some((k, id)) if k == kind => id.clone(),
                    _ => self.ids.made(kind.trim_end_matches("_chunk"), record.seq),
                };
                self.message = Some((kind.to_string(), id.clone()));
                let mut update = update.clone();
                update["messageId"] = Value::String(id);
                Some(update)
            }
            "tool_call" => {
                let mut update = update.clone();
                update["sessionUpdate"] = json!("tool_call_update");
                Some(update)
            }
            "plan" => Some(json!({
                "sessionUpdate": "plan_update",
                "plan": {"type": "items", "planId": "acpj-plan", "entries": update["entries"]},
            })),
            _ if in_conversation(kind) => None,
            "current_mode_update" => {
                self.summary.mode = update["currentModeId"].as_str().map(str::to_string);
                return;
            }
            _ => {
                if matches!(
                    classify(kind, self.support),
                    Class::State | Class::Compaction
                ) {
                    self.emit_update(record, update, out);
                }
                return;
            }
        };
        match edited {
            Some(update) => out.push(self.notification(update)),
            None => {
                let mut line = payload.bytes.to_vec();
                line.push(b'\n');
                out.push(Bytes::from(line));
            }
        }
    }

    /// Everything but history updates: prompts, setup requests, state updates, responses.
    fn emit_slow(&mut self, record: &Record, out: &mut Vec<Bytes>) {
        if let Some((from, msg)) = update_of(record) {
            self.emit_message(record, from, &msg, out);
        }
    }

    /// [`Replay::emit_slow`] for a record already parsed (`from`, `msg`).
    fn emit_message(&mut self, record: &Record, from: Side, msg: &Value, out: &mut Vec<Bytes>) {
        let method = msg["method"].as_str().unwrap_or("");
        let params = &msg["params"];
        match (from, method) {
            (Side::Client, "session/prompt") => {
                self.summary.turns += 1;
                let mut turn = Turn::default();
                for block in params["prompt"].as_array().into_iter().flatten() {
                    self.user_messages += 1;
                    let id = self.ids.made("user", record.seq);
                    out.push(self.notification(json!({"sessionUpdate": "user_message_chunk", "content": block, "messageId": id})));
                    if let Some(text) = block["text"].as_str() {
                        turn.user.push_str(text);
                    }
                }
                self.push_turn(turn);
            }
            // Bounded: an agent that never answers leaves at most this many waiting.
            (Side::Client, "_session/steering") if self.steering.len() < 64 => {
                self.steering.insert(
                    msg["id"].to_string(),
                    (self.ids.made("user", record.seq), params["prompt"].clone()),
                );
            }
            (Side::Agent, "") if !self.steering.is_empty() => {
                if let Some((id, prompt)) = self.steering.remove(&msg["id"].to_string())
                    && msg.get("result").is_some()
                    && msg["result"]["outcome"] != "promptRequired"
                {
                    self.steered(id, &prompt, out);
                }
                self.learn_state(&msg["result"]);
            }
            (Side::Client, "session/new" | "session/load" | "session/resume") => {
                if let Some(cwd) = params["cwd"].as_str() {
                    self.summary.cwd = Some(cwd.to_string());
                }
            }
            (Side::Client, "session/set_mode") => {
                self.summary.mode = params["modeId"].as_str().map(str::to_string);
            }
            (Side::Client, "session/set_config_option") => {
                if let Some(id) = params["configId"].as_str() {
                    self.summary
                        .config
                        .insert(id.to_string(), params["value"].clone());
                }
            }
            (Side::Agent, "session/update") => self.emit_update(record, &params["update"], out),
            (Side::Agent, _) => self.learn_state(&msg["result"]),
            _ => {}
        }
    }

    /// User input the agent took into its running turn: replayed as the user's, and part of
    /// that turn in the transcript.
    fn steered(&mut self, id: String, prompt: &Value, out: &mut Vec<Bytes>) {
        let mut text = String::new();
        for block in prompt.as_array().into_iter().flatten() {
            self.user_messages += 1;
            out.push(self.notification(
                json!({"sessionUpdate": "user_message_chunk", "content": block, "messageId": id}),
            ));
            if let Some(t) = block["text"].as_str() {
                text.push('\n');
                text.push_str(t);
            }
        }
        if let Some(turn) = self.turns.back_mut() {
            turn.user.push_str(&text);
            self.transcript_bytes += text.len();
        }
    }

    /// Modes and config options from a response (`session/new`, `set_config_option`).
    fn learn_state(&mut self, result: &Value) {
        if let Some(mode) = result["modes"]["currentModeId"].as_str() {
            self.summary.mode = Some(mode.to_string());
        }
        for option in result["configOptions"].as_array().into_iter().flatten() {
            if let Some(id) = option["id"].as_str() {
                self.summary
                    .config
                    .insert(id.to_string(), option["currentValue"].clone());
            }
        }
    }

    fn emit_update(&mut self, record: &Record, update: &Value, out: &mut Vec<Bytes>) {
        let kind = update["sessionUpdate"].as_str().unwrap_or("");
        match classify(kind, self.support) {
            Class::History
                if kind == "plan_update"
                    && !self.support.plan_operations
                    && update["plan"]["type"] == "items" =>
            {
                // Recorded under v2: an items plan is v1's `plan`.
                let plan = json!({"sessionUpdate": "plan", "entries": update["plan"]["entries"]});
                out.push(self.notification(plan));
            }
            Class::History => {
                // Only odd-shaped updates the fast path could not peek get here: replay as is.
                if let Body::Message { payload, .. } = &record.body {
                    // Terminal items are replaced (the line is then re-serialized).
                    let names_terminal = matches!(kind, "tool_call" | "tool_call_update")
                        && update["content"]
                            .as_array()
                            .is_some_and(|items| items.iter().any(|i| i["type"] == "terminal"));
                    if names_terminal
                        && let Some(line) = self.without_terminals(&payload.bytes, None)
                    {
                        out.push(line);
                        return;
                    }
                    let mut line = payload.bytes.to_vec();
                    line.push(b'\n');
                    out.push(Bytes::from(line));
                }
            }
            Class::State => {
                if kind == "session_info_update" {
                    let merged = self
                        .state
                        .entry(kind.to_string())
                        .or_insert_with(|| json!({}));
                    for (k, v) in update.as_object().into_iter().flatten() {
                        merged[k] = v.clone();
                    }
                } else {
                    self.state.insert(kind.to_string(), update.clone());
                }
                match kind {
                    "current_mode_update" => {
                        self.summary.mode = update["currentModeId"].as_str().map(str::to_string)
                    }
                    "config_option_update" => self.learn_state(update),
                    _ => {}
                }
            }
            Class::Compaction => {
                if let Some(id) = update["compactionId"].as_str()
                    && self.compactions_emitted.insert(id.to_string())
                    && let Some(done) = self.compactions.get(id).cloned()
                {
                    out.push(self.notification(done));
                }
            }
            Class::Never => {}
        }
    }

    fn push_turn(&mut self, turn: Turn) {
        self.transcript_bytes += turn.user.len();
        self.turns.push_back(turn);
        while self.transcript_bytes > self.transcript_limit && self.turns.len() > 1 {
            let old = self.turns.pop_front().expect("len > 1");
            self.transcript_bytes -= old.user.len() + old.agent.len();
        }
    }

    /// The session is live (a client joins it while it runs): tool calls still open at the
    /// end of the records are not reported failed, since their updates follow live.
    pub fn keep_tools_open(&mut self) {
        self.keep_open = true;
    }

    /// End of the records: append the latest state updates and `failed` updates for tool calls
    /// left open, and return the summary.
    pub fn finish(mut self, out: &mut Vec<Bytes>) -> Summary {
        self.user_message(None, out);
        for (_, update) in std::mem::take(&mut self.state) {
            out.push(self.notification(update));
        }
        if self.keep_open {
            self.open_tools.clear();
        }
        for id in std::mem::take(&mut self.open_tools).into_keys() {
            out.push(self.notification(
                json!({"sessionUpdate": "tool_call_update", "toolCallId": id, "status": "failed"}),
            ));
        }
        let mut transcript = String::new();
        for turn in &self.turns {
            transcript.push_str("User: ");
            transcript.push_str(turn.user.trim());
            transcript.push_str("\nAgent: ");
            transcript.push_str(turn.agent.trim());
            transcript.push('\n');
        }
        if transcript.len() > self.transcript_limit {
            let mut cut = transcript.len() - self.transcript_limit;
            while !transcript.is_char_boundary(cut) {
                cut += 1;
            }
            transcript = format!("…{}", &transcript[cut..]);
        }
        self.summary.transcript = transcript;
        self.summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::format::Payload;

    fn rec(seq: u64, from: Side, line: &str) -> Record {
        Record {
            seq,
            unix_us: 0,
            mono_us: seq,
            body: Body::Message {
                from,
                payload: Payload::from_line(Bytes::from(line.to_string())),
            },
        }
    }

    fn update(seq: u64, u: &str) -> Record {
        rec(
            seq,
            Side::Agent,
            &format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"S","update":{u}}}}}"#
            ),
        )
    }

    fn replay(records: &[Record], support: ClientSupport) -> (Vec<Value>, Summary) {
        let mut r = Replay::new("S", support, 10_000);
        for rec in records {
            r.observe(rec);
        }
        let mut out = vec![];
        for rec in records {
            r.emit(rec, &mut out);
        }
        let summary = r.finish(&mut out);
        (
            out.iter()
                .map(|l| serde_json::from_slice(l).unwrap())
                .collect(),
            summary,
        )
    }

    #[test]
    fn made_up_message_ids_stay_apart_across_the_runs_of_a_session() {
        // Two runs of one session: each numbers its records from where its proxy started, so
        // both have a prompt at 3 and a chunk at 4.
        let run = |text: &str| {
            [
                rec(
                    3,
                    Side::Client,
                    &format!(
                        r#"{{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{{"sessionId":"S","prompt":[{{"type":"text","text":"{text}"}}]}}}}"#
                    ),
                ),
                update(
                    4,
                    r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"ok"}}"#,
                ),
            ]
        };
        let records: Vec<Record> = run("first").into_iter().chain(run("second")).collect();
        for support in [
            ClientSupport::default(),
            ClientSupport {
                v2: true,
                ..Default::default()
            },
        ] {
            let (lines, _) = replay(&records, support);
            let ids: Vec<&str> = lines
                .iter()
                .filter_map(|l| l["params"]["update"]["messageId"].as_str())
                .collect();
            // v1 chunks without an ID pass as recorded; v2 needs one for each message.
            let expected: &[&str] = match support.v2 {
                false => &["acpj-user-3", "acpj-user-1.3"],
                true => &[
                    "acpj-user-3",
                    "acpj-agent_message-4",
                    "acpj-user-1.3",
                    "acpj-agent_message-1.4",
                ],
            };
            assert_eq!(ids, expected, "v2: {}", support.v2);
        }
    }

    fn kinds(lines: &[Value]) -> Vec<String> {
        lines
            .iter()
            .map(|l| {
                l["params"]["update"]["sessionUpdate"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    }

    #[test]
    fn steering_the_agent_took_is_replayed_as_the_users_and_joins_the_transcript() {
        let records = vec![
            rec(
                0,
                Side::Client,
                r#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"go"}]}}"#,
            ),
            rec(
                1,
                Side::Client,
                r#"{"jsonrpc":"2.0","id":2,"method":"_session/steering","params":{"sessionId":"S","prompt":[{"type":"text","text":"use tabs"}]}}"#,
            ),
            rec(2, Side::Agent, r#"{"jsonrpc":"2.0","id":2,"result":{}}"#),
            update(
                3,
                r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"ok"}}"#,
            ),
            rec(
                4,
                Side::Client,
                r#"{"jsonrpc":"2.0","id":3,"method":"_session/steering","params":{"sessionId":"S","prompt":[{"type":"text","text":"refused"}]}}"#,
            ),
            rec(
                5,
                Side::Agent,
                r#"{"jsonrpc":"2.0","id":3,"result":{"outcome":"promptRequired"}}"#,
            ),
        ];
        let (lines, summary) = replay(&records, ClientSupport::default());
        let users: Vec<&str> = lines
            .iter()
            .filter(|l| l["params"]["update"]["sessionUpdate"] == "user_message_chunk")
            .map(|l| l["params"]["update"]["content"]["text"].as_str().unwrap())
            .collect();
        assert_eq!(users, ["go", "use tabs"]);
        assert!(
            summary.transcript.contains("User: go\nuse tabs"),
            "{}",
            summary.transcript
        );
        assert!(!summary.transcript.contains("refused"));
    }

    #[test]
    fn history_in_order_state_collapsed_notices_dropped_tools_closed() {
        let records = vec![
            rec(
                0,
                Side::Client,
                r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}"#,
            ),
            update(
                1,
                r#"{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"a","description":"x"}]}"#,
            ),
            rec(
                2,
                Side::Client,
                r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"hi"},{"type":"resource_link","uri":"file:///a","name":"a"}]}}"#,
            ),
            update(
                3,
                r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello"}}"#,
            ),
            update(
                4,
                r#"{"sessionUpdate":"notice","severity":"info","title":"x"}"#,
            ),
            update(
                5,
                r#"{"sessionUpdate":"tool_call","toolCallId":"t1","title":"read"}"#,
            ),
            update(
                6,
                r#"{"sessionUpdate":"tool_call","toolCallId":"t2","title":"edit","status":"in_progress"}"#,
            ),
            update(
                7,
                r#"{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed"}"#,
            ),
            update(
                8,
                r#"{"sessionUpdate":"available_commands_update","availableCommands":[]}"#,
            ),
            update(
                9,
                r#"{"sessionUpdate":"session_info_update","title":"First"}"#,
            ),
            update(
                10,
                r#"{"sessionUpdate":"session_info_update","updatedAt":"2026-11-21T00:00:00Z"}"#,
            ),
            update(
                11,
                r#"{"sessionUpdate":"current_mode_update","currentModeId":"code"}"#,
            ),
        ];
        let (lines, summary) = replay(&records, ClientSupport::default());
        assert_eq!(
            kinds(&lines),
            [
                "user_message_chunk",
                "user_message_chunk",
                "agent_message_chunk",
                "tool_call",
                "tool_call",
                "tool_call_update",
                "available_commands_update",
                "current_mode_update",
                "session_info_update",
                "tool_call_update"
            ]
        );
        assert_eq!(lines[0]["params"]["update"]["content"]["text"], "hi");
        assert_eq!(lines[6]["params"]["update"]["availableCommands"], json!([]));
        assert_eq!(lines[8]["params"]["update"]["title"], "First");
        assert_eq!(
            lines[8]["params"]["update"]["updatedAt"],
            "2026-11-21T00:00:00Z"
        );
        assert_eq!(
            lines[9]["params"]["update"],
            json!({"sessionUpdate":"tool_call_update","toolCallId":"t2","status":"failed"})
        );
        assert_eq!(summary.turns, 1);
        assert_eq!(summary.mode.as_deref(), Some("code"));
        assert_eq!(summary.cwd.as_deref(), Some("/w"));
        assert_eq!(summary.transcript, "User: hi\nAgent: hello\n");
    }

    #[test]
    fn recorded_history_lines_are_replayed_byte_for_byte() {
        let line = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"\u00e9"},"_meta":{"x":1}}}}"#;
        let mut r = Replay::new("S", ClientSupport::default(), 100);
        let mut out = vec![];
        r.emit(&rec(0, Side::Agent, line), &mut out);
        assert_eq!(out[0], format!("{line}\n"));
    }

    #[test]
    fn compaction_is_materialized_at_its_first_position_only_for_clients_that_support_it() {
        let records = vec![
            update(
                1,
                r#"{"sessionUpdate":"compaction_update","compactionId":"c","status":"in_progress"}"#,
            ),
            update(
                2,
                r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}"#,
            ),
            update(
                3,
                r#"{"sessionUpdate":"compaction_summary_chunk","compactionId":"c","content":{"type":"text","text":"sum"}}"#,
            ),
            update(
                4,
                r#"{"sessionUpdate":"compaction_update","compactionId":"c","status":"completed"}"#,
            ),
        ];
        let (lines, _) = replay(
            &records,
            ClientSupport {
                compaction: true,
                ..Default::default()
            },
        );
        assert_eq!(kinds(&lines), ["compaction_update", "agent_message_chunk"]);
        assert_eq!(
            lines[0]["params"]["update"],
            json!({"sessionUpdate":"compaction_update","compactionId":"c","status":"completed","summary":[{"type":"text","text":"sum"}]})
        );
        let (lines, _) = replay(&records, ClientSupport::default());
        assert_eq!(kinds(&lines), ["agent_message_chunk"]);
    }

    #[test]
    fn the_transcript_is_bounded_to_the_latest_turns() {
        let mut records = vec![];
        for i in 0..100 {
            records.push(rec(i * 2, Side::Client, &format!(r#"{{"method":"session/prompt","id":{i},"params":{{"sessionId":"S","prompt":[{{"type":"text","text":"question {i}"}}]}}}}"#)));
            records.push(update(i * 2 + 1, &format!(r#"{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"answer {i}"}}}}"#)));
        }
        let mut r = Replay::new("S", ClientSupport::default(), 200);
        let mut out = vec![];
        for rec in &records {
            r.emit(rec, &mut out);
        }
        let summary = r.finish(&mut out);
        assert!(
            summary.transcript.len() <= 210,
            "{}",
            summary.transcript.len()
        );
        assert!(
            summary
                .transcript
                .ends_with("User: question 99\nAgent: answer 99\n")
        );
        assert_eq!(summary.turns, 100);
    }

    #[test]
    fn a_long_turn_keeps_only_what_its_transcript_can_hold() {
        let limit = 1000;
        let mut records = vec![rec(
            0,
            Side::Client,
            r#"{"method":"session/prompt","id":1,"params":{"sessionId":"S","prompt":[{"type":"text","text":"tell me everything"}]}}"#,
        )];
        // 2 MB of answer in 10 000 chunks, multi-byte characters included, the last one marked.
        for i in 1..=10_000u64 {
            let text = if i == 10_000 {
                "THE END".to_string()
            } else {
                format!("é{i:0>198}")
            };
            records.push(update(i, &format!(r#"{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"{text}"}}}}"#)));
        }
        let mut r = Replay::new("S", ClientSupport::default(), limit);
        let mut out = vec![];
        for rec in &records {
            r.emit(rec, &mut out);
            let held: usize = r.turns.iter().map(|t| t.user.len() + t.agent.len()).sum();
            assert!(
                held <= 2 * limit + 200,
                "the replay holds {held} bytes of turns"
            );
            assert_eq!(held, r.transcript_bytes);
        }
        let summary = r.finish(&mut out);
        assert!(
            summary.transcript.starts_with('…'),
            "{}",
            summary.transcript
        );
        assert!(summary.transcript.ends_with("THE END\n"));
        assert!(summary.transcript.len() <= limit + '…'.len_utf8());
    }

    fn terminal_records(output_result: &str) -> Vec<Record> {
        vec![
            update(
                1,
                r#"{"sessionUpdate":"tool_call","toolCallId":"t1","title":"make","kind":"execute","status":"in_progress","content":[{"type":"terminal","terminalId":"term-1"}],"_meta":{"x":1}}"#,
            ),
            rec(
                2,
                Side::Agent,
                r#"{"jsonrpc":"2.0","id":5,"method":"terminal/output","params":{"sessionId":"S","terminalId":"term-1"}}"#,
            ),
            rec(
                3,
                Side::Client,
                &format!(r#"{{"jsonrpc":"2.0","id":5,"result":{output_result}}}"#),
            ),
            rec(
                4,
                Side::Agent,
                r#"{"jsonrpc":"2.0","id":6,"method":"terminal/wait_for_exit","params":{"sessionId":"S","terminalId":"term-1"}}"#,
            ),
            rec(
                5,
                Side::Client,
                r#"{"jsonrpc":"2.0","id":6,"result":{"exitCode":1,"signal":null}}"#,
            ),
            update(
                6,
                r#"{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"failed","content":[{"type":"terminal","terminalId":"term-1"}]}"#,
            ),
        ]
    }

    fn raw_lines(records: &[Record]) -> Vec<String> {
        let mut r = Replay::new("S", ClientSupport::default(), 10_000);
        for rec in records {
            if let Body::Message { payload, .. } = &rec.body
                && r.observes(&payload.bytes)
            {
                r.observe(rec);
            }
        }
        let mut out = vec![];
        for rec in records {
            r.emit(rec, &mut out);
        }
        r.finish(&mut out);
        out.iter()
            .map(|l| String::from_utf8(l.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn a_terminal_is_replayed_as_its_recorded_output_and_exit_status() {
        let records = terminal_records(r#"{"output":"building\nerror: x\n","truncated":false}"#);
        let lines = raw_lines(&records);
        let text = r#"[{"type":"content","content":{"type":"text","text":"building\nerror: x\n[exit status 1]"}}]"#;
        assert_eq!(
            lines,
            [
                format!(
                    r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"S","update":{{"sessionUpdate":"tool_call","toolCallId":"t1","title":"make","kind":"execute","status":"in_progress","content":{text},"_meta":{{"x":1}}}}}}}}"#
                ) + "\n",
                format!(
                    r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"S","update":{{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"failed","content":{text}}}}}}}"#
                ) + "\n",
            ]
        );
        // The exit status of a `terminal/output` answer counts too, and a signal is named.
        let records = terminal_records(
            r#"{"output":"","truncated":false,"exitStatus":{"exitCode":null,"signal":"SIGTERM"}}"#,
        );
        let (lines, _) = replay(&records[..4], ClientSupport::default());
        assert_eq!(
            lines[0]["params"]["update"]["content"][0]["content"]["text"],
            "[killed by signal SIGTERM]"
        );
    }

    #[test]
    fn a_terminal_without_recorded_output_says_so() {
        let records = terminal_records(r#"{"output":"x","truncated":false}"#);
        let (lines, _) = replay(&records[..1], ClientSupport::default());
        assert_eq!(
            lines[0]["params"]["update"]["content"],
            json!([{"type":"content","content":{"type":"text","text":"[terminal output was not recorded]"}}])
        );
        // An exit status without output: both are said.
        let mut records = terminal_records(r#"{"output":"x","truncated":false}"#);
        records.drain(1..3);
        let (lines, _) = replay(&records, ClientSupport::default());
        assert_eq!(
            lines[1]["params"]["update"]["content"][0]["content"]["text"],
            "[terminal output was not recorded]\n[exit status 1]"
        );
        // An unanswered request, an error answer: still not recorded.
        let records = vec![
            update(
                1,
                r#"{"sessionUpdate":"tool_call","toolCallId":"t","title":"x","content":[{"type":"terminal","terminalId":"a"}]}"#,
            ),
            rec(
                2,
                Side::Agent,
                r#"{"jsonrpc":"2.0","id":1,"method":"terminal/output","params":{"sessionId":"S","terminalId":"a"}}"#,
            ),
            rec(
                3,
                Side::Client,
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Terminal with id not found"}}"#,
            ),
        ];
        let (lines, _) = replay(&records, ClientSupport::default());
        assert_eq!(
            lines[0]["params"]["update"]["content"][0]["content"]["text"],
            "[terminal output was not recorded]"
        );
    }

    #[test]
    fn mixed_content_keeps_its_other_items_byte_for_byte() {
        let diff = r#"{"type":"diff","path":"/w/a.rs","oldText":"a\u00e9","newText":"b","_meta":{"terminal":1}}"#;
        let text =
            r#"{"type": "content", "content": {"type": "text", "text": "see \"terminal\""}}"#;
        let records = vec![update(
            1,
            &format!(
                r#"{{"sessionUpdate":"tool_call_update","toolCallId":"t1","content":[{diff}, {{"type":"terminal","terminalId":"gone"}}, {text}],"rawOutput":{{"terminalId":"gone"}}}}"#
            ),
        )];
        let lines = raw_lines(&records);
        assert_eq!(
            lines,
            [format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"S","update":{{"sessionUpdate":"tool_call_update","toolCallId":"t1","content":[{diff},{{"type":"content","content":{{"type":"text","text":"[terminal output was not recorded]"}}}},{text}],"rawOutput":{{"terminalId":"gone"}}}}}}}}"#
            ) + "\n"]
        );
        // Content without a terminal item is left alone, even if it says "terminal".
        let line = format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"S","update":{{"sessionUpdate":"tool_call_update","toolCallId":"t1","content":[{diff}, {text}]}}}}}}"#
        );
        assert_eq!(raw_lines(&[rec(1, Side::Agent, &line)]), [line + "\n"]);
    }

    #[test]
    fn answers_are_paired_by_id_and_1_is_not_the_string_1() {
        let ask = |seq, id: &str, terminal: &str| {
            rec(
                seq,
                Side::Agent,
                &format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"terminal/output","params":{{"sessionId":"S","terminalId":"{terminal}"}}}}"#
                ),
            )
        };
        let answer = |seq, id: &str, output: &str| {
            rec(
                seq,
                Side::Client,
                &format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"output":"{output}","truncated":false}}}}"#
                ),
            )
        };
        let records = vec![
            update(
                1,
                r#"{"sessionUpdate":"tool_call","toolCallId":"t","title":"x","status":"completed","content":[{"type":"terminal","terminalId":"a"},{"type":"terminal","terminalId":"b"}]}"#,
            ),
            ask(2, "1", "a"),
            ask(3, r#""1""#, "b"),
            // The client's own request 1 and the agent's answer to it are not terminal answers.
            rec(
                4,
                Side::Client,
                r#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"S","prompt":[]}}"#,
            ),
            rec(
                5,
                Side::Agent,
                r#"{"jsonrpc":"2.0","id":1,"result":{"output":"wrong","truncated":false}}"#,
            ),
            answer(6, r#""1""#, "of b"),
            answer(7, "1", "of a"),
            // Output is cumulative: the latest answer wins.
            ask(8, "1", "a"),
            answer(9, "1", "of a, more"),
        ];
        let (lines, _) = replay(&records, ClientSupport::default());
        let content = &lines[0]["params"]["update"]["content"];
        assert_eq!(content[0]["content"]["text"], "of a, more");
        assert_eq!(content[1]["content"]["text"], "of b");
        assert!(!lines[0].to_string().contains("terminal\""));
    }

    #[test]
    fn output_over_the_bound_is_cut_from_the_front() {
        let output = format!(
            "{}é{}",
            "a".repeat(10),
            "b".repeat(TERMINAL_OUTPUT_LIMIT - 1)
        );
        let records = terminal_records(&json!({"output": output, "truncated": false}).to_string());
        let (lines, _) = replay(&records[..3], ClientSupport::default());
        let text = lines[0]["params"]["update"]["content"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .to_string();
        // The cut falls inside the two-byte é: it goes too.
        assert_eq!(
            text,
            format!(
                "[earlier output truncated]\n{}",
                "b".repeat(TERMINAL_OUTPUT_LIMIT - 1)
            )
        );
        // A client-truncated output says so as well.
        let records = terminal_records(r#"{"output":"tail","truncated":true}"#);
        let (lines, _) = replay(&records[..3], ClientSupport::default());
        assert_eq!(
            lines[0]["params"]["update"]["content"][0]["content"]["text"],
            "[earlier output truncated]\ntail"
        );
    }

    #[test]
    fn odd_shaped_tool_calls_lose_their_terminals_too() {
        let records = vec![update(
            1,
            r#"{"sessionUpdate":"tool_call","toolCallId":7,"title":"x","status":"completed","content":[{"type":"terminal","terminalId":"a"}]}"#,
        )];
        let (lines, _) = replay(&records, ClientSupport::default());
        assert_eq!(
            lines[0]["params"]["update"],
            json!({"sessionUpdate":"tool_call","toolCallId":7,"title":"x","status":"completed","content":[{"type":"content","content":{"type":"text","text":"[terminal output was not recorded]"}}]})
        );
    }

    #[test]
    fn a_v2_client_gets_v2_recorded_messages_as_recorded_and_v1_ones_translated() {
        let v2 = ClientSupport {
            v2: true,
            ..ClientSupport::default()
        };
        // Recorded under v2: the agent's echo stands for the prompt (even after a state update);
        // states are not replayed (their latest values are).
        let (out, summary) = replay(
            &[
                rec(
                    1,
                    Side::Client,
                    r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"first task"}]}}"#,
                ),
                rec(
                    2,
                    Side::Agent,
                    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"available_commands_update","availableCommands":[]}}}"#,
                ),
                rec(
                    2,
                    Side::Agent,
                    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"user_message","messageId":"m1","content":[{"text":"[Context restored] first task","type":"text"}]}}}"#,
                ),
                rec(
                    3,
                    Side::Agent,
                    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"state_update","state":"running"}}}"#,
                ),
                rec(
                    4,
                    Side::Agent,
                    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"done"},"messageId":"a1"}}}"#,
                ),
                rec(
                    5,
                    Side::Agent,
                    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn"}}}"#,
                ),
            ],
            v2,
        );
        let kinds: Vec<&str> = out
            .iter()
            .map(|m| m["params"]["update"]["sessionUpdate"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "user_message",
                "agent_message_chunk",
                "available_commands_update"
            ],
            "the state last"
        );
        assert_eq!(
            out[0]["params"]["update"]["messageId"], "m1",
            "the agent's own"
        );
        assert_eq!(summary.transcript, "User: first task\nAgent: done\n");
        // Recorded under v1: the prompt becomes a user_message, chunks get a messageId per
        // run, tool_call becomes the upsert, the plan is re-shaped, modes are left out.
        let (out, _) = replay(
            &[
                rec(
                    1,
                    Side::Client,
                    r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"go"}]}}"#,
                ),
                rec(
                    2,
                    Side::Agent,
                    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a"}}}}"#,
                ),
                rec(
                    3,
                    Side::Agent,
                    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"b"}}}}"#,
                ),
                rec(
                    4,
                    Side::Agent,
                    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"tool_call","toolCallId":"t","title":"read","status":"completed"}}}"#,
                ),
                rec(
                    5,
                    Side::Agent,
                    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"plan","entries":[{"content":"x","status":"pending","priority":"low"}]}}}"#,
                ),
                rec(
                    6,
                    Side::Agent,
                    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"current_mode_update","currentModeId":"plan"}}}"#,
                ),
                rec(
                    7,
                    Side::Agent,
                    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"c"}}}}"#,
                ),
            ],
            v2,
        );
        let updates: Vec<&Value> = out.iter().map(|m| &m["params"]["update"]).collect();
        assert_eq!(updates.len(), 6, "{updates:?}");
        assert_eq!(
            *updates[0],
            json!({"sessionUpdate": "user_message", "messageId": "acpj-user-1", "content": [{"type": "text", "text": "go"}]})
        );
        assert_eq!(updates[1]["messageId"], "acpj-agent_message-2");
        assert_eq!(
            updates[2]["messageId"], "acpj-agent_message-2",
            "one message"
        );
        assert_eq!(updates[3]["sessionUpdate"], "tool_call_update");
        assert_eq!(updates[3]["title"], "read");
        assert_eq!(updates[4]["sessionUpdate"], "plan_update");
        assert_eq!(updates[4]["plan"]["type"], "items");
        assert_eq!(updates[4]["plan"]["entries"][0]["content"], "x");
        assert_eq!(updates[5]["messageId"], "acpj-agent_message-7", "a new run");
    }

    #[test]
    fn a_v1_client_gets_a_v2_recorded_session_translated() {
        let (out, _) = replay(
            &[
                rec(
                    1,
                    Side::Client,
                    r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"go"}]}}"#,
                ),
                rec(
                    2,
                    Side::Agent,
                    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"user_message","messageId":"m1","content":[{"text":"go","type":"text"}]}}}"#,
                ),
                rec(
                    3,
                    Side::Agent,
                    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"state_update","state":"running"}}}"#,
                ),
                rec(
                    4,
                    Side::Agent,
                    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"tool_call_update","toolCallId":"t","title":"read","status":"in_progress"}}}"#,
                ),
                rec(
                    5,
                    Side::Agent,
                    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"tool_call_update","toolCallId":"t","status":"completed"}}}"#,
                ),
                rec(
                    6,
                    Side::Agent,
                    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"plan_update","plan":{"type":"items","planId":"p","entries":[{"content":"x","status":"pending","priority":"low"}]}}}}"#,
                ),
                rec(
                    7,
                    Side::Agent,
                    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"ok"},"messageId":"a1"}}}"#,
                ),
                rec(
                    8,
                    Side::Agent,
                    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn"}}}"#,
                ),
            ],
            ClientSupport::default(),
        );
        let updates: Vec<&Value> = out.iter().map(|m| &m["params"]["update"]).collect();
        let kinds: Vec<&str> = updates
            .iter()
            .map(|u| u["sessionUpdate"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "user_message_chunk",
                "tool_call",
                "tool_call_update",
                "plan",
                "agent_message_chunk"
            ]
        );
        assert_eq!(updates[1]["title"], "read");
        assert_eq!(updates[3]["entries"][0]["content"], "x");
    }
}
