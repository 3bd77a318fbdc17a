//! The Thrift compact protocol, read as the `parquet` crate reads it but with bounds, for the
//! checks [`super::bounds`] makes before the crate reads a part: a page header's few fields
//! (its type, its two sizes, its value count and encodings), and where a footer's schema is and
//! how many elements it has. Every other field is skipped by its wire type, at most
//! [`MAX_DEPTH`] structures deep; every length and count is checked against the bytes that
//! remain before the reader goes on; nothing is allocated.
//!
//! What is checked here must be what the crate then reads. The crate reads a field it knows by
//! its id as the type it expects, whatever the wire type says: such a field must have that wire
//! type here. What the two could read differently is refused: a known field given twice (the
//! crate keeps the last), a collection of booleans (the crate's skip reads its elements as no
//! bytes), a varint longer than ten bytes or out of its field's range (the crate truncates it).

use std::fmt;

/// How deep structures may nest (the crate's skip allows 64; a page header nests 3 deep).
pub const MAX_DEPTH: usize = 8;

/// The wire types of the compact protocol.
mod wire {
    pub(super) const TRUE: u8 = 1;
    pub(super) const FALSE: u8 = 2;
    pub(super) const BYTE: u8 = 3;
    pub(super) const I16: u8 = 4;
    pub(super) const I32: u8 = 5;
    pub(super) const I64: u8 = 6;
    pub(super) const DOUBLE: u8 = 7;
    pub(super) const BINARY: u8 = 8;
    pub(super) const LIST: u8 = 9;
    pub(super) const SET: u8 = 10;
    pub(super) const MAP: u8 = 11;
    pub(super) const STRUCT: u8 = 12;
    pub(super) const UUID: u8 = 13;
}

/// Why bytes are not what the check needs (said in the error naming the part).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed(String);

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

type Result<T> = std::result::Result<T, Malformed>;

fn malformed<T>(why: impl Into<String>) -> Result<T> {
    Err(Malformed(why.into()))
}

