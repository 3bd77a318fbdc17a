//! The journal record format: bytes <-> values, pure (no I/O).
//!
//! A segment file is a sequence of zstd frames whose decompressed content is JSON lines:
//! a header line first, then one record per line. Every line starts with a CRC32C of the rest
//! of the line, so a torn or corrupted line is detected, never misread:
//!
//! ```text
//! {"crc":"1c291ca3","acpj":1,"kind":"session","session":"sess-1",...}          <- header
//! {"crc":"0f3e8a41","seq":3,"t":1763761313000000,"mono":1520,"from":"client","msg":{...}}
//! {"crc":"9b1d07aa","seq":4,"t":1763761313000100,"mono":1620,"from":"agent","text":"not json"}
//! {"crc":"77a0c2e1","seq":5,"t":1763761313000200,"mono":1720,"stderr":"log line\n"}
//! ```
//!
//! The CRC (lower-case hex, 8 digits) covers every byte after `{"crc":"XXXXXXXX",` up to and
//! including the closing `}`; the terminating `\n` is not covered. A message that is a bare JSON
//! value is embedded verbatim under `msg` (byte-identical to the wire), so
//! `zstd -dc FILE | jq .msg` shows the traffic with no tool of ours. See `docs/FORMAT.md`.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::event::Event;
use crate::wire::Side;

/// Format version written in every header (`"acpj": 1`). Readers refuse newer versions.
pub const FORMAT_VERSION: u32 = 1;

/// The literal every line starts with, followed by 8 hex digits and `",`.
const CRC_PREFIX: &[u8] = br#"{"crc":""#;
/// Length of `{"crc":"XXXXXXXX",`.
const CRC_FIELD_LEN: usize = CRC_PREFIX.len() + 8 + 2;

/// How the bytes of a wire line are stored in a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// A bare JSON value (no surrounding whitespace), embedded verbatim under `msg`.
    Json,
    /// Valid UTF-8 that is not a bare JSON value, stored as a JSON string under `text`.
    Text,
    /// Anything else, stored base64-encoded under `b64`.
    Binary,
}

/// One line as seen on the wire, minus its terminating `\n`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Payload {
    /// The line's bytes: exactly what was received, without `\n` and without a final `\r`
    /// when `cr` is set. For redacted messages, the redacted JSON.
    pub bytes: Bytes,
    /// How `bytes` are stored.
    pub encoding: Encoding,
    /// The wire line ended in `\r\n` (the `\r` is not part of `bytes`).
    pub cr: bool,
    /// The wire line ended with `\n` (false only for a final partial line at EOF).
    pub eol: bool,
    /// `bytes` were redacted from the wire form (the forwarded bytes were not).
    pub redacted: bool,
    /// The line is part of the proxy's own exchange with a peer: a request or answer the proxy
    /// made itself, or an agent response only the proxy saw.
    pub proxy: bool,
}

impl Payload {
    /// Classify a wire line (with or without its `\n`), checking whether it is a bare JSON value.
    pub fn from_line(line: Bytes) -> Payload {
        let json = is_bare_json(strip_eol(&line).0);
        Payload::from_line_classified(line, json)
    }

    /// Like [`Payload::from_line`] when the caller already knows whether the line (without its
    /// line ending) is valid JSON, as the proxy core does after its peek.
    pub fn from_line_classified(mut line: Bytes, valid_json: bool) -> Payload {
        let (body, cr, eol) = strip_eol(&line);
        let body_len = body.len();
        // serde_json skips the strings it does not keep without checking their UTF-8, so a
        // line it accepts may still not be text; embedded under `msg` it would make the record
        // unreadable.
        let encoding = if simdutf8::basic::from_utf8(body).is_err() {
            Encoding::Binary
        } else if valid_json && is_bare(body) {
            Encoding::Json
        } else {
            Encoding::Text
        };
        // Keep the '\r' in the bytes unless the body is stored as bare JSON.
        let keep = if encoding == Encoding::Json || !cr {
            body_len
        } else {
            body_len + 1
        };
        line.truncate(keep);
        Payload {
            bytes: line,
            encoding,
            cr: cr && encoding == Encoding::Json,
            eol,
            redacted: false,
            proxy: false,
        }
    }

    /// The exact bytes as they appeared on the wire (for unredacted payloads).
    pub fn wire(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.bytes.len() + 2);
        out.extend_from_slice(&self.bytes);
        if self.cr {
            out.push(b'\r');
        }
        if self.eol {
            out.push(b'\n');
        }
        out
    }
}

