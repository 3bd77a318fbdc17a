//! Authorship logs in the Git AI Standard v3.0.0 (the git note of a commit under
//! `refs/notes/ai`): the lines each edit wrote, by file, under `s_<14 hex>::t_<14 hex>` keys,
//! a `---` line, and the metadata JSON (`schema_version`, `base_commit_sha`, `prompts`, the
//! sessions' `agent_id`). No prompt text: the session ID finds it in the journal.
//!
//! A note already there is merged: another tool's entries and records are kept as they are
//! (the lines they attest are theirs); ours (sessions whose `custom_attributes.recorded_by`
//! is `acp-journal`) are replaced by the new ones.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::edits::Origin;
use crate::hex;

/// The `schema_version` written.
pub const SCHEMA: &str = "authorship/3.0.0";

/// What marks a session record as ours.
const RECORDED_BY: &str = "acp-journal";

/// The first 14 hex digits of SHA-256 of `text`.
fn hex14(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))[..14].to_string()
}

/// The agent's tool name for `agent_id.tool` (its `agentInfo.name`).
fn tool(origin: &Origin) -> &str {
    origin.agent.as_deref().unwrap_or("acp-agent")
}

/// The standard's session ID: `s_` + SHA-256 of `<tool>:<conversation id>`, 14 hex digits.
pub fn session_key(origin: &Origin) -> String {
    format!(
        "s_{}",
        hex14(&format!("{}:{}", tool(origin), origin.session))
    )
}

/// An edit's trace ID: 14 hex digits per tool call (of the session, its call ID or, without
/// one, the edit's time), the same each time the note is written.
pub fn trace_key(origin: &Origin) -> String {
    let call = origin
        .tool_call
        .clone()
        .unwrap_or_else(|| origin.time_us.to_string());
    format!("t_{}", hex14(&format!("{}\n{call}", origin.session)))
}

/// A file's lines in one entry: `1-3,5`.
pub fn ranges(lines: &[usize]) -> String {
    let mut lines = lines.to_vec();
    lines.sort_unstable();
    lines.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let start = lines[i];
        while i + 1 < lines.len() && lines[i + 1] == lines[i] + 1 {
            i += 1;
        }
        out.push(match lines[i] {
            end if end == start => start.to_string(),
            end => format!("{start}-{end}"),
        });
        i += 1;
    }
    out.join(",")
}

/// Lines of `1-3,5` (`None` when it is not a range list).
fn lines_of(ranges: &str) -> Option<Vec<usize>> {
    let mut lines = Vec::new();
    for part in ranges.split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
        lines.extend(a..=b);
    }
    Some(lines)
}

/// An entry of the attestation section: a file, a key, its lines.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    file: String,
    key: String,
    lines: Vec<usize>,
}

