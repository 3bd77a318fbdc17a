//! A small, scripted ACP agent, for trying `acp-journal` without installing a real one.
//!
//! It speaks the Agent Client Protocol (newline-delimited JSON-RPC 2.0) on its stdin and
//! stdout, and writes a few log lines to stderr, as agents do. It never calls a model: every
//! prompt turn follows the same script, which exercises most of what a journal records:
//!
//! 1. `agent_thought_chunk` and `agent_message_chunk` updates (each with a `messageId`),
//! 2. a `plan`, then a `tool_call` (kind `edit`, with a `diff` and `locations`),
//! 3. `fs/read_text_file` and `session/request_permission` requests to the client (the agent
//!    numbers its own requests from 0, so its ids may equal the client's: that is legal),
//! 4. on "allow", `fs/write_text_file` and a completed `tool_call_update`; otherwise a failed one,
//! 5. a `usage_update`, a `session_info_update` with a title, and the `end_turn` response.
//!
//! `session/cancel` ends the running turn with `stopReason: "cancelled"`; unknown requests get
//! `-32601`, unknown notifications are ignored; the agent exits 0 when its stdin closes.
//!
//! ```text
//! cargo build --example agent
//! acp-journal --journal-dir /tmp/j -- target/debug/examples/agent   # what an editor would run
//! cargo run --example client -- target/debug/acp-journal --journal-dir /tmp/j -- target/debug/examples/agent
//! ```

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, Write};
use std::sync::mpsc::{Receiver, channel};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

const NAME: &str = "acp-journal-example-agent";

/// Log a line to stderr (stdout carries only the protocol), in one `write`.
macro_rules! log {
    ($($arg:tt)*) => {{
        let line = format!("[{NAME}] {}\n", format_args!($($arg)*));
        let _ = std::io::stderr().write_all(line.as_bytes());
    }};
}

/// A JSON-RPC error object.
fn rpc_error(code: i64, message: impl Into<String>) -> Value {
    json!({"code": code, "message": message.into()})
}

/// `ghp_…0000 (36 chars)`: enough to recognise a secret without showing it.
fn fingerprint(secret: &str) -> String {
    let chars: Vec<char> = secret.chars().collect();
    if chars.len() < 12 {
        return format!("*** ({} chars)", chars.len());
    }
    let head: String = chars[..4].iter().collect();
    let tail: String = chars[chars.len() - 4..].iter().collect();
    format!("{head}…{tail} ({} chars)", chars.len())
}

/// What a session remembers.
struct Session {
    cwd: String,
    turns: u64,
    tokens: u64,
}

/// Why a prompt turn stopped early.
enum Stop {
    /// The client sent `session/cancel`.
    Cancelled,
    /// The client's stdin closed mid-turn.
    Eof,
}

struct Agent {
    /// Lines from stdin, read by a thread so a running turn can notice `session/cancel`.
    input: Receiver<String>,
    /// Requests that arrived during a turn, handled after it.
    deferred: VecDeque<Value>,
    /// Ids of this agent's own requests, from 0.
    next_id: u64,
    sessions: HashMap<String, Session>,
    /// `clientCapabilities.fs` from `initialize`.
    can_read: bool,
    can_write: bool,
    /// Set by `session/cancel` for the session whose turn is running.
    cancelled: bool,
    /// The session whose turn is running.
    active: Option<String>,
}

fn main() {
    let (tx, input) = channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    log!("started (pid {})", std::process::id());
    let mut agent = Agent {
        input,
        deferred: VecDeque::new(),
        next_id: 0,
        sessions: HashMap::new(),
        can_read: false,
        can_write: false,
        cancelled: false,
        active: None,
    };
    agent.run();
    log!("stdin closed, exiting");
}

impl Agent {
    /// The main loop: one message at a time until stdin closes.
    fn run(&mut self) {
        loop {
            let msg = match self.deferred.pop_front() {
                Some(msg) => msg,
                None => match self.next_message() {
                    Some(msg) => msg,
                    None => return,
                },
            };
            if self.dispatch(msg).is_err() {
                return;
            }
        }
    }

    /// The next parsed message from stdin, `None` at EOF. Unparseable lines are logged and skipped.
    fn next_message(&mut self) -> Option<Value> {
        loop {
            let line = self.input.recv().ok()?;
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Value>(&line) {
                Ok(msg) => return Some(msg),
                Err(e) => log!("ignoring a line that is not JSON: {e}"),
            }
        }
    }

    fn send(&self, msg: &Value) {
        let mut out = std::io::stdout().lock();
        // Compact JSON never contains a raw newline, so one message is one line.
        let _ = writeln!(out, "{msg}");
        let _ = out.flush();
    }

    fn respond(&self, id: &Value, result: Result<Value, Value>) {
        let mut msg = json!({"jsonrpc": "2.0", "id": id});
        match result {
            Ok(result) => msg["result"] = result,
            Err(error) => msg["error"] = error,
        }
        self.send(&msg);
    }

    fn update(&self, session: &str, update: Value) {
        self.send(&json!({
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": session, "update": update},
        }));
    }