/// Split a line into (body, had `\r\n`, had `\n`).
fn strip_eol(line: &[u8]) -> (&[u8], bool, bool) {
    match line.strip_suffix(b"\n") {
        Some(rest) => match rest.strip_suffix(b"\r") {
            Some(body) => (body, true, true),
            None => (rest, false, true),
        },
        None => (line, false, false),
    }
}

/// True when the bytes start and end with a non-whitespace byte (so a valid JSON text is a
/// bare value that can be embedded verbatim).
fn is_bare(body: &[u8]) -> bool {
    match (body.first(), body.last()) {
        (Some(a), Some(b)) => !a.is_ascii_whitespace() && !b.is_ascii_whitespace(),
        _ => false,
    }
}

/// True when `body` is one JSON value with no surrounding whitespace.
pub fn is_bare_json(body: &[u8]) -> bool {
    is_bare(body) && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok()
}

/// What a record holds.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    /// A line relayed from one peer to the other.
    Message {
        /// Who sent it.
        from: Side,
        /// The line.
        payload: Payload,
    },
    /// A chunk of the agent's stderr.
    Stderr(Bytes),
    /// Something the proxy observed or did (agent exit, signal, journal gap).
    Event(Event),
}

/// One journal record.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// Sequence number, global across all journals of one proxy run (gaps in a session are
    /// messages of other sessions).
    pub seq: u64,
    /// Wall-clock time the proxy read the line, Unix microseconds.
    pub unix_us: i64,
    /// Monotonic microseconds since the proxy run started.
    pub mono_us: u64,
    /// The content.
    pub body: Body,
}

/// What a segment file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SegmentKind {
    /// One ACP session's traffic for one proxy run.
    Session,
    /// Connection-level traffic of one proxy run: initialize, stderr, unattributed lines.
    Connection,
}

/// The `initialize` request and response, as raw JSON.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct InitializeExchange {
    /// The client's `initialize` request line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<Box<RawValue>>,
    /// The agent's response line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response: Option<Box<RawValue>>,
}

impl InitializeExchange {
    /// The request, parsed (`None` when absent or not JSON).
    pub fn request_value(&self) -> Option<serde_json::Value> {
        parse_raw(self.request.as_deref())
    }

    /// The response, parsed (`None` when absent or not JSON).
    pub fn response_value(&self) -> Option<serde_json::Value> {
        parse_raw(self.response.as_deref())
    }
}

fn parse_raw(raw: Option<&RawValue>) -> Option<serde_json::Value> {
    serde_json::from_str(raw?.get()).ok()
}

/// The first line of every segment.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Header {
    /// Format version ([`FORMAT_VERSION`]).
    pub acpj: u32,
    /// What the segment holds.
    pub kind: SegmentKind,
    /// The ACP session ID (session segments only), exactly as on the wire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The proxy run this segment belongs to (shared by all its segments).
    pub run: String,
    /// Producer, e.g. `acp-journal 0.1.0`.
    pub proxy: String,
    /// When the segment was opened, Unix microseconds.
    pub started: i64,
    /// Process ID of the writing proxy.
    pub pid: u32,
    /// The agent command line (redacted unless `--no-redact`).
    pub argv: Vec<String>,
    /// The session's working directory, when known at open time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The connection segment of the same run, relative to the journal directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<String>,
    /// A copy of the initialize exchange, so a session segment replays on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialize: Option<InitializeExchange>,
}

/// Why a line could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The line does not start with a well-formed CRC field.
    #[error("line does not start with a CRC field")]
    MissingCrc,
    /// The CRC does not match the content.
    #[error("checksum mismatch (stored {stored:08x}, computed {computed:08x})")]
    BadChecksum {
        /// CRC stored in the line.
        stored: u32,
        /// CRC of the bytes read.
        computed: u32,
    },
    /// The checksum matched but the content is not a valid record.
    #[error("malformed record: {0}")]
    Malformed(String),
    /// The header announces a format this reader does not know.
    #[error(
        "journal format version {found} is newer than this acp-journal supports ({supported}); upgrade acp-journal"
    )]
    UnsupportedVersion {
        /// Version in the file.
        found: u32,
        /// Newest version this build reads.
        supported: u32,
    },
}

