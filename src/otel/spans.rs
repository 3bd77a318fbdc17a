//! A session's records → OpenTelemetry GenAI spans. Pure: no I/O, no clock (times are the
//! records' own stamps), so the same journal always gives the same spans, whether fed live by the
//! proxy or read back by `export --format otlp`.
//!
//! One `invoke_agent` span per prompt turn (CLIENT), its children one `execute_tool` span per
//! tool call (INTERNAL) and one `invoke_agent` span per subagent (a child session the turn
//! started: INTERNAL, its own tool calls under it, ended by its final state). Permission answers, plans, mode changes, cancellations and the proxy's
//! own interventions (restarts, stalls) are span events. A turn's IDs come from [`turn_ids`]: a
//! hash of the client-facing session ID, the prompt's journal timestamp and its JSON-RPC id,
//! known both to the live exporter and to a later export (a turn *number* is not: a session
//! continued by a later run does not know how many prompts came before).
//!
//! [`SpanBuilder`] keeps only what is open (the current turn, its open tool calls, pending
//! permission requests); a finished span is handed out at once ([`SpanBuilder::take`]).

use std::collections::HashMap;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::acp::{permission_choice, prompt_text, subagents};
use crate::journal::{Body, Event as JournalEvent, Record};
use crate::wire::Side;

/// A trace ID (16 bytes) and span ID (8 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SpanContext {
    /// The trace.
    pub trace_id: [u8; 16],
    /// The span.
    pub span_id: [u8; 8],
}

impl SpanContext {
    /// The W3C `traceparent` value naming this span as parent (sampled).
    pub fn traceparent(&self) -> String {
        format!(
            "00-{}-{}-01",
            hex::encode(self.trace_id),
            hex::encode(self.span_id)
        )
    }
}

fn digest(parts: &[&[u8]]) -> [u8; 32] {
    let mut hash = Sha256::new();
    hash.update(b"acp-journal/otel/v1");
    for part in parts {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    hash.finalize().into()
}

/// All-zero IDs are invalid in OTLP; a hash that gives one is nudged.
fn nonzero<const N: usize>(mut id: [u8; N]) -> [u8; N] {
    if id.iter().all(|b| *b == 0) {
        id[N - 1] = 1;
    }
    id
}

/// The IDs of a turn's `invoke_agent` span: a hash of the client-facing `session`, the
/// prompt record's `unix_us` and the prompt's JSON-RPC `id` (as JSON text, e.g. `5` or `"a"`).
pub fn turn_ids(session: &str, prompt_unix_us: i64, id: &str) -> SpanContext {
    let d = digest(&[
        session.as_bytes(),
        &prompt_unix_us.to_le_bytes(),
        id.as_bytes(),
    ]);
    SpanContext {
        trace_id: nonzero(d[..16].try_into().expect("16 bytes")),
        span_id: nonzero(d[16..24].try_into().expect("8 bytes")),
    }
}

/// The span ID of subagent `child` (its session ID) started under span `parent`.
pub fn child_span_id(parent: &SpanContext, child: &str) -> [u8; 8] {
    let d = digest(&[
        &parent.trace_id,
        &parent.span_id,
        b"subagent",
        child.as_bytes(),
    ]);
    nonzero(d[..8].try_into().expect("8 bytes"))
}

/// The span ID of tool call `tool_call_id` in the turn `turn`.
pub fn tool_span_id(turn: &SpanContext, tool_call_id: &str) -> [u8; 8] {
    let d = digest(&[&turn.trace_id, &turn.span_id, tool_call_id.as_bytes()]);
    nonzero(d[..8].try_into().expect("8 bytes"))
}

/// The turn IDs of a client `session/prompt` record of `session`, else `None`.
pub fn prompt_ids(session: &str, record: &Record) -> Option<SpanContext> {
    let Body::Message {
        from: Side::Client,
        payload,
    } = &record.body
    else {
        return None;
    };
    let msg: Value = serde_json::from_slice(&payload.bytes).ok()?;
    (msg["method"] == "session/prompt")
        .then(|| turn_ids(session, record.unix_us, &msg["id"].to_string()))
}

/// An attribute value.
#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    /// A string.
    Str(String),
    /// An integer.
    Int(i64),
    /// A float.
    Double(f64),
    /// An array of strings.
    StrArray(Vec<String>),
}

/// Attributes, in the order set.
pub type Attributes = Vec<(String, AttrValue)>;

/// OTLP span kinds used here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    /// `SPAN_KIND_INTERNAL` (1).
    Internal = 1,
    /// `SPAN_KIND_CLIENT` (3).
    Client = 3,
}

/// A span's status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Not set (`STATUS_CODE_UNSET`).
    Unset,
    /// Failed (`STATUS_CODE_ERROR`) with a message.
    Error(String),
}

/// A span event.
#[derive(Clone, Debug, PartialEq)]
pub struct SpanEvent {
    /// Unix nanoseconds.
    pub time_ns: u64,
    /// Its name (`acp.permission`, `acp.plan`, `acp.mode`, `acp.cancel`, `acp.proxy`).
    pub name: String,
    /// Its attributes.
    pub attributes: Attributes,
}

