//! A borrowed peek at a JSON-RPC line: kind, id, method, `params.sessionId`.
//!
//! Never re-encodes anything: the peek only reads. A line that is not a JSON object (arrays,
//! other values, invalid JSON) is [`Kind::OtherJson`] or [`Kind::Invalid`] and is still forwarded
//! unchanged.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::scan::{self, Id, Scanned};
use super::side::Side;

/// A JSON-RPC id, compared by value: `1` and `"1"` differ, `"a"` and `"\u0061"` do not.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RequestId {
    /// `null`.
    Null,
    /// A number, in serde_json's canonical form (`1`, `-3`, `1.5`).
    Number(String),
    /// A string.
    String(String),
}

impl RequestId {
    /// Parse an id from its raw JSON; `None` for objects, arrays and booleans.
    pub fn from_raw(raw: &RawValue) -> Option<RequestId> {
        match serde_json::from_str::<serde_json::Value>(raw.get()).ok()? {
            serde_json::Value::Null => Some(RequestId::Null),
            serde_json::Value::Number(n) => Some(RequestId::Number(n.to_string())),
            serde_json::Value::String(s) => Some(RequestId::String(s)),
            _ => None,
        }
    }
}

impl RequestId {
    /// The id as JSON text, as it appears in a message.
    pub fn to_json(&self) -> String {
        match self {
            RequestId::Null => "null".into(),
            RequestId::Number(n) => n.clone(),
            RequestId::String(s) => serde_json::to_string(s).expect("a string serializes"),
        }
    }
}

/// What a line is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind<'a> {
    /// `{id, method, params?}`.
    Request {
        /// The id.
        id: RequestId,
        /// The method.
        method: Cow<'a, str>,
    },
    /// `{method, params?}`.
    Notification {
        /// The method.
        method: Cow<'a, str>,
    },
    /// `{id, result}` or `{id, error}`.
    Response {
        /// The id.
        id: RequestId,
        /// True for `error` responses.
        is_error: bool,
    },
    /// Valid JSON that is none of the above (a batch array, a bare value, an odd object).
    OtherJson,
    /// Not JSON at all.
    Invalid,
}

/// The text of one JSON value of a line [`peek`] read: valid JSON, borrowed from the line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Raw<'a>(&'a str);

impl<'a> Raw<'a> {
    /// The value's JSON text.
    pub fn get(self) -> &'a str {
        self.0
    }
}

impl<'a> From<&'a RawValue> for Raw<'a> {
    fn from(raw: &'a RawValue) -> Raw<'a> {
        Raw(raw.get())
    }
}

/// The peeked fields of one line.
#[derive(Debug, PartialEq, Eq)]
pub struct Peek<'a> {
    /// The classification.
    pub kind: Kind<'a>,
    /// Raw `params`, when present.
    pub params: Option<Raw<'a>>,
    /// Raw `result`, when present.
    pub result: Option<Raw<'a>>,
    /// `params.sessionId`, when it is a string (read once, here; borrowed unless it had
    /// escapes).
    pub session: Option<Cow<'a, str>>,
}

impl Peek<'_> {
    /// True when the line is valid JSON.
    pub fn is_json(&self) -> bool {
        self.kind != Kind::Invalid
    }

    /// True for a JSON-RPC message: a request, a notification or a response.
    pub fn is_message(&self) -> bool {
        matches!(
            self.kind,
            Kind::Request { .. } | Kind::Notification { .. } | Kind::Response { .. }
        )
    }

    /// The method of a request or notification.
    pub fn method(&self) -> Option<&str> {
        match &self.kind {
            Kind::Request { method, .. } | Kind::Notification { method } => Some(method),
            _ => None,
        }
    }
}

/// A field that records presence even when its value is `null`.
#[derive(Default)]
struct Present<'a>(Option<&'a RawValue>);

impl<'de: 'a, 'a> Deserialize<'de> for Present<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <&'a RawValue>::deserialize(d).map(|v| Present(Some(v)))
    }
}

/// An object member's name as read: borrowed from the text unless it had escapes (serde's own
/// `Cow<str>` always copies).
pub struct Name<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Name<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Name<'a>, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
            type Value = Name<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, name: &'de str) -> Result<Name<'a>, E> {
                Ok(Name(Cow::Borrowed(name)))
            }
            fn visit_str<E>(self, name: &str) -> Result<Name<'a>, E> {
                Ok(Name(Cow::Owned(name.to_owned())))
            }
        }
        d.deserialize_str(Visit(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow)]
    id: Present<'a>,
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    params: Present<'a>,
    #[serde(default, borrow)]
    result: Present<'a>,
    #[serde(default, borrow)]
    error: Present<'a>,
}

/// Peek at one line (its line ending, if any, is ignored).
///
/// One pass over the bytes ([`scan`]) reads the lines it is sure of, which are nearly all of
/// them; serde_json reads the others, as it reads every line a scan would give up on.
pub fn peek(line: &[u8]) -> Peek<'_> {
    let body = line.trim_ascii();
    if body.first() == Some(&b'{')
        && let Some(scanned) = scan::scan(body)
    {
        return scanned_peek(scanned);
    }
    parsed_peek(body)
}

