//! The proxy's own journal events (`{"event": {"type": …}}` records): what it observed or did.
//!
//! Encoded with the `type` first and the fields in declaration order, exactly as journals have
//! always held them. An event that does not match a known variant exactly (an unknown `type`
//! from an older or newer proxy, an extra field, a field of another type) decodes as
//! [`Event::Other`] holding the JSON as read, so it is shown and re-encoded unchanged.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::wire::Side;

/// One journal event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Event {
    /// The agent process exited with `code` (128 + signal when it was killed).
    AgentExit {
        /// The exit code.
        code: i32,
    },
    /// The agent outlived the grace period after the client left and was sent `signal`.
    Terminate {
        /// The signal sent.
        signal: i32,
    },
    /// Our stdout broke: the client is gone.
    ClientGone,
    /// A journal stopped on a write error.
    JournalError {
        /// Which journal (`the connection`, `session "S"`).
        journal: String,
        /// The error.
        error: String,
        /// The disk the journals are on is full: every journal stopped.
        store_full: bool,
    },
    /// The proxy received `signal` and forwarded it to the agent.
    Signal {
        /// The signal.
        signal: i32,
    },
    /// A peer closed its stream.
    Eof {
        /// Which peer.
        from: Side,
    },
    /// A synthetic load replayed `lines` lines of the journal to the client.
    Replayed {
        /// How many lines.
        lines: u64,
    },
    /// The session continues under another ID at the agent.
    SessionMapped {
        /// The agent's session ID.
        agent_session: String,
    },
    /// The earlier turns were sent with the first prompt after a fresh session.
    Reprimed {
        /// The prompt as sent (JSON).
        sent: Value,
    },
    /// The proxy added its history MCP server (`--offer-history`) to the `mcpServers` of the
    /// setup request before it: what the agent was given besides what the client sent.
    HistoryOffered {
        /// The `mcpServers` entry added (JSON).
        server: Value,
    },
    /// The agent exited (with `code`, 128 + signal when killed) while the client was connected,
    /// and was started again.
    AgentRestarted {
        /// Its exit code.
        code: i32,
    },
    /// The bridge's connection to the host (`--connect`) dropped while the client was
    /// connected: it connects again, and the sessions are restored on the host as after an
    /// agent restart (the host's agent may have lived on).
    HostDropped,
    /// A session lost in an agent restart was brought up again on the new agent, by `how`
    /// (`session/resume`, `session/load` or `session/new`).
    SessionRestored {
        /// The method that brought it up.
        how: String,
    },
    /// A prompt got no message from the agent for `--stall-timeout`: the proxy sent
    /// `session/cancel` (`action` `cancel`), then, still without an answer, restarted the agent
    /// (`restart`).
    PromptStalled {
        /// What the proxy did.
        action: String,
    },
    /// A restarted agent did not answer the client's recorded `initialize` within the timeout
    /// (`after_ms` milliseconds): the proxy killed it, to restart it again or end.
    InitTimeout {
        /// How long it had waited.
        after_ms: u64,
    },
    /// The live OTLP export (`--otlp`) lost `spans` spans (backend down, slow or refusing) and
    /// never saw `records` session records (its queue was full); journaled at the end of a run.
    OtlpDropped {
        /// Spans not delivered.
        spans: u64,
        /// Records not exported.
        records: u64,
    },
    /// The writer closed the segment after `records` records (the end marker).
    SegmentEnd {
        /// Records in the segment before this one.
        records: u64,
    },
    /// The first record of a bundle: what it holds.
    BundleManifest {
        /// The manifest (JSON).
        manifest: Value,
    },
    /// The first record of a fork (`acp-journal fork`, `session/fork`): the session was made
    /// from the first `turns` prompt turns of session `parent`, cut after the turn holding
    /// `message` when it was forked at a message.
    ForkedFrom {
        /// The session it was forked from.
        parent: String,
        /// Prompt turns kept.
        turns: u64,
        /// The `messageId` it was forked at, if any.
        message: Option<String>,
    },
    /// Any other event, as read.
    #[serde(untagged)]
    Other(Value),
}

impl Event {
    /// The event's `type` (`"?"` for an unknown event without a string `type`).
    pub fn kind(&self) -> &str {
        match self {
            Event::AgentExit { .. } => "agent_exit",
            Event::Terminate { .. } => "terminate",
            Event::ClientGone => "client_gone",
            Event::JournalError { .. } => "journal_error",
            Event::Signal { .. } => "signal",
            Event::Eof { .. } => "eof",
            Event::Replayed { .. } => "replayed",
            Event::SessionMapped { .. } => "session_mapped",
            Event::Reprimed { .. } => "reprimed",
            Event::HistoryOffered { .. } => "history_offered",
            Event::AgentRestarted { .. } => "agent_restarted",
            Event::HostDropped => "host_dropped",
            Event::SessionRestored { .. } => "session_restored",
            Event::PromptStalled { .. } => "prompt_stalled",
            Event::InitTimeout { .. } => "init_timeout",
            Event::OtlpDropped { .. } => "otlp_dropped",
            Event::SegmentEnd { .. } => "segment_end",
            Event::BundleManifest { .. } => "bundle_manifest",
            Event::ForkedFrom { .. } => "forked_from",
            Event::Other(value) => value["type"].as_str().unwrap_or("?"),
        }
    }

