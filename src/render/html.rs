//! A session as one self-contained HTML page, written as the records stream by (flat memory).
//!
//! The page has a header (the session's facts), a timeline (one section per prompt turn: the
//! prompt, coalesced agent text, dimmed thoughts, tool calls as collapsible `<details>` holding
//! their input, output, content and diffs, permission answers, plans, mode and config changes,
//! errors, stop reason and duration) and a wire view (every record with direction and time,
//! collapsible). Two passes over the journal, one per part, so nothing is collected.
//!
//! A journal is untrusted input: every piece of it is HTML-escaped, and the page's
//! Content-Security-Policy loads nothing from anywhere and runs no script but its own (pinned
//! by hash). CSS and the little script are inline; no font, image or library is fetched.

use std::borrow::Cow;
use std::io::{self, Write};

use base64::Engine;
use serde_json::Value;
use sha2::{Digest, Sha256};
use similar::{ChangeTag, TextDiff};

use super::facts::SessionFacts;
use super::labels::{arrow, config_summary, plan_mark, proxy_note, replay_note, update_note};
use super::model::Timeline;
use super::time::{clock, utc};
use super::timeline_event::{Event, Render, ToolCall, Voice};
use crate::journal::{Body, Record, Tail};
use crate::wire::Side;

/// The page's stylesheet (also the start of `serve`'s page's: the same cards in both).
pub const STYLE: &str = include_str!("html.css");
const SCRIPT: &str = include_str!("html.js");

/// The page's Content-Security-Policy: nothing loaded, inline style, and no script but its
/// own (pinned by its hash). Also what `serve` sends with a shared session's page.
pub fn policy() -> String {
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(SCRIPT));
    format!("default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{hash}'")
}

/// `text` with `& < > " '` escaped: safe in element content and in quoted attributes.
pub fn escape(text: &str) -> Cow<'_, str> {
    let special = |(_, b): &(usize, &u8)| matches!(b, b'&' | b'<' | b'>' | b'"' | b'\'');
    escape_at(
        text,
        text.as_bytes()
            .iter()
            .enumerate()
            .filter(special)
            .map(|(i, _)| i),
    )
}

/// `text` with `& < >` escaped: safe in element content only (not in attributes). Big JSON
/// bodies use it: their many quotes stay one byte each, and the scan runs at memchr's speed.
pub fn escape_text(text: &str) -> Cow<'_, str> {
    escape_at(
        text,
        memchr::memchr3_iter(b'&', b'<', b'>', text.as_bytes()),
    )
}

/// `text` with the ASCII specials at `at` (ascending) replaced by their entities, the runs
/// between them copied whole.
fn escape_at(text: &str, mut at: impl Iterator<Item = usize>) -> Cow<'_, str> {
    let Some(first) = at.next() else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 16);
    let mut start = 0;
    for i in std::iter::once(first).chain(at) {
        let replacement = match text.as_bytes()[i] {
            b'&' => "&amp;",
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'"' => "&quot;",
            _ => "&#39;",
        };
        // `i` is an ASCII byte, so both slices end on character boundaries.
        out.push_str(&text[start..i]);
        out.push_str(replacement);
        start = i + 1;
    }
    out.push_str(&text[start..]);
    Cow::Owned(out)
}

/// JSON, indented, for reading.
fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// The timeline part of the page; [`HtmlPage::wire`] moves on to the wire view.
pub struct HtmlPage<W: Write> {
    timeline: Timeline,
    html: Html<W>,
}

/// The event renderer proper.
struct Html<W: Write> {
    out: W,
    /// Inside a turn's `<section>`.
    in_turn: bool,
    /// Inside a subagent's `<div class="child">`.
    in_child: bool,
}

