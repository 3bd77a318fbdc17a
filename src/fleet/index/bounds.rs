//! What a Parquet part of the index may be, checked before the `parquet` crate decodes any of
//! it. A part is hostile input — whoever can write into the bucket can write one (SECURITY.md,
//! "The shared store") — and the crate trusts what a file declares: it allocates a page's
//! decompressed size and a dictionary's entries as declared, builds a schema by recursion a
//! level per element, expands run-length-encoded levels into as many entries as they say.
//!
//! # What is checked, in order
//!
//! 1. The object: at most [`MAX_PART_BYTES`] (read whole through
//!    [`crate::fleet::store::Store::get_bounded`], which refuses a larger one before reading its
//!    body; a lookup's ranged reads are held to the same sum).
//! 2. Its footer ([`Footer::parse`]): at most [`MAX_FOOTER_BYTES`]; a schema of at most
//!    [`MAX_SCHEMA_ELEMENTS`] (counted by [`super::thrift`] before the crate builds it), equal to
//!    the table's; row groups of the table's columns, [`MAX_ROWS`] rows in all, each column chunk
//!    zstd-compressed and inside the object.
//! 3. Every page of every column chunk read ([`Totals::check`]), walked header by header by
//!    [`super::thrift`]: each lies inside its chunk; a data page decompresses to at most
//!    [`MAX_PAGE_BYTES`] and a dictionary to at most [`MAX_DICTIONARY_BYTES`], of no more entries
//!    than 4-byte values would fill (what the crate allocates for them); the encodings are those
//!    our writer uses (plain, dictionary; levels run-length) — a delta encoding builds each value
//!    anew, so a page of them can expand; a column chunk's levels are at most
//!    [`MAX_CHUNK_VALUES`] (one per row for a column that is not a list), the part's at most
//!    [`MAX_PART_VALUES`], its pages' decompressed sizes at most [`MAX_DECOMPRESSED_BYTES`].
//! 4. Then [`super::columns`] decodes, each cell within its column's bound, every byte of the
//!    rows counted against [`MAX_DECODED_BYTES`] before it is allocated.
//!
//! A part failing any of these is an error naming the bound; the callers name the part, and go
//! back to the journals.
//!
//! # The bound this gives
//!
//! Reading a part allocates, besides the object itself: its metadata (a bounded multiple of its
//! footer: [`FOOTER_EXPANSION`]); the pages the crate decompresses (at most
//! [`MAX_DECOMPRESSED_BYTES`] in all, whichever of them it still holds); for the column being
//! read, a dictionary's entries (a `ByteArray` of 32 bytes per 4 bytes of dictionary: 8 ×
//! [`MAX_DICTIONARY_BYTES`]) and a batch of levels and values (36 bytes each, at most
//! [`MAX_CHUNK_VALUES`]: a batch never spans two chunks); and the rows ([`MAX_DECODED_BYTES`]).
//! [`MAX_READ_BYTES`] is that sum; the unit tests measure bombs of every table against it.
//!
//! Our writer stays within these (the tests write parts near them): a page of 1 MiB (the crate's
//! default) plus at most two values over it; a dictionary falls back to plain pages at 1 MiB;
//! cells bounded by `rows` (texts at [`super::rows::TEXT_CHARS`] characters, lists at
//! [`super::rows::TOOLS`] items, words at [`super::rows::WORD_BYTES`] bytes); row groups of
//! turns small enough that their lists stay within [`MAX_CHUNK_VALUES`]
//! ([`super::table::TURNS_ROW_GROUP`]). Rows per part are not bounded by the writer: a part past
//! [`MAX_ROWS`] or whose rows take more than [`MAX_DECODED_BYTES`] is refused like a hostile one.

use std::ops::Range;
use std::sync::Arc;

use arrow_schema::Schema;
use bytes::Bytes;
use parquet::arrow::ArrowSchemaConverter;
use parquet::basic::{Compression, Encoding};
use parquet::file::metadata::{
    ParquetMetaData, ParquetMetaDataOptions, ParquetMetaDataReader, ParquetStatisticsPolicy,
};
use parquet::schema::types::SchemaDescriptor;

