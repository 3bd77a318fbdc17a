//! The index's tables as Parquet (the Apache Arrow project's `parquet` crate): their schemas,
//! and rows to bytes and back. Every file is zstd-compressed, with statistics per row group
//! and page, so an engine (or our reader) skips what a query cannot need. A part is decoded only
//! once [`super::bounds`] has checked it, by [`super::columns`] within a budget.

use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray, UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;

use super::bounds::{self, Footer, MAX_CELL_BYTES};
use super::columns::{self, Chunk, Columns};
use super::edits::{EditRow, FINGERPRINTS};
use super::rows::{CURRENCY_CHARS, SessionRow, TEXT_CHARS, TOOLS, TurnRow, WORD_BYTES};
use crate::fleet::Error;

/// Rows per row group of the postings (a word's lookup reads about one).
pub const POSTINGS_ROW_GROUP: usize = 8192;
/// Rows per row group of the turns: 16 384, so that a row group's lists (at most
/// [`TOOLS`] items a row) stay within [`bounds::MAX_CHUNK_VALUES`].
pub const TURNS_ROW_GROUP: usize = 16 << 10;
/// Rows per row group of the sessions (a level per row: [`bounds::MAX_CHUNK_VALUES`]).
const SESSIONS_ROW_GROUP: usize = 1 << 20;
/// Longest prompt or agent text in bytes: [`TEXT_CHARS`] characters of UTF-8.
const TEXT_BYTES: usize = 4 * TEXT_CHARS;

/// The index's tables.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Table {
    /// One row per session (the latest version of each counts).
    Sessions,
    /// One row per prompt turn.
    Turns,
    /// (word, session): which sessions hold a word.
    Postings,
    /// One row per edit of a file, or command, of a session (what `blame` needs).
    Edits,
}

impl Table {
    /// Its directory under `index/`.
    pub fn dir(self) -> &'static str {
        match self {
            Table::Sessions => "sessions",
            Table::Turns => "turns",
            Table::Postings => "postings",
            Table::Edits => "edits",
        }
    }

    /// Its schema.
    pub fn schema(self) -> Arc<Schema> {
        match self {
            Table::Sessions => sessions_schema(),
            Table::Turns => turns_schema(),
            Table::Postings => postings_schema(),
            Table::Edits => edits_schema(),
        }
    }

    /// Whether the manifest's format 1 had it from the start, so that every build reads its
    /// parts (see `snapshot::Stored`).
    pub fn in_format_1(self) -> bool {
        !matches!(self, Table::Edits)
    }
}

fn utc() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

fn strings() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)))
}

/// The `sessions` table (its third schema): its second schema's columns, then `edits` (issue
/// 53: the rows the `edits` table holds of the session, as far as its host indexed it; null in
/// a row of a host that did not index edits).
pub fn sessions_schema() -> Arc<Schema> {
    let mut fields: Vec<Field> = sessions_schema_2()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("edits", DataType::UInt64, true));
    Arc::new(Schema::new(fields))
}

/// The `sessions` table's second schema: its first schema's columns, then `agent_name`,
/// `agent_version`, `agent_command`, `bytes` and `last_turn_ended` (issue 51).
pub fn sessions_schema_2() -> Arc<Schema> {
    let mut fields: Vec<Field> = sessions_schema_1()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.extend([
        Field::new("agent_name", DataType::Utf8, true),
        Field::new("agent_version", DataType::Utf8, true),
        Field::new("agent_command", DataType::Utf8, true),
        Field::new("bytes", DataType::UInt64, true),
        Field::new("last_turn_ended", utc(), true),
    ]);
    Arc::new(Schema::new(fields))
}

/// The `sessions` table as parts written before issue 51 have it (still read: their
/// newer columns read as null).
pub fn sessions_schema_1() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("session", DataType::Utf8, false),
        Field::new("title", DataType::Utf8, true),
        Field::new("agent", DataType::Utf8, true),
        Field::new("host", DataType::Utf8, false),
        Field::new("cwd", DataType::Utf8, true),
        Field::new("started", utc(), false),
        Field::new("last_activity", utc(), false),
        Field::new("turns", DataType::UInt32, false),
        Field::new("state", DataType::Utf8, false),
        Field::new("input_tokens", DataType::UInt64, false),
        Field::new("output_tokens", DataType::UInt64, false),
        Field::new("cost", DataType::Float64, true),
        Field::new("parent", DataType::Utf8, true),
        Field::new("hidden", DataType::Boolean, false),
        Field::new("version", DataType::Int64, false),
    ]))
}