/// Bytes read from the front, never past their end.
struct Input<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Input<'_> {
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn byte(&mut self) -> Result<u8> {
        let Some(&b) = self.bytes.get(self.at) else {
            return malformed("it ends inside a Thrift structure");
        };
        self.at += 1;
        Ok(b)
    }

    /// Pass `n` bytes, if that many remain.
    fn pass(&mut self, n: u64) -> Result<()> {
        if n > self.left() as u64 {
            return malformed(format!(
                "a Thrift field of {n} bytes where {} remain",
                self.left()
            ));
        }
        self.at += n as usize;
        Ok(())
    }

    /// An unsigned LEB128 varint of at most ten bytes that fits 64 bits.
    fn varint(&mut self) -> Result<u64> {
        let mut value = 0u64;
        for i in 0..10 {
            let b = self.byte()?;
            if i == 9 && b > 1 {
                break;
            }
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        malformed("a varint longer than 64 bits")
    }

    fn zigzag(&mut self) -> Result<i64> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// A field the crate reads as an `i32`: of wire type i32, in range.
    fn i32(&mut self, wire_type: u8) -> Result<i32> {
        if wire_type != wire::I32 {
            return malformed(format!("an i32 field of wire type {wire_type}"));
        }
        let v = self.zigzag()?;
        i32::try_from(v).or_else(|_| malformed(format!("{v} in an i32 field")))
    }

    /// A count the crate reads as an `i32` and checks against the bytes left: `n` elements of at
    /// least `each` bytes.
    fn count(&mut self, n: u64, each: u64) -> Result<u64> {
        if n > i32::MAX as u64 || n.saturating_mul(each) > self.left() as u64 {
            return malformed(format!(
                "a Thrift collection of {n} elements where {} bytes remain",
                self.left()
            ));
        }
        Ok(n)
    }

    /// The next field of a structure whose previous field was `last`: its wire type and id, or
    /// `None` at the structure's end.
    fn field(&mut self, last: i16) -> Result<Option<(u8, i16)>> {
        let b = self.byte()?;
        let wire_type = b & 0x0f;
        if wire_type == 0 {
            return Ok(None);
        }
        if wire_type > wire::UUID {
            return malformed(format!("wire type {wire_type}"));
        }
        let delta = b >> 4;
        let id = if delta != 0 {
            last.checked_add(i16::from(delta))
        } else {
            i16::try_from(self.zigzag()?).ok()
        };
        match id {
            Some(id) => Ok(Some((wire_type, id))),
            None => malformed("a field id out of range"),
        }
    }

    /// A list's (or set's) element type and size.
    fn list(&mut self) -> Result<(u8, u64)> {
        let b = self.byte()?;
        if b == 0 {
            // What some writers put for an empty list; the crate reads it so.
            return Ok((wire::BYTE, 0));
        }
        let element = b & 0x0f;
        let size = match b >> 4 {
            15 => self.varint()?,
            n => u64::from(n),
        };
        if !(wire::TRUE..=wire::UUID).contains(&element) {
            return malformed(format!("a list of element type {element}"));
        }
        if size > 0 && matches!(element, wire::TRUE | wire::FALSE) {
            return malformed("a list of booleans");
        }
        Ok((element, self.count(size, 1)?))
    }

    /// Skip a value of `wire_type`, `depth` structures deep at most.
    fn skip(&mut self, wire_type: u8, depth: usize) -> Result<()> {
        match wire_type {
            wire::TRUE | wire::FALSE => Ok(()),
            wire::BYTE => self.pass(1),
            wire::I16 | wire::I32 | wire::I64 => self.varint().map(|_| ()),
            wire::DOUBLE => self.pass(8),
            wire::UUID => self.pass(16),
            wire::BINARY => {
                let len = self.varint()?;
                self.pass(len)
            }
            wire::LIST | wire::SET => {
                let depth = deeper(depth)?;
                let (element, size) = self.list()?;
                for _ in 0..size {
                    self.skip(element, depth)?;
                }
                Ok(())
            }
            wire::MAP => {
                let depth = deeper(depth)?;
                let size = self.varint()?;
                if size == 0 {
                    return Ok(());
                }
                let types = self.byte()?;
                let (key, value) = (types >> 4, types & 0x0f);
                for t in [key, value] {
                    if !(wire::BYTE..=wire::UUID).contains(&t) {
                        return malformed(format!("a map of element type {t}"));
                    }
                }
                for _ in 0..self.count(size, 2)? {
                    self.skip(key, depth)?;
                    self.skip(value, depth)?;
                }
                Ok(())
            }
            wire::STRUCT => {
                let depth = deeper(depth)?;
                // Ids do not matter to a skip (the crate's passes 0 as the last one too).
                while let Some((wire_type, _)) = self.field(0)? {
                    self.skip(wire_type, depth)?;
                }
                Ok(())
            }
            other => malformed(format!("wire type {other}")),
        }
    }

    /// A field the crate reads as a structure of its own: its wire type must say so.
    fn structure(&self, wire_type: u8) -> Result<()> {
        if wire_type == wire::STRUCT {
            Ok(())
        } else {
            malformed(format!("a structure field of wire type {wire_type}"))
        }
    }
}

fn deeper(depth: usize) -> Result<usize> {
    match depth.checked_sub(1) {
        Some(d) => Ok(d),
        None => malformed(format!("Thrift structures nested over {MAX_DEPTH} deep")),
    }
}

/// The ids of a structure's known fields seen so far (each may come once).
#[derive(Default)]
struct Seen(u16);

impl Seen {
    fn first(&mut self, id: i16) -> Result<()> {
        let bit = 1u16 << id;
        if self.0 & bit != 0 {
            return malformed(format!("field {id} given twice"));
        }
        self.0 |= bit;
        Ok(())
    }
}

