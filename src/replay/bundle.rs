//! A bundle: one session as a single, redacted, self-contained journal file to attach to a bug.
//!
//! It is an ordinary session segment (so `show`, `export`, `replay`, `rerun` and `diff` read it
//! like any journal) whose first record is a `bundle_manifest` event: the agent and client names
//! and versions, the OS, the proxy version, the turns kept, what was redacted and what was left
//! out. The header keeps the recorded `initialize` exchange. Every message is redacted again with
//! the journal's rules, whatever the recording's settings were.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::{Value, json};

use crate::journal::format::FORMAT_VERSION;
use crate::journal::reader::is_end_marker;
use crate::journal::{Body, Event, Header, Record, SegmentKind, SegmentReader, SegmentWriter};
use crate::redact::{self, REDACTED};
use crate::wire::envelope;

/// What to put in a bundle.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Keep prompt turns up to this one (1-based); all when `None`.
    pub upto_turn: Option<usize>,
    /// Include the agent's stderr from the same runs.
    pub include_stderr: bool,
}

/// What a bundle holds, as written into its manifest.
#[derive(Clone, Debug)]
pub struct Report {
    /// The manifest (JSON).
    pub manifest: Value,
    /// Records written (manifest included).
    pub records: u64,
}

/// Where a redaction marker is in a message, as `method path` lines.
fn redacted_paths(value: &Value, path: &str, out: &mut Vec<String>) {
    match value {
        Value::String(s) if s.contains(REDACTED) => out.push(path.to_string()),
        Value::Object(map) => {
            for (k, v) in map {
                let sub = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                redacted_paths(v, &sub, out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                redacted_paths(v, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Collects the records of a bundle and what the manifest says about them.
#[derive(Default)]
struct Collected {
    records: Vec<Record>,
    turns: usize,
    turns_recorded: usize,
    redacted: Vec<String>,
    dropped: Vec<String>,
    stderr_records: usize,
}

impl Collected {
    fn keep(&mut self, mut record: Record) {
        redact::redact_record(&mut record);
        match &record.body {
            Body::Message { payload, .. } => {
                if memchr::memmem::find(&payload.bytes, REDACTED.as_bytes()).is_some()
                    && let Ok(v) = serde_json::from_slice::<Value>(&payload.bytes)
                {
                    let what = v["method"]
                        .as_str()
                        .map_or_else(|| format!("response {}", v["id"]), str::to_string);
                    let mut paths = Vec::new();
                    redacted_paths(&v, "", &mut paths);
                    for p in paths {
                        self.redacted
                            .push(format!("record {}: {what}: {p}", record.seq));
                    }
                }
            }
            Body::Stderr(text) => {
                self.stderr_records += 1;
                if memchr::memmem::find(text, REDACTED.as_bytes()).is_some() {
                    self.redacted
                        .push(format!("record {}: agent stderr", record.seq));
                }
            }
            Body::Event(_) => {}
        }
        self.records.push(record);
    }
}

/// Stderr records of the connection segment named in `header` (in the store at `root`) up to
/// record `last` of the run (its start-up output included); an error says why they cannot be read.
fn stderr_of(root: &Path, header: &Header, last: u64) -> Result<Vec<Record>, String> {
    let Some(connection) = header.connection.as_ref() else {
        return Ok(Vec::new());
    };
    let path = root.join(connection);
    let mut reader = SegmentReader::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(reader
        .by_ref()
        .filter(|r| matches!(r.body, Body::Stderr(_)) && r.seq <= last)
        .collect())
}

/// Write the bundle of a session's `segments` (oldest first, in the store at `root`) to `out`,
/// which must not exist.
///
/// # Errors
/// A segment that cannot be read, or the output that cannot be written.
pub fn write(
    root: &Path,
    segments: &[PathBuf],
    out: &Path,
    options: &Options,
) -> anyhow::Result<Report> {
    let mut collected = Collected::default();
    let mut first: Option<Header> = None;
    let mut stopped = false;
    for path in segments {
        let mut reader =
            SegmentReader::open(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let header = reader.header().clone();
        if header.kind != SegmentKind::Session {
            anyhow::bail!("{}: not a session journal", path.display());
        }
        let mut run: Vec<Record> = Vec::new();
        for record in reader.by_ref().filter(|r| !is_end_marker(r)) {
            if let Body::Event(Event::BundleManifest { .. }) = &record.body {
                continue;
            }
            if is_prompt_turn(&record) {
                collected.turns_recorded += 1;
                if options
                    .upto_turn
                    .is_some_and(|n| collected.turns_recorded > n)
                {
                    stopped = true;
                }
            }
            if !stopped {
                run.push(record);
            }
        }
        if let Some(tail) = reader.tail()
            && tail.is_damaged()
        {
            collected.dropped.push(format!(
                "{}: {tail}",
                path.file_name().unwrap_or_default().to_string_lossy()
            ));
        }
        if options.include_stderr
            && let Some(last) = run.last()
        {
            match stderr_of(root, &header, last.seq) {
                Ok(stderr) => run.extend(stderr),
                Err(e) => collected
                    .dropped
                    .push(format!("agent stderr of a run: {e}")),
            }
            run.sort_by_key(|r| r.seq);
        }
        for record in run {
            collected.keep(record);
        }
        first.get_or_insert(header);
    }
    let Some(mut header) = first else {
        anyhow::bail!("nothing to bundle");
    };
    collected.turns = collected
        .records
        .iter()
        .filter(|r| is_prompt_turn(r))
        .count();
    if collected.turns < collected.turns_recorded {
        let (from, to) = (collected.turns + 1, collected.turns_recorded);
        let which = if from == to {
            format!("turn {from}")
        } else {
            format!("turns {from}–{to}")
        };
        collected
            .dropped
            .push(format!("{which} (--upto-turn {})", collected.turns));
    }
    if !options.include_stderr {
        collected
            .dropped
            .push("agent stderr (add --include-stderr to keep it)".into());
    }
    let clock = jiff::Timestamp::now();
    let now = clock.as_microsecond();
    let manifest = manifest(&header, segments.len(), &collected, clock);
    header.acpj = FORMAT_VERSION;
    header.run = format!("bundle-{}", clock.strftime("%Y%m%dT%H%M%SZ"));
    header.proxy = concat!("acp-journal ", env!("CARGO_PKG_VERSION")).into();
    header.pid = std::process::id();
    header.connection = None;
    header.argv = redact::redact_argv(&header.argv);
    let mut writer = SegmentWriter::create(out, &header)
        .with_context(|| format!("creating {} (it must not exist)", out.display()))?;
    writer.append(&Record {
        seq: 0,
        unix_us: now,
        mono_us: 0,
        body: Body::Event(Event::BundleManifest {
            manifest: manifest.clone(),
        }),
    })?;
    let mut last = 0;
    for record in &collected.records {
        writer.append(record)?;
        last = last.max(record.seq);
    }
    let written = writer.close(last + 1, now, 0)?;
    Ok(Report {
        manifest,
        records: written.records,
    })
}

fn manifest(header: &Header, runs: usize, c: &Collected, created: jiff::Timestamp) -> Value {
    let init = header.initialize.as_ref();
    let request = init.and_then(|i| i.request_value()).unwrap_or_default();
    let response = init.and_then(|i| i.response_value()).unwrap_or_default();
    json!({
        "bundle": 1,
        "created": created.to_string(),
        "bundled_by": concat!("acp-journal ", env!("CARGO_PKG_VERSION")),
        "recorded_by": header.proxy,
        "os": format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH),
        "session": header.session,
        "cwd": header.cwd,
        "agent": response["result"]["agentInfo"],
        "agent_command": redact::redact_argv(&header.argv),
        "client": request["params"]["clientInfo"],
        "protocol_version": response["result"]["protocolVersion"],
        "runs": runs,
        "turns": c.turns,
        "turns_recorded": c.turns_recorded,
        "stderr_records": c.stderr_records,
        "redacted": c.redacted,
        "dropped": c.dropped,
    })
}

/// Whether a record is a prompt turn the client sent ([`envelope::is_prompt_turn`]).
pub(crate) fn is_prompt_turn(record: &Record) -> bool {
    matches!(&record.body, Body::Message { from, payload }
        if envelope::is_prompt_turn(*from, payload.proxy, &payload.bytes))
}