/// The `turns` table (its second schema): its first schema's columns, then `cost` and
/// `currency` (issue 54: what the session's cumulative cost grew by during the turn, and its
/// currency; null when the agent reported none).
pub fn turns_schema() -> Arc<Schema> {
    let mut fields: Vec<Field> = turns_schema_1()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.extend([
        Field::new("cost", DataType::Float64, true),
        Field::new("currency", DataType::Utf8, true),
    ]);
    Arc::new(Schema::new(fields))
}

/// The `turns` table as parts written before issue 54 have it (still read: their `cost` and
/// `currency` read as null).
pub fn turns_schema_1() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("session", DataType::Utf8, false),
        Field::new("turn", DataType::UInt32, false),
        Field::new("host", DataType::Utf8, false),
        Field::new("started", utc(), false),
        Field::new("duration_ms", DataType::UInt64, true),
        Field::new("prompt", DataType::Utf8, false),
        Field::new("agent_text", DataType::Utf8, false),
        Field::new("tools", strings(), false),
        Field::new("paths", strings(), false),
        Field::new("stop_reason", DataType::Utf8, true),
        Field::new("input_tokens", DataType::UInt64, true),
        Field::new("output_tokens", DataType::UInt64, true),
    ]))
}

/// The `postings` table (sorted by word).
pub fn postings_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("word", DataType::Utf8, false),
        Field::new("session", DataType::Utf8, false),
    ]))
}

/// The `edits` table (issue 53): a row per edit of a file or command of a session.
pub fn edits_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("session", DataType::Utf8, false),
        Field::new("turn", DataType::UInt32, false),
        Field::new("host", DataType::Utf8, false),
        Field::new("time", utc(), false),
        Field::new("tool_call", DataType::Utf8, true),
        Field::new("agent", DataType::Utf8, true),
        Field::new("model", DataType::Utf8, true),
        Field::new("prompt", DataType::Utf8, false),
        Field::new("path", DataType::Utf8, true),
        Field::new("repo", DataType::Utf8, true),
        Field::new("repo_path", DataType::Utf8, true),
        Field::new("how", DataType::Utf8, true),
        Field::new("command", DataType::Utf8, true),
        Field::new("written", DataType::Binary, false),
        Field::new("removed", DataType::Binary, false),
    ]))
}

fn encode(batch: &RecordBatch, row_group: usize) -> parquet::errors::Result<Bytes> {
    let properties = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
        .set_max_row_group_row_count(Some(row_group))
        .set_created_by(concat!("acp-journal ", env!("CARGO_PKG_VERSION")).into())
        .build();
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, batch.schema(), Some(properties))?;
    writer.write(batch)?;
    writer.close()?;
    Ok(Bytes::from(out))
}

fn list(values: impl Iterator<Item = Vec<String>>) -> ArrayRef {
    let mut builder = ListBuilder::new(StringBuilder::new());
    for row in values {
        for v in row {
            builder.values().append_value(v);
        }
        builder.append(true);
    }
    Arc::new(builder.finish())
}

fn ts(values: impl Iterator<Item = i64>) -> ArrayRef {
    Arc::new(TimestampMicrosecondArray::from_iter_values(values).with_timezone("UTC"))
}

/// Sessions as a Parquet file.
///
/// # Errors
/// The encoder's.
pub fn encode_sessions(rows: &[SessionRow]) -> parquet::errors::Result<Bytes> {
    encode(
        &RecordBatch::try_new(sessions_schema(), session_columns(rows))?,
        SESSIONS_ROW_GROUP,
    )
}

