//! A small ACP client that drives an agent through two prompt turns and prints a transcript.
//!
//! ```text
//! cargo run --example client -- <agent command…>
//! cargo run --example client -- target/debug/acp-journal --journal-dir demo-journals -- target/debug/examples/agent
//! ```
//!
//! It spawns the command, sends `initialize` (declaring `fs` and `subagents`: an agent may
//! show its subagents' work as child sessions), `session/new` (with one stdio MCP server whose
//! `env` carries a fake `GITHUB_TOKEN`: the agent receives it, an `acp-journal` journal stores
//! `[REDACTED]`) and two `session/prompt` turns. It answers the agent's requests the way an
//! editor would, without touching any file: `session/request_permission` → the `allow_once`
//! option, `fs/read_text_file` → fixed text, `fs/write_text_file` → `{}`.
//!
//! The transcript goes to stdout; the agent's stderr goes to stderr with a `  | ` prefix,
//! between transcript lines. Lines:
//! `> ` what we send, `< ` the agent's messages, `~ ` its thoughts, `! ` requests to us,
//! `tool:`, `plan:`, `usage:`, `title:`, `stop:`. Exits 1 with a message on any failure:
//! an error response, the agent going quiet for 30 s or exiting early, a non-zero exit status.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use serde_json::{Value, json};

/// How long the agent may stay silent while we wait for a response.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The two prompt turns.
const PROMPTS: [&str; 2] = [
    "Add a friendly greeting to hello.txt",
    "Thanks! Now add another one, please.",
];

/// A fake token in the shape of a GitHub one, so that the journal's redaction is visible.
const FAKE_TOKEN: &str = "ghp_exampleexampleexampleexample0000";

type Result<T, E = String> = std::result::Result<T, E>;

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.is_empty() {
        eprintln!("usage: client <agent command> [args…]");
        std::process::exit(2);
    }
    if let Err(e) = run(&argv) {
        let _ = std::io::stdout().flush();
        eprintln!("client: error: {e}");
        std::process::exit(1);
    }
}

fn run(argv: &[String]) -> Result<()> {
    let mut client = Client::spawn(argv)?;

    let init = client.request(
        "initialize",
        json!({
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": false, "subagents": {}},
            "clientInfo": {"name": "acp-journal-example-client", "version": env!("CARGO_PKG_VERSION")},
        }),
    )?;
    let agent = &init["agentInfo"];
    println!(
        "connected: {} {} (protocol {})",
        agent["name"].as_str().unwrap_or("unnamed agent"),
        agent["version"].as_str().unwrap_or(""),
        init["protocolVersion"]
    );

    let cwd = std::env::current_dir().map_err(|e| format!("current directory: {e}"))?;
    let new = client.request(
        "session/new",
        json!({
            "cwd": cwd.display().to_string(),
            "mcpServers": [{
                "name": "github",
                "command": "/usr/local/bin/github-mcp-server",
                "args": ["stdio"],
                "env": [{"name": "GITHUB_TOKEN", "value": FAKE_TOKEN}],
            }],
        }),
    )?;
    let session = new["sessionId"]
        .as_str()
        .ok_or_else(|| format!("session/new returned no sessionId: {new}"))?
        .to_owned();
    println!("session: {session}");

    for text in PROMPTS {
        println!();
        println!("> {text}");
        let result = client.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )?;
        let stop = result["stopReason"].as_str().unwrap_or("?");
        println!("stop: {stop}");
        if stop != "end_turn" {
            return Err(format!("the turn stopped with {stop}, not end_turn"));
        }
    }

    client.finish()
}

/// An agent process and what we know of the conversation.
struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    /// The agent's stdout, line by line (read by a thread).
    lines: Receiver<String>,
    /// The agent's stderr, line by line (read by a thread), shown between transcript lines.
    stderr_lines: Receiver<String>,
    next_id: u64,
    /// The streamed message being printed: (`sessionUpdate` kind, `messageId`).
    streaming: Option<(String, Value)>,
}

impl Client {
    fn spawn(argv: &[String]) -> Result<Client> {
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", argv[0]))?;
        let stdout = child.stdout.take().expect("piped");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = child.stderr.take().expect("piped");
        let (tx, stderr_lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Client {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr_lines,
            next_id: 0,
            streaming: None,
        })
    }

