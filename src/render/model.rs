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

use std::collections::HashMap;

use serde_json::Value;

use super::chunk::ChunkKind;
use super::timeline_event::{Event, PermissionOption, Render, ToolCall, Voice};
use crate::acp::{permission_choice, prompt_text, subagents};
use crate::journal::{Body, Event as JournalEvent, Record};

use crate::wire::Side;

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
                let name = server["name"].as_str().unwrap_or("?");
                let server = match server["url"].as_str() {
                    // serve's own endpoint, over HTTP.
                    Some(url) => format!("{name} ({url})"),
                    None => format!(
                        "{name} ({} {})",
                        server["command"].as_str().unwrap_or("?"),
                        words(&server["args"])
                    ),
                };
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

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
