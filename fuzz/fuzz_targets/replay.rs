//! Fuzz the replay core: a recording made of arbitrary lines, played to arbitrary client lines,
//! and compared with itself.
//!
//! Input: `\n`-separated lines up to a line that is exactly `--`, the recording (byte 0 of each
//! line: even = from the client, odd = from the agent; the rest is the line); then the live
//! client's lines. Byte 0 of the whole input's first line also chooses `--strict` (bit 7).
//! Checks: no panic; every line the player sends is a JSON-RPC message (by the proxy's classifier); a recording differs from
//! itself in nothing; playback ends (bounded by the number of lines in and out).

#![no_main]

use acp_journal::journal::format::{FORMAT_VERSION, InitializeExchange};
use acp_journal::journal::{Body, Header, Payload, Record, SegmentKind};
use acp_journal::replay::Recording;
use acp_journal::replay::diff::diff;
use acp_journal::replay::player::Player;
use acp_journal::wire::Side;
use acp_journal::wire::envelope::{self, Kind};
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;

fn header() -> Header {
    let raw = |s: &str| serde_json::value::RawValue::from_string(s.to_string()).ok();
    Header {
        acpj: FORMAT_VERSION,
        kind: SegmentKind::Session,
        session: Some("s".into()),
        run: "fuzz".into(),
        proxy: "fuzz".into(),
        started: 0,
        pid: 1,
        argv: vec![],
        cwd: Some("/".into()),
        connection: None,
        initialize: Some(InitializeExchange {
            request: raw(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#),
            response: raw(r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}"#),
        }),
    }
}

fn drain(player: &mut Player, budget: &mut usize) {
    loop {
        let line = match player.take_immediate() {
            Some(line) => line,
            None => match player.take_out() {
                Some(out) => out.line,
                None => return,
            },
        };
        assert!(*budget > 0, "the player keeps sending");
        *budget -= 1;
        // Recorded lines are played as recorded (a line the agent sent with, say, a lone
        // surrogate escape is replayed with it), so the check is the proxy's own classifier.
        let kind = envelope::peek(&line).kind;
        assert!(
            !matches!(kind, Kind::OtherJson | Kind::Invalid),
            "the player sends JSON-RPC messages: {}",
            String::from_utf8_lossy(&line)
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let strict = data.first().is_some_and(|b| b & 0x80 != 0);
    let mut lines = data.split(|b| *b == b'\n');
    let mut records = Vec::new();
    for (i, line) in lines.by_ref().enumerate() {
        if line == b"--" {
            break;
        }
        let Some((&side, rest)) = line.split_first() else {
            continue;
        };
        let from = if side & 1 == 0 {
            Side::Client
        } else {
            Side::Agent
        };
        records.push(Record {
            seq: i as u64,
            unix_us: i as i64,
            mono_us: (i as u64) * 1000,
            body: Body::Message {
                from,
                payload: Payload::from_line(Bytes::copy_from_slice(rest)),
            },
        });
    }
    let recorded = records.len();
    let recording = Recording::from_segments("fuzz", [(header(), records)]);
    assert!(diff(&recording, &recording).changes.is_empty());
    let mut player = Player::new(recording, strict);
    let live: Vec<&[u8]> = lines.collect();
    // Each client line can release at most what was recorded, plus its own answer.
    let mut budget = (live.len() + 1) * (recorded + 2);
    for line in live {
        player.client_line(line);
        drain(&mut player, &mut budget);
    }
});