/// The columns of the `sessions` table for `rows`, in the schema's order.
fn session_columns(rows: &[SessionRow]) -> Vec<ArrayRef> {
    vec![
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| &r.session),
        )),
        Arc::new(StringArray::from_iter(
            rows.iter().map(|r| r.title.as_deref()),
        )),
        Arc::new(StringArray::from_iter(
            rows.iter().map(|r| r.agent.as_deref()),
        )),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &r.host))),
        Arc::new(StringArray::from_iter(
            rows.iter().map(|r| r.cwd.as_deref()),
        )),
        ts(rows.iter().map(|r| r.started_us)),
        ts(rows.iter().map(|r| r.last_activity_us)),
        Arc::new(UInt32Array::from_iter_values(rows.iter().map(|r| r.turns))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &r.state))),
        Arc::new(UInt64Array::from_iter_values(
            rows.iter().map(|r| r.input_tokens),
        )),
        Arc::new(UInt64Array::from_iter_values(
            rows.iter().map(|r| r.output_tokens),
        )),
        Arc::new(Float64Array::from_iter(rows.iter().map(|r| r.cost))),
        Arc::new(StringArray::from_iter(
            rows.iter().map(|r| r.parent.as_deref()),
        )),
        Arc::new(BooleanArray::from_iter(rows.iter().map(|r| Some(r.hidden)))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.version))),
        Arc::new(StringArray::from_iter(
            rows.iter().map(|r| r.agent_name.as_deref()),
        )),
        Arc::new(StringArray::from_iter(
            rows.iter().map(|r| r.agent_version.as_deref()),
        )),
        Arc::new(StringArray::from_iter(
            rows.iter().map(|r| r.agent_command.as_deref()),
        )),
        Arc::new(UInt64Array::from_iter(rows.iter().map(|r| r.bytes))),
        Arc::new(
            TimestampMicrosecondArray::from_iter(rows.iter().map(|r| r.last_turn_ended_us))
                .with_timezone("UTC"),
        ),
        Arc::new(UInt64Array::from_iter(rows.iter().map(|r| r.edits))),
    ]
}

/// Turns as a Parquet file.
///
/// # Errors
/// The encoder's.
pub fn encode_turns(rows: &[TurnRow]) -> parquet::errors::Result<Bytes> {
    encode(
        &RecordBatch::try_new(turns_schema(), turn_columns(rows))?,
        TURNS_ROW_GROUP,
    )
}

/// The columns of the `turns` table for `rows`, in the schema's order.
fn turn_columns(rows: &[TurnRow]) -> Vec<ArrayRef> {
    vec![
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| &r.session),
        )),
        Arc::new(UInt32Array::from_iter_values(rows.iter().map(|r| r.turn))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &r.host))),
        ts(rows.iter().map(|r| r.started_us)),
        Arc::new(UInt64Array::from_iter(rows.iter().map(|r| r.duration_ms))),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| &r.prompt),
        )),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| &r.agent_text),
        )),
        list(rows.iter().map(|r| r.tools.clone())),
        list(rows.iter().map(|r| r.paths.clone())),
        Arc::new(StringArray::from_iter(
            rows.iter().map(|r| r.stop_reason.as_deref()),
        )),
        Arc::new(UInt64Array::from_iter(rows.iter().map(|r| r.input_tokens))),
        Arc::new(UInt64Array::from_iter(rows.iter().map(|r| r.output_tokens))),
        Arc::new(Float64Array::from_iter(rows.iter().map(|r| r.cost))),
        Arc::new(StringArray::from_iter(
            rows.iter().map(|r| r.currency.as_deref()),
        )),
    ]
}

/// Fingerprints as a binary cell: little-endian `u64`s.
fn fingerprints(prints: &[u64]) -> Vec<u8> {
    prints.iter().flat_map(|p| p.to_le_bytes()).collect()
}

