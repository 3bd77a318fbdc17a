//! `list`: the sessions in the journal directory, newest first.

use std::io::Write;
use std::process::ExitCode;

use serde_json::json;

use crate::catalog::Catalog;
use crate::catalog::SessionSummary;
use crate::cli::ListArgs;
use crate::journal::JournalDir;
use crate::render::utc_us;

/// Print the sessions as a table or JSON.
pub(super) fn run(journals: &JournalDir, args: ListArgs) -> anyhow::Result<ExitCode> {
    if args.rebuild_catalog {
        let n = journals.rebuild_catalog()?;
        eprintln!("acp-journal: catalog rebuilt from the journals ({n} entries)");
    }
    let all = journals.sessions_with(false)?;
    let sessions = select(&all, &args);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if args.json {
        let rows: Vec<_> = sessions.iter().map(|s| json_row(journals, s)).collect();
        serde_json::to_writer_pretty(&mut out, &rows)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    if sessions.is_empty() {
        writeln!(out, "no sessions recorded in {}", journals.root().display())?;
        return Ok(ExitCode::SUCCESS);
    }
    let ids: Vec<String> = sessions.iter().map(|s| s.session.clone()).collect();
    let prefixes = shortest_prefixes(&ids);
    writeln!(
        out,
        "{:<12}  {:<24}  {:<16}  {:<16}  {:<11}  {:<11}  {:>5}  {:>9}  {:>8}  STATE",
        "SESSION", "TITLE", "CWD", "AGENT", "STARTED", "ACTIVE", "TURNS", "SUBAGENTS", "SIZE"
    )?;
    for s in &sessions {
        writeln!(
            out,
            "{:<12}  {:<24}  {:<16}  {:<16}  {:<11}  {:<11}  {:>5}  {:>9}  {:>8}  {}",
            prefixes[s.session.as_str()],
            cut(s.shown_title().unwrap_or("-"), 24),
            cut(s.cwd.as_deref().unwrap_or("-"), 16),
            cut(
                s.agent_name
                    .as_deref()
                    .or(s.agent.as_deref().map(agent_name))
                    .unwrap_or("-"),
                16
            ),
            when(s.started),
            when(s.updated),
            s.turns,
            s.subagents,
            size(s.bytes),
            state(journals, s),
        )?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The time `age` ago, Unix microseconds (`--since`: sessions active since then).
pub(super) fn since_us(age: std::time::Duration) -> i64 {
    jiff::Timestamp::now()
        .as_microsecond()
        .saturating_sub(i64::try_from(age.as_micros()).unwrap_or(i64::MAX))
}

/// Whether the session's agent command line or the agent's own name contains `text`.
pub(super) fn agent_is(s: &SessionSummary, text: &str) -> bool {
    [&s.agent, &s.agent_name]
        .into_iter()
        .any(|x| x.as_deref().is_some_and(|x| x.contains(text)))
}

/// Of `sessions`, those `args` selects (by cwd, agent, age; none deleted), newest activity
/// first.
pub(super) fn select<'a>(
    sessions: &'a [SessionSummary],
    args: &ListArgs,
) -> Vec<&'a SessionSummary> {
    let since = args.since.map(since_us);
    let mut sessions: Vec<&SessionSummary> = sessions
        .iter()
        .filter(|s| {
            !s.deleted
                && args
                    .cwd
                    .as_deref()
                    .is_none_or(|c| s.cwd.as_deref() == Some(c))
                && args.agent.as_deref().is_none_or(|a| agent_is(s, a))
                && since.is_none_or(|t| s.updated >= t)
        })
        .collect();
    sessions.sort_by_key(|s| std::cmp::Reverse(s.updated));
    sessions
}

/// One session as `list --json` shows it.
pub(super) fn json_row(journals: &JournalDir, s: &SessionSummary) -> serde_json::Value {
    row(s, state(journals, s))
}

/// One session as `list --json` shows it, in state `state`.
pub(super) fn row(s: &SessionSummary, state: &str) -> serde_json::Value {
    json!({
        "session": s.session, "title": s.shown_title(), "cwd": s.cwd, "agent": s.agent,
        "agent_name": s.agent_name, "archived": s.archived,
        "started": utc_us(s.started), "updated": utc_us(s.updated),
        "last_turn_ended": s.last_turn_ended.map(utc_us),
        "turns": s.turns, "subagents": s.subagents, "records": s.records,
        "bytes": s.bytes, "state": state, "segments": s.segments,
    })
}

/// `stranded` when this disk holds records of it that never reached the shared store (another
/// host continued it from what the store had); else `live` while a proxy writes it; `closed`
/// when its latest run ended cleanly (an earlier run killed and continued is history, not the
/// session's state); else `torn`. In a copy of the store, as the hosts' catalogs say it
/// ([`SessionSummary::store_state`]).
pub(super) fn state(journals: &JournalDir, s: &SessionSummary) -> &'static str {
    if journals.is_mirror() {
        s.store_state()
    } else if s
        .segments
        .iter()
        .any(|seg| crate::journal::mark::beyond_store(&journals.root().join(seg)).is_some())
    {
        "stranded"
    } else if !s.open {
        "closed"
    } else if s.segments.iter().any(|seg| journals.writer_alive(seg)) {
        "live"
    } else if s.ended_clean {
        "closed"
    } else {
        "torn"
    }
}

/// For each ID, the shortest prefix (at least 6 characters) that names only it: one more
/// character than it shares with its neighbours in sorted order.
pub(super) fn shortest_prefixes(ids: &[String]) -> std::collections::HashMap<&str, String> {
    let mut sorted: Vec<&str> = ids.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    let common = |a: &str, b: &str| a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let mut out = std::collections::HashMap::with_capacity(sorted.len());
    for (i, id) in sorted.iter().enumerate() {
        let before = i.checked_sub(1).map_or(0, |j| common(sorted[j], id));
        let after = sorted.get(i + 1).map_or(0, |next| common(next, id));
        let n = (before.max(after) + 1).max(6);
        let prefix: String = id.chars().take(n).collect();
        let shown: String = prefix.escape_debug().collect();
        out.insert(
            *id,
            if shown.is_empty() {
                "\"\"".to_string()
            } else {
                cut(&shown, 40)
            },
        );
    }
    out
}

/// The program name of an agent command (`npx @agentclientprotocol/claude-agent-acp` → `claude-agent-acp`).
fn agent_name(argv: &str) -> &str {
    let last_path = |w: &str| w.rsplit('/').next().unwrap_or(w).to_string();
    let words: Vec<&str> = argv.split_whitespace().collect();
    let interesting = words
        .iter()
        .rev()
        .find(|w| {
            !w.starts_with('-')
                && !matches!(
                    last_path(w).as_str(),
                    "node" | "npx" | "python" | "python3" | "uvx"
                )
        })
        .or(words.first());
    interesting.map_or(argv, |w| w.rsplit('/').next().unwrap_or(w))
}

fn cut(text: &str, width: usize) -> String {
    let clean: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if clean.chars().count() > width {
        format!("{}…", clean.chars().take(width - 1).collect::<String>())
    } else {
        clean
    }
}

fn when(unix_us: i64) -> String {
    jiff::Timestamp::from_microsecond(unix_us)
        .map(|t| t.strftime("%m-%d %H:%M").to_string())
        .unwrap_or_default()
}

fn size(bytes: u64) -> String {
    match bytes {
        b if b < 10 * 1024 => format!("{b} B"),
        b if b < 10 << 20 => format!("{} KiB", b >> 10),
        b => format!("{} MiB", b >> 20),
    }
}
