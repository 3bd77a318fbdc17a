//! A fast look at the commonest message of a session: a `session/update` carrying a message,
//! thought or user chunk. The timeline would parse it into a [`serde_json::Value`] (a map per
//! object, a string per key and value) to read two strings; this reads them without building
//! anything.
//!
//! Exact: every byte of the line goes through the same serde_json parsing a `Value` gets
//! (`deserialize_any`: strings unescaped and UTF-8-checked, numbers range-checked, the same
//! depth limit), so the peek succeeds only on lines a `Value` parse accepts, and reads what
//! `msg["params"]["update"]…` would. Anything else (another method or update, a duplicated key
//! on the way, a field of an unexpected type, invalid JSON) is `None`: the caller takes the
//! `Value` path, so the result never differs.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};

/// Whose chunk a `session/update` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChunkKind {
    /// `user_message_chunk`.
    User,
    /// `agent_message_chunk`.
    Agent,
    /// `agent_thought_chunk`.
    Thought,
}

/// A chunk update, as read.
pub(crate) struct Chunk<'a> {
    /// Whose.
    pub(crate) kind: ChunkKind,
    /// `content.text`.
    pub(crate) text: Cow<'a, str>,
    /// `params.sessionId`, when a string.
    pub(crate) session: Option<Cow<'a, str>>,
}

/// The kind, `content.text` and session of a chunk update, or `None` (see the module docs).
pub(crate) fn chunk(line: &[u8]) -> Option<Chunk<'_>> {
    // Invalid UTF-8 anywhere fails a `Value` parse too (outside strings it is a syntax error).
    // Checked once here, the strings are not checked again one by one.
    let line = std::str::from_utf8(line).ok()?;
    let found = serde_json::from_str::<Message<'_>>(line).ok()?;
    match found {
        Message {
            method: true,
            params:
                Some(Params {
                    update:
                        Some(Update {
                            kind: Some(kind),
                            text: Some(text),
                        }),
                    session,
                }),
        } => Some(Chunk {
            kind,
            text,
            session: session.map(|s| s.0),
        }),
        _ => None,
    }
}

/// The error that sends the caller to the `Value` path (never shown).
fn bail<E: de::Error>() -> E {
    E::custom("not a plain chunk")
}

/// Any JSON value, parsed as a `Value` would be and dropped.
struct Validate;

impl<'de> de::Deserialize<'de> for Validate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValidateVisitor)
    }
}

struct ValidateVisitor;

impl<'de> Visitor<'de> for ValidateVisitor {
    type Value = Validate;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Validate, E> {
        Ok(Validate)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Validate, E> {
        Ok(Validate)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Validate, E> {
        Ok(Validate)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Validate, E> {
        Ok(Validate)
    }
    fn visit_str<E>(self, _: &str) -> Result<Validate, E> {
        Ok(Validate)
    }
    fn visit_unit<E>(self) -> Result<Validate, E> {
        Ok(Validate)
    }
    fn visit_none<E>(self) -> Result<Validate, E> {
        Ok(Validate)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Validate, D::Error> {
        d.deserialize_any(ValidateVisitor)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Validate, A::Error> {
        while seq.next_element::<Validate>()?.is_some() {}
        Ok(Validate)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Validate, A::Error> {
        while map.next_key::<Key>()?.is_some() {
            map.next_value::<Validate>()?;
        }
        Ok(Validate)
    }
}

/// A map key, parsed as a `Value`'s keys are, compared with the names we look for.
#[derive(PartialEq, Eq)]
enum Key {
    Method,
    Params,
    SessionId,
    Update,
    SessionUpdate,
    Content,
    Text,
    Other,
}

impl<'de> de::Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E>(self, key: &str) -> Result<Key, E> {
                Ok(match key {
                    "method" => Key::Method,
                    "params" => Key::Params,
                    "sessionId" => Key::SessionId,
                    "update" => Key::Update,
                    "sessionUpdate" => Key::SessionUpdate,
                    "content" => Key::Content,
                    "text" => Key::Text,
                    _ => Key::Other,
                })
            }
        }
        d.deserialize_str(V)
    }
}

/// A string value, borrowed when it has no escapes.
struct Str<'a>(Cow<'a, str>);

impl<'de> de::Deserialize<'de> for Str<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(s.to_owned())))
            }
        }
        d.deserialize_any(V)
    }
}

/// Take the value of `key` once: a second occurrence (a `Value` keeps the last) bails.
fn once<'de, A: MapAccess<'de>, T: de::Deserialize<'de>>(
    map: &mut A,
    slot: &mut Option<T>,
) -> Result<(), A::Error> {
    if slot.is_some() {
        return Err(bail());
    }
    *slot = Some(map.next_value()?);
    Ok(())
}

/// The message: `method` must be `session/update`.
struct Message<'a> {
    method: bool,
    params: Option<Params<'a>>,
}

impl<'de> de::Deserialize<'de> for Message<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Message<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a message")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Message<'de>, A::Error> {
                let mut method: Option<Str<'de>> = None;
                let mut params: Option<Params<'de>> = None;
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Method => {
                            once(&mut map, &mut method)?;
                            if method.as_ref().map(|m| &*m.0) != Some("session/update") {
                                return Err(bail());
                            }
                        }
                        Key::Params => once(&mut map, &mut params)?,
                        _ => {
                            map.next_value::<Validate>()?;
                        }
                    }
                }
                Ok(Message {
                    method: method.is_some(),
                    params,
                })
            }
        }
        d.deserialize_any(V)
    }
}