impl<W: Write> HtmlPage<W> {
    /// Write the page's head and header, and open the timeline.
    ///
    /// # Errors
    /// Write errors.
    pub fn start(mut out: W, facts: &SessionFacts) -> io::Result<HtmlPage<W>> {
        let session = escape(&facts.session);
        let policy = policy();
        write!(
            out,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <meta http-equiv=\"Content-Security-Policy\" content=\"{policy}\">\n\
             <meta name=\"generator\" content=\"acp-journal\">\n\
             <title>ACP session {session}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n\
             <header>\n<h1>ACP session <code>{session}</code></h1>\n<dl class=\"facts\">\n"
        )?;
        for (name, value) in [
            ("agent", facts.agent.as_str()),
            ("working directory", facts.cwd.as_str()),
            ("recorded", facts.recorded.as_str()),
            ("proxy", facts.proxy.as_str()),
        ] {
            writeln!(
                out,
                "<dt>{name}</dt><dd><code>{}</code></dd>",
                escape(value)
            )?;
        }
        write!(
            out,
            "<dt>runs</dt><dd>{}</dd>\n</dl>\n<nav>\
             <a href=\"#timeline\">Timeline</a> <a href=\"#wire\">Wire</a> \
             <button type=\"button\" id=\"expand-tools\">Expand tool calls</button> \
             <button type=\"button\" id=\"collapse-tools\">Collapse tool calls</button> \
             <button type=\"button\" id=\"toggle-thoughts\">Hide thoughts</button>\
             </nav>\n</header>\n<main>\n<section id=\"timeline\">\n<h2>Timeline</h2>\n",
            facts.runs
        )?;
        Ok(HtmlPage {
            timeline: Timeline::new(),
            html: Html {
                out,
                in_turn: false,
                in_child: false,
            },
        })
    }

    /// Mark the start of run `number` (a later proxy process that continued the session).
    ///
    /// # Errors
    /// Write errors.
    pub fn run(&mut self, number: usize, started: &str) -> io::Result<()> {
        self.timeline.end_run(&mut self.html)?;
        self.html.end_turn()?;
        writeln!(
            self.html.out,
            "<div class=\"run\">run {number}, recorded from {}</div>",
            escape(started)
        )
    }

    /// Render one record into the timeline.
    ///
    /// # Errors
    /// Write errors.
    pub fn record(&mut self, record: &Record) -> io::Result<()> {
        self.timeline.record(record, &mut self.html)
    }

    /// Note where a segment stops being readable (torn, corrupt or unfinished).
    ///
    /// # Errors
    /// Write errors.
    pub fn damage(&mut self, file: &str, tail: &Tail) -> io::Result<()> {
        self.timeline.finish(&mut self.html)?;
        damage_note(&mut self.html.out, file, tail)
    }

    /// Note that what a segment holds past its first `fence` bytes never reached the shared
    /// store (the session went on on another host).
    ///
    /// # Errors
    /// Write errors.
    pub fn beyond_store(&mut self, file: &str, bytes: u64) -> io::Result<()> {
        self.timeline.finish(&mut self.html)?;
        writeln!(
            self.html.out,
            "<div class=\"damage\" role=\"note\">{}</div>",
            escape(&beyond_store_note(file, bytes))
        )
    }

    /// Close the timeline and open the wire view.
    ///
    /// # Errors
    /// Write errors.
    pub fn wire(mut self) -> io::Result<WireView<W>> {
        self.timeline.finish(&mut self.html)?;
        self.html.end_turn()?;
        let mut out = self.html.out;
        write!(
            out,
            "</section>\n<section id=\"wire\">\n<h2>Wire</h2>\n<details class=\"wire\">\
             <summary>Every recorded message, with direction and time (UTC)</summary>\n"
        )?;
        Ok(WireView { out })
    }
}

/// What a reader is told of a segment whose last `bytes` never reached the shared store.
pub fn beyond_store_note(file: &str, bytes: u64) -> String {
    format!(
        "The last {bytes} bytes of the journal {file} are not in the shared store, and will not be: \
         another host continued the session from what the store had, so what this host recorded \
         after that is shown here but is not part of the shared session."
    )
}

