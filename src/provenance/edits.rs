//! A session's file changes, derived from its journaled records as they are (old journals
//! included: nothing new is recorded for this).
//!
//! Three sources: a tool call's `diff` content (`tool_call` / `tool_call_update`, ACP v2's
//! `tool_call_content_chunk`: what agents that edit files themselves report), the agent's
//! `fs/write_text_file` requests (the content against what the file held, as far as the
//! session saw it: a read's answer, an earlier write, a new file's diff), and commands (an
//! `execute` tool call, `terminal/create`), which may have changed any file and say nothing
//! of what.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::lines::{self, Change};
use super::patch;
use crate::journal::{Body, Header, Record};
use crate::wire::Side;

/// How an edit reached the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// A tool call's `diff` content (the agent wrote the file itself).
    Diff,
    /// An `fs/write_text_file` request (the client wrote it).
    Write,
}

/// Who asked for a change: the session, its turn, the agent and model, the prompt.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    /// The session ID.
    pub session: String,
    /// The prompt turn, 1 for the session's first (0 before any prompt).
    pub turn: u64,
    /// The tool call that made it, when known.
    pub tool_call: Option<String>,
    /// The agent's name (`agentInfo.name` of its `initialize` answer).
    pub agent: Option<String>,
    /// The model the session ran on, when the agent or the client said.
    pub model: Option<String>,
    /// The first line of the turn's prompt.
    pub prompt: String,
    /// When the proxy saw it, Unix microseconds.
    pub time_us: i64,
}

/// One change of one file's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edit {
    /// Who and when.
    pub origin: Origin,
    /// The file, absolute (a relative path is taken from the session's working directory).
    pub path: PathBuf,
    /// The lines it wrote and the texts it took away.
    pub change: Change,
    /// Where it was seen.
    pub how: How,
}

/// A command the agent ran: it may have changed files, and says nothing of which.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    /// Who and when.
    pub origin: Origin,
    /// The command line, as the agent gave it.
    pub command: String,
    /// Where it ran, when known.
    pub cwd: Option<PathBuf>,
}

/// What a session's records say it changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Derived {
    /// Every edit, in time order.
    pub edits: Vec<Edit>,
    /// Every command, in time order.
    pub commands: Vec<Command>,
}

/// Reads one session's records in order (every segment, each after its header) and derives
/// its edits and commands.
#[derive(Debug, Default)]
pub struct Deriver {
    origin: Origin,
    cwd: Option<PathBuf>,
    /// The agent's requests waiting for the client's answer: their id (as JSON) → what.
    asked: HashMap<String, Asked>,
    /// The client's requests waiting for the agent's answer: their id → the method.
    client_asked: HashMap<String, String>,
    /// The text of each file as far as the session saw it.
    known: HashMap<PathBuf, String>,
    /// The config option IDs that choose the model.
    model_options: Vec<String>,
    /// The tool call running last, for the writes it makes through the client.
    running_tool: Option<String>,
    /// Each tool call's latest status.
    statuses: HashMap<String, String>,
    /// A tool call's diffs by (tool call, path): a call reports its diffs more than once, and a
    /// report may hold several of one file (codex-acp: one per hunk).
    diffs: Vec<((String, PathBuf), Vec<Edit>)>,
    /// The (tool call, path) of the diffs taken already ([`Deriver::take`]).
    taken: HashSet<(String, PathBuf)>,
    edits: Vec<Edit>,
    commands: Vec<Command>,
    /// The commands of tool calls told already (a call reports its input more than once).
    seen_commands: HashSet<String>,
}

#[derive(Debug)]
enum Asked {
    Read(PathBuf),
    Write(Edit),
    Other,
}

impl Deriver {
    /// A deriver for `session`.
    pub fn new(session: &str) -> Deriver {
        Deriver {
            origin: Origin {
                session: session.to_string(),
                ..Origin::default()
            },
            ..Deriver::default()
        }
    }