/// A finished span.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    /// Trace and span IDs.
    pub context: SpanContext,
    /// The parent span (in the same trace).
    pub parent: Option<[u8; 8]>,
    /// `invoke_agent {agent}` or `execute_tool {title}`.
    pub name: String,
    /// Its kind.
    pub kind: SpanKind,
    /// Unix nanoseconds.
    pub start_ns: u64,
    /// Unix nanoseconds.
    pub end_ns: u64,
    /// Its attributes.
    pub attributes: Attributes,
    /// Its events.
    pub events: Vec<SpanEvent>,
    /// Its status.
    pub status: Status,
}

impl Span {
    /// The value of attribute `key`.
    pub fn attr(&self, key: &str) -> Option<&AttrValue> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }
}

fn ns(unix_us: i64) -> u64 {
    u64::try_from(unix_us).unwrap_or(0).saturating_mul(1000)
}

fn s(v: impl Into<String>) -> AttrValue {
    AttrValue::Str(v.into())
}

/// The agent, from the `initialize` response's `agentInfo`.
#[derive(Clone, Debug, Default)]
struct AgentInfo {
    name: Option<String>,
    version: Option<String>,
}

/// Token counts of a turn.
#[derive(Clone, Debug, Default)]
struct Usage {
    input: Option<i64>,
    output: Option<i64>,
    cache_read: Option<i64>,
    cache_creation: Option<i64>,
    /// `usage_update`: tokens in the context, the window, the cost.
    context_used: Option<i64>,
    context_size: Option<i64>,
    cost: Option<(f64, String)>,
}

impl Usage {
    /// Token counts as ACP names them (`PromptResponse.usage`; a `usage_update` may carry them too).
    fn tokens(&mut self, u: &Value) {
        let int = |k: &str| u[k].as_i64();
        self.input = int("inputTokens").or(self.input);
        self.output = int("outputTokens").or(self.output);
        self.cache_read = int("cachedReadTokens").or(self.cache_read);
        self.cache_creation = int("cachedWriteTokens").or(self.cache_creation);
    }

    fn attributes(&self, attrs: &mut Attributes) {
        let mut put = |k: &str, v: Option<i64>| {
            if let Some(v) = v {
                attrs.push((k.into(), AttrValue::Int(v)));
            }
        };
        put("gen_ai.usage.input_tokens", self.input);
        put("gen_ai.usage.output_tokens", self.output);
        put("gen_ai.usage.cache_read.input_tokens", self.cache_read);
        put(
            "gen_ai.usage.cache_creation.input_tokens",
            self.cache_creation,
        );
        put("acp.usage.context.used", self.context_used);
        put("acp.usage.context.size", self.context_size);
        if let Some((amount, currency)) = &self.cost {
            attrs.push(("acp.usage.cost.amount".into(), AttrValue::Double(*amount)));
            attrs.push(("acp.usage.cost.currency".into(), s(currency.clone())));
        }
    }
}

/// An open tool call.
struct Tool {
    span_id: [u8; 8],
    start_ns: u64,
    title: String,
    kind: Option<String>,
    status: String,
    arguments: Option<String>,
    result: Option<String>,
    events: Vec<SpanEvent>,
}

/// The open prompt turn.
struct Turn {
    context: SpanContext,
    /// The prompt's JSON-RPC id (JSON text).
    id: String,
    start_ns: u64,
    prompt: Option<String>,
    output: String,
    usage: Usage,
    events: Vec<SpanEvent>,
    tools: HashMap<String, Tool>,
    /// ACP v2: the agent took the prompt (answered its `messageId`); the turn ends with the
    /// agent's `idle` `state_update`, and a tool call starts with its first `tool_call_update`.
    taken: bool,
}

/// A subagent (a child session) at work: an `invoke_agent` span under the turn (or the
/// subagent) that started it, its tool calls under it.
struct Child {
    context: SpanContext,
    parent: [u8; 8],
    start_ns: u64,
    title: String,
    tools: HashMap<String, Tool>,
    output: String,
}

/// The most subagents a builder follows at once.
const CHILD_LIMIT: usize = 4096;

/// A permission request waiting for the client's answer.
struct Permission {
    tool_call: String,
    title: String,
}

/// Builds spans from one session's records, in journal order.
///
/// Feed it the `initialize` response ([`SpanBuilder::initialize`]), then every record of the
/// session ([`SpanBuilder::record`]); call [`SpanBuilder::end_run`] where a proxy run ends (a
/// turn still open then ends with `error.type` `unanswered`). Finished spans wait in
/// [`SpanBuilder::take`].
pub struct SpanBuilder {
    session: String,
    content: bool,
    agent: AgentInfo,
    turn: Option<Turn>,
    permissions: HashMap<String, Permission>,
    /// The subagents at work, by session ID (they may outlive the turn that started them).
    children: HashMap<String, Child>,
    last_ns: u64,
    done: Vec<Span>,
}

impl SpanBuilder {
    /// Spans of the client-facing session `session`; with `content`, the prompt and output
    /// text, tool arguments and results as recorded (redacted as the journal is).
    pub fn new(session: &str, content: bool) -> SpanBuilder {
        SpanBuilder {
            session: session.to_string(),
            content,
            agent: AgentInfo::default(),
            turn: None,
            permissions: HashMap::new(),
            children: HashMap::new(),
            last_ns: 0,
            done: Vec::new(),
        }
    }

