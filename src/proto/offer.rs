//! `--offer-history`: the journal's own MCP server (`acp-journal mcp`, scoped to the session's
//! repository) added to the `mcpServers` of a setup request on its way to the agent. What the
//! client listed is kept as it was, and a client entry of the same name wins. Over stdio by
//! default; under `serve`, to an agent that declares MCP over HTTP, an HTTP entry for serve's
//! own endpoint whose bearer token grants that repository's server only: the journal's copy of
//! the entry has the token redacted, whatever `--no-redact` says.

use serde_json::{Value, json};

use super::capabilities::AgentCaps;
use super::vocab::HistoryOffer;
use crate::redact::REDACTED;
use crate::wire::envelope::Peek;

/// The methods whose `mcpServers` get the offer.
const SETUP: &[&str] = &["session/new", "session/load", "session/resume"];

/// The offer added to a setup's `mcpServers`.
#[derive(Debug, PartialEq)]
pub(super) struct Added {
    /// The new array, as JSON: what the agent is sent.
    pub(super) servers: String,
    /// The entry added, as the journal keeps it: an HTTP entry's token redacted.
    pub(super) journaled: Value,
    /// An HTTP entry's token, for the journal's copy of a setup the proxy sends to leave out.
    pub(super) secret: Option<String>,
}

/// For a setup request (`peek`) to an agent of `agent`'s capabilities, its `mcpServers` with
/// the offer added ([`Transport::for_agent`]); `None` when it is no setup request, names no
/// `cwd` to scope the server by, already lists a server of that name, or the agent takes no
/// transport the proxy offers.
pub(super) fn offered(offer: &HistoryOffer, agent: &AgentCaps, peek: &Peek<'_>) -> Option<Added> {
    if !SETUP.contains(&peek.method()?) {
        return None;
    }
    let params: Value = serde_json::from_str(peek.params?.get()).ok()?;
    add(offer, agent, &params["mcpServers"], params["cwd"].as_str()?)
}

/// How the offer reaches an agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    /// Serve's own endpoint.
    Http,
    /// This binary over stdio; `typed`: with `"type": "stdio"`, which ACP v2 requires (v1's
    /// stdio entry has no `type`).
    Stdio { typed: bool },
}

impl Transport {
    /// HTTP when the agent takes it and the proxy is `serve` (`offer.http`), else stdio when
    /// the agent takes it (every v1 agent; a v2 agent that declares `session.mcp.stdio`), else
    /// none: the entry is shaped for the protocol version the agent answered.
    fn for_agent(offer: &HistoryOffer, agent: &AgentCaps) -> Option<Transport> {
        if agent.mcp_http && offer.http.is_some() {
            return Some(Transport::Http);
        }
        agent
            .mcp_stdio
            .then_some(Transport::Stdio { typed: agent.v2 })
    }
}