fn damage_note(out: &mut impl Write, file: &str, tail: &Tail) -> io::Result<()> {
    let class = if matches!(tail, Tail::Unfinished) {
        "note"
    } else {
        "damage"
    };
    writeln!(
        out,
        "<div class=\"{class}\" role=\"note\">The journal <code>{}</code> ends here: {}. \
         Everything before it is shown.</div>",
        escape(file),
        escape(&tail.to_string())
    )
}

impl<W: Write> Html<W> {
    /// Close the turn's section, if one is open (its prompt may never have been answered).
    fn end_turn(&mut self) -> io::Result<()> {
        if std::mem::take(&mut self.in_turn) {
            writeln!(self.out, "</section>")?;
        }
        Ok(())
    }

    fn div(&mut self, class: &str, text: &str) -> io::Result<()> {
        writeln!(self.out, "<div class=\"{class}\">{}</div>", escape(text))
    }

    fn tool(&mut self, call: &ToolCall<'_>) -> io::Result<()> {
        let update_class = if call.new { "" } else { " update" };
        write!(
            self.out,
            "<details class=\"tool{update_class}\" data-tool=\"{}\"><summary>",
            escape(call.id)
        )?;
        if let Some(kind) = call.kind {
            write!(self.out, "<span class=\"kind\">{}</span> ", escape(kind))?;
        }
        write!(
            self.out,
            "<span class=\"title\">{}</span>",
            escape(call.title)
        )?;
        if !call.status.is_empty() {
            let status = escape(call.status);
            write!(
                self.out,
                " <span class=\"status s-{status}\">{status}</span>"
            )?;
        }
        for location in call.locations() {
            write!(
                self.out,
                " <span class=\"loc\">{}</span>",
                escape(&location)
            )?;
        }
        write!(self.out, "</summary><div class=\"body\">")?;
        let mut empty = true;
        for item in call.update["content"].as_array().into_iter().flatten() {
            empty = false;
            match item["type"].as_str() {
                Some("diff") => self.diff(item)?,
                Some("content") => match item["content"]["text"].as_str() {
                    Some(text) => write!(self.out, "<pre class=\"text\">{}</pre>", escape(text))?,
                    None => self.json("content", &item["content"])?,
                },
                Some("terminal") => write!(
                    self.out,
                    "<p>terminal <code>{}</code></p>",
                    escape(item["terminalId"].as_str().unwrap_or("?"))
                )?,
                _ => self.json("content", item)?,
            }
        }
        for field in ["rawInput", "rawOutput"] {
            if let Some(value) = call.update.get(field) {
                empty = false;
                self.json(field, value)?;
            }
        }
        if empty {
            write!(
                self.out,
                "<p class=\"empty\">no details in this message</p>"
            )?;
        }
        writeln!(self.out, "</div></details>")
    }

    fn json(&mut self, label: &str, value: &Value) -> io::Result<()> {
        write!(
            self.out,
            "<h4>{label}</h4><pre class=\"json\">{}</pre>",
            escape_text(&pretty(value))
        )
    }

    /// A `diff` content block as a unified diff: hunks of context, removed and added lines.
    fn diff(&mut self, item: &Value) -> io::Result<()> {
        let path = escape(item["path"].as_str().unwrap_or("?"));
        let old = item["oldText"].as_str().unwrap_or("");
        let new = item["newText"].as_str().unwrap_or("");
        let label = if item["oldText"].is_string() {
            "diff"
        } else {
            "new file"
        };
        write!(
            self.out,
            "<div class=\"diff\"><div class=\"diff-path\">{label} <code>{path}</code></div>\
             <pre><span class=\"d-file\">--- {path}\n+++ {path}\n</span>"
        )?;
        let diff = TextDiff::from_lines(old, new);
        for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
            write!(
                self.out,
                "<span class=\"d-hunk\">{}\n</span>",
                hunk.header()
            )?;
            for change in hunk.iter_changes() {
                let (class, sign) = match change.tag() {
                    ChangeTag::Delete => ("d-del", '-'),
                    ChangeTag::Insert => ("d-ins", '+'),
                    ChangeTag::Equal => ("d-ctx", ' '),
                };
                let line = change.value().strip_suffix('\n').unwrap_or(change.value());
                write!(
                    self.out,
                    "<span class=\"{class}\">{sign}{}\n</span>",
                    escape(line)
                )?;
                if change.missing_newline() {
                    write!(
                        self.out,
                        "<span class=\"d-hunk\">\\ No newline at end of file\n</span>"
                    )?;
                }
            }
        }
        write!(self.out, "</pre></div>")
    }
}

