//! A semantic difference of two recordings, turn by turn.
//!
//! Each prompt turn is summarized: the agent's messages (chunks joined, split by `messageId`
//! where the agent sets one, else by what interrupts them), its tool calls (merged from
//! `tool_call` and `tool_call_update`, keyed by `toolCallId`), the permission options chosen, and
//! how the turn ended. Sessions are paired in order, turns by number, tool calls by ID and
//! otherwise by position. Latency shifts are reported but are not a difference category.

use std::collections::HashMap;
use std::fmt;

use serde::Serialize;
use serde_json::Value;

use super::matching;
use super::recording::{AgentStep, Exchange, Recording, SessionRecording};

/// What kind of difference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    /// Agent message text, prompts, and the number of turns.
    Text,
    /// Tool calls: kind, title, status, locations; the permission options chosen.
    Tools,
    /// Stop reasons and error responses.
    Errors,
    /// The agent's `initialize` answer: protocol version, capabilities, auth methods.
    Capabilities,
}

/// One difference.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Change {
    /// Its category.
    pub category: Category,
    /// Session number (1-based, in recording order), 0 for connection-level differences.
    pub session: usize,
    /// Turn number (1-based), 0 outside turns.
    pub turn: usize,
    /// What differs, one human-readable line (or a few for text).
    pub what: String,
}

/// A turn taking markedly longer or shorter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LatencyShift {
    /// Session number.
    pub session: usize,
    /// Turn number.
    pub turn: usize,
    /// Duration in the first recording, milliseconds.
    pub before_ms: u64,
    /// Duration in the second, milliseconds.
    pub after_ms: u64,
}

/// The result of a diff.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Diff {
    /// The differences, in order.
    pub changes: Vec<Change>,
    /// Turns whose duration changed by more than 2× and 100 ms.
    pub latency: Vec<LatencyShift>,
}

impl Diff {
    /// Whether a difference of `category` was found.
    pub fn has(&self, category: Category) -> bool {
        self.changes.iter().any(|c| c.category == category)
    }
}

/// A tool call's final state.
#[derive(Clone, Debug, Default, PartialEq)]
struct Tool {
    id: String,
    kind: Option<String>,
    title: Option<String>,
    status: Option<String>,
    locations: Vec<String>,
}

/// What one prompt turn did (or one subagent in it: its title, the messages it was sent as
/// its prompt, its end state as its end).
#[derive(Clone, Debug, Default, PartialEq)]
struct Turn {
    prompt: String,
    messages: Vec<String>,
    tools: Vec<Tool>,
    permissions: Vec<String>,
    end: String,
    duration_us: Option<u64>,
    /// A subagent's title.
    title: String,
    /// The subagents it started, in the order they were announced.
    children: Vec<Turn>,
}

/// Builds turns from the agent's messages.
#[derive(Default)]
struct TurnBuilder {
    turn: Turn,
    message_open: bool,
    message_id: Option<String>,
    tools: HashMap<String, usize>,
    /// ACP v2: the agent took the prompt (sent at this time); the turn ends with its idle
    /// `state_update`.
    taken_at: Option<u64>,
    /// The subagents announced, and where each is in `children`.
    children: Vec<TurnBuilder>,
    child_index: HashMap<String, usize>,
    /// 0 for a turn, 1 for its subagents…
    depth: usize,
}

/// The most subagents a turn's summary keeps at each level.
const CHILD_LIMIT: usize = 1024;

/// The deepest subagent a turn's summary keeps (a subagent's subagent is 2): the summaries and
/// their comparison recurse this deep at most.
const DEPTH_LIMIT: usize = 8;

impl TurnBuilder {
    /// The turn, its subagents' work in it.
    fn finish(self) -> Turn {
        let mut turn = self.turn;
        turn.children = self.children.into_iter().map(TurnBuilder::finish).collect();
        turn
    }

    /// A subagent (by session ID) this turn, or one of its subagents, announced.
    fn child(&mut self, id: &str) -> Option<&mut TurnBuilder> {
        if let Some(i) = self.child_index.get(id) {
            return self.children.get_mut(*i);
        }
        self.children.iter_mut().find_map(|c| c.child(id))
    }

