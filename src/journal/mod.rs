//! Journals on disk: the record format, appending, salvage-reading and the store layout.
//!
//! Used by the proxy to write and by every inspection command to read. Nothing here knows
//! about ACP beyond "a record holds one wire line".

pub mod event;
pub mod format;
mod frames;
pub mod private;
pub mod reader;
pub mod store;
pub mod writer;

pub use event::Event;
pub use format::{Body, Header, Payload, Record, SegmentKind};
pub use reader::{SegmentReader, Tail};
pub use store::Store;
pub use writer::SegmentWriter;