    /// A deriver for `session` that goes on after `turns` prompt turns (read from its earlier
    /// segments).
    pub fn continuing(session: &str, turns: u64) -> Deriver {
        let mut deriver = Deriver::new(session);
        deriver.origin.turn = turns;
        deriver
    }

    /// Whether a record's line can tell an edit, a command, a turn, a model or an answer: the
    /// others (message chunks, plans…) need not be decoded.
    pub fn wants(line: &[u8]) -> bool {
        static FINDERS: std::sync::LazyLock<Vec<memchr::memmem::Finder<'static>>> =
            std::sync::LazyLock::new(|| {
                [
                    &b"\"diff\""[..],
                    b"\"fs/",
                    b"session/prompt",
                    b"session/new",
                    b"session/load",
                    b"session/resume",
                    b"session/set_",
                    b"config_option_update",
                    b"current_model_update",
                    b"terminal/create",
                    b"\"execute\"",
                    b"\"result\"",
                    b"\"error\"",
                ]
                .into_iter()
                .map(memchr::memmem::Finder::new)
                .collect()
            });
        FINDERS.iter().any(|f| f.find(line).is_some())
    }

    /// A segment begins: its working directory and agent.
    pub fn header(&mut self, header: &Header) {
        if let Some(cwd) = &header.cwd {
            self.cwd = Some(PathBuf::from(cwd));
        }
        let name = header
            .initialize
            .as_ref()
            .and_then(|i| i.response_value())
            .and_then(|r| {
                r["result"]["agentInfo"]["name"]
                    .as_str()
                    .map(str::to_string)
            });
        if name.is_some() {
            self.origin.agent = name;
        }
    }

    /// The next record of the session.
    pub fn record(&mut self, record: &Record) {
        let Body::Message { from, payload } = &record.body else {
            return;
        };
        let Ok(msg) = serde_json::from_slice::<Value>(&payload.bytes) else {
            return;
        };
        self.origin.time_us = record.unix_us;
        let method = msg["method"].as_str();
        let id = msg
            .get("id")
            .filter(|id| !id.is_null())
            .map(Value::to_string);
        match (from, method, id) {
            (Side::Client, Some(method), id) => self.client_message(method, &msg["params"], id),
            (Side::Agent, Some(method), id) => self.agent_message(method, &msg["params"], id),
            (Side::Client, None, Some(id)) => self.client_answer(&id, &msg),
            (Side::Agent, None, Some(id)) => {
                if let Some(method) = self.client_asked.remove(&id) {
                    self.agent_answer(&method, &msg["result"]);
                }
            }
            _ => {}
        }
    }

    /// Everything derived, in time order (a write not answered yet counts: it may have been
    /// made).
    pub fn finish(mut self) -> Derived {
        for (_, asked) in std::mem::take(&mut self.asked) {
            if let Asked::Write(edit) = asked {
                self.edits.push(edit);
            }
        }
        self.take()
    }

    /// What was derived since the last call, in time order: the writes answered, the diffs of
    /// tool calls that did not fail, the commands (the index takes a turn's when it ends). A
    /// diff of a call and file already taken, reported again, is not taken twice.
    pub fn take(&mut self) -> Derived {
        let mut edits = std::mem::take(&mut self.edits);
        for ((call, path), diffs) in std::mem::take(&mut self.diffs) {
            if self.statuses.get(&call).map(String::as_str) != Some("failed") {
                edits.extend(diffs);
            }
            self.taken.insert((call, path));
        }
        edits.sort_by_key(|e| e.origin.time_us);
        let mut commands = std::mem::take(&mut self.commands);
        commands.sort_by_key(|c| c.origin.time_us);
        Derived { edits, commands }
    }