use super::thrift::{self, PageKind};
use crate::fleet::Error;

/// Largest part read (its object, or what a lookup reads of it): 32 MiB. Our writer bounds no
/// part's size (a flush's rows, a merge of a day's parts, the postings of the whole table), but
/// a part whose rows take more than [`MAX_DECODED_BYTES`] is refused anyway, and our parts
/// compress their rows 3 to 10 times.
pub const MAX_PART_BYTES: u64 = 32 << 20;
/// Largest footer: 1 MiB (a part of ours has one row group per 8 192 postings or 16 384 turns,
/// a few hundred bytes each).
pub const MAX_FOOTER_BYTES: u64 = 1 << 20;
/// How many times its footer's size a part's metadata may take in memory (measured: see the
/// unit test of a footer of the most row groups that fit).
pub const FOOTER_EXPANSION: u64 = 32;
/// Most elements of a schema: our tables have 22 (sessions), 19 (turns), 3 (postings) and 16
/// (edits).
pub const MAX_SCHEMA_ELEMENTS: u64 = 32;
/// Most rows in a part: 1 Mi (2²⁰; a row takes 100 bytes or more decoded, see
/// [`MAX_DECODED_BYTES`]).
pub const MAX_ROWS: u64 = 1 << 20;
/// Longest page header: 4 KiB (ours take about 30 bytes; statistics, which ours do not write
/// in page headers, would add two values of 64 bytes).
pub const MAX_PAGE_HEADER_BYTES: usize = 4 << 10;
/// Largest data page, decompressed: 8 MiB (ours: 1 MiB plus at most two cells over it).
pub const MAX_PAGE_BYTES: u32 = 8 << 20;
/// Largest dictionary page, decompressed: 4 MiB (ours fall back to plain pages at 1 MiB, one
/// batch of values past it at most).
pub const MAX_DICTIONARY_BYTES: u32 = 4 << 20;
/// Most levels (values, nulls and empty lists) in a column chunk: 1 Mi, a row group's rows for
/// a column that is not a list (our row groups of sessions: 1 Mi rows at most) and
/// [`super::table::TURNS_ROW_GROUP`] × [`super::rows::TOOLS`] for a list of a turn.
pub const MAX_CHUNK_VALUES: u64 = 1 << 20;
/// Most levels in a part, all columns: 32 Mi (the time a part takes to decode).
pub const MAX_PART_VALUES: u64 = 32 << 20;
/// Most bytes a part's pages decompress to, all pages read: 128 MiB.
pub const MAX_DECOMPRESSED_BYTES: u64 = 128 << 20;
/// Most bytes a part's rows take decoded (their structures and every byte of their cells): 128
/// MiB.
pub const MAX_DECODED_BYTES: usize = 128 << 20;
/// Longest cell (of a column without a tighter bound): 64 KiB. Our writer keeps every text at
/// most [`super::rows::TEXT_CHARS`] characters (16 KiB); identifiers (session, host) are short.
pub const MAX_CELL_BYTES: usize = 64 << 10;
/// What reading a part may allocate besides the part itself, at most: the sum in the module's
/// doc (356 MiB). What genuine parts take is far less; what a bomb takes, the unit tests measure.
pub const MAX_READ_BYTES: u64 = FOOTER_EXPANSION * MAX_FOOTER_BYTES
    + MAX_DECOMPRESSED_BYTES
    + 8 * MAX_DICTIONARY_BYTES as u64
    + 36 * MAX_CHUNK_VALUES
    + MAX_DECODED_BYTES as u64;

