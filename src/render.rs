//! Renderers of journal records, written as they stream by (flat memory).
//!
//! [`model::Timeline`] says what the records mean (turns, coalesced chunks, tool calls,
//! permissions…) as `timeline_event::Event`s; each renderer turns those events into its format:
//! [`Transcript`] (text, here: `show` and the markdown export) and [`html::HtmlPage`] (the HTML
//! export). Apart from those, [`charts`] draws the team's usage figures as SVG.

pub mod charts;
mod chunk;
mod facts;
pub mod html;
mod labels;
pub mod model;
mod pretty;
mod time;
mod timeline_event;

use std::io::{self, Write};

use crate::journal::Record;
pub use facts::SessionFacts;
pub use labels::{arrow, config_summary, plan_mark, plan_summary};
use model::Timeline;
pub use time::{clock, minute, utc, utc_us};
use timeline_event::{Event, Render, Voice};

/// Terminal styling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Plain text (pipes, files, `NO_COLOR`).
    Plain,
    /// ANSI colours.
    Color,
}

/// Streams records into a readable text transcript.
///
/// Message and thought chunks are joined into paragraphs; tool calls show kind, title and
/// status; permission requests show the option the client chose; each prompt turn ends with its
/// stop reason and duration.
pub struct Transcript<W: Write> {
    timeline: Timeline,
    text: Text<W>,
}

/// The text renderer proper: events to lines.
struct Text<W: Write> {
    out: W,
    style: Style,
    /// Following a live session: a permission request shows while it waits for its answer.
    live: bool,
    /// Whose lines these are: 0 the session's own, 1 a subagent's, 2 its subagent's…; each
    /// level indents them by `│ `.
    depth: usize,
}

impl<W: Write> Text<W> {
    fn paint(&self, code: &str, text: &str) -> String {
        match self.style {
            Style::Plain => text.to_string(),
            Style::Color => format!("\x1b[{code}m{text}\x1b[0m"),
        }
    }

    /// The indentation of a subagent's lines.
    fn indent(&self) -> String {
        "│ ".repeat(self.depth)
    }

    fn line(&mut self, code: &str, text: &str) -> io::Result<()> {
        let painted = self.paint(code, text);
        let indent = self.indent();
        writeln!(self.out, "{indent}{painted}")
    }

    /// Text of a paragraph (the first chunk indented, and each line in it).
    fn chunk(&mut self, code: Option<&str>, text: &str, first: bool) -> io::Result<()> {
        let indent = self.indent();
        let text = match indent.is_empty() {
            true => std::borrow::Cow::Borrowed(text),
            false => std::borrow::Cow::Owned(text.replace('\n', &format!("\n{indent}"))),
        };
        if first {
            write!(self.out, "{indent}")?;
        }
        match code {
            Some(code) => {
                let painted = self.paint(code, &text);
                write!(self.out, "{painted}")
            }
            None => write!(self.out, "{text}"),
        }
    }
}

