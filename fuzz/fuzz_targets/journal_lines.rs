//! Fuzz the journal's line format beneath zstd: the input is a segment's decompressed text
//! (seeded with the real segments of `journals/`, decompressed), whose CRCs are made right
//! before it is compressed, so mutations reach the header and record parsers instead of
//! stopping at a checksum. Byte 0 chooses how: bit 0 keep the CRCs as they are, bit 1 one
//! zstd frame per line, bits 2-7 how many bytes to cut off the end.

#![no_main]

use acp_journal::journal::format::{decode_header, decode_record};
use libfuzzer_sys::fuzz_target;

#[path = "segment.rs"]
mod segment;

/// `{"crc":"` + 8 hex digits + `",`.
const CRC_FIELD_LEN: usize = 18;

fn fix_crc(line: &mut [u8]) {
    if line.len() <= CRC_FIELD_LEN || !line.starts_with(b"{\"crc\":\"") {
        return;
    }
    let crc = crc_fast::crc32_iscsi(&line[CRC_FIELD_LEN..]);
    let hex = format!("{crc:08x}");
    line[8..16].copy_from_slice(hex.as_bytes());
}

fuzz_target!(|data: &[u8]| {
    let Some((&how, text)) = data.split_first() else {
        return;
    };
    let mut lines: Vec<Vec<u8>> = text.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
    for line in &mut lines {
        if how & 1 == 0 {
            fix_crc(line);
        }
        // The parsers on their own, as `verify` and `repair` use them.
        let _ = decode_header(line);
        let _ = decode_record(line);
    }
    let plain = lines.join(&b'\n');
    let mut file = if how & 2 == 0 {
        zstd::bulk::compress(&plain, 1).expect("compressing")
    } else {
        let mut out = vec![];
        for chunk in plain.split_inclusive(|b| *b == b'\n') {
            out.extend(zstd::bulk::compress(chunk, 1).expect("compressing"));
        }
        out
    };
    file.truncate(file.len().saturating_sub(usize::from(how >> 2)));
    let records = segment::read(&file);
    segment::check_prefix(
        &file,
        &records,
        usize::from(how).wrapping_mul(7919) + text.len(),
    );
});
