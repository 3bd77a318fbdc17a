//! Capabilities: what the agent advertised, what the client declared, and what the proxy adds
//! to the agent's `initialize` response on its behalf.
//!
//! The initialize response gets `agentCapabilities.loadSession: true` and
//! `sessionCapabilities.{list,resume,close,delete}: {}` where the agent lacks them (resume and
//! loading only when the proxy emulates loading); nothing else in that message changes
//! ([`crate::wire::rewrite`]).
//!
//! ACP v2 (the agent answered `protocolVersion: 2`) puts capabilities elsewhere: `capabilities`,
//! with `capabilities.session` (`{}` is the baseline: `session/new`, `list`, `resume`, `close`,
//! `prompt`, `cancel`). There is no `session/load`, so only `capabilities.session.delete` is
//! ever added, when the agent has sessions but lacks it.

use serde_json::Value;

use super::vocab::{ClientSupport, Initialize};
use crate::wire::envelope::Peek;
use crate::wire::rewrite::edit_line;

/// What both peers declared as they set the connection up: the client's `initialize` exchange
/// as recorded (copied into each session's journal), the agent's capabilities and the
/// client's. Every component reads them, as it reads the configuration; the handshake writes
/// them, as its answers pass.
#[derive(Debug, Default)]
pub(super) struct Declared {
    pub(super) initialize: Initialize,
    pub(super) agent: AgentCaps,
    pub(super) client: ClientCaps,
    /// While a later connection's request is handled, what that connection takes of a replay
    /// (a host's connections each declare their own; [`Self::client`] is the first's).
    joiner: Option<ClientSupport>,
}

impl Declared {
    /// Handle the next request for a connection's declarations (`None`: the first
    /// connection's, [`Self::client`]), until [`Self::joined`] is called.
    pub(super) fn joining(&mut self, declared: Option<ClientSupport>) {
        self.joiner = declared;
    }

    /// Back to the first connection's declarations.
    pub(super) fn joined(&mut self) {
        self.joiner = None;
    }

    /// What the connection whose request is handled takes of a replay: its own declarations,
    /// the ACP version the agent's (the same for every connection).
    pub(super) fn replay_support(&self) -> ClientSupport {
        self.joiner.map_or(self.client.support, |s| ClientSupport {
            v2: self.client.support.v2,
            ..s
        })
    }
}

/// What the agent advertised.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct AgentCaps {
    /// It answered `protocolVersion: 2`: the connection speaks ACP v2.
    pub(super) v2: bool,
    pub(super) load: bool,
    pub(super) list: bool,
    pub(super) resume: bool,
    pub(super) close: bool,
    pub(super) delete: bool,
    pub(super) fork: bool,
    pub(super) additional_directories: bool,
    /// It takes MCP servers over HTTP (v1 `mcpCapabilities.http`, v2 `session.mcp.http`).
    pub(super) mcp_http: bool,
    /// It takes MCP servers over stdio (every v1 agent; v2 `session.mcp.stdio`).
    pub(super) mcp_stdio: bool,
}

/// What the client declared in its `initialize` request.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ClientCaps {
    /// Replay kinds it accepts.
    pub(super) support: ClientSupport,
    /// It shows `notice` updates.
    pub(super) notices: bool,
    /// It takes `session/list_changed` (`session.listChanged`, the history-list draft).
    pub(super) list_changed: bool,
}

fn present(v: &Value) -> bool {
    !v.is_null()
}

fn parse(raw: Option<crate::wire::envelope::Raw<'_>>) -> Value {
    raw.and_then(|r| serde_json::from_str(r.get()).ok())
        .unwrap_or(Value::Null)
}

impl ClientCaps {
    /// From the client's `initialize` request.
    pub(super) fn from_initialize(peek: &Peek<'_>) -> ClientCaps {
        let params = parse(peek.params);
        let caps = &params["clientCapabilities"];
        ClientCaps {
            support: ClientSupport::from_capabilities(caps),
            notices: present(&caps["session"]["notices"]),
            list_changed: present(&caps["session"]["listChanged"]),
        }
    }
}

impl AgentCaps {
    /// From the agent's successful `initialize` response.
    pub(super) fn from_initialize(peek: &Peek<'_>) -> Option<AgentCaps> {
        let result: Value = serde_json::from_str(peek.result?.get()).ok()?;
        if result["protocolVersion"] == 2 {
            // The baseline `capabilities.session` brings list, resume and close.
            let session = &result["capabilities"]["session"];
            let baseline = session.is_object();
            return Some(AgentCaps {
                v2: true,
                load: false,
                list: baseline,
                resume: baseline,
                close: baseline,
                delete: present(&session["delete"]),
                fork: present(&session["fork"]),
                additional_directories: present(&session["additionalDirectories"]),
                mcp_http: present(&session["mcp"]["http"]),
                mcp_stdio: present(&session["mcp"]["stdio"]),
            });
        }
        let caps = &result["agentCapabilities"];
        let session = &caps["sessionCapabilities"];
        Some(AgentCaps {
            v2: false,
            load: caps["loadSession"] == true,
            list: present(&session["list"]),
            resume: present(&session["resume"]),
            close: present(&session["close"]),
            delete: present(&session["delete"]),
            fork: present(&session["fork"]),
            additional_directories: present(&session["additionalDirectories"]),
            mcp_http: caps["mcpCapabilities"]["http"] == true,
            mcp_stdio: true,
        })
    }