    fn client_message(&mut self, method: &str, params: &Value, id: Option<String>) {
        match method {
            "session/prompt" if params["sessionId"] == self.origin.session.as_str() => {
                self.origin.turn += 1;
                self.origin.prompt = first_line(&crate::acp::prompt_text(&params["prompt"]));
                self.running_tool = None;
            }
            "session/new" | "session/load" | "session/resume" => {
                if let Some(cwd) = params["cwd"].as_str() {
                    self.cwd = Some(PathBuf::from(cwd));
                }
            }
            "session/set_model" => {
                if let Some(model) = params["modelId"].as_str() {
                    self.origin.model = Some(model.to_string());
                }
            }
            "session/set_config_option" => {
                let chosen = params["configId"]
                    .as_str()
                    .is_some_and(|c| c == "model" || self.model_options.iter().any(|m| m == c));
                if let (true, Some(value)) = (chosen, params["value"].as_str()) {
                    self.origin.model = Some(value.to_string());
                }
            }
            _ => {}
        }
        if let Some(id) = id {
            self.client_asked.insert(id, method.to_string());
        }
    }

    fn agent_message(&mut self, method: &str, params: &Value, id: Option<String>) {
        let asked = match method {
            "session/update" => {
                self.update(&params["update"]);
                return;
            }
            "fs/read_text_file" if params["line"].is_null() && params["limit"].is_null() => {
                match self.path(params["path"].as_str()) {
                    Some(path) => Asked::Read(path),
                    None => Asked::Other,
                }
            }
            "fs/write_text_file" => match (
                self.path(params["path"].as_str()),
                params["content"].as_str(),
            ) {
                (Some(path), Some(content)) => {
                    let change = lines::change(self.known.get(&path).map(String::as_str), content);
                    self.known.insert(path.clone(), content.to_string());
                    Asked::Write(Edit {
                        origin: Origin {
                            tool_call: self.running_tool.clone(),
                            ..self.origin.clone()
                        },
                        path,
                        change,
                        how: How::Write,
                    })
                }
                _ => Asked::Other,
            },
            "terminal/create" => {
                let mut command = params["command"].as_str().unwrap_or_default().to_string();
                for arg in params["args"].as_array().into_iter().flatten() {
                    command.push(' ');
                    command.push_str(arg.as_str().unwrap_or_default());
                }
                let cwd = self
                    .path(params["cwd"].as_str())
                    .or_else(|| self.cwd.clone());
                self.command(command, cwd, self.running_tool.clone());
                Asked::Other
            }
            _ => Asked::Other,
        };
        match id {
            Some(id) => {
                self.asked.insert(id, asked);
            }
            // A write sent as a notification has no answer to wait for.
            None => {
                if let Asked::Write(edit) = asked {
                    self.edits.push(edit);
                }
            }
        }
    }

    /// The client answered one of the agent's requests.
    fn client_answer(&mut self, id: &str, msg: &Value) {
        let Some(asked) = self.asked.remove(id) else {
            return;
        };
        let ok = msg.get("error").is_none();
        match asked {
            Asked::Read(path) => {
                if let Some(content) = msg["result"]["content"].as_str() {
                    self.known.insert(path, content.to_string());
                }
            }
            Asked::Write(edit) if ok => self.edits.push(edit),
            // A refused write changed nothing: what the file holds is unknown again.
            Asked::Write(edit) => {
                self.known.remove(&edit.path);
            }
            Asked::Other => {}
        }
    }

    /// The agent answered one of the client's requests.
    fn agent_answer(&mut self, method: &str, result: &Value) {
        if !matches!(
            method,
            "session/new" | "session/load" | "session/resume" | "session/fork"
        ) {
            return;
        }
        if let Some(model) = result["models"]["currentModelId"].as_str() {
            self.origin.model = Some(model.to_string());
        }
        self.config_options(&result["configOptions"]);
    }

    /// `configOptions` (a session's answer, a `config_option_update`): the model's.
    fn config_options(&mut self, options: &Value) {
        for option in options.as_array().into_iter().flatten() {
            let Some(id) = option["id"].as_str() else {
                continue;
            };
            if id != "model" && option["category"] != "model" {
                continue;
            }
            if !self.model_options.iter().any(|m| m == id) {
                self.model_options.push(id.to_string());
            }
            if let Some(value) = option["currentValue"].as_str() {
                self.origin.model = Some(value.to_string());
            }
        }
    }