/// Edits as a Parquet file.
///
/// # Errors
/// The encoder's.
pub fn encode_edits(rows: &[EditRow]) -> parquet::errors::Result<Bytes> {
    let text = |f: fn(&EditRow) -> &Option<String>| -> ArrayRef {
        Arc::new(StringArray::from_iter(rows.iter().map(|r| f(r).as_deref())))
    };
    let prints = |f: fn(&EditRow) -> &Vec<u64>| -> ArrayRef {
        let cells: Vec<Vec<u8>> = rows.iter().map(|r| fingerprints(f(r))).collect();
        Arc::new(BinaryArray::from_iter_values(cells))
    };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| &r.session),
        )),
        Arc::new(UInt32Array::from_iter_values(rows.iter().map(|r| r.turn))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &r.host))),
        ts(rows.iter().map(|r| r.time_us)),
        text(|r| &r.tool_call),
        text(|r| &r.agent),
        text(|r| &r.model),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| &r.prompt),
        )),
        text(|r| &r.path),
        text(|r| &r.repo),
        text(|r| &r.repo_path),
        text(|r| &r.how),
        text(|r| &r.command),
        prints(|r| &r.written),
        prints(|r| &r.removed),
    ];
    encode(
        &RecordBatch::try_new(edits_schema(), columns)?,
        TURNS_ROW_GROUP,
    )
}

/// Postings (`(word, session)`, sorted by word then session) as a Parquet file.
///
/// # Errors
/// The encoder's.
pub fn encode_postings(rows: &[(String, String)]) -> parquet::errors::Result<Bytes> {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &r.0))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &r.1))),
    ];
    encode(
        &RecordBatch::try_new(postings_schema(), columns)?,
        POSTINGS_ROW_GROUP,
    )
}

/// A decoding error as the crate's (the callers' type).
fn failed(why: Error) -> ParquetError {
    ParquetError::General(why.to_string())
}

/// The next cell of a required column (the schema, checked, says none is null).
fn required<T: Default>(column: &mut impl Iterator<Item = Option<T>>) -> T {
    column.next().flatten().unwrap_or_default()
}

/// The next cell of a column that may be null.
fn optional<T>(column: &mut impl Iterator<Item = Option<T>>) -> Option<T> {
    column.next().flatten()
}

/// The sessions a Parquet file of the table holds.
///
/// # Errors
/// A file that is not one of the table's, or past a bound of [`bounds`].
pub fn decode_sessions(bytes: Bytes) -> parquet::errors::Result<Vec<SessionRow>> {
    sessions(&bytes).map_err(failed)
}

fn sessions(bytes: &Bytes) -> Result<Vec<SessionRow>, Error> {
    // A part written before issue 53 has the second schema, before issue 51 the first: the
    // columns they lack are null.
    let (footer, schema) = match bounds::check_part(bytes, &sessions_schema()) {
        Ok(footer) => (footer, 3),
        Err(why) => match bounds::check_part(bytes, &sessions_schema_2()) {
            Ok(footer) => (footer, 2),
            Err(_) => match bounds::check_part(bytes, &sessions_schema_1()) {
                Ok(footer) => (footer, 1),
                Err(_) => return Err(why),
            },
        },
    };
    let newer = schema >= 2;
    let mut c = Columns::new(&footer, columns::every_chunk(&footer, bytes));
    let mut session = c.strings(0, MAX_CELL_BYTES)?.into_iter();
    let mut title = c.strings(1, MAX_CELL_BYTES)?.into_iter();
    let mut agent = c.strings(2, MAX_CELL_BYTES)?.into_iter();
    let mut host = c.strings(3, MAX_CELL_BYTES)?.into_iter();
    let mut cwd = c.strings(4, MAX_CELL_BYTES)?.into_iter();
    let mut started = c.int64s(5)?.into_iter();
    let mut last_activity = c.int64s(6)?.into_iter();
    let mut turns = c.int32s(7)?.into_iter();
    let mut state = c.strings(8, MAX_CELL_BYTES)?.into_iter();
    let mut input = c.int64s(9)?.into_iter();
    let mut output = c.int64s(10)?.into_iter();
    let mut cost = c.doubles(11)?.into_iter();
    let mut parent = c.strings(12, MAX_CELL_BYTES)?.into_iter();
    let mut hidden = c.bools(13)?.into_iter();
    let mut version = c.int64s(14)?.into_iter();
    let newer_strings = |c: &mut Columns, i| match newer {
        true => c.strings(i, MAX_CELL_BYTES),
        false => Ok(Vec::new()),
    };
    let mut agent_name = newer_strings(&mut c, 15)?.into_iter();
    let mut agent_version = newer_strings(&mut c, 16)?.into_iter();
    let mut agent_command = newer_strings(&mut c, 17)?.into_iter();
    let mut size = if newer { c.int64s(18)? } else { Vec::new() }.into_iter();
    let mut turn_ended = if newer { c.int64s(19)? } else { Vec::new() }.into_iter();
    let mut edits = if schema == 3 {
        c.int64s(20)?
    } else {
        Vec::new()
    }
    .into_iter();
    let mut rows = c.rows_vec::<SessionRow>()?;
    for _ in 0..c.rows() {
        rows.push(SessionRow {
            session: required(&mut session),
            title: optional(&mut title),
            agent: optional(&mut agent),
            host: required(&mut host),
            cwd: optional(&mut cwd),
            started_us: required(&mut started),
            last_activity_us: required(&mut last_activity),
            // Arrow's unsigned integers are Parquet's signed ones, bit for bit.
            turns: required(&mut turns) as u32,
            state: required(&mut state),
            input_tokens: required(&mut input) as u64,
            output_tokens: required(&mut output) as u64,
            cost: optional(&mut cost),
            parent: optional(&mut parent),
            hidden: required(&mut hidden),
            version: required(&mut version),
            agent_name: optional(&mut agent_name),
            agent_version: optional(&mut agent_version),
            agent_command: optional(&mut agent_command),
            bytes: optional(&mut size).map(|b| b as u64),
            last_turn_ended_us: optional(&mut turn_ended),
            edits: optional(&mut edits).map(|n| n as u64),
        });
    }
    Ok(rows)
}

