//! [`ShellConfig`]: everything the shell needs to run one proxy session.

use std::ffi::OsString;
use std::time::Duration;

use super::journals::FsyncPolicy;
use crate::journal::JournalDir;
use crate::proto;

/// Everything the shell needs to run one proxy session.
#[derive(Clone, Debug)]
pub struct ShellConfig {
    /// The agent command and its arguments (for the journal headers).
    pub agent: Vec<OsString>,
    /// This run's name (its segments' stem, its leases' holder): see
    /// [`crate::journal::dir::run_id`].
    pub run: String,
    /// When this run started, as its name says (Unix microseconds): what is stamped "before
    /// this run" (a fork's copy) is stamped before it.
    pub started_us: i64,
    /// The journal directory.
    pub journals: JournalDir,
    /// When to fdatasync.
    pub fsync: FsyncPolicy,
    /// The protocol core's settings (redaction, session loading).
    pub core: proto::Config,
    /// How long to wait for the agent to exit after the client goes away, before SIGTERM
    /// (and as long again before SIGKILL).
    pub grace: Duration,
    /// Restarts of a dead agent allowed per minute (`0`: the proxy ends with the agent).
    pub respawn: u32,
    /// `session/list` shows every agent's sessions (`--list-scope all`), not only this agent's.
    pub list_all: bool,
    /// Live OTLP export and `traceparent` injection ([`crate::otel::live`]).
    pub tracing: crate::otel::live::Options,
    /// The shared object store the journals are shipped to and sessions pulled from
    /// (`--store`).
    pub fleet: Option<crate::fleet::Fleet>,
}