/// Encodings our writer uses for values: plain, and dictionary keys (both names).
const VALUE_ENCODINGS: [i32; 3] = [
    Encoding::PLAIN as i32,
    Encoding::PLAIN_DICTIONARY as i32,
    Encoding::RLE_DICTIONARY as i32,
];
/// Encodings our writer uses for a dictionary page.
const DICTIONARY_ENCODINGS: [i32; 2] = [Encoding::PLAIN as i32, Encoding::PLAIN_DICTIONARY as i32];
/// The encoding our writer uses for levels.
const LEVEL_ENCODING: i32 = Encoding::RLE as i32;

/// The Parquet schema of a table of `schema`, as our writer writes it.
fn parquet_schema(schema: &Schema) -> Result<SchemaDescriptor, Error> {
    ArrowSchemaConverter::new()
        .convert(schema)
        .map_err(Error::from)
}

/// The length of the footer a part of `size` bytes declares in `tail`, its last 8 bytes.
///
/// # Errors
/// Not a Parquet tail, or a footer over [`MAX_FOOTER_BYTES`] or larger than the part.
pub fn footer_len(tail: &[u8], size: u64) -> Result<u64, Error> {
    let (Some(len), Some(b"PAR1")) = (tail.get(..4), tail.get(4..8)) else {
        return Err(Error::invalid("not Parquet (no PAR1 at its end)"));
    };
    let len = u64::from(u32::from_le_bytes([len[0], len[1], len[2], len[3]]));
    if len > MAX_FOOTER_BYTES {
        return Err(Error::bound(format!(
            "a footer of {len} bytes, more than the {MAX_FOOTER_BYTES} allowed"
        )));
    }
    if len + 12 > size {
        return Err(Error::invalid(format!("a footer of {len} bytes in {size}")));
    }
    Ok(len)
}

/// A part's footer, checked (2. in the module's doc): its metadata, decoded with the table's
/// schema.
#[derive(Debug)]
pub struct Footer {
    metadata: ParquetMetaData,
    /// Each row group's column chunks: where they lie in the part.
    chunks: Vec<Vec<Range<u64>>>,
}

impl Footer {
    /// The footer `footer` (without the 8 bytes of its tail) of a part of `size` bytes of the
    /// table of `schema` (`super::table::Table::schema`), checked.
    ///
    /// # Errors
    /// Why it is not a footer of the table's within the bounds.
    pub fn parse(footer: &[u8], size: u64, schema: &Schema) -> Result<Footer, Error> {
        let wrong = |e: parquet::errors::ParquetError| Error::from(e).at("its footer");
        let elements = thrift::schema_elements(footer)
            .map_err(|e| Error::invalid(e.to_string()).at("its footer"))?;
        if elements > MAX_SCHEMA_ELEMENTS {
            return Err(Error::bound(format!(
                "a schema of {elements} elements, more than the {MAX_SCHEMA_ELEMENTS} allowed"
            )));
        }
        let expected = Arc::new(parquet_schema(schema)?);
        let written = ParquetMetaDataReader::decode_schema(footer).map_err(wrong)?;
        if written.root_schema() != expected.root_schema() {
            return Err(Error::invalid(
                "not a part of its table (its schema differs)",
            ));
        }
        // The file's schema is not parsed again (ours is used); statistics the readers do not
        // use are skipped (a lookup uses the first column's).
        let options = ParquetMetaDataOptions::new()
            .with_schema(expected.clone())
            .with_encoding_stats_policy(ParquetStatisticsPolicy::SkipAll)
            .with_size_stats_policy(ParquetStatisticsPolicy::SkipAll)
            .with_column_stats_policy(ParquetStatisticsPolicy::skip_except(&[0]));
        let metadata = ParquetMetaDataReader::decode_metadata_with_options(footer, Some(&options))
            .map_err(wrong)?;
        // Column chunks lie between the leading PAR1 and the footer.
        let data = 4..size - 8 - footer.len() as u64;
        let mut rows = 0u64;
        let mut chunks = Vec::new();
        for group in metadata.row_groups() {
            if group.num_columns() != expected.num_columns() {
                return Err(Error::invalid(format!(
                    "a row group of {} columns (the table has {})",
                    group.num_columns(),
                    expected.num_columns()
                )));
            }
            rows = u64::try_from(group.num_rows())
                .ok()
                .and_then(|n| rows.checked_add(n))
                .ok_or_else(|| Error::invalid("a row group of a negative number of rows"))?;
            if rows > MAX_ROWS {
                return Err(Error::bound(format!(
                    "more than the {MAX_ROWS} rows allowed"
                )));
            }
            let mut ranges = Vec::new();
            for column in group.columns() {
                if !matches!(column.compression(), Compression::ZSTD(_)) {
                    return Err(Error::invalid(format!(
                        "column {}: compressed as {} (ours are zstd)",
                        column.column_path(),
                        column.compression()
                    )));
                }
                // `ColumnChunkMetaData::byte_range` panics on negative values: computed here.
                let start = column
                    .dictionary_page_offset()
                    .unwrap_or(column.data_page_offset());
                let range = u64::try_from(start).ok().and_then(|start| {
                    let len = u64::try_from(column.compressed_size()).ok()?;
                    Some(start..start.checked_add(len)?)
                });
                match range {
                    Some(r) if data.start <= r.start && r.end <= data.end => ranges.push(r),
                    _ => {
                        return Err(Error::invalid(format!(
                            "column {}: a chunk outside the part",
                            column.column_path()
                        )));
                    }
                }
            }
            chunks.push(ranges);
        }
        Ok(Footer { metadata, chunks })
    }

