//! A fork: a new session in the journal directory whose history is another session's, up to a turn.
//!
//! The fork is one closed session segment in its own directory, made whole before it gets its
//! name ([`JournalDir::create_segment_writer`]): the parent's first header (with the fork's session
//! ID, a run of its own and no connection), a `forked_from` event, then the parent's records
//! across its segments in order, cut before the first prompt turn past the fork point. Every
//! message naming the parent in `params.sessionId` (or a `session/new` answer's
//! `result.sessionId`) names the fork instead, edited without re-encoding the rest of the line,
//! so a `session/load` of the fork replays under its own ID. Records are renumbered 1..N. What
//! belongs to the parent's runs rather than its history is left out: end markers, the
//! agent-side session the parent was continued on (`session_mapped`: the fork is brought up on
//! a fresh agent session and re-primed with its turns), agent stderr, and an earlier
//! `forked_from` or `bundle_manifest`. The parent's files are only read.
//!
//! Two streamed passes over the parent (the first finds the cut), so memory stays flat
//! whatever the session's length.

use std::path::{Path, PathBuf};

use anyhow::Context;
use bytes::Bytes;
use serde_json::Value;

use crate::catalog::{Catalog, CatalogEntry};
use crate::journal::dir::{run_id, segments_in};
use crate::journal::format::Encoding;
use crate::journal::reader::is_end_marker;
use crate::journal::writer::SegmentStats;
use crate::journal::{
    Body, Event, Header, JournalDir, Payload, Record, SegmentKind, SegmentReader,
};
use crate::proto::history::MadeUpIds;
use crate::replay::bundle::is_prompt_turn;
use crate::wire::Side;
use crate::wire::rewrite::{RawObject, edit_line, json_string};

/// Where a fork ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ForkPoint {
    /// The whole history.
    All,
    /// Prompt turns 1..=n (a turn: a client `session/prompt` and everything until the next).
    Turns(u64),
    /// Through the end of the turn holding a user or agent message chunk with this
    /// `messageId` (also a prompt's own `messageId`, its answer's `userMessageId`, and the
    /// `acpj-user-<seq>` IDs the journal's replays give prompts).
    Message(String),
}

/// What a fork holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForkReport {
    /// Prompt turns kept.
    pub turns: u64,
    /// Records written: the `forked_from` event and the parent's records kept (the end marker
    /// not counted).
    pub records: u64,
    /// The session's working directory, when known.
    pub cwd: Option<String>,
}

/// Records staged between flushes to the file.
const FLUSH_EVERY: u64 = 256;

