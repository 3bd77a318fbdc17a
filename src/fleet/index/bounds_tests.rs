//! Compression bombs and damage in each table, refused with the peak of what reading them
//! allocated measured by the test build's counting allocator ([`crate::allocations`]); genuine
//! parts of each table, large ones too, still read back as written.

use std::sync::Arc;

use bytes::Bytes;

use super::*;
use crate::allocations::peak_of;
use crate::fleet::index::bombs::{self, DATA_PAGE, NewChunk, PLAIN};
use crate::fleet::index::cache::Cache;
use crate::fleet::index::edits::{EditRow, FINGERPRINTS};
use crate::fleet::index::reader;
use crate::fleet::index::rows::{self, SessionRow, TurnRow};
use crate::fleet::index::snapshot::{Part, Snapshot};
use crate::fleet::index::table::{self, Table};
use crate::fleet::store::Store;
use crate::seeded::Seeded;

const MIB: u64 = 1 << 20;

/// What a panic the crate's decoders make (caught: `columns::unpanicked`) may add on this
/// thread: under `RUST_BACKTRACE` the panic hook resolves a backtrace (tens of MB, once).
fn panic_hook() -> u64 {
    let backtrace = std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0");
    if backtrace { 128 * MIB } else { 0 }
}

/// Read `bytes` as a part of `table` the way the readers do: the rows it holds (or why not),
/// and the most this allocated at once.
fn read(table: Table, bytes: &[u8]) -> (u64, Result<usize, String>) {
    let bytes = Bytes::copy_from_slice(bytes);
    peak_of(move || {
        let rows = match table {
            Table::Sessions => table::decode_sessions(bytes).map(|r| r.len()),
            Table::Turns => table::decode_turns(bytes).map(|r| r.len()),
            Table::Postings => table::decode_all_postings(bytes).map(|r| r.len()),
            Table::Edits => table::decode_edits(bytes).map(|r| r.len()),
        };
        rows.map_err(|e| e.to_string())
    })
}

/// `bytes` as a part of `table` is refused with an error saying `why`, having allocated at
/// most `bound`; the peak, for the record.
#[track_caller]
fn refused(what: &str, table: Table, bytes: &[u8], why: &str, bound: u64) -> u64 {
    let (peak, read) = read(table, bytes);
    let err = read.expect_err(what);
    assert!(err.contains(why), "{what}: {err}");
    assert!(
        peak <= bound,
        "{what}: {peak} bytes allocated, over {bound}"
    );
    assert!(peak <= MAX_READ_BYTES, "{what}: {peak}");
    eprintln!(
        "{what}: {} bytes, refused having allocated {peak} bytes at most: {err}",
        bytes.len()
    );
    peak
}

fn session(i: usize, title: &str) -> SessionRow {
    SessionRow {
        session: format!("session-{i:08}"),
        title: (!i.is_multiple_of(7)).then(|| title.to_string()),
        agent: Some("claude-agent-acp".into()),
        host: format!("host{}", i % 5),
        cwd: Some(format!("/work/project{}", i % 13)),
        started_us: 1_795_000_000_000_000 + i as i64,
        last_activity_us: 1_795_000_000_000_000 + 2 * i as i64,
        turns: i as u32 % 40,
        state: ["idle", "running", "closed"][i % 3].into(),
        input_tokens: i as u64 * 1000,
        output_tokens: u64::MAX - i as u64,
        cost: i.is_multiple_of(2).then_some(i as f64 / 8.0),
        parent: i
            .is_multiple_of(11)
            .then(|| format!("session-{:08}", i / 2)),
        hidden: i.is_multiple_of(17),
        version: i as i64,
        agent_name: Some("@agentclientprotocol/claude-agent-acp".into()),
        agent_version: (!i.is_multiple_of(5)).then(|| "0.101.0".into()),
        agent_command: Some("npx @agentclientprotocol/claude-agent-acp".into()),
        bytes: (!i.is_multiple_of(3)).then_some(i as u64 * 4096),
        last_turn_ended_us: (!i.is_multiple_of(4)).then_some(1_795_000_000_000_000 + i as i64),
        edits: (!i.is_multiple_of(6)).then_some(i as u64),
    }
}