    /// A subagent's announcement or state, on the session `on` (this turn's, or a subagent's).
    fn subagent(&mut self, on: Option<&str>, update: &Value) -> bool {
        let Some(u) = crate::acp::subagents::child_update(update) else {
            return false;
        };
        let parent = match on.filter(|s| self.child(s).is_some()) {
            Some(s) => self.child(s).expect("found"),
            None => self,
        };
        if parent.child(u.child).is_none()
            && parent.children.len() < CHILD_LIMIT
            && parent.depth < DEPTH_LIMIT
        {
            parent
                .child_index
                .insert(u.child.to_string(), parent.children.len());
            parent.children.push(TurnBuilder {
                depth: parent.depth + 1,
                ..TurnBuilder::default()
            });
        }
        if let Some(child) = parent.child(u.child) {
            match (u.title, u.description) {
                (Some(title), _) => child.turn.title = title.to_string(),
                (None, Some(about)) if child.turn.title.is_empty() => {
                    child.turn.title = about.to_string();
                }
                _ => {}
            }
            if let Some(state) = u.state.filter(|s| s.is_end()) {
                child.turn.end = state.word().to_string();
            }
        }
        true
    }

    fn step(&mut self, step: &AgentStep) {
        let Ok(msg) = serde_json::from_slice::<Value>(&step.line) else {
            return;
        };
        let on = msg["params"]["sessionId"].as_str();
        if self.subagent(on, &msg["params"]["update"]) {
            self.message_open = false;
            return;
        }
        // A subagent's own lines (journaled with its root) are its own work.
        if let Some(child) = on.and_then(|s| self.child(s)) {
            if msg["params"]["update"]["sessionUpdate"] == "session_message" {
                let text = crate::acp::prompt_text(&msg["params"]["update"]["content"]);
                child.turn.prompt.push_str(&text);
                return;
            }
            return child.step(step);
        }
        if let Some(request) = &step.request {
            if request.method == "session/request_permission" {
                let chosen = request
                    .answer
                    .as_ref()
                    .map(|a| {
                        crate::acp::permission_choice(&a["result"]["outcome"])
                            .unwrap_or("(error)")
                            .to_string()
                    })
                    .unwrap_or_else(|| "(unanswered)".into());
                self.turn.permissions.push(chosen);
            }
            self.message_open = false;
            return;
        }
        let update = &msg["params"]["update"];
        match update["sessionUpdate"].as_str() {
            Some("state_update") if update["state"] == "idle" => {
                self.message_open = false;
                if let (Some(sent), Some(reason)) = (self.taken_at, update["stopReason"].as_str()) {
                    self.taken_at = None;
                    self.turn.end = reason.to_string();
                    self.turn.duration_us = Some(step.at_us.saturating_sub(sent));
                }
            }
            Some("agent_message_chunk") => {
                let id = update["messageId"].as_str().map(str::to_string);
                if !self.message_open || (id.is_some() && id != self.message_id) {
                    self.turn.messages.push(String::new());
                    self.message_open = true;
                    self.message_id = id;
                }
                if let (Some(last), Some(text)) = (
                    self.turn.messages.last_mut(),
                    update["content"]["text"].as_str(),
                ) {
                    last.push_str(text);
                }
            }
            Some("tool_call" | "tool_call_update") => {
                self.message_open = false;
                let id = update["toolCallId"].as_str().unwrap_or("").to_string();
                let at = *self.tools.entry(id.clone()).or_insert_with(|| {
                    self.turn.tools.push(Tool {
                        id,
                        ..Tool::default()
                    });
                    self.turn.tools.len() - 1
                });
                let tool = &mut self.turn.tools[at];
                let text = |v: &Value| v.as_str().map(str::to_string);
                if let Some(kind) = text(&update["kind"]) {
                    tool.kind = Some(kind);
                }
                if let Some(title) = text(&update["title"]) {
                    tool.title = Some(title);
                }
                if let Some(status) = text(&update["status"]) {
                    tool.status = Some(status);
                }
                if let Some(locations) = update["locations"].as_array() {
                    tool.locations = locations
                        .iter()
                        .filter_map(|l| l["path"].as_str().map(str::to_string))
                        .collect();
                }
            }
            Some("agent_thought_chunk") => {}
            Some(_) => self.message_open = false,
            None => {}
        }
    }