impl<W: Write> Render for Html<W> {
    fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
        match event {
            Event::Setup { method, cwd } => self.div("meta", &format!("{method} in {cwd}")),
            Event::Session(id) => self.div("meta", &format!("session {id}")),
            Event::TurnStart { number, prompt } => {
                self.end_turn()?;
                self.in_turn = true;
                writeln!(
                    self.out,
                    "<section class=\"turn\" id=\"turn-{number}\">\n<h3>Turn {number}</h3>"
                )?;
                self.div("user", prompt)
            }
            Event::User(text) => self.div("user", text),
            Event::Chunk { voice, text, first } => {
                if *first {
                    let class = match voice {
                        Voice::Agent => "agent",
                        Voice::Thought => "thought",
                        Voice::Message => "message",
                        Voice::Summary => "summary",
                        Voice::Output => "output",
                    };
                    write!(self.out, "<div class=\"{class}\">")?;
                }
                write!(self.out, "{}", escape(text))
            }
            Event::ParagraphEnd => writeln!(self.out, "</div>"),
            Event::Tool(call) => self.tool(call),
            Event::ClientCall { method, target } => {
                self.div("client-call", &format!("{method} {target}"))
            }
            Event::Permission {
                title,
                choice,
                options,
            } => {
                write!(
                    self.out,
                    "<div class=\"permission\">Permission for <b>{}</b>: <b class=\"choice\">{}</b>",
                    escape(title),
                    escape(choice)
                )?;
                if let Some(chosen) = options.iter().find(|o| o.id == *choice) {
                    write!(self.out, " ({})", escape(&chosen.name))?;
                }
                if !options.is_empty() {
                    let offered: Vec<String> = options
                        .iter()
                        .map(|o| format!("{} [{}]", o.name, o.id))
                        .collect();
                    write!(
                        self.out,
                        " <span class=\"options\">offered: {}</span>",
                        escape(&offered.join(", "))
                    )?;
                }
                writeln!(self.out, "</div>")
            }
            Event::Plan(update) => {
                write!(self.out, "<div class=\"plan\">plan<ul>")?;
                for entry in update["entries"].as_array().into_iter().flatten() {
                    let status = escape(entry["status"].as_str().unwrap_or("pending"));
                    write!(
                        self.out,
                        "<li class=\"p-{status}\">{} {}</li>",
                        plan_mark(entry),
                        escape(entry["content"].as_str().unwrap_or(""))
                    )?;
                }
                writeln!(self.out, "</ul></div>")
            }
            Event::Mode(mode) => self.div("meta", &format!("mode → {mode}")),
            Event::Config(options) => self.div("meta", &config_summary(options)),
            Event::Title(title) => self.div("meta", &format!("title: {title}")),
            Event::Cancelled => self.div("cancelled", "cancelled by the user"),
            // A recording shows the answer, which says what was asked.
            Event::PermissionAsked { .. } => Ok(()),
            Event::Failed {
                method,
                code,
                message,
            } => self.div("error", &format!("{method} failed: {code} {message}")),
            Event::TurnEnd {
                stop_reason,
                seconds,
                ..
            } => {
                let (class, stop) = match stop_reason {
                    Some(stop) => ("turn-end", *stop),
                    None => ("turn-end failed", "failed"),
                };
                self.div(class, &format!("{stop} · {seconds:.1} s"))?;
                self.end_turn()
            }
            Event::NotJson { from, text } => self.div(
                "error",
                &format!("not JSON from the {}: {text}", from.as_str()),
            ),
            Event::Replayed {
                updates,
                agent_failed,
            } => self.div("meta", &replay_note(*updates, *agent_failed)),
            Event::Continued { agent_session } => self.div(
                "meta",
                &format!("continued on a new agent session {agent_session}"),
            ),
            Event::Restarted { .. }
            | Event::HostDropped
            | Event::Restored { .. }
            | Event::Stalled { .. } => self.div("meta", &proxy_note(event)),
            Event::Forked { .. } | Event::Offered { .. } => self.div("meta", &proxy_note(event)),
            Event::Bundle { summary } => self.div("meta", summary),
            Event::Scope {
                depth,
                session,
                title,
            } => {
                if std::mem::take(&mut self.in_child) {
                    writeln!(self.out, "</div>")?;
                }
                if *depth == 0 {
                    return Ok(());
                }
                self.in_child = true;
                writeln!(
                    self.out,
                    "<div class=\"child\" data-session=\"{}\" style=\"margin-left: {}rem\">\
                     <div class=\"child-title\">{}</div>",
                    escape(session),
                    depth * 2 - 1,
                    escape(title)
                )
            }
            Event::Subagent { .. } => self.div("subagent", &update_note(event)),
            Event::Message { .. } => self.div("message", &update_note(event)),
            Event::Notice { .. } => self.div("notice", &update_note(event)),
            Event::Task { .. } => self.div("task", &update_note(event)),
            Event::Compaction { .. } => self.div("compaction", &update_note(event)),
            Event::Usage { .. } | Event::PlanRemoved | Event::Terminal { .. } => {
                self.div("meta", &update_note(event))
            }
        }
    }
}

