//! A wire line printed as `serde_json::to_string_pretty` prints its `Value`, without building
//! the `Value` (a map and strings per object): the parse drives the printer directly.
//!
//! Exact: values are visited by the same serde_json parse a `Value` gets (`deserialize_any`),
//! and written by serde_json's own escaping and number formatting with the pretty layout (two
//! spaces, `": "`, `[]` and `{}` when empty). A `Value` keeps one member per key, the last,
//! where the first was: an object with a repeated key (or more keys than are worth comparing)
//! makes this give up, and the caller takes the `Value` path.

use std::fmt;
use std::io::Write;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// Keys of one object compared for repeats, at most; past that the `Value` path prints it.
const MAX_KEYS: usize = 64;

/// What [`pretty`] read at the top level of the line (an object's members).
#[derive(Default)]
pub(crate) struct Top {
    /// `method`, when it is a string.
    pub(crate) method: Option<String>,
    /// `id` as compact JSON.
    pub(crate) id: Option<String>,
    /// An `error` member is present.
    pub(crate) error: bool,
}

/// `line` printed as `to_string_pretty` prints `serde_json::from_slice::<Value>(line)`, and its
/// top-level members of note; `None` when that parse fails or this printer steps aside.
pub(crate) fn pretty(line: &[u8]) -> Option<(Top, String)> {
    let text = std::str::from_utf8(line).ok()?;
    let mut ctx = Ctx::default();
    let mut de = serde_json::Deserializer::from_str(text);
    Printer(&mut ctx).deserialize(&mut de).ok()?;
    de.end().ok()?;
    let top = std::mem::take(&mut ctx.top);
    // The printer writes only what serde_json's formatter writes: UTF-8.
    Some((top, String::from_utf8(ctx.out).ok()?))
}

#[derive(Default)]
struct Ctx {
    out: Vec<u8>,
    depth: usize,
    /// Where each key of the objects being printed was written (`out[start..end]`).
    keys: Vec<(usize, usize)>,
    top: Top,
}

impl Ctx {
    fn newline(&mut self) {
        self.out.push(b'\n');
        for _ in 0..self.depth {
            self.out.extend_from_slice(b"  ");
        }
    }

    fn string(&mut self, s: &str) {
        serde_json::to_writer(&mut self.out, s).expect("writing to a Vec");
    }
}

fn step_aside<E: de::Error>() -> E {
    E::custom("left to the Value path")
}

struct Printer<'c>(&'c mut Ctx);

impl<'de> DeserializeSeed<'de> for Printer<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Printer<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.0
            .out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        let _ = write!(self.0.out, "{v}");
        Ok(())
    }
    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        let _ = write!(self.0.out, "{v}");
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        if !v.is_finite() {
            return Err(step_aside());
        }
        serde_json::to_writer(&mut self.0.out, &v).map_err(|_| step_aside())
    }
    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.0.string(v);
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        self.0.out.extend_from_slice(b"null");
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let ctx = self.0;
        ctx.out.push(b'[');
        ctx.depth += 1;
        let mut any = false;
        loop {
            let mark = ctx.out.len();
            if any {
                ctx.out.push(b',');
            }
            ctx.newline();
            if seq.next_element_seed(Printer(&mut *ctx))?.is_none() {
                ctx.out.truncate(mark);
                break;
            }
            any = true;
        }
        ctx.depth -= 1;
        if any {
            ctx.newline();
        }
        ctx.out.push(b']');
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let ctx = self.0;
        let top = ctx.depth == 0;
        ctx.out.push(b'{');
        ctx.depth += 1;
        let first_key = ctx.keys.len();
        loop {
            let mark = ctx.out.len();
            if ctx.keys.len() > first_key {
                ctx.out.push(b',');
            }
            ctx.newline();
            let start = ctx.out.len();
            if map.next_key_seed(Key(&mut *ctx))?.is_none() {
                ctx.out.truncate(mark);
                break;
            }
            let end = ctx.out.len();
            let key = &ctx.out[start..end];
            let repeated = ctx.keys[first_key..]
                .iter()
                .any(|&(s, e)| ctx.out[s..e] == *key);
            if repeated || ctx.keys.len() - first_key >= MAX_KEYS {
                return Err(step_aside());
            }
            ctx.keys.push((start, end));
            ctx.out.extend_from_slice(b": ");
            let value = ctx.out.len();
            map.next_value_seed(Printer(&mut *ctx))?;
            if top {
                let printed = &ctx.out[value..];
                match &ctx.out[start..end] {
                    b"\"id\"" => {
                        if printed.contains(&b'\n') {
                            return Err(step_aside()); // pretty is not compact
                        }
                        ctx.top.id = Some(String::from_utf8_lossy(printed).into_owned());
                    }
                    b"\"method\"" => {
                        ctx.top.method = serde_json::from_slice::<String>(printed).ok();
                    }
                    b"\"error\"" => ctx.top.error = true,
                    _ => {}
                }
            }
        }
        ctx.keys.truncate(first_key);
        ctx.depth -= 1;
        if ctx.out.last() != Some(&b'{') {
            ctx.newline();
        }
        ctx.out.push(b'}');
        Ok(())
    }
}

/// A key, written escaped.
struct Key<'c>(&'c mut Ctx);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for Key<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.0.string(v);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn prints_as_a_value_prints_or_steps_aside() {
        let lines: &[&str] = &[
            r#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"prompt":[{"type":"text","text":"hi \"x\" \u00e9 \n"}],"e":[],"o":{},"n":null,"b":true,"f":1.50,"g":-0,"h":1E3,"i":-12,"j":18446744073709551615,"k":[[],[{}],[1,[2]]]}}"#,
            r#"{"id":"p-1","result":{"outcome":{"outcome":"selected"}}}"#,
            r#"{"id":{"a":1},"error":{"code":-32603,"message":"boom"}}"#,
            r#"{"id":[],"result":null}"#,
            r#"{"method":"x","params":{"a":1,"a":2}}"#,
            r#"{"\u0061":1,"a":2}"#,
            r#"{"s":"\ud800"}"#,
            r#"{"n":1e400}"#,
            r#"[1,{"a":"b"},[]]"#,
            r#""just a string""#,
            "12",
            "{}",
            "[]",
            " {\"a\" : 1 } ",
            "not json",
            "{\"a\":1} x",
        ];
        for line in lines {
            let slow = serde_json::from_slice::<Value>(line.as_bytes())
                .ok()
                .map(|v| serde_json::to_string_pretty(&v).unwrap());
            match pretty(line.as_bytes()) {
                Some((top, text)) => {
                    assert_eq!(Some(text), slow, "{line}");
                    let v: Value = serde_json::from_str(line).unwrap();
                    assert_eq!(top.id, v.get("id").map(Value::to_string), "{line}");
                    assert_eq!(top.method.as_deref(), v["method"].as_str(), "{line}");
                    assert_eq!(top.error, v.get("error").is_some(), "{line}");
                }
                None => assert!(
                    slow.is_none() || line.contains("\"a\":2") || line.contains("{\"a\":1}"),
                    "steps aside only when it must: {line}"
                ),
            }
        }
    }
}
