//! `rerun`: a recording turned into the client of a real agent, through the journaling proxy.
//!
//! The agent runs under `acp-journal -- <agent…>` (this same binary, same journal directory), so
//! the new run is journaled exactly like any other. The recorded client messages are sent in order,
//! with the new session IDs; the agent's requests are answered from the recording. At the end the
//! new recording is compared with the original.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::catalog::Catalog;
use crate::cli::RerunArgs;
use crate::journal::{JournalDir, SegmentReader};
use crate::replay::diff;
use crate::replay::recording::{AgentRequest, Exchange, Recording};

/// The agent, seen as a client sees it.
struct Agent {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Vec<u8>>,
    next_id: u64,
    timeout: Duration,
}

impl Agent {
    fn start(journals: &JournalDir, agent: &[String], timeout: Duration) -> anyhow::Result<Agent> {
        let exe = std::env::current_exe().context("finding acp-journal itself")?;
        let mut child = Command::new(exe)
            .arg("--journal-dir")
            .arg(journals.root())
            .arg("--")
            .args(agent)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting the proxy")?;
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).split(b'\n') {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Ok(Agent {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            next_id: 1,
            timeout,
        })
    }

    fn send(&mut self, message: &Value) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().context("the agent's input is closed")?;
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        stdin.write_all(&line).context("writing to the agent")?;
        stdin.flush()?;
        Ok(())
    }

    /// Send a request and wait for its response, answering the agent's requests meanwhile.
    fn call(
        &mut self,
        method: &str,
        params: &Value,
        answers: &mut Answers<'_>,
    ) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let response = self.until(answers, &format!("answer {method}"), |m| {
            m.get("method").is_none() && m.get("id") == Some(&json!(id))
        })?;
        if method == "session/prompt"
            && response["result"].get("stopReason").is_none()
            && response["result"].get("messageId").is_some()
        {
            // ACP v2: the agent took the prompt; the turn ends with its idle state.
            let session = params["sessionId"].clone();
            self.until(answers, "end the turn", |m| {
                let update = &m["params"]["update"];
                m["method"] == "session/update"
                    && m["params"]["sessionId"] == session
                    && update["sessionUpdate"] == "state_update"
                    && update["state"] == "idle"
                    && update["stopReason"].is_string()
            })?;
        }
        Ok(response)
    }

    /// Read the agent's messages until one `is_it`, answering its requests meanwhile (`what`
    /// the agent is waited for to do, for the errors).
    fn until(
        &mut self,
        answers: &mut Answers<'_>,
        what: &str,
        is_it: impl Fn(&Value) -> bool,
    ) -> anyhow::Result<Value> {
        let deadline = Instant::now() + self.timeout;
        loop {
            let wait = deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(wait) {
                Ok(line) => line,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    bail!(
                        "the agent did not {what} within {} s",
                        self.timeout.as_secs_f64()
                    )
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    bail!("the agent exited before it could {what}")
                }
            };
            let Ok(message) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            if is_it(&message) {
                return Ok(message);
            }
            if let (Some(request_id), Some(m)) = (message.get("id"), message.get("method")) {
                let m = m.as_str().unwrap_or("");
                let mut reply = answers.answer(m, &message["params"]);
                reply["jsonrpc"] = json!("2.0");
                reply["id"] = request_id.clone();
                self.send(&reply)?;
            }
        }
    }

    /// Close the agent's input and wait for the proxy to finish journaling.
    fn finish(mut self) -> anyhow::Result<()> {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.child.kill()?;
        self.child.wait()?;
        bail!("the agent did not exit within 30 s of its input closing; it was killed")
    }
}

/// Answers to the agent's requests, taken from one recorded exchange (then the whole recording).
struct Answers<'a> {
    exchange: Vec<&'a AgentRequest>,
    everywhere: &'a Recording,
}

impl<'a> Answers<'a> {
    fn of(exchange: Option<&'a Exchange>, everywhere: &'a Recording) -> Answers<'a> {
        let exchange = exchange
            .into_iter()
            .flat_map(|e| e.during.iter().chain(&e.after))
            .filter_map(|s| s.request.as_ref())
            .collect();
        Answers {
            exchange,
            everywhere,
        }
    }

    /// The reply (`{"result":…}` or `{"error":…}`) to the agent's request.
    fn answer(&mut self, method: &str, params: &Value) -> Value {
        let same_path =
            |r: &AgentRequest| method != "fs/read_text_file" || r.params["path"] == params["path"];
        let at = self
            .exchange
            .iter()
            .position(|r| r.method == method && same_path(r) && r.answer.is_some());
        let recorded = match at {
            Some(i) => Some(self.exchange.remove(i)),
            // A file read asked at another point than recorded: any recorded read of the path.
            None if method == "fs/read_text_file" => self
                .everywhere
                .sessions
                .iter()
                .flat_map(|s| &s.exchanges)
                .flat_map(|e| e.during.iter().chain(&e.after))
                .filter_map(|s| s.request.as_ref())
                .find(|r| r.method == method && same_path(r) && r.answer.is_some()),
            None => None,
        };
        let Some(recorded) = recorded else {
            return json!({"error": {"code": -32601,
                "message": format!("acp-journal rerun: the recording has no answer to {method} here")}});
        };
        let answer = recorded.answer.clone().unwrap_or(Value::Null);
        if method == "session/request_permission" {
            return permission(&recorded.params, &answer, params);
        }
        answer
    }
}

