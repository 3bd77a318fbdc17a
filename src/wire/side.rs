//! Which peer sent a line: [`Side`], the editor (client) or the agent.

/// Which peer sent a message.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The editor (ACP client), talking to us on our stdin/stdout.
    Client,
    /// The agent subprocess, talking to us on its stdout/stdin.
    Agent,
}

impl Side {
    /// The peer on the other end of the proxy.
    pub fn other(self) -> Side {
        match self {
            Side::Client => Side::Agent,
            Side::Agent => Side::Client,
        }
    }

    /// The name used in journal records (`"client"` / `"agent"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Agent => "agent",
        }
    }
}
