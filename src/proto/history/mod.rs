//! Turning a session's journal into the `session/update` notifications of a `session/load`.
//!
//! Pure: it consumes [`Record`]s (the shell reads them from the journals) and produces lines. Two
//! passes over the same records, so memory stays flat in the session's length:
//! 1. [`Replay::observe`] learns what must be known ahead: the final form of each compaction,
//!    the recorded output of each client terminal (the `terminals` module), and for a tail
//!    replay how many prompt turns there are.
//! 2. [`Replay::emit`] produces the replay in journal order, each update kind as
//!    [`crate::acp::updates::KINDS`] says: a `user_message_chunk` per content block of each
//!    recorded `session/prompt`; history updates (message and thought chunks, tool calls, plans)
//!    verbatim, terminals aside; each compaction materialized once, at its first position; state
//!    updates (commands, mode, config options, session info, usage) held back, and `notice`
//!    dropped. [`Replay::finish`] then emits the latest state updates and closes the tool calls a
//!    crash left pending as `failed`, and returns what the proxy needs to continue the session.
//!
//! Child sessions (subagents, journaled with their root: the `subagents` module) are replayed
//! under their own IDs, in order, to a client that knows the form they were announced in; to
//! another, the parent's view only (a tool call standing for each child).
//!
//! A tail replay ([`ClientSupport::tail`]) replays only the last prompt turns: what comes before
//! is read for its state (kept as always) and left out, and one line says how much was.
//!
//! Terminals in tool calls are replayed as their recorded output (the `terminals` module).
//! Compactions are learnt and materialized in the `compactions` module; the state updates,
//! cursors and tool calls left open that a replay holds back to its end in `held_back`; the
//! lines it writes are made in `lines`.

mod compactions;
mod conversion;
mod copies;
mod held_back;
mod learnt;
mod lines;
mod made_up_ids;
mod subagents;
mod tail;
mod terminals;
#[cfg(test)]
mod tests;
mod transcript;
mod updates;

use super::vocab::{ClientSupport, HashMap, Summary};

use bytes::Bytes;
use serde_json::{Value, json};

use crate::acp::AgentId;
use crate::acp::subagents::CHILD_KINDS;
use crate::acp::updates::Need;
use crate::journal::Event;
use crate::journal::format::{Body, Header, Record};

use crate::wire::Side;
use conversion::Conversion;
use copies::Copies;
use held_back::HeldBack;
use learnt::Learnt;
use lines::{notification, verbatim};
pub use made_up_ids::MadeUpIds;
use subagents::Children;
use tail::{Tail, TailStep, is_prompt_of};
pub use terminals::{TERMINAL_ASKS_LIMIT, TERMINAL_LIMIT, TERMINAL_OUTPUT_LIMIT};
use transcript::{TurnText, keep_tail, transcript};
use updates::{Class, ParamsPeek, UpdatePeek, classify, in_conversation, update_of};

/// A replay in progress.
pub struct Replay {
    session: String,
    support: ClientSupport,
    /// What the first pass learns ahead of the second.
    learnt: Learnt,
    /// What is held back to the end: the latest state, cursors, tool calls left open.
    held_back: HeldBack,
    /// The latest turns, for re-priming (in `transcript_bytes` of text, about
    /// `transcript_limit` at most).
    turns: std::collections::VecDeque<TurnText>,
    transcript_bytes: usize,
    transcript_limit: usize,
    summary: Summary,
    /// `_session/steering` requests (user input into the running turn, a vendor extension)
    /// waiting for the agent to take them, by request id: their record's sequence number and
    /// content blocks.
    steering: HashMap<String, (String, Value)>,
    /// What replaying in the other version of ACP than the one recorded keeps.
    conversion: Conversion,
    /// The child sessions (subagents) announced so far.
    children: Children,
    /// A tail replay: where it starts, and what it leaves out.
    tail: Option<Tail>,
    /// This host's agent-side sessions of the session and the turns each holds.
    copies: Copies,
    /// The agent of the run loading the session, whose agent-side sessions it may resume.
    agent: AgentId,
}

impl Replay {
    /// A replay of `session` (client-facing ID) for a client with `support`. The transcript kept
    /// for re-priming is bounded by `transcript_limit` bytes (the latest turns are kept).
    pub fn new(session: &str, support: ClientSupport, transcript_limit: usize) -> Replay {
        Replay {
            session: session.to_string(),
            support,
            learnt: Learnt::default(),
            held_back: HeldBack::default(),
            turns: Default::default(),
            transcript_bytes: 0,
            transcript_limit,
            summary: Summary::default(),
            steering: HashMap::default(),
            conversion: Conversion::default(),
            children: Children::default(),
            tail: support.tail.map(Tail::new),
            copies: Copies::default(),
            agent: AgentId::default(),
        }
    }

