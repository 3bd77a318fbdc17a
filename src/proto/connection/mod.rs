//! Client connections. The core serves any number of them on one agent: every client line comes
//! from a connection ([`Peer::Client`]) and every line for a client goes to one, while sessions
//! live apart from any connection (a session records the connections attached to it, and a
//! connection can end while its sessions go on). The stdio proxy is the one-connection case:
//! while one connection was ever opened nothing is read or rewritten, its lines cross as they
//! came.
//!
//! The first connection's request ids reach the agent as sent. Every later connection's
//! requests are renumbered (`"acp-journal:cN:<id>"`), so the agent never sees two requests under
//! one id, and their answers get the connection's own id back. Lines the core makes for clients
//! are routed here ([`Connections::route`]): a response to the connection that asked; a
//! session's notification to the connections attached to it; an agent request to where it can
//! be answered:
//! - `session/request_permission` to every controller attached to the session: the first answer
//!   that is not an error wins and goes to the agent, the others asked get `$/cancel_request`
//!   and every other attached connection a `session/update` (`tool_call_update` with
//!   `_meta.acpJournal.permission`) saying what was chosen, by whom; later answers are dropped;
//! - a terminal's requests to the connection that created the terminal; `fs/*` and
//!   `terminal/create` to the connection running the session's turn, else another attached one
//!   that declared the capability, else the proxy answers with an error;
//! - anything else to the turn's connection, else the first attached.
//!
//! An agent request whose connections all end before answering is asked again of another
//! connection attached to its session, or answered by the proxy ([`Connections::end`] hands it
//! back).
//!
//! A host (`acp-journal serve`, [`Connections::hosted`]) keeps sessions apart from connections
//! strictly: a session's lines go only to the connections attached to it (none attached: they
//! are journaled, not sent), and an agent request for a session nobody is attached to waits,
//! bounded in number and time, for the next connection that joins the session; it is sent right
//! after that connection's answer. A host's connection joins a session live on the agent by
//! `session/load`, `session/resume` or the multi-client draft's `session/attach`: the core
//! serves it from the journal, and the session's lines are held for the joining connection
//! ([`Connections::joins_live`]) until its answer, so it gets the history, the answer, then every
//! live line once, in order. A prompt while another connection's turn runs in the session is
//! refused (-32000, "session busy"); a prompt taken is shown to the other attached connections
//! as the user's message (ACP v1; a v2 agent echoes it itself).
//!
//! [`Connections`] (in `state`) holds its mode (one connection, several, a host's) and its
//! parts, each with its own file, and does what needs more than one of them: the connections
//! coming, ending and leaving sessions, a client line taken, a line for clients routed, a join
//! answered, a line sent or held. The parts:
//! `roster` (the connections themselves: live, what each declared, how each is
//! attached), `inbound` (client lines; the client requests forwarded to the agent: renumbered
//! ids, running prompts, requests creating a session), `answers` (the agent requests asked of
//! connections, and clients' answers to them: permission requests settled, terminals owned),
//! `joins` (a host's connections joining a session, and the lines held for them), `waiting`
//! (agent requests waiting for someone to attach), `routing` (where a line for clients goes,
//! and what routing leaves for the core). Besides: `attach` (what a `session/attach` asks
//! for), `client_view` (what a connection declared in its `initialize`) and `lines` (the
//! proxy's notification lines).

mod answers;
mod attach;
mod client_view;
mod inbound;
mod joins;
mod lines;
mod roster;
mod routing;
mod state;
mod waiting;

pub(super) use attach::{Attach, HistoryPolicy};
pub(super) use inbound::Inbound;
pub(super) use routing::{Attachment, Route, Unsettled};
pub(super) use state::Connections;
#[cfg(test)]
pub(super) use waiting::WAITING_LIMIT;