/// The note of commit `sha` for `credited` (a file, a line of it, the edit that wrote it),
/// merged into `existing` (the note there, if any). `Err` when `existing` is not an
/// authorship log (it is then left alone).
pub fn write(
    sha: &str,
    credited: &[(&str, usize, &Origin)],
    existing: Option<&str>,
) -> Result<String, String> {
    let (mut entries, mut meta) = match existing {
        Some(text) => parse(text)?,
        None => (Vec::new(), Map::new()),
    };
    // The standard's required fields first, as its examples have them.
    for (field, value) in [
        ("schema_version", json!(SCHEMA)),
        ("base_commit_sha", json!(sha)),
        ("prompts", json!({})),
    ] {
        meta.entry(field).or_insert(value);
    }
    let sessions = meta
        .entry("sessions")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or("its `sessions` is not an object")?;
    // Ours from before go; theirs stay, with the lines they attest.
    let before: Vec<String> = sessions
        .iter()
        .filter(|(_, record)| record["custom_attributes"]["recorded_by"] == RECORDED_BY)
        .map(|(id, _)| id.clone())
        .collect();
    sessions.retain(|id, _| !before.contains(id));
    entries.retain(|e| !before.iter().any(|id| e.key.split("::").next() == Some(id)));
    let theirs: std::collections::HashSet<(&str, usize)> = entries
        .iter()
        .flat_map(|e| e.lines.iter().map(move |l| (e.file.as_str(), *l)))
        .collect();
    let mut ours: BTreeMap<(&str, String), Vec<usize>> = BTreeMap::new();
    let mut records: Vec<(String, &Origin)> = Vec::new();
    for (file, line, origin) in credited {
        if theirs.contains(&(*file, *line)) {
            continue;
        }
        let session = session_key(origin);
        ours.entry((file, format!("{session}::{}", trace_key(origin))))
            .or_default()
            .push(*line);
        if !records.iter().any(|(s, _)| *s == session) {
            records.push((session, origin));
        }
    }
    let mut new_entries: Vec<Entry> = ours
        .into_iter()
        .map(|((file, key), lines)| Entry {
            file: file.to_string(),
            key,
            lines,
        })
        .collect();
    for (session, origin) in records {
        sessions.insert(
            session,
            json!({
                "agent_id": {
                    "tool": tool(origin),
                    "id": origin.session,
                    "model": origin.model.as_deref().unwrap_or("unknown"),
                },
                "custom_attributes": {"recorded_by": RECORDED_BY},
            }),
        );
    }
    entries.append(&mut new_entries);
    meta.insert("schema_version".into(), json!(SCHEMA));
    meta.insert("base_commit_sha".into(), json!(sha));
    // Files in their first appearance's order, each once.
    let mut files: Vec<&str> = Vec::new();
    for e in &entries {
        if !files.contains(&e.file.as_str()) {
            files.push(&e.file);
        }
    }
    let mut text = String::new();
    for file in files {
        if file.contains([' ', '\t', '\n']) {
            text.push_str(&format!("\"{file}\"\n"));
        } else {
            text.push_str(&format!("{file}\n"));
        }
        for e in entries
            .iter()
            .filter(|e| e.file == file && !e.lines.is_empty())
        {
            text.push_str(&format!("  {} {}\n", e.key, ranges(&e.lines)));
        }
    }
    text.push_str("---\n");
    text.push_str(&serde_json::to_string_pretty(&Value::Object(meta)).expect("JSON"));
    text.push('\n');
    Ok(text)
}