/// What a page holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageKind {
    /// A column chunk's dictionary.
    Dictionary,
    /// Values (with their levels), version 1.
    Data,
    /// Values, version 2 (levels uncompressed, apart).
    DataV2,
}

/// The fields of a page header the bounds need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageHeader {
    /// What the page holds.
    pub kind: PageKind,
    /// Its size decompressed (what the crate allocates for it).
    pub uncompressed: u32,
    /// Its size in the file, after the header.
    pub compressed: u32,
    /// Its values: the entries of a dictionary; of a data page, its levels (values, nulls and
    /// empty lists).
    pub values: u32,
    /// How its values are encoded (Parquet's `Encoding`).
    pub encoding: i32,
    /// How its definition and repetition levels are encoded (data pages of version 1).
    pub level_encodings: Option<(i32, i32)>,
}

/// The `Dictionary`/`Data` part of a page header: `kind` with its value count and encodings.
struct Body {
    kind: PageKind,
    values: i32,
    encoding: i32,
    level_encodings: Option<(i32, i32)>,
}

/// Read a page header from the front of `bytes`: it and its length.
///
/// # Errors
/// Bytes that are not a page header the crate would read the same way (see the module's doc),
/// or a header without the fields a page must have.
pub fn page_header(bytes: &[u8]) -> Result<(PageHeader, usize)> {
    let mut input = Input { bytes, at: 0 };
    let (mut kind, mut uncompressed, mut compressed, mut body) = (None, None, None, None);
    let mut seen = Seen::default();
    let mut last = 0;
    while let Some((wire_type, id)) = input.field(last)? {
        if (1..=8).contains(&id) {
            seen.first(id)?;
        }
        match id {
            1 => kind = Some(input.i32(wire_type)?),
            2 => uncompressed = Some(input.i32(wire_type)?),
            3 => compressed = Some(input.i32(wire_type)?),
            4 => {
                input.i32(wire_type)?;
            }
            5 | 7 | 8 => {
                input.structure(wire_type)?;
                let read = match id {
                    5 => data_page_header(&mut input)?,
                    7 => dictionary_page_header(&mut input)?,
                    _ => data_page_header_v2(&mut input)?,
                };
                if body.replace(read).is_some() {
                    return malformed("a page header for two kinds of page");
                }
            }
            6 => {
                input.structure(wire_type)?;
                input.skip(wire_type, MAX_DEPTH)?;
            }
            _ => input.skip(wire_type, MAX_DEPTH)?,
        }
        last = id;
    }
    let (Some(kind), Some(uncompressed), Some(compressed), Some(body)) =
        (kind, uncompressed, compressed, body)
    else {
        return malformed("a page header without its type, sizes or values");
    };
    let expected = match kind {
        0 => PageKind::Data,
        2 => PageKind::Dictionary,
        3 => PageKind::DataV2,
        other => return malformed(format!("a page of type {other}")),
    };
    if body.kind != expected {
        return malformed("a page header of one type describing another");
    }
    let (Ok(uncompressed), Ok(compressed), Ok(values)) = (
        u32::try_from(uncompressed),
        u32::try_from(compressed),
        u32::try_from(body.values),
    ) else {
        return malformed("a page of a negative size or value count");
    };
    let header = PageHeader {
        kind: body.kind,
        uncompressed,
        compressed,
        values,
        encoding: body.encoding,
        level_encodings: body.level_encodings,
    };
    Ok((header, input.at))
}

/// `DataPageHeader`: 1 `num_values`, 2 `encoding`, 3 and 4 the levels' encodings (all
/// required), 5 statistics (which the crate skips, as this does).
fn data_page_header(input: &mut Input) -> Result<Body> {
    let mut fields: [Option<i32>; 4] = [None; 4];
    let mut seen = Seen::default();
    let mut last = 0;
    while let Some((wire_type, id)) = input.field(last)? {
        match id {
            1..=4 => {
                seen.first(id)?;
                fields[id as usize - 1] = Some(input.i32(wire_type)?);
            }
            _ => input.skip(wire_type, MAX_DEPTH - 2)?,
        }
        last = id;
    }
    let [
        Some(values),
        Some(encoding),
        Some(definition),
        Some(repetition),
    ] = fields
    else {
        return malformed("a data page header without its value count or encodings");
    };
    Ok(Body {
        kind: PageKind::Data,
        values,
        encoding,
        level_encodings: Some((definition, repetition)),
    })
}