    fn send(&mut self, msg: &Value) -> Result<()> {
        let stdin = self.stdin.as_mut().ok_or("stdin is closed")?;
        writeln!(stdin, "{msg}")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("writing to the agent: {e}"))
    }

    /// Send a request; handle notifications and the agent's requests until its response.
    fn request(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            self.show_stderr();
            let line = match self.lines.recv_timeout(TIMEOUT) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!("no answer to {method} within {TIMEOUT:?}"));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(format!(
                        "the agent closed its stdout before answering {method}"
                    ));
                }
            };
            let msg: Value = serde_json::from_str(&line)
                .map_err(|e| format!("the agent wrote a line that is not JSON ({e}): {line}"))?;
            match (msg.get("method").and_then(Value::as_str), msg.get("id")) {
                (Some(m), Some(req_id)) => {
                    let req_id = req_id.clone();
                    let m = m.to_owned();
                    let answer = self.answer(&m, &msg["params"]);
                    let mut reply = json!({"jsonrpc": "2.0", "id": req_id});
                    match answer {
                        Ok(result) => reply["result"] = result,
                        Err(error) => reply["error"] = error,
                    }
                    self.send(&reply)?;
                }
                (Some("session/update"), None) => self.show_update(&msg["params"]["update"]),
                (Some(_), None) => {} // other notifications: nothing to show
                (None, _) if msg["id"] == id => {
                    // The agent's log lines travel on another pipe: let them catch up.
                    self.end_line();
                    while let Ok(line) = self.stderr_lines.recv_timeout(Duration::from_millis(50)) {
                        eprintln!("  | {line}");
                    }
                    return match msg.get("error") {
                        Some(error) => Err(format!("{method} failed: {error}")),
                        None => Ok(msg["result"].clone()),
                    };
                }
                (None, _) => {
                    self.end_line();
                    println!("? a response to no request of ours: {msg}");
                }
            }
        }
    }

    /// Answer a request from the agent, as an editor would (but without touching files).
    fn answer(&mut self, method: &str, params: &Value) -> Result<Value, Value> {
        self.end_line();
        let path = params["path"].as_str().unwrap_or("?");
        match method {
            "session/request_permission" => {
                let options = params["options"].as_array().cloned().unwrap_or_default();
                let pick = options
                    .iter()
                    .find(|o| o["kind"] == "allow_once")
                    .or(options.first());
                let title = params["toolCall"]["title"]
                    .as_str()
                    .unwrap_or("a tool call");
                match pick {
                    Some(option) => {
                        println!(
                            "! permission requested: {title} -> {}",
                            option["name"].as_str().unwrap_or("?")
                        );
                        Ok(
                            json!({"outcome": {"outcome": "selected", "optionId": option["optionId"]}}),
                        )
                    }
                    None => {
                        println!("! permission requested: {title} (no options) -> cancelled");
                        Ok(json!({"outcome": {"outcome": "cancelled"}}))
                    }
                }
            }
            "fs/read_text_file" => {
                println!("! read {path}");
                Ok(json!({"content": "# hello.txt (served by the example client)\n"}))
            }
            "fs/write_text_file" => {
                let bytes = params["content"].as_str().map_or(0, str::len);
                println!("! write {path} ({bytes} bytes; not really written)");
                Ok(json!({}))
            }
            other => {
                println!("! {other}: not supported");
                Err(json!({"code": -32601, "message": format!("method not found: {other}")}))
            }
        }
    }

    /// Print one `session/update`.
    fn show_update(&mut self, update: &Value) {
        let kind = update["sessionUpdate"].as_str().unwrap_or("?");
        let text = |v: &Value| v["content"]["text"].as_str().unwrap_or("").to_owned();
        match kind {
            "agent_message_chunk" | "agent_thought_chunk" => {
                let key = (kind.to_owned(), update["messageId"].clone());
                if self.streaming.as_ref() != Some(&key) {
                    self.end_line();
                    print!(
                        "{}",
                        if kind == "agent_message_chunk" {
                            "< "
                        } else {
                            "~ "
                        }
                    );
                    self.streaming = Some(key);
                }
                print!("{}", text(update));
                let _ = std::io::stdout().flush();
            }
            "tool_call" | "tool_call_update" => {
                self.end_line();
                let id = update["toolCallId"].as_str().unwrap_or("?");
                let mut line = format!("tool: {id}");
                for field in ["title", "kind", "status"] {
                    if let Some(v) = update[field].as_str() {
                        line.push_str(&format!(" {field}={v}"));
                    }
                }
                for item in update["content"].as_array().into_iter().flatten() {
                    match item["type"].as_str() {
                        Some("diff") => line
                            .push_str(&format!(" [diff {}]", item["path"].as_str().unwrap_or("?"))),
                        Some("content") => line.push_str(&format!(" \"{}\"", text(item))),
                        _ => {}
                    }
                }
                println!("{line}");
            }
            "plan" => {
                self.end_line();
                println!("{}", acp_journal::render::plan_summary(update));
            }
            "usage_update" => {
                self.end_line();
                println!(
                    "usage: {} / {} tokens, cost {} {}",
                    update["used"],
                    update["size"],
                    update["cost"]["amount"],
                    update["cost"]["currency"].as_str().unwrap_or("")
                );
            }
            "session_info_update" => {
                self.end_line();
                println!("title: {}", update["title"]);
            }
            other => {
                self.end_line();
                println!("({other})");
            }
        }
    }

    /// End a streamed message's line, if one is open.
    fn end_line(&mut self) {
        if self.streaming.take().is_some() {
            println!();
        }
        self.show_stderr();
    }

    /// Print what the agent logged so far, unless that would split a streamed line.
    fn show_stderr(&mut self) {
        if self.streaming.is_some() {
            return;
        }
        let _ = std::io::stdout().flush();
        while let Ok(line) = self.stderr_lines.try_recv() {
            eprintln!("  | {line}");
        }
    }

    /// Close the agent's stdin, drain its stdout, wait for it; its exit status must be 0.
    fn finish(mut self) -> Result<()> {
        self.stdin = None;
        loop {
            match self.lines.recv_timeout(TIMEOUT) {
                Ok(line) => println!("? after the last turn: {line}"),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    let _ = self.child.kill();
                    return Err(format!("the agent did not exit within {TIMEOUT:?} of EOF"));
                }
            }
        }
        let status = self
            .child
            .wait()
            .map_err(|e| format!("waiting for the agent: {e}"))?;
        // The reader thread ends at EOF, once every holder of the pipe has exited.
        while let Ok(line) = self.stderr_lines.recv_timeout(Duration::from_secs(5)) {
            eprintln!("  | {line}");
        }
        println!();
        if !status.success() {
            return Err(format!("the agent exited with {status}"));
        }
        println!("agent exited: {status}");
        Ok(())
    }
}
