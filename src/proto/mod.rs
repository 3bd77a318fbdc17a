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
//!   shell observed (agent exit, signals), and the answers to what it asked of the journals
//!   ([`Proxy::handle_history`], [`Proxy::handle_sessions`], [`Proxy::handle_forked`],
//!   [`Proxy::handle_free_id`]): what the core knows of the journals arrives as an input.
//! - Output: after each input, drain [`Proxy::poll_action`] until `None` and apply the actions
//!   in order; it is the only way out. For every line, its `Journal` actions come before its
//!   `Forward`, and an `OpenSession` before the first `Journal` to that session. The shell keeps
//!   the promise built on that order (a record is written before its line is forwarded):
//!   `shell::actions::apply`.
//!
//! # Layout
//! [`Proxy`] (`proxy.rs`) is the one file that dispatches: every input enters there; each line
//! is routed once ([`route`]: the owner decided up front) and handed to the component that
//! owns it, which takes it or gives it back to be relayed. Below it, each component is a file with its
//! own state, called with what it needs ([`context`]'s `Cx`: the output queue of [`effects`],
//! the session table of [`sessions`], the pending table of [`pending`], the proxy's own request
//! ids of [`ids`], what both peers declared, the time). At the bottom, [`vocab`] imports nothing
//! else of the core. No file of the core imports `mod.rs`'s own items: `scripts/module-deps.sh`
//! checks the import graph between files has no cycle.
//!
//! # What the proxy changes
//! With `--load off` nothing: every `Forward` carries the bytes received. Otherwise the core adds
//! what the agent lacks:
//! - [`capabilities`]: the `initialize` response advertises loading, list, resume, close and
//!   delete on the agent's behalf;
//! - [`loading`] (one load: [`load_state`]): `session/load` and `session/resume` served from the
//!   journal; [`holding`]: the agent lines held meanwhile;
//! - [`listing`]: `session/list` served from the journals or merged with the agent's;
//! - [`native`]: the loads the client sends the agent itself, served from the journal should
//!   the agent fail them; [`fork`]: `session/fork` made in the journal;
//! - [`route`]: where each line goes, decided once, and how each client request is handled;
//!   [`closing`]:
//!   `session/close` and `session/delete` for agents without them;
//! - [`sessions`] and [`mapping`]: the session table (each session with its state and its
//!   [`membership`]), and the edits of a session continued on
//!   the agent under another ID; [`edits`]: where the edits are made on the way through, and
//!   what the agent's answers teach the core; [`reused_ids`]: a new session under an ID the
//!   store already holds;
//! - [`restart`]: the agent restarted under live sessions, and every request answered once it
//!   is gone; [`stalls`]: `--stall-timeout`;
//! - [`attribution`]: the journal each record goes to, a session's or the run's
//!   ([`Target::Run`]); [`catalog`] and [`turn_facts`]: what the catalog learns from the turns;
//! - [`connection`]: several client connections on the one agent (ids per connection, lines
//!   routed to the connections a session is attached to, a host's sessions shared by several
//!   clients), and [`clients`]: the transitions as clients come, join, leave and go.
//!
//! Edits go through [`crate::wire::rewrite`], which keeps every member it does not change byte for byte.

mod agent_side;
mod attribution;
mod capabilities;
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
mod lookups;
#[cfg(test)]
mod lookups_tests;
mod mapping;
mod membership;
mod native;
mod offer;
mod pending;
mod prompt;
mod proxy;
#[cfg(test)]
mod redact_tests;
mod restart;
#[cfg(test)]
mod restart_tests;
mod reused_ids;
mod route;
mod sessions;
mod stalls;
mod stderr;
#[cfg(test)]
mod tests;
mod tree;
#[cfg(test)]
mod tree_tests;
mod turn_facts;
mod update_facts;
mod vocab;

pub use proxy::Proxy;
pub use reused_ids::{first_free, reuse_candidates};
pub use vocab::{
    Action, Activity, AgentCopy, AgentSessionId, CatalogUpdate, ClientSupport, Config, ConnId,
    Cursors, HistoryChunk, HistoryOffer, HttpOffer, Initialize, ListedSession, LoadMode, Peer,
    SessionId, Stamp, Summary, Target,
};
