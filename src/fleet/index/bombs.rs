//! Hostile Parquet parts for the tests: pages written by hand (a Thrift compact header and a
//! zstd body), put in place of a genuine part's column chunks, the footer written again around
//! them. Depends on the `parquet`, `bytes` and `zstd` crates alone, so the integration tests
//! include it too (`tests/it/index_bounds.rs`).

use std::io::Write;

use bytes::Bytes;
use parquet::file::metadata::{ParquetMetaDataReader, ParquetMetaDataWriter};

/// Parquet's page types.
pub(crate) const DATA_PAGE: i32 = 0;
/// See [`DATA_PAGE`].
pub(crate) const DICTIONARY_PAGE: i32 = 2;
/// Parquet's encodings used here.
pub(crate) const PLAIN: i32 = 0;
/// See [`PLAIN`].
pub(crate) const RLE: i32 = 3;
/// See [`PLAIN`].
pub(crate) const RLE_DICTIONARY: i32 = 8;

/// The Thrift compact protocol, written: fields (with their id deltas), varints, structures.
pub(crate) struct Compact {
    /// What was written.
    pub(crate) bytes: Vec<u8>,
    /// The last field id of each structure open.
    last: Vec<i16>,
}

impl Compact {
    /// A structure begun (the top one too).
    pub(crate) fn new() -> Compact {
        Compact {
            bytes: vec![],
            last: vec![0],
        }
    }

    /// A field's header.
    pub(crate) fn field(&mut self, wire_type: u8, id: i16) -> &mut Compact {
        let last = self.last.last().copied().unwrap_or(0);
        if id > last && id - last <= 15 {
            self.bytes.push(((id - last) as u8) << 4 | wire_type);
        } else {
            self.bytes.push(wire_type);
            self.varint(((id << 1) ^ (id >> 15)) as u16 as u64);
        }
        if let Some(l) = self.last.last_mut() {
            *l = id;
        }
        self
    }