    /// The `initialize` response (its `agentInfo` names the agent).
    pub fn initialize(&mut self, response: &Value) {
        let info = &response["result"]["agentInfo"];
        self.agent = AgentInfo {
            name: info["name"].as_str().map(str::to_string),
            version: info["version"].as_str().map(str::to_string),
        };
    }

    /// The finished spans so far.
    pub fn take(&mut self) -> Vec<Span> {
        std::mem::take(&mut self.done)
    }

    /// One record of the session.
    pub fn record(&mut self, record: &Record) {
        let at = ns(record.unix_us);
        self.last_ns = self.last_ns.max(at);
        let (from, payload) = match &record.body {
            Body::Message { from, payload } => (*from, payload),
            Body::Event(event) => return self.proxy_event(at, event),
            Body::Stderr(_) => return,
        };
        if !self.content && is_chunk(&payload.bytes) {
            return;
        }
        let Ok(msg) = serde_json::from_slice::<Value>(&payload.bytes) else {
            return;
        };
        let method = msg["method"].as_str().unwrap_or("");
        let id = msg.get("id").map(Value::to_string);
        match (from, method, id) {
            (_, "session/update", _) => match msg["params"]["sessionId"].as_str() {
                Some(child) if self.children.contains_key(child) => {
                    self.child_update(at, child, &msg["params"]["update"]);
                }
                _ => self.update(at, &msg["params"]["update"]),
            },
            (Side::Client, "session/prompt", Some(id)) => self.prompt(record, at, id, &msg),
            (Side::Client, "session/cancel", None) => self.event(at, "acp.cancel", Vec::new()),
            (Side::Client, "session/set_mode", Some(_)) => {
                let mode = msg["params"]["modeId"].as_str().unwrap_or("?");
                self.event(at, "acp.mode", vec![("acp.mode.id".into(), s(mode))]);
            }
            (Side::Agent, "session/request_permission", Some(id)) => {
                let call = &msg["params"]["toolCall"];
                let tool_call = call["toolCallId"].as_str().unwrap_or("").to_string();
                let title = call["title"].as_str().unwrap_or("").to_string();
                self.permissions.insert(id, Permission { tool_call, title });
            }
            (Side::Client, "", Some(id)) => {
                if let Some(p) = self.permissions.remove(&id) {
                    self.permission(at, p, &msg);
                }
            }
            (Side::Agent, "", Some(id)) => self.response(at, &id, &msg),
            _ => {}
        }
    }

    /// A proxy run ended: a turn left open ends here, unanswered, and so do the subagents
    /// still at work.
    pub fn end_run(&mut self) {
        self.permissions.clear();
        let at = self.last_ns;
        let mut open: Vec<(String, Child)> = self.children.drain().collect();
        open.sort_by_key(|(_, c)| c.start_ns);
        for (id, child) in open {
            self.finish_child(at, id, child, None, None);
        }
        if self.turn.is_some() {
            let at = self.last_ns;
            self.end_turn(
                at,
                None,
                Some((
                    "unanswered",
                    "the run ended before the prompt was answered".into(),
                )),
            );
        }
    }

    fn prompt(&mut self, record: &Record, at: u64, id: String, msg: &Value) {
        if self.turn.is_some() {
            // A prompt while another is open (the client did not wait): the open one ends here.
            self.end_turn(
                at,
                None,
                Some(("unanswered", "a new prompt came first".into())),
            );
        }
        let context = turn_ids(&self.session, record.unix_us, &id);
        self.turn = Some(Turn {
            context,
            id,
            start_ns: at,
            prompt: self.content.then(|| prompt_text(&msg["params"]["prompt"])),
            output: String::new(),
            usage: Usage::default(),
            events: Vec::new(),
            tools: HashMap::new(),
            taken: false,
        });
    }

    fn response(&mut self, at: u64, id: &str, msg: &Value) {
        if self.turn.as_ref().is_none_or(|t| t.id != id) {
            return;
        }
        if let Some(error) = msg.get("error") {
            let code = error["code"].to_string();
            let message = error["message"].as_str().unwrap_or("").to_string();
            self.end_turn(at, None, Some((code.as_str(), message)));
            return;
        }
        let result = &msg["result"];
        if let Some(turn) = self.turn.as_mut() {
            if result.get("stopReason").is_none() && result.get("messageId").is_some() {
                turn.taken = true;
                return;
            }
            if result["usage"].is_object() {
                turn.usage.tokens(&result["usage"]);
            }
        }
        let reason = result["stopReason"].as_str().unwrap_or("?").to_string();
        self.end_turn(at, Some(reason), None);
    }