    /// Handle one incoming message. `Err` means stdin closed during a prompt turn.
    fn dispatch(&mut self, msg: Value) -> Result<(), Stop> {
        let Some(method) = msg["method"].as_str().map(str::to_owned) else {
            // A response nobody is waiting for (or garbage): nothing to do.
            return Ok(());
        };
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let Some(id) = msg.get("id").cloned() else {
            // Notifications. `session/cancel` only matters during a turn (see `poll`).
            if method != "session/cancel" {
                log!("ignoring notification {method}");
            }
            return Ok(());
        };
        let result = match method.as_str() {
            "initialize" => Ok(self.initialize(&params)),
            "session/new" => self.new_session(&params),
            "session/prompt" => self.prompt(&params)?,
            "authenticate" => Ok(json!({})),
            other => Err(rpc_error(-32601, format!("method not found: {other}"))),
        };
        self.respond(&id, result);
        Ok(())
    }

    fn initialize(&mut self, params: &Value) -> Value {
        let fs = &params["clientCapabilities"]["fs"];
        self.can_read = fs["readTextFile"] == true;
        self.can_write = fs["writeTextFile"] == true;
        let client = params["clientInfo"]["name"]
            .as_str()
            .unwrap_or("an unnamed client");
        log!("initialized by {client}");
        json!({
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": false,
                "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
            },
            "authMethods": [],
            "agentInfo": {"name": NAME, "version": env!("CARGO_PKG_VERSION")},
        })
    }

    fn new_session(&mut self, params: &Value) -> Result<Value, Value> {
        let Some(cwd) = params["cwd"].as_str() else {
            return Err(rpc_error(-32602, "session/new: cwd is required"));
        };
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let id = format!(
            "sess_{:x}{:05x}{:x}",
            nanos,
            std::process::id(),
            self.sessions.len()
        );
        // We get the MCP servers' env as the client sent it (a journaling proxy in front stores
        // "[REDACTED]" instead). Log a fingerprint of each value, never the value.
        for server in params["mcpServers"].as_array().into_iter().flatten() {
            let name = server["name"].as_str().unwrap_or("?");
            for var in server["env"].as_array().into_iter().flatten() {
                let key = var["name"].as_str().unwrap_or("?");
                let value = var["value"].as_str().unwrap_or("");
                log!("MCP server {name}: {key}={}", fingerprint(value));
            }
        }
        log!("new session {id} in {cwd}");
        self.sessions.insert(
            id.clone(),
            Session {
                cwd: cwd.to_owned(),
                turns: 0,
                tokens: 0,
            },
        );
        Ok(json!({"sessionId": id}))
    }

    /// Handle what arrived while a turn runs: note `session/cancel`, keep requests for later.
    fn poll(&mut self) -> Result<(), Stop> {
        while let Ok(line) = self.input.try_recv() {
            let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            self.note(msg);
        }
        if self.cancelled {
            Err(Stop::Cancelled)
        } else {
            Ok(())
        }
    }

    fn note(&mut self, msg: Value) {
        if msg["method"] == "session/cancel" {
            if msg["params"]["sessionId"].as_str() == self.active.as_deref() {
                log!("turn cancelled by the client");
                self.cancelled = true;
            }
        } else if msg.get("method").is_some() && msg.get("id").is_some() {
            self.deferred.push_back(msg);
        }
    }

    /// Send a request to the client and wait for its response, noting whatever else arrives.
    fn call(&mut self, method: &str, params: Value) -> Result<Result<Value, Value>, Stop> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self.input.recv().map_err(|_| Stop::Eof)?;
            let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            // A response has no `method`; a client request may carry the same id as ours.
            if msg.get("method").is_none() && msg["id"] == id {
                return Ok(match msg.get("error") {
                    Some(error) => Err(error.clone()),
                    None => Ok(msg["result"].clone()),
                });
            }
            self.note(msg);
        }
    }

    /// `session/prompt`: the outer `Err` is EOF; the inner result is the response.
    fn prompt(&mut self, params: &Value) -> Result<Result<Value, Value>, Stop> {
        let Some(session) = params["sessionId"].as_str().map(str::to_owned) else {
            return Ok(Err(rpc_error(
                -32602,
                "session/prompt: sessionId is required",
            )));
        };
        let Some(state) = self.sessions.get_mut(&session) else {
            return Ok(Err(rpc_error(-32002, format!("unknown session {session}"))));
        };
        state.turns += 1;
        let turn = state.turns;
        let cwd = state.cwd.clone();
        let text: String = params["prompt"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|block| block["text"].as_str())
            .collect::<Vec<_>>()
            .join(" ");
        log!(
            "turn {turn} of {session}: {} characters of prompt",
            text.len()
        );

        self.active = Some(session.clone());
        self.cancelled = false;
        let outcome = self.turn(&session, turn, &cwd, &text);
        self.active = None;
        match outcome {
            Ok(()) => Ok(Ok(json!({"stopReason": "end_turn"}))),
            Err(Stop::Cancelled) => Ok(Ok(json!({"stopReason": "cancelled"}))),
            Err(Stop::Eof) => Err(Stop::Eof),
        }
    }

    /// The scripted turn. `Err(Cancelled)` as soon as a `session/cancel` is noticed.
    fn turn(&mut self, session: &str, turn: u64, cwd: &str, text: &str) -> Result<(), Stop> {
        let msg_id = |n: u32| format!("msg_t{turn}_{n}");
        let path = format!("{}/hello.txt", cwd.trim_end_matches('/'));

        let thought = msg_id(1);
        for chunk in [
            "The user asked: \"",
            text,
            "\". ",
            "A small edit to hello.txt will do.",
        ] {
            self.poll()?;
            self.update(
                session,
                json!({"sessionUpdate": "agent_thought_chunk", "messageId": thought,
                       "content": {"type": "text", "text": chunk}}),
            );
        }

        let plan = |done: usize| {
            let steps = ["Read hello.txt", "Propose an edit", "Write hello.txt"];
            let entries: Vec<Value> = steps
                .iter()
                .enumerate()
                .map(|(i, step)| {
                    let status = match i.cmp(&done) {
                        std::cmp::Ordering::Less => "completed",
                        std::cmp::Ordering::Equal => "in_progress",
                        std::cmp::Ordering::Greater => "pending",
                    };
                    json!({"content": step, "priority": "medium", "status": status})
                })
                .collect();
            json!({"sessionUpdate": "plan", "entries": entries})
        };
        self.poll()?;
        self.update(session, plan(0));

        let old_text = if self.can_read {
            match self.call(
                "fs/read_text_file",
                json!({"sessionId": session, "path": path}),
            )? {
                Ok(result) => result["content"].as_str().unwrap_or("").to_owned(),
                Err(error) => {
                    log!("fs/read_text_file failed: {error}");
                    String::new()
                }
            }
        } else {
            String::new()
        };
        self.poll()?;
        let new_text = format!("{old_text}Hello from turn {turn}!\n");

        let reply = msg_id(2);
        for chunk in ["I'll add a line to ", "hello.txt", " for you."] {
            self.update(
                session,
                json!({"sessionUpdate": "agent_message_chunk", "messageId": reply,
                       "content": {"type": "text", "text": chunk}}),
            );
        }
        self.update(session, plan(1));

        let call_id = format!("call_{turn}");
        self.update(
            session,
            json!({
                "sessionUpdate": "tool_call",
                "toolCallId": call_id,
                "title": "Edit hello.txt",
                "kind": "edit",
                "status": "pending",
                "content": [{"type": "diff", "path": path, "oldText": old_text, "newText": new_text}],
                "locations": [{"path": path, "line": old_text.lines().count() + 1}],
                "rawInput": {"path": path},
            }),
        );

        let options = json!([
            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ]);
        let answer = self.call(
            "session/request_permission",
            json!({"sessionId": session, "toolCall": {"toolCallId": call_id, "title": "Edit hello.txt", "kind": "edit"}, "options": options}),
        )?;
        let outcome = answer.as_ref().map(|r| &r["outcome"]);
        let allowed = match outcome {
            Ok(o) if o["outcome"] == "selected" => o["optionId"] == "allow",
            Ok(_) => {
                // {"outcome": "cancelled"}: the client sent session/cancel.
                self.update(
                    session,
                    json!({"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "failed"}),
                );
                return Err(Stop::Cancelled);
            }
            Err(error) => {
                log!("session/request_permission failed: {error}");
                false
            }
        };
        self.poll()?;

        let (status, note) = if !allowed {
            ("failed", "The user rejected the edit.".to_owned())
        } else if self.can_write {
            let write = json!({"sessionId": session, "path": path, "content": new_text});
            match self.call("fs/write_text_file", write)? {
                Ok(_) => ("completed", format!("Wrote {} bytes.", new_text.len())),
                Err(error) => ("failed", format!("Write failed: {error}")),
            }
        } else {
            (
                "completed",
                "The client cannot write files; nothing written.".to_owned(),
            )
        };
        self.update(
            session,
            json!({"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": status,
                   "content": [{"type": "content", "content": {"type": "text", "text": note}}]}),
        );
        if allowed {
            self.update(session, plan(3));
        }
        self.poll()?;

        let closing = msg_id(3);
        let summary = if allowed {
            "Done: hello.txt has a new line."
        } else {
            "OK, I left hello.txt alone."
        };
        self.update(
            session,
            json!({"sessionUpdate": "agent_message_chunk", "messageId": closing,
                   "content": {"type": "text", "text": summary}}),
        );

        let tokens = {
            let state = self.sessions.get_mut(session).expect("the session exists");
            state.tokens += 1200 + 4 * text.len() as u64;
            state.tokens
        };
        self.update(
            session,
            json!({"sessionUpdate": "usage_update", "used": tokens, "size": 200_000,
                   "cost": {"amount": tokens as f64 * 0.000_003, "currency": "USD"}}),
        );
        if turn == 1 {
            let title: String = text.chars().take(40).collect();
            self.update(
                session,
                json!({"sessionUpdate": "session_info_update", "title": title,
                       "updatedAt": jiff::Timestamp::now().to_string()}),
            );
        }
        Ok(())
    }
}