    fn update(&mut self, update: &Value) {
        match update["sessionUpdate"].as_str() {
            // ACP v2 streams a call's content a piece at a time (one `content` each).
            Some("tool_call" | "tool_call_update" | "tool_call_content_chunk") => {
                self.tool_call(update);
            }
            Some("config_option_update") => self.config_options(&update["configOptions"]),
            Some("current_model_update") => {
                if let Some(model) = update["modelId"].as_str() {
                    self.origin.model = Some(model.to_string());
                }
            }
            _ => {}
        }
    }

    fn tool_call(&mut self, update: &Value) {
        let Some(call) = update["toolCallId"].as_str() else {
            return;
        };
        if let Some(status) = update["status"].as_str() {
            self.statuses.insert(call.to_string(), status.to_string());
        }
        let status = self.statuses.get(call).map(String::as_str);
        if matches!(status, Some("completed" | "failed")) {
            if self.running_tool.as_deref() == Some(call) {
                self.running_tool = None;
            }
        } else {
            self.running_tool = Some(call.to_string());
        }
        if update["kind"] == "execute" {
            let input = &update["rawInput"];
            let command = match &input["command"] {
                Value::String(c) => c.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" "),
                _ => update["title"].as_str().unwrap_or_default().to_string(),
            };
            let cwd = self
                .path(input["cwd"].as_str())
                .or_else(|| self.cwd.clone());
            self.command(command, cwd, Some(call.to_string()));
        }
        // A `tool_call` or `tool_call_update` gives the call's content whole: its diffs of a
        // file stand for the ones reported before; a v2 content chunk adds one.
        let chunk = update["sessionUpdate"] == "tool_call_content_chunk";
        let mut reported: HashSet<PathBuf> = HashSet::new();
        let content = &update["content"];
        let diffs = content
            .as_array()
            .map_or_else(|| vec![content], |all| all.iter().collect())
            .into_iter()
            .filter(|c| c["type"] == "diff");
        for diff in diffs {
            // ACP v2's `Diff`: its `git_patch`, a hunk at a time (`changes` name the paths).
            if diff["patch"]["format"] == "git_patch" {
                let text = diff["patch"]["text"].as_str().unwrap_or_default();
                for file in patch::files(text) {
                    let Some(path) = self.path(file.path.as_deref()) else {
                        continue;
                    };
                    for (old, new) in &file.hunks {
                        let old = (!file.added).then_some(old.as_str());
                        self.diff(call, path.clone(), old, new, chunk, &mut reported);
                    }
                }
                continue;
            }
            let (Some(path), Some(new)) =
                (self.path(diff["path"].as_str()), diff["newText"].as_str())
            else {
                continue;
            };
            self.diff(
                call,
                path,
                diff["oldText"].as_str(),
                new,
                chunk,
                &mut reported,
            );
        }
    }

    /// A diff of `path` (`old` → `new`, a whole file or a hunk) that tool call `call` reported;
    /// `chunk`: in a v2 content chunk (which adds to what the call reported); `reported`: the
    /// paths of this report so far.
    fn diff(
        &mut self,
        call: &str,
        path: PathBuf,
        old: Option<&str>,
        new: &str,
        chunk: bool,
        reported: &mut HashSet<PathBuf>,
    ) {
        let change = lines::change(old, new);
        self.learn(&path, old, new);
        let edit = Edit {
            origin: Origin {
                tool_call: Some(call.to_string()),
                ..self.origin.clone()
            },
            path: path.clone(),
            change,
            how: How::Diff,
        };
        let first = reported.insert(path.clone());
        let key = (call.to_string(), path);
        if self.taken.contains(&key) {
            return;
        }
        // The latest report of a call's diffs of a file stands for them.
        match self.diffs.iter_mut().find(|(k, _)| *k == key) {
            Some((_, earlier)) => {
                if first && !chunk {
                    earlier.clear();
                }
                earlier.push(edit);
            }
            None => self.diffs.push((key, vec![edit])),
        }
    }

    /// What a diff says the file holds now.
    fn learn(&mut self, path: &Path, old: Option<&str>, new: &str) {
        match old {
            None => {
                self.known.insert(path.to_path_buf(), new.to_string());
            }
            Some(old) => {
                let Some(text) = self.known.get_mut(path) else {
                    return;
                };
                if text.matches(old).count() == 1 {
                    *text = text.replacen(old, new, 1);
                } else {
                    self.known.remove(path);
                }
            }
        }
    }

    fn command(&mut self, command: String, cwd: Option<PathBuf>, tool_call: Option<String>) {
        if command.is_empty()
            || (tool_call.is_some()
                && !self
                    .seen_commands
                    .insert(format!("{tool_call:?} {command}")))
        {
            return;
        }
        self.commands.push(Command {
            origin: Origin {
                tool_call,
                ..self.origin.clone()
            },
            command,
            cwd,
        });
    }

    /// A path the agent named, absolute (a relative one from the session's directory).
    fn path(&self, path: Option<&str>) -> Option<PathBuf> {
        let path = Path::new(path.filter(|p| !p.is_empty())?);
        if path.is_absolute() {
            return Some(path.to_path_buf());
        }
        Some(self.cwd.as_ref()?.join(path))
    }
}

