//! Turning a session's journal into the `session/update` notifications of a `session/load`.
//!
//! Pure: it consumes [`Record`]s (the shell reads them from the store) and produces lines. Two
//! passes over the same records, so memory stays flat in the session's length:
//! 1. [`Replay::observe`] learns what must be known ahead: the final form of each compaction.
//! 2. [`Replay::emit`] produces the replay in journal order: a `user_message_chunk` per content
//!    block of each recorded `session/prompt`; history updates (message and thought chunks, tool
//!    calls, plans) verbatim; each compaction materialized once, at its first position; state
//!    updates (commands, mode, config options, session info, usage) held back, and `notice`
//!    dropped. [`Replay::finish`] then emits the latest state updates and closes the tool calls a
//!    crash left pending as `failed`, and returns what the proxy needs to continue the session.

use std::collections::{BTreeMap, HashMap};

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

/// A replay in progress.
pub struct Replay {
    session: String,
    support: ClientSupport,
    transcript_limit: usize,
    compactions: HashMap<String, Value>,
    compactions_emitted: std::collections::HashSet<String>,
    state: BTreeMap<String, Value>,
    open_tools: BTreeMap<String, ()>,
    turns: std::collections::VecDeque<Turn>,
    transcript_bytes: usize,
    summary: Summary,
    user_messages: u64,
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
            session: session.to_string(),
            support,
            transcript_limit,
            compactions: HashMap::new(),
            compactions_emitted: Default::default(),
            state: BTreeMap::new(),
            open_tools: BTreeMap::new(),
            turns: Default::default(),
            transcript_bytes: 0,
            summary: Summary::default(),
            user_messages: 0,
        }
    }

    /// First pass over a record.
    pub fn observe(&mut self, record: &Record) {
        let is_compaction = matches!(&record.body, Body::Message { payload, .. }
            if memchr::memmem::find(&payload.bytes, b"\"compactionId\"").is_some());
        if !is_compaction {
            return;
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

    fn notification(&self, update: Value) -> Bytes {
        let msg = json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": self.session, "update": update}});
        let mut line = serde_json::to_vec(&msg).expect("a Value serializes");
        line.push(b'\n');
        Bytes::from(line)
    }

    /// Second pass over a record: append the lines it replays as to `out`.
    pub fn emit(&mut self, record: &Record, out: &mut Vec<Bytes>) {
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
                    match update.status.as_deref().unwrap_or(default) {
                        "completed" | "failed" => {
                            self.open_tools.remove(id);
                        }
                        "pending" | "in_progress" => {
                            self.open_tools.insert(id.to_string(), ());
                        }
                        _ => {}
                    }
                }
            }
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
                if let (Some(text), Some(turn)) = (text, self.turns.back_mut()) {
                    turn.agent.push_str(&text);
                    self.transcript_bytes += text.len();
                }
            }
            _ => {}
        }
        // The recorded line itself, byte for byte.
        let mut line = Vec::with_capacity(payload.bytes.len() + 1);
        line.extend_from_slice(&payload.bytes);
        line.push(b'\n');
        out.push(Bytes::from(line));
    }

    /// Everything but history updates: prompts, setup requests, state updates, responses.
    fn emit_slow(&mut self, record: &Record, out: &mut Vec<Bytes>) {
        let Some((from, msg)) = update_of(record) else {
            return;
        };
        let method = msg["method"].as_str().unwrap_or("");
        let params = &msg["params"];
        match (from, method) {
            (Side::Client, "session/prompt") => {
                self.summary.turns += 1;
                let mut turn = Turn::default();
                for block in params["prompt"].as_array().into_iter().flatten() {
                    self.user_messages += 1;
                    let id = format!("acpj-user-{}", record.seq);
                    out.push(self.notification(json!({"sessionUpdate": "user_message_chunk", "content": block, "messageId": id})));
                    if let Some(text) = block["text"].as_str() {
                        turn.user.push_str(text);
                    }
                }
                self.push_turn(turn);
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
            Class::History => {
                // Only odd-shaped updates the fast path could not peek get here: replay as is.
                if let Body::Message { payload, .. } = &record.body {
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

    /// End of the records: append the latest state updates and `failed` updates for tool calls
    /// left open, and return the summary.
    pub fn finish(mut self, out: &mut Vec<Bytes>) -> Summary {
        for (_, update) in std::mem::take(&mut self.state) {
            out.push(self.notification(update));
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
}