/// `servers` (a JSON array, or nothing) with the offer for a session in `cwd` added, over the
/// transport the agent takes ([`Transport::for_agent`]).
pub(super) fn add(
    offer: &HistoryOffer,
    agent: &AgentCaps,
    servers: &Value,
    cwd: &str,
) -> Option<Added> {
    let transport = Transport::for_agent(offer, agent)?;
    let mut list = match servers {
        Value::Array(list) => list.clone(),
        Value::Null => Vec::new(),
        _ => return None,
    };
    if list.iter().any(|s| s["name"] == offer.name.as_str()) {
        return None;
    }
    let header = |value: &str| json!([{"name": "Authorization", "value": value}]);
    let (entry, journaled, secret) = match offer
        .http
        .as_ref()
        .filter(|_| transport == Transport::Http)
    {
        Some(endpoint) => {
            let token = endpoint.token(cwd);
            let entry = json!({"type": "http", "name": offer.name, "url": endpoint.url_for(cwd), "headers": header(&format!("Bearer {token}"))});
            let mut journaled = entry.clone();
            journaled["headers"] = header(&format!("Bearer {REDACTED}"));
            (entry, journaled, Some(token))
        }
        None => {
            let mut args = offer.args.clone();
            args.extend(["mcp".into(), "--repository".into(), cwd.into()]);
            let mut entry =
                json!({"name": offer.name, "command": offer.command, "args": args, "env": []});
            if transport == (Transport::Stdio { typed: true }) {
                entry["type"] = json!("stdio");
            }
            (entry.clone(), entry, None)
        }
    };
    list.push(entry);
    Some(Added {
        servers: Value::Array(list).to_string(),
        journaled,
        secret,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::HttpOffer;

    fn offer(http: Option<HttpOffer>) -> HistoryOffer {
        HistoryOffer {
            name: "acp-journal-history".into(),
            command: "/bin/acp-journal".into(),
            args: vec!["--journal-dir".into(), "/j".into()],
            http,
        }
    }

    /// A v1 agent, which takes stdio and, when `http`, HTTP.
    fn v1(http: bool) -> AgentCaps {
        AgentCaps {
            mcp_http: http,
            mcp_stdio: true,
            ..AgentCaps::default()
        }
    }

    fn served() -> HistoryOffer {
        offer(Some(HttpOffer::new(
            "http://127.0.0.1:9/mcp".into(),
            [7; 32],
        )))
    }

    fn new_session(cwd: &str) -> Vec<u8> {
        json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": cwd, "mcpServers": [{"name": "gh", "command": "x", "args": [], "env": []}]}}).to_string().into_bytes()
    }

    #[test]
    fn the_offer_is_added_after_the_clients_servers_and_a_client_entry_of_its_name_wins() {
        let line = new_session("/w");
        let peek = crate::wire::envelope::peek(&line);
        let added = offered(&offer(None), &v1(false), &peek).unwrap();
        let servers: Value = serde_json::from_str(&added.servers).unwrap();
        assert_eq!(servers[0]["name"], "gh");
        assert_eq!(servers[1], added.journaled);
        assert_eq!(
            added.journaled["args"],
            json!(["--journal-dir", "/j", "mcp", "--repository", "/w"])
        );
        assert_eq!(added.secret, None);
        let theirs = br#"{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"s","cwd":"/w","mcpServers":[{"name":"acp-journal-history","command":"y","args":[],"env":[]}]}}"#;
        assert_eq!(
            offered(&served(), &v1(true), &crate::wire::envelope::peek(theirs)),
            None
        );
        let prompt = br#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s","cwd":"/w","prompt":[]}}"#;
        assert_eq!(
            offered(
                &offer(None),
                &v1(false),
                &crate::wire::envelope::peek(prompt)
            ),
            None
        );
    }

    /// Under `serve`, an agent that takes MCP over HTTP is offered serve's endpoint for the
    /// session's repository, with a token for that repository alone, which the journal's copy
    /// leaves out; any other agent, and any agent of the stdio proxy, the stdio entry.
    #[test]
    fn an_agent_that_takes_http_gets_serves_endpoint_with_a_token_of_its_repository_else_stdio() {
        let cwd = "/w/a b&c=d/é";
        let line = new_session(cwd);
        let peek = crate::wire::envelope::peek(&line);
        let ours = served();
        let endpoint = ours.http.as_ref().unwrap();
        let added = offered(&ours, &v1(true), &peek).unwrap();
        let token = endpoint.token(cwd);
        assert_eq!(added.secret.as_deref(), Some(token.as_str()));
        let servers: Value = serde_json::from_str(&added.servers).unwrap();
        assert_eq!(servers[0]["name"], "gh");
        let entry = &servers[1];
        assert_eq!(
            entry,
            &json!({"type": "http", "name": "acp-journal-history", "url": endpoint.url_for(cwd), "headers": [{"name": "Authorization", "value": format!("Bearer {token}")}]})
        );
        let url = entry["url"].as_str().unwrap();
        let (base, query) = url.split_once('?').unwrap();
        assert_eq!(base, "http://127.0.0.1:9/mcp");
        assert_eq!(HttpOffer::scope_of(query).as_deref(), Some(cwd));
        // The journal's copy: the same entry, the token redacted.
        let mut journaled = entry.clone();
        journaled["headers"][0]["value"] = json!("Bearer [REDACTED]");
        assert_eq!(added.journaled, journaled);
        assert!(!added.journaled.to_string().contains(&token));

        // A token per repository, per key; at least 256 bits of HMAC-SHA256.
        assert_ne!(token, endpoint.token("/w"));
        assert_ne!(
            token,
            HttpOffer::new("http://127.0.0.1:9/mcp".into(), [8; 32]).token(cwd)
        );
        assert_eq!(token.len(), 43);
        assert_eq!(HttpOffer::scope_of("repository=/a&repository=/b"), None);
        assert_eq!(HttpOffer::scope_of("other=/a"), None);

        // The stdio entry: an agent that does not declare HTTP, or the stdio proxy's offer.
        for (offer, http) in [(served(), false), (offer(None), true)] {
            let added = offered(&offer, &v1(http), &peek).unwrap();
            assert_eq!(added.secret, None);
            assert_eq!(added.journaled["command"], "/bin/acp-journal");
            let servers: Value = serde_json::from_str(&added.servers).unwrap();
            assert_eq!(servers[1], added.journaled);
        }
    }

    /// A v2 agent is offered stdio only when it declares it (`session.mcp.stdio`), with the
    /// `"type": "stdio"` v2 requires; one that declares neither is offered nothing.
    #[test]
    fn a_v2_agent_gets_a_typed_stdio_entry_only_when_it_declares_stdio() {
        let line = new_session("/w");
        let peek = crate::wire::envelope::peek(&line);
        let v2 = |stdio, http| AgentCaps {
            v2: true,
            mcp_stdio: stdio,
            mcp_http: http,
            ..AgentCaps::default()
        };
        let added = offered(&offer(None), &v2(true, false), &peek).unwrap();
        assert_eq!(
            added.journaled,
            json!({"name": "acp-journal-history", "command": "/bin/acp-journal", "args": ["--journal-dir", "/j", "mcp", "--repository", "/w"], "env": [], "type": "stdio"})
        );
        assert_eq!(offered(&offer(None), &v2(false, false), &peek), None);
        assert_eq!(offered(&offer(None), &v2(false, true), &peek), None);
        let over_http = offered(&served(), &v2(false, true), &peek).unwrap();
        assert_eq!(over_http.journaled["type"], "http");
    }
}
