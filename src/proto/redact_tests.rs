//! Redaction through the core: every record the proxy journals, its own lines and events
//! included, leaves secrets out, while the peers receive them unaltered.

use bytes::Bytes;
use serde_json::json;

use super::tests::Harness;
use super::*;
use crate::journal::format::Body;
use crate::journal::format::{decode_record, encode_record};
use crate::redact;

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#;
/// An agent without `loadSession`: loads are served from the journal.
const INIT_OK: &str =
    r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{}}}"#;
const ENV_SECRET: &str = "hunter2-env-value";
const TOKEN: &str = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";

/// Every journaled record, encoded as on disk.
fn journal_bytes(h: &Harness) -> String {
    let mut out = Vec::new();
    for record in h.journals.values().flatten() {
        encode_record(record, &mut out);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A load the proxy serves from the journal, whose `mcpServers` carry a secret.
fn served_load(turns: usize) -> Harness {
    let mut h = Harness::with(Config::default());
    h.client(INIT);
    h.agent(INIT_OK);
    let load = json!({"jsonrpc":"2.0","id":5,"method":"session/load","params":{"sessionId":"S","cwd":"/w","mcpServers":[{"name":"m","command":"x","args":[],"env":[{"name":"API_KEY","value":ENV_SECRET}]}]}});
    h.client(&load.to_string());
    let Some(Action::FetchHistory { load, .. }) = h.requests.last().cloned() else {
        panic!("the load is served from the journal");
    };
    let at = h.stamp();
    let summary = Summary {
        turns,
        transcript: "User: hi\n".into(),
        ..Summary::default()
    };
    h.proxy.handle_history(at, load, HistoryChunk::End(summary));
    h.drain();
    h
}

#[test]
fn the_session_new_the_proxy_sends_under_a_load_is_journaled_redacted() {
    let h = served_load(0);
    let sent = String::from_utf8_lossy(h.to_agent.last().unwrap()).into_owned();
    assert!(
        sent.contains("\"session/new\"") && sent.contains(ENV_SECRET),
        "{sent}"
    );
    let journal = journal_bytes(&h);
    assert!(
        !journal.contains(ENV_SECRET) && journal.contains("API_KEY"),
        "{journal}"
    );
}

#[test]
fn a_reprimed_prompt_is_journaled_redacted() {
    let mut h = served_load(1);
    h.agent(r#"{"jsonrpc":"2.0","id":"acp-journal:0","result":{"sessionId":"U"}}"#);
    let prompt = json!({"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":format!("use {TOKEN}")}]}});
    h.client(&prompt.to_string());
    let sent = String::from_utf8_lossy(h.to_agent.last().unwrap()).into_owned();
    assert!(
        sent.contains("Context restored") && sent.contains(TOKEN),
        "{sent}"
    );
    let journal = journal_bytes(&h);
    assert!(
        journal.contains("\"reprimed\"") && !journal.contains(TOKEN),
        "{journal}"
    );
}

#[test]
fn a_line_the_proxy_consumes_is_journaled_redacted() {
    let mut h = Harness::with(Config::default());
    h.client(INIT);
    h.agent(INIT_OK);
    h.client(r#"{"jsonrpc":"2.0","id":5,"method":"session/load","params":{"sessionId":"S","mcpServers":[]}}"#);
    let cancel = format!(
        r#"{{"jsonrpc":"2.0","method":"$/cancel_request","params":{{"requestId":5,"why":"{TOKEN}"}}}}"#
    );
    h.client(&cancel);
    let journal = journal_bytes(&h);
    assert!(
        journal.contains("$/cancel_request") && !journal.contains(TOKEN),
        "{journal}"
    );
}

#[test]
fn lines_that_are_not_utf8_are_redacted_too() {
    let mut h = Harness::new();
    let line = Bytes::from([&b"\xff\xfe "[..], TOKEN.as_bytes(), b"\n"].concat());
    let at = h.stamp();
    h.proxy.handle_line(at, Peer::Agent, line.clone());
    h.drain();
    assert_eq!(h.to_client, [line], "forwarded unaltered");
    let record = &h.journals[&Target::Run][0];
    let Body::Message { payload, .. } = &record.body else {
        panic!("a message record");
    };
    assert!(payload.redacted);
    assert!(memchr::memmem::find(&payload.bytes, TOKEN.as_bytes()).is_none());
}

#[test]
fn a_token_behind_a_json_escape_leaves_the_record_readable() {
    let mut h = Harness::new();
    // `\n` then `pm_…`: the escape letter and the token pattern `npm_…` overlap.
    let line = r#"{"jsonrpc":"2.0","method":"x","params":{"t":"a\npm_abcdefghijklmnopqrstuvwxyz0123456789"}}"#;
    h.agent(line);
    let record = &h.journals[&Target::Run][0];
    let mut encoded = Vec::new();
    encode_record(record, &mut encoded);
    let back = decode_record(&encoded[..encoded.len() - 1]).expect("the record reads back");
    assert_eq!(&back, record);
    assert!(!String::from_utf8_lossy(&encoded).contains("pm_abcdefghij"));
}

#[test]
fn a_token_in_an_object_key_of_an_event_is_redacted() {
    let mut value = json!({"sent": [{format!("ty{TOKEN}pe"): "text", "text": "fine"}]});
    assert!(redact::redact_value(&mut value));
    let text = value.to_string();
    assert!(!text.contains(TOKEN), "{text}");
    assert_eq!(value["sent"][0]["text"], "fine");
}
