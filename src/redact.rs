//! Redaction of the journal copy of a message. Pure: the forwarded bytes are never touched.
//!
//! Two passes, both only on what is written to disk:
//! - **Structural**: values of `mcpServers[].env[]` and `mcpServers[].headers[]` in session
//!   setup requests (`session/new`, `session/load`, `session/resume`, `session/fork`) and of
//!   `env[]` in `terminal/create` become `"[REDACTED]"`; names are kept. In `mcpServers[].args`
//!   the value after a secret-named option (`--api-key VALUE`, `--token=VALUE`) and in
//!   `mcpServers[].url` and `args` secret-named query parameters (`?api_key=…`) are redacted as
//!   in the agent's command line ([`redact_argv`], [`redact_query`]).
//! - **Token-shaped strings** anywhere in the line (API keys, bearer tokens, JWTs) become
//!   `[REDACTED]`. A match never contains `"` or `\`, so replacing it keeps JSON valid.

use std::sync::OnceLock;

use bytes::Bytes;
use regex::bytes::Regex;
use serde_json::Value;

use crate::journal::Event;
use crate::journal::format::{Body, Record};
use crate::wire::envelope::{self, Kind, Peek};

/// The replacement text.
pub const REDACTED: &str = "[REDACTED]";

/// Methods whose params carry `mcpServers`.
const SESSION_SETUP: &[&str] = &[
    "session/new",
    "session/load",
    "session/resume",
    "session/fork",
];

fn token_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r"(?x)
            (?P<bearer>(?i:bearer)(?-u:\s)+)[A-Za-z0-9._~+/\-]{16,}=*
            | sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}
            | gh[pousr]_[A-Za-z0-9]{30,}
            | github_pat_[A-Za-z0-9_]{30,}
            | glpat-[A-Za-z0-9_\-]{20,}
            | xox[abposr]-[A-Za-z0-9\-]{10,}
            | AKIA[0-9A-Z]{16}
            | AIza[0-9A-Za-z_\-]{35}
            | npm_[A-Za-z0-9]{36}
            | hf_[A-Za-z0-9]{30,}
            | eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}
            ",
        )
        .expect("the token pattern compiles")
    })
}

/// Replace token-shaped substrings; `None` when there are none.
///
/// Safe inside JSON text: a match never contains `"` or `\`, and a match that begins with the
/// letter of an escape (`\n` followed by `pm_…`) keeps that letter, so the escape stays whole.
pub fn redact_tokens(bytes: &[u8]) -> Option<Vec<u8>> {
    let re = token_regex();
    if !re.is_match(bytes) {
        return None;
    }
    let out = re.replace_all(bytes, |caps: &regex::bytes::Captures<'_>| {
        let whole = caps.get(0).expect("the whole match");
        let mut r = match caps.name("bearer") {
            Some(bearer) => bearer.as_bytes().to_vec(),
            None if escaped(bytes, whole.start()) => whole.as_bytes()[..1].to_vec(),
            None => Vec::new(),
        };
        r.extend_from_slice(REDACTED.as_bytes());
        r
    });
    Some(out.into_owned())
}

/// `text` for the catalog: its token-shaped parts redacted when `on` (`--no-redact` turns it
/// off).
pub fn redact_text(text: String, on: bool) -> String {
    if !on {
        return text;
    }
    match redact_tokens(text.as_bytes()) {
        Some(redacted) => String::from_utf8_lossy(&redacted).into_owned(),
        None => text,
    }
}

/// True when the byte at `at` follows an odd number of backslashes (it is escaped).
fn escaped(bytes: &[u8], at: usize) -> bool {
    bytes[..at]
        .iter()
        .rev()
        .take_while(|b| **b == b'\\')
        .count()
        % 2
        == 1
}

/// Redact token-shaped substrings in every string of a JSON value, object keys included
/// (proxy events); true when something changed.
pub fn redact_value(value: &mut Value) -> bool {
    let redacted =
        |s: &str| redact_tokens(s.as_bytes()).map(|r| String::from_utf8_lossy(&r).into_owned());
    match value {
        Value::String(s) => match redacted(s) {
            Some(r) => {
                *s = r;
                true
            }
            None => false,
        },
        Value::Array(items) => items.iter_mut().fold(false, |c, v| redact_value(v) | c),
        Value::Object(map) => {
            let mut changed = false;
            if map.keys().any(|k| redacted(k).is_some()) {
                *map = std::mem::take(map)
                    .into_iter()
                    .map(|(k, v)| (redacted(&k).unwrap_or(k), v))
                    .collect();
                changed = true;
            }
            map.values_mut().fold(changed, |c, v| redact_value(v) | c)
        }
        _ => false,
    }
}