    /// An unsigned varint.
    pub(crate) fn varint(&mut self, mut v: u64) -> &mut Compact {
        while v >= 0x80 {
            self.bytes.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.bytes.push(v as u8);
        self
    }

    /// An i32 field.
    pub(crate) fn i32(&mut self, id: i16, v: i32) -> &mut Compact {
        self.field(5, id);
        self.varint(((v << 1) ^ (v >> 31)) as u32 as u64)
    }

    /// A binary field of `len` bytes, only its length written.
    pub(crate) fn binary_len(&mut self, id: i16, len: u64) -> &mut Compact {
        self.field(8, id).varint(len)
    }

    /// A structure begun as an element of a list (no field header).
    pub(crate) fn element(&mut self) -> &mut Compact {
        self.last.push(0);
        self
    }

    /// A structure field begun.
    pub(crate) fn begin(&mut self, id: i16) -> &mut Compact {
        self.field(12, id);
        self.last.push(0);
        self
    }

    /// The structure open ended.
    pub(crate) fn end(&mut self) -> &mut Compact {
        self.bytes.push(0);
        self.last.pop();
        self
    }
}

/// A page header: `kind`, its sizes, its values and encoding; `extra` writes more fields in
/// its `DataPageHeader` (a data page).
pub(crate) fn page_header(
    kind: i32,
    uncompressed: i32,
    compressed: i32,
    values: i32,
    encoding: i32,
    extra: impl FnOnce(&mut Compact),
) -> Vec<u8> {
    let mut c = Compact::new();
    c.i32(1, kind).i32(2, uncompressed).i32(3, compressed);
    if kind == DICTIONARY_PAGE {
        c.begin(7).i32(1, values).i32(2, encoding).end();
    } else {
        c.begin(5)
            .i32(1, values)
            .i32(2, encoding)
            .i32(3, RLE)
            .i32(4, RLE);
        extra(&mut c);
        c.end();
    }
    c.end();
    c.bytes
}

/// A page holding `plain` (zstd-compressed), its header declaring `declared` bytes
/// decompressed (`plain`'s length when `None`).
pub(crate) fn page(
    kind: i32,
    values: i32,
    encoding: i32,
    plain: &[u8],
    declared: Option<i32>,
) -> Vec<u8> {
    let body = zstd::bulk::compress(plain, 3).expect("zstd");
    let uncompressed = declared.unwrap_or(plain.len() as i32);
    let mut out = page_header(
        kind,
        uncompressed,
        body.len() as i32,
        values,
        encoding,
        |_| {},
    );
    out.extend(body);
    out
}

/// Byte arrays, plain-encoded (a length of 4 bytes, then the bytes).
pub(crate) fn plain(values: &[&[u8]]) -> Vec<u8> {
    let mut out = vec![];
    for v in values {
        out.extend((v.len() as u32).to_le_bytes());
        out.extend_from_slice(v);
    }
    out
}

/// Runs of `(count, value)` in the run-length encoding of Parquet's levels and keys (values
/// of at most 8 bits; runs of no value left out).
pub(crate) fn runs(runs: &[(u32, u8)]) -> Vec<u8> {
    let mut c = Compact::new();
    for &(count, value) in runs.iter().filter(|r| r.0 > 0) {
        c.varint(u64::from(count) << 1);
        c.bytes.push(value);
    }
    c.bytes
}

/// Levels of a data page (version 1): their length, then their runs.
pub(crate) fn levels(run: &[(u32, u8)]) -> Vec<u8> {
    let encoded = runs(run);
    let mut out = (encoded.len() as u32).to_le_bytes().to_vec();
    out.extend(encoded);
    out
}

/// Dictionary keys of `bit_width` bits: the width, then the runs.
pub(crate) fn keys(bit_width: u8, run: &[(u32, u8)]) -> Vec<u8> {
    let mut out = vec![bit_width];
    out.extend(runs(run));
    out
}

/// `len` bytes of `byte`, zstd-compressed without ever being held whole, after `prefix`.
pub(crate) fn zstd_of_repeated(prefix: &[u8], byte: u8, len: usize) -> Vec<u8> {
    let mut encoder = zstd::stream::Encoder::new(Vec::new(), 19).expect("zstd");
    encoder.write_all(prefix).expect("zstd");
    let block = vec![byte; 1 << 20];
    let mut left = len;
    while left > 0 {
        let n = left.min(block.len());
        encoder.write_all(&block[..n]).expect("zstd");
        left -= n;
    }
    encoder.finish().expect("zstd")
}

/// A column chunk of pages: its bytes, and how many of them are its dictionary page.
pub(crate) struct NewChunk {
    /// The pages.
    pub(crate) bytes: Vec<u8>,
    /// The length of the dictionary page first in `bytes` (0: none).
    pub(crate) dictionary: usize,
}

/// `part` with each column chunk `replace(group, column)` gives in place of its own, the footer
/// written again to say where the chunks are.
pub(crate) fn with_chunks(
    part: &[u8],
    mut replace: impl FnMut(usize, usize) -> Option<NewChunk>,
) -> Vec<u8> {
    let metadata = ParquetMetaDataReader::new()
        .parse_and_finish(&Bytes::copy_from_slice(part))
        .expect("a genuine part");
    let mut out = b"PAR1".to_vec();
    let mut groups = vec![];
    for (g, group) in metadata.row_groups().iter().enumerate() {
        let mut columns = vec![];
        for (c, column) in group.columns().iter().enumerate() {
            let (start, len) = column.byte_range();
            let chunk = replace(g, c).unwrap_or_else(|| NewChunk {
                bytes: part[start as usize..(start + len) as usize].to_vec(),
                dictionary: column
                    .dictionary_page_offset()
                    .map_or(0, |d| (column.data_page_offset() - d) as usize),
            });
            let at = out.len() as i64;
            let dictionary = (chunk.dictionary > 0).then_some(at);
            columns.push(
                column
                    .clone()
                    .into_builder()
                    .set_dictionary_page_offset(dictionary)
                    .set_data_page_offset(at + chunk.dictionary as i64)
                    .set_total_compressed_size(chunk.bytes.len() as i64)
                    .set_offset_index_offset(None)
                    .set_offset_index_length(None)
                    .set_column_index_offset(None)
                    .set_column_index_length(None)
                    .build()
                    .expect("column metadata"),
            );
            out.extend(chunk.bytes);
        }
        groups.push(
            group
                .clone()
                .into_builder()
                .set_column_metadata(columns)
                .build()
                .expect("row group metadata"),
        );
    }
    let metadata = metadata.into_builder().set_row_groups(groups).build();
    ParquetMetaDataWriter::new(&mut out, &metadata)
        .finish()
        .expect("a footer");
    out
}

/// A data page (version 1) of `values` levels, from its levels and values, uncompressed.
pub(crate) fn data_body(
    rep: Option<&[(u32, u8)]>,
    def: Option<&[(u32, u8)]>,
    values: &[u8],
) -> Vec<u8> {
    let mut out = vec![];
    if let Some(rep) = rep {
        out.extend(levels(rep));
    }
    if let Some(def) = def {
        out.extend(levels(def));
    }
    out.extend_from_slice(values);
    out
}

/// A column chunk of a dictionary of `entries` and one data page of `body` (dictionary keys)
/// holding `values` levels.
pub(crate) fn dictionary_chunk(entries: &[&[u8]], values: i32, body: &[u8]) -> NewChunk {
    let dictionary = page(
        DICTIONARY_PAGE,
        entries.len() as i32,
        PLAIN,
        &plain(entries),
        None,
    );
    let data = page(DATA_PAGE, values, RLE_DICTIONARY, body, None);
    NewChunk {
        dictionary: dictionary.len(),
        bytes: [dictionary, data].concat(),
    }
}
