//! `--offer-history`: the journal's own MCP server (`acp-journal mcp`, scoped to the session's
//! repository) added to the `mcpServers` of a setup request on its way to the agent. What the
//! client listed is kept as it was, and a client entry of the same name wins.

use serde_json::{Value, json};

use super::vocab::HistoryOffer;
use crate::wire::envelope::Peek;

/// The methods whose `mcpServers` get the offer.
const SETUP: &[&str] = &["session/new", "session/load", "session/resume"];

/// For a setup request (`peek`), its `mcpServers` with the offer added, and the entry added;
/// `None` when it is no setup request, names no `cwd` to scope the server by, or already lists
/// a server of that name.
pub(super) fn offered(offer: &HistoryOffer, peek: &Peek<'_>) -> Option<(String, Value)> {
    if !SETUP.contains(&peek.method()?) {
        return None;
    }
    let params: Value = serde_json::from_str(peek.params?.get()).ok()?;
    add(offer, &params["mcpServers"], params["cwd"].as_str()?)
}

/// `servers` (a JSON array, or nothing) with the offer for a session in `cwd` added: the new
/// array as JSON, and the entry.
pub(super) fn add(offer: &HistoryOffer, servers: &Value, cwd: &str) -> Option<(String, Value)> {
    let mut list = match servers {
        Value::Array(list) => list.clone(),
        Value::Null => Vec::new(),
        _ => return None,
    };
    if list.iter().any(|s| s["name"] == offer.name.as_str()) {
        return None;
    }
    let mut args = offer.args.clone();
    args.extend(["mcp".into(), "--repository".into(), cwd.into()]);
    let entry = json!({"name": offer.name, "command": offer.command, "args": args, "env": []});
    list.push(entry.clone());
    Some((Value::Array(list).to_string(), entry))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer() -> HistoryOffer {
        HistoryOffer {
            name: "acp-journal-history".into(),
            command: "/bin/acp-journal".into(),
            args: vec!["--journal-dir".into(), "/j".into()],
        }
    }

    #[test]
    fn the_offer_is_added_after_the_clients_servers_and_a_client_entry_of_its_name_wins() {
        let line = br#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[{"name":"gh","command":"x","args":[],"env":[]}]}}"#;
        let peek = crate::wire::envelope::peek(line);
        let (servers, entry) = offered(&offer(), &peek).unwrap();
        let servers: Value = serde_json::from_str(&servers).unwrap();
        assert_eq!(servers[0]["name"], "gh");
        assert_eq!(servers[1], entry);
        assert_eq!(
            entry["args"],
            json!(["--journal-dir", "/j", "mcp", "--repository", "/w"])
        );
        let theirs = br#"{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"s","cwd":"/w","mcpServers":[{"name":"acp-journal-history","command":"y","args":[],"env":[]}]}}"#;
        assert_eq!(
            offered(&offer(), &crate::wire::envelope::peek(theirs)),
            None
        );
        let prompt = br#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s","cwd":"/w","prompt":[]}}"#;
        assert_eq!(
            offered(&offer(), &crate::wire::envelope::peek(prompt)),
            None
        );
    }
}