/// Append `{"crc":"XXXXXXXX",` + `rest` + `\n` to `out`, computing the CRC of `rest`.
/// `rest` must be the remainder of a JSON object (its fields and the closing `}`).
fn seal_line(out: &mut Vec<u8>, start: usize) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let crc = crc_fast::crc32_iscsi(&out[start + CRC_FIELD_LEN..]);
    let at = start + CRC_PREFIX.len();
    for (i, byte) in out[at..at + 8].iter_mut().enumerate() {
        *byte = HEX[((crc >> (28 - 4 * i)) & 0xf) as usize];
    }
    out.push(b'\n');
}

fn begin_line(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(br#"{"crc":"00000000","#);
    start
}

/// Encode the header line (with its `\n`) onto `out`.
pub fn encode_header(header: &Header, out: &mut Vec<u8>) {
    let start = begin_line(out);
    let json = serde_json::to_vec(header).expect("a header always serializes");
    // `json` is `{...}`: drop its opening brace, we already wrote ours.
    out.extend_from_slice(&json[1..]);
    seal_line(out, start);
}

/// Encode one record line (with its `\n`) onto `out`.
pub fn encode_record(record: &Record, out: &mut Vec<u8>) {
    let start = begin_line(out);
    let mut number = itoa::Buffer::new();
    out.extend_from_slice(br#""seq":"#);
    out.extend_from_slice(number.format(record.seq).as_bytes());
    out.extend_from_slice(br#","t":"#);
    out.extend_from_slice(number.format(record.unix_us).as_bytes());
    out.extend_from_slice(br#","mono":"#);
    out.extend_from_slice(number.format(record.mono_us).as_bytes());
    match &record.body {
        Body::Message { from, payload } => {
            out.extend_from_slice(br#","from":""#);
            out.extend_from_slice(from.as_str().as_bytes());
            out.push(b'"');
            match payload.encoding {
                Encoding::Json => {
                    out.extend_from_slice(br#","msg":"#);
                    out.extend_from_slice(&payload.bytes);
                }
                Encoding::Text => {
                    out.extend_from_slice(br#","text":"#);
                    let text = std::str::from_utf8(&payload.bytes).unwrap_or_default();
                    serde_json::to_writer(&mut *out, text).expect("writing to a Vec");
                }
                Encoding::Binary => {
                    out.extend_from_slice(br#","b64":""#);
                    out.extend_from_slice(base64_encode(&payload.bytes).as_bytes());
                    out.push(b'"');
                }
            }
            if payload.cr {
                out.extend_from_slice(br#","cr":true"#);
            }
            if !payload.eol {
                out.extend_from_slice(br#","eol":false"#);
            }
            if payload.redacted {
                out.extend_from_slice(br#","redacted":true"#);
            }
            if payload.proxy {
                out.extend_from_slice(br#","proxy":true"#);
            }
        }
        Body::Stderr(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) => {
                out.extend_from_slice(br#","stderr":"#);
                serde_json::to_writer(&mut *out, text).expect("writing to a Vec");
            }
            Err(_) => {
                out.extend_from_slice(br#","stderr_b64":""#);
                out.extend_from_slice(base64_encode(bytes).as_bytes());
                out.push(b'"');
            }
        },
        Body::Event(event) => {
            out.extend_from_slice(br#","event":"#);
            serde_json::to_writer(&mut *out, event).expect("writing to a Vec");
        }
    }
    out.push(b'}');
    seal_line(out, start);
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn base64_decode(text: &str) -> Result<Vec<u8>, DecodeError> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| DecodeError::Malformed(format!("bad base64: {e}")))
}

/// Check the CRC of a line (without its `\n`).
pub fn check_crc(line: &[u8]) -> Result<(), DecodeError> {
    if line.len() < CRC_FIELD_LEN + 1
        || !line.starts_with(CRC_PREFIX)
        || &line[CRC_PREFIX.len() + 8..CRC_FIELD_LEN] != b"\","
    {
        return Err(DecodeError::MissingCrc);
    }
    let hex = &line[CRC_PREFIX.len()..CRC_PREFIX.len() + 8];
    if !hex.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(DecodeError::MissingCrc);
    }
    let hex = std::str::from_utf8(hex).map_err(|_| DecodeError::MissingCrc)?;
    let stored = u32::from_str_radix(hex, 16).map_err(|_| DecodeError::MissingCrc)?;
    let computed = crc_fast::crc32_iscsi(&line[CRC_FIELD_LEN..]);
    if stored != computed {
        return Err(DecodeError::BadChecksum { stored, computed });
    }
    Ok(())
}

/// Decode a header line (without its `\n`), checking its CRC and version.
pub fn decode_header(line: &[u8]) -> Result<Header, DecodeError> {
    check_crc(line)?;
    #[derive(Deserialize)]
    struct Version {
        acpj: Option<u32>,
    }
    let version: Version =
        serde_json::from_slice(line).map_err(|e| DecodeError::Malformed(e.to_string()))?;
    match version.acpj {
        None => return Err(DecodeError::Malformed("not a journal header".into())),
        Some(v) if v > FORMAT_VERSION => {
            return Err(DecodeError::UnsupportedVersion {
                found: v,
                supported: FORMAT_VERSION,
            });
        }
        Some(_) => {}
    }
    serde_json::from_slice(line).map_err(|e| DecodeError::Malformed(e.to_string()))
}

/// The on-disk shape of a record line. Private: callers get [`Record`].
#[derive(Deserialize)]
struct WireRecord<'a> {
    seq: u64,
    t: i64,
    mono: u64,
    #[serde(default)]
    from: Option<&'a str>,
    #[serde(default, borrow)]
    msg: Option<&'a RawValue>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    b64: Option<String>,
    #[serde(default)]
    cr: bool,
    #[serde(default = "yes")]
    eol: bool,
    #[serde(default)]
    redacted: bool,
    #[serde(default)]
    proxy: bool,
    #[serde(default)]
    stderr: Option<String>,
    #[serde(default)]
    stderr_b64: Option<String>,
    #[serde(default)]
    event: Option<Event>,
}

fn yes() -> bool {
    true
}

/// Decode a record line (without its `\n`), checking its CRC.
pub fn decode_record(line: &[u8]) -> Result<Record, DecodeError> {
    check_crc(line)?;
    if let Some(record) = decode_message_as_written(&line[CRC_FIELD_LEN..]) {
        return Ok(record);
    }
    // A line that is UTF-8 (every line a writer writes) is parsed as text: checked once as a
    // whole instead of string by string. Anything else takes the byte parser, for its error.
    let wire: WireRecord<'_> = match std::str::from_utf8(line) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(line),
    }
    .map_err(|e| DecodeError::Malformed(e.to_string()))?;
    let body = if let Some(from) = wire.from {
        let from = match from {
            "client" => Side::Client,
            "agent" => Side::Agent,
            other => return Err(DecodeError::Malformed(format!("unknown sender {other:?}"))),
        };
        let (bytes, encoding) = if let Some(msg) = wire.msg {
            (Bytes::copy_from_slice(msg.get().as_bytes()), Encoding::Json)
        } else if let Some(text) = wire.text {
            (Bytes::from(text.into_bytes()), Encoding::Text)
        } else if let Some(b64) = wire.b64 {
            (Bytes::from(base64_decode(&b64)?), Encoding::Binary)
        } else {
            return Err(DecodeError::Malformed(
                "message record without content".into(),
            ));
        };
        Body::Message {
            from,
            payload: Payload {
                bytes,
                encoding,
                cr: wire.cr,
                eol: wire.eol,
                redacted: wire.redacted,
                proxy: wire.proxy,
            },
        }
    } else if let Some(text) = wire.stderr {
        Body::Stderr(Bytes::from(text.into_bytes()))
    } else if let Some(b64) = wire.stderr_b64 {
        Body::Stderr(Bytes::from(base64_decode(&b64)?))
    } else if let Some(event) = wire.event {
        Body::Event(event)
    } else {
        return Err(DecodeError::Malformed("record without content".into()));
    };
    Ok(Record {
        seq: wire.seq,
        unix_us: wire.t,
        mono_us: wire.mono,
        body,
    })
}

/// A message record laid out exactly as [`encode_record`] writes it, read without serde:
/// `"seq":N,"t":N,"mono":N,"from":"client|agent","msg":MSG` then the flags that are set, in
/// order, and `}`. `MSG` is checked as serde would check it (one JSON value, UTF-8, no
/// surrounding space). `None` for any other layout (events, text, an unusual spelling of a
/// number): the serde path decides those, and this one never accepts a line it would refuse
/// or read one differently (the fields after `MSG` can only be the flags, since a JSON value
/// that ends in `true` or `false` is that literal alone).
fn decode_message_as_written(rest: &[u8]) -> Option<Record> {
    let rest = rest.strip_prefix(br#""seq":"#)?;
    let (seq, rest) = unsigned(rest)?;
    let rest = rest.strip_prefix(br#","t":"#)?;
    let (t, rest) = match rest.strip_prefix(b"-") {
        Some(rest) => {
            let (n, rest) = unsigned(rest)?;
            // `-0` and values past i64 are left to serde.
            (
                i64::try_from(n).ok().filter(|n| *n > 0)?.checked_neg()?,
                rest,
            )
        }
        None => {
            let (n, rest) = unsigned(rest)?;
            (i64::try_from(n).ok()?, rest)
        }
    };
    let rest = rest.strip_prefix(br#","mono":"#)?;
    let (mono, rest) = unsigned(rest)?;
    let rest = rest.strip_prefix(br#","from":""#)?;
    let (from, rest) = if let Some(rest) = rest.strip_prefix(br#"client","msg":"#) {
        (Side::Client, rest)
    } else {
        (Side::Agent, rest.strip_prefix(br#"agent","msg":"#)?)
    };
    let mut msg = rest.strip_suffix(b"}")?;
    let mut flag = |name: &[u8]| match msg.strip_suffix(name) {
        Some(before) => {
            msg = before;
            true
        }
        None => false,
    };
    let proxy = flag(br#","proxy":true"#);
    let redacted = flag(br#","redacted":true"#);
    let eol = !flag(br#","eol":false"#);
    let cr = flag(br#","cr":true"#);
    if !is_bare(msg) {
        return None;
    }
    let text = std::str::from_utf8(msg).ok()?;
    serde_json::from_str::<serde::de::IgnoredAny>(text).ok()?;
    Some(Record {
        seq,
        unix_us: t,
        mono_us: mono,
        body: Body::Message {
            from,
            payload: Payload {
                bytes: Bytes::copy_from_slice(msg),
                encoding: Encoding::Json,
                cr,
                eol,
                redacted,
                proxy,
            },
        },
    })
}

/// A JSON unsigned integer as serde reads it into a `u64` (no leading zero, no overflow),
/// and what follows it.
fn unsigned(text: &[u8]) -> Option<(u64, &[u8])> {
    let digits = text.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || (digits > 1 && text[0] == b'0') {
        return None;
    }
    let mut n: u64 = 0;
    for d in &text[..digits] {
        n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some((n, &text[digits..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_written_layout_reads_as_serde_reads_it() {
        let lines: &[&str] = &[
            r#""seq":1,"t":2,"mono":3,"from":"agent","msg":{"a":1}}"#,
            r#""seq":0,"t":-5,"mono":0,"from":"client","msg":[1,2],"cr":true,"eol":false,"redacted":true,"proxy":true}"#,
            r#""seq":1,"t":2,"mono":3,"from":"agent","msg":true,"proxy":true}"#,
            r#""seq":1,"t":2,"mono":3,"from":"agent","msg":"a,\"proxy\":true","redacted":true}"#,
            r#""seq":18446744073709551615,"t":-9223372036854775807,"mono":3,"from":"agent","msg":1}"#,
            // Out of range for a number, but not for serde skipping a value.
            r#""seq":1,"t":2,"mono":3,"from":"agent","msg":{"a":1e400}}"#,
            // Left to serde.
            r#""seq":18446744073709551616,"t":2,"mono":3,"from":"agent","msg":1}"#,
            r#""seq":01,"t":2,"mono":3,"from":"agent","msg":1}"#,
            r#""seq":1,"t":-0,"mono":3,"from":"agent","msg":1}"#,
            r#""seq":1,"t":2,"mono":3,"from":"agent","msg": {"a":1}}"#,
            r#""seq":1,"t":2,"mono":3,"from":"agent","msg":{"a":1},"msg":{}}"#,
            r#""seq":1,"t":2,"mono":3,"from":"agent","msg":{"a":1},"cr":false}"#,
            r#""seq":1,"t":2,"mono":3,"from":"agent","msg":{"a":}}"#,
            r#""seq":1,"t":2,"mono":3,"from":"other","msg":1}"#,
            r#""seq":1,"t":2,"mono":3,"from":"agent","text":"x"}"#,
        ];
        for (i, rest) in lines.iter().enumerate() {
            let mut line = br#"{"crc":"00000000","#.to_vec();
            line.extend_from_slice(rest.as_bytes());
            let fast = decode_message_as_written(rest.as_bytes());
            assert_eq!(fast.is_some(), i < 6, "{rest}");
            let wire: Result<WireRecord<'_>, _> = serde_json::from_slice(&line);
            if let Some(fast) = fast {
                let wire = wire.expect("serde reads it too");
                assert_eq!(
                    (fast.seq, fast.unix_us, fast.mono_us),
                    (wire.seq, wire.t, wire.mono)
                );
                let Body::Message { from, payload } = fast.body else {
                    panic!("a message")
                };
                assert_eq!(from.as_str(), wire.from.unwrap());
                assert_eq!(payload.bytes, wire.msg.unwrap().get().as_bytes());
                assert_eq!(
                    (payload.cr, payload.eol, payload.redacted, payload.proxy),
                    (wire.cr, wire.eol, wire.redacted, wire.proxy)
                );
            }
        }
    }

    fn roundtrip(record: Record) {
        let mut out = Vec::new();
        encode_record(&record, &mut out);
        assert_eq!(out.last(), Some(&b'\n'));
        assert_eq!(memchr::memchr(b'\n', &out), Some(out.len() - 1));
        let back = decode_record(&out[..out.len() - 1]).unwrap();
        assert_eq!(back, record);
        let _: serde_json::Value = serde_json::from_slice(&out).expect("every line is JSON");
    }

    fn message(line: &[u8]) -> Record {
        Record {
            seq: 7,
            unix_us: 1_763_761_313_000_000,
            mono_us: 42,
            body: Body::Message {
                from: Side::Agent,
                payload: Payload::from_line(Bytes::copy_from_slice(line)),
            },
        }
    }

    #[test]
    fn json_is_embedded_verbatim() {
        let line = br#"{"jsonrpc":"2.0","id":1,"result":{"a":"\u00e9","b":1.50}}"#;
        let rec = message(&[&line[..], b"\n"].concat());
        let mut out = Vec::new();
        encode_record(&rec, &mut out);
        assert!(memchr::memmem::find(&out, line).is_some());
        roundtrip(rec);
    }

    #[test]
    fn every_kind_of_line_round_trips() {
        for line in [
            &b"{\"a\":1}\r\n"[..],
            b"not json\n",
            b"  {\"a\":1}\n",
            b"[1,2]\n",
            b"\xff\xfe binary\n",
            b"partial at eof",
            b"\n",
            b"{\"a\":\"\\n\"}",
            b"text with \r inside\r\n",
            // Found by fuzzing: JSON that serde_json accepts, with invalid UTF-8 in a key.
            b"{\"pa\xebrams\":1}\n",
            b"{\"a\":\"\xeb\"}\n",
        ] {
            let rec = message(line);
            if let Body::Message { payload, .. } = &rec.body {
                assert_eq!(payload.wire(), line, "wire form of {line:?}");
            }
            roundtrip(rec);
        }
    }

    #[test]
    fn stderr_and_events_round_trip() {
        for body in [
            Body::Stderr(Bytes::from_static(b"warn: x\n")),
            Body::Stderr(Bytes::from_static(b"\xc3\x28 bad utf8")),
            Body::Event(Event::AgentExit { code: 3 }),
        ] {
            roundtrip(Record {
                seq: 1,
                unix_us: -5,
                mono_us: 0,
                body,
            });
        }
    }

    #[test]
    fn crc_detects_every_single_byte_change() {
        let mut out = Vec::new();
        encode_record(&message(b"{\"id\":1,\"method\":\"x\"}\n"), &mut out);
        let line = &out[..out.len() - 1];
        for i in 0..line.len() {
            for bit in 0..8 {
                let mut bad = line.to_vec();
                bad[i] ^= 1 << bit;
                assert!(decode_record(&bad).is_err(), "flip at byte {i} bit {bit}");
            }
        }
    }

    #[test]
    fn header_round_trips_and_newer_versions_are_refused() {
        let header = Header {
            acpj: FORMAT_VERSION,
            kind: SegmentKind::Session,
            session: Some("s\n1".into()),
            run: "r".into(),
            proxy: "acp-journal test".into(),
            started: 1,
            pid: 2,
            argv: vec!["agent".into()],
            cwd: Some("/tmp".into()),
            connection: None,
            initialize: None,
        };
        let mut out = Vec::new();
        encode_header(&header, &mut out);
        let back = decode_header(&out[..out.len() - 1]).unwrap();
        assert_eq!(back.session.as_deref(), Some("s\n1"));
        let newer = Header {
            acpj: FORMAT_VERSION + 1,
            ..header
        };
        let mut out = Vec::new();
        encode_header(&newer, &mut out);
        assert!(matches!(
            decode_header(&out[..out.len() - 1]),
            Err(DecodeError::UnsupportedVersion { .. })
        ));
    }
}
