//! `search` and `stats`: streaming passes over journals.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::Value;

use crate::catalog::Catalog;
use crate::cli::{SearchArgs, StatsArgs};
use crate::journal::reader::is_end_marker;
use crate::journal::{Body, Event, JournalDir, SegmentReader};
use crate::wire::Side;

/// The sessions to read: one (by ID, prefix or path), or all (optionally by cwd).
pub(super) fn targets(
    journals: &JournalDir,
    session: Option<&str>,
    cwd: Option<&str>,
) -> anyhow::Result<Vec<(String, Vec<PathBuf>)>> {
    if let Some(session) = session {
        let segments = journals.resolve(session).map_err(anyhow::Error::msg)?;
        return Ok(vec![(session.to_string(), segments)]);
    }
    Ok(journals
        .sessions_with(false)?
        .into_iter()
        .filter(|s| cwd.is_none() || s.cwd.as_deref() == cwd)
        .map(|s| {
            let segments = s
                .segments
                .iter()
                .map(|seg| journals.root().join(seg))
                .collect();
            (s.session, segments)
        })
        .collect())
}

/// A message matching a search, as `search` prints it.
pub(super) struct Found {
    /// The session (its journal's).
    pub(super) session: String,
    /// The prompt turn it is in (0: before the first prompt).
    pub(super) turn: u64,
    /// Who sent it.
    pub(super) from: Side,
    /// The subagent's session, for a child session's line journaled with its root.
    pub(super) subagent: Option<String>,
    /// The match with up to 60 bytes either side, line breaks as spaces.
    pub(super) context: String,
}

/// Every message of `targets` matching `pattern`, in journal order, handed to `visit` until it
/// says to stop (`false`); with `redact`, each message is matched and excerpted redacted (a
/// journal written with `--no-redact` holds secrets; an excerpt must not cut one short of the
/// pattern that finds it).
pub(super) fn scan(
    targets: Vec<(String, Vec<PathBuf>)>,
    pattern: &regex::bytes::Regex,
    redact: bool,
    visit: &mut dyn FnMut(Found) -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let prompt = memchr::memmem::Finder::new(b"\"session/prompt\"");
    for (session, segments) in targets {
        let mut turn = 0u64;
        for path in segments {
            let Ok(mut reader) = SegmentReader::open(&path) else {
                continue;
            };
            let session = reader
                .header()
                .session
                .clone()
                .unwrap_or_else(|| session.clone());
            // Only lines that may match (or that count a turn) are decoded.
            while let Some(record) =
                reader.next_where(|line| prompt.find(line).is_some() || pattern.is_match(line))
            {
                let Body::Message { from, payload } = &record.body else {
                    continue;
                };
                if from == &Side::Client && prompt.find(&payload.bytes).is_some() {
                    turn += 1;
                }
                let redacted = redact
                    .then(|| {
                        let peek = crate::wire::envelope::peek(&payload.bytes);
                        crate::redact::redact_line(&peek, &payload.bytes)
                    })
                    .flatten();
                let bytes = redacted.as_deref().unwrap_or(&payload.bytes);
                let Some(m) = pattern.find(bytes) else {
                    continue;
                };
                let start = m.start().saturating_sub(60);
                let end = (m.end() + 60).min(bytes.len());
                let context =
                    String::from_utf8_lossy(&bytes[start..end]).replace(['\n', '\r'], " ");
                let subagent = crate::wire::envelope::peek(bytes)
                    .session
                    .filter(|s| **s != session)
                    .map(|s| s.to_string());
                let found = Found {
                    session: session.clone(),
                    turn,
                    from: *from,
                    subagent,
                    context,
                };
                if !visit(found)? {
                    return Ok(());
                }
            }
        }
    }
    Ok(())
}

/// Print every message matching the pattern, with its session (and the subagent's, for a
/// child session's line), turn and some context.
pub(super) fn run(journals: &JournalDir, args: SearchArgs) -> anyhow::Result<ExitCode> {
    let pattern = regex::bytes::Regex::new(&args.pattern)
        .map_err(|e| anyhow::anyhow!("bad pattern {:?}: {e}", args.pattern))?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut found = 0u64;
    let targets = targets(journals, args.session.as_deref(), args.cwd.as_deref())?;
    scan(targets, &pattern, false, &mut |m| {
        found += 1;
        // A subagent's line (journaled with its root) says whose it is.
        let child = m
            .subagent
            .map(|s| format!("  subagent {}", s.escape_debug()))
            .unwrap_or_default();
        writeln!(
            out,
            "{}  turn {}  {}{child}  …{}…",
            m.session.escape_debug(),
            m.turn,
            m.from.as_str(),
            m.context
        )?;
        Ok(true)
    })?;
    out.flush()?;
    Ok(ExitCode::from(if found > 0 { 0 } else { 1 }))
}

