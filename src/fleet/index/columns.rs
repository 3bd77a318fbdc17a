//! A checked part's columns ([`super::bounds`]), decoded by the `parquet` crate's column readers
//! a batch of rows at a time into our cells, every byte we keep counted against the part's
//! [`Budget`] before it is allocated, each cell within its column's bound.
//!
//! Why the column readers and not the crate's Arrow reader: the column readers hand strings
//! over as `ByteArray`s, slices sharing the buffer of the page they were read from (a
//! dictionary's entries, of the dictionary page), so a dictionary value a million rows refer to
//! is a million references to it; what the crate holds while a column is read is then that
//! column's pages (bounded by the checks), its dictionary's entries and one batch of levels and
//! values. The Arrow reader copies a dictionary's value into its string array for every row
//! that refers to it (also when read as a dictionary array, once pages of one chunk mix
//! encodings), and a row of a list column can hold every level of its chunk: a part within
//! every bound on its pages can still expand by orders of magnitude there.
//!
//! A column is read whole, row group after row group, before the next one: the crate holds one
//! column's pages at a time. A column chunk is read only through the bytes checked for it
//! ([`Chunk`]), by a page reader of its own (no page index, no bloom filter: nothing else of
//! the part is read).
//!
//! The crate asserts on some damage inside a page that no check before decompressing can see
//! (a byte array cut short: `bit_util::read_num_bytes`). Its decoders hold nothing shared, so
//! such a panic is caught where a column is read and is that part's error like any other (the
//! panic's message still reaches stderr through the process's panic hook).

use std::mem::size_of;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use parquet::column::reader::{ColumnReaderImpl, get_column_reader};
use parquet::data_type::{
    BoolType, ByteArray, ByteArrayType, DataType, DoubleType, Int32Type, Int64Type,
};
use parquet::errors::ParquetError;
use parquet::file::reader::{ChunkReader, Length};
use parquet::file::serialized_reader::SerializedPageReader;
use parquet::schema::types::ColumnDescPtr;

use super::bounds::{Footer, MAX_DECODED_BYTES};
use crate::fleet::Error;

/// Rows read from a column at once.
const BATCH: usize = 1024;

/// A column chunk's bytes, at their place in the part: what its page reader reads, and all it
/// can read.
#[derive(Clone, Debug)]
pub struct Chunk {
    start: u64,
    bytes: Bytes,
}

impl Chunk {
    /// `bytes`, which lie at `start` in the part.
    pub fn new(start: u64, bytes: Bytes) -> Chunk {
        Chunk { start, bytes }
    }

    fn slice(&self, start: u64, length: Option<usize>) -> parquet::errors::Result<Bytes> {
        let from = start
            .checked_sub(self.start)
            .and_then(|at| usize::try_from(at).ok())
            .filter(|at| *at <= self.bytes.len());
        let to = from.and_then(|at| match length {
            Some(n) => at.checked_add(n).filter(|to| *to <= self.bytes.len()),
            None => Some(self.bytes.len()),
        });
        match (from, to) {
            (Some(from), Some(to)) => Ok(self.bytes.slice(from..to)),
            _ => Err(ParquetError::EOF(format!(
                "a read at {start} outside the column chunk"
            ))),
        }
    }
}

impl Length for Chunk {
    fn len(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }
}

impl ChunkReader for Chunk {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(self.slice(start, None)?.reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.slice(start, Some(length))
    }
}

/// What the rows of a part may still take ([`MAX_DECODED_BYTES`] to begin with).
#[derive(Debug)]
pub struct Budget {
    left: usize,
}

impl Default for Budget {
    fn default() -> Budget {
        Budget {
            left: MAX_DECODED_BYTES,
        }
    }
}

impl Budget {
    /// Take `bytes` of it.
    ///
    /// # Errors
    /// Not that much left.
    pub fn take(&mut self, bytes: usize) -> Result<(), Error> {
        match self.left.checked_sub(bytes) {
            Some(left) => {
                self.left = left;
                Ok(())
            }
            None => Err(Error::bound(format!(
                "its rows would take more than the {MAX_DECODED_BYTES} bytes a part's rows may"
            ))),
        }
    }