struct Params<'a> {
    update: Option<Update<'a>>,
    session: Option<Str<'a>>,
}

impl<'de> de::Deserialize<'de> for Params<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Params<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("params")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Params<'de>, A::Error> {
                let mut update = None;
                let mut session = None;
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Update => once(&mut map, &mut update)?,
                        Key::SessionId => once(&mut map, &mut session)?,
                        _ => {
                            map.next_value::<Validate>()?;
                        }
                    }
                }
                Ok(Params { update, session })
            }
        }
        d.deserialize_any(V)
    }
}

struct Update<'a> {
    kind: Option<ChunkKind>,
    text: Option<Cow<'a, str>>,
}

impl<'de> de::Deserialize<'de> for Update<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Update<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an update")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Update<'de>, A::Error> {
                let mut kind: Option<Str<'de>> = None;
                let mut chunk = None;
                let mut content: Option<Content<'de>> = None;
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::SessionUpdate => {
                            once(&mut map, &mut kind)?;
                            chunk = Some(match kind.as_ref().map(|k| &*k.0) {
                                Some("user_message_chunk") => ChunkKind::User,
                                Some("agent_message_chunk") => ChunkKind::Agent,
                                Some("agent_thought_chunk") => ChunkKind::Thought,
                                _ => return Err(bail()),
                            });
                        }
                        Key::Content => once(&mut map, &mut content)?,
                        _ => {
                            map.next_value::<Validate>()?;
                        }
                    }
                }
                Ok(Update {
                    kind: chunk,
                    text: content.and_then(|c| c.0),
                })
            }
        }
        d.deserialize_any(V)
    }
}

struct Content<'a>(Option<Cow<'a, str>>);

impl<'de> de::Deserialize<'de> for Content<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Content<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("content")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Content<'de>, A::Error> {
                let mut text: Option<Str<'de>> = None;
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Text => once(&mut map, &mut text)?,
                        _ => {
                            map.next_value::<Validate>()?;
                        }
                    }
                }
                Ok(Content(text.map(|t| t.0)))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the `Value` path reads, for comparison.
    fn slow(line: &[u8]) -> Option<(ChunkKind, String, Option<String>)> {
        let msg: serde_json::Value = serde_json::from_slice(line).ok()?;
        if msg["method"].as_str() != Some("session/update") {
            return None;
        }
        let update = &msg["params"]["update"];
        let kind = match update["sessionUpdate"].as_str()? {
            "user_message_chunk" => ChunkKind::User,
            "agent_message_chunk" => ChunkKind::Agent,
            "agent_thought_chunk" => ChunkKind::Thought,
            _ => return None,
        };
        Some((
            kind,
            update["content"]["text"].as_str()?.to_string(),
            msg["params"]["sessionId"].as_str().map(str::to_string),
        ))
    }

    #[test]
    fn the_peek_reads_what_a_value_reads_or_steps_aside() {
        let lines: &[&str] = &[
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi \"there\" \u00e9"}}}}"#,
            r#"{"method":"session/update","params":{"update":{"content":{"text":"t"},"sessionUpdate":"agent_thought_chunk"}}}"#,
            r#"{"method":"session/update","params":{"update":{"sessionUpdate":"user_message_chunk","content":{"text":"u"}},"sessionId":"child\u0031"}}"#,
            r#"{"method":"session/\u0075pdate","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"text":"escaped key"}}}}"#,
            // Duplicates: a Value keeps the last.
            r#"{"method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"text":"a","text":"b"}}}}"#,
            r#"{"method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"text":"a"}},"update":{}}}"#,
            r#"{"method":"x","method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"text":"a"}}}}"#,
            // What a Value refuses and an ignoring parse would not.
            r#"{"method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"text":"a"}}},"n":1e400}"#,
            r#"{"method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"text":"a"}}},"s":"\ud800"}"#,
            // Other shapes.
            r#"{"method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"text":1}}}}"#,
            r#"{"method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":[]}}}"#,
            r#"{"method":"session/update","params":[]}"#,
            r#"{"method":"session/update","params":{"update":{"sessionUpdate":"tool_call","content":{"text":"a"}}}}"#,
            r#"{"id":1,"method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"text":"with id"}}}}"#,
            r#" {"method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"text":"spaces"}}}} "#,
            r#"{"method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"text":"trailing"}}}} x"#,
            r#"[1,2]"#,
            "not json",
        ];
        for (i, line) in lines.iter().enumerate() {
            let fast = chunk(line.as_bytes())
                .map(|c| (c.kind, c.text.into_owned(), c.session.map(Cow::into_owned)));
            if i < 4 || i == 13 || i == 14 {
                assert!(fast.is_some(), "the peek reads {line}");
            }
            if fast.is_some() {
                assert_eq!(fast, slow(line.as_bytes()), "{line}");
            }
        }
        let deep = format!(
            r#"{{"method":"session/update","params":{{"update":{{"sessionUpdate":"agent_message_chunk","content":{{"text":"a"}}}}}},"d":{}{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        assert!(slow(deep.as_bytes()).is_none(), "too deep for a Value");
        assert!(chunk(deep.as_bytes()).is_none());
    }
}
