//! The wire: JSON-RPC lines as they cross the proxy, below every other layer.
//!
//! - [`envelope`]: a borrowed peek at a line (kind, id, method, `params.sessionId`) and the
//!   few lines the proxy makes itself (responses, errors).
//!   A validating scan of the bytes (`scan`) reads nearly every line; serde_json the rest.
//! - [`rewrite`]: the only way messages are edited (untouched members kept byte for byte).
//! - [`Side`]: which peer sent a line.

pub mod envelope;
pub mod rewrite;
mod scan;
mod side;

pub use side::Side;