/// Redact token-shaped strings anywhere in an event's JSON ([`redact_value`]). True when
/// something changed.
pub fn redact_event(event: &mut Event) -> bool {
    let mut value = event.to_value();
    if !redact_value(&mut value) {
        return false;
    }
    *event = serde_json::from_value(value).expect("any JSON is an event");
    true
}

/// Redact a journal record again (as `export` does): its message as the proxy would have,
/// token-shaped strings in stderr and events. True when something changed.
pub fn redact_record(record: &mut Record) -> bool {
    match &mut record.body {
        Body::Message { payload, .. } => {
            // Only a setup request or `terminal/create` is redacted structurally: a line that
            // cannot be one needs only the token pass, and no peek for its method.
            let clean = if may_be_structural(&payload.bytes) {
                redact_line(&envelope::peek(&payload.bytes), &payload.bytes)
            } else {
                redact_tokens(&payload.bytes)
            };
            match clean {
                Some(clean) => {
                    payload.bytes = Bytes::from(clean);
                    payload.redacted = true;
                    true
                }
                None => false,
            }
        }
        Body::Stderr(bytes) => match redact_tokens(bytes) {
            Some(clean) => {
                *bytes = Bytes::from(clean);
                true
            }
            None => false,
        },
        Body::Event(event) => redact_event(event),
    }
}

/// False only when `body` cannot be a message whose method is one the structural pass redacts:
/// without a backslash a JSON string is its bytes, so such a method would be spelled out,
/// quotes included.
fn may_be_structural(body: &[u8]) -> bool {
    static METHODS: OnceLock<Vec<memchr::memmem::Finder<'static>>> = OnceLock::new();
    let methods = METHODS.get_or_init(|| {
        SESSION_SETUP
            .iter()
            .chain(&["terminal/create"])
            .map(|m| memchr::memmem::Finder::new(format!("\"{m}\"").as_bytes()).into_owned())
            .collect()
    });
    memchr::memchr(b'\\', body).is_some() || methods.iter().any(|m| m.find(body).is_some())
}

/// Redact an MCP server's `args` as [`redact_argv`] does, and its `url`'s query.
fn redact_server(server: &mut Value) -> bool {
    let mut changed = false;
    if let Some(Value::Array(args)) = server.get_mut("args")
        && args.iter().all(Value::is_string)
    {
        let given: Vec<String> = args
            .iter()
            .map(|a| a.as_str().unwrap_or_default().to_string())
            .collect();
        let redacted = redact_argv(&given);
        if redacted != given {
            *args = redacted.into_iter().map(Value::String).collect();
            changed = true;
        }
    }
    if let Some(Value::String(url)) = server.get_mut("url")
        && let Some(redacted) = redact_query(url)
    {
        *url = redacted;
        changed = true;
    }
    changed
}

/// Replace the `value` of every `{name, value}` entry in `list` (or every value of an object).
fn redact_values(list: Option<&mut Value>) -> bool {
    let mut changed = false;
    match list {
        Some(Value::Array(items)) => {
            for item in items {
                if let Some(v) = item.get_mut("value") {
                    *v = Value::String(REDACTED.into());
                    changed = true;
                }
            }
        }
        Some(Value::Object(map)) => {
            for v in map.values_mut() {
                *v = Value::String(REDACTED.into());
                changed = true;
            }
        }
        _ => {}
    }
    changed
}

/// Structural redaction of a message body (a JSON object without line ending).
fn redact_structure(method: &str, body: &[u8]) -> Option<Vec<u8>> {
    let setup = SESSION_SETUP.contains(&method);
    if !setup && method != "terminal/create" {
        return None;
    }
    let mut msg: Value = serde_json::from_slice(body).ok()?;
    let params = msg.get_mut("params")?;
    let mut changed = false;
    if setup {
        if let Some(Value::Array(servers)) = params.get_mut("mcpServers") {
            for server in servers {
                changed |= redact_values(server.get_mut("env"));
                changed |= redact_values(server.get_mut("headers"));
                changed |= redact_server(server);
            }
        }
    } else {
        changed |= redact_values(params.get_mut("env"));
    }
    // Also when nothing was redacted but the compact form differs: the parse kept only the last
    // of duplicate members (`"params":{…secret…},"params":{}`), and the original bytes would
    // keep a secret the parse never saw.
    let compact = serde_json::to_vec(&msg).expect("a Value serializes");
    (changed || compact != body).then_some(compact)
}

