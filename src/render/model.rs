//! What a session's records mean, as a stream of timeline events that every renderer consumes.
//!
//! [`Timeline`] pairs each request with its response, numbers and times the prompt turns,
//! coalesces message and thought chunks into paragraphs (a paragraph is closed by
//! [`Event::ParagraphEnd`] before the next event that is not a chunk of the same kind), and
//! remembers tool call titles for updates that carry only the id. It holds only what is still
//! open (pending requests, the current turn's tool call titles) and the child sessions
//! (subagents) announced, so memory stays flat however long the session. It never fails:
//! records it does not understand produce no event.
//!
//! A child session's updates (journaled with its root) are told as the child's: an
//! [`Event::Scope`] says whose the events that follow are (a subagent's, with its depth and
//! title, or the session's own again), and a subagent's announcement and state are
//! [`Event::Subagent`]s of its parent.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::Value;

use super::chunk::ChunkKind;
use crate::acp::{permission_choice, prompt_text, subagents};
use crate::journal::{Body, Event as JournalEvent, Record};

use crate::wire::Side;

/// Whose text a chunk is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Voice {
    /// The agent's message to the user.
    Agent,
    /// The agent's reasoning.
    Thought,
    /// A message one session sends another (`session_message_chunk`).
    Message,
    /// A compaction's summary (`compaction_summary_chunk`).
    Summary,
    /// A tool's or a terminal's output (v2 `tool_call_content_chunk`, `terminal_output_chunk`).
    Output,
}

/// An option offered by a permission request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PermissionOption {
    /// `optionId`, the value the client answers with.
    pub id: String,
    /// The label shown to the user.
    pub name: String,
}

/// A tool call (`tool_call`) or an update of one (`tool_call_update`).
#[derive(Clone, Copy, Debug)]
pub struct ToolCall<'a> {
    /// `toolCallId`.
    pub id: &'a str,
    /// The title, remembered from the call when an update has none (else the id).
    pub title: &'a str,
    /// `kind` (`read`, `edit`, `execute`…), when this message carries one.
    pub kind: Option<&'a str>,
    /// `status`: `pending` by default for a new call, empty for an update that does not change it.
    pub status: &'a str,
    /// True for `tool_call`, false for `tool_call_update`.
    pub new: bool,
    /// The whole update: `locations`, `content` (text, diffs, terminals), `rawInput`, `rawOutput`.
    pub update: &'a Value,
}

impl ToolCall<'_> {
    /// The `diff` content blocks of this message.
    pub fn diffs(&self) -> impl Iterator<Item = &Value> {
        self.update["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["type"] == "diff")
    }

    /// The paths (with `:line` when given) of `locations`.
    pub fn locations(&self) -> impl Iterator<Item = String> + '_ {
        self.update["locations"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| {
                let path = l["path"].as_str()?;
                Some(match l["line"].as_u64() {
                    Some(line) => format!("{path}:{line}"),
                    None => path.to_string(),
                })
            })
    }
}

