//! A client's message as the core takes it, one line ([`message_line`]; refused: [`Invalid`]),
//! and a line of the core's as one message back ([`message_of`]).

use bytes::Bytes;

/// Why a client's message is refused.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Invalid {
    /// Not JSON (JSON-RPC -32700).
    Parse,
    /// JSON, but not one JSON-RPC object: a batch, a scalar (-32600).
    NotAnObject,
}

impl Invalid {
    /// The JSON-RPC error a client gets for it (`id` null: the message had none we can trust).
    pub(super) fn error_json(&self) -> String {
        let (code, message) = match self {
            Invalid::Parse => (-32700, "Parse error: not JSON"),
            Invalid::NotAnObject => (
                -32600,
                "Invalid Request: one JSON-RPC object per message (no batches)",
            ),
        };
        serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}})
            .to_string()
    }
}

/// A client's message as the core takes it: one line. The bytes pass as sent, except that line
/// breaks (whitespace between JSON tokens: a JSON string cannot hold one raw) become spaces, and
/// a newline ends the line.
pub(super) fn message_line(body: &[u8]) -> Result<Bytes, Invalid> {
    let body = body.trim_ascii();
    if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_err() {
        return Err(Invalid::Parse);
    }
    if body.first() != Some(&b'{') {
        return Err(Invalid::NotAnObject);
    }
    let mut line = Vec::with_capacity(body.len() + 1);
    line.extend(body.iter().map(|&b| match b {
        b'\n' | b'\r' => b' ',
        b => b,
    }));
    line.push(b'\n');
    Ok(Bytes::from(line))
}

/// A line the core sent, as one message (its line break off).
pub(super) fn message_of(line: &Bytes) -> Bytes {
    let mut message = line.clone();
    while message.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        message.truncate(message.len() - 1);
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_becomes_one_line_with_its_bytes_kept() {
        let pretty = b" {\n  \"jsonrpc\": \"2.0\",\r\n  \"method\": \"x\", \"params\": {\"t\": \"a\\nb\"}\n}\n";
        let line = message_line(pretty).unwrap();
        assert_eq!(
            &line[..],
            b"{   \"jsonrpc\": \"2.0\",    \"method\": \"x\", \"params\": {\"t\": \"a\\nb\"} }\n"
        );
        let compact = br#"{"jsonrpc":"2.0","id":1,"method":"m"}"#;
        assert_eq!(&message_line(compact).unwrap()[..compact.len()], compact);
        assert_eq!(message_of(&line).last(), Some(&b'}'));
    }

    #[test]
    fn garbage_batches_and_scalars_are_refused() {
        assert_eq!(message_line(b"not json"), Err(Invalid::Parse));
        assert_eq!(message_line(b"{\"a\":"), Err(Invalid::Parse));
        assert_eq!(message_line(b""), Err(Invalid::Parse));
        assert_eq!(
            message_line(b"[{\"jsonrpc\":\"2.0\"}]"),
            Err(Invalid::NotAnObject)
        );
        assert_eq!(message_line(b"42"), Err(Invalid::NotAnObject));
        let error: serde_json::Value = serde_json::from_str(&Invalid::Parse.error_json()).unwrap();
        assert_eq!(error["error"]["code"], -32700);
        assert!(error["id"].is_null());
    }
}
