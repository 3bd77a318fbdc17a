//! What the timeline tells: one [`Event`] per thing that happened in a session (with its
//! [`Voice`], [`ToolCall`] and [`PermissionOption`]), and [`Render`], the consumer every
//! renderer is.

use std::borrow::Cow;

use serde_json::Value;

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

/// A consumer of timeline events: a renderer.
pub trait Render {
    /// Take one event.
    ///
    /// # Errors
    /// Write errors.
    fn event(&mut self, event: &Event<'_>) -> std::io::Result<()>;
}