impl<W: Write> Render for Text<W> {
    fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
        match event {
            Event::Setup { method, cwd } => self.line("2", &format!("── {method} in {cwd}")),
            Event::Session(id) => self.line("2", &format!("── session {id}")),
            Event::TurnStart { prompt, .. } => {
                writeln!(self.out)?;
                self.line("1;34", &format!("❯ {prompt}"))
            }
            Event::User(text) => self.line("1;34", &format!("❯ {text}")),
            Event::Chunk { voice, text, first } => {
                let code = match voice {
                    Voice::Agent | Voice::Message => None,
                    Voice::Thought => Some("2;3"),
                    Voice::Summary | Voice::Output => Some("2"),
                };
                self.chunk(code, text, *first)
            }
            Event::ParagraphEnd => writeln!(self.out),
            Event::Tool(call) => {
                let mut text = format!("⏺ {}", call.title);
                if let Some(kind) = call.kind {
                    text.push_str(&format!(" [{kind}]"));
                }
                if !call.status.is_empty() {
                    text.push_str(&format!(" {}", call.status));
                }
                let diffs = call.diffs().count();
                if diffs > 0 {
                    let plural = if diffs == 1 { "" } else { "s" };
                    text.push_str(&format!(" ({diffs} diff{plural})"));
                }
                for location in call.locations() {
                    text.push_str(&format!(" {location}"));
                }
                let color = if call.status == "failed" { "31" } else { "36" };
                self.line(color, &text)
            }
            Event::ClientCall { method, target } => {
                self.line("2", &format!("  ↳ {method} {target}"))
            }
            Event::Permission { title, choice, .. } => {
                self.line("35", &format!("? permission for {title}: {choice}"))
            }
            Event::PermissionAsked { title, options } if self.live => {
                let offered: Vec<&str> = options
                    .iter()
                    .map(|o| if o.name.is_empty() { &o.id } else { &o.name })
                    .map(String::as_str)
                    .collect();
                self.line(
                    "1;35",
                    &format!(
                        "? permission for {title}: waiting for the user ({})",
                        offered.join(" / ")
                    ),
                )
            }
            // A recording shows the answer, which says what was asked.
            Event::PermissionAsked { .. } => Ok(()),
            Event::Plan(update) => self.line("33", &plan_summary(update)),
            Event::Mode(mode) => self.line("2", &format!("── mode → {mode}")),
            Event::Config(options) => self.line("2", &format!("── {}", config_summary(options))),
            Event::Title(title) => self.line("2", &format!("── title: {title}")),
            Event::Cancelled => self.line("33", "✗ cancelled by the user"),
            Event::Failed {
                method,
                code,
                message,
            } => self.line("31", &format!("! {method} failed: {code} {message}")),
            Event::TurnEnd {
                stop_reason: Some(stop),
                seconds,
                ..
            } => self.line("2", &format!("── {stop} ({seconds:.1} s)")),
            Event::TurnEnd {
                stop_reason: None, ..
            } => Ok(()),
            Event::NotJson { from, text } => self.line(
                "31",
                &format!("! not JSON from the {}: {text}", from.as_str()),
            ),
            Event::Replayed {
                updates,
                agent_failed,
            } => self.line(
                "2",
                &format!("── {}", labels::replay_note(*updates, *agent_failed)),
            ),
            Event::Continued { agent_session } => self.line(
                "2",
                &format!("── continued on a new agent session {agent_session}"),
            ),
            Event::Restarted { .. }
            | Event::HostDropped
            | Event::Restored { .. }
            | Event::Stalled { .. }
            | Event::Offered { .. } => {
                self.line("33", &format!("── {}", labels::proxy_note(event)))
            }
            Event::Forked { .. } => self.line("2", &format!("── {}", labels::proxy_note(event))),
            Event::Bundle { summary } => self.line("2", &format!("── {summary}")),
            Event::Scope { depth, title, .. } => {
                self.depth = depth.saturating_sub(1);
                if *depth > 0 {
                    self.line("1;36", &format!("┌ {title}"))?;
                }
                self.depth = *depth;
                Ok(())
            }
            Event::Subagent { .. } => self.line("36", &labels::update_note(event)),
            Event::Message { .. } => self.line("34", &labels::update_note(event)),
            Event::Notice { .. } => self.line("33", &labels::update_note(event)),
            Event::Task { .. } => self.line("35", &labels::update_note(event)),
            Event::Compaction { .. }
            | Event::Usage { .. }
            | Event::PlanRemoved
            | Event::Terminal { .. } => self.line("2", &labels::update_note(event)),
        }
    }
}

impl<W: Write> Transcript<W> {
    /// A transcript written to `out`.
    pub fn new(out: W, style: Style) -> Transcript<W> {
        Transcript {
            timeline: Timeline::new(),
            text: Text {
                out,
                style,
                live: false,
                depth: 0,
            },
        }
    }

    /// Render as a live session is followed (`watch`): a permission request shows as soon as
    /// it is asked, marked as waiting, and its answer when it comes.
    #[must_use]
    pub fn live(mut self) -> Transcript<W> {
        self.text.live = true;
        self
    }

