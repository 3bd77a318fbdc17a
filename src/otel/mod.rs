//! OpenTelemetry traces of ACP sessions, following the GenAI semantic conventions.
//!
//! - [`span`]: a finished span and its deterministic IDs (pure).
//! - [`spans`]: a session's journal records → `invoke_agent` / `execute_tool` spans (pure).
//! - [`otlp`]: spans → OTLP/JSON or OTLP protobuf (pure).
//! - [`http`]: the `OTEL_EXPORTER_OTLP_*` configuration and one POST to an OTLP/HTTP endpoint.
//! - [`live`]: the proxy's hook: records handed to an exporter thread without ever blocking the
//!   relay, and the W3C `traceparent` injected into prompts (`--trace-context`).
//!
//! `export --format otlp` and the live exporter build spans with the same [`spans::SpanBuilder`]
//! from the same records, so they give the same spans with the same IDs.

pub mod http;
pub mod live;
pub mod otlp;
pub mod span;
pub mod spans;