/// Messages by kind and direction, bytes raw vs stored, turns and duration; then what the
/// proxies running on `local` have not shipped to their shared store yet.
pub(super) fn stats(
    journals: &JournalDir,
    local: &JournalDir,
    args: StatsArgs,
) -> anyhow::Result<ExitCode> {
    let mut kinds: BTreeMap<(&'static str, String), (u64, u64)> = BTreeMap::new();
    let (mut raw, mut stored, mut turns, mut sessions) = (0u64, 0u64, 0u64, 0u64);
    let (mut first, mut last) = (i64::MAX, i64::MIN);
    let (mut restarts, mut host_drops) = (0u64, 0u64);
    let mut tokens = Tokens::default();
    let mut beyond = Vec::new();
    for (_, segments) in targets(journals, args.session.as_deref(), None)? {
        sessions += 1;
        for path in segments {
            stored += std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            if let Some(bytes) = crate::journal::mark::beyond_store(&path) {
                beyond.push((path.clone(), bytes));
            }
            let Ok(reader) = SegmentReader::open(&path) else {
                continue;
            };
            let session = reader.header().session.clone().unwrap_or_default();
            for record in reader.filter(|r| !is_end_marker(r)) {
                first = first.min(record.unix_us);
                last = last.max(record.unix_us);
                let Body::Message { from, payload } = &record.body else {
                    match &record.body {
                        Body::Event(Event::AgentRestarted { .. }) => restarts += 1,
                        Body::Event(Event::HostDropped) => host_drops += 1,
                        _ => {}
                    }
                    continue;
                };
                let msg: Value = serde_json::from_slice(&payload.bytes).unwrap_or(Value::Null);
                if *from == Side::Agent {
                    tokens.count(&session, &msg);
                }
                let kind = match (
                    msg["method"].as_str(),
                    msg["params"]["update"]["sessionUpdate"].as_str(),
                ) {
                    (Some("session/update"), Some(update)) => format!("session/update {update}"),
                    (Some(method), _) => method.to_string(),
                    (None, _) if msg.get("error").is_some() => "error response".into(),
                    (None, _) if msg.get("result").is_some() => "response".into(),
                    _ => "other line".into(),
                };
                if kind == "session/prompt" {
                    turns += 1;
                }
                let entry = kinds.entry((from.as_str(), kind)).or_default();
                entry.0 += 1;
                entry.1 += payload.bytes.len() as u64 + 1;
                raw += payload.bytes.len() as u64 + 1;
            }
        }
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:<8} {:<44} {:>9} {:>12}",
        "FROM", "KIND", "MESSAGES", "BYTES"
    )?;
    for ((from, kind), (count, bytes)) in &kinds {
        writeln!(out, "{from:<8} {kind:<44} {count:>9} {bytes:>12}")?;
    }
    let ratio = if stored > 0 {
        raw as f64 / stored as f64
    } else {
        0.0
    };
    let seconds = if last > first {
        (last - first) as f64 / 1e6
    } else {
        0.0
    };
    writeln!(
        out,
        "\n{sessions} sessions, {turns} turns, {seconds:.1} s from first to last record"
    )?;
    writeln!(
        out,
        "{raw} bytes of messages, {stored} bytes on disk ({ratio:.1}× smaller)"
    )?;
    if tokens.turns + tokens.subagents > 0 {
        writeln!(
            out,
            "{} tokens: {} in the sessions' own turns, {} in their subagents' work (each subagent's counted once)",
            tokens.turns + tokens.subagents,
            tokens.turns,
            tokens.subagents
        )?;
    }
    if restarts > 0 {
        writeln!(
            out,
            "{restarts} agent restarts (acp-journal started a dead agent again)"
        )?;
    }
    if host_drops > 0 {
        writeln!(
            out,
            "{host_drops} dropped connections to the host (the bridge connected again)"
        )?;
    }
    // What this machine's journals hold that the shared store never will.
    for (path, bytes) in &beyond {
        let note = crate::render::html::beyond_store_note(&path.display().to_string(), *bytes);
        writeln!(out, "{note}")?;
    }
    // What this machine's running proxies have not shipped to their store yet.
    for r in crate::fleet::status::reports(local) {
        let [p50, p99, max] = r.lag_ms;
        writeln!(
            out,
            "shipping to {} (pid {}): {} bytes in {} files not in the store yet; lag p50 {p50} ms, p99 {p99} ms, max {max} ms over {} parts{}",
            r.store,
            r.pid,
            r.behind_bytes,
            r.behind_files,
            r.parts,
            r.error
                .as_deref()
                .map(|e| format!("; the store fails: {e}"))
                .unwrap_or_default()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Tokens the agents reported, counted once each: a session's own turns (a prompt's answer's
/// `usage`, or ACP v2's `idle` state), and its subagents' work (the `usage` of a subagent's end
/// state as its parent tells it; ACP v2 repeats that state on the subagent's own stream, which
/// is not counted again).
#[derive(Default)]
struct Tokens {
    turns: u64,
    subagents: u64,
}

impl Tokens {
    /// An agent message of `session` (a child's lines carry the child's ID).
    fn count(&mut self, session: &str, msg: &Value) {
        let update = &msg["params"]["update"];
        match update["sessionUpdate"].as_str() {
            Some("state_update") if msg["params"]["sessionId"] == session => {
                self.turns += total(&update["usage"]);
            }
            Some("subagent_update") => self.subagents += total(&update["state"]["usage"]),
            Some(_) => {}
            None => self.turns += total(&msg["result"]["usage"]),
        }
    }
}

/// The tokens of a `usage` object: `totalTokens`, else input and output.
fn total(usage: &Value) -> u64 {
    usage["totalTokens"].as_u64().unwrap_or_else(|| {
        usage["inputTokens"].as_u64().unwrap_or(0) + usage["outputTokens"].as_u64().unwrap_or(0)
    })
}