/// An authorship log's entries and metadata.
fn parse(text: &str) -> Result<(Vec<Entry>, Map<String, Value>), String> {
    let (attestations, meta) = match text.split_once("\n---\n") {
        Some(parts) => parts,
        None => match text.strip_prefix("---\n") {
            Some(meta) => ("", meta),
            None => return Err("no `---` line".into()),
        },
    };
    let meta: Value =
        serde_json::from_str(meta).map_err(|e| format!("its metadata is not JSON: {e}"))?;
    let Value::Object(meta) = meta else {
        return Err("its metadata is not a JSON object".into());
    };
    let mut entries = Vec::new();
    let mut file: Option<String> = None;
    for line in attestations.lines().filter(|l| !l.is_empty()) {
        if let Some(entry) = line.strip_prefix("  ") {
            let (key, ranges) = entry.split_once(' ').ok_or("an entry without ranges")?;
            let lines = lines_of(ranges).ok_or_else(|| format!("bad ranges {ranges:?}"))?;
            let file = file.clone().ok_or("an entry before any file")?;
            entries.push(Entry {
                file,
                key: key.to_string(),
                lines,
            });
        } else {
            let name = line
                .strip_prefix('"')
                .and_then(|l| l.strip_suffix('"'))
                .unwrap_or(line);
            file = Some(name.to_string());
        }
    }
    Ok((entries, meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(session: &str, call: &str) -> Origin {
        Origin {
            session: session.into(),
            turn: 1,
            tool_call: Some(call.into()),
            agent: Some("claude-agent-acp".into()),
            model: Some("opus".into()),
            prompt: "never in a note".into(),
            time_us: 1,
        }
    }

    #[test]
    fn keys_follow_the_standard() {
        let o = origin("sess-1", "call-1");
        let expected = hex::encode(Sha256::digest(b"claude-agent-acp:sess-1"));
        assert_eq!(session_key(&o), format!("s_{}", &expected[..14]));
        let t = trace_key(&o);
        assert_eq!(t.len(), 16);
        assert!(t.starts_with("t_") && t[2..].bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(t, trace_key(&origin("sess-1", "call-2")));
    }

    #[test]
    fn ranges_are_ascending_singles_and_spans() {
        assert_eq!(ranges(&[5, 1, 2, 3, 9, 10, 3]), "1-3,5,9-10");
        assert_eq!(lines_of("1-3,5"), Some(vec![1, 2, 3, 5]));
    }

    #[test]
    fn a_note_has_files_entries_a_divider_and_metadata_without_the_prompt() {
        let (a, b) = (origin("sess-1", "c1"), origin("sess-1", "c2"));
        let note = write(
            "abc",
            &[
                ("src/my file.rs", 1, &a),
                ("src/my file.rs", 2, &a),
                ("src/my file.rs", 4, &b),
            ],
            None,
        )
        .unwrap();
        let s = session_key(&a);
        let (ta, tb) = (trace_key(&a), trace_key(&b));
        let (first, second) = if ta < tb { (ta, "1-2") } else { (tb, "4") };
        let (other, other_lines) = if first == trace_key(&a) {
            (trace_key(&b), "4")
        } else {
            (trace_key(&a), "1-2")
        };
        let head = format!(
            "\"src/my file.rs\"\n  {s}::{first} {second}\n  {s}::{other} {other_lines}\n---\n"
        );
        assert!(note.starts_with(&head), "{note}");
        assert!(!note.contains("never in a note"));
        let meta: Value = serde_json::from_str(note.split_once("\n---\n").unwrap().1).unwrap();
        assert_eq!(meta["schema_version"], SCHEMA);
        assert_eq!(meta["base_commit_sha"], "abc");
        assert_eq!(meta["prompts"], json!({}));
        assert_eq!(
            meta["sessions"][&s]["agent_id"],
            json!({"tool": "claude-agent-acp", "id": "sess-1", "model": "opus"})
        );
    }

    #[test]
    fn another_tools_note_is_kept_and_ours_replaced() {
        let theirs = "src/a.rs\n  s_0123456789abcd::t_0123456789abcd 1-2\n  h_0123456789abcd 7\n  s_fedcba98765432::t_fedcba98765432 9\n---\n{\"schema_version\":\"authorship/3.0.0\",\"base_commit_sha\":\"abc\",\"prompts\":{},\"git_ai_version\":\"1.4.5\",\"sessions\":{\"s_0123456789abcd\":{\"agent_id\":{\"tool\":\"cursor\",\"id\":\"x\",\"model\":\"m\"}}},\"humans\":{\"h_0123456789abcd\":{\"author\":\"A <a@x>\"}}}\n";
        let a = origin("sess-1", "c1");
        let once = write(
            "abc",
            &[("src/a.rs", 2, &a), ("src/a.rs", 3, &a)],
            Some(theirs),
        )
        .unwrap();
        let key = format!("{}::{}", session_key(&a), trace_key(&a));
        assert!(
            once.starts_with(&format!(
                "src/a.rs\n  s_0123456789abcd::t_0123456789abcd 1-2\n  h_0123456789abcd 7\n  s_fedcba98765432::t_fedcba98765432 9\n  {key} 3\n---\n"
            )),
            "{once}"
        );
        // Written again with other lines: ours replaced, theirs as they were.
        let b = origin("sess-2", "c9");
        let twice = write("abc", &[("src/b.rs", 1, &b)], Some(&once)).unwrap();
        assert!(!twice.contains(&key), "{twice}");
        // Theirs, even an entry whose record they left out.
        assert!(
            twice.contains("\n  s_fedcba98765432::t_fedcba98765432 9\n"),
            "{twice}"
        );
        let meta: Value = serde_json::from_str(twice.split_once("\n---\n").unwrap().1).unwrap();
        assert_eq!(meta["git_ai_version"], "1.4.5");
        assert_eq!(meta["humans"]["h_0123456789abcd"]["author"], "A <a@x>");
        let sessions = meta["sessions"].as_object().unwrap();
        assert_eq!(sessions.len(), 2, "{twice}");
        assert!(sessions.contains_key(&session_key(&b)));
        assert!(write("abc", &[], Some("not a log")).is_err());
    }
}