    fn end_turn(&mut self, at: u64, reason: Option<String>, error: Option<(&str, String)>) {
        let Some(mut turn) = self.turn.take() else {
            return;
        };
        let mut tools: Vec<(String, Tool)> = turn.tools.drain().collect();
        tools.sort_by_key(|(_, t)| t.start_ns);
        for (id, tool) in tools {
            self.finish_tool(&turn.context, id, tool, at);
        }
        let name = self.agent.name.clone();
        let mut attributes: Attributes = vec![
            ("gen_ai.operation.name".into(), s("invoke_agent")),
            (
                "gen_ai.provider.name".into(),
                s(name.clone().unwrap_or_else(|| "acp".into())),
            ),
            ("gen_ai.conversation.id".into(), s(self.session.clone())),
        ];
        if let Some(name) = &name {
            attributes.push(("gen_ai.agent.name".into(), s(name.clone())));
        }
        if let Some(version) = &self.agent.version {
            attributes.push(("gen_ai.agent.version".into(), s(version.clone())));
        }
        attributes.push(("jsonrpc.request.id".into(), s(turn.id.clone())));
        if let Some(reason) = reason {
            attributes.push((
                "gen_ai.response.finish_reasons".into(),
                AttrValue::StrArray(vec![reason]),
            ));
        }
        turn.usage.attributes(&mut attributes);
        if let Some(prompt) = turn.prompt.take() {
            attributes.push(("gen_ai.input.messages".into(), s(messages("user", &prompt))));
            attributes.push((
                "gen_ai.output.messages".into(),
                s(messages("assistant", &turn.output)),
            ));
        }
        let status = match error {
            Some((kind, message)) => {
                attributes.push(("error.type".into(), s(kind)));
                Status::Error(message)
            }
            None => Status::Unset,
        };
        self.done.push(Span {
            context: turn.context,
            parent: None,
            name: match &name {
                Some(name) => format!("invoke_agent {name}"),
                None => "invoke_agent".into(),
            },
            kind: SpanKind::Client,
            start_ns: turn.start_ns,
            end_ns: at.max(turn.start_ns),
            attributes,
            events: turn.events,
            status,
        });
    }

    fn update(&mut self, at: u64, update: &Value) {
        let content = self.content;
        if subagents::child_update(update).is_some() {
            let parent = self.turn.as_ref().map(|t| t.context);
            return self.subagent(at, parent, update);
        }
        let Some(turn) = self.turn.as_mut() else {
            return;
        };
        match update["sessionUpdate"].as_str().unwrap_or("") {
            "state_update" if turn.taken && update["state"] == "idle" => {
                if update["usage"].is_object() {
                    turn.usage.tokens(&update["usage"]);
                }
                let reason = update["stopReason"].as_str().unwrap_or("?").to_string();
                self.end_turn(at, Some(reason), None);
            }
            "agent_message_chunk" if content => {
                turn.output
                    .push_str(update["content"]["text"].as_str().unwrap_or(""));
            }
            kind @ ("tool_call" | "tool_call_update") => {
                let context = turn.context;
                if let Some((id, tool)) = tool_update(
                    &mut turn.tools,
                    &context,
                    turn.taken,
                    kind,
                    update,
                    at,
                    content,
                ) {
                    self.finish_tool(&context, id, tool, at);
                }
            }
            "plan" => {
                let entries = update["entries"].as_array().map_or(0, Vec::len);
                let mut attrs = vec![("acp.plan.entries".into(), AttrValue::Int(entries as i64))];
                if content {
                    attrs.push(("acp.plan".into(), s(update["entries"].to_string())));
                }
                turn.events.push(SpanEvent {
                    time_ns: at,
                    name: "acp.plan".into(),
                    attributes: attrs,
                });
            }
            "current_mode_update" => {
                let mode = update["currentModeId"].as_str().unwrap_or("?");
                turn.events.push(SpanEvent {
                    time_ns: at,
                    name: "acp.mode".into(),
                    attributes: vec![("acp.mode.id".into(), s(mode))],
                });
            }
            "usage_update" => {
                turn.usage.context_used = update["used"].as_i64().or(turn.usage.context_used);
                turn.usage.context_size = update["size"].as_i64().or(turn.usage.context_size);
                if let (Some(amount), Some(currency)) = (
                    update["cost"]["amount"].as_f64(),
                    update["cost"]["currency"].as_str(),
                ) {
                    turn.usage.cost = Some((amount, currency.to_string()));
                }
                turn.usage.tokens(update);
            }
            _ => {}
        }
    }

    /// A subagent announced (its span opens under `parent`, the turn's or a subagent's), or
    /// its state reported: the span ends with its work (its stop reason, its token usage).
    fn subagent(&mut self, at: u64, parent: Option<SpanContext>, update: &Value) {
        let Some(u) = subagents::child_update(update) else {
            return;
        };
        if !self.children.contains_key(u.child) {
            let Some(parent) = parent else {
                return;
            };
            if self.children.len() >= CHILD_LIMIT {
                return;
            }
            let span_id = child_span_id(&parent, u.child);
            self.children.insert(
                u.child.to_string(),
                Child {
                    context: SpanContext {
                        trace_id: parent.trace_id,
                        span_id,
                    },
                    parent: parent.span_id,
                    start_ns: at,
                    title: u.title.or(u.description).unwrap_or("subagent").to_string(),
                    tools: HashMap::new(),
                    output: String::new(),
                },
            );
        }
        let Some(child) = self.children.get_mut(u.child) else {
            return;
        };
        if let Some(title) = u.title {
            child.title = title.to_string();
        }
        if let Some(state) = u.state.filter(|s| s.is_end())
            && let Some(child) = self.children.remove(u.child)
        {
            self.finish_child(at, u.child.to_string(), child, Some(state), u.usage);
        }
    }