/// The wire view: every record, collapsible; [`WireView::finish`] ends the page.
pub struct WireView<W: Write> {
    out: W,
}

impl<W: Write> WireView<W> {
    /// Mark the start of run `number` (segment `file`) in the wire view, with the `initialize`
    /// request and response its header keeps a copy of (from the connection, so untimed).
    ///
    /// # Errors
    /// Write errors.
    pub fn run(
        &mut self,
        number: usize,
        file: &str,
        initialize: [Option<&[u8]>; 2],
    ) -> io::Result<()> {
        writeln!(
            self.out,
            "<div class=\"run\">run {number}: <code>{}</code></div>",
            escape(file)
        )?;
        for (from, line) in [Side::Client, Side::Agent].into_iter().zip(initialize) {
            if let Some(line) = line {
                let (what, body) = message(line);
                let what = format!("{what} (copied from the connection)");
                self.entry(from.as_str(), "", arrow(from), &what, &body)?;
            }
        }
        Ok(())
    }

    /// One record: time, direction, what it is; the message, indented, when opened.
    ///
    /// # Errors
    /// Write errors.
    pub fn record(&mut self, record: &Record) -> io::Result<()> {
        let time = format!(
            "<time datetime=\"{}\">{}</time>",
            utc(record.unix_us),
            clock(record.unix_us)
        );
        match &record.body {
            Body::Message { from, payload } => {
                let (what, body) = message(&payload.bytes);
                self.entry(from.as_str(), &time, arrow(*from), &what, &body)
            }
            Body::Stderr(bytes) => {
                let text = String::from_utf8_lossy(bytes);
                let first = text.lines().next().unwrap_or("");
                self.entry("stderr", &time, "agent stderr", first, &text)
            }
            Body::Event(event) => {
                let value = event.to_value();
                self.entry("event", &time, "proxy event", event.kind(), &pretty(&value))
            }
        }
    }

    fn entry(
        &mut self,
        class: &str,
        time: &str,
        direction: &str,
        what: &str,
        body: &str,
    ) -> io::Result<()> {
        writeln!(
            self.out,
            "<details class=\"rec from-{class}\"><summary>{time} <span class=\"dir\">{direction}</span> \
             <code>{}</code></summary><pre>{}</pre></details>",
            escape(what),
            escape_text(body)
        )
    }

