//! Fuzz the segment reader on arbitrary bytes (seeded with real segments from `journals/`):
//! it never panics, always ends with a tail, and reads a prefix of a file as a prefix of its
//! records. Memory and time are bounded by libFuzzer's `-rss_limit_mb`, `-malloc_limit_mb`
//! and `-timeout` (set by `scripts/fuzz.sh`).

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "segment.rs"]
mod segment;

fuzz_target!(|data: &[u8]| {
    let records = segment::read(data);
    // Also search the way `search` does: the needle is the file's last bytes.
    if let Ok(mut reader) = acp_journal::journal::SegmentReader::new(data) {
        let needle = &data[data.len().saturating_sub(3)..];
        while reader.next_containing(needle).is_some() {}
        assert!(reader.tail().is_some());
    }
    let cut = data.iter().fold(0usize, |a, b| {
        a.wrapping_mul(31).wrapping_add(usize::from(*b))
    });
    segment::check_prefix(data, &records, cut);
});
