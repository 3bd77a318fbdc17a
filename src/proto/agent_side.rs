//! Where a session stands on the agent in this connection ([`AgentSide`]): not live, live
//! under its own ID, live under another ([`Mapping`]), lost in a restart, or being brought up by
//! a load. One per session, in the session table ([`super::sessions::Session`]).

use super::vocab::AgentSessionId;

/// A client-facing session continued on a different agent-side session.
#[derive(Clone, Debug)]
pub(super) struct Mapping {
    /// The agent-side ID.
    pub(super) agent: AgentSessionId,
    /// Prefix for the agent's `toolCallId`/`messageId`s, unique to the load that mapped it.
    pub(super) prefix: String,
    /// Transcript to send with the next prompt (re-priming).
    pub(super) reprime: Option<String>,
}

/// Where a session stands on the agent in this connection.
#[derive(Debug, Default)]
pub(super) enum AgentSide {
    /// Not open on the agent (never brought up in this connection, or closed).
    #[default]
    NotLive,
    /// Live on the agent under the client-facing ID.
    Native,
    /// Live on the agent under another ID.
    Mapped(Mapping),
    /// It was live when the agent was restarted: the next client request that names it brings
    /// it up again on the new agent first.
    Lost {
        /// The load restoring it, once one started: client lines that name it wait behind it.
        restoring: Option<u64>,
    },
    /// A load served by the proxy is bringing it up.
    Starting {
        /// The agent's own replay (a native `session/load` underneath) is hidden.
        hide_replay: bool,
        /// Set once the agent answered with a different session: agent lines for it are
        /// held until the load is answered.
        mapping: Option<Mapping>,
        /// The load restoring it, when it was lost ([`AgentSide::Lost`]).
        restoring: Option<u64>,
    },
}
