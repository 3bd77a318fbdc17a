//! What each client connection declared in its `initialize`: what it can do for the agent (the
//! capabilities an agent request needs), and who it is.

use serde_json::Value;

use super::super::vocab::ClientSupport;
use crate::wire::envelope::Peek;

/// What a connection declared in its `initialize`: what it can do for the agent, who it is.
#[derive(Clone, Debug, Default)]
pub(super) struct ClientView {
    read: bool,
    write: bool,
    terminal: bool,
    pub(super) name: Option<String>,
    pub(super) version: Option<String>,
    /// What it takes of a replay (its history when it loads or attaches to a session).
    pub(super) support: ClientSupport,
}

impl ClientView {
    pub(super) fn from_initialize(peek: &Peek<'_>) -> ClientView {
        let params: Value = peek
            .params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let caps = &params["clientCapabilities"];
        let info = &params["clientInfo"];
        ClientView {
            read: caps["fs"]["readTextFile"] == true,
            write: caps["fs"]["writeTextFile"] == true,
            terminal: caps["terminal"] == true,
            name: info["name"].as_str().map(String::from),
            version: info["version"].as_str().map(String::from),
            support: ClientSupport::from_capabilities(caps),
        }
    }

    /// True when it declared what an agent request of `method` needs.
    pub(super) fn can(&self, method: &str) -> bool {
        match method {
            "fs/read_text_file" => self.read,
            "fs/write_text_file" => self.write,
            m if m.starts_with("terminal/") => self.terminal,
            _ => true,
        }
    }
}
