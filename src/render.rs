//! A readable transcript of journal records, written as they stream by (flat memory).
//!
//! Message and thought chunks are coalesced into paragraphs; tool calls show kind, title and
//! status; permission requests show the option the client chose; each prompt turn ends with its
//! stop reason and duration. Colour is the caller's choice (`Style`).

use std::collections::HashMap;
use std::io::{self, Write};

use serde_json::Value;

use crate::journal::{Body, Record, Side};

/// Terminal styling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Plain text (pipes, files, `NO_COLOR`).
    Plain,
    /// ANSI colours.
    Color,
}

/// What is being written at the moment (chunks of one kind are joined).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Open {
    None,
    Agent,
    Thought,
}

/// Streams records into a transcript.
pub struct Transcript<W: Write> {
    out: W,
    style: Style,
    open: Open,
    /// Pending requests: (sender, id) → (method, title, mono time).
    pending: HashMap<(Side, String), (String, String, u64)>,
    /// Tool call titles by id, for updates that only carry the id.
    titles: HashMap<String, String>,
}

impl<W: Write> Transcript<W> {
    /// A transcript written to `out`.
    pub fn new(out: W, style: Style) -> Transcript<W> {
        Transcript {
            out,
            style,
            open: Open::None,
            pending: HashMap::new(),
            titles: HashMap::new(),
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        match self.style {
            Style::Plain => text.to_string(),
            Style::Color => format!("\x1b[{code}m{text}\x1b[0m"),
        }
    }

    fn close_paragraph(&mut self) -> io::Result<()> {
        if self.open != Open::None {
            writeln!(self.out)?;
            self.open = Open::None;
        }
        Ok(())
    }

    fn line(&mut self, text: &str) -> io::Result<()> {
        self.close_paragraph()?;
        writeln!(self.out, "{text}")
    }

    /// Render one record.
    ///
    /// # Errors
    /// Write errors.
    pub fn record(&mut self, record: &Record) -> io::Result<()> {
        let (from, payload) = match &record.body {
            Body::Message { from, payload } => (*from, payload),
            Body::Stderr(_) => return Ok(()),
            Body::Event(event) => return self.event(event),
        };
        let Ok(msg) = serde_json::from_slice::<Value>(&payload.bytes) else {
            let text = String::from_utf8_lossy(&payload.bytes).into_owned();
            return self.line(&self.paint(
                "31",
                &format!("! not JSON from the {}: {text}", from.as_str()),
            ));
        };
        let method = msg["method"].as_str().unwrap_or("");
        let id = msg.get("id").map(Value::to_string);
        match (method, id) {
            ("session/update", _) => self.update(&msg["params"]["update"]),
            ("", Some(id)) => self.response(from, &id, &msg, record.mono_us),
            (method, Some(id)) => {
                let title = self.request(from, method, &msg["params"])?;
                self.pending
                    .insert((from, id), (method.to_string(), title, record.mono_us));
                Ok(())
            }
            ("session/cancel", None) => self.line(&self.paint("33", "✗ cancelled by the user")),
            _ => Ok(()),
        }
    }

    fn request(&mut self, from: Side, method: &str, params: &Value) -> io::Result<String> {
        match (from, method) {
            (Side::Client, "session/prompt") => {
                let text: Vec<String> = params["prompt"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|b| match b["type"].as_str() {
                        Some("text") => b["text"].as_str().unwrap_or("").to_string(),
                        Some(kind) => format!(
                            "[{kind} {}]",
                            b["uri"].as_str().or(b["name"].as_str()).unwrap_or("")
                        ),
                        None => String::new(),
                    })
                    .collect();
                let prompt = text.join(" ");
                self.line("")?;
                self.line(&self.paint("1;34", &format!("❯ {prompt}")))?;
            }
            (Side::Client, "session/new" | "session/load" | "session/resume") => {
                let cwd = params["cwd"].as_str().unwrap_or("?");
                self.line(&self.paint("2", &format!("── {method} in {cwd}")))?;
            }
            (Side::Client, "session/set_mode") => {
                self.line(&self.paint(
                    "2",
                    &format!("── mode → {}", params["modeId"].as_str().unwrap_or("?")),
                ))?;
            }
            (Side::Agent, "session/request_permission") => {
                let title = params["toolCall"]["title"]
                    .as_str()
                    .unwrap_or("a tool call")
                    .to_string();
                return Ok(title);
            }
            (Side::Agent, m) if m.starts_with("fs/") || m.starts_with("terminal/") => {
                let what = params["path"]
                    .as_str()
                    .or(params["command"].as_str())
                    .unwrap_or("");
                self.line(&self.paint("2", &format!("  ↳ {m} {what}")))?;
            }
            _ => {}
        }
        Ok(String::new())
    }

    fn response(&mut self, from: Side, id: &str, msg: &Value, mono: u64) -> io::Result<()> {
        let Some((method, title, started)) = self.pending.remove(&(from.other(), id.to_string()))
        else {
            return Ok(());
        };
        if let Some(error) = msg.get("error") {
            let text = format!(
                "! {method} failed: {} {}",
                error["code"],
                error["message"].as_str().unwrap_or("")
            );
            return self.line(&self.paint("31", &text));
        }
        let result = &msg["result"];
        match method.as_str() {
            "session/prompt" => {
                let seconds = mono.saturating_sub(started) as f64 / 1e6;
                let stop = result["stopReason"].as_str().unwrap_or("?");
                self.line(&self.paint("2", &format!("── {stop} ({seconds:.1} s)")))
            }
            "session/request_permission" => {
                let outcome = &result["outcome"];
                let choice = match outcome["outcome"].as_str() {
                    Some("selected") => outcome["optionId"].as_str().unwrap_or("?").to_string(),
                    Some(other) => other.to_string(),
                    None => "?".into(),
                };
                self.line(&self.paint("35", &format!("? permission for {title}: {choice}")))
            }
            "session/new" => match result["sessionId"].as_str() {
                Some(s) => self.line(&self.paint("2", &format!("── session {s}"))),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }

    fn update(&mut self, update: &Value) -> io::Result<()> {
        let text = update["content"]["text"].as_str();
        match update["sessionUpdate"].as_str().unwrap_or("") {
            "user_message_chunk" if text.is_some() => {
                self.line(&self.paint("1;34", &format!("❯ {}", text.unwrap_or(""))))
            }
            "agent_message_chunk" if text.is_some() => {
                if self.open != Open::Agent {
                    self.close_paragraph()?;
                    self.open = Open::Agent;
                }
                write!(self.out, "{}", text.unwrap_or(""))
            }
            "agent_thought_chunk" if text.is_some() => {
                if self.open != Open::Thought {
                    self.close_paragraph()?;
                    self.open = Open::Thought;
                }
                write!(self.out, "{}", self.paint("2;3", text.unwrap_or("")))
            }
            kind @ ("tool_call" | "tool_call_update") => {
                let id = update["toolCallId"].as_str().unwrap_or("?");
                if let Some(title) = update["title"].as_str() {
                    self.titles.insert(id.to_string(), title.to_string());
                }
                let title = self.titles.get(id).map_or(id, String::as_str).to_string();
                let status = update["status"].as_str().unwrap_or(if kind == "tool_call" {
                    "pending"
                } else {
                    ""
                });
                let kind_name = update["kind"].as_str().unwrap_or("");
                let diffs = update["content"]
                    .as_array()
                    .map_or(0, |c| c.iter().filter(|c| c["type"] == "diff").count());
                let mut text = format!("⏺ {title}");
                if !kind_name.is_empty() {
                    text.push_str(&format!(" [{kind_name}]"));
                }
                if !status.is_empty() {
                    text.push_str(&format!(" {status}"));
                }
                if diffs > 0 {
                    text.push_str(&format!(
                        " ({diffs} diff{})",
                        if diffs == 1 { "" } else { "s" }
                    ));
                }
                for location in update["locations"].as_array().into_iter().flatten() {
                    if let Some(path) = location["path"].as_str() {
                        text.push_str(&format!(" {path}"));
                    }
                }
                let color = if status == "failed" { "31" } else { "36" };
                self.line(&self.paint(color, &text))
            }
            "plan" => self.line(&self.paint("33", &plan_summary(update))),
            "current_mode_update" => self.line(&self.paint(
                "2",
                &format!(
                    "── mode → {}",
                    update["currentModeId"].as_str().unwrap_or("?")
                ),
            )),
            "session_info_update" => match update["title"].as_str() {
                Some(title) => self.line(&self.paint("2", &format!("── title: {title}"))),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }

    fn event(&mut self, event: &Value) -> io::Result<()> {
        match event["type"].as_str() {
            Some("replayed") => self.line(&self.paint(
                "2",
                &format!(
                    "── loaded from the journal ({} updates replayed)",
                    event["lines"]
                ),
            )),
            Some("session_mapped") => self.line(&self.paint(
                "2",
                &format!(
                    "── continued on a new agent session {}",
                    event["agent_session"].as_str().unwrap_or("?")
                ),
            )),
            Some("bundle_manifest") => {
                let m = &event["manifest"];
                let who = |v: &Value| match (v["name"].as_str(), v["version"].as_str()) {
                    (Some(name), Some(version)) => format!("{name} {version}"),
                    (Some(name), None) => name.to_string(),
                    _ => "(unnamed)".to_string(),
                };
                let redacted = m["redacted"].as_array().map_or(0, Vec::len);
                self.line(&self.paint(
                    "2",
                    &format!(
                        "── bundle: agent {}, client {}, {} of {} turns, {redacted} values redacted, made by {} on {}",
                        who(&m["agent"]),
                        who(&m["client"]),
                        m["turns"],
                        m["turns_recorded"],
                        m["bundled_by"].as_str().unwrap_or("?"),
                        m["os"].as_str().unwrap_or("?"),
                    ),
                ))
            }
            _ => Ok(()),
        }
    }

    /// The output written so far (take it to stream a transcript held in memory).
    pub fn buffer(&mut self) -> &mut W {
        &mut self.out
    }

    /// End the transcript.
    ///
    /// # Errors
    /// Write errors.
    pub fn finish(mut self) -> io::Result<W> {
        self.close_paragraph()?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A `plan` update on one line: `plan: [x] done  [>] doing  [ ] to do`.
pub fn plan_summary(update: &Value) -> String {
    let entries: Vec<String> = update["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let mark = match e["status"].as_str() {
                Some("completed") => "[x]",
                Some("in_progress") => "[>]",
                _ => "[ ]",
            };
            format!("{mark} {}", e["content"].as_str().unwrap_or(""))
        })
        .collect();
    format!("plan: {}", entries.join("  "))
}