/// The peek of a line [`scan::scan`] read.
fn scanned_peek(scanned: Scanned<'_>) -> Peek<'_> {
    let id = scanned.id.map(|id| match id {
        Id::Null => RequestId::Null,
        Id::Number(n) => RequestId::Number(n.to_owned()),
        Id::String(s) => RequestId::String(s.to_owned()),
    });
    let (result, error) = (scanned.result.map(Raw), scanned.error.map(Raw));
    let kind = match (id, scanned.method.flatten()) {
        (Some(id), Some(method)) => Kind::Request {
            id,
            method: Cow::Borrowed(method),
        },
        (None, Some(method)) => Kind::Notification {
            method: Cow::Borrowed(method),
        },
        (Some(id), None) if result.is_some() || error.is_some() => Kind::Response {
            id,
            is_error: error.is_some() && result.is_none(),
        },
        _ => Kind::OtherJson,
    };
    let params = scanned.params.map(Raw);
    let session = match scanned.session {
        scan::Session::None => None,
        scan::Session::Some(session) => Some(Cow::Borrowed(session)),
        scan::Session::Unsure => str_field(params, "sessionId").map(Cow::Owned),
    };
    Peek {
        kind,
        params,
        result,
        session,
    }
}

/// The peek of `body` (a trimmed line) as serde_json reads it: what [`peek`] gives for the
/// lines its scan gives up on, and the reference the scan is tested against (here and by the
/// `peek` fuzz target).
pub fn parsed_peek(body: &[u8]) -> Peek<'_> {
    let other = |kind| Peek {
        kind,
        params: None,
        result: None,
        session: None,
    };
    if body.first() != Some(&b'{') {
        let valid =
            !body.is_empty() && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok();
        return other(if valid {
            Kind::OtherJson
        } else {
            Kind::Invalid
        });
    }
    let env: Envelope<'_> = match serde_json::from_slice(body) {
        Ok(env) => env,
        Err(_) => {
            let valid = serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok();
            return other(if valid {
                Kind::OtherJson
            } else {
                Kind::Invalid
            });
        }
    };
    let id = env.id.0.map(RequestId::from_raw);
    let kind = match (id, env.method) {
        (Some(Some(id)), Some(method)) => Kind::Request { id, method },
        (None, Some(method)) => Kind::Notification { method },
        (Some(Some(id)), None) if env.result.0.is_some() || env.error.0.is_some() => {
            Kind::Response {
                id,
                is_error: env.error.0.is_some() && env.result.0.is_none(),
            }
        }
        _ => Kind::OtherJson,
    };
    let params = env.params.0.map(Raw::from);
    Peek {
        kind,
        params,
        result: env.result.0.map(Raw::from),
        session: str_field(params, "sessionId").map(Cow::Owned),
    }
}

/// A string member of a raw JSON object (`params.sessionId`, `result.sessionId`,
/// `params.cwd`), if the object has it and it is a string. Other members are skipped unparsed.
pub fn str_field(object: Option<Raw<'_>>, name: &str) -> Option<String> {
    use std::cell::RefCell;
    /// Scans top-level members; stops (with an error serde_json then reports) at the first
    /// member named `name`, so large members after it are not even read.
    struct Find<'n, 'c>(&'n str, &'c RefCell<Option<String>>);
    impl<'de> serde::de::Visitor<'de> for Find<'_, '_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(Name(key)) = map.next_key::<Name<'de>>()? {
                if key == self.0 {
                    let value = map.next_value::<Option<Cow<'de, str>>>()?;
                    *self.1.borrow_mut() = value.map(Cow::into_owned);
                    return Err(serde::de::Error::custom("found"));
                }
                map.next_value::<serde::de::IgnoredAny>()?;
            }
            Ok(())
        }
    }
    let object = object?;
    if !object.get().starts_with('{') {
        return None;
    }
    let found = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_str(object.get());
    let _ = serde::Deserializer::deserialize_map(&mut de, Find(name, &found));
    found.into_inner()
}

/// `requestId` of a raw `params` object (`$/cancel_request`, request-scoped elicitation).
pub fn request_id(params: Option<Raw<'_>>) -> Option<RequestId> {
    #[derive(Deserialize)]
    struct WithRequest<'a> {
        #[serde(rename = "requestId", borrow, default)]
        request_id: Present<'a>,
    }
    let params = params?;
    if !params.get().starts_with('{') {
        return None;
    }
    let w: WithRequest<'_> = serde_json::from_str(params.get()).ok()?;
    RequestId::from_raw(w.request_id.0?)
}

/// A JSON-RPC response line (with its `\n`) to request `id`: `Ok(result)` or `Err(error)`, both
/// raw JSON.
pub fn response_line(id: &RequestId, outcome: Result<&str, &str>) -> bytes::Bytes {
    let (key, value) = match outcome {
        Ok(result) => ("result", result),
        Err(error) => ("error", error),
    };
    bytes::Bytes::from(
        format!(
            r#"{{"jsonrpc":"2.0","id":{},"{key}":{value}}}"#,
            id.to_json()
        ) + "\n",
    )
}

