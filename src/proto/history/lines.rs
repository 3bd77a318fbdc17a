//! The lines a replay writes: a `session/update` notification of a session, and a recorded
//! line as it was.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::journal::format::{Body, Record};

/// A `session/update` notification of `session`.
pub(super) fn notification(session: &str, update: Value) -> Bytes {
    let msg = json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": update}});
    let mut line = serde_json::to_vec(&msg).expect("a Value serializes");
    line.push(b'\n');
    Bytes::from(line)
}

/// The recorded line itself, byte for byte.
pub(super) fn verbatim(record: &Record) -> Bytes {
    let Body::Message { payload, .. } = &record.body else {
        return Bytes::new();
    };
    let mut line = Vec::with_capacity(payload.bytes.len() + 1);
    line.extend_from_slice(&payload.bytes);
    line.push(b'\n');
    Bytes::from(line)
}