/// The turns a Parquet file of the table holds.
///
/// # Errors
/// A file that is not one of the table's, or past a bound of [`bounds`].
pub fn decode_turns(bytes: Bytes) -> parquet::errors::Result<Vec<TurnRow>> {
    turns(&bytes).map_err(failed)
}

fn turns(bytes: &Bytes) -> Result<Vec<TurnRow>, Error> {
    // A part written before issue 54 has the first schema: no cost, no currency.
    let (footer, costed) = match bounds::check_part(bytes, &turns_schema()) {
        Ok(footer) => (footer, true),
        Err(why) => match bounds::check_part(bytes, &turns_schema_1()) {
            Ok(footer) => (footer, false),
            Err(_) => return Err(why),
        },
    };
    let mut c = Columns::new(&footer, columns::every_chunk(&footer, bytes));
    let mut session = c.strings(0, MAX_CELL_BYTES)?.into_iter();
    let mut turn = c.int32s(1)?.into_iter();
    let mut host = c.strings(2, MAX_CELL_BYTES)?.into_iter();
    let mut started = c.int64s(3)?.into_iter();
    let mut duration = c.int64s(4)?.into_iter();
    let mut prompt = c.strings(5, TEXT_BYTES)?.into_iter();
    let mut agent_text = c.strings(6, TEXT_BYTES)?.into_iter();
    let mut tools = c.lists(7, MAX_CELL_BYTES, TOOLS)?.into_iter();
    let mut paths = c.lists(8, MAX_CELL_BYTES, TOOLS)?.into_iter();
    let mut stop_reason = c.strings(9, MAX_CELL_BYTES)?.into_iter();
    let mut input = c.int64s(10)?.into_iter();
    let mut output = c.int64s(11)?.into_iter();
    let mut cost = if costed { c.doubles(12)? } else { Vec::new() }.into_iter();
    let mut currency = match costed {
        true => c.strings(13, 4 * CURRENCY_CHARS)?,
        false => Vec::new(),
    }
    .into_iter();
    let mut rows = c.rows_vec::<TurnRow>()?;
    let unsigned = |v: Option<i64>| v.map(|v| v as u64);
    for _ in 0..c.rows() {
        rows.push(TurnRow {
            session: required(&mut session),
            turn: required(&mut turn) as u32,
            host: required(&mut host),
            started_us: required(&mut started),
            duration_ms: unsigned(optional(&mut duration)),
            prompt: required(&mut prompt),
            agent_text: required(&mut agent_text),
            tools: tools.next().unwrap_or_default(),
            paths: paths.next().unwrap_or_default(),
            stop_reason: optional(&mut stop_reason),
            input_tokens: unsigned(optional(&mut input)),
            output_tokens: unsigned(optional(&mut output)),
            cost: optional(&mut cost),
            currency: optional(&mut currency),
        });
    }
    Ok(rows)
}