/// A JSON-RPC error object as raw JSON.
pub fn error_json(code: i64, message: &str, data: Option<serde_json::Value>) -> String {
    let mut e = serde_json::json!({"code": code, "message": message});
    if let Some(data) = data {
        e["data"] = data;
    }
    e.to_string()
}

/// Whether a line is a prompt turn: a `session/prompt` request the client sent (`proxy`: the
/// proxy made it, which is not a turn), as [`peek`] would classify it. A substring test first,
/// so the common line costs no parse; then the envelope alone (no `params.sessionId`, no
/// [`Peek`] built).
pub fn is_prompt_turn(from: Side, proxy: bool, line: &[u8]) -> bool {
    let body = line.trim_ascii();
    from == Side::Client
        && !proxy
        && memchr::memmem::find(body, b"\"session/prompt\"").is_some()
        && body.first() == Some(&b'{')
        && serde_json::from_slice::<Envelope<'_>>(body).is_ok_and(|env| {
            env.method.as_deref() == Some("session/prompt")
                && env.id.0.and_then(RequestId::from_raw).is_some()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_turn_is_the_client_s_own_session_prompt_request() {
        use crate::wire::Side;
        let prompt = br#"{"jsonrpc":"2.0","id":"7","method":"session/prompt","params":{"sessionId":"s","prompt":[]}}"#;
        assert!(is_prompt_turn(Side::Client, false, prompt));
        assert!(!is_prompt_turn(Side::Agent, false, prompt));
        assert!(
            !is_prompt_turn(Side::Client, true, prompt),
            "the proxy's own"
        );
        for not_a_turn in [
            &br#"{"jsonrpc":"2.0","method":"session/prompt","params":{}}"#[..],
            br#"{"jsonrpc":"2.0","id":[1],"method":"session/prompt"}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"text":"\"session/prompt\""}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","method":"x"}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"session/prompt""#,
        ] {
            let shown = String::from_utf8_lossy(not_a_turn);
            assert!(!is_prompt_turn(Side::Client, false, not_a_turn), "{shown}");
            assert!(
                !matches!(peek(not_a_turn).kind, Kind::Request { ref method, .. } if method == "session/prompt"),
                "peek agrees: {shown}"
            );
        }
    }

    #[test]
    fn classifies_every_shape() {
        fn k(l: &str) -> Kind<'_> {
            peek(l.as_bytes()).kind
        }
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#),
            Kind::Request {
                id: RequestId::Number("0".into()),
                method: "initialize".into()
            }
        );
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","id":"0","method":"x"}"#),
            Kind::Request {
                id: RequestId::String("0".into()),
                method: "x".into()
            }
        );
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#),
            Kind::Request {
                id: RequestId::Null,
                method: "x".into()
            }
        );
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","method":"session/update","params":{}}"#),
            Kind::Notification {
                method: "session/update".into()
            }
        );
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","id":3,"result":null}"#),
            Kind::Response {
                id: RequestId::Number("3".into()),
                is_error: false
            }
        );
        assert_eq!(
            k(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#),
            Kind::Response {
                id: RequestId::Null,
                is_error: true
            }
        );
        assert_eq!(k(r#"[{"jsonrpc":"2.0","method":"x"}]"#), Kind::OtherJson);
        assert_eq!(k(r#"{"jsonrpc":"2.0","method":5}"#), Kind::OtherJson);
        assert_eq!(k(r#"{"id":1}"#), Kind::OtherJson);
        assert_eq!(k("42"), Kind::OtherJson);
        assert_eq!(k("hello"), Kind::Invalid);
        assert_eq!(k("{\"a\":"), Kind::Invalid);
        assert_eq!(k(""), Kind::Invalid);
        assert_eq!(k("\u{1}{}"), Kind::Invalid);
    }

    #[test]
    fn ids_compare_by_value() {
        let id = |s: &str| RequestId::from_raw(&serde_json::from_str::<Box<RawValue>>(s).unwrap());
        assert_eq!(id("\"a\""), id("\"\\u0061\""));
        assert_ne!(id("1"), id("\"1\""));
        assert_eq!(id("{}"), None);
    }

    #[test]
    fn reads_string_fields() {
        let p = peek(br#"{"method":"m","params":{"x":{"sessionId":"no"},"sessionId":"s\n1"}}"#);
        assert_eq!(str_field(p.params, "sessionId").as_deref(), Some("s\n1"));
        // A name written with escapes is the same name (read as a copy, not borrowed).
        let p = peek(br#"{"method":"m","params":{"session\u0049d":"s2"}}"#);
        assert_eq!(str_field(p.params, "sessionId").as_deref(), Some("s2"));
        let p = peek(br#"{"method":"m","params":{"sessionId":5}}"#);
        assert_eq!(str_field(p.params, "sessionId"), None);
        let p = peek(br#"{"method":"m","params":[1]}"#);
        assert_eq!(str_field(p.params, "sessionId"), None);
        let p = peek(br#"{"method":"$/cancel_request","params":{"requestId":"7"}}"#);
        assert_eq!(request_id(p.params), Some(RequestId::String("7".into())));
    }
}