    /// An update of subagent `id`'s own: its tool calls, its words, its own subagents.
    fn child_update(&mut self, at: u64, id: &str, update: &Value) {
        let content = self.content;
        let upserts = self.turn.as_ref().is_some_and(|t| t.taken);
        let Some(child) = self.children.get_mut(id) else {
            return;
        };
        let context = child.context;
        match update["sessionUpdate"].as_str().unwrap_or("") {
            kind @ ("tool_call" | "tool_call_update") => {
                if let Some((tool_id, tool)) = tool_update(
                    &mut child.tools,
                    &context,
                    upserts,
                    kind,
                    update,
                    at,
                    content,
                ) {
                    self.finish_tool(&context, tool_id, tool, at);
                }
            }
            "agent_message_chunk" if content => {
                child
                    .output
                    .push_str(update["content"]["text"].as_str().unwrap_or(""));
            }
            _ => self.subagent(at, Some(context), update),
        }
    }

    /// A subagent's span ends (`state`: how its work ended; `None`: the run ended first).
    fn finish_child(
        &mut self,
        at: u64,
        id: String,
        mut child: Child,
        state: Option<subagents::State<'_>>,
        usage: Option<&Value>,
    ) {
        let mut tools: Vec<(String, Tool)> = child.tools.drain().collect();
        tools.sort_by_key(|(_, t)| t.start_ns);
        for (tool_id, tool) in tools {
            self.finish_tool(&child.context, tool_id, tool, at);
        }
        let mut attributes: Attributes = vec![
            ("gen_ai.operation.name".into(), s("invoke_agent")),
            ("gen_ai.agent.name".into(), s(child.title.clone())),
            ("gen_ai.conversation.id".into(), s(id)),
            ("acp.subagent.parent".into(), s(self.session.clone())),
        ];
        if let Some(state) = state {
            attributes.push((
                "gen_ai.response.finish_reasons".into(),
                AttrValue::StrArray(vec![state.word().to_string()]),
            ));
        }
        let mut tokens = Usage::default();
        if let Some(usage) = usage {
            tokens.tokens(usage);
        }
        tokens.attributes(&mut attributes);
        if self.content {
            attributes.push((
                "gen_ai.output.messages".into(),
                s(messages("assistant", &child.output)),
            ));
        }
        let status = match state.map(|s| (s, s.tool_status())) {
            Some((_, Some("completed" | "in_progress"))) => Status::Unset,
            Some((state, _)) => {
                attributes.push(("error.type".into(), s(state.word())));
                Status::Error(format!("subagent {} ended: {}", child.title, state.word()))
            }
            None => {
                attributes.push(("error.type".into(), s("unfinished")));
                Status::Error("the run ended before the subagent did".into())
            }
        };
        self.done.push(Span {
            context: child.context,
            parent: Some(child.parent),
            name: format!("invoke_agent {}", child.title),
            kind: SpanKind::Internal,
            start_ns: child.start_ns,
            end_ns: at.max(child.start_ns),
            attributes,
            events: Vec::new(),
            status,
        });
    }

    fn finish_tool(&mut self, turn: &SpanContext, id: String, tool: Tool, at: u64) {
        let mut attributes: Attributes = vec![
            ("gen_ai.operation.name".into(), s("execute_tool")),
            ("gen_ai.tool.call.id".into(), s(id.clone())),
            ("gen_ai.tool.name".into(), s(tool.title.clone())),
        ];
        if let Some(kind) = tool.kind {
            attributes.push(("gen_ai.tool.type".into(), s(kind)));
        }
        attributes.push(("acp.tool.status".into(), s(tool.status.clone())));
        if let Some(arguments) = tool.arguments {
            attributes.push(("gen_ai.tool.call.arguments".into(), s(arguments)));
        }
        if let Some(result) = tool.result {
            attributes.push(("gen_ai.tool.call.result".into(), s(result)));
        }
        let status = if tool.status == "failed" {
            attributes.push(("error.type".into(), s("failed")));
            Status::Error(format!("tool call {id} failed"))
        } else {
            Status::Unset
        };
        let title = if tool.title.is_empty() {
            id
        } else {
            tool.title
        };
        self.done.push(Span {
            context: SpanContext {
                trace_id: turn.trace_id,
                span_id: tool.span_id,
            },
            parent: Some(turn.span_id),
            name: format!("execute_tool {title}"),
            kind: SpanKind::Internal,
            start_ns: tool.start_ns,
            end_ns: at.max(tool.start_ns),
            attributes,
            events: tool.events,
            status,
        });
    }

    fn permission(&mut self, at: u64, p: Permission, msg: &Value) {
        let outcome = match msg.get("error") {
            Some(_) => "error",
            None => permission_choice(&msg["result"]["outcome"]).unwrap_or("?"),
        };
        let event = SpanEvent {
            time_ns: at,
            name: "acp.permission".into(),
            attributes: vec![
                ("gen_ai.tool.call.id".into(), s(p.tool_call.clone())),
                ("acp.permission.title".into(), s(p.title)),
                ("acp.permission.outcome".into(), s(outcome)),
            ],
        };
        let Some(turn) = self.turn.as_mut() else {
            return;
        };
        match turn.tools.get_mut(&p.tool_call) {
            Some(tool) => tool.events.push(event),
            None => turn.events.push(event),
        }
    }