/// `DictionaryPageHeader`: 1 `num_values`, 2 `encoding` (required), 3 `is_sorted` (a boolean).
fn dictionary_page_header(input: &mut Input) -> Result<Body> {
    let (mut values, mut encoding) = (None, None);
    let mut seen = Seen::default();
    let mut last = 0;
    while let Some((wire_type, id)) = input.field(last)? {
        match id {
            1 | 2 => {
                seen.first(id)?;
                let v = Some(input.i32(wire_type)?);
                if id == 1 { values = v } else { encoding = v }
            }
            3 => {
                seen.first(id)?;
                if !matches!(wire_type, wire::TRUE | wire::FALSE) {
                    return malformed(format!("a boolean field of wire type {wire_type}"));
                }
            }
            _ => input.skip(wire_type, MAX_DEPTH - 2)?,
        }
        last = id;
    }
    let (Some(values), Some(encoding)) = (values, encoding) else {
        return malformed("a dictionary page header without its value count or encoding");
    };
    Ok(Body {
        kind: PageKind::Dictionary,
        values,
        encoding,
        level_encodings: None,
    })
}

/// `DataPageHeaderV2`: 1 `num_values`, 2 `num_nulls`, 3 `num_rows`, 4 `encoding`, 5 and 6 the
/// levels' lengths (all required i32s), 7 `is_compressed` (a boolean), 8 statistics (skipped).
fn data_page_header_v2(input: &mut Input) -> Result<Body> {
    let mut fields: [Option<i32>; 6] = [None; 6];
    let mut seen = Seen::default();
    let mut last = 0;
    while let Some((wire_type, id)) = input.field(last)? {
        match id {
            1..=6 => {
                seen.first(id)?;
                fields[id as usize - 1] = Some(input.i32(wire_type)?);
            }
            7 => {
                seen.first(id)?;
                if !matches!(wire_type, wire::TRUE | wire::FALSE) {
                    return malformed(format!("a boolean field of wire type {wire_type}"));
                }
            }
            _ => input.skip(wire_type, MAX_DEPTH - 2)?,
        }
        last = id;
    }
    let [
        Some(values),
        Some(_),
        Some(_),
        Some(encoding),
        Some(_),
        Some(_),
    ] = fields
    else {
        return malformed("a data page header (v2) without its required fields");
    };
    Ok(Body {
        kind: PageKind::DataV2,
        values,
        encoding,
        level_encodings: None,
    })
}

