//! Every `sessionUpdate` kind of the ACP JSON schema 1.20.0 (`tests/schema/`, generated from the
//! Rust crate `agent-client-protocol-schema` 1.20.0: v1 stable, v1 unstable, the v2 draft) and
//! every kind the installed claude-agent-acp 0.101 sends (read from its `dist/` code) is in the
//! table of update kinds (`acp_journal::acp::updates::KINDS`, docs/UPDATES.md), which says
//! whether each is shown and how it is replayed.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use crate::util::{Peers, root};

/// The `sessionUpdate` values a schema's `SessionUpdate` defines.
fn schema_kinds(file: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("tests/schema").join(file)).unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    let update = &schema["$defs"]["SessionUpdate"];
    let variants = update["oneOf"]
        .as_array()
        .or(update["anyOf"].as_array())
        .unwrap_or_else(|| panic!("{file}: no SessionUpdate variants"));
    variants
        .iter()
        .filter_map(|v| v["properties"]["sessionUpdate"]["const"].as_str())
        .map(str::to_string)
        .collect()
}

/// The `sessionUpdate: "…"` literals in the JavaScript files under `dir`.
fn sent_by(dir: &Path) -> BTreeSet<String> {
    let pattern = regex::Regex::new(r#"sessionUpdate: "([a-z_]+)""#).unwrap();
    let mut kinds = BTreeSet::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "js") {
                let text = std::fs::read_to_string(&path).unwrap();
                kinds.extend(pattern.captures_iter(&text).map(|c| c[1].to_string()));
            }
        }
    }
    kinds
}

fn missing(kinds: &BTreeSet<String>) -> Vec<&str> {
    kinds
        .iter()
        .map(String::as_str)
        .filter(|k| acp_journal::acp::updates::kind(k).is_none())
        .collect()
}

#[test]
fn every_update_kind_of_schema_1_20_is_in_the_table() {
    let mut all = BTreeSet::new();
    for file in [
        "acp-1.20.0-v1.json",
        "acp-1.20.0-v1-unstable.json",
        "acp-1.20.0-v2-draft.json",
    ] {
        let kinds = schema_kinds(file);
        assert!(kinds.len() > 15, "{file}: {kinds:?}");
        assert_eq!(missing(&kinds), Vec::<&str>::new(), "{file}");
        all.extend(kinds);
    }
    for kind in ["subagent_update", "cursor_update", "replay_complete"] {
        assert!(all.contains(kind), "{kind} is in the schema");
    }
}

#[test]
fn every_update_kind_claude_agent_acp_sends_is_in_the_table() {
    let index = Peers::get().claude_agent()[1].clone();
    let dist = Path::new(&index).parent().unwrap();
    let kinds = sent_by(dist);
    for kind in [
        "subagent_update",
        "subagent_spawned",
        "async_task_progress",
        "compaction_summary_chunk",
        "notice",
    ] {
        assert!(
            kinds.contains(kind),
            "claude-agent-acp sends {kind}: {kinds:?}"
        );
    }
    assert_eq!(missing(&kinds), Vec::<&str>::new());
}