    fn event(&mut self, at: u64, name: &str, attributes: Attributes) {
        if let Some(turn) = self.turn.as_mut() {
            turn.events.push(SpanEvent {
                time_ns: at,
                name: name.into(),
                attributes,
            });
        }
    }

    fn proxy_event(&mut self, at: u64, event: &JournalEvent) {
        let what = match event {
            JournalEvent::AgentRestarted { code } => format!("agent restarted (status {code})"),
            JournalEvent::HostDropped => "the connection to the host dropped".into(),
            JournalEvent::SessionRestored { how } => format!("session restored ({how})"),
            JournalEvent::PromptStalled { action } => format!("prompt stalled ({action})"),
            _ => return,
        };
        self.event(at, "acp.proxy", vec![("acp.proxy.action".into(), s(what))]);
    }
}

/// A `tool_call` or `tool_call_update` (`kind`) of a turn's or a subagent's `tools`, whose
/// spans go under `context`: the call opened (by a `tool_call`, or its first upsert when
/// `upserts`: ACP v2), and its fields taken; a call that ended is handed back to be finished.
fn tool_update(
    tools: &mut HashMap<String, Tool>,
    context: &SpanContext,
    upserts: bool,
    kind: &str,
    update: &Value,
    at: u64,
    content: bool,
) -> Option<(String, Tool)> {
    let id = update["toolCallId"].as_str()?;
    if (kind == "tool_call" || upserts) && !tools.contains_key(id) {
        tools.insert(
            id.to_string(),
            Tool {
                span_id: tool_span_id(context, id),
                start_ns: at,
                title: String::new(),
                kind: None,
                status: "pending".into(),
                arguments: None,
                result: None,
                events: Vec::new(),
            },
        );
    }
    let tool = tools.get_mut(id)?;
    if let Some(title) = update["title"].as_str() {
        tool.title = title.to_string();
    }
    if let Some(kind) = update["kind"].as_str() {
        tool.kind = Some(kind.to_string());
    }
    if let Some(status) = update["status"].as_str() {
        tool.status = status.to_string();
    }
    if content {
        if let Some(input) = update.get("rawInput") {
            tool.arguments = Some(input.to_string());
        }
        if let Some(output) = update.get("rawOutput") {
            tool.result = Some(output.to_string());
        } else if let Some(c) = update.get("content").filter(|c| !c.is_null()) {
            tool.result = Some(c.to_string());
        }
    }
    if matches!(tool.status.as_str(), "completed" | "failed") {
        let tool = tools.remove(id)?;
        return Some((id.to_string(), tool));
    }
    None
}

/// A message, agent thought or user chunk (most of a session's traffic): without content they
/// make no span, so they are not parsed (`"sessionUpdate":"…_chunk"` unescaped is only ever the
/// update's own member).
fn is_chunk(line: &[u8]) -> bool {
    [
        &b"\"sessionUpdate\":\"agent_message_chunk\""[..],
        b"\"sessionUpdate\":\"agent_thought_chunk\"",
        b"\"sessionUpdate\":\"user_message_chunk\"",
    ]
    .iter()
    .any(|needle| memchr::memmem::find(line, needle).is_some())
}