/// Create session `fork_id` in `journals` holding session `parent`'s history up to `point`, with
/// its segment and catalog entries stamped `unix_us`.
///
/// # Errors
/// `parent` unknown, `fork_id` taken (or empty, or `parent` itself), the fork point past the
/// history (or a message not found), a parent segment that cannot be read, or the fork that
/// cannot be written (nothing of it is left then).
pub fn fork_session(
    journals: &JournalDir,
    parent: &str,
    point: ForkPoint,
    fork_id: &str,
    unix_us: i64,
) -> anyhow::Result<ForkReport> {
    if fork_id.is_empty() {
        anyhow::bail!("the fork needs a session ID");
    }
    if fork_id == parent {
        anyhow::bail!("a fork needs an ID of its own, not its parent's {parent:?}");
    }
    let root = journals.root().display();
    let sessions = journals
        .sessions_with(false)
        .with_context(|| format!("reading the catalog of {root}"))?;
    let segments = segments_in(&journals.session_dir(parent)).unwrap_or_default();
    if segments.is_empty() {
        anyhow::bail!("no session {parent:?} in {root} (see `acp-journal list`)");
    }
    if sessions.iter().any(|s| s.session == fork_id)
        || !segments_in(&journals.session_dir(fork_id))
            .unwrap_or_default()
            .is_empty()
    {
        anyhow::bail!("session {fork_id:?} already exists in {root}; pick another ID");
    }
    let summary = sessions.iter().find(|s| s.session == parent);

    let scan = scan(&segments, &point)?;
    let keep = match &point {
        ForkPoint::All => scan.turns,
        ForkPoint::Turns(n) if *n > scan.turns => anyhow::bail!(
            "session {parent:?} has {} prompt turn(s); cannot fork at turn {n}",
            scan.turns
        ),
        ForkPoint::Turns(n) => *n,
        ForkPoint::Message(id) => scan
            .message_turn
            .with_context(|| format!("no user or agent message {id:?} in session {parent:?}"))?,
    };

    let mut header = scan.header;
    let cwd = summary
        .and_then(|s| s.cwd.clone())
        .or_else(|| header.cwd.clone());
    let agent = summary
        .and_then(|s| s.agent.clone())
        .unwrap_or_else(|| header.argv.join(" "));
    header.session = Some(fork_id.to_string());
    header.run = run_id(unix_us, std::process::id());
    header.proxy = concat!("acp-journal ", env!("CARGO_PKG_VERSION")).into();
    header.started = unix_us;
    header.pid = std::process::id();
    header.connection = None;

    journals
        .create_dirs()
        .with_context(|| format!("creating the journal directory {root}"))?;
    let dir = journals.session_dir(fork_id);
    let writer = journals
        .create_segment_writer(&dir, &header.run, &header)
        .with_context(|| format!("creating the fork's journal in {}", dir.display()))?;
    let path = writer.path().to_path_buf();
    let writing = Writing {
        parent,
        fork_id,
        keep,
        message: match &point {
            ForkPoint::Message(id) => Some(id.clone()),
            _ => None,
        },
        unix_us,
    };
    let (stats, title) = match writing.write(writer, &segments) {
        Ok(done) => done,
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            let _ = std::fs::remove_dir(&dir);
            return Err(e.context(format!("writing {}", path.display())));
        }
    };

    let segment = journals.relative(&path);
    let mut entries = vec![CatalogEntry::Open {
        session: fork_id.to_string(),
        segment: segment.clone(),
        cwd: cwd.clone(),
        agent: Some(agent),
        agent_name: summary.and_then(|s| s.agent_name.clone()),
        git_branch: summary.and_then(|s| s.git_branch.clone()),
        t: unix_us,
        agent_info: None,
    }];
    // The fork keeps the parent's first prompt when it keeps a turn.
    if let Some(title) = summary.and_then(|s| s.prompt.clone()).filter(|_| keep > 0) {
        entries.push(CatalogEntry::Prompt {
            session: fork_id.to_string(),
            title,
            t: unix_us,
        });
    }
    if title.is_some() {
        entries.push(CatalogEntry::Info {
            session: fork_id.to_string(),
            title,
            updated_at: None,
            t: unix_us,
        });
    }
    entries.push(CatalogEntry::Close {
        segment,
        records: stats.records,
        bytes: stats.file_bytes,
        turns: keep,
        t: unix_us,
    });
    for entry in &entries {
        journals
            .append_catalog(entry)
            .with_context(|| format!("updating the catalog of {root}"))?;
    }
    Ok(ForkReport {
        turns: keep,
        records: stats.records,
        cwd,
    })
}

/// What the first pass learns.
struct Scan {
    /// The first segment's header.
    header: Header,
    /// Prompt turns in the whole history.
    turns: u64,
    /// The turn holding the message sought (0: before the first prompt).
    message_turn: Option<u64>,
}

fn open(path: &Path) -> anyhow::Result<SegmentReader<std::fs::File>> {
    let reader =
        SegmentReader::open(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if reader.header().kind != SegmentKind::Session {
        anyhow::bail!("{}: not a session journal", path.display());
    }
    Ok(reader)
}

/// First pass: count the turns and find the message's.
fn scan(segments: &[PathBuf], point: &ForkPoint) -> anyhow::Result<Scan> {
    let wanted = match point {
        ForkPoint::Message(id) => Some((id.as_str(), json_string(id))),
        _ => None,
    };
    let mut first: Option<Header> = None;
    let mut turns = 0;
    let mut message_turn = None;
    // The replay's made-up IDs, to find a prompt by the ID a client was given for it.
    let mut ids = MadeUpIds::default();
    for path in segments {
        let mut reader = open(path)?;
        first.get_or_insert_with(|| reader.header().clone());
        for record in reader.by_ref() {
            ids.see(record.seq);
            let prompt = is_prompt_turn(&record);
            if prompt {
                turns += 1;
            }
            if let Some((id, quoted)) = &wanted
                && message_turn.is_none()
                && ((prompt && *id == ids.made("user", record.seq))
                    || names_message(&record, id, quoted.as_bytes()))
            {
                message_turn = Some(turns);
            }
        }
    }
    Ok(Scan {
        header: first.context("the parent has no segment")?,
        turns,
        message_turn,
    })
}

/// Whether a record is a user or agent message chunk with `messageId` `id` (`quoted`: as a
/// JSON string), a prompt with that `messageId`, or a prompt's answer with that
/// `userMessageId`.
fn names_message(record: &Record, id: &str, quoted: &[u8]) -> bool {
    let Body::Message { from, payload } = &record.body else {
        return false;
    };
    if memchr::memmem::find(&payload.bytes, quoted).is_none() {
        return false;
    }
    let Ok(msg) = serde_json::from_slice::<Value>(&payload.bytes) else {
        return false;
    };
    match from {
        Side::Agent => {
            let update = &msg["params"]["update"];
            (msg["method"] == "session/update"
                && matches!(
                    update["sessionUpdate"].as_str(),
                    Some("user_message_chunk" | "agent_message_chunk")
                )
                && update["messageId"] == id)
                || msg["result"]["userMessageId"] == id
        }
        Side::Client => msg["method"] == "session/prompt" && msg["params"]["messageId"] == id,
    }
}

/// Second pass: what to copy and how.
struct Writing<'a> {
    parent: &'a str,
    fork_id: &'a str,
    keep: u64,
    message: Option<String>,
    unix_us: i64,
}