/// The edits a Parquet file of the table holds.
///
/// # Errors
/// A file that is not one of the table's, or past a bound of [`bounds`].
pub fn decode_edits(bytes: Bytes) -> parquet::errors::Result<Vec<EditRow>> {
    edits(&bytes).map_err(failed)
}

fn edits(bytes: &Bytes) -> Result<Vec<EditRow>, Error> {
    let footer = bounds::check_part(bytes, &edits_schema())?;
    let mut c = Columns::new(&footer, columns::every_chunk(&footer, bytes));
    let mut session = c.strings(0, MAX_CELL_BYTES)?.into_iter();
    let mut turn = c.int32s(1)?.into_iter();
    let mut host = c.strings(2, MAX_CELL_BYTES)?.into_iter();
    let mut time = c.int64s(3)?.into_iter();
    let mut tool_call = c.strings(4, TEXT_BYTES)?.into_iter();
    let mut agent = c.strings(5, TEXT_BYTES)?.into_iter();
    let mut model = c.strings(6, TEXT_BYTES)?.into_iter();
    let mut prompt = c.strings(7, TEXT_BYTES)?.into_iter();
    let mut path = c.strings(8, TEXT_BYTES)?.into_iter();
    let mut repo = c.strings(9, TEXT_BYTES)?.into_iter();
    let mut repo_path = c.strings(10, TEXT_BYTES)?.into_iter();
    let mut how = c.strings(11, MAX_CELL_BYTES)?.into_iter();
    let mut command = c.strings(12, TEXT_BYTES)?.into_iter();
    let mut written = c.fingerprints(13, 8 * FINGERPRINTS)?.into_iter();
    let mut removed = c.fingerprints(14, 8 * FINGERPRINTS)?.into_iter();
    let mut rows = c.rows_vec::<EditRow>()?;
    for _ in 0..c.rows() {
        rows.push(EditRow {
            session: required(&mut session),
            turn: required(&mut turn) as u32,
            host: required(&mut host),
            time_us: required(&mut time),
            tool_call: optional(&mut tool_call),
            agent: optional(&mut agent),
            model: optional(&mut model),
            prompt: required(&mut prompt),
            path: optional(&mut path),
            repo: optional(&mut repo),
            repo_path: optional(&mut repo_path),
            how: optional(&mut how),
            command: optional(&mut command),
            written: required(&mut written),
            removed: required(&mut removed),
        });
    }
    Ok(rows)
}

/// The postings of row groups `groups` of a postings part (each with its column chunks,
/// checked against `footer`).
///
/// # Errors
/// Past a bound of [`bounds`], or the crate's.
pub fn decode_postings(
    footer: &Footer,
    groups: Vec<(usize, Vec<Chunk>)>,
) -> Result<Vec<(String, String)>, Error> {
    let mut c = Columns::new(footer, groups);
    let words = c.strings(0, WORD_BYTES)?;
    let sessions = c.strings(1, MAX_CELL_BYTES)?;
    let mut rows = c.rows_vec::<(String, String)>()?;
    for (word, session) in words.into_iter().zip(sessions) {
        rows.push((word.unwrap_or_default(), session.unwrap_or_default()));
    }
    Ok(rows)
}