/// The redacted journal copy of a line body, or `None` when nothing needs redacting.
/// `method` is the request/notification method, if any.
pub fn redact_message(method: Option<&str>, body: &[u8]) -> Option<Vec<u8>> {
    let structural = method.and_then(|m| redact_structure(m, body));
    match structural {
        Some(s) => Some(redact_tokens(&s).unwrap_or(s)),
        None => redact_tokens(body),
    }
}

/// The redacted journal copy of a line the proxy peeked at, or `None` when nothing needs
/// redacting. A JSON object the peek could not classify (a duplicate `method`, say) is parsed
/// for its method, so a setup request cannot hide from the structural pass.
pub fn redact_line(peek: &Peek<'_>, body: &[u8]) -> Option<Vec<u8>> {
    if peek.kind != Kind::OtherJson || peek.method().is_some() {
        return redact_message(peek.method(), body);
    }
    let method = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| Some(v.get("method")?.as_str()?.to_string()));
    redact_message(method.as_deref(), body)
}

/// True for an option or parameter name that says its value is a secret.
fn sensitive(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "key",
        "token",
        "secret",
        "password",
        "passwd",
        "auth",
        "credential",
        "signature",
    ]
    .iter()
    .any(|w| n.contains(w))
}

/// Redact the values of secret-named query parameters in the URLs of `text` (`?api_key=…`,
/// `&access_token=…`, `;token=…`); `None` when there are none.
pub fn redact_query(text: &str) -> Option<String> {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        regex::Regex::new(r#"([?&;])([A-Za-z0-9_.\-]+)=([^&#;\s"'\\]+)"#)
            .expect("the query pattern compiles")
    });
    let mut changed = false;
    let out = re.replace_all(text, |caps: &regex::Captures<'_>| {
        if sensitive(&caps[2]) && &caps[3] != REDACTED {
            changed = true;
            format!("{}{}={REDACTED}", &caps[1], &caps[2])
        } else {
            caps[0].to_string()
        }
    });
    changed.then(|| out.into_owned())
}