    fn ended(&mut self, exchange: &Exchange) {
        let response = exchange.response_value();
        if let Some(v) = &response
            && v["result"].get("stopReason").is_none()
            && v["result"].get("messageId").is_some()
        {
            // ACP v2: taken, not ended.
            self.taken_at = Some(exchange.at_us);
            self.turn.end = "(the turn did not end)".to_string();
            return;
        }
        self.turn.end = match response {
            Some(v) if v.get("error").is_some() => format!(
                "error {}: {}",
                v["error"]["code"],
                v["error"]["message"].as_str().unwrap_or("")
            ),
            Some(v) => v["result"]["stopReason"]
                .as_str()
                .unwrap_or("(no stop reason)")
                .to_string(),
            None => "(no response recorded)".to_string(),
        };
        self.turn.duration_us = exchange
            .response
            .as_ref()
            .map(|(at, _)| at.saturating_sub(exchange.at_us));
    }
}

fn turns(session: &SessionRecording) -> Vec<Turn> {
    let mut out = Vec::new();
    let mut builder: Option<TurnBuilder> = None;
    for exchange in &session.exchanges {
        if exchange.method == "session/prompt" {
            if let Some(done) = builder.take() {
                out.push(done.finish());
            }
            let mut next = TurnBuilder::default();
            next.turn.prompt = crate::acp::prompt_text(&exchange.params["prompt"]);
            builder = Some(next);
        }
        let Some(b) = builder.as_mut() else {
            continue;
        };
        for step in &exchange.during {
            b.step(step);
        }
        if exchange.method == "session/prompt" {
            b.ended(exchange);
        }
        for step in &exchange.after {
            b.step(step);
        }
    }
    out.extend(builder.map(TurnBuilder::finish));
    out
}

/// Compare two recordings.
pub fn diff(a: &Recording, b: &Recording) -> Diff {
    let mut out = Diff::default();
    let result = |r: &Recording| {
        r.initialize_response
            .as_ref()
            .map(|v| v["result"].clone())
            .unwrap_or(Value::Null)
    };
    for d in matching::compare(&result(a), &result(b)) {
        out.changes.push(Change {
            category: Category::Capabilities,
            session: 0,
            turn: 0,
            what: format!("initialize: {}: {} → {}", d.path, d.recorded, d.live),
        });
    }
    if a.sessions.len() != b.sessions.len() {
        out.changes.push(Change {
            category: Category::Text,
            session: 0,
            turn: 0,
            what: format!("{} sessions → {}", a.sessions.len(), b.sessions.len()),
        });
    }
    for (n, (sa, sb)) in a.sessions.iter().zip(&b.sessions).enumerate() {
        session_diff(n + 1, &turns(sa), &turns(sb), &mut out);
    }
    out
}

fn session_diff(session: usize, a: &[Turn], b: &[Turn], out: &mut Diff) {
    if a.len() != b.len() {
        out.changes.push(Change {
            category: Category::Text,
            session,
            turn: 0,
            what: format!("{} turns → {}", a.len(), b.len()),
        });
    }
    for (i, (ta, tb)) in a.iter().zip(b).enumerate() {
        let turn = i + 1;
        turn_diff(ta, tb, "", &mut |category, what| {
            out.changes.push(Change {
                category,
                session,
                turn,
                what,
            });
        });
        if let (Some(x), Some(y)) = (ta.duration_us, tb.duration_us) {
            let (x, y) = (x / 1000, y / 1000);
            if x.abs_diff(y) > 100 && (x > 2 * y || y > 2 * x) {
                out.latency.push(LatencyShift {
                    session,
                    turn,
                    before_ms: x,
                    after_ms: y,
                });
            }
        }
    }
}

/// What differs between two turns (or two subagents' work: `of` names them), and between
/// their subagents, paired in the order they were announced.
fn turn_diff(ta: &Turn, tb: &Turn, of: &str, change: &mut dyn FnMut(Category, String)) {
    if !matching::same_text(&ta.prompt, &tb.prompt) {
        change(
            Category::Text,
            format!("{of}prompt:\n  - {}\n  + {}", ta.prompt, tb.prompt),
        );
    }
    for m in 0..ta.messages.len().max(tb.messages.len()) {
        let (x, y) = (ta.messages.get(m), tb.messages.get(m));
        let same = match (x, y) {
            (Some(x), Some(y)) => matching::same_text(x, y),
            _ => x == y,
        };
        if !same {
            let show =
                |s: Option<&String>| s.map_or("(none)".to_string(), |s| s.trim().to_string());
            change(
                Category::Text,
                format!(
                    "{of}agent message {}:\n  - {}\n  + {}",
                    m + 1,
                    show(x),
                    show(y)
                ),
            );
        }
    }
    tool_diff(ta, tb, &mut |what| {
        change(Category::Tools, format!("{of}{what}"));
    });
    if ta.permissions != tb.permissions {
        change(
            Category::Tools,
            format!(
                "{of}permission choices: {:?} → {:?}",
                ta.permissions, tb.permissions
            ),
        );
    }
    if ta.end != tb.end {
        change(
            Category::Errors,
            format!("{of}ended: {} → {}", ta.end, tb.end),
        );
    }
    if ta.children.len() != tb.children.len() {
        change(
            Category::Text,
            format!(
                "{of}subagents: {} → {}",
                ta.children.len(),
                tb.children.len()
            ),
        );
    }
    for (n, (ca, cb)) in ta.children.iter().zip(&tb.children).enumerate() {
        if !matching::same_text(&ca.title, &cb.title) {
            change(
                Category::Text,
                format!(
                    "{of}subagent {}: title {:?} → {:?}",
                    n + 1,
                    ca.title,
                    cb.title
                ),
            );
        }
        let of = format!("{of}subagent {} ({}): ", n + 1, ca.title);
        turn_diff(ca, cb, &of, change);
    }
}