    /// The agent of the run that loads the session: the summary says which of its agent-side
    /// sessions on this host holds every turn ([`Summary::agent_copy`]).
    pub fn for_agent(&mut self, agent: AgentId) {
        self.agent = agent;
    }

    /// A segment of the session begins (its `header`): whose agent recorded it, and whether
    /// this host did (`local`: this journal directory wrote it, so its agent-side sessions
    /// are this host's). Cursors an earlier agent made are not this one's.
    pub fn segment(&mut self, header: &Header, local: bool) {
        let response = header.initialize.as_ref().and_then(|i| i.response_value());
        let agent = response.as_ref().and_then(crate::acp::agent_title);
        self.held_back.segment(agent);
        let command = header.argv.join(" ");
        let id = AgentId::of(response.as_ref(), Some(command));
        self.copies.segment(&self.session, id, local);
    }

    /// Whether the first pass needs a journal line (the stored record or the bare message): a
    /// fast prefilter for readers that skip records; [`Replay::observe`] takes any record.
    pub fn observes(&self, line: &[u8]) -> bool {
        self.learnt.needs(line, self.tail.is_some())
    }

    /// First pass over a record.
    pub fn observe(&mut self, record: &Record) {
        let Body::Message { from, payload } = &record.body else {
            return;
        };
        if !self.observes(&payload.bytes) {
            return;
        }
        if let Some(tail) = &mut self.tail
            && *from == Side::Client
            && is_prompt_of(&self.session, &payload.bytes)
        {
            tail.count_prompt();
        }
        self.learnt.observe(*from, &payload.bytes, record);
    }

    fn notification(&self, update: Value) -> Bytes {
        notification(&self.session, update)
    }

    /// Second pass over a record: append the lines it replays as to `out`.
    pub fn emit(&mut self, record: &Record, out: &mut Vec<Bytes>) {
        self.conversion.ids.see(record.seq);
        self.copies.follow(&self.session, record);
        match self.tail_step(record) {
            TailStep::Replay => self.emit_record(record, out),
            TailStep::LeaveOut => {
                // Read for its state (kept, as always), its lines left out.
                let mut left_out = Vec::new();
                self.emit_record(record, &mut left_out);
                if let Some(tail) = &mut self.tail {
                    tail.left_out(left_out.len() as u64);
                }
            }
            TailStep::Start => {
                self.start_tail(out);
                self.emit_record(record, out);
            }
        }
    }

    /// Where `record` stands in a tail replay.
    fn tail_step(&mut self, record: &Record) -> TailStep {
        match &mut self.tail {
            Some(tail) => tail.step(&self.session, record),
            None => TailStep::Replay,
        }
    }

    /// The tail begins: one line says what was left out (a `notice` for a client that takes
    /// them, else a message of the proxy's, marked in `_meta`), the children still at work
    /// are announced again, and tool calls of the part left out are the client's no more.
    fn start_tail(&mut self, out: &mut Vec<Bytes>) {
        let Some(tail) = &mut self.tail else {
            return;
        };
        if let Some((text, meta)) = tail.begin() {
            let line = match self.support.takes_notices() {
                true => {
                    json!({"sessionUpdate": "notice", "severity": "info", "title": text, "_meta": meta})
                }
                false => json!({"sessionUpdate": "agent_message_chunk", "messageId": "acpj-tail",
                    "content": {"type": "text", "text": format!("[{text}]")}, "_meta": meta}),
            };
            out.push(self.notification(line));
        }
        self.held_back.forget_tools();
        for (session, update) in self.children.announce_again(&self.session, self.support) {
            out.push(notification(&session, update));
        }
    }