/// Every posting of a whole Parquet file of the table.
///
/// # Errors
/// A file that is not one of the table's, or past a bound of [`bounds`].
pub fn decode_all_postings(bytes: Bytes) -> parquet::errors::Result<Vec<(String, String)>> {
    let footer = bounds::check_part(&bytes, &postings_schema()).map_err(failed)?;
    decode_postings(&footer, columns::every_chunk(&footer, &bytes)).map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_go_to_parquet_and_back() {
        let session = SessionRow {
            session: "s".into(),
            title: Some("a title".into()),
            host: "h".into(),
            started_us: 1,
            last_activity_us: 2,
            turns: 3,
            state: "idle".into(),
            cost: Some(0.5),
            version: 2,
            ..SessionRow::default()
        };
        assert_eq!(
            decode_sessions(encode_sessions(std::slice::from_ref(&session)).unwrap()).unwrap(),
            [session]
        );
        let turn = TurnRow {
            session: "s".into(),
            turn: 1,
            host: "h".into(),
            started_us: 5,
            duration_ms: Some(7),
            prompt: "p".into(),
            agent_text: "a".into(),
            tools: vec!["edit: x".into()],
            paths: vec![],
            stop_reason: Some("end_turn".into()),
            input_tokens: None,
            output_tokens: Some(9),
            cost: Some(0.25),
            currency: Some("USD".into()),
        };
        assert_eq!(
            decode_turns(encode_turns(std::slice::from_ref(&turn)).unwrap()).unwrap(),
            [turn]
        );
        let postings = vec![("flaky".to_string(), "s".to_string())];
        assert_eq!(
            decode_all_postings(encode_postings(&postings).unwrap()).unwrap(),
            postings
        );
        assert!(decode_sessions(Bytes::from_static(b"not parquet")).is_err());
    }

    #[test]
    fn the_sessions_columns_of_issue_51_go_and_come_back_and_older_parts_read_them_as_null() {
        let session = SessionRow {
            session: "s".into(),
            agent: Some("Claude Agent".into()),
            host: "h".into(),
            state: "closed".into(),
            agent_name: Some("@agentclientprotocol/claude-agent-acp".into()),
            agent_version: Some("0.101.0".into()),
            agent_command: Some("npx @agentclientprotocol/claude-agent-acp".into()),
            bytes: Some(17_472),
            last_turn_ended_us: Some(9),
            version: 3,
            ..SessionRow::default()
        };
        let read = decode_sessions(encode_sessions(std::slice::from_ref(&session)).unwrap());
        assert_eq!(read.unwrap(), std::slice::from_ref(&session));
        // A part written before: the first schema's fifteen columns.
        let old = sessions_schema_1();
        let columns =
            session_columns(std::slice::from_ref(&session))[..old.fields().len()].to_vec();
        let part = encode(
            &RecordBatch::try_new(old, columns).unwrap(),
            SESSIONS_ROW_GROUP,
        )
        .unwrap();
        let read = decode_sessions(part).unwrap();
        assert_eq!(
            read,
            [SessionRow {
                agent_name: None,
                agent_version: None,
                agent_command: None,
                bytes: None,
                last_turn_ended_us: None,
                ..session
            }]
        );
    }

    /// A turns part of before issue 54 (the first schema's twelve columns) reads with no cost;
    /// a part of the second schema is not one of the first schema's, which is what a build of
    /// before checks it against: such a build leaves it out of its readings (said on stderr),
    /// where it stays for the builds that read it (`compact` leaves a part it cannot read where
    /// it is, `adopt` does not take it in, nor `erase` rewrite it).
    #[test]
    fn a_turns_part_of_before_issue_54_reads_with_no_cost_and_a_build_of_before_refuses_a_new_one()
    {
        let turn = TurnRow {
            session: "s".into(),
            turn: 2,
            host: "h".into(),
            started_us: 5,
            prompt: "p".into(),
            output_tokens: Some(3),
            cost: Some(1.5),
            currency: Some("EUR".into()),
            ..TurnRow::default()
        };
        let old = turns_schema_1();
        let columns = turn_columns(std::slice::from_ref(&turn))[..old.fields().len()].to_vec();
        let part = encode(
            &RecordBatch::try_new(old, columns).unwrap(),
            TURNS_ROW_GROUP,
        )
        .unwrap();
        assert_eq!(
            decode_turns(part).unwrap(),
            [TurnRow {
                cost: None,
                currency: None,
                ..turn.clone()
            }]
        );
        let new = encode_turns(std::slice::from_ref(&turn)).unwrap();
        let refused = bounds::check_part(&new, &turns_schema_1())
            .unwrap_err()
            .to_string();
        assert!(refused.contains("schema differs"), "{refused}");
        assert_eq!(decode_turns(new).unwrap(), [turn]);
    }
}