    /// Render one record.
    ///
    /// # Errors
    /// Write errors.
    pub fn record(&mut self, record: &Record) -> io::Result<()> {
        self.timeline.record(record, &mut self.text)
    }

    /// A new run (proxy process) of the session begins: forget what the last one left pending.
    ///
    /// # Errors
    /// Write errors.
    pub fn new_run(&mut self) -> io::Result<()> {
        self.timeline.end_run(&mut self.text)
    }

    /// The output written so far (take it to stream a transcript held in memory).
    pub fn buffer(&mut self) -> &mut W {
        &mut self.text.out
    }

    /// End the transcript.
    ///
    /// # Errors
    /// Write errors.
    pub fn finish(mut self) -> io::Result<W> {
        self.timeline.finish(&mut self.text)?;
        self.text.out.flush()?;
        Ok(self.text.out)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::journal::{Body, Payload};
    use crate::wire::Side;

    #[test]
    fn utc_us_keeps_every_microsecond_at_a_fixed_width() {
        assert_eq!(utc_us(1_795_000_000_000_000), "2026-11-18T11:06:40.000000Z");
        assert_eq!(utc_us(1_795_000_000_166_700), "2026-11-18T11:06:40.166700Z");
        assert_eq!(utc_us(1), "1970-01-01T00:00:00.000001Z");
        assert_eq!(utc_us(i64::MAX), "");
    }

    fn transcript(lines: &[(Side, &str)]) -> String {
        let mut t = Transcript::new(Vec::new(), Style::Plain);
        for (i, (from, line)) in lines.iter().enumerate() {
            t.record(&Record {
                seq: i as u64,
                unix_us: 0,
                mono_us: 0,
                body: Body::Message {
                    from: *from,
                    payload: Payload::from_line(Bytes::from(line.to_string())),
                },
            })
            .unwrap();
        }
        String::from_utf8(t.finish().unwrap()).unwrap()
    }

    #[test]
    fn state_changes_plans_and_cancels_each_get_a_line() {
        let update =
            |u: &str| format!(r#"{{"method":"session/update","params":{{"update":{u}}}}}"#);
        let out = transcript(&[
            (
                Side::Client,
                r#"{"id":1,"method":"session/set_mode","params":{"modeId":"plan"}}"#,
            ),
            (
                Side::Client,
                r#"{"id":2,"method":"session/set_config_option","params":{"configId":"model","value":"opus"}}"#,
            ),
            (
                Side::Agent,
                &update(
                    r#"{"sessionUpdate":"config_option_update","configOptions":[{"id":"model","currentValue":"opus"},{"id":"fast","type":"boolean","currentValue":true}]}"#,
                ),
            ),
            (
                Side::Agent,
                &update(r#"{"sessionUpdate":"current_mode_update","currentModeId":"code"}"#),
            ),
            (
                Side::Agent,
                &update(
                    r#"{"sessionUpdate":"plan","entries":[{"content":"a","status":"completed"},{"content":"b","status":"in_progress"}]}"#,
                ),
            ),
            (
                Side::Agent,
                &update(r#"{"sessionUpdate":"session_info_update","title":"Greeting"}"#),
            ),
            (
                Side::Agent,
                &update(
                    r#"{"sessionUpdate":"tool_call","toolCallId":"t","title":"Edit","kind":"edit","content":[{"type":"diff","path":"x","newText":"y"}],"locations":[{"path":"x","line":3}]}"#,
                ),
            ),
            (Side::Client, r#"{"method":"session/cancel","params":{}}"#),
        ]);
        assert_eq!(
            out,
            "── mode → plan\n── config: model = opus\n── config: model = opus, fast = true\n\
             ── mode → code\nplan: [x] a  [>] b\n── title: Greeting\n\
             ⏺ Edit [edit] pending (1 diff) x:3\n✗ cancelled by the user\n"
        );
    }
}
