//! The lines the connections' bookkeeping makes (the proxy's notifications) and what it reads
//! of an agent request's line (the terminal it names).

use bytes::Bytes;
use serde_json::{Value, json};

use crate::wire::envelope;

/// A notification line of the proxy's.
pub(super) fn notification_line(method: &str, params: Value) -> Bytes {
    let mut line = json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string();
    line.push('\n');
    Bytes::from(line)
}

/// The `terminalId` an agent request names.
pub(super) fn terminal_of(line: &[u8]) -> Option<String> {
    memchr::memmem::find(line, b"\"terminalId\"")?;
    envelope::str_field(envelope::peek(line).params, "terminalId")
}