/// GenAI message JSON: one message of `role` with one text part.
fn messages(role: &str, text: &str) -> String {
    serde_json::json!([{"role": role, "parts": [{"type": "text", "content": text}]}]).to_string()
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::journal::Payload;

    fn feed(lines: &[(Side, &str)], content: bool) -> Vec<Span> {
        let mut b = SpanBuilder::new("S", content);
        b.initialize(
            &serde_json::json!({"result": {"agentInfo": {"name": "demo", "version": "1.2"}}}),
        );
        for (i, (from, line)) in lines.iter().enumerate() {
            b.record(&Record {
                seq: i as u64,
                unix_us: 1_000_000 + i as i64 * 1000,
                mono_us: 0,
                body: Body::Message {
                    from: *from,
                    payload: Payload::from_line(Bytes::from(line.to_string())),
                },
            });
        }
        b.end_run();
        b.take()
    }

    fn update(u: &str) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"S","update":{u}}}}}"#
        )
    }

    fn session() -> Vec<(Side, String)> {
        vec![
            (Side::Client, r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"fix it"}]}}"#.into()),
            (Side::Agent, update(r#"{"sessionUpdate":"plan","entries":[{"content":"a"}]}"#)),
            (Side::Agent, update(r#"{"sessionUpdate":"tool_call","toolCallId":"c1","title":"Read a.rs","kind":"read","rawInput":{"path":"a.rs"}}"#)),
            (Side::Agent, r#"{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"toolCall":{"toolCallId":"c1"},"options":[]}}"#.into()),
            (Side::Client, r#"{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}"#.into()),
            (Side::Agent, update(r#"{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed","rawOutput":"ok"}"#)),
            (Side::Agent, update(r#"{"sessionUpdate":"tool_call","toolCallId":"c2","title":"Run","kind":"execute"}"#)),
            (Side::Agent, update(r#"{"sessionUpdate":"tool_call_update","toolCallId":"c2","status":"failed"}"#)),
            (Side::Agent, update(r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"done"}}"#)),
            (Side::Agent, update(r#"{"sessionUpdate":"usage_update","used":900,"size":200000,"cost":{"amount":0.25,"currency":"USD"}}"#)),
            (Side::Agent, r#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn","usage":{"inputTokens":120,"outputTokens":30,"totalTokens":150,"cachedReadTokens":100,"cachedWriteTokens":7}}}"#.into()),
            (Side::Client, r#"{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"S","prompt":[]}}"#.into()),
            (Side::Client, r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"S"}}"#.into()),
            (Side::Agent, r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"boom"}}"#.into()),
            (Side::Client, r#"{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"S","prompt":[]}}"#.into()),
        ]
    }

    fn spans(content: bool) -> Vec<Span> {
        let lines = session();
        let refs: Vec<(Side, &str)> = lines.iter().map(|(s, l)| (*s, l.as_str())).collect();
        feed(&refs, content)
    }

    fn str_attr<'a>(span: &'a Span, key: &str) -> &'a str {
        match span.attr(key) {
            Some(AttrValue::Str(v)) => v,
            other => panic!("{key}: {other:?}"),
        }
    }

    fn int_attr(span: &Span, key: &str) -> i64 {
        match span.attr(key) {
            Some(AttrValue::Int(v)) => *v,
            other => panic!("{key}: {other:?}"),
        }
    }

    #[test]
    fn a_turn_is_an_invoke_agent_span_with_its_tool_calls_as_children() {
        let spans = spans(false);
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "execute_tool Read a.rs",
                "execute_tool Run",
                "invoke_agent demo",
                "invoke_agent demo",
                "invoke_agent demo"
            ]
        );
        let (read, run, turn) = (&spans[0], &spans[1], &spans[2]);
        assert_eq!(turn.kind, SpanKind::Client);
        assert_eq!(turn.parent, None);
        assert_eq!(turn.context, turn_ids("S", 1_000_000, "2"));
        assert_eq!((turn.start_ns, turn.end_ns), (1_000_000_000, 1_010_000_000));
        for tool in [read, run] {
            assert_eq!(tool.kind, SpanKind::Internal);
            assert_eq!(tool.parent, Some(turn.context.span_id));
            assert_eq!(tool.context.trace_id, turn.context.trace_id);
        }
        assert_eq!(read.context.span_id, tool_span_id(&turn.context, "c1"));
        assert_eq!(str_attr(read, "gen_ai.tool.call.id"), "c1");
        assert_eq!(str_attr(read, "gen_ai.tool.type"), "read");
        assert_eq!(read.status, Status::Unset);
        assert_eq!(read.events[0].name, "acp.permission");
        assert_eq!(read.events[0].attributes[2].1, s("allow"));
        assert_eq!(run.status, Status::Error("tool call c2 failed".into()));
        assert_eq!(str_attr(turn, "gen_ai.operation.name"), "invoke_agent");
        assert_eq!(str_attr(turn, "gen_ai.provider.name"), "demo");
        assert_eq!(str_attr(turn, "gen_ai.conversation.id"), "S");
        assert_eq!(str_attr(turn, "gen_ai.agent.version"), "1.2");
        assert_eq!(
            turn.attr("gen_ai.response.finish_reasons"),
            Some(&AttrValue::StrArray(vec!["end_turn".into()]))
        );
        assert_eq!(int_attr(turn, "gen_ai.usage.input_tokens"), 120);
        assert_eq!(int_attr(turn, "gen_ai.usage.output_tokens"), 30);
        assert_eq!(int_attr(turn, "gen_ai.usage.cache_read.input_tokens"), 100);
        assert_eq!(
            int_attr(turn, "gen_ai.usage.cache_creation.input_tokens"),
            7
        );
        assert_eq!(int_attr(turn, "acp.usage.context.used"), 900);
        assert_eq!(turn.events[0].name, "acp.plan");
        assert_eq!(turn.status, Status::Unset);
        // Without the content flag: no prompt, output, arguments or results.
        for span in &spans {
            for key in [
                "gen_ai.input.messages",
                "gen_ai.tool.call.arguments",
                "gen_ai.tool.call.result",
            ] {
                assert!(span.attr(key).is_none(), "{key}");
            }
        }

        let (failed, open) = (&spans[3], &spans[4]);
        assert_eq!(str_attr(failed, "error.type"), "-32603");
        assert_eq!(failed.status, Status::Error("boom".into()));
        assert_eq!(failed.events[0].name, "acp.cancel");
        assert!(failed.attr("gen_ai.response.finish_reasons").is_none());
        assert_eq!(str_attr(open, "error.type"), "unanswered");
        assert_ne!(failed.context.trace_id, turn.context.trace_id);
    }

    #[test]
    fn ids_are_deterministic_and_content_is_opt_in() {
        let a = spans(false);
        let b = spans(true);
        let ids = |v: &[Span]| v.iter().map(|s| (s.context, s.parent)).collect::<Vec<_>>();
        assert_eq!(ids(&a), ids(&b));
        assert_eq!(
            str_attr(&b[0], "gen_ai.tool.call.arguments"),
            r#"{"path":"a.rs"}"#
        );
        assert_eq!(str_attr(&b[0], "gen_ai.tool.call.result"), r#""ok""#);
        assert!(str_attr(&b[2], "gen_ai.input.messages").contains("fix it"));
        assert!(str_attr(&b[2], "gen_ai.output.messages").contains("done"));
        assert_eq!(
            turn_ids("S", 1, "2").traceparent(),
            format!(
                "00-{}-{}-01",
                hex::encode(turn_ids("S", 1, "2").trace_id),
                hex::encode(turn_ids("S", 1, "2").span_id)
            )
        );
        assert_ne!(turn_ids("S", 1, "2"), turn_ids("T", 1, "2"));
        assert_ne!(turn_ids("S", 1, "2"), turn_ids("S", 2, "2"));
    }

    #[test]
    fn a_v2_turn_ends_at_the_agents_idle_state_with_its_tool_calls_and_usage() {
        let lines = [
            (Side::Client, r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"fix it"}]}}"#.to_string()),
            (Side::Agent, r#"{"jsonrpc":"2.0","id":2,"result":{"messageId":"m1"}}"#.to_string()),
            (Side::Agent, update(r#"{"sessionUpdate":"state_update","state":"running"}"#)),
            (Side::Agent, update(r#"{"sessionUpdate":"tool_call_update","toolCallId":"c1","title":"Read a.rs","kind":"read","status":"in_progress"}"#)),
            (Side::Agent, update(r#"{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed"}"#)),
            (Side::Agent, update(r#"{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn","usage":{"inputTokens":10,"outputTokens":5,"totalTokens":15}}"#)),
        ];
        let refs: Vec<(Side, &str)> = lines.iter().map(|(s, l)| (*s, l.as_str())).collect();
        let spans = feed(&refs, false);
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        let turn = spans.iter().find(|s| s.parent.is_none()).unwrap();
        assert_eq!(
            turn.attr("gen_ai.response.finish_reasons"),
            Some(&AttrValue::StrArray(vec!["end_turn".into()]))
        );
        assert_eq!(int_attr(turn, "gen_ai.usage.output_tokens"), 5);
        assert_eq!(turn.end_ns - turn.start_ns, 5_000_000, "prompt to idle");
        assert!(turn.attr("error.type").is_none());
    }

    #[test]
    fn a_subagent_is_an_invoke_agent_span_under_its_turn_with_its_tool_calls_under_it() {
        let child = |u: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"C","update":{u}}}}}"#
            )
        };
        let lines = [
            (Side::Client, r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"delegate"}]}}"#.to_string()),
            (Side::Agent, update(r#"{"sessionUpdate":"subagent_update","sessionId":"C","title":"Explore","state":{"state":"running"}}"#)),
            (Side::Agent, child(r#"{"sessionUpdate":"tool_call","toolCallId":"g1","title":"Grep","kind":"search"}"#)),
            (Side::Agent, child(r#"{"sessionUpdate":"tool_call_update","toolCallId":"g1","status":"completed"}"#)),
            (Side::Agent, child(r#"{"sessionUpdate":"tool_call","toolCallId":"g2","title":"Read"}"#)),
            (Side::Agent, child(r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"found it"}}"#)),
            (Side::Agent, update(r#"{"sessionUpdate":"subagent_update","sessionId":"C","state":{"state":"idle","stopReason":"end_turn","usage":{"inputTokens":7,"outputTokens":3}}}"#)),
            (Side::Agent, update(r#"{"sessionUpdate":"subagent_update","sessionId":"D","title":"Left running"}"#)),
            (Side::Agent, r#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}"#.to_string()),
        ];
        let lines: Vec<(Side, &str)> = lines.iter().map(|(s, l)| (*s, l.as_str())).collect();
        let spans = feed(&lines, true);
        let named = |name: &str| spans.iter().find(|s| s.name == name).unwrap();
        let turn = named("invoke_agent demo");
        let sub = named("invoke_agent Explore");
        assert_eq!(sub.parent, Some(turn.context.span_id));
        assert_eq!(sub.context.trace_id, turn.context.trace_id);
        assert_eq!(sub.kind, SpanKind::Internal);
        assert_eq!(sub.status, Status::Unset);
        assert_eq!(sub.attr("gen_ai.conversation.id"), Some(&s("C")));
        assert_eq!(
            sub.attr("gen_ai.usage.input_tokens"),
            Some(&AttrValue::Int(7))
        );
        assert_eq!(
            sub.attr("gen_ai.response.finish_reasons"),
            Some(&AttrValue::StrArray(vec!["end_turn".into()]))
        );
        assert!(
            matches!(sub.attr("gen_ai.output.messages"), Some(AttrValue::Str(m)) if m.contains("found it"))
        );
        for tool in ["execute_tool Grep", "execute_tool Read"] {
            assert_eq!(named(tool).parent, Some(sub.context.span_id), "{tool}");
        }
        assert_eq!(
            turn.attr("gen_ai.usage.input_tokens"),
            None,
            "the child's tokens are its own"
        );
        let left = named("invoke_agent Left running");
        assert_eq!(left.attr("error.type"), Some(&s("unfinished")));
    }
}
