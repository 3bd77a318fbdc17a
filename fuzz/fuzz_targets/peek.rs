//! Fuzz the peek's byte scan against serde_json: whatever the line, `peek` (the scan, or
//! serde_json when the scan gives up) must give what serde_json alone gives.

#![no_main]

use acp_journal::wire::envelope::{parsed_peek, peek};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    assert_eq!(peek(data), parsed_peek(data.trim_ascii()));
});
