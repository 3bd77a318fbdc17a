//! Journals on disk: the record format, the proxy's typed events, appending, salvage-reading,
//! the journal directory's layout and private files.
//!
//! Used by the proxy to write and by every inspection command to read. Nothing here knows
//! about ACP: a record holds one wire line (bytes), a chunk of stderr or an [`Event`], and the
//! header keeps the `initialize` exchange as raw JSON. What the lines mean is for the layers
//! above (`catalog`, `proto`, `render`, `replay`).

pub mod dir;
pub mod event;
pub mod format;
mod frames;
pub mod mark;
pub mod private;
pub mod reader;
pub mod tail;
pub mod writer;

pub use dir::JournalDir;
pub use event::Event;
pub use format::{Body, Header, Payload, Record, SegmentKind};
pub use reader::{SegmentReader, Tail};
pub use writer::SegmentWriter;