/// The recorded permission choice, mapped onto the live options: the same option ID, else an
/// option of the same kind, else a cancelled outcome.
fn permission(recorded_params: &Value, recorded: &Value, live_params: &Value) -> Value {
    let outcome = &recorded["result"]["outcome"];
    let Some(chosen) = outcome["optionId"].as_str() else {
        return recorded.clone();
    };
    let live: &[Value] = live_params["options"].as_array().map_or(&[], Vec::as_slice);
    if live.iter().any(|o| o["optionId"] == chosen) {
        return recorded.clone();
    }
    let kind = recorded_params["options"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|o| o["optionId"] == chosen)
        .map(|o| o["kind"].clone());
    match live.iter().find(|o| Some(&o["kind"]) == kind.as_ref()) {
        Some(o) => {
            json!({"result": {"outcome": {"outcome": "selected", "optionId": o["optionId"]}}})
        }
        None => json!({"result": {"outcome": {"outcome": "cancelled"}}}),
    }
}

/// The working directory for the new sessions: `--cwd`, else the current directory (never the
/// recorded one on its own: a recording from someone else must not choose where an agent works).
fn working_dir(args: &RerunArgs) -> anyhow::Result<PathBuf> {
    match &args.cwd {
        Some(dir) => std::path::absolute(dir).context("resolving --cwd"),
        None => std::env::current_dir().context("finding the current directory"),
    }
}

fn result_of(response: Value, method: &str) -> anyhow::Result<Value> {
    if let Some(error) = response.get("error") {
        bail!("the agent answered {method} with an error: {error}");
    }
    Ok(response["result"].clone())
}

/// Run the recording's client side against the agent, then diff.
pub(super) fn run(journals: &JournalDir, args: RerunArgs) -> anyhow::Result<ExitCode> {
    let original = super::sources::recording(journals, std::slice::from_ref(&args.source))?;
    if original.sessions.is_empty() {
        bail!("{}: no session in this recording", args.source);
    }
    let started = jiff::Timestamp::now().as_microsecond();
    let mut agent = Agent::start(journals, &args.agent, args.timeout)?;
    let init = original
        .initialize_request
        .as_ref()
        .map(|r| r["params"].clone())
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({"protocolVersion": 1, "clientCapabilities": {}}));
    let mut none = Answers::of(None, &original);
    result_of(agent.call("initialize", &init, &mut none)?, "initialize")?;
    let cwd = working_dir(&args)?;
    let mut live_sessions = Vec::new();
    for session in &original.sessions {
        let mut live: Option<String> = None;
        for exchange in &session.exchanges {
            let mut params = exchange.params.clone();
            let opening = matches!(
                exchange.method.as_str(),
                "session/new" | "session/load" | "session/resume"
            );
            if opening {
                if live.is_some() {
                    continue; // already going: keep the conversation on the live session
                }
                params["cwd"] = json!(cwd);
                // Recorded MCP servers are commands the agent would start: only on request.
                if !args.keep_mcp_servers {
                    params["mcpServers"] = json!([]);
                }
                params.as_object_mut().map(|o| o.remove("sessionId"));
                let mut answers = Answers::of(Some(exchange), &original);
                let result = result_of(
                    agent.call("session/new", &params, &mut answers)?,
                    "session/new",
                )?;
                let id = result["sessionId"]
                    .as_str()
                    .context("the agent's session/new answer has no sessionId")?;
                eprintln!("acp-journal rerun: session {} is now {id}", session.id);
                live = Some(id.to_string());
                continue;
            }
            let Some(id) = live.as_deref() else {
                bail!(
                    "{}: the recording sends {} before opening the session",
                    args.source,
                    exchange.method
                );
            };
            if params.get("sessionId").is_some() {
                params["sessionId"] = json!(id);
            }
            if exchange.notification {
                // A cancel's effect depends on timing no rerun reproduces; it is left out.
                if exchange.method != "session/cancel" {
                    agent.send(
                        &json!({"jsonrpc": "2.0", "method": exchange.method, "params": params}),
                    )?;
                }
                continue;
            }
            if exchange.method == "session/prompt" {
                eprintln!(
                    "acp-journal rerun: turn {}/{}",
                    exchange.turn,
                    session.turns()
                );
            }
            let mut answers = Answers::of(Some(exchange), &original);
            agent.call(&exchange.method, &params, &mut answers)?;
        }
        live_sessions.extend(live);
    }
    agent.finish()?;
    // Only this run's segments: an agent that reuses session IDs has older ones beside them.
    let mut segments = Vec::new();
    for id in &live_sessions {
        for path in journals.resolve(id).map_err(anyhow::Error::msg)? {
            let reader = SegmentReader::open(&path)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            if reader.header().started >= started {
                segments.push(path);
            }
        }
    }
    let rerun = Recording::read(&live_sessions.join(" "), &segments)?;
    eprintln!(
        "acp-journal rerun: journaled as {}; compared with {}:",
        live_sessions.join(", "),
        args.source
    );
    super::diff::report(&diff::diff(&original, &rerun), &args.fail_on, false)
}
