//! The few edits the proxy makes to messages, done without re-encoding what it does not change.
//!
//! A JSON object is split into its members with their values kept as raw text ([`RawObject`]);
//! only the members being edited are replaced, the others are written back byte for byte in
//! their original order. Whitespace between members is not kept (ACP lines are compact JSON).
//!
//! ```text
//! before: {"jsonrpc":"2.0","id":3,"result":{"protocolVersion":1,"agentCapabilities":{"promptCapabilities":{"image":true}}}}
//! after:  {"jsonrpc":"2.0","id":3,"result":{"protocolVersion":1,"agentCapabilities":{"promptCapabilities":{"image":true},"loadSession":true,"sessionCapabilities":{"list":{}}}}}
//! ```

use serde::de::{MapAccess, Visitor};
use serde_json::value::RawValue;

/// A JSON object as an ordered list of members with raw values.
#[derive(Debug, Default)]
pub struct RawObject {
    members: Vec<(String, String)>,
}

impl RawObject {
    /// Split raw JSON into members; `None` if it is not an object.
    pub fn parse(raw: &str) -> Option<RawObject> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Vec<(String, String)>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value: &RawValue = map.next_value()?;
                    members.push((key, value.get().to_string()));
                }
                Ok(members)
            }
        }
        let raw = raw.trim();
        if !raw.starts_with('{') {
            return None;
        }
        let mut de = serde_json::Deserializer::from_str(raw);
        let members = serde::Deserializer::deserialize_map(&mut de, V).ok()?;
        de.end().ok()?;
        Some(RawObject { members })
    }

    /// The raw value of a member.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.members
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Set a member to raw JSON `value` (replacing it in place, or appending it).
    pub fn set(&mut self, key: &str, value: String) {
        match self.members.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = value,
            None => self.members.push((key.to_string(), value)),
        }
    }

    /// Remove member `key`, if it is there.
    pub fn remove(&mut self, key: &str) {
        self.members.retain(|(k, _)| k != key);
    }

    /// Edit the object member `key` (created as `{}` when absent or not an object).
    pub fn edit(&mut self, key: &str, f: impl FnOnce(&mut RawObject)) {
        let mut inner = self.get(key).and_then(RawObject::parse).unwrap_or_default();
        f(&mut inner);
        self.set(key, inner.to_json());
    }

    /// Compact JSON text.
    pub fn to_json(&self) -> String {
        let mut out = String::from("{");
        for (i, (k, v)) in self.members.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&serde_json::to_string(k).expect("a string serializes"));
            out.push(':');
            out.push_str(v);
        }
        out.push('}');
        out
    }
}

/// Edit a whole line (a JSON object, with or without its line ending); returns the new line
/// with the same line ending, or `None` when the line is not an object.
pub fn edit_line(line: &[u8], f: impl FnOnce(&mut RawObject)) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(line).ok()?;
    let body = text.trim_end_matches(['\r', '\n']);
    let ending = &text[body.len()..];
    let mut object = RawObject::parse(body)?;
    f(&mut object);
    let mut out = object.to_json().into_bytes();
    out.extend_from_slice(ending.as_bytes());
    Some(out)
}

/// A JSON string literal.
pub fn json_string(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untouched_members_keep_their_bytes_and_order() {
        let line = b"{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"x\":\"\\u00e9\",\"n\":1.50,\"sessionId\":\"U\"}}\r\n";
        let out = edit_line(line, |o| {
            o.edit("result", |r| r.set("sessionId", json_string("S")));
        })
        .unwrap();
        assert_eq!(
            out,
            b"{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"x\":\"\\u00e9\",\"n\":1.50,\"sessionId\":\"S\"}}\r\n"
        );
    }

    #[test]
    fn missing_objects_are_created() {
        let out = edit_line(br#"{"result":{}}"#, |o| {
            o.edit("result", |r| {
                r.edit("agentCapabilities", |c| {
                    c.set("loadSession", "true".into());
                    c.edit("sessionCapabilities", |s| s.set("list", "{}".into()));
                })
            })
        })
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"result":{"agentCapabilities":{"loadSession":true,"sessionCapabilities":{"list":{}}}}}"#
        );
        assert!(edit_line(b"[1]", |_| {}).is_none());
        assert!(edit_line(b"{\"a\":1} x", |_| {}).is_none());
    }
}
