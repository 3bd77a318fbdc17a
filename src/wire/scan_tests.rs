//! The scan against serde_json: on every line it reads, [`peek`] must equal
//! [`parsed_peek`]; and it must read the lines agents and editors send.

use super::{Session, scan};
use crate::seeded::Seeded;
use crate::wire::envelope::{parsed_peek, peek};

/// Lines as they cross the proxy, and the shapes the scan leaves to serde_json.
const LINES: &[&str] = &[
    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sba3b1316fb2c063","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Let me look at the splitter first. It reads \"lines\" and\nsplits them\u00e9 \ud83d\ude00."}}}}"#,
    r#"{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"go"}]}}"#,
    r#"{"jsonrpc":"2.0","id":"a-1","result":{"stopReason":"end_turn","usage":{"inputTokens":12,"outputTokens":3.5e2}}}"#,
    r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error","data":null}}"#,
    r#"{"jsonrpc":"2.0","id":3,"result":null}"#,
    r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":false},"terminal":true}}}"#,
    r#"{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionId":"inner"},"sessionId":"outer"}}"#,
    r#"{"jsonrpc":"2.0","method":"session/update","params":{"session\u0049d":"escaped name"}}"#,
    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s\n1"}}"#,
    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":5,"x":1}}"#,
    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":null}}"#,
    r#"{"jsonrpc":"2.0","method":"session/update","params":[1,2,{"sessionId":"no"}]}"#,
    r#"{"jsonrpc":"2.0","method":"m","params":"text"}"#,
    r#"{ "jsonrpc" : "2.0" , "id" : -12 , "method" : "x" , "params" : { } }"#,
    r#"{"jsonrpc":"2.0","id":1.0,"method":"x"}"#,
    r#"{"jsonrpc":"2.0","id":1e2,"method":"x"}"#,
    r#"{"jsonrpc":"2.0","id":-0,"method":"x"}"#,
    r#"{"jsonrpc":"2.0","id":012,"method":"x"}"#,
    r#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"x"}"#,
    r#"{"jsonrpc":"2.0","id":"\u0061","method":"x"}"#,
    r#"{"jsonrpc":"2.0","id":[1],"method":"x"}"#,
    r#"{"jsonrpc":"2.0","id":{},"result":{}}"#,
    r#"{"jsonrpc":"2.0","id":true,"result":1}"#,
    r#"{"jsonrpc":"2.0","method":null,"id":4,"result":[]}"#,
    r#"{"jsonrpc":"2.0","method":5}"#,
    r#"{"jsonrpc":"2.0","method":"a","method":"b"}"#,
    r#"{"jsonrpc":"2.0","id":1,"id":2,"result":0}"#,
    r#"{"jsonrpc":"2.0","m\u0065thod":"x"}"#,
    r#"{"jsonrpc":"2.0","id":9,"result":1,"error":{"code":1}}"#,
    r#"{"jsonrpc":"2.0","id":9,"error":{"code":1},"result":null}"#,
    r#"{"id":1}"#,
    r#"{}"#,
    r#"{ }"#,
    r#"{"a":[[[[[[[[[]]]]]]]]],"method":"deep"}"#,
    r#"{"method":"x","params":{"a":"\ud800"}}"#,
    r#"{"method":"\ud800"}"#,
    r#"{"method":"x","params":{"a":"\x"}}"#,
    r#"{"method":"x","params":{"a":"\u12g4"}}"#,
    r#"{"method":"x","params":{"a":1,}}"#,
    r#"{"method":"x",}"#,
    r#"{"method":"x"} "#,
    r#"{"method":"x"}}"#,
    r#"{"method":"x"}{"#,
    r#"{"method":"x","params":{"a":tru}}"#,
    r#"{"method":"x","params":{"a":-}}"#,
    r#"{"method":"x","params":{"a":1.}}"#,
    r#"{"method":"x","params":{"a":1e}}"#,
    r#"{"method":"x","params":{"a":.5}}"#,
    r#"{"method":"x","params":{"a":+1}}"#,
    r#"{"method":"x","params":{"a" 1}}"#,
    r#"{"method":"x","params":{1:1}}"#,
    r#"{"method":"x","params":{"a":1"b":2}}"#,
    r#"{"method":"x","params":{"a":[1 2]}}"#,
    "{\"method\":\"x\",\"params\":{\"a\":\"tab\tinside\"}}",
    "{\"method\":\"x\",\"params\":{\"a\":\"del\u{7f}ok\"}}",
    "{\"method\":\"x\",\"params\":{\"a\":1}}\u{c}",
    "{\"method\":\"x\",\u{c}\"params\":{}}",
    "{\"method\":\"x\",\"params\":{\"a\":\"\u{e9}\u{1F600}\"}}",
    r#"[{"jsonrpc":"2.0","method":"x"}]"#,
    "42",
    "hello",
    "",
];