/// Redact an agent command line for the journal header: token-shaped strings, values of
/// `--*key*|token|secret|password*` options and of `NAME=value` arguments with such names,
/// secret-named query parameters of URLs.
pub fn redact_argv(argv: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    let mut hide_next = false;
    for arg in argv {
        if hide_next {
            out.push(REDACTED.to_string());
            hide_next = false;
            continue;
        }
        if let Some((name, _)) = arg.split_once('=') {
            if sensitive(name) {
                out.push(format!("{name}={REDACTED}"));
                continue;
            }
        } else if arg.starts_with('-') && sensitive(arg) {
            hide_next = true;
        }
        let arg = redact_query(arg).unwrap_or_else(|| arg.clone());
        out.push(match redact_tokens(arg.as_bytes()) {
            Some(r) => String::from_utf8_lossy(&r).into_owned(),
            None => arg,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: Option<Vec<u8>>) -> String {
        String::from_utf8(v.expect("redacted")).unwrap()
    }

    #[test]
    fn mcp_server_env_and_headers_are_redacted() {
        let line = br#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[{"name":"gh","command":"x","args":[],"env":[{"name":"GH_TOKEN","value":"hunter2"}]},{"type":"http","name":"h","url":"u","headers":[{"name":"Authorization","value":"Basic abc"}]}]}}"#;
        let out = s(redact_message(Some("session/new"), line));
        assert!(
            !out.contains("hunter2") && !out.contains("Basic abc"),
            "{out}"
        );
        assert!(out.contains("GH_TOKEN") && out.contains("Authorization"));
        let _: Value = serde_json::from_str(&out).unwrap();
    }

    #[test]
    fn a_secret_in_a_duplicate_member_is_not_kept() {
        let line = br#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[{"name":"m","command":"x","args":[],"env":[{"name":"K","value":"hunter2"}]}]},"params":{"cwd":"/w","mcpServers":[]}}"#;
        let out = s(redact_message(Some("session/new"), line));
        assert!(!out.contains("hunter2"), "{out}");
        // A compact message with nothing to redact is kept as it is.
        let clean = br#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}"#;
        assert_eq!(redact_message(Some("session/new"), clean), None);
    }

    #[test]
    fn a_setup_request_the_peek_cannot_classify_is_still_redacted() {
        // Found by fuzzing: two `method` members make the line "other JSON" to the peek.
        let line = br#"{"jsonrpc":"2.0","method":"x","id":1,"method":"session/load","params":{"sessionId":"s","mcpServers":[{"name":"m","command":"x","args":[],"env":[{"name":"K","value":"hunter2"}]}]}}"#;
        let peek = envelope::peek(line);
        assert_eq!(peek.kind, Kind::OtherJson);
        let out = s(redact_line(&peek, line));
        assert!(!out.contains("hunter2"), "{out}");
    }

    #[test]
    fn terminal_env_is_redacted() {
        let line = br#"{"jsonrpc":"2.0","id":"t","method":"terminal/create","params":{"sessionId":"s","command":"ls","env":[{"name":"PW","value":"x"}]}}"#;
        let out = s(redact_message(Some("terminal/create"), line));
        assert!(out.contains(r#""value":"[REDACTED]""#));
    }

    #[test]
    fn token_shaped_strings_are_redacted_and_json_stays_valid() {
        for secret in [
            "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123",
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "AKIAIOSFODNN7EXAMPLE",
            "xoxb-1234567890-abcdefghij",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        ] {
            let line = format!(
                r#"{{"method":"session/prompt","params":{{"prompt":[{{"type":"text","text":"use {secret} please"}}]}}}}"#
            );
            let out = s(redact_message(Some("session/prompt"), line.as_bytes()));
            assert!(!out.contains(secret), "{out}");
            let _: Value = serde_json::from_str(&out).unwrap();
        }
        let out = s(redact_tokens(
            b"Authorization: Bearer abcdefghijklmnopqrstuvwxyz",
        ));
        assert_eq!(out, "Authorization: Bearer [REDACTED]");
        assert_eq!(
            redact_message(Some("session/prompt"), br#"{"text":"hello sk-short"}"#),
            None
        );
    }

    #[test]
    fn argv_secrets_are_redacted() {
        let argv: Vec<String> = [
            "agent",
            "--api-key",
            "abc",
            "--token=xyz",
            "OPENAI_API_KEY=q",
            "--model",
            "m",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            redact_argv(&argv),
            [
                "agent",
                "--api-key",
                REDACTED,
                "--token=[REDACTED]",
                "OPENAI_API_KEY=[REDACTED]",
                "--model",
                "m"
            ]
        );
    }

    #[test]
    fn mcp_server_args_and_url_queries_are_redacted() {
        let line = br#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[{"name":"a","command":"x","args":["--api-key","hunter2","--token=hunter3","--password","hunter4","--verbose","serve","https://h/x?user=me&api_key=hunter5#f"],"env":[]},{"type":"http","name":"h","url":"https://mcp.example/sse?access_token=hunter6&region=eu;key=hunter7","headers":[]}]}}"#;
        let out = s(redact_message(Some("session/new"), line));
        for secret in [
            "hunter2", "hunter3", "hunter4", "hunter5", "hunter6", "hunter7",
        ] {
            assert!(!out.contains(secret), "{secret}: {out}");
        }
        for kept in [
            "--api-key",
            "--token=[REDACTED]",
            "--verbose",
            "\"serve\"",
            "user=me",
            "region=eu",
            "#f",
        ] {
            assert!(out.contains(kept), "{kept}: {out}");
        }
        let _: Value = serde_json::from_str(&out).unwrap();
        let clean = br#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[{"name":"a","command":"x","args":["--port","8080","https://h/?q=1"],"env":[]}]}}"#;
        assert_eq!(redact_message(Some("session/new"), clean), None);
    }

    #[test]
    fn url_query_secrets_are_redacted() {
        assert_eq!(
            redact_query("GET https://a.example/v1?key=abc&q=x&api_key=def&Access_Token=ghi")
                .as_deref(),
            Some(
                "GET https://a.example/v1?key=[REDACTED]&q=x&api_key=[REDACTED]&Access_Token=[REDACTED]"
            )
        );
        assert_eq!(redact_query("https://a.example/?q=key&page=2"), None);
        assert_eq!(redact_query("?token="), None, "nothing to hide");
        assert_eq!(redact_query(&format!("?token={REDACTED}")), None);
        assert_eq!(
            redact_argv(&[
                "agent".into(),
                "--url=https://h/?token=s3cret".into(),
                "https://h/?a=1&sig=x&signature=y".into()
            ]),
            [
                "agent",
                "--url=https://h/?token=[REDACTED]",
                "https://h/?a=1&sig=x&signature=[REDACTED]"
            ]
        );
    }
}
