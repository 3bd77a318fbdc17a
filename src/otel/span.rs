//! A span as the exporters take it ([`Span`]: its attributes, events and status), and its IDs
//! ([`SpanContext`]), hashed from what both the live exporter and a later export know of a turn
//! ([`turn_ids`], [`prompt_ids`]) and of what happened in it ([`tool_span_id`],
//! [`child_span_id`]).

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::hex;
use crate::journal::{Body, Record};
use crate::wire::Side;

/// A trace ID (16 bytes) and span ID (8 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SpanContext {
    /// The trace.
    pub trace_id: [u8; 16],
    /// The span.
    pub span_id: [u8; 8],
}

impl SpanContext {
    /// The W3C `traceparent` value naming this span as parent (sampled).
    pub fn traceparent(&self) -> String {
        format!(
            "00-{}-{}-01",
            hex::encode(self.trace_id),
            hex::encode(self.span_id)
        )
    }
}

fn digest(parts: &[&[u8]]) -> [u8; 32] {
    let mut hash = Sha256::new();
    hash.update(b"acp-journal/otel/v1");
    for part in parts {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    hash.finalize().into()
}

/// All-zero IDs are invalid in OTLP; a hash that gives one is nudged.
fn nonzero<const N: usize>(mut id: [u8; N]) -> [u8; N] {
    if id.iter().all(|b| *b == 0) {
        id[N - 1] = 1;
    }
    id
}

/// The IDs of a turn's `invoke_agent` span: a hash of the client-facing `session`, the
/// prompt record's `unix_us` and the prompt's JSON-RPC `id` (as JSON text, e.g. `5` or `"a"`).
pub fn turn_ids(session: &str, prompt_unix_us: i64, id: &str) -> SpanContext {
    let d = digest(&[
        session.as_bytes(),
        &prompt_unix_us.to_le_bytes(),
        id.as_bytes(),
    ]);
    SpanContext {
        trace_id: nonzero(d[..16].try_into().expect("16 bytes")),
        span_id: nonzero(d[16..24].try_into().expect("8 bytes")),
    }
}

/// The span ID of subagent `child` (its session ID) started under span `parent`.
pub fn child_span_id(parent: &SpanContext, child: &str) -> [u8; 8] {
    let d = digest(&[
        &parent.trace_id,
        &parent.span_id,
        b"subagent",
        child.as_bytes(),
    ]);
    nonzero(d[..8].try_into().expect("8 bytes"))
}

/// The span ID of tool call `tool_call_id` in the turn `turn`.
pub fn tool_span_id(turn: &SpanContext, tool_call_id: &str) -> [u8; 8] {
    let d = digest(&[&turn.trace_id, &turn.span_id, tool_call_id.as_bytes()]);
    nonzero(d[..8].try_into().expect("8 bytes"))
}

/// The turn IDs of a client `session/prompt` record of `session`, else `None`.
pub fn prompt_ids(session: &str, record: &Record) -> Option<SpanContext> {
    let Body::Message {
        from: Side::Client,
        payload,
    } = &record.body
    else {
        return None;
    };
    let msg: Value = serde_json::from_slice(&payload.bytes).ok()?;
    (msg["method"] == "session/prompt")
        .then(|| turn_ids(session, record.unix_us, &msg["id"].to_string()))
}

/// An attribute value.
#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    /// A string.
    Str(String),
    /// An integer.
    Int(i64),
    /// A float.
    Double(f64),
    /// An array of strings.
    StrArray(Vec<String>),
}

/// Attributes, in the order set.
pub type Attributes = Vec<(String, AttrValue)>;

/// OTLP span kinds used here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    /// `SPAN_KIND_INTERNAL` (1).
    Internal = 1,
    /// `SPAN_KIND_CLIENT` (3).
    Client = 3,
}

/// A span's status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Not set (`STATUS_CODE_UNSET`).
    Unset,
    /// Failed (`STATUS_CODE_ERROR`) with a message.
    Error(String),
}

/// A span event.
#[derive(Clone, Debug, PartialEq)]
pub struct SpanEvent {
    /// Unix nanoseconds.
    pub time_ns: u64,
    /// Its name (`acp.permission`, `acp.plan`, `acp.mode`, `acp.cancel`, `acp.proxy`).
    pub name: String,
    /// Its attributes.
    pub attributes: Attributes,
}

/// A finished span.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    /// Trace and span IDs.
    pub context: SpanContext,
    /// The parent span (in the same trace).
    pub parent: Option<[u8; 8]>,
    /// `invoke_agent {agent}` or `execute_tool {title}`.
    pub name: String,
    /// Its kind.
    pub kind: SpanKind,
    /// Unix nanoseconds.
    pub start_ns: u64,
    /// Unix nanoseconds.
    pub end_ns: u64,
    /// Its attributes.
    pub attributes: Attributes,
    /// Its events.
    pub events: Vec<SpanEvent>,
    /// Its status.
    pub status: Status,
}

impl Span {
    /// The value of attribute `key`.
    pub fn attr(&self, key: &str) -> Option<&AttrValue> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }
}