/// Pair tool calls by ID, the rest by position, and report what differs.
fn tool_diff(a: &Turn, b: &Turn, change: &mut impl FnMut(String)) {
    let in_b: HashMap<&str, &Tool> = b.tools.iter().map(|t| (t.id.as_str(), t)).collect();
    let in_a: HashMap<&str, &Tool> = a.tools.iter().map(|t| (t.id.as_str(), t)).collect();
    let mut pairs: Vec<(Option<&Tool>, Option<&Tool>)> = Vec::new();
    let unpaired_a: Vec<&Tool> = a
        .tools
        .iter()
        .filter(|t| !in_b.contains_key(t.id.as_str()))
        .collect();
    let unpaired_b: Vec<&Tool> = b
        .tools
        .iter()
        .filter(|t| !in_a.contains_key(t.id.as_str()))
        .collect();
    for t in &a.tools {
        if let Some(other) = in_b.get(t.id.as_str()) {
            pairs.push((Some(t), Some(other)));
        }
    }
    for i in 0..unpaired_a.len().max(unpaired_b.len()) {
        pairs.push((unpaired_a.get(i).copied(), unpaired_b.get(i).copied()));
    }
    for (x, y) in pairs {
        match (x, y) {
            (Some(x), Some(y)) => {
                let name = x.title.as_deref().unwrap_or(&x.id);
                let field = |f: &str, p: &Option<String>, q: &Option<String>| {
                    (p != q).then(|| format!("{f} {} → {}", show(p), show(q)))
                };
                let mut parts: Vec<String> = [
                    field("kind", &x.kind, &y.kind),
                    field("title", &x.title, &y.title),
                    field("status", &x.status, &y.status),
                ]
                .into_iter()
                .flatten()
                .collect();
                if x.locations != y.locations {
                    parts.push(format!("locations {:?} → {:?}", x.locations, y.locations));
                }
                if !parts.is_empty() {
                    change(format!("tool call {name:?}: {}", parts.join(", ")));
                }
            }
            (Some(x), None) => change(format!("tool call {:?} is gone", label(x))),
            (None, Some(y)) => change(format!("tool call {:?} is new", label(y))),
            (None, None) => {}
        }
    }
}

fn show(v: &Option<String>) -> String {
    v.as_deref()
        .map_or("(none)".to_string(), |s| format!("{s:?}"))
}

fn label(t: &Tool) -> &str {
    t.title.as_deref().unwrap_or(&t.id)
}

impl fmt::Display for Diff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.changes {
            let category = format!("{:?}", c.category).to_lowercase();
            match (c.session, c.turn) {
                (0, _) => writeln!(f, "[{category}] {}", c.what)?,
                (s, 0) => writeln!(f, "[{category}] session {s}: {}", c.what)?,
                (s, t) => writeln!(f, "[{category}] session {s}, turn {t}: {}", c.what)?,
            }
        }
        for l in &self.latency {
            writeln!(
                f,
                "[latency] session {}, turn {}: {} ms → {} ms",
                l.session, l.turn, l.before_ms, l.after_ms
            )?;
        }
        let count = |c: Category| self.changes.iter().filter(|x| x.category == c).count();
        write!(
            f,
            "{} differences: text {}, tools {}, errors {}, capabilities {}",
            self.changes.len(),
            count(Category::Text),
            count(Category::Tools),
            count(Category::Errors),
            count(Category::Capabilities)
        )
    }
}
