//! The protocol core: a deterministic state machine with no I/O.
//!
//! It contains no file, process or clock code: the shell stamps every input with a [`Stamp`]
//! and applies the [`Action`]s it polls, in order. That makes every rule testable with literal
//! JSON lines (see `tests.rs` and `emulate_tests.rs`).
//!
//! # Driving contract
//! - Inputs (`handle_*`, return `()`): [`Proxy::handle_line`] for every whole line read from a
//!   peer (line ending included): the agent, or a client connection ([`Peer`], [`ConnId`]; the
//!   stdio proxy has one), [`Proxy::handle_eof`] when a peer closes its stream,
//!   [`Proxy::handle_stderr`] for agent stderr chunks, [`Proxy::handle_event`] for things the
//!   shell observed (agent exit, signals), and the answers to its requests to the store
//!   ([`Proxy::handle_history`], [`Proxy::handle_sessions`]).
//! - Output: after each input, drain [`Proxy::poll_action`] until `None` and apply the actions
//!   in order. For every line, its `Journal` actions come before its `Forward`, and an
//!   `OpenSession` before the first `Journal` to that session. The shell keeps the promise built
//!   on that order (a record is written before its line is forwarded): `shell::apply`.
//!
//! # Attribution
//! Every record goes to the journal of the session it belongs to, else to the run's ([`Target::Run`]):
//! [`attribution`].
//!
//! # What the proxy changes
//! With `--load off` nothing: every `Forward` carries the bytes received. Otherwise the core adds
//! what the agent lacks, each part a component with its own state:
//! - [`capabilities`]: the `initialize` response advertises loading, list, resume, close and
//!   delete on the agent's behalf;
//! - [`loading`]: `session/load` and `session/resume` served from the journal;
//! - [`listing`]: `session/list` served from the store or merged with the agent's;
//! - [`native`]: the loads the client sends the agent itself, served from the journal should
//!   the agent fail them; [`fork`]: `session/fork` made in the journal;
//! - [`sessions`] and [`mapping`]: the session table (each session owning its prompt, its native
//!   load and the lines held while a load brings it up), and the edits of a session continued
//!   on the agent under another ID; [`ids`]: the proxy's own request ids; [`edits`]: where the
//!   edits are made on the way through, and what the agent's answers teach the core;
//! - [`restart`]: the agent restarted under live sessions, and every request answered once it
//!   is gone; [`turn_facts`]: what the catalog learns from the turns;
//! - [`connection`]: several client connections on the one agent (ids per connection, lines
//!   routed to the connections a session is attached to, a host's sessions shared by several
//!   clients), and [`clients`]: the transitions as clients come, join, leave and go;
//! - `session/close` and `session/delete` answered here.
//!
//! Edits go through [`crate::wire::rewrite`], which keeps every member it does not change byte for byte.

mod attribution;
mod capabilities;
mod catalog;
mod client_requests;
mod clients;
mod closing;
mod connection;
#[cfg(test)]
mod connection_tests;
mod context;
mod edits;
mod effects;
#[cfg(test)]
mod emulate_tests;
mod fork;
mod held;
pub mod history;
mod holding;
mod ids;
mod listing;
mod load_request;
mod load_state;
mod loading;
mod mapping;
mod native;
mod pending;
mod prompt;
mod proxy;
pub mod redact;
#[cfg(test)]
mod redact_tests;
mod restart;
#[cfg(test)]
mod restart_tests;
mod reused_ids;
mod sessions;
mod stalls;
mod stderr;
#[cfg(test)]
mod tests;
mod turn_facts;
mod vocab;

pub use proxy::Proxy;
pub use reused_ids::reuse_candidates;
pub use vocab::{
    Action, AgentSessionId, CatalogUpdate, ClientSupport, Config, ConnId, HistoryChunk, Initialize,
    ListedSession, LoadMode, Peer, SessionId, Stamp, Summary, Target,
};