/// The first non-empty line of a prompt, trimmed, at most 200 characters.
fn first_line(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    line.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Payload;
    use crate::provenance::lines::fingerprint;

    /// The `i`th record of a test session: `line` (`>` client, `<` agent), `i + 1` seconds in.
    fn record(i: usize, line: &str) -> Record {
        let (from, json) = match line.split_at(1) {
            (">", json) => (Side::Client, json),
            (_, json) => (Side::Agent, json),
        };
        Record {
            seq: i as u64,
            unix_us: 1_000_000 * (i as i64 + 1),
            mono_us: 0,
            body: Body::Message {
                from,
                payload: Payload::from_line(json.as_bytes().to_vec().into()),
            },
        }
    }

    /// A deriver for `s1` fed `lines` (`>` client, `<` agent), one second apart.
    fn derive(lines: &[&str]) -> Derived {
        let mut d = Deriver::new("s1");
        for (i, line) in lines.iter().enumerate() {
            d.record(&record(i, line));
        }
        d.finish()
    }

    fn prints(lines: &[&str]) -> Vec<u64> {
        lines.iter().map(|l| fingerprint(l)).collect()
    }

    const NEW: &str = r#">{"jsonrpc":"2.0","id":0,"method":"session/new","params":{"cwd":"/repo","mcpServers":[]}}"#;
    const NEW_ANSWER: &str = r#"<{"jsonrpc":"2.0","id":0,"result":{"sessionId":"s1","models":{"currentModelId":"m-1","availableModels":[]}}}"#;
    const PROMPT: &str = r#">{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"\n  Add a greeting\nand more"}]}}"#;

    #[test]
    fn a_diff_reported_twice_is_one_edit_with_its_turn_model_and_prompt() {
        let d = derive(&[
            NEW,
            NEW_ANSWER,
            PROMPT,
            r#"<{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"t1","kind":"edit","status":"pending","content":[{"type":"diff","path":"src/a.rs","oldText":"a\nb\n","newText":"a\nB\nc\n"}]}}}"#,
            r#"<{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed","content":[{"type":"diff","path":"src/a.rs","oldText":"a\nb\n","newText":"a\nB\nc\n"}]}}}"#,
        ]);
        assert_eq!(d.edits.len(), 1, "{d:?}");
        let e = &d.edits[0];
        assert_eq!(e.path, Path::new("/repo/src/a.rs"));
        assert_eq!(e.how, How::Diff);
        assert_eq!(e.change.written, prints(&["B", "c"]));
        assert_eq!(e.change.removed, prints(&["b"]));
        assert_eq!(e.origin.turn, 1);
        assert_eq!(e.origin.tool_call.as_deref(), Some("t1"));
        assert_eq!(e.origin.model.as_deref(), Some("m-1"));
        assert_eq!(e.origin.prompt, "Add a greeting");
        assert_eq!(e.origin.time_us, 5_000_000);
    }

    #[test]
    fn a_v2_content_chunks_diff_is_an_edit() {
        let d = derive(&[
            NEW,
            PROMPT,
            r#"<{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"t9","kind":"edit","status":"in_progress"}}}"#,
            r#"<{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_content_chunk","toolCallId":"t9","content":{"type":"diff","path":"/repo/v2.rs","oldText":"a\n","newText":"a\nb\n"}}}}"#,
        ]);
        assert_eq!(d.edits.len(), 1, "{d:?}");
        assert_eq!(d.edits[0].change.written, prints(&["b"]));
        assert_eq!(d.edits[0].origin.tool_call.as_deref(), Some("t9"));
    }

    /// codex-acp 2.6 (v1) reports an `apply_patch` as a `tool_call` whose content holds one
    /// diff per hunk of each file, with the hunk's context lines, then a `tool_call_update`
    /// with the status only.
    #[test]
    fn a_call_reporting_a_diff_per_hunk_of_one_file_is_an_edit_each() {
        let d = derive(&[
            NEW,
            PROMPT,
            r#"<{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"call_edit","kind":"edit","title":"Editing files","status":"in_progress","content":[{"type":"diff","oldText":"def total(items):\n    return sum(items)\n\n","newText":"def total(items, discount=0.0):\n    gross = sum(items)\n    return round(gross * (1 - discount), 2)\n\n","path":"/repo/cart.py","_meta":{"kind":"update"}},{"type":"diff","oldText":"def count(items):\n    return len(items)\n\n","newText":"def count(items):\n    return len(list(items))\n\n","path":"/repo/cart.py","_meta":{"kind":"update"}}]}}}"#,
            r#"<{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"call_edit","status":"completed"}}}"#,
        ]);
        assert_codex_hunks(&d);
    }

    /// The two hunks codex-acp's `apply_patch` of the tests makes of `/repo/cart.py`, each an
    /// edit of call `call_edit` in turn 1.
    fn assert_codex_hunks(d: &Derived) {
        let changes: Vec<&Change> = d.edits.iter().map(|e| &e.change).collect();
        assert_eq!(
            changes,
            [
                &Change {
                    written: prints(&[
                        "def total(items, discount=0.0):",
                        "    gross = sum(items)",
                        "    return round(gross * (1 - discount), 2)",
                    ]),
                    removed: {
                        let mut r = prints(&["def total(items):", "    return sum(items)"]);
                        r.sort_unstable();
                        r
                    },
                },
                &Change {
                    written: prints(&["    return len(list(items))"]),
                    removed: prints(&["    return len(items)"]),
                },
            ],
            "{d:?}"
        );
        assert!(d.edits.iter().all(|e| e.path == Path::new("/repo/cart.py")
            && e.origin.tool_call.as_deref() == Some("call_edit")
            && e.origin.turn == 1));
    }

    /// ACP v2's `Diff` (codex-acp to a v2 client): `changes` and a `git_patch`, one file of two
    /// hunks with their context: the same edits as v1's diff per hunk.
    #[test]
    fn a_v2_diffs_git_patch_is_an_edit_per_hunk() {
        let d = derive(&[
            NEW,
            PROMPT,
            r#"<{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"call_edit","kind":"edit","title":"Editing files","status":"in_progress","content":[{"type":"diff","changes":[{"operation":"modify","path":"/repo/cart.py"}],"patch":{"format":"git_patch","text":"diff --git /repo/cart.py /repo/cart.py\n--- /repo/cart.py\n+++ /repo/cart.py\n@@ -1,3 +1,4 @@\n-def total(items):\n-    return sum(items)\n+def total(items, discount=0.0):\n+    gross = sum(items)\n+    return round(gross * (1 - discount), 2)\n \n@@ -7,3 +8,3 @@\n def count(items):\n-    return len(items)\n+    return len(list(items))\n \n"}}]}}}"#,
            r#"<{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"call_edit","status":"completed"}}}"#,
        ]);
        assert_codex_hunks(&d);
    }

    /// A later report of the call's content stands for the earlier one, every hunk of it; v2
    /// content chunks add up.
    #[test]
    fn a_later_report_of_a_calls_hunks_replaces_them_and_chunks_add_up() {
        let hunk = |call: &str, kind: &str, content: &str| {
            format!(
                r#"<{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s1","update":{{"sessionUpdate":"{kind}","toolCallId":"{call}","content":{content}}}}}}}"#
            )
        };
        let diff = |old: &str, new: &str| {
            format!(r#"{{"type":"diff","path":"/r/a","oldText":"{old}\n","newText":"{new}\n"}}"#)
        };
        let lines = [
            PROMPT.to_string(),
            hunk(
                "t1",
                "tool_call",
                &format!("[{},{}]", diff("a", "A"), diff("b", "B")),
            ),
            hunk(
                "t1",
                "tool_call_update",
                &format!("[{},{}]", diff("a", "A"), diff("b", "B")),
            ),
            hunk("t2", "tool_call", "[]"),
            hunk("t2", "tool_call_content_chunk", &diff("c", "C")),
            hunk("t2", "tool_call_content_chunk", &diff("d", "D")),
        ];
        let d = derive(&lines.iter().map(String::as_str).collect::<Vec<_>>());
        let written: Vec<Vec<u64>> = d.edits.iter().map(|e| e.change.written.clone()).collect();
        assert_eq!(
            written,
            [
                prints(&["A"]),
                prints(&["B"]),
                prints(&["C"]),
                prints(&["D"])
            ]
        );
    }

    #[test]
    fn a_failed_tool_calls_diff_changed_nothing() {
        let d = derive(&[
            PROMPT,
            r#"<{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"t1","kind":"edit","content":[{"type":"diff","path":"/r/a","newText":"x\n"}]}}}"#,
            r#"<{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"failed"}}}"#,
        ]);
        assert!(d.edits.is_empty(), "{d:?}");
    }

    #[test]
    fn a_write_is_measured_against_what_the_session_read_and_wrote_before() {
        let d = derive(&[
            NEW,
            PROMPT,
            r#"<{"jsonrpc":"2.0","id":5,"method":"fs/read_text_file","params":{"sessionId":"s1","path":"/repo/a.txt"}}"#,
            r#">{"jsonrpc":"2.0","id":5,"result":{"content":"one\ntwo\n"}}"#,
            r#"<{"jsonrpc":"2.0","id":6,"method":"fs/write_text_file","params":{"sessionId":"s1","path":"/repo/a.txt","content":"one\n2\nthree\n"}}"#,
            r#">{"jsonrpc":"2.0","id":6,"result":{}}"#,
            r#"<{"jsonrpc":"2.0","id":7,"method":"fs/write_text_file","params":{"sessionId":"s1","path":"/repo/a.txt","content":"one\nthree\n"}}"#,
            r#">{"jsonrpc":"2.0","id":7,"result":null}"#,
            // A refused write is no edit.
            r#"<{"jsonrpc":"2.0","id":8,"method":"fs/write_text_file","params":{"sessionId":"s1","path":"/repo/b.txt","content":"b\n"}}"#,
            r#">{"jsonrpc":"2.0","id":8,"error":{"code":-32603,"message":"no"}}"#,
            // A file never read is written whole.
            r#"<{"jsonrpc":"2.0","id":9,"method":"fs/write_text_file","params":{"sessionId":"s1","path":"c.txt","content":"c\nd\n"}}"#,
        ]);
        let summary: Vec<(&Path, &Change)> = d
            .edits
            .iter()
            .map(|e| (e.path.as_path(), &e.change))
            .collect();
        assert_eq!(
            summary,
            vec![
                (
                    Path::new("/repo/a.txt"),
                    &Change {
                        written: prints(&["2", "three"]),
                        removed: prints(&["two"])
                    }
                ),
                (
                    Path::new("/repo/a.txt"),
                    &Change {
                        written: vec![],
                        removed: prints(&["2"])
                    }
                ),
                (
                    Path::new("/repo/c.txt"),
                    &Change {
                        written: prints(&["c", "d"]),
                        removed: vec![]
                    }
                ),
            ]
        );
        assert!(
            d.edits
                .iter()
                .all(|e| e.how == How::Write && e.origin.turn == 1)
        );
    }

    #[test]
    fn commands_may_have_changed_files_and_are_told_once() {
        let d = derive(&[
            NEW,
            PROMPT,
            r#"<{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"t2","kind":"execute","rawInput":{"command":["cargo","fmt"]}}}}"#,
            r#"<{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"t2","kind":"execute","status":"completed","rawInput":{"command":["cargo","fmt"]}}}}"#,
            r#"<{"jsonrpc":"2.0","id":3,"method":"terminal/create","params":{"sessionId":"s1","command":"sed","args":["-i","s/a/b/","x"],"cwd":"sub"}}"#,
        ]);
        let commands: Vec<(&str, Option<&Path>, Option<&str>)> = d
            .commands
            .iter()
            .map(|c| {
                (
                    c.command.as_str(),
                    c.cwd.as_deref(),
                    c.origin.tool_call.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            commands,
            vec![
                ("cargo fmt", Some(Path::new("/repo")), Some("t2")),
                ("sed -i s/a/b/ x", Some(Path::new("/repo/sub")), None),
            ]
        );
        assert!(d.edits.is_empty());
    }

    #[test]
    fn taken_turn_by_turn_the_edits_are_those_of_one_finish_and_a_diff_reported_again_is_not_twice()
    {
        let diff = |call: &str, status: &str| {
            format!(
                r#"<{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s1","update":{{"sessionUpdate":"tool_call_update","toolCallId":"{call}","status":"{status}","content":[{{"type":"diff","path":"/r/a","oldText":"a\n","newText":"a\n{call}\n"}}]}}}}}}"#
            )
        };
        let (t1, t2) = (diff("t1", "completed"), diff("t2", "completed"));
        let lines = [NEW, PROMPT, &t1, &t2];
        let whole = derive(&lines);
        let mut d = Deriver::continuing("s1", 4);
        let mut taken = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            d.record(&record(i, line));
            // Taken after the first diff: its report again is not a second edit.
            if i == 2 {
                taken.extend(d.take().edits);
                d.record(&Record {
                    seq: 9,
                    unix_us: 3_500_000,
                    mono_us: 0,
                    body: Body::Message {
                        from: Side::Agent,
                        payload: Payload::from_line(t1.as_bytes()[1..].to_vec().into()),
                    },
                });
            }
        }
        taken.extend(d.finish().edits);
        // The same edits, the turns counted on from the earlier segments' 4.
        assert_eq!(taken.len(), 2, "{taken:?}");
        for (a, b) in taken.iter().zip(&whole.edits) {
            assert_eq!(a.change, b.change);
            assert_eq!((a.origin.turn, b.origin.turn), (5, 1));
        }
        assert!(Deriver::wants(t1.as_bytes()));
        assert!(!Deriver::wants(
            br#"{"sessionUpdate":"agent_message_chunk"}"#
        ));
    }

    #[test]
    fn the_model_follows_the_sessions_choices() {
        let d = derive(&[
            NEW,
            r#"<{"jsonrpc":"2.0","id":0,"result":{"sessionId":"s1","configOptions":[{"id":"mdl","category":"model","currentValue":"a"}]}}"#,
            r#">{"jsonrpc":"2.0","id":1,"method":"session/set_config_option","params":{"sessionId":"s1","configId":"mdl","value":"b"}}"#,
            PROMPT,
            r#"<{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"t1","content":[{"type":"diff","path":"/r/a","newText":"x\n"}]}}}"#,
        ]);
        assert_eq!(d.edits[0].origin.model.as_deref(), Some("b"));
    }
}