fn agree(line: &[u8]) {
    let slow = parsed_peek(line.trim_ascii());
    assert_eq!(
        peek(line),
        slow,
        "the scan and serde_json disagree on {:?}",
        String::from_utf8_lossy(line)
    );
}

#[test]
fn agrees_with_serde_json_on_every_shape() {
    for line in LINES {
        agree(line.as_bytes());
    }
    // Invalid UTF-8 inside a string serde_json does not keep, and inside one it keeps.
    agree(b"{\"method\":\"x\",\"extra\":\"\xff\"}");
    agree(b"{\"method\":\"x\",\"params\":{\"a\":\"\xc3\"}}");
    agree(b"{\"method\":\"\xff\"}");
    // Nesting deeper than the scan goes, and than serde_json's recursion limit.
    for depth in [100, 127, 128, 129, 200, 5000] {
        let deep = format!(
            r#"{{"method":"x","params":{{"a":{}1{}}}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        agree(deep.as_bytes());
    }
}

#[test]
fn reads_the_lines_peers_send() {
    for line in &LINES[..7] {
        assert!(
            scan(line.as_bytes()).is_some(),
            "left to serde_json: {line}"
        );
    }
    let s = scan(LINES[6].as_bytes()).unwrap();
    assert_eq!(s.session, Session::Some("outer"));
    assert!(scan(LINES[7].as_bytes()).is_some_and(|s| s.session == Session::Unsure));
}

#[test]
fn agrees_with_serde_json_on_mutated_lines() {
    const ALPHABET: &[u8] = b"{}[]\":,\\ \t\n0123456789-+.eEuabfnrtlsx\x01\x1f\x7f\xc3\xa9\xff";
    let mut rng = Seeded(0xACB_2026);
    let mut below = |n: usize| rng.below(n as u64) as usize;
    let mut scanned = 0;
    for case in 0..40_000 {
        let mut line = LINES[case % LINES.len()].as_bytes().to_vec();
        for _ in 0..=below(3) {
            let at = below(line.len() + 1);
            let byte = ALPHABET[below(ALPHABET.len())];
            match below(4) {
                0 => line.insert(at, byte),
                1 if at < line.len() => {
                    line.remove(at);
                }
                2 if at < line.len() => line[at] = byte,
                _ => {
                    let end = (at + below(12)).min(line.len());
                    let span = line[at..end].to_vec();
                    line.splice(at..at, span);
                }
            }
        }
        scanned += usize::from(
            line.trim_ascii().first() == Some(&b'{') && scan(line.trim_ascii()).is_some(),
        );
        agree(&line);
    }
    // Most mutations keep a line valid: the scan read a good share of them itself.
    assert!(scanned > 3_000, "the scan read {scanned} of 40 000");
}

/// The SSE2 test of sixteen bytes marks exactly the bytes a string cannot hold as they are,
/// every byte value at every position.
#[cfg(target_arch = "x86_64")]
#[test]
fn sixteen_bytes_at_a_time_mark_quotes_backslashes_and_control_characters() {
    for byte in 0..=u8::MAX {
        let special = byte == b'"' || byte == b'\\' || byte < 0x20;
        for at in 0..16 {
            let mut chunk = [b'a'; 16];
            chunk[at] = byte;
            let want = if special { 1 << at } else { 0 };
            assert_eq!(super::special16(&chunk), want, "byte {byte:#04x} at {at}");
        }
    }
    // Several at once: each marked, lowest first.
    assert_eq!(
        super::special16(b"ab\"cd\\ef\x1fgh\x7f\xc3\xa9i\""),
        0b1000_0001_0010_0100
    );
}