impl Writing<'_> {
    /// Write the fork's records and close it; returns its statistics and the last title an
    /// agent gave the kept history.
    fn write(
        &self,
        mut writer: crate::journal::SegmentWriter,
        segments: &[PathBuf],
    ) -> anyhow::Result<(SegmentStats, Option<String>)> {
        writer.append(&Record {
            seq: 0,
            unix_us: self.unix_us,
            mono_us: 0,
            body: Body::Event(Event::ForkedFrom {
                parent: self.parent.to_string(),
                turns: self.keep,
                message: self.message.clone(),
            }),
        })?;
        let quoted = json_string(self.parent);
        let (mut seq, mut turns, mut title) = (0u64, 0u64, None);
        'segments: for path in segments {
            for mut record in open(path)? {
                if skipped(&record) {
                    continue;
                }
                if is_prompt_turn(&record) {
                    turns += 1;
                    if turns > self.keep {
                        break 'segments;
                    }
                }
                if let Body::Message { from, payload } = &mut record.body {
                    if *from == Side::Agent
                        && let Some(t) = title_of(payload)
                    {
                        title = Some(t);
                    }
                    if memchr::memmem::find(&payload.bytes, quoted.as_bytes()).is_some()
                        && let Some(line) = self.renamed(payload)
                    {
                        payload.bytes = line;
                    }
                }
                seq += 1;
                record.seq = seq;
                writer.append(&record)?;
                if seq % FLUSH_EVERY == 0 {
                    writer.flush()?;
                }
            }
        }
        let stats = writer.close(seq + 1, self.unix_us, 0)?;
        Ok((stats, title))
    }

    /// The line with the parent's ID in `params.sessionId` and `result.sessionId` replaced by
    /// the fork's (`None`: nothing to replace).
    fn renamed(&self, payload: &Payload) -> Option<Bytes> {
        if payload.encoding != Encoding::Json {
            return None;
        }
        let is_parent = |raw: &str| serde_json::from_str::<&str>(raw).ok() == Some(self.parent);
        let mut changed = false;
        let line = edit_line(&payload.bytes, |msg| {
            for key in ["params", "result"] {
                let Some(mut inner) = msg.get(key).and_then(RawObject::parse) else {
                    continue;
                };
                if inner.get("sessionId").is_some_and(is_parent) {
                    inner.set("sessionId", json_string(self.fork_id));
                    msg.set(key, inner.to_json());
                    changed = true;
                }
            }
        })?;
        changed.then(|| Bytes::from(line))
    }
}

/// Records of the parent's runs rather than its history.
fn skipped(record: &Record) -> bool {
    is_end_marker(record)
        || matches!(
            &record.body,
            Body::Stderr(_)
                | Body::Event(
                    Event::SessionMapped { .. }
                        | Event::ForkedFrom { .. }
                        | Event::BundleManifest { .. }
                )
        )
}

/// The title a `session_info_update` sets.
fn title_of(payload: &Payload) -> Option<String> {
    memchr::memmem::find(&payload.bytes, b"\"session_info_update\"")?;
    let msg: Value = serde_json::from_slice(&payload.bytes).ok()?;
    msg["params"]["update"]["title"]
        .as_str()
        .filter(|t| !crate::acp::is_reprime_title(t))
        .map(str::to_string)
}

#[cfg(test)]
mod tests;