    /// Its metadata.
    pub fn metadata(&self) -> &ParquetMetaData {
        &self.metadata
    }

    /// Where column `column` of row group `group` lies in the part.
    ///
    /// # Panics
    /// A row group or column the part does not have.
    pub fn chunk(&self, group: usize, column: usize) -> Range<u64> {
        self.chunks[group][column].clone()
    }
}

/// What the column chunks of one part read so far add up to (3. in the module's doc): the
/// bytes fetched, the pages' decompressed sizes and their levels.
#[derive(Debug, Default)]
pub struct Totals {
    fetched: u64,
    decompressed: u64,
    values: u64,
}

impl Totals {
    /// Count `range` of the part as read (a lookup's ranged reads are held to
    /// [`MAX_PART_BYTES`] in all, as a whole part is).
    ///
    /// # Errors
    /// More than [`MAX_PART_BYTES`] read.
    pub fn fetch(&mut self, range: &Range<u64>) -> Result<(), Error> {
        self.fetched += range.end - range.start;
        if self.fetched > MAX_PART_BYTES {
            return Err(Error::bound(format!(
                "more than the {MAX_PART_BYTES} bytes a part may have read"
            )));
        }
        Ok(())
    }

    /// Walk the pages of column `column` of row group `group`, whose chunk is `bytes`.
    ///
    /// # Errors
    /// A page that is not within the bounds (see the module's doc).
    ///
    /// # Panics
    /// A row group or column the part does not have.
    pub fn check(
        &mut self,
        footer: &Footer,
        group: usize,
        column: usize,
        bytes: &[u8],
    ) -> Result<(), Error> {
        let descr = footer
            .metadata
            .file_metadata()
            .schema_descr()
            .column(column);
        let name = descr.path().string();
        let wrong = |why: Error| why.at(format!("column {name}"));
        let rows = footer.metadata.row_group(group).num_rows() as u64;
        let mut values = 0u64;
        let mut at = 0;
        while at < bytes.len() {
            let first = at == 0;
            let rest = &bytes[at..];
            let (header, len) = thrift::page_header(&rest[..rest.len().min(MAX_PAGE_HEADER_BYTES)])
                .map_err(|e| wrong(Error::invalid(format!("a page header: {e}"))))?;
            at += len;
            if header.compressed as usize > bytes.len() - at {
                return Err(wrong(Error::invalid("a page runs past its column chunk")));
            }
            at += header.compressed as usize;
            match header.kind {
                PageKind::Dictionary => {
                    if !first {
                        return Err(wrong(Error::invalid(
                            "a dictionary page after the first page",
                        )));
                    }
                    if header.uncompressed > MAX_DICTIONARY_BYTES {
                        return Err(wrong(Error::bound(format!(
                            "a dictionary of {} bytes, more than the {MAX_DICTIONARY_BYTES} allowed",
                            header.uncompressed
                        ))));
                    }
                    if u64::from(header.values) * 4 > u64::from(header.uncompressed) {
                        return Err(wrong(Error::invalid(format!(
                            "a dictionary of {} entries in {} bytes",
                            header.values, header.uncompressed
                        ))));
                    }
                    if !DICTIONARY_ENCODINGS.contains(&header.encoding) {
                        return Err(wrong(Error::invalid(format!(
                            "a dictionary encoded {}",
                            header.encoding
                        ))));
                    }
                }
                PageKind::Data | PageKind::DataV2 => {
                    if header.uncompressed > MAX_PAGE_BYTES {
                        return Err(wrong(Error::bound(format!(
                            "a page of {} bytes decompressed, more than the {MAX_PAGE_BYTES} allowed",
                            header.uncompressed
                        ))));
                    }
                    if !VALUE_ENCODINGS.contains(&header.encoding) {
                        return Err(wrong(Error::invalid(format!(
                            "values encoded {}",
                            header.encoding
                        ))));
                    }
                    let levels = (LEVEL_ENCODING, LEVEL_ENCODING);
                    if header.level_encodings.is_some_and(|l| l != levels) {
                        return Err(wrong(Error::invalid("levels not run-length encoded")));
                    }
                    values += u64::from(header.values);
                    if values > MAX_CHUNK_VALUES {
                        return Err(wrong(Error::bound(format!(
                            "more than the {MAX_CHUNK_VALUES} values a column chunk may have"
                        ))));
                    }
                }
            }
            self.decompressed += u64::from(header.uncompressed);
            if self.decompressed > MAX_DECOMPRESSED_BYTES {
                return Err(Error::bound(format!(
                    "pages of more than the {MAX_DECOMPRESSED_BYTES} bytes decompressed a part may have"
                )));
            }
        }
        // A column that is not a list has a level per row; a list, at least one.
        if values < rows || (descr.max_rep_level() == 0 && values != rows) {
            return Err(wrong(Error::invalid(format!(
                "{values} values for {rows} rows"
            ))));
        }
        self.values += values;
        if self.values > MAX_PART_VALUES {
            return Err(Error::bound(format!(
                "more than the {MAX_PART_VALUES} values a part may have"
            )));
        }
        Ok(())
    }
}

