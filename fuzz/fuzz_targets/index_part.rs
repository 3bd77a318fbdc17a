//! Fuzz the reading of the index's Parquet parts: byte 0 picks the table (sessions, turns,
//! postings, edits: 0 to 3), the rest is a part, read as the readers read one (`table::decode_*`: checked by
//! `fleet::index::bounds`, then decoded within a budget). It must never panic, and never hold
//! more than `bounds::MAX_READ_BYTES` at once beyond the part itself: counted by the same
//! per-thread counting allocator as the unit tests (`src/allocations.rs`).

#![no_main]

use acp_journal::fleet::index::bounds::MAX_READ_BYTES;
use acp_journal::fleet::index::table;
use libfuzzer_sys::fuzz_target;

#[path = "../../src/allocations.rs"]
mod allocations;

#[global_allocator]
static COUNTING: allocations::Counting = allocations::Counting;

fuzz_target!(|data: &[u8]| {
    // The parquet crate's decoders panic on some damage; `fleet::index::columns` catches that
    // and makes it the part's error. libfuzzer-sys's hook would abort on those caught panics:
    // it is replaced (a panic that reaches the harness still aborts it, libfuzzer-sys catches
    // and aborts).
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    let Some((&which, part)) = data.split_first() else {
        return;
    };
    let part = bytes::Bytes::copy_from_slice(part);
    let (peak, _) = allocations::peak_of(|| match which % 4 {
        0 => table::decode_sessions(part).map(|rows| rows.len()),
        1 => table::decode_turns(part).map(|rows| rows.len()),
        2 => table::decode_all_postings(part).map(|rows| rows.len()),
        _ => table::decode_edits(part).map(|rows| rows.len()),
    });
    assert!(peak <= MAX_READ_BYTES, "{peak} bytes held at once");
});