/// How many elements the schema of a footer (Parquet's `FileMetaData`) has: the first field 2
/// (`list<SchemaElement>`), where the crate's schema reader finds it (every field before it is
/// skipped by its wire type, as the crate's reader skips them). The crate builds the schema's
/// tree by recursion, a level per nested element: this count is checked before it does.
///
/// # Errors
/// A footer with no schema, or that is not Thrift the crate would read the same way.
pub fn schema_elements(footer: &[u8]) -> Result<u64> {
    let mut input = Input {
        bytes: footer,
        at: 0,
    };
    let mut last = 0;
    while let Some((wire_type, id)) = input.field(last)? {
        if id == 2 {
            if wire_type != wire::LIST {
                return malformed(format!("a schema of wire type {wire_type}"));
            }
            let (element, size) = input.list()?;
            if size > 0 && element != wire::STRUCT {
                return malformed(format!("a schema of element type {element}"));
            }
            return Ok(size);
        }
        input.skip(wire_type, MAX_DEPTH)?;
        last = id;
    }
    malformed("a footer without a schema")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::index::bombs::Compact;

    fn data_page(values: i32) -> Compact {
        let mut o = Compact::new();
        o.i32(1, 0).i32(2, 100).i32(3, 40);
        o.begin(5)
            .i32(1, values)
            .i32(2, 8)
            .i32(3, 3)
            .i32(4, 3)
            .end();
        o.end();
        o
    }

    #[test]
    fn a_data_page_header_reads_its_sizes_values_and_encodings() {
        let o = data_page(7);
        let (header, len) = page_header(&o.bytes).unwrap();
        assert_eq!(len, o.bytes.len());
        assert_eq!(
            header,
            PageHeader {
                kind: PageKind::Data,
                uncompressed: 100,
                compressed: 40,
                values: 7,
                encoding: 8,
                level_encodings: Some((3, 3)),
            }
        );
        // Trailing bytes are the page's, not the header's.
        let mut longer = o.bytes.clone();
        longer.extend_from_slice(b"page");
        assert_eq!(page_header(&longer).unwrap().1, o.bytes.len());
    }

    #[test]
    fn what_the_crate_could_read_otherwise_is_refused() {
        // A known field of another wire type (the crate would read it as an i32 anyway).
        let mut o = Compact::new();
        o.field(wire::BINARY, 2).varint(3);
        o.bytes.extend_from_slice(b"abc");
        assert!(page_header(&o.bytes).is_err());
        // A field twice.
        let mut o = Compact::new();
        o.i32(1, 0).i32(2, 10).i32(2, 1 << 30);
        assert!(page_header(&o.bytes).unwrap_err().0.contains("twice"));
        // A list of booleans in an unknown field.
        let mut o = data_page(1);
        o.bytes.pop();
        o.field(wire::LIST, 9).bytes.push(0x31);
        o.bytes.extend_from_slice(&[1, 1, 1, 0]);
        assert!(page_header(&o.bytes).unwrap_err().0.contains("booleans"));
        // Nested past the depth.
        let mut o = data_page(1);
        o.bytes.pop();
        for _ in 0..=MAX_DEPTH {
            o.begin(9);
        }
        for _ in 0..=MAX_DEPTH {
            o.end();
        }
        o.end();
        assert!(page_header(&o.bytes).unwrap_err().0.contains("nested"));
        // A varint of eleven bytes.
        let mut o = Compact::new();
        o.field(wire::I32, 1);
        o.bytes.extend_from_slice(&[0xff; 10]);
        o.bytes.push(0);
        assert!(page_header(&o.bytes).is_err());
    }

    #[test]
    fn every_length_is_checked_against_the_bytes_left() {
        // A statistics binary of 2^62 bytes, and a list of 2^31 - 1 elements, in a few bytes.
        for huge in [
            &[0x58, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f][..],
            &[0x59, 0xf5, 0xff, 0xff, 0xff, 0xff, 0x07][..],
        ] {
            let mut o = data_page(1);
            o.bytes.pop();
            o.bytes.extend_from_slice(huge);
            let err = page_header(&o.bytes).unwrap_err().0;
            assert!(err.contains("remain"), "{err}");
        }
        // Every prefix of a good header ends inside it.
        let o = data_page(3);
        for cut in 0..o.bytes.len() {
            assert!(page_header(&o.bytes[..cut]).is_err(), "{cut}");
        }
    }

    #[test]
    fn a_footers_schema_is_counted_where_the_crate_finds_it() {
        let mut o = Compact::new();
        o.i32(1, 2).field(wire::LIST, 2).bytes.push(0x3c);
        for _ in 0..3 {
            o.bytes.push(0);
        }
        assert_eq!(schema_elements(&o.bytes), Ok(3));
        let mut o = Compact::new();
        o.i32(1, 2).field(wire::LIST, 2).bytes.push(0xfc);
        o.varint(1_000_000);
        assert!(schema_elements(&o.bytes).is_err());
    }
}