    /// Replay one record (the second pass).
    fn emit_record(&mut self, record: &Record, out: &mut Vec<Bytes>) {
        if self.support.v2 {
            return self.emit_v2(record, out);
        }
        let payload = match &record.body {
            Body::Event(event) => return self.event(event),
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
        let (update, session) = match (peek.method.as_deref(), peek.params) {
            (
                Some("session/update"),
                Some(ParamsPeek {
                    update: Some(update),
                    session_id,
                }),
            ) => (update, session_id),
            _ => return self.emit_slow(record, out),
        };
        if let Some(child) = session.filter(|s| self.children.is_child(s))
            && let Some((from, msg)) = update_of(record)
        {
            return self.emit_child(record, &child, from, &msg, out);
        }
        let kind = update.session_update.as_ref();
        // Announcements of children are learned on the general path.
        if classify(kind, self.support) != Class::History || CHILD_KINDS.contains(&kind) {
            return self.emit_slow(record, out);
        }
        match kind {
            "tool_call" | "tool_call_update" => {
                if let Some(id) = update.tool_call_id.as_deref() {
                    let default = if kind == "tool_call" { "pending" } else { "" };
                    let root = self.session.clone();
                    self.held_back.tool_status(
                        &root,
                        id,
                        update.status.as_deref().unwrap_or(default),
                    );
                    if self.learnt.recorded_v2
                        && self.conversion.tools_seen.insert(id.to_string())
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
                if let Some(text) = update.text() {
                    self.agent_text(&text);
                }
            }
            _ => {}
        }
        if matches!(kind, "tool_call" | "tool_call_update")
            && let Some(content) = update.content
            && let Some(line) = self.learnt.terminals.rewrite(&payload.bytes, Some(content))
        {
            out.push(line);
            return;
        }
        out.push(verbatim(record));
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

    /// One of the proxy's events: the session went on under another agent session (whose
    /// cursors the earlier one's are not).
    fn event(&mut self, event: &Event) {
        if let Event::SessionMapped { agent_session } = event {
            self.summary.agent_session = Some(agent_session.clone());
            self.held_back.remapped();
        }
    }

    /// A child session's record (a subagent's, journaled with its root): its updates, under
    /// its own ID, in order, to a client that knows the form its parent announced it in
    /// (translated for v2 as the root's are); nothing of it to another, which has the
    /// parent's view. A child's requests and the client's lines to it are not history.
    fn emit_child(
        &mut self,
        record: &Record,
        child: &str,
        from: Side,
        msg: &Value,
        out: &mut Vec<Bytes>,
    ) {
        if from != Side::Agent || msg["method"] != "session/update" {
            return;
        }
        let update = &msg["params"]["update"];
        let root = self.session.clone();
        self.children.learn(&root, child, update);
        if !self.children.shown_to(child, self.support) {
            return;
        }
        let kind = update["sessionUpdate"].as_str().unwrap_or("");
        if let Some(id) = update["toolCallId"].as_str() {
            let default = if kind == "tool_call" { "pending" } else { "" };
            self.held_back
                .tool_status(child, id, update["status"].as_str().unwrap_or(default));
        }
        if self.support.v2 {
            return self.emit_update_v2(record, child, kind, update, out);
        }
        match classify(kind, self.support) {
            // A child's state goes with its timeline: the root's latest state is the root's.
            Class::History | Class::State => out.push(verbatim(record)),
            Class::Compaction => self.learnt.compactions.emit(child, update, out),
            Class::Collapsed | Class::Cursor | Class::Never => {}
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
            if let Body::Event(event) = &record.body {
                self.event(event);
            }
            return;
        };
        if let Some(child) = msg["params"]["sessionId"]
            .as_str()
            .filter(|s| self.children.is_child(s))
        {
            let child = child.to_string();
            return self.emit_child(record, &child, from, &msg, out);
        }
        let update = &msg["params"]["update"];
        let kind = update["sessionUpdate"].as_str().unwrap_or("");
        if from == Side::Agent && msg["method"] == "session/update" {
            if kind == "user_message" && self.conversion.prompt.is_some() {
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
                self.conversion.message = None;
                self.summary.turns += 1;
                let prompt = &msg["params"]["prompt"];
                let mut turn = TurnText::default();
                for block in prompt.as_array().into_iter().flatten() {
                    turn.user
                        .push_str(block["text"].as_str().unwrap_or_default());
                }
                self.push_turn(turn);
                let id = self.conversion.ids.made("user", record.seq);
                self.conversion.prompt = Some((id, prompt.clone()));
            }
            (Side::Agent, "session/update") => {
                let root = self.session.clone();
                self.emit_update_v2(record, &root, kind, update, out)
            }
            _ => self.emit_message(record, from, &msg, out),
        }
    }

    /// The last prompt as a `user_message` (v2), under `id` (else one of its own), if it is
    /// still to be replayed.
    fn user_message(&mut self, id: Option<&str>, out: &mut Vec<Bytes>) {
        if let Some((made, content)) = self.conversion.prompt.take() {
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
        session: &str,
        kind: &str,
        update: &Value,
        out: &mut Vec<Bytes>,
    ) {
        let Body::Message { .. } = &record.body else {
            return;
        };
        let root = session == self.session;
        if root && CHILD_KINDS.contains(&kind) {
            self.children.learn(session, session, update);
        }
        let chunk = matches!(
            kind,
            "user_message_chunk" | "agent_message_chunk" | "agent_thought_chunk"
        );
        if !chunk {
            self.conversion.message = None;
        }
        if root
            && kind == "agent_message_chunk"
            && let Some(text) = update["content"]["text"].as_str()
        {
            self.agent_text(text);
        }
        if root && let Some(id) = update["toolCallId"].as_str() {
            let default = if kind == "tool_call" { "pending" } else { "" };
            self.held_back
                .tool_status(session, id, update["status"].as_str().unwrap_or(default));
        }
        let edited = match kind {
            _ if chunk && update.get("messageId").is_none_or(Value::is_null) => {
                let id = self.conversion.chunk_id(session, kind, record.seq);
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
                if root {
                    self.summary.mode = update["currentModeId"].as_str().map(str::to_string);
                }
                return;
            }
            _ => {
                match classify(kind, self.support) {
                    Class::History => out.push(verbatim(record)),
                    Class::State | Class::Compaction | Class::Cursor | Class::Collapsed if root => {
                        self.emit_update(record, update, out)
                    }
                    // A child's state goes with its timeline.
                    Class::State => out.push(verbatim(record)),
                    Class::Compaction => self.learnt.compactions.emit(session, update, out),
                    Class::Cursor | Class::Collapsed | Class::Never => {}
                }
                return;
            }
        };
        match edited {
            Some(update) => out.push(notification(session, update)),
            None => out.push(verbatim(record)),
        }
    }

    /// Everything but history updates: prompts, setup requests, state updates, responses.
    fn emit_slow(&mut self, record: &Record, out: &mut Vec<Bytes>) {
        let Some((from, msg)) = update_of(record) else {
            return;
        };
        match msg["params"]["sessionId"].as_str() {
            Some(child) if self.children.is_child(child) => {
                let child = child.to_string();
                self.emit_child(record, &child, from, &msg, out)
            }
            _ => self.emit_message(record, from, &msg, out),
        }
    }

    /// [`Replay::emit_slow`] for a record already parsed (`from`, `msg`).
    fn emit_message(&mut self, record: &Record, from: Side, msg: &Value, out: &mut Vec<Bytes>) {
        let method = msg["method"].as_str().unwrap_or("");
        let params = &msg["params"];
        match (from, method) {
            (Side::Client, "session/prompt") => {
                self.summary.turns += 1;
                let mut turn = TurnText::default();
                for block in params["prompt"].as_array().into_iter().flatten() {
                    let id = self.conversion.ids.made("user", record.seq);
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
                    (
                        self.conversion.ids.made("user", record.seq),
                        params["prompt"].clone(),
                    ),
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

    /// One recorded update of the replay's own session, on the general path.
    fn emit_update(&mut self, record: &Record, update: &Value, out: &mut Vec<Bytes>) {
        let kind = update["sessionUpdate"].as_str().unwrap_or("");
        if CHILD_KINDS.contains(&kind) {
            let root = self.session.clone();
            self.children.learn(&root, &root, update);
        }
        match classify(kind, self.support) {
            Class::History if kind == "plan_update" && !self.support.has(Need::Plan) => {
                // Recorded under v2: an items plan is v1's `plan`; another has no v1 form.
                if update["plan"]["type"] == "items" {
                    let plan =
                        json!({"sessionUpdate": "plan", "entries": update["plan"]["entries"]});
                    out.push(self.notification(plan));
                }
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
                        && let Some(line) = self.learnt.terminals.rewrite(&payload.bytes, None)
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
                self.held_back.state(kind, update);
                match kind {
                    "current_mode_update" => {
                        self.summary.mode = update["currentModeId"].as_str().map(str::to_string)
                    }
                    "config_option_update" => self.learn_state(update),
                    _ => {}
                }
            }
            Class::Compaction => {
                let root = self.session.clone();
                self.learnt.compactions.emit(&root, update, out);
            }
            Class::Collapsed => {
                if let Some(call) = self.children.collapse(update, self.support.v2) {
                    let root = self.session.clone();
                    let id = call["toolCallId"].as_str().unwrap_or_default().to_string();
                    if let Some(status) = call["status"].as_str() {
                        self.held_back.tool_status(&root, &id, status);
                    }
                    out.push(self.notification(call));
                }
            }
            Class::Cursor => self.held_back.cursor(update),
            Class::Never => {}
        }
    }

    fn push_turn(&mut self, turn: TurnText) {
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
        self.held_back.keep_tools_open();
    }

    /// End of the records: append the latest state updates and `failed` updates for tool calls
    /// left open, and return the summary.
    pub fn finish(mut self, out: &mut Vec<Bytes>) -> Summary {
        self.user_message(None, out);
        self.held_back.finish(&self.session, &mut self.summary, out);
        self.summary.children = self.children.into_tree();
        self.summary.transcript = transcript(&self.turns, self.transcript_limit);
        self.summary.agent_copy = self.copies.verdict(&self.agent);
        self.summary
    }
}
