//! The catalog rebuilt from the segments themselves, the truth: each segment's header and an
//! ACP-aware read of its records ([`SegmentScan`]) as the entries the catalog would hold.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;

use super::{AgentInfo, CatalogEntry};
use crate::journal::dir::segments_in;
use crate::journal::{Body, Event, JournalDir, SegmentReader, Tail};
use crate::wire::Side;

/// Catalog entries rebuilt from the session segments themselves (headers, and records for
/// counts, titles and aliases).
pub(super) fn scan_segments(journals: &JournalDir) -> io::Result<Vec<CatalogEntry>> {
    let mut entries = Vec::new();
    let dirs = match fs::read_dir(journals.root().join("sessions")) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(entries),
        Err(e) => return Err(e),
    };
    for dir in dirs {
        let Ok(files) = segments_in(&dir?.path()) else {
            continue;
        };
        for path in files {
            let Ok(reader) = SegmentReader::open(&path) else {
                continue;
            };
            let header = reader.header().clone();
            let Some(session) = header.session.clone() else {
                continue;
            };
            let segment = journals.relative(&path);
            entries.push(CatalogEntry::Open {
                git_branch: None,
                session: session.clone(),
                segment: segment.clone(),
                cwd: header.cwd.clone(),
                agent: Some(header.argv.join(" ")),
                agent_name: header
                    .initialize
                    .as_ref()
                    .and_then(|i| i.response_value())
                    .and_then(|r| crate::acp::agent_title(&r)),
                t: header.started,
                agent_info: header
                    .initialize
                    .as_ref()
                    .and_then(|i| i.response_value())
                    .and_then(|r| AgentInfo::of(&r)),
            });
            let scan = SegmentScan::of(reader);
            if let Some(title) = scan.prompt {
                entries.push(CatalogEntry::Prompt {
                    session: session.clone(),
                    title,
                    t: header.started,
                });
            }
            if let Some(title) = scan.name.clone() {
                entries.push(CatalogEntry::Rename {
                    session: session.clone(),
                    title,
                    t: scan.last,
                });
            }
            if let Some(archived) = scan.archived {
                entries.push(CatalogEntry::Archive {
                    session: session.clone(),
                    archived,
                    t: scan.last,
                });
            }
            if let Some(title) = scan.title {
                entries.push(CatalogEntry::Info {
                    session: session.clone(),
                    title: Some(title),
                    updated_at: None,
                    t: scan.last,
                });
            }
            for agent in scan.aliases {
                entries.push(CatalogEntry::Alias {
                    session: session.clone(),
                    agent,
                    t: scan.last,
                });
            }
            for (child, parent) in scan.children {
                entries.push(CatalogEntry::Child {
                    session: session.clone(),
                    child,
                    parent,
                    t: scan.last,
                });
            }
            if scan.clean {
                let bytes = fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                entries.push(CatalogEntry::Close {
                    segment,
                    records: scan.records,
                    bytes,
                    turns: scan.turns,
                    t: scan.last,
                });
            }
        }
    }
    Ok(entries)
}

/// What reading a whole segment tells about it.
pub(super) struct SegmentScan {
    pub(super) records: u64,
    pub(super) turns: u64,
    pub(super) last: i64,
    title: Option<String>,
    /// The first line of its first prompt.
    prompt: Option<String>,
    /// The last name the agent took (`_session/rename`).
    name: Option<String>,
    /// The last archive state the agent took (`_session/archive`/`unarchive`).
    archived: Option<bool>,
    aliases: Vec<String>,
    /// The child sessions announced (child, the session that announced it), in order.
    children: Vec<(String, String)>,
    clean: bool,
}

impl SegmentScan {
    /// Read the rest of a segment whose header `reader` has read.
    pub(super) fn of(mut reader: SegmentReader<fs::File>) -> SegmentScan {
        let session = reader.header().session.clone().unwrap_or_default();
        let mut scan = SegmentScan {
            records: 0,
            turns: 0,
            last: reader.header().started,
            title: None,
            prompt: None,
            name: None,
            archived: None,
            aliases: vec![],
            children: vec![],
            clean: false,
        };
        // The session and its children: a child's lines are in its root's segments.
        let mut tree: HashSet<String> = HashSet::from([session.clone()]);
        // Session-index requests the client sent, by id: applied once the agent answers.
        let mut asks: HashMap<String, serde_json::Value> = HashMap::new();
        for record in reader.by_ref() {
            scan.last = scan.last.max(record.unix_us);
            match &record.body {
                Body::Event(Event::SegmentEnd { .. }) => continue,
                Body::Event(Event::SessionMapped { agent_session }) => {
                    scan.aliases.push(agent_session.clone());
                }
                Body::Message { from, payload } if !payload.proxy => {
                    let finder =
                        |needle: &[u8]| memchr::memmem::find(&payload.bytes, needle).is_some();
                    if crate::wire::envelope::is_prompt_turn(*from, false, &payload.bytes) {
                        scan.turns += 1;
                        if scan.prompt.is_none() {
                            let msg: serde_json::Value =
                                serde_json::from_slice(&payload.bytes).unwrap_or_default();
                            scan.prompt = crate::acp::prompt_title(&msg["params"]["prompt"]);
                        }
                    }
                    if *from == Side::Client && finder(b"\"_session/") {
                        let msg: serde_json::Value =
                            serde_json::from_slice(&payload.bytes).unwrap_or_default();
                        if msg["method"]
                            .as_str()
                            .is_some_and(|m| m.starts_with("_session/"))
                        {
                            asks.insert(msg["id"].to_string(), msg);
                        }
                    }
                    if *from == Side::Agent && !asks.is_empty() && finder(b"\"result\"") {
                        let msg: serde_json::Value =
                            serde_json::from_slice(&payload.bytes).unwrap_or_default();
                        if let Some(ask) = asks.remove(&msg["id"].to_string())
                            && msg.get("result").is_some()
                        {
                            match ask["method"].as_str() {
                                Some("_session/rename") => {
                                    scan.name = ask["params"]["title"].as_str().map(str::to_string);
                                }
                                Some("_session/archive") => scan.archived = Some(true),
                                Some("_session/unarchive") => scan.archived = Some(false),
                                _ => {}
                            }
                        }
                    }
                    if *from == Side::Agent && finder(b"\"session_info_update\"") {
                        let msg: serde_json::Value =
                            serde_json::from_slice(&payload.bytes).unwrap_or_default();
                        // A child's title is not the session's.
                        // Nor is one the agent made of a re-prime.
                        if let Some(title) = msg["params"]["update"]["title"].as_str()
                            && msg["params"]["sessionId"] == session.as_str()
                            && !crate::acp::is_reprime_title(title)
                        {
                            scan.title = Some(title.to_string());
                        }
                    }
                    if *from == Side::Agent && crate::acp::subagents::may_name_child(&payload.bytes)
                    {
                        let msg: serde_json::Value =
                            serde_json::from_slice(&payload.bytes).unwrap_or_default();
                        let parent = msg["params"]["sessionId"].as_str().unwrap_or_default();
                        if let Some(child) =
                            crate::acp::subagents::child_update(&msg["params"]["update"])
                            && tree.contains(parent)
                            && tree.insert(child.child.to_string())
                        {
                            scan.children
                                .push((child.child.to_string(), parent.to_string()));
                        }
                    }
                }
                _ => {}
            }
            scan.records += 1;
        }
        scan.clean = reader.tail() == Some(&Tail::Clean);
        scan
    }
}