    /// The event as JSON, exactly as it is encoded.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("an event serializes")
    }
}

impl std::fmt::Display for Event {
    /// The event's JSON, as encoded in the journal.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&serde_json::to_string(self).map_err(|_| std::fmt::Error)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn roundtrip(event: &Event, line: &str) {
        assert_eq!(serde_json::to_string(event).unwrap(), line);
        let back: Event = serde_json::from_str(line).unwrap();
        assert_eq!(&back, event, "{line}");
        assert_eq!(serde_json::to_string(&back).unwrap(), line);
    }

    #[test]
    fn every_variant_round_trips_byte_for_byte() {
        let cases = [
            (
                Event::AgentExit { code: 143 },
                r#"{"type":"agent_exit","code":143}"#,
            ),
            (
                Event::Terminate { signal: 15 },
                r#"{"type":"terminate","signal":15}"#,
            ),
            (Event::ClientGone, r#"{"type":"client_gone"}"#),
            (
                Event::JournalError {
                    journal: r#"session "S""#.into(),
                    error: "No space left on device".into(),
                    store_full: true,
                },
                r#"{"type":"journal_error","journal":"session \"S\"","error":"No space left on device","store_full":true}"#,
            ),
            (
                Event::Signal { signal: 2 },
                r#"{"type":"signal","signal":2}"#,
            ),
            (
                Event::Eof { from: Side::Client },
                r#"{"type":"eof","from":"client"}"#,
            ),
            (
                Event::Eof { from: Side::Agent },
                r#"{"type":"eof","from":"agent"}"#,
            ),
            (
                Event::Replayed { lines: 12 },
                r#"{"type":"replayed","lines":12}"#,
            ),
            (
                Event::SessionMapped {
                    agent_session: "U".into(),
                },
                r#"{"type":"session_mapped","agent_session":"U"}"#,
            ),
            (
                Event::Reprimed {
                    sent: json!([{"type": "text", "text": "hi"}]),
                },
                r#"{"type":"reprimed","sent":[{"type":"text","text":"hi"}]}"#,
            ),
            (
                Event::Reprimed { sent: Value::Null },
                r#"{"type":"reprimed","sent":null}"#,
            ),
            (
                Event::OtlpDropped {
                    spans: 3,
                    records: 0,
                },
                r#"{"type":"otlp_dropped","spans":3,"records":0}"#,
            ),
            (
                Event::SegmentEnd { records: 24 },
                r#"{"type":"segment_end","records":24}"#,
            ),
            (
                Event::BundleManifest {
                    manifest: json!({"session": "S", "turns": 2, "b": 1, "a": 0}),
                },
                r#"{"type":"bundle_manifest","manifest":{"session":"S","turns":2,"b":1,"a":0}}"#,
            ),
            (
                Event::ForkedFrom {
                    parent: "P".into(),
                    turns: 1,
                    message: None,
                },
                r#"{"type":"forked_from","parent":"P","turns":1,"message":null}"#,
            ),
            (
                Event::ForkedFrom {
                    parent: "P".into(),
                    turns: 2,
                    message: Some("m-1".into()),
                },
                r#"{"type":"forked_from","parent":"P","turns":2,"message":"m-1"}"#,
            ),
        ];
        for (event, line) in &cases {
            roundtrip(event, line);
            assert_eq!(&event.to_string(), line);
            assert_eq!(event.kind(), event.to_value()["type"]);
        }
    }

    #[test]
    fn unknown_and_unexpected_events_round_trip_as_read() {
        for line in [
            r#"{"type":"from_the_future","z":1,"a":[2,{"y":null,"b":true}]}"#,
            r#"{"type":"agent_exit","code":3,"core_dumped":true}"#,
            r#"{"type":"agent_exit","code":"3"}"#,
            r#"{"type":"session_mapped"}"#,
            r#"{"type":"eof","from":"nobody"}"#,
            r#"{"code":3}"#,
            r#"{"type":7}"#,
            r#"[1,"two"]"#,
            r#""just a string""#,
            r#"null"#,
        ] {
            let event: Event = serde_json::from_str(line).unwrap();
            let raw: Value = serde_json::from_str(line).unwrap();
            assert_eq!(event, Event::Other(raw), "{line}");
            assert_eq!(serde_json::to_string(&event).unwrap(), line);
        }
        let event: Event = serde_json::from_str(r#"{"type":"from_the_future"}"#).unwrap();
        assert_eq!(event.kind(), "from_the_future");
        assert_eq!(Event::Other(json!([1])).kind(), "?");
    }
}