fn edit(i: usize, prompt: &str, lines: u64) -> EditRow {
    EditRow {
        session: format!("session-{i:08}"),
        turn: i as u32 % 40,
        host: format!("host{}", i % 5),
        time_us: 1_795_000_000_000_000 + i as i64,
        tool_call: Some(format!("toolu_{i:020}")),
        agent: Some("claude-agent-acp".into()),
        model: (!i.is_multiple_of(3)).then(|| "claude-opus-4".into()),
        prompt: prompt.chars().take(rows::TEXT_CHARS).collect(),
        path: Some(format!("/work/project{}/src/{i}.rs", i % 13)),
        repo: (!i.is_multiple_of(4)).then(|| format!("{:040x}", i % 13)),
        repo_path: (!i.is_multiple_of(4)).then(|| format!("src/{i}.rs")),
        how: Some("diff".into()),
        command: None,
        written: (0..lines)
            .map(|l| l.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .collect(),
        removed: (0..lines / 2).collect(),
    }
}

fn turn(i: usize, text: &str, tools: usize) -> TurnRow {
    TurnRow {
        session: format!("session-{:08}", i / 10),
        turn: i as u32 % 10 + 1,
        host: "host".into(),
        started_us: 1_795_000_000_000_000 + i as i64,
        duration_ms: (!i.is_multiple_of(3)).then_some(i as u64),
        prompt: format!("{i} {text}")
            .chars()
            .take(rows::TEXT_CHARS)
            .collect(),
        agent_text: format!("{text} {i}")
            .chars()
            .take(rows::TEXT_CHARS)
            .collect(),
        tools: (0..tools)
            .map(|t| format!("execute: step {t} of {i} {text:.100}"))
            .collect(),
        paths: (0..tools / 2)
            .map(|t| format!("/work/{i}/{t}.rs"))
            .collect(),
        stop_reason: Some("end_turn".into()),
        input_tokens: Some(i as u64),
        output_tokens: None,
        cost: (!i.is_multiple_of(4)).then_some(i as f64 / 100.0),
        currency: (!i.is_multiple_of(4)).then(|| "USD".into()),
    }
}

fn postings(n: usize) -> Vec<(String, String)> {
    let mut rows: Vec<(String, String)> = (0..n)
        .map(|i| {
            (
                format!("word{:06}", i / 7),
                format!("session-{:08}", i % 5000),
            )
        })
        .collect();
    rows.sort();
    rows.dedup();
    rows
}

/// A genuine part of each table, small.
fn genuine(table: Table) -> Vec<u8> {
    let bytes = match table {
        Table::Sessions => table::encode_sessions(&[session(1, "a title")]),
        Table::Turns => table::encode_turns(&[turn(1, "fix the flaky test", 2)]),
        Table::Postings => table::encode_postings(&postings(20)),
        Table::Edits => table::encode_edits(&[edit(1, "add a greeting", 3)]),
    };
    bytes.unwrap().to_vec()
}

/// The column of each table a bomb goes in: a title, a prompt, a word.
fn text_column(table: Table) -> (usize, bool) {
    match table {
        Table::Sessions => (1, true),
        Table::Turns => (5, false),
        Table::Postings => (0, false),
        Table::Edits => (7, false),
    }
}

/// `part` with its chunk of column `column` (of one row group) replaced by `chunk`.
fn with_chunk(part: &[u8], column: usize, chunk: NewChunk) -> Vec<u8> {
    let mut chunk = Some(chunk);
    bombs::with_chunks(part, |_, c| if c == column { chunk.take() } else { None })
}

/// The largest data page and dictionary page of a part, decompressed.
fn largest_pages(bytes: &[u8]) -> (u32, u32) {
    let footer = check_part(&Bytes::copy_from_slice(bytes), &table::turns_schema())
        .or_else(|_| check_part(&Bytes::copy_from_slice(bytes), &table::sessions_schema()))
        .or_else(|_| check_part(&Bytes::copy_from_slice(bytes), &table::postings_schema()))
        .or_else(|_| check_part(&Bytes::copy_from_slice(bytes), &table::edits_schema()))
        .unwrap();
    let (mut data, mut dictionary) = (0, 0);
    for g in 0..footer.metadata().num_row_groups() {
        for c in 0..footer.metadata().row_group(g).num_columns() {
            let range = footer.chunk(g, c);
            let mut chunk = &bytes[range.start as usize..range.end as usize];
            while !chunk.is_empty() {
                let (header, len) = super::super::thrift::page_header(chunk).unwrap();
                match header.kind {
                    super::super::thrift::PageKind::Dictionary => {
                        dictionary = dictionary.max(header.uncompressed)
                    }
                    _ => data = data.max(header.uncompressed),
                }
                chunk = &chunk[len + header.compressed as usize..];
            }
        }
    }
    (data, dictionary)
}

/// `rows` written by our encoder and read back: the same rows, its pages within the bounds,
/// what reading it allocated at most.
fn round_trip<R: PartialEq + std::fmt::Debug>(
    what: &str,
    rows: &[R],
    encode: fn(&[R]) -> parquet::errors::Result<Bytes>,
    decode: fn(Bytes) -> parquet::errors::Result<Vec<R>>,
) {
    let bytes = encode(rows).unwrap();
    let (data_page, dictionary) = largest_pages(&bytes);
    assert!(data_page <= MAX_PAGE_BYTES, "{what}: a page of {data_page}");
    assert!(
        dictionary <= MAX_DICTIONARY_BYTES,
        "{what}: a dictionary of {dictionary}"
    );
    let size = bytes.len();
    let (peak, back) = peak_of(|| decode(bytes));
    assert!(back.unwrap() == rows, "{what}: not the rows written");
    eprintln!(
        "{what}: {} rows, {size} bytes (pages of {data_page} bytes at most, dictionaries of \
         {dictionary}), read with {peak} bytes at most",
        rows.len()
    );
    assert!(peak <= MAX_READ_BYTES, "{what}: {peak}");
}

/// `n` characters of 4 bytes each, drawn from `random` (text that does not compress).
fn noise(random: &mut Seeded, n: usize) -> String {
    (0..n)
        .map(|_| char::from_u32(0x1F600 + random.below(80) as u32).unwrap_or('x'))
        .collect()
}

#[test]
fn genuine_parts_of_every_table_read_back_as_written_large_ones_too() {
    let mut random = Seeded(41);
    // 20 000 sessions; 1 000 turns of the longest texts our writer keeps (4 096 characters of
    // 4 bytes each, none alike), 64 tool calls and 32 paths each; 300 000 postings.
    let sessions: Vec<SessionRow> = (0..20_000)
        .map(|i| session(i, &format!("title {i}")))
        .collect();
    let turns: Vec<TurnRow> = (0..1000)
        .map(|i| TurnRow {
            prompt: noise(&mut random, rows::TEXT_CHARS),
            agent_text: noise(&mut random, rows::TEXT_CHARS),
            tools: (0..rows::TOOLS).map(|_| noise(&mut random, 100)).collect(),
            ..turn(i, "", rows::TOOLS)
        })
        .collect();
    let words = postings(300_000);
    round_trip(
        "a sessions part of 1 row",
        &sessions[..1],
        table::encode_sessions,
        table::decode_sessions,
    );
    round_trip(
        "a turns part of 1 row",
        &turns[..1],
        table::encode_turns,
        table::decode_turns,
    );
    round_trip(
        "a postings part of 1 row",
        &words[..1],
        table::encode_postings,
        table::decode_all_postings,
    );
    round_trip(
        "a sessions part of 20 000 rows",
        &sessions,
        table::encode_sessions,
        table::decode_sessions,
    );
    round_trip(
        "a turns part of 1 000 rows of the longest texts",
        &turns,
        table::encode_turns,
        table::decode_turns,
    );
    round_trip(
        "a postings part of 300 000 rows",
        &words,
        table::encode_postings,
        table::decode_all_postings,
    );
}

/// A part of `table` whose text column (a title, a prompt, a word) is a page declaring 2 GiB
/// decompressed.
fn page_of_2_gib(table: Table) -> Vec<u8> {
    let (column, optional) = text_column(table);
    let def = optional.then_some(&[(1, 1)][..]);
    let body = bombs::data_body(None, def, &bombs::plain(&[b"x"]));
    let page = bombs::page(DATA_PAGE, 1, PLAIN, &body, Some(i32::MAX));
    let chunk = NewChunk {
        bytes: page,
        dictionary: 0,
    };
    with_chunk(&genuine(table), column, chunk)
}

#[test]
fn a_zstd_page_declaring_a_huge_size_is_refused_before_anything_is_allocated_for_it() {
    for table in [Table::Sessions, Table::Turns, Table::Postings, Table::Edits] {
        refused(
            &format!("{table:?}: a page declaring 2 GiB"),
            table,
            &page_of_2_gib(table),
            "a page of 2147483647 bytes decompressed, more than the 8388608 allowed",
            MIB,
        );
    }
}

/// The title bomb of the issue: a sessions part of a few kilobytes whose title cell is 512 MiB.
fn title_of_512_mib(declared: Option<i32>) -> Vec<u8> {
    let len = 512 << 20;
    let mut prefix = bombs::levels(&[(1, 1)]);
    prefix.extend((len as u32).to_le_bytes());
    let compressed = bombs::zstd_of_repeated(&prefix, b'a', len);
    let uncompressed = declared.unwrap_or((prefix.len() + len) as i32);
    let mut page = bombs::page_header(
        DATA_PAGE,
        uncompressed,
        compressed.len() as i32,
        1,
        PLAIN,
        |_| {},
    );
    page.extend(compressed);
    with_chunk(
        &genuine(Table::Sessions),
        1,
        NewChunk {
            bytes: page,
            dictionary: 0,
        },
    )
}

#[test]
fn a_title_of_512_mib_is_refused_before_it_is_decompressed_and_a_lie_about_its_size_too() {
    let part = title_of_512_mib(None);
    assert!(part.len() < 200 << 10, "{}", part.len());
    refused(
        "a title of 512 MiB",
        Table::Sessions,
        &part,
        "more than the 8388608 allowed",
        MIB,
    );
    // Declared 1 MiB: the crate decompresses into that much and stops.
    let part = title_of_512_mib(Some(1 << 20));
    refused(
        "a title of 512 MiB said to be 1 MiB",
        Table::Sessions,
        &part,
        "title",
        3 * MIB,
    );
}

/// A part of `table` of `rows` rows whose column `column` is a dictionary of one `value`
/// every row refers to.
fn dictionary_bomb(table: Table, rows: u32, value: &[u8]) -> Vec<u8> {
    let (column, optional) = text_column(table);
    let genuine = match table {
        Table::Sessions => {
            let rows: Vec<SessionRow> = (0..rows as usize)
                .map(|i| SessionRow {
                    title: Some("t".into()),
                    ..session(i, "t")
                })
                .collect();
            table::encode_sessions(&rows).unwrap()
        }
        Table::Postings => table::encode_postings(
            &(0..rows)
                .map(|i| ("w".to_string(), format!("s{i:07}")))
                .collect::<Vec<_>>(),
        )
        .unwrap(),
        Table::Turns | Table::Edits => unreachable!("their bombs are the list's and the cell's"),
    };
    let def = [(rows, 1)];
    let body = bombs::data_body(
        None,
        optional.then_some(&def[..]),
        &bombs::keys(1, &[(rows, 0)]),
    );
    let chunk = bombs::dictionary_chunk(&[value], rows as i32, &body);
    with_chunk(&genuine, column, chunk)
}

#[test]
fn a_dictionary_value_every_row_refers_to_is_refused_within_the_budget() {
    // 4 096 titles of 60 KiB (under the bound of a cell): 240 MiB to copy, refused by the
    // budget of the rows.
    let part = dictionary_bomb(Table::Sessions, 4096, &[b'a'; 60 << 10]);
    refused(
        "a 60 KiB title every one of 4 096 rows refers to",
        Table::Sessions,
        &part,
        "more than the 134217728 bytes a part's rows may",
        MAX_DECODED_BYTES as u64 + 16 * MIB,
    );
    // One of 1 MiB, over the bound of a cell.
    let part = dictionary_bomb(Table::Sessions, 4096, &[b'a'; 1 << 20]);
    refused(
        "a 1 MiB title every row refers to",
        Table::Sessions,
        &part,
        "a cell of 1048576 bytes, more than the 65536 allowed",
        16 * MIB,
    );
    // The postings' bomb of the issue: a word of 1 MiB for a row group of postings.
    let part = dictionary_bomb(
        Table::Postings,
        table::POSTINGS_ROW_GROUP as u32,
        &[b'w'; 1 << 20],
    );
    refused(
        "a 1 MiB word every posting refers to",
        Table::Postings,
        &part,
        "a cell of 1048576 bytes, more than the 64 allowed",
        16 * MIB,
    );
}

/// A turns part of one row whose `tools` list holds `items` items (run-length levels, a
/// dictionary of one entry).
fn list_bomb(items: u32) -> Vec<u8> {
    let body = bombs::data_body(
        Some(&[(1, 0), (items - 1, 1)]),
        Some(&[(items, 2)]),
        &bombs::keys(1, &[(items, 0)]),
    );
    let chunk = bombs::dictionary_chunk(&[b"edit: x"], items as i32, &body);
    with_chunk(&genuine(Table::Turns), 7, chunk)
}

#[test]
fn a_row_whose_list_holds_millions_of_items_is_refused() {
    // Ten million: over the levels a column chunk may have, refused unread.
    refused(
        "a list of 10 million items",
        Table::Turns,
        &list_bomb(10_000_000),
        "more than the 1048576 values a column chunk may have",
        MIB,
    );
    // The most a chunk may have: the crate decodes them (36 bytes each at most), the row is
    // refused before a string of it is copied.
    refused(
        "a list of 1 Mi items",
        Table::Turns,
        &list_bomb(1 << 20),
        "a list of 1048576 items, more than the 64 allowed",
        36 * MAX_CHUNK_VALUES + 4 * MIB,
    );
}

/// A postings part whose first page header holds a statistics value said to be `len` bytes.
fn header_with_a_binary_of(len: u64) -> Vec<u8> {
    let body = bombs::data_body(None, None, &bombs::plain(&[b"w"]));
    let compressed = zstd::bulk::compress(&body, 3).unwrap();
    let (uncompressed, size) = (body.len() as i32, compressed.len() as i32);
    let mut page = bombs::page_header(DATA_PAGE, uncompressed, size, 1, PLAIN, |c| {
        // Statistics, its `max`.
        c.begin(5).binary_len(1, len);
    });
    page.extend(compressed);
    let chunk = NewChunk {
        bytes: page,
        dictionary: 0,
    };
    with_chunk(&genuine(Table::Postings), 0, chunk)
}

#[test]
fn a_page_header_with_a_huge_binary_field_is_refused() {
    for len in [1 << 40, u64::MAX >> 1, 5 << 10] {
        refused(
            &format!("a page header with a binary field of {len} bytes"),
            Table::Postings,
            &header_with_a_binary_of(len),
            "a page header",
            MIB,
        );
    }
}

#[test]
fn a_dictionary_that_holds_fewer_entries_than_it_says_is_an_error_not_a_panic() {
    // Two entries declared, one there: the crate asserts on the second one's length.
    let dictionary = bombs::page(
        bombs::DICTIONARY_PAGE,
        2,
        PLAIN,
        &bombs::plain(&[b"abcd"]),
        None,
    );
    let body = bombs::data_body(None, None, &bombs::keys(1, &[(20, 1)]));
    let data = bombs::page(DATA_PAGE, 20, bombs::RLE_DICTIONARY, &body, None);
    let chunk = NewChunk {
        dictionary: dictionary.len(),
        bytes: [dictionary, data].concat(),
    };
    let part = with_chunk(&genuine(Table::Postings), 0, chunk);
    refused(
        "a dictionary short of an entry",
        Table::Postings,
        &part,
        "column word: the parquet crate failed on it (assertion failed: size <= src.len())",
        MIB + panic_hook(),
    );
}

#[test]
fn truncated_and_garbage_parts_are_refused() {
    let mut random = Seeded(50);
    for table in [Table::Sessions, Table::Turns, Table::Postings, Table::Edits] {
        let part = genuine(table);
        for cut in (0..part.len()).step_by(7) {
            let (peak, read) = read(table, &part[..cut]);
            assert!(read.is_err(), "{table:?} cut at {cut}");
            assert!(peak < MIB, "{table:?} cut at {cut}: {peak}");
        }
        // Bytes of it flipped: refused, or (a flip that changes nothing read) its rows.
        for _ in 0..300 {
            let mut bad = part.clone();
            let at = random.below(bad.len() as u64) as usize;
            bad[at] ^= 1 << random.below(8);
            let (peak, _) = read(table, &bad);
            assert!(
                peak < 4 * MIB + panic_hook(),
                "{table:?} flipped at {at}: {peak}"
            );
        }
        let garbage: Vec<u8> = (0..4096).map(|_| random.next() as u8).collect();
        let framed = [&b"PAR1"[..], &garbage, &[0, 8, 0, 0], b"PAR1"].concat();
        for bytes in [&garbage[..], &framed, b"PAR1", b"PAR1\xff\xff\xff\xffPAR1"] {
            let (peak, read) = read(table, bytes);
            assert!(read.is_err(), "{table:?}");
            assert!(peak < MIB, "{table:?}: {peak}");
        }
    }
}

#[test]
fn a_part_of_another_schema_is_refused() {
    for (part, table) in [
        (Table::Sessions, Table::Turns),
        (Table::Turns, Table::Postings),
        (Table::Postings, Table::Edits),
        (Table::Edits, Table::Sessions),
    ] {
        let what = format!("a {part:?} part read as {table:?}");
        refused(&what, table, &genuine(part), "its schema differs", MIB);
    }
}

/// A footer (Thrift `FileMetaData`) whose schema is `depth` groups, each in the one before.
fn nested_schema(depth: u64) -> Vec<u8> {
    let mut c = bombs::Compact::new();
    c.i32(1, 2).field(9, 2).bytes.push(0xfc);
    c.varint(depth);
    for _ in 0..depth {
        c.element();
        c.binary_len(4, 1).bytes.push(b'g');
        c.i32(5, 1).end();
    }
    c.end();
    c.bytes
}

#[test]
fn a_schema_nested_a_hundred_thousand_deep_is_refused_before_the_crate_builds_it() {
    // The crate builds a schema by recursion, a level per element: this one would overflow
    // the stack.
    let footer = nested_schema(100_000);
    let part = [
        &b"PAR1"[..],
        &footer,
        &(footer.len() as u32).to_le_bytes(),
        b"PAR1",
    ]
    .concat();
    refused(
        "a schema 100 000 deep",
        Table::Sessions,
        &part,
        "a schema of 100000 elements, more than the 32 allowed",
        MIB,
    );
}

/// A postings part whose footer lists as many row groups as [`MAX_FOOTER_BYTES`] holds, each
/// the genuine part's one row group (with its statistics) or, `bare`, only the fields the
/// crate requires: the footer's size, and the most reading it and its metadata allocated.
fn most_row_groups(bare: bool) -> (usize, u64, u64) {
    use parquet::basic::{Compression, ZstdLevel};
    use parquet::file::metadata::{
        ColumnChunkMetaData, ParquetMetaDataReader, ParquetMetaDataWriter, RowGroupMetaData,
    };
    let part = genuine(Table::Postings);
    let metadata = ParquetMetaDataReader::new()
        .parse_and_finish(&Bytes::copy_from_slice(&part))
        .unwrap();
    let genuine_group = metadata.row_group(0).clone();
    let group = if bare {
        let schema = metadata.file_metadata().schema_descr_ptr();
        let columns = genuine_group
            .columns()
            .iter()
            .enumerate()
            .map(|(i, c)| {
                ColumnChunkMetaData::builder(schema.column(i))
                    .set_compression(Compression::ZSTD(ZstdLevel::default()))
                    .set_dictionary_page_offset(c.dictionary_page_offset())
                    .set_data_page_offset(c.data_page_offset())
                    .set_total_compressed_size(c.compressed_size())
                    .build()
                    .unwrap()
            })
            .collect();
        RowGroupMetaData::builder(schema)
            .set_num_rows(genuine_group.num_rows())
            .set_column_metadata(columns)
            .build()
            .unwrap()
    } else {
        genuine_group
    };
    let footer_of = |groups: usize| {
        let metadata = metadata
            .clone()
            .into_builder()
            .set_row_groups(vec![group.clone(); groups])
            .build();
        let mut footer = vec![];
        ParquetMetaDataWriter::new(&mut footer, &metadata)
            .with_write_path_in_schema(!bare)
            .finish()
            .unwrap();
        footer
    };
    let each = footer_of(2).len() - footer_of(1).len();
    let groups = (MAX_FOOTER_BYTES as usize - footer_of(0).len()) / each;
    let rows = groups * group.num_rows() as usize;
    assert!(rows as u64 <= MAX_ROWS, "{rows}");
    // The genuine chunks, then the footer of as many row groups as fit.
    let (start, len) = metadata.row_group(0).column(1).byte_range();
    let data_end = (start + len) as usize;
    let bytes = [&part[..data_end], &footer_of(groups)].concat();
    let footer_len = bytes.len() - data_end - 8;
    assert!(footer_len as u64 <= MAX_FOOTER_BYTES);
    let (read_peak, read) = read(Table::Postings, &bytes);
    assert_eq!(read, Ok(rows));
    let tail = &bytes[data_end..bytes.len() - 8];
    let (peak, footer) =
        peak_of(|| Footer::parse(tail, bytes.len() as u64, &table::postings_schema()).map(drop));
    footer.unwrap();
    eprintln!(
        "a footer of {groups} row groups ({}), {footer_len} bytes: read with {read_peak} bytes at most, its metadata {peak} ({:.1} times the footer)",
        if bare { "bare" } else { "as ours" },
        peak as f64 / footer_len as f64
    );
    (footer_len, peak, read_peak)
}

#[test]
fn a_footer_of_the_most_row_groups_it_can_hold_takes_a_bounded_multiple_of_its_size() {
    for bare in [false, true] {
        let (footer, metadata, read) = most_row_groups(bare);
        assert!(metadata <= FOOTER_EXPANSION * footer as u64, "{metadata}");
        assert!(read <= MAX_READ_BYTES, "{read}");
    }
}

#[tokio::test]
async fn a_store_object_over_its_limit_is_refused_before_its_body_is_read() {
    let store = Store::over(
        Arc::new(object_store::memory::InMemory::new()),
        "team",
        "memory://team",
    );
    store
        .put_new("index/p", Bytes::from(vec![7u8; 1000]))
        .await
        .unwrap();
    assert_eq!(
        store.get_bounded("index/p", 1000).await.unwrap().len(),
        1000
    );
    let (peak, got) = {
        crate::allocations::reset();
        let got = store.get_bounded("index/p", 999).await;
        (crate::allocations::peak(), got)
    };
    let err = got.unwrap_err().to_string();
    assert!(
        err.contains("index/p: 1000 bytes, more than the 999 allowed"),
        "{err}"
    );
    assert!(peak < 1000, "{peak}");
    assert!(store.get_bounded("index/absent", 10).await.is_err());
}

/// A store holding one postings part, `bytes`, of a name never used before (the cache keys
/// ranges by name: a part never changes), listed by a manifest (`words` its range).
async fn one_postings_part(bytes: &[u8], words: (&str, &str)) -> (Store, Snapshot) {
    static PARTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = PARTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let store = Store::over(
        Arc::new(object_store::memory::InMemory::new()),
        "team",
        "memory://team",
    );
    let path = format!("index/postings/part{n}.parquet");
    store
        .put_new(&path, Bytes::copy_from_slice(bytes))
        .await
        .unwrap();
    let part = Part {
        table: Table::Postings,
        path,
        rows: 1,
        bytes: bytes.len() as u64,
        day: None,
        words: Some((words.0.into(), words.1.into())),
    };
    let snapshot = Snapshot {
        format: 1,
        version: 1,
        parts: vec![part],
        ..Snapshot::default()
    };
    (store, snapshot)
}

#[tokio::test]
async fn a_lookup_reads_a_bounded_footer_and_only_row_groups_it_checked() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Arc::new(Cache::new(dir.path().join("cache"), 1 << 20));
    let lookup = |store: Store,
                  snapshot: Snapshot,
                  word: &'static str,
                  cache: Option<Arc<Cache>>| async move {
        crate::allocations::reset();
        let found =
            reader::candidates(&store, &snapshot, &[word.to_string()], cache.as_ref()).await;
        (crate::allocations::peak(), found)
    };
    // A genuine part: found, with and without the cache.
    let (store, snapshot) =
        one_postings_part(&genuine(Table::Postings), ("word000000", "word000002")).await;
    for cache in [None, Some(cache.clone())] {
        let (peak, found) = lookup(store.clone(), snapshot.clone(), "word000001", cache).await;
        assert_eq!(found.unwrap().len(), 7);
        eprintln!("a lookup in a genuine part: {peak} bytes at most");
    }
    // A footer said to be 4 GiB; a word of 1 MiB every posting refers to; a list of postings
    // claiming the part is larger than it is.
    let mut huge_footer = genuine(Table::Postings);
    let n = huge_footer.len();
    huge_footer[n - 8..n - 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let word_bomb = dictionary_bomb(
        Table::Postings,
        table::POSTINGS_ROW_GROUP as u32,
        &[b'w'; 1 << 20],
    );
    for (what, bytes, why) in [
        (
            "a footer of 4 GiB",
            &huge_footer,
            "a footer of 4294967295 bytes, more than the 1048576 allowed",
        ),
        (
            "a word of 1 MiB",
            &word_bomb,
            "a cell of 1048576 bytes, more than the 64 allowed",
        ),
    ] {
        let (store, snapshot) = one_postings_part(bytes, ("w", "word999")).await;
        for cache in [None, Some(cache.clone())] {
            let (peak, found) = lookup(store.clone(), snapshot.clone(), "w", cache).await;
            let err = found.unwrap_err().to_string();
            assert!(err.starts_with("index/postings/part"), "{err}");
            assert!(err.contains(why), "{what}: {err}");
            assert!(peak < 16 * MIB, "{what}: {peak}");
            eprintln!("a lookup in {what}: refused having allocated {peak} bytes at most: {err}");
        }
    }
    let (store, mut snapshot) =
        one_postings_part(&genuine(Table::Postings), ("w", "word999")).await;
    snapshot.parts[0].bytes = 1 << 40;
    assert!(lookup(store, snapshot, "w", None).await.1.is_err());
}

/// An edits part whose fingerprints cell is one past its bound (our writer splits an edit into
/// rows of at most `FINGERPRINTS`).
fn fingerprints_past_their_bound() -> Vec<u8> {
    table::encode_edits(&[edit(1, "p", FINGERPRINTS as u64 + 1)])
        .unwrap()
        .to_vec()
}

#[test]
fn fingerprints_past_their_bound_are_refused_and_genuine_ones_read_back() {
    let bound = 8 * FINGERPRINTS;
    refused(
        "a fingerprints cell one past its bound",
        Table::Edits,
        &fingerprints_past_their_bound(),
        &format!(
            "a cell of {} bytes (fingerprints of 8 bytes, at most {bound})",
            bound + 8
        ),
        4 * MIB,
    );
    let rows: Vec<EditRow> = (0..2000)
        .map(|i| edit(i, "a prompt", i as u64 % 50))
        .collect();
    let part = table::encode_edits(&rows).unwrap();
    assert_eq!(table::decode_edits(part).unwrap(), rows);
}

/// The seeds of the `index_part` fuzz target (`fuzz/corpus/index_part/`) are what the parts of
/// these tests are: a genuine part of each table and a bomb of each kind, each after its
/// table's byte (0 sessions, 1 turns, 2 postings, 3 edits). `UPDATE_FUZZ_SEEDS=1` writes them again.
#[test]
fn the_fuzz_seeds_are_these_tests_parts() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/index_part");
    let seeds = [
        ("sessions", 0, genuine(Table::Sessions)),
        ("turns", 1, genuine(Table::Turns)),
        ("postings", 2, genuine(Table::Postings)),
        ("edits", 3, genuine(Table::Edits)),
        ("edits-fingerprints", 3, fingerprints_past_their_bound()),
        ("sessions-page-of-2-gib", 0, page_of_2_gib(Table::Sessions)),
        (
            "sessions-dictionary",
            0,
            dictionary_bomb(Table::Sessions, 64, &[b'a'; 60 << 10]),
        ),
        ("turns-list", 1, list_bomb(1 << 20)),
        (
            "postings-header-binary",
            2,
            header_with_a_binary_of(1 << 40),
        ),
    ];
    let update = std::env::var_os("UPDATE_FUZZ_SEEDS").is_some();
    for (name, table, part) in seeds {
        let seed = [&[table][..], &part].concat();
        let path = dir.join(format!("seed-{name}"));
        if update {
            std::fs::write(&path, seed).unwrap();
        } else {
            assert!(
                std::fs::read(&path).is_ok_and(|committed| committed == seed),
                "{} is not this test's part (UPDATE_FUZZ_SEEDS=1 writes it)",
                path.display()
            );
        }
    }
}