/// One thing that happened in the session, in journal order.
#[derive(Clone, Debug)]
pub enum Event<'a> {
    /// The client set a session up: `session/new`, `session/load` or `session/resume`.
    Setup {
        /// The method.
        method: &'a str,
        /// The working directory asked for.
        cwd: &'a str,
    },
    /// The agent named the new session.
    Session(&'a str),
    /// A prompt turn begins: the user's prompt.
    TurnStart {
        /// 1 for the first prompt of the session (counting every run).
        number: u64,
        /// The prompt's content blocks as text (`[kind uri]` for blocks that are not text).
        prompt: String,
    },
    /// A user message chunk (agents send them when they replay a loaded session).
    User(&'a str),
    /// Agent or thought text. The first chunk of a paragraph has `first` set.
    Chunk {
        /// Message or thought.
        voice: Voice,
        /// The text.
        text: &'a str,
        /// True when this chunk opens a paragraph.
        first: bool,
    },
    /// The open paragraph ends.
    ParagraphEnd,
    /// A tool call or an update of one.
    Tool(ToolCall<'a>),
    /// A request from the agent to the client's file system or terminals.
    ClientCall {
        /// `fs/…` or `terminal/…`.
        method: &'a str,
        /// The path or command it is about.
        target: &'a str,
    },
    /// The agent asks the client's permission for a tool call (the answer follows as
    /// [`Event::Permission`]).
    PermissionAsked {
        /// The title of the tool call that asks.
        title: &'a str,
        /// What the agent offers.
        options: &'a [PermissionOption],
    },
    /// The client answered a permission request.
    Permission {
        /// The title of the tool call that asked.
        title: &'a str,
        /// The chosen `optionId`, or the outcome (`cancelled`) when none was chosen.
        choice: &'a str,
        /// What the agent offered.
        options: &'a [PermissionOption],
    },
    /// The agent's plan (the whole `plan` update).
    Plan(&'a Value),
    /// The session mode changed: asked by the client or announced by the agent.
    Mode(&'a str),
    /// Configuration options were set: `(id, value)`.
    Config(Vec<(&'a str, &'a Value)>),
    /// The session got a title.
    Title(&'a str),
    /// The user cancelled the turn.
    Cancelled,
    /// A request failed.
    Failed {
        /// Its method.
        method: &'a str,
        /// The JSON-RPC error code.
        code: &'a Value,
        /// The error message.
        message: &'a str,
    },
    /// A prompt turn ended.
    TurnEnd {
        /// The turn's number.
        number: u64,
        /// `stopReason`, or `None` when the prompt failed (a [`Event::Failed`] came first).
        stop_reason: Option<&'a str>,
        /// From the prompt to its response.
        seconds: f64,
    },
    /// A line that is not JSON.
    NotJson {
        /// Who sent it.
        from: Side,
        /// The line, lossily decoded.
        text: Cow<'a, str>,
    },
    /// The proxy served a `session/load` from the journal.
    Replayed {
        /// How many updates it replayed.
        updates: u64,
        /// The agent's own load failed first with this error (`code message`): the editor
        /// never saw it.
        agent_failed: Option<&'a str>,
    },
    /// The proxy continued the session on a new agent session.
    Continued {
        /// The agent's session ID.
        agent_session: &'a str,
    },
    /// The agent exited (`code`) while the editor was connected, and was started again.
    Restarted {
        /// Its exit code.
        code: i32,
    },
    /// The bridge's connection to the host dropped; it connects again.
    HostDropped,
    /// The session was brought up again on the restarted agent (or on the host the bridge
    /// connected to again), by `how` (a method).
    Restored {
        /// `session/resume`, `session/load` or `session/new`.
        how: &'a str,
        /// The agent's new session it goes on under, when it is one.
        agent_session: Option<&'a str>,
        /// On the host (the bridge connected again), not on a restarted agent.
        host: bool,
    },
    /// The agent was silent on a prompt past `--stall-timeout`: the proxy cancelled it
    /// (`cancel`) or, still silent, restarted the agent (`restart`).
    Stalled {
        /// What the proxy did.
        action: &'a str,
    },
    /// The session is a fork of another (`acp-journal fork`).
    Forked {
        /// The session it was forked from.
        parent: &'a str,
        /// Prompt turns kept.
        turns: u64,
        /// The `messageId` it was forked at, if any.
        message: Option<&'a str>,
    },
    /// The proxy added its history server to the agent's setup (`--offer-history`).
    Offered {
        /// The entry: its name, command and arguments, in one line.
        server: String,
    },
    /// The journal is a bundle (`acp-journal bundle`): what its manifest says, in one line.
    Bundle {
        /// Agent, client, turns kept, values redacted, who made it where.
        summary: String,
    },
    /// The events that follow are a child session's (a subagent's), or, at depth 0, the
    /// session's own again.
    Scope {
        /// 0 for the session itself, 1 for its subagents, 2 for theirs…
        depth: usize,
        /// The child's session ID (empty at depth 0).
        session: &'a str,
        /// The child's title (empty at depth 0).
        title: &'a str,
    },
    /// A child session (a subagent) was announced, or its state changed (told in its parent).
    Subagent {
        /// Its session ID.
        session: &'a str,
        /// Its title (its ID when it has none).
        title: &'a str,
        /// What it is for, when announced with it.
        description: Option<&'a str>,
        /// Its state in a word, when this update reports one.
        state: Option<&'a str>,
        /// The first word of it.
        first: bool,
        /// Its work ended: how long it took since it was announced.
        seconds: Option<f64>,
    },
    /// A message one session sent another (`session_message`), told once, where it arrived.
    Message {
        /// The sender (a subagent's title, or `the session`).
        from: String,
        /// The recipient.
        to: String,
        /// Its text.
        text: String,
    },
    /// A background task (`async_task_*`).
    Task {
        /// Its name.
        name: &'a str,
        /// `running` when spawned, else its state as sent.
        state: &'a str,
        /// Its progress summary or description, when this update has one.
        detail: Option<&'a str>,
    },
    /// A compaction of the context (its summary follows as [`Voice::Summary`] chunks, or is
    /// here when the update carries it whole).
    Compaction {
        /// `in_progress`, `completed`…
        status: &'a str,
        /// Its summary, when the update carries it.
        summary: String,
    },
    /// Information for the user that is not part of the session's history (`notice`).
    Notice {
        /// `info`, `warning`, `error`…
        severity: &'a str,
        /// Its title.
        title: &'a str,
        /// Its description.
        description: Option<&'a str>,
    },
    /// The context window used, and the cost (`usage_update`).
    Usage {
        /// Tokens in the context.
        used: Option<u64>,
        /// The window.
        size: Option<u64>,
        /// `0.25 USD`.
        cost: Option<String>,
    },
    /// The agent removed its plan.
    PlanRemoved,
    /// An agent-owned terminal (ACP v2 `terminal_update`).
    Terminal {
        /// Its command, when given.
        command: Option<&'a str>,
        /// How it ended, when it did.
        exit: Option<String>,
    },
}

/// One line about a bundle manifest.
fn bundle_summary(m: &Value) -> String {
    let who = |v: &Value| match (v["name"].as_str(), v["version"].as_str()) {
        (Some(name), Some(version)) => format!("{name} {version}"),
        (Some(name), None) => name.to_string(),
        _ => "(unnamed)".to_string(),
    };
    let redacted = m["redacted"].as_array().map_or(0, Vec::len);
    format!(
        "bundle: agent {}, client {}, {} of {} turns, {redacted} values redacted, made by {} on {}",
        who(&m["agent"]),
        who(&m["client"]),
        m["turns"],
        m["turns_recorded"],
        m["bundled_by"].as_str().unwrap_or("?"),
        m["os"].as_str().unwrap_or("?"),
    )
}

/// A consumer of timeline events: a renderer.
pub trait Render {
    /// Take one event.
    ///
    /// # Errors
    /// Write errors.
    fn event(&mut self, event: &Event<'_>) -> std::io::Result<()>;
}

/// A request waiting for its response.
struct Pending {
    method: String,
    /// The proxy sent it (to bring a session up underneath): not the client's doing.
    proxy: bool,
    /// The text a `_session/steering` request adds to the running turn.
    steering: Option<String>,
    /// The tool call title of a permission request.
    title: String,
    options: Vec<PermissionOption>,
    turn: u64,
    mono_us: u64,
    /// The child session it was sent in, if any.
    child: Option<String>,
}

/// A child session (a subagent) the timeline met.
struct Child {
    title: String,
    depth: usize,
    /// When it was announced (monotonic microseconds), for its duration.
    since: u64,
}

/// The most child sessions a timeline keeps.
const CHILD_LIMIT: usize = 65_536;

/// The deepest a subagent is shown (a subagent's subagent is depth 2); deeper ones are shown
/// at this depth, so a hostile journal cannot make every line wider than the last.
const DEPTH_LIMIT: usize = 8;

/// Turns records into [`Event`]s.
#[derive(Default)]
pub struct Timeline {
    /// Pending requests by (sender, id).
    pending: HashMap<(Side, String), Pending>,
    /// Tool call titles by id, for updates that only carry the id (forgotten at turn end).
    titles: HashMap<String, String>,
    /// The paragraph being written.
    open: Option<Voice>,
    /// Prompt turns started so far.
    turns: u64,
    /// What the last record left for the next one to complete.
    held: Option<Held>,
    /// ACP v2: the turn whose prompt the agent took (its number and when it was sent); its
    /// end is the agent's `state_update` to `idle`.
    taken: Option<(u64, u64)>,
    /// ACP v2: a prompt was sent whose echo (the agent's `user_message`) has not come yet.
    echo: bool,
    /// ACP v2: the agent streamed message chunks in this turn (its `agent_message` upserts
    /// repeat them).
    streamed: bool,
    /// The last restart was the bridge's connection to the host, not an agent process.
    host: bool,
    /// The child sessions announced, by ID.
    children: HashMap<String, Child>,
    /// The names of the background tasks still running, by ID (their later updates have none).
    tasks: HashMap<String, String>,
    /// Whose events were told last: a child's ID, or `None` for the session's own.
    scope: Option<String>,
}

/// A fact told together with the one that follows it (one line for one thing that happened),
/// or on its own if that does not come.
enum Held {
    /// The agent's error on the client's load, which the proxy consumed: a `replayed` event
    /// next says the journal served it.
    Refused {
        method: String,
        code: Value,
        message: String,
    },
    /// The session went on under a new agent session: a `session_restored` event next says it
    /// was a restore.
    Continued(String),
}

impl Timeline {
    /// A timeline before the first record.
    pub fn new() -> Timeline {
        Timeline::default()
    }

    fn emit(&mut self, sink: &mut dyn Render, event: &Event<'_>) -> std::io::Result<()> {
        let continues = matches!(event, Event::Chunk { voice, .. } if Some(*voice) == self.open);
        if !continues && self.open.is_some() {
            self.open = None;
            sink.event(&Event::ParagraphEnd)?;
        }
        if let Event::Chunk { voice, .. } = event {
            self.open = Some(*voice);
        }
        sink.event(event)
    }

    /// Tell what was held on its own: what would have completed it did not come.
    fn tell_held(&mut self, sink: &mut dyn Render) -> std::io::Result<()> {
        if self.held.is_some() {
            // What the proxy did is the session's.
            self.enter(None, sink)?;
        }
        match self.held.take() {
            None => Ok(()),
            Some(Held::Refused {
                method,
                code,
                message,
            }) => self.emit(
                sink,
                &Event::Failed {
                    method: &method,
                    code: &code,
                    message: &message,
                },
            ),
            Some(Held::Continued(agent_session)) => self.emit(
                sink,
                &Event::Continued {
                    agent_session: &agent_session,
                },
            ),
        }
    }

    /// Interpret one record, handing its events to `sink`.
    ///
    /// # Errors
    /// The sink's write errors.
    pub fn record(&mut self, record: &Record, sink: &mut dyn Render) -> std::io::Result<()> {
        let completes = matches!(
            (&self.held, &record.body),
            (
                Some(Held::Refused { .. }),
                Body::Event(JournalEvent::Replayed { .. })
            ) | (
                Some(Held::Continued(_)),
                Body::Event(JournalEvent::SessionRestored { .. })
            )
        );
        if !completes {
            self.tell_held(sink)?;
        }
        let (from, payload) = match &record.body {
            Body::Message { from, payload } => (*from, payload),
            Body::Stderr(_) => return Ok(()),
            Body::Event(event) => return self.proxy_event(event, sink),
        };
        // Most lines are message chunks: read those without building a `Value`.
        if let Some(chunk) = super::chunk::chunk(&payload.bytes) {
            let child = self.child_of(chunk.session.as_deref());
            self.enter(child, sink)?;
            return match chunk.kind {
                ChunkKind::User => self.emit(sink, &Event::User(&chunk.text)),
                ChunkKind::Agent => self.chunk(Voice::Agent, &chunk.text, sink),
                ChunkKind::Thought => self.chunk(Voice::Thought, &chunk.text, sink),
            };
        }
        let Ok(msg) = serde_json::from_slice::<Value>(&payload.bytes) else {
            let text = String::from_utf8_lossy(&payload.bytes);
            self.enter(None, sink)?;
            return self.emit(sink, &Event::NotJson { from, text });
        };
        let method = msg["method"].as_str().unwrap_or("");
        let id = msg.get("id").map(Value::to_string);
        // A child session's line is told as the child's; an answer as its request's.
        let child = match (method, &id) {
            ("", Some(id)) => self
                .pending
                .get(&(from.other(), id.clone()))
                .and_then(|p| p.child.clone()),
            _ => self.child_of(msg["params"]["sessionId"].as_str()),
        };
        self.enter(child, sink)?;
        match (method, id) {
            ("session/update", _) => self.update(&msg["params"], record.mono_us, sink),
            ("", Some(id)) => self.response(from, &id, &msg, record, payload.proxy, sink),
            (method, Some(id)) => self.request(
                from,
                method,
                id,
                &msg["params"],
                record,
                payload.proxy,
                sink,
            ),
            // The proxy's own cancels (a close, a stall) are told by their events.
            ("session/cancel", None) if !payload.proxy => self.emit(sink, &Event::Cancelled),
            _ => Ok(()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn request(
        &mut self,
        from: Side,
        method: &str,
        id: String,
        params: &Value,
        record: &Record,
        proxy: bool,
        sink: &mut dyn Render,
    ) -> std::io::Result<()> {
        let mut pending = Pending {
            method: method.to_string(),
            proxy,
            steering: None,
            title: String::new(),
            options: Vec::new(),
            turn: self.turns,
            mono_us: record.mono_us,
            child: self.scope.clone(),
        };
        if self.scope.is_some() {
            // A child's requests: its permission questions and client calls are told; it has
            // no prompt turns of its own.
            match (from, method) {
                (Side::Agent, "session/request_permission") => {}
                (Side::Agent, m) if m.starts_with("fs/") || m.starts_with("terminal/") => {}
                _ => {
                    self.pending.insert((from, id), pending);
                    return Ok(());
                }
            }
        }
        match (from, method) {
            (Side::Client, "session/prompt") => {
                self.turns += 1;
                pending.turn = self.turns;
                let prompt = prompt_text(&params["prompt"]);
                self.streamed = false;
                self.echo = true;
                self.emit(
                    sink,
                    &Event::TurnStart {
                        number: self.turns,
                        prompt,
                    },
                )?;
            }
            // The proxy's own setup underneath a load or a restore is told by its events.
            (Side::Client, "session/new" | "session/load" | "session/resume") if !proxy => {
                let cwd = params["cwd"].as_str().unwrap_or("?");
                self.emit(sink, &Event::Setup { method, cwd })?;
            }
            // User input into the running turn (a vendor extension): told when the agent takes it.
            (Side::Client, "_session/steering") => {
                pending.steering = Some(prompt_text(&params["prompt"]));
            }
            (Side::Client, "session/set_mode") => {
                self.emit(sink, &Event::Mode(params["modeId"].as_str().unwrap_or("?")))?;
            }
            (Side::Client, "session/set_config_option") => {
                let id = params["configId"].as_str().unwrap_or("?");
                self.emit(sink, &Event::Config(vec![(id, &params["value"])]))?;
            }
            (Side::Agent, "session/request_permission") => {
                pending.title = params["toolCall"]["title"]
                    .as_str()
                    .or_else(|| {
                        let id = params["toolCall"]["toolCallId"].as_str()?;
                        self.titles.get(id).map(String::as_str)
                    })
                    .unwrap_or("a tool call")
                    .to_string();
                pending.options = params["options"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|o| PermissionOption {
                        id: o["optionId"].as_str().unwrap_or("?").to_string(),
                        name: o["name"].as_str().unwrap_or("").to_string(),
                    })
                    .collect();
                self.emit(
                    sink,
                    &Event::PermissionAsked {
                        title: &pending.title,
                        options: &pending.options,
                    },
                )?;
            }
            (Side::Agent, m) if m.starts_with("fs/") || m.starts_with("terminal/") => {
                let target = params["path"]
                    .as_str()
                    .or(params["command"].as_str())
                    .unwrap_or("");
                self.emit(sink, &Event::ClientCall { method: m, target })?;
            }
            _ => {}
        }
        self.pending.insert((from, id), pending);
        Ok(())
    }

    fn response(
        &mut self,
        from: Side,
        id: &str,
        msg: &Value,
        record: &Record,
        proxy: bool,
        sink: &mut dyn Render,
    ) -> std::io::Result<()> {
        let mono_us = record.mono_us;
        let Some(pending) = self.pending.remove(&(from.other(), id.to_string())) else {
            return Ok(());
        };
        let method = pending.method.as_str();
        let result = &msg["result"];
        if let Some(error) = msg.get("error")
            && proxy
            && !pending.proxy
            && matches!(method, "session/load" | "session/resume")
        {
            // The agent's error on the client's load, which the proxy consumed: the load was
            // served from the journal (the `Replayed` event next says so) or failed.
            self.held = Some(Held::Refused {
                method: method.to_string(),
                code: error["code"].clone(),
                message: error["message"].as_str().unwrap_or("").to_string(),
            });
            return Ok(());
        }
        if let Some(error) = msg.get("error").filter(|_| !pending.proxy) {
            // (The proxy's own requests that fail are handled by the proxy: what the client
            // got is told by the answer to its request.)
            self.emit(
                sink,
                &Event::Failed {
                    method,
                    code: &error["code"],
                    message: error["message"].as_str().unwrap_or(""),
                },
            )?;
        }
        match method {
            // ACP v2: the agent took the prompt (its `messageId`); the turn ends with `idle`.
            "session/prompt"
                if msg.get("error").is_none()
                    && result.get("stopReason").is_none()
                    && result.get("messageId").is_some() =>
            {
                self.taken = Some((pending.turn, pending.mono_us));
                Ok(())
            }
            "session/prompt" => {
                self.titles.clear();
                let seconds = mono_us.saturating_sub(pending.mono_us) as f64 / 1e6;
                let stop_reason = match msg.get("error") {
                    Some(_) => None,
                    None => Some(result["stopReason"].as_str().unwrap_or("?")),
                };
                self.emit(
                    sink,
                    &Event::TurnEnd {
                        number: pending.turn,
                        stop_reason,
                        seconds,
                    },
                )
            }
            _ if msg.get("error").is_some() => Ok(()),
            "session/request_permission" => {
                let choice = permission_choice(&result["outcome"]).unwrap_or("?");
                self.emit(
                    sink,
                    &Event::Permission {
                        title: &pending.title,
                        choice,
                        options: &pending.options,
                    },
                )
            }
            "_session/steering" => match pending.steering.as_deref() {
                // Not taken: the client sends it as a prompt of its own.
                Some(_) if result["outcome"] == "promptRequired" => Ok(()),
                Some(text) => self.emit(sink, &Event::User(text)),
                None => Ok(()),
            },
            "session/new" if pending.proxy => Ok(()),
            "session/new" => match result["sessionId"].as_str() {
                Some(s) => self.emit(sink, &Event::Session(s)),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }

    fn update(
        &mut self,
        params: &Value,
        mono_us: u64,
        sink: &mut dyn Render,
    ) -> std::io::Result<()> {
        let update = &params["update"];
        let text = update["content"]["text"].as_str();
        match (update["sessionUpdate"].as_str().unwrap_or(""), text) {
            (kind, _) if subagents::CHILD_KINDS.contains(&kind) => {
                self.subagent(update, mono_us, sink)
            }
            ("session_message", _) => self.message(params, sink),
            ("session_message_chunk", Some(text)) => self.chunk(Voice::Message, text, sink),
            ("compaction_summary_chunk", Some(text)) => self.chunk(Voice::Summary, text, sink),
            ("tool_call_content_chunk", _) => match update["content"]["content"]["text"].as_str() {
                Some(text) => self.chunk(Voice::Output, text, sink),
                None => Ok(()),
            },
            ("terminal_output_chunk", _) => {
                use base64::Engine;
                let data = update["data"].as_str().unwrap_or("");
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .unwrap_or_default();
                self.chunk(Voice::Output, &String::from_utf8_lossy(&bytes), sink)
            }
            ("compaction_update", _) => self.emit(
                sink,
                &Event::Compaction {
                    status: update["status"].as_str().unwrap_or("?"),
                    summary: prompt_text(&update["summary"]),
                },
            ),
            ("notice", _) => self.emit(
                sink,
                &Event::Notice {
                    severity: update["severity"].as_str().unwrap_or("info"),
                    title: update["title"].as_str().unwrap_or(""),
                    description: update["description"].as_str(),
                },
            ),
            ("usage_update", _) => {
                let cost = match (
                    update["cost"]["amount"].as_f64(),
                    update["cost"]["currency"].as_str(),
                ) {
                    (Some(amount), Some(currency)) => Some(format!("{amount} {currency}")),
                    _ => None,
                };
                self.emit(
                    sink,
                    &Event::Usage {
                        used: update["used"].as_u64(),
                        size: update["size"].as_u64(),
                        cost,
                    },
                )
            }
            ("plan_removed", _) => self.emit(sink, &Event::PlanRemoved),
            ("terminal_update", _) => {
                let exit = update.get("exitStatus").filter(|e| e.is_object()).map(|e| {
                    match (e["exitCode"].as_i64(), e["signal"].as_str()) {
                        (Some(code), _) => format!("exit {code}"),
                        (None, Some(signal)) => format!("signal {signal}"),
                        (None, None) => "exited".to_string(),
                    }
                });
                self.emit(
                    sink,
                    &Event::Terminal {
                        command: update["command"].as_str(),
                        exit,
                    },
                )
            }
            (
                kind @ ("async_task_spawned" | "async_task_progress" | "async_task_state_update"),
                _,
            ) => self.task(kind, update, sink),
            ("user_message_chunk", Some(text)) => self.emit(sink, &Event::User(text)),
            ("agent_message_chunk", Some(text)) => self.chunk(Voice::Agent, text, sink),
            ("agent_thought_chunk", Some(text)) => self.chunk(Voice::Thought, text, sink),
            // ACP v2's whole-message upserts: the first user one after a prompt is the agent's
            // echo of it (told already, and as the client sent it: a re-primed prompt's echo
            // holds the transcript); the agent's repeat what it streamed.
            ("user_message", _) => {
                let text = prompt_text(&update["content"]);
                match std::mem::take(&mut self.echo) {
                    true => Ok(()),
                    false if text.is_empty() => Ok(()),
                    false => self.emit(sink, &Event::User(&text)),
                }
            }
            (kind @ ("agent_message" | "agent_thought"), _) if !self.streamed => {
                let text = prompt_text(&update["content"]);
                let voice = match kind {
                    "agent_message" => Voice::Agent,
                    _ => Voice::Thought,
                };
                match text.is_empty() {
                    true => Ok(()),
                    false => self.chunk(voice, &text, sink),
                }
            }
            // A child's state is told by its parent's `subagent_update` (ACP v2 repeats it on
            // the child's own stream).
            ("state_update", _) if self.scope.is_some() => Ok(()),
            ("state_update", _) if update["state"] == "idle" => {
                let Some((number, sent)) = self.taken.take() else {
                    return Ok(());
                };
                self.titles.clear();
                self.emit(
                    sink,
                    &Event::TurnEnd {
                        number,
                        stop_reason: Some(update["stopReason"].as_str().unwrap_or("?")),
                        seconds: mono_us.saturating_sub(sent) as f64 / 1e6,
                    },
                )
            }
            ("plan_update", _) => self.emit(sink, &Event::Plan(&update["plan"])),
            (kind @ ("tool_call" | "tool_call_update"), _) => {
                let id = update["toolCallId"].as_str().unwrap_or("?");
                // In a v2 turn there is no `tool_call`: a call's first upsert starts it.
                let new =
                    kind == "tool_call" || (self.taken.is_some() && !self.titles.contains_key(id));
                match update["title"].as_str() {
                    Some(title) => {
                        self.titles.insert(id.to_string(), title.to_string());
                    }
                    None if new => {
                        self.titles.insert(id.to_string(), id.to_string());
                    }
                    None => {}
                }
                let status = update["status"]
                    .as_str()
                    .unwrap_or(if new { "pending" } else { "" });
                let title = self.titles.get(id).map_or(id, String::as_str).to_string();
                let call = ToolCall {
                    id,
                    title: &title,
                    kind: update["kind"].as_str(),
                    status,
                    new,
                    update,
                };
                self.emit(sink, &Event::Tool(call))
            }
            ("plan", _) => self.emit(sink, &Event::Plan(update)),
            ("current_mode_update", _) => self.emit(
                sink,
                &Event::Mode(update["currentModeId"].as_str().unwrap_or("?")),
            ),
            ("config_option_update", _) => {
                let options = update["configOptions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|o| (o["id"].as_str().unwrap_or("?"), &o["currentValue"]))
                    .collect();
                self.emit(sink, &Event::Config(options))
            }
            // A child's title is its parent's to give (`subagent_update`).
            ("session_info_update", _) if self.scope.is_some() => Ok(()),
            // A title the agent made of a re-prime is not the session's.
            ("session_info_update", _) => match update["title"]
                .as_str()
                .filter(|t| !crate::acp::is_reprime_title(t))
            {
                Some(title) => self.emit(sink, &Event::Title(title)),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }

    /// The child session `session` names, if it is one this timeline met.
    fn child_of(&self, session: Option<&str>) -> Option<String> {
        session
            .filter(|s| self.children.contains_key(*s))
            .map(str::to_string)
    }

    /// The events that follow are `child`'s (`None`: the session's own): told when that
    /// changes, the open paragraph closed first.
    fn enter(&mut self, child: Option<String>, sink: &mut dyn Render) -> std::io::Result<()> {
        if child == self.scope {
            return Ok(());
        }
        if self.open.take().is_some() {
            sink.event(&Event::ParagraphEnd)?;
        }
        self.scope = child;
        let (depth, title) = match self.scope.as_ref().and_then(|c| self.children.get(c)) {
            Some(child) => (child.depth, child.title.as_str()),
            None => (0, ""),
        };
        let session = self.scope.as_deref().unwrap_or("");
        sink.event(&Event::Scope {
            depth,
            session,
            title,
        })
    }

    /// A child session's announcement or state, told in its parent.
    fn subagent(
        &mut self,
        update: &Value,
        mono_us: u64,
        sink: &mut dyn Render,
    ) -> std::io::Result<()> {
        let Some(u) = subagents::child_update(update) else {
            return Ok(());
        };
        let first = !self.children.contains_key(u.child);
        if first {
            if self.children.len() >= CHILD_LIMIT {
                return Ok(());
            }
            let depth = self
                .scope
                .as_ref()
                .and_then(|s| self.children.get(s))
                .map_or(1, |parent| (parent.depth + 1).min(DEPTH_LIMIT));
            let title = u.title.or(u.description).unwrap_or(u.child).to_string();
            let since = mono_us;
            self.children.insert(
                u.child.to_string(),
                Child {
                    title,
                    depth,
                    since,
                },
            );
        }
        let Some(child) = self.children.get_mut(u.child) else {
            return Ok(());
        };
        if let (false, Some(title)) = (first, u.title) {
            child.title = title.to_string();
        }
        if !first && u.state.is_none() && u.title.is_none() {
            return Ok(());
        }
        let seconds = u
            .state
            .filter(|s| s.is_end())
            .map(|_| mono_us.saturating_sub(child.since) as f64 / 1e6);
        let title = child.title.clone();
        self.emit(
            sink,
            &Event::Subagent {
                session: u.child,
                title: &title,
                description: u.description.filter(|_| first && u.title.is_some()),
                state: u.state.map(|s| s.word()),
                first,
                seconds,
            },
        )
    }

    /// A message between sessions, told once: in the view of the session it arrived in (an
    /// agent sends the sender's view too, linked to it).
    fn message(&mut self, params: &Value, sink: &mut dyn Render) -> std::io::Result<()> {
        let update = &params["update"];
        let here = params["sessionId"].as_str();
        let to = update["recipientSessionId"].as_str().or(here);
        if to != here && update.get("recipientMessageId").is_some() {
            return Ok(());
        }
        let name = |s: Option<&str>| match s.and_then(|s| self.children.get(s)) {
            Some(child) => child.title.clone(),
            None => "the session".to_string(),
        };
        let event = Event::Message {
            from: name(update["senderSessionId"].as_str()),
            to: name(to),
            text: prompt_text(&update["content"]),
        };
        self.emit(sink, &event)
    }

    /// A background task's spawn, progress or state.
    fn task(&mut self, kind: &str, update: &Value, sink: &mut dyn Render) -> std::io::Result<()> {
        let id = update["asyncTaskId"].as_str().unwrap_or("?");
        if let Some(name) = update["name"].as_str()
            && self.tasks.len() < CHILD_LIMIT
        {
            self.tasks.insert(id.to_string(), name.to_string());
        }
        let name = match kind {
            "async_task_state_update" => self.tasks.remove(id),
            _ => self.tasks.get(id).cloned(),
        };
        let name = name.as_deref().unwrap_or(id);
        let state = match kind {
            "async_task_state_update" => update["state"].as_str().unwrap_or("?"),
            _ => "running",
        };
        let detail = match kind {
            "async_task_spawned" => update["description"].as_str(),
            _ => update["summary"]
                .as_str()
                .or(update["description"].as_str()),
        };
        self.emit(
            sink,
            &Event::Task {
                name,
                state,
                detail,
            },
        )
    }

    fn chunk(&mut self, voice: Voice, text: &str, sink: &mut dyn Render) -> std::io::Result<()> {
        self.streamed |= voice == Voice::Agent;
        let first = self.open != Some(voice);
        self.emit(sink, &Event::Chunk { voice, text, first })
    }

    fn proxy_event(&mut self, event: &JournalEvent, sink: &mut dyn Render) -> std::io::Result<()> {
        match event {
            JournalEvent::Replayed { lines } => {
                let refused = match self.held.take() {
                    Some(Held::Refused {
                        method,
                        code,
                        message,
                    }) => Some(format!("{method} failed on the agent: {code} {message}")),
                    _ => None,
                };
                self.emit(
                    sink,
                    &Event::Replayed {
                        updates: *lines,
                        agent_failed: refused.as_deref(),
                    },
                )
            }
            JournalEvent::SessionMapped { agent_session } => {
                self.held = Some(Held::Continued(agent_session.clone()));
                Ok(())
            }
            JournalEvent::AgentRestarted { code } => {
                self.host = false;
                self.emit(sink, &Event::Restarted { code: *code })
            }
            JournalEvent::HostDropped => {
                self.host = true;
                self.emit(sink, &Event::HostDropped)
            }
            JournalEvent::SessionRestored { how } => {
                let agent_session = match self.held.take() {
                    Some(Held::Continued(s)) => Some(s),
                    _ => None,
                };
                self.emit(
                    sink,
                    &Event::Restored {
                        how,
                        agent_session: agent_session.as_deref(),
                        host: self.host,
                    },
                )
            }
            JournalEvent::PromptStalled { action } => self.emit(sink, &Event::Stalled { action }),
            JournalEvent::HistoryOffered { server } => {
                let words = |v: &serde_json::Value| {
                    v.as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(serde_json::Value::as_str)
                        .collect::<Vec<_>>()
                        .join(" ")
                };
                let server = format!(
                    "{} ({} {})",
                    server["name"].as_str().unwrap_or("?"),
                    server["command"].as_str().unwrap_or("?"),
                    words(&server["args"])
                );
                self.emit(sink, &Event::Offered { server })
            }
            JournalEvent::ForkedFrom {
                parent,
                turns,
                message,
            } => self.emit(
                sink,
                &Event::Forked {
                    parent,
                    turns: *turns,
                    message: message.as_deref(),
                },
            ),
            JournalEvent::BundleManifest { manifest } => self.emit(
                sink,
                &Event::Bundle {
                    summary: bundle_summary(manifest),
                },
            ),
            _ => Ok(()),
        }
    }

    /// A run (proxy process) ended: close the open paragraph and forget what it left pending
    /// (request ids start over in the next run's connection).
    ///
    /// # Errors
    /// The sink's write errors.
    pub fn end_run(&mut self, sink: &mut dyn Render) -> std::io::Result<()> {
        self.pending.clear();
        self.taken = None;
        self.titles.clear();
        self.finish(sink)
    }

    /// End the timeline: close the open paragraph.
    ///
    /// # Errors
    /// The sink's write errors.
    pub fn finish(&mut self, sink: &mut dyn Render) -> std::io::Result<()> {
        self.tell_held(sink)?;
        if self.open.take().is_some() {
            sink.event(&Event::ParagraphEnd)?;
        }
        self.enter(None, sink)
    }
}

/// A load served from the journal, in words.
pub fn replay_note(updates: u64, agent_failed: Option<&str>) -> String {
    let served = format!("loaded from the journal ({updates} updates replayed)");
    match agent_failed {
        Some(failed) => format!("{failed}; {served}"),
        None => served,
    }
}

/// What the proxy did to keep a session alive, or gave its agent, in words (for
/// [`Event::Restarted`], [`Event::HostDropped`], [`Event::Restored`], [`Event::Stalled`],
/// [`Event::Forked`] and [`Event::Offered`]; empty for other events).
pub fn proxy_note(event: &Event<'_>) -> String {
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
pub fn update_note(event: &Event<'_>) -> String {
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

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::journal::Payload;

    /// Collects events as debug strings.
    #[derive(Default)]
    struct Log(Vec<String>);

    impl Render for Log {
        fn event(&mut self, event: &Event<'_>) -> std::io::Result<()> {
            let text = match event {
                Event::Chunk { voice, text, first } => format!("chunk {voice:?} {text} {first}"),
                Event::Tool(t) => format!("tool {} {} {}", t.title, t.status, t.new),
                Event::TurnStart { number, prompt } => format!("turn {number} {prompt}"),
                Event::TurnEnd {
                    number,
                    stop_reason,
                    ..
                } => format!("end {number} {stop_reason:?}"),
                Event::Permission { title, choice, .. } => format!("permission {title} {choice}"),
                Event::PermissionAsked { title, .. } => format!("permission asked {title}"),
                other => format!("{other:?}"),
            };
            self.0.push(text);
            Ok(())
        }
    }

    fn run(lines: &[(Side, &str)]) -> Vec<String> {
        let mut timeline = Timeline::new();
        let mut log = Log::default();
        for (i, (from, line)) in lines.iter().enumerate() {
            let record = Record {
                seq: i as u64,
                unix_us: 0,
                mono_us: i as u64 * 1_000_000,
                body: Body::Message {
                    from: *from,
                    payload: Payload::from_line(Bytes::from(line.to_string())),
                },
            };
            timeline.record(&record, &mut log).unwrap();
        }
        timeline.finish(&mut log).unwrap();
        log.0
    }

    /// What a record is, for [`run_records`].
    enum Rec<'a> {
        /// A line as it crossed.
        Line(Side, &'a str),
        /// A line the proxy made or consumed.
        Proxy(Side, &'a str),
        /// An event of the proxy's.
        Event(JournalEvent),
    }

    fn run_records(records: Vec<Rec<'_>>) -> Vec<String> {
        let mut timeline = Timeline::new();
        let mut log = Log::default();
        for (i, rec) in records.into_iter().enumerate() {
            let body = match rec {
                Rec::Line(from, line) | Rec::Proxy(from, line) => {
                    let mut payload = Payload::from_line(Bytes::from(line.to_string()));
                    payload.proxy = matches!(rec, Rec::Proxy(..));
                    Body::Message { from, payload }
                }
                Rec::Event(event) => Body::Event(event),
            };
            let record = Record {
                seq: i as u64,
                unix_us: 0,
                mono_us: i as u64,
                body,
            };
            timeline.record(&record, &mut log).unwrap();
        }
        timeline.finish(&mut log).unwrap();
        log.0
    }

    #[test]
    fn each_thing_that_happened_is_told_once_as_the_editor_saw_it() {
        let log = run_records(vec![
            // A native load the agent failed, served from the journal.
            Rec::Line(
                Side::Client,
                r#"{"id":1,"method":"session/load","params":{"sessionId":"S","cwd":"/w"}}"#,
            ),
            Rec::Proxy(
                Side::Agent,
                r#"{"id":1,"error":{"code":-32000,"message":"No previous sessions found"}}"#,
            ),
            Rec::Event(JournalEvent::Replayed { lines: 4 }),
            // The proxy brings it up underneath: its own requests are not the client's, and
            // one that fails (the agent's own load, tried first) is the proxy's to handle.
            Rec::Proxy(
                Side::Client,
                r#"{"id":"acp-journal:9","method":"session/load","params":{"sessionId":"S","cwd":"/w"}}"#,
            ),
            Rec::Proxy(
                Side::Agent,
                r#"{"id":"acp-journal:9","error":{"code":-32603,"message":"No previous sessions"}}"#,
            ),
            Rec::Proxy(
                Side::Client,
                r#"{"id":"acp-journal:0","method":"session/new","params":{"cwd":"/w"}}"#,
            ),
            Rec::Line(
                Side::Agent,
                r#"{"id":"acp-journal:0","result":{"sessionId":"U"}}"#,
            ),
            Rec::Event(JournalEvent::SessionMapped {
                agent_session: "U".into(),
            }),
            Rec::Proxy(Side::Agent, r#"{"id":1,"result":{}}"#),
            // A restore after a restart: one line.
            Rec::Event(JournalEvent::AgentRestarted { code: 137 }),
            Rec::Proxy(
                Side::Client,
                r#"{"id":"acp-journal:1","method":"session/new","params":{"cwd":"/w"}}"#,
            ),
            Rec::Line(
                Side::Agent,
                r#"{"id":"acp-journal:1","result":{"sessionId":"V"}}"#,
            ),
            Rec::Event(JournalEvent::SessionMapped {
                agent_session: "V".into(),
            }),
            Rec::Event(JournalEvent::SessionRestored {
                how: "session/new".into(),
            }),
            // The proxy's own cancel (a close) is no user's.
            Rec::Proxy(
                Side::Client,
                r#"{"method":"session/cancel","params":{"sessionId":"V"}}"#,
            ),
            // An agent error the proxy consumed and nothing served: told as a failure.
            Rec::Line(
                Side::Client,
                r#"{"id":2,"method":"session/resume","params":{"sessionId":"T","cwd":"/w"}}"#,
            ),
            Rec::Proxy(
                Side::Agent,
                r#"{"id":2,"error":{"code":-32002,"message":"gone"}}"#,
            ),
        ]);
        assert_eq!(
            log,
            [
                "Setup { method: \"session/load\", cwd: \"/w\" }",
                "Replayed { updates: 4, agent_failed: Some(\"session/load failed on the agent: -32000 No previous sessions found\") }",
                "Continued { agent_session: \"U\" }",
                "Restarted { code: 137 }",
                "Restored { how: \"session/new\", agent_session: Some(\"V\"), host: false }",
                "Setup { method: \"session/resume\", cwd: \"/w\" }",
                "Failed { method: \"session/resume\", code: Number(-32002), message: \"gone\" }",
            ]
        );
    }

    #[test]
    fn steering_the_agent_takes_is_user_input_and_one_it_refuses_is_not() {
        let log = run(&[
            (
                Side::Client,
                r#"{"id":1,"method":"session/prompt","params":{"prompt":[{"type":"text","text":"go"}]}}"#,
            ),
            (
                Side::Client,
                r#"{"id":2,"method":"_session/steering","params":{"sessionId":"S","prompt":[{"type":"text","text":"use tabs"}]}}"#,
            ),
            (Side::Agent, r#"{"id":2,"result":{}}"#),
            (
                Side::Agent,
                r#"{"id":1,"result":{"stopReason":"end_turn"}}"#,
            ),
            (
                Side::Client,
                r#"{"id":3,"method":"_session/steering","params":{"sessionId":"S","prompt":[{"type":"text","text":"late"}]}}"#,
            ),
            (
                Side::Agent,
                r#"{"id":3,"result":{"outcome":"promptRequired","reason":"noRunningTurn"}}"#,
            ),
        ]);
        assert_eq!(
            log,
            [
                "turn 1 go",
                "User(\"use tabs\")",
                "end 1 Some(\"end_turn\")"
            ]
        );
    }

    fn update(u: &str) -> String {
        format!(r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"update":{u}}}}}"#)
    }

    #[test]
    fn chunks_coalesce_into_paragraphs_and_turns_pair_with_their_response() {
        let a = update(r#"{"sessionUpdate":"agent_message_chunk","content":{"text":"a"}}"#);
        let t = update(r#"{"sessionUpdate":"agent_thought_chunk","content":{"text":"t"}}"#);
        let call = update(
            r#"{"sessionUpdate":"tool_call","toolCallId":"c1","title":"Read","kind":"read"}"#,
        );
        let done =
            update(r#"{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"failed"}"#);
        let log = run(&[
            (
                Side::Client,
                r#"{"id":5,"method":"session/prompt","params":{"prompt":[{"type":"text","text":"hi"},{"type":"resource_link","uri":"file:///x"}]}}"#,
            ),
            (Side::Agent, &t),
            (Side::Agent, &a),
            (Side::Agent, &a),
            (Side::Agent, &call),
            (
                Side::Agent,
                r#"{"id":"p","method":"session/request_permission","params":{"toolCall":{"toolCallId":"c1"},"options":[{"optionId":"ok","name":"OK"}]}}"#,
            ),
            (
                Side::Client,
                r#"{"id":"p","result":{"outcome":{"outcome":"cancelled"}}}"#,
            ),
            (Side::Agent, &done),
            (Side::Agent, &a),
            (
                Side::Agent,
                r#"{"id":5,"result":{"stopReason":"end_turn"}}"#,
            ),
            (Side::Agent, "not json"),
        ]);
        assert_eq!(
            log,
            [
                "turn 1 hi [resource_link file:///x]",
                "chunk Thought t true",
                "ParagraphEnd",
                "chunk Agent a true",
                "chunk Agent a false",
                "ParagraphEnd",
                "tool Read pending true",
                "permission asked Read",
                "permission Read cancelled",
                "tool Read failed false",
                "chunk Agent a true",
                "ParagraphEnd",
                "end 1 Some(\"end_turn\")",
                "NotJson { from: Agent, text: \"not json\" }",
            ]
        );
    }

    #[test]
    fn a_failed_prompt_ends_its_turn_without_a_stop_reason() {
        let log = run(&[
            (
                Side::Client,
                r#"{"id":1,"method":"session/prompt","params":{"prompt":[]}}"#,
            ),
            (
                Side::Agent,
                r#"{"id":1,"error":{"code":-32603,"message":"boom"}}"#,
            ),
            (Side::Agent, r#"{"id":1,"result":{}}"#),
        ]);
        assert_eq!(
            log,
            [
                "turn 1 ",
                "Failed { method: \"session/prompt\", code: Number(-32603), message: \"boom\" }",
                "end 1 None",
            ]
        );
    }

    #[test]
    fn a_v2_turn_ends_with_the_agents_idle_state_and_its_echoes_are_told_once() {
        let log = run(&[
            (
                Side::Client,
                r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"first task"}]}}"#,
            ),
            (
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"user_message","messageId":"m1","content":[{"text":"first task","type":"text"}]}}}"#,
            ),
            (
                Side::Agent,
                r#"{"jsonrpc":"2.0","id":2,"result":{"messageId":"m1"}}"#,
            ),
            (
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"state_update","state":"running","background":[]}}}"#,
            ),
            (
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"You said it."},"messageId":"msg_loop"}}}"#,
            ),
            (
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"messageId":"msg_loop","content":[{"type":"text","text":"You said it."}],"sessionUpdate":"agent_message"}}}"#,
            ),
            (
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"plan_update","plan":{"type":"items","planId":"p","entries":[{"content":"read","status":"completed","priority":"high"}]}}}}"#,
            ),
            (
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"tool_call_update","toolCallId":"t1","title":"Read a.rs","kind":"read","status":"in_progress"}}}"#,
            ),
            (
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed"}}}"#,
            ),
            (
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn","usage":{"totalTokens":15}}}}"#,
            ),
        ]);
        assert_eq!(
            log,
            [
                "turn 1 first task",
                "chunk Agent You said it. true",
                "ParagraphEnd",
                "Plan(Object {\"type\": String(\"items\"), \"planId\": String(\"p\"), \"entries\": Array [Object {\"content\": String(\"read\"), \"status\": String(\"completed\"), \"priority\": String(\"high\")}]})",
                "tool Read a.rs in_progress true",
                "tool Read a.rs completed false",
                "end 1 Some(\"end_turn\")",
            ]
        );
    }

    /// The events a timeline tells of `records` (lines from the agent, the first from the
    /// client), their paragraph ends and scopes left out.
    fn told(lines: &[(Side, String)]) -> Vec<String> {
        let lines: Vec<(Side, &str)> = lines.iter().map(|(s, l)| (*s, l.as_str())).collect();
        run(&lines)
            .into_iter()
            .filter(|e| e != "ParagraphEnd" && !e.starts_with("Scope"))
            .collect()
    }

    #[test]
    fn every_update_kind_is_shown_as_the_table_says() {
        // A v2 turn taken and its prompt's echo told: what follows is the turn's.
        let turn = [
            (
                Side::Client,
                r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"go"}]}}"#.to_string(),
            ),
            (Side::Agent, update(r#"{"sessionUpdate":"user_message","messageId":"m1","content":[{"type":"text","text":"go"}]}"#)),
            (Side::Agent, r#"{"jsonrpc":"2.0","id":2,"result":{"messageId":"m1"}}"#.to_string()),
        ];
        let before = told(&turn).len();
        for kind in crate::acp::updates::KINDS {
            let sample = crate::acp::updates::sample(kind.name);
            let mut lines = turn.to_vec();
            lines.push((
                Side::Agent,
                format!(r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"S","update":{sample}}}}}"#),
            ));
            let events = told(&lines)[before..].to_vec();
            match kind.shown {
                Some(words) => {
                    assert!(!events.is_empty(), "{} should be shown: {words}", kind.name)
                }
                None => assert!(events.is_empty(), "{} is not shown: {events:?}", kind.name),
            }
        }
    }

    #[test]
    fn a_subagents_timeline_is_told_as_its_own_in_its_parents_turn() {
        let s = |session: &str, u: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{session}","update":{u}}}}}"#
            )
        };
        let log = run(&[
            (
                Side::Client,
                r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"DELEGATE: find it"}]}}"#,
            ),
            (
                Side::Agent,
                &s(
                    "S",
                    r#"{"sessionUpdate":"subagent_update","sessionId":"C","title":"Explore","description":"general-purpose","state":{"state":"running"}}"#,
                ),
            ),
            // The parent's outgoing view, then the child's incoming one: told once.
            (
                Side::Agent,
                &s(
                    "S",
                    r#"{"sessionUpdate":"session_message","messageId":"t","senderSessionId":"S","recipientSessionId":"C","content":[{"type":"text","text":"look"}],"recipientMessageId":"t"}"#,
                ),
            ),
            (
                Side::Agent,
                &s(
                    "C",
                    r#"{"sessionUpdate":"session_message","messageId":"t","senderSessionId":"S","recipientSessionId":"C","content":[{"type":"text","text":"look"}],"senderMessageId":"t"}"#,
                ),
            ),
            (
                Side::Agent,
                &s(
                    "C",
                    r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"found"}}"#,
                ),
            ),
            (
                Side::Agent,
                &s(
                    "C",
                    r#"{"sessionUpdate":"session_info_update","title":"not the parent's"}"#,
                ),
            ),
            (
                Side::Agent,
                r#"{"jsonrpc":"2.0","id":"p","method":"session/request_permission","params":{"sessionId":"C","toolCall":{"toolCallId":"g","title":"Grep"},"options":[{"optionId":"ok","name":"OK"}]}}"#,
            ),
            (
                Side::Client,
                r#"{"jsonrpc":"2.0","id":"p","result":{"outcome":{"outcome":"selected","optionId":"ok"}}}"#,
            ),
            (
                Side::Agent,
                &s(
                    "S",
                    r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"meanwhile"}}"#,
                ),
            ),
            (
                Side::Agent,
                &s(
                    "S",
                    r#"{"sessionUpdate":"subagent_update","sessionId":"C","state":{"state":"idle","stopReason":"end_turn"}}"#,
                ),
            ),
            (
                Side::Agent,
                r#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}"#,
            ),
        ]);
        assert_eq!(
            log,
            [
                "turn 1 DELEGATE: find it",
                "Subagent { session: \"C\", title: \"Explore\", description: Some(\"general-purpose\"), state: Some(\"running\"), first: true, seconds: None }",
                "Scope { depth: 1, session: \"C\", title: \"Explore\" }",
                "Message { from: \"the session\", to: \"Explore\", text: \"look\" }",
                "chunk Agent found true",
                "ParagraphEnd",
                "permission asked Grep",
                "permission Grep ok",
                "Scope { depth: 0, session: \"\", title: \"\" }",
                "chunk Agent meanwhile true",
                "ParagraphEnd",
                "Subagent { session: \"C\", title: \"Explore\", description: None, state: Some(\"end_turn\"), first: false, seconds: Some(8.0) }",
                "end 1 Some(\"end_turn\")",
            ]
        );
    }
}