/// A whole part of the table of `schema` checked (the module's 1 to 3): its footer, and every
/// column chunk walked.
///
/// # Errors
/// Why it is not a part of the table's within the bounds.
pub fn check_part(bytes: &Bytes, schema: &Schema) -> Result<Footer, Error> {
    let size = bytes.len() as u64;
    if size > MAX_PART_BYTES {
        return Err(Error::bound(format!(
            "{size} bytes, more than the {MAX_PART_BYTES} a part may have"
        )));
    }
    if !bytes.starts_with(b"PAR1") {
        return Err(Error::invalid("not Parquet (no PAR1 at its start)"));
    }
    let tail = &bytes[bytes.len().saturating_sub(8)..];
    let len = footer_len(tail, size)?;
    let footer_start = (size - 8 - len) as usize;
    let footer = Footer::parse(&bytes[footer_start..bytes.len() - 8], size, schema)?;
    let mut totals = Totals::default();
    for (group, chunks) in footer.chunks.iter().enumerate() {
        for (column, range) in chunks.iter().enumerate() {
            let chunk = &bytes[range.start as usize..range.end as usize];
            totals.check(&footer, group, column, chunk)?;
        }
    }
    Ok(footer)
}

#[cfg(test)]
#[path = "bounds_tests.rs"]
mod tests;