    /// What the proxy adds: `loadSession` and the names of the `sessionCapabilities` the
    /// agent lacks (`loading`: the proxy emulates loading and resuming), and `attach` (the
    /// multi-client draft's) for a host (`hosted`), which lets several clients share a session.
    pub(super) fn missing(&self, loading: bool, hosted: bool) -> Vec<&'static str> {
        let mut added = Vec::new();
        if hosted {
            added.push("attach");
        }
        if self.v2 {
            // Only an agent with sessions (the baseline) can have their deletion added.
            if self.list && !self.delete {
                added.push("delete");
            }
            return added;
        }
        if loading && !self.load {
            added.push("loadSession");
        }
        for (name, has, wanted) in [
            ("list", self.list, true),
            ("resume", self.resume, loading),
            ("close", self.close, true),
            ("delete", self.delete, true),
            ("fork", self.fork, loading),
        ] {
            if wanted && !has {
                added.push(name);
            }
        }
        added
    }
}

/// The initialize response with `added` advertised (from [`AgentCaps::missing`]), where the
/// connection's protocol version (`v2`) puts it; `None` when nothing is added or the line cannot
/// be edited.
pub(super) fn advertise(line: &[u8], added: &[&str], v2: bool) -> Option<Vec<u8>> {
    if added.is_empty() {
        return None;
    }
    if v2 {
        return edit_line(line, |msg| {
            msg.edit("result", |r| {
                r.edit("capabilities", |c| {
                    c.edit("session", |s| {
                        for name in added {
                            s.set(name, value_of(name).into());
                        }
                    });
                });
            });
        });
    }
    edit_line(line, |msg| {
        msg.edit("result", |r| {
            r.edit("agentCapabilities", |c| {
                if added.contains(&"loadSession") {
                    c.set("loadSession", "true".into());
                }
                if added.iter().any(|a| *a != "loadSession") {
                    c.edit("sessionCapabilities", |s| {
                        for name in added.iter().filter(|a| **a != "loadSession") {
                            // The proxy's own list follows the history-list draft: `limit` and
                            // the order, and `session/list_changed`.
                            s.set(name, value_of(name).into());
                        }
                    });
                }
            });
        });
    })
}

/// The value advertised for session capability `name`. The proxy's own list follows the
/// history-list draft (`limit`, the order, `session/list_changed`); a host's attach takes both
/// of the multi-client draft's roles.
fn value_of(name: &str) -> &'static str {
    match name {
        "list" => r#"{"limit":{},"changes":{}}"#,
        "attach" => r#"{"roles":["controller","observer"]}"#,
        _ => "{}",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(result: &str) -> AgentCaps {
        let line = format!(r#"{{"jsonrpc":"2.0","id":0,"result":{result}}}"#);
        AgentCaps::from_initialize(&crate::wire::envelope::peek(line.as_bytes())).unwrap()
    }

    #[test]
    fn mcp_over_http_and_stdio_are_what_the_agent_declares_in_either_version() {
        let v1 = |mcp: &str| {
            caps(&format!(
                r#"{{"protocolVersion":1,"agentCapabilities":{{"mcpCapabilities":{mcp}}}}}"#
            ))
        };
        assert!(v1(r#"{"http":true,"sse":false}"#).mcp_http);
        assert!(!v1(r#"{"http":false,"sse":true}"#).mcp_http);
        assert!(!v1(r#"{"http":"yes"}"#).mcp_http);
        assert!(!caps(r#"{"protocolVersion":1,"agentCapabilities":{}}"#).mcp_http);
        let v2 = |mcp: &str| {
            caps(&format!(
                r#"{{"protocolVersion":2,"capabilities":{{"session":{{"mcp":{mcp}}}}}}}"#
            ))
        };
        assert!(v2(r#"{"http":{}}"#).mcp_http);
        assert!(!v2(r#"{"stdio":{}}"#).mcp_http);
        assert!(!v2(r#"{"http":null}"#).mcp_http);
        // Stdio: every v1 agent takes it; a v2 agent when it says so.
        assert!(v1("{}").mcp_stdio);
        assert!(v2(r#"{"stdio":{}}"#).mcp_stdio);
        assert!(!v2(r#"{"http":{}}"#).mcp_stdio);
    }
}
