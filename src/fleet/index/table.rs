//! The index's tables as Parquet (the Apache Arrow project's `parquet` crate): their schemas,
//! and rows to bytes and back. Every file is zstd-compressed, with statistics per row group
//! and page, so an engine (or our reader) skips what a query cannot need.

use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Float64Array, Int64Array, ListArray, RecordBatch, StringArray,
    TimestampMicrosecondArray, UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use super::rows::{SessionRow, TurnRow};

/// Rows per row group of the postings (a word's lookup reads about one).
pub const POSTINGS_ROW_GROUP: usize = 8192;

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
}

impl Table {
    /// Its directory under `index/`.
    pub fn dir(self) -> &'static str {
        match self {
            Table::Sessions => "sessions",
            Table::Turns => "turns",
            Table::Postings => "postings",
        }
    }
}

fn utc() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

fn strings() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)))
}

/// The `sessions` table.
pub fn sessions_schema() -> Arc<Schema> {
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

/// The `turns` table.
pub fn turns_schema() -> Arc<Schema> {
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
    let columns: Vec<ArrayRef> = vec![
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
    ];
    encode(&RecordBatch::try_new(sessions_schema(), columns)?, 1 << 20)
}

/// Turns as a Parquet file.
///
/// # Errors
/// The encoder's.
pub fn encode_turns(rows: &[TurnRow]) -> parquet::errors::Result<Bytes> {
    let columns: Vec<ArrayRef> = vec![
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
    ];
    encode(&RecordBatch::try_new(turns_schema(), columns)?, 1 << 20)
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

fn batches(bytes: Bytes) -> parquet::errors::Result<Vec<RecordBatch>> {
    ParquetRecordBatchReaderBuilder::try_new(bytes)?
        .build()?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| parquet::errors::ParquetError::General(e.to_string()))
}

fn column<'a, T: 'static>(batch: &'a RecordBatch, name: &str) -> parquet::errors::Result<&'a T> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| parquet::errors::ParquetError::General(format!("no column {name:?}")))
}

fn text(a: &StringArray, i: usize) -> Option<String> {
    (!a.is_null(i)).then(|| a.value(i).to_string())
}

fn texts(a: &ListArray, i: usize) -> Vec<String> {
    let values = a.value(i);
    values
        .as_any()
        .downcast_ref::<StringArray>()
        .map(|s| (0..s.len()).filter_map(|j| text(s, j)).collect())
        .unwrap_or_default()
}

/// The sessions a Parquet file of the table holds.
///
/// # Errors
/// A file that is not one of the table's.
pub fn decode_sessions(bytes: Bytes) -> parquet::errors::Result<Vec<SessionRow>> {
    let mut rows = Vec::new();
    for b in batches(bytes)? {
        let s = |n| column::<StringArray>(&b, n);
        let t = |n| column::<TimestampMicrosecondArray>(&b, n);
        let u = |n| column::<UInt64Array>(&b, n);
        let (session, title, agent, host, cwd, state, parent) = (
            s("session")?,
            s("title")?,
            s("agent")?,
            s("host")?,
            s("cwd")?,
            s("state")?,
            s("parent")?,
        );
        let (started, last) = (t("started")?, t("last_activity")?);
        let turns = column::<UInt32Array>(&b, "turns")?;
        let (input, output) = (u("input_tokens")?, u("output_tokens")?);
        let cost = column::<Float64Array>(&b, "cost")?;
        let hidden = column::<BooleanArray>(&b, "hidden")?;
        let version = column::<Int64Array>(&b, "version")?;
        for i in 0..b.num_rows() {
            rows.push(SessionRow {
                session: session.value(i).to_string(),
                title: text(title, i),
                agent: text(agent, i),
                host: host.value(i).to_string(),
                cwd: text(cwd, i),
                started_us: started.value(i),
                last_activity_us: last.value(i),
                turns: turns.value(i),
                state: state.value(i).to_string(),
                input_tokens: input.value(i),
                output_tokens: output.value(i),
                cost: (!cost.is_null(i)).then(|| cost.value(i)),
                parent: text(parent, i),
                hidden: hidden.value(i),
                version: version.value(i),
            });
        }
    }
    Ok(rows)
}

/// The turns a Parquet file of the table holds.
///
/// # Errors
/// A file that is not one of the table's.
pub fn decode_turns(bytes: Bytes) -> parquet::errors::Result<Vec<TurnRow>> {
    let mut rows = Vec::new();
    for b in batches(bytes)? {
        let s = |n| column::<StringArray>(&b, n);
        let u = |n| column::<UInt64Array>(&b, n);
        let (session, host, prompt, agent_text, stop) = (
            s("session")?,
            s("host")?,
            s("prompt")?,
            s("agent_text")?,
            s("stop_reason")?,
        );
        let turn = column::<UInt32Array>(&b, "turn")?;
        let started = column::<TimestampMicrosecondArray>(&b, "started")?;
        let (duration, input, output) =
            (u("duration_ms")?, u("input_tokens")?, u("output_tokens")?);
        let (tools, paths) = (
            column::<ListArray>(&b, "tools")?,
            column::<ListArray>(&b, "paths")?,
        );
        let opt = |a: &UInt64Array, i| (!a.is_null(i)).then(|| a.value(i));
        for i in 0..b.num_rows() {
            rows.push(TurnRow {
                session: session.value(i).to_string(),
                turn: turn.value(i),
                host: host.value(i).to_string(),
                started_us: started.value(i),
                duration_ms: opt(duration, i),
                prompt: prompt.value(i).to_string(),
                agent_text: agent_text.value(i).to_string(),
                tools: texts(tools, i),
                paths: texts(paths, i),
                stop_reason: text(stop, i),
                input_tokens: opt(input, i),
                output_tokens: opt(output, i),
            });
        }
    }
    Ok(rows)
}

/// The postings a Parquet file (or the row groups of it read) holds.
///
/// # Errors
/// A file that is not one of the table's.
pub fn decode_postings(batches: &[RecordBatch]) -> parquet::errors::Result<Vec<(String, String)>> {
    let mut rows = Vec::new();
    for b in batches {
        let (word, session) = (
            column::<StringArray>(b, "word")?,
            column::<StringArray>(b, "session")?,
        );
        for i in 0..b.num_rows() {
            rows.push((word.value(i).to_string(), session.value(i).to_string()));
        }
    }
    Ok(rows)
}

/// Every posting of a whole Parquet file of the table.
///
/// # Errors
/// A file that is not one of the table's.
pub fn decode_all_postings(bytes: Bytes) -> parquet::errors::Result<Vec<(String, String)>> {
    decode_postings(&batches(bytes)?)
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
}