    /// Note where a segment stops being readable.
    ///
    /// # Errors
    /// Write errors.
    pub fn damage(&mut self, file: &str, tail: &Tail) -> io::Result<()> {
        damage_note(&mut self.out, file, tail)
    }

    /// End the page.
    ///
    /// # Errors
    /// Write errors.
    pub fn finish(mut self) -> io::Result<W> {
        write!(
            self.out,
            "</details>\n</section>\n</main>\n<script>{SCRIPT}</script>\n</body>\n</html>\n"
        )?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A wire line for the wire view: what it is (`method #id`, `response #id`, `error #id`,
/// `method`, `not JSON`) and its text (JSON indented).
fn message(line: &[u8]) -> (String, String) {
    if let Some((top, body)) = super::pretty::pretty(line) {
        let id = top.id.map(|id| format!(" #{id}")).unwrap_or_default();
        let what = match top.method {
            Some(method) => format!("{method}{id}"),
            None if top.error => format!("error{id}"),
            None => format!("response{id}"),
        };
        return (what, body);
    }
    let Ok(msg) = serde_json::from_slice::<Value>(line) else {
        let text = String::from_utf8_lossy(line).into_owned();
        return ("not JSON".into(), text);
    };
    let id = msg
        .get("id")
        .map(|id| format!(" #{id}"))
        .unwrap_or_default();
    let what = match msg["method"].as_str() {
        Some(method) => format!("{method}{id}"),
        None if msg.get("error").is_some() => format!("error{id}"),
        None => format!("response{id}"),
    };
    (what, pretty(&msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(event: &Event<'_>) -> String {
        let mut html = Html {
            out: Vec::new(),
            in_turn: false,
            in_child: false,
        };
        html.event(event).unwrap();
        String::from_utf8(html.out).unwrap()
    }

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape(r#"<script>alert("x" & 'y')</script>"#),
            "&lt;script&gt;alert(&quot;x&quot; &amp; &#39;y&#39;)&lt;/script&gt;"
        );
        assert!(matches!(escape("plain"), Cow::Borrowed("plain")));
        assert_eq!(escape_text(r#"<"a"&'b'>"#), r#"&lt;"a"&amp;'b'&gt;"#);
    }

    #[test]
    fn a_diff_block_renders_as_unified_hunks() {
        let update = serde_json::json!({"content": [{"type": "diff", "path": "/p/<a>.txt",
            "oldText": "one\ntwo\nthree\n", "newText": "one\n2\nthree\nfour"}]});
        let out = render(&Event::Tool(ToolCall {
            id: "c",
            title: "Edit",
            kind: Some("edit"),
            status: "completed",
            new: true,
            update: &update,
        }));
        assert!(
            out.contains("--- /p/&lt;a&gt;.txt\n+++ /p/&lt;a&gt;.txt"),
            "{out}"
        );
        assert!(
            out.contains("<span class=\"d-hunk\">@@ -1,3 +1,4 @@\n</span>"),
            "{out}"
        );
        for line in [
            "<span class=\"d-ctx\"> one\n</span>",
            "<span class=\"d-del\">-two\n</span>",
            "<span class=\"d-ins\">+2\n</span>",
            "<span class=\"d-ins\">+four\n</span>",
            "No newline at end of file",
        ] {
            assert!(out.contains(line), "missing {line:?} in {out}");
        }
    }

    #[test]
    fn a_new_file_is_all_additions() {
        let update =
            serde_json::json!({"content": [{"type": "diff", "path": "n", "newText": "a\n"}]});
        let out = render(&Event::Tool(ToolCall {
            id: "c",
            title: "Write",
            kind: None,
            status: "",
            new: false,
            update: &update,
        }));
        assert!(out.contains("new file <code>n</code>"), "{out}");
        assert!(out.contains("<span class=\"d-ins\">+a\n</span>"), "{out}");
        assert!(out.contains("class=\"tool update\""), "{out}");
    }
}
