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

use super::span::{
    AttrValue, Attributes, Span, SpanContext, SpanEvent, SpanKind, Status, child_span_id,
    tool_span_id, turn_ids,
};
use crate::acp::{permission_choice, prompt_text, subagents};
use crate::journal::{Body, Event as JournalEvent, Record};
use crate::wire::Side;

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
#[path = "spans_tests.rs"]
mod tests;