    /// Take room for `n` values of `T`.
    ///
    /// # Errors
    /// Not that much left.
    pub fn take_items<T>(&mut self, n: usize) -> Result<(), Error> {
        self.take(n.saturating_mul(size_of::<T>()))
    }
}

/// The columns of the row groups read of a checked part, each decoded whole on demand.
pub struct Columns<'a> {
    footer: &'a Footer,
    /// The row groups read, each with its column chunks in column order.
    groups: Vec<(usize, Vec<Chunk>)>,
    rows: usize,
    budget: Budget,
}

impl<'a> Columns<'a> {
    /// The row groups `groups` (each with its column chunks, checked) of the part of `footer`.
    pub fn new(footer: &'a Footer, groups: Vec<(usize, Vec<Chunk>)>) -> Columns<'a> {
        let metadata = footer.metadata();
        // Row counts were checked against `MAX_ROWS` by the footer.
        let rows = groups
            .iter()
            .map(|(g, _)| metadata.row_group(*g).num_rows() as usize)
            .sum();
        Columns {
            footer,
            groups,
            rows,
            budget: Budget::default(),
        }
    }

    /// How many rows the row groups read hold.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// An empty vector with room for a `R` per row, its size taken from the budget.
    ///
    /// # Errors
    /// The budget spent.
    pub fn rows_vec<R>(&mut self) -> Result<Vec<R>, Error> {
        self.budget.take_items::<R>(self.rows)?;
        Ok(Vec::with_capacity(self.rows))
    }

    fn descr(&self, column: usize) -> ColumnDescPtr {
        self.footer
            .metadata()
            .file_metadata()
            .schema_descr()
            .column(column)
    }

    /// Column `column`'s strings, each at most `max_bytes`.
    ///
    /// # Errors
    /// A cell over `max_bytes` or not UTF-8, the budget spent, or the crate's.
    pub fn strings(
        &mut self,
        column: usize,
        max_bytes: usize,
    ) -> Result<Vec<Option<String>>, Error> {
        let name = self.descr(column).path().string();
        self.flat::<ByteArrayType, String>(column, |v, budget| string(v, max_bytes, budget, &name))
    }

    /// Column `column`'s lists of fingerprints: each cell a run of little-endian `u64`s, at
    /// most `max_bytes`.
    ///
    /// # Errors
    /// A cell over `max_bytes` or not a whole number of `u64`s, the budget spent, or the
    /// crate's.
    pub fn fingerprints(
        &mut self,
        column: usize,
        max_bytes: usize,
    ) -> Result<Vec<Option<Vec<u64>>>, Error> {
        let name = self.descr(column).path().string();
        self.flat::<ByteArrayType, Vec<u64>>(column, |v, budget| {
            let bytes = v.data();
            if bytes.len() > max_bytes || bytes.len() % 8 != 0 {
                return Err(Error::bound(format!(
                    "column {name}: a cell of {} bytes (fingerprints of 8 bytes, at most {max_bytes})",
                    bytes.len()
                )));
            }
            budget.take(bytes.len())?;
            Ok(bytes
                .chunks_exact(8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
                .collect())
        })
    }

    /// Column `column`'s 32-bit integers.
    ///
    /// # Errors
    /// The budget spent, or the crate's.
    pub fn int32s(&mut self, column: usize) -> Result<Vec<Option<i32>>, Error> {
        self.flat::<Int32Type, i32>(column, |v, _| Ok(*v))
    }

    /// Column `column`'s 64-bit integers.
    ///
    /// # Errors
    /// The budget spent, or the crate's.
    pub fn int64s(&mut self, column: usize) -> Result<Vec<Option<i64>>, Error> {
        self.flat::<Int64Type, i64>(column, |v, _| Ok(*v))
    }

    /// Column `column`'s doubles.
    ///
    /// # Errors
    /// The budget spent, or the crate's.
    pub fn doubles(&mut self, column: usize) -> Result<Vec<Option<f64>>, Error> {
        self.flat::<DoubleType, f64>(column, |v, _| Ok(*v))
    }

    /// Column `column`'s booleans.
    ///
    /// # Errors
    /// The budget spent, or the crate's.
    pub fn bools(&mut self, column: usize) -> Result<Vec<Option<bool>>, Error> {
        self.flat::<BoolType, bool>(column, |v, _| Ok(*v))
    }

    /// Column `column`'s lists of strings (a list's null items left out), each of at most
    /// `max_items` items of at most `max_bytes`.
    ///
    /// # Errors
    /// A list or a cell over its bound, the budget spent, or the crate's.
    pub fn lists(
        &mut self,
        column: usize,
        max_bytes: usize,
        max_items: usize,
    ) -> Result<Vec<Vec<String>>, Error> {
        let name = self.descr(column).path().string();
        unpanicked(&name, || self.lists_unguarded(column, max_bytes, max_items))
    }

    fn lists_unguarded(
        &mut self,
        column: usize,
        max_bytes: usize,
        max_items: usize,
    ) -> Result<Vec<Vec<String>>, Error> {
        let descr = self.descr(column);
        let name = descr.path().string();
        let crate_error = |e: ParquetError| Error::from(e).at(format!("column {name}"));
        let max_def = descr.max_def_level();
        self.budget.take_items::<Vec<String>>(self.rows)?;
        let mut out = Vec::with_capacity(self.rows);
        let (mut def, mut rep, mut values) = (Vec::new(), Vec::new(), Vec::new());
        for (group, chunks) in &self.groups {
            let rows = self.footer.metadata().row_group(*group).num_rows() as usize;
            let mut reader = typed::<ByteArrayType>(self.footer, *group, column, &chunks[column])?;
            let mut read = 0;
            while read < rows {
                def.clear();
                rep.clear();
                values.clear();
                let (records, _, _) = reader
                    .read_records(
                        BATCH.min(rows - read),
                        Some(&mut def),
                        Some(&mut rep),
                        &mut values,
                    )
                    .map_err(crate_error)?;
                if records == 0 || def.len() != rep.len() {
                    return Err(Error::invalid(format!(
                        "column {name}: fewer rows than its row group"
                    )));
                }
                let mut values = values.iter();
                let mut at = 0;
                for _ in 0..records {
                    if rep.get(at) != Some(&0) {
                        return Err(Error::invalid(format!(
                            "column {name}: levels that begin no row"
                        )));
                    }
                    let end = at + 1 + rep[at + 1..].iter().take_while(|r| **r != 0).count();
                    if end - at > max_items {
                        return Err(Error::bound(format!(
                            "column {name}: a list of {} items, more than the {max_items} allowed",
                            end - at
                        )));
                    }
                    let present = def[at..end].iter().filter(|d| **d == max_def).count();
                    self.budget.take_items::<String>(present)?;
                    let mut list = Vec::with_capacity(present);
                    for _ in 0..present {
                        let Some(v) = values.next() else {
                            return Err(Error::invalid(format!(
                                "column {name}: fewer values than levels"
                            )));
                        };
                        list.push(string(v, max_bytes, &mut self.budget, &name)?);
                    }
                    out.push(list);
                    at = end;
                }
                read += records;
            }
        }
        Ok(out)
    }

    /// A column that is not a list: a cell per row (`None` where null), each made by `cell`.
    fn flat<T: DataType, C>(
        &mut self,
        column: usize,
        cell: impl FnMut(&T::T, &mut Budget) -> Result<C, Error>,
    ) -> Result<Vec<Option<C>>, Error> {
        let name = self.descr(column).path().string();
        unpanicked(&name, || self.flat_unguarded::<T, C>(column, cell))
    }

    fn flat_unguarded<T: DataType, C>(
        &mut self,
        column: usize,
        mut cell: impl FnMut(&T::T, &mut Budget) -> Result<C, Error>,
    ) -> Result<Vec<Option<C>>, Error> {
        let descr = self.descr(column);
        let name = descr.path().string();
        let crate_error = |e: ParquetError| Error::from(e).at(format!("column {name}"));
        let max_def = descr.max_def_level();
        self.budget.take_items::<Option<C>>(self.rows)?;
        let mut out = Vec::with_capacity(self.rows);
        let (mut def, mut values) = (Vec::new(), Vec::new());
        for (group, chunks) in &self.groups {
            let rows = self.footer.metadata().row_group(*group).num_rows() as usize;
            let mut reader = typed::<T>(self.footer, *group, column, &chunks[column])?;
            let mut read = 0;
            while read < rows {
                def.clear();
                values.clear();
                let levels = (max_def > 0).then_some(&mut def);
                let (records, _, _) = reader
                    .read_records(BATCH.min(rows - read), levels, None, &mut values)
                    .map_err(crate_error)?;
                if records == 0 {
                    return Err(Error::invalid(format!(
                        "column {name}: fewer rows than its row group"
                    )));
                }
                let mut values = values.iter();
                for i in 0..records {
                    if max_def > 0 && def.get(i) != Some(&max_def) {
                        out.push(None);
                        continue;
                    }
                    let Some(v) = values.next() else {
                        return Err(Error::invalid(format!(
                            "column {name}: fewer values than levels"
                        )));
                    };
                    out.push(Some(cell(v, &mut self.budget)?));
                }
                read += records;
            }
        }
        Ok(out)
    }
}

/// Every column chunk of every row group of a whole part, `bytes`, of `footer`.
pub fn every_chunk(footer: &Footer, bytes: &Bytes) -> Vec<(usize, Vec<Chunk>)> {
    let metadata = footer.metadata();
    (0..metadata.num_row_groups())
        .map(|g| {
            let chunks = (0..metadata.row_group(g).num_columns())
                .map(|c| {
                    let range = footer.chunk(g, c);
                    let bytes = bytes.slice(range.start as usize..range.end as usize);
                    Chunk::new(range.start, bytes)
                })
                .collect();
            (g, chunks)
        })
        .collect()
}

/// The column reader of column `column` of row group `group`, over its checked `chunk`.
fn typed<T: DataType>(
    footer: &Footer,
    group: usize,
    column: usize,
    chunk: &Chunk,
) -> Result<ColumnReaderImpl<T>, Error> {
    let metadata = footer.metadata();
    let descr = metadata.file_metadata().schema_descr().column(column);
    let name = descr.path().string();
    let group = metadata.row_group(group);
    let pages = SerializedPageReader::new(
        Arc::new(chunk.clone()),
        group.column(column),
        group.num_rows() as usize,
        None,
    )
    .map_err(|e| Error::from(e).at(format!("column {name}")))?;
    T::get_column_reader(get_column_reader(descr, Box::new(pages)))
        .ok_or_else(|| Error::invalid(format!("column {name}: not of its type")))
}

/// What reading column `column` with `read` gives, a panic of the crate's decoders being an
/// error (see the module's doc).
fn unpanicked<T>(column: &str, read: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(read)).unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(Error::invalid(format!(
            "column {column}: the parquet crate failed on it ({why})"
        )))
    })
}

/// `value` as a string of at most `max_bytes`, its bytes taken from `budget`.
fn string(
    value: &ByteArray,
    max_bytes: usize,
    budget: &mut Budget,
    column: &str,
) -> Result<String, Error> {
    let bytes = value.data();
    if bytes.len() > max_bytes {
        return Err(Error::bound(format!(
            "column {column}: a cell of {} bytes, more than the {max_bytes} allowed",
            bytes.len()
        )));
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|_| Error::invalid(format!("column {column}: a cell not UTF-8")))?;
    budget.take(text.len())?;
    Ok(text.to_owned())
}
