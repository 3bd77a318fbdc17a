//! Replayed terminals: a `session/load` served from the journal shows a tool call's terminal as
//! the output the client answered, never the terminal itself (it died with the old client).

use serde_json::{Value, json};

use crate::util::*;

/// An agent whose prompt "run" makes a tool call in terminal `term-1`, asks the client for its
/// output and exit, and completes the tool call; other prompts just end their turn.
const AGENT: &str = r#"
import json, sys
def send(m):
    sys.stdout.write(json.dumps(m, separators=(",", ":")) + "\n"); sys.stdout.flush()
def answer(want):
    for line in sys.stdin:
        m = json.loads(line)
        if m.get("id") == want and "method" not in m:
            return m
def upd(sid, u):
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": u}})
term = [{"type": "terminal", "terminalId": "term-1"}]
n = 0
for line in sys.stdin:
    m = json.loads(line)
    method, rid, p = m.get("method"), m.get("id"), m.get("params", {})
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": 1, "agentCapabilities": {}}})
    elif method == "session/new":
        n += 1
        send({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": f"ag-{n}"}})
    elif method == "session/prompt":
        sid = p["sessionId"]
        if p["prompt"][0].get("text") == "run":
            upd(sid, {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "make", "kind": "execute", "status": "in_progress", "content": term})
            send({"jsonrpc": "2.0", "id": 1, "method": "terminal/output", "params": {"sessionId": sid, "terminalId": "term-1"}})
            answer(1)
            send({"jsonrpc": "2.0", "id": "1", "method": "terminal/wait_for_exit", "params": {"sessionId": sid, "terminalId": "term-1"}})
            answer("1")
            upd(sid, {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed", "content": [{"type": "diff", "path": "/w/a", "oldText": "a", "newText": "b"}] + term})
        send({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}})
    elif rid is not None and method is not None:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}})
"#;

#[test]
fn a_loaded_session_shows_terminal_output_not_the_terminal() {
    let store = tempfile::tempdir().unwrap();
    let agent = vec![python(), "-c".to_string(), AGENT.to_string()];
    let mut client = TestClient::spawn(&proxied(store.path(), &agent));
    let session = client.start_session("/tmp");
    client.send(&json!({"jsonrpc": "2.0", "id": 100, "method": "session/prompt", "params": {"sessionId": session, "prompt": [{"type": "text", "text": "run"}]}}));
    loop {
        let msg = client.recv().and_then(|r| r.json.clone()).expect("a line");
        let reply = match msg["method"].as_str() {
            Some("terminal/output") => {
                json!({"jsonrpc": "2.0", "id": msg["id"], "result": {"output": "compiling\nok\n", "truncated": false}})
            }
            Some("terminal/wait_for_exit") => {
                json!({"jsonrpc": "2.0", "id": msg["id"], "result": {"exitCode": 0, "signal": null}})
            }
            Some(_) => match reply_to(&msg) {
                Some(reply) => reply,
                None => continue,
            },
            None if msg["id"] == 100 => break,
            None => continue,
        };
        client.send(&reply);
    }
    client.finish();

    let mut client = TestClient::spawn(&proxied(store.path(), &agent));
    client.initialize();
    let (updates, response) = client.load(&session, "/tmp");
    assert!(response.get("result").is_some(), "load failed: {response}");
    client.finish();
    let tools: Vec<&Value> = updates
        .iter()
        .map(|u| &u["params"]["update"])
        .filter(|u| u["toolCallId"] == "t1")
        .collect();
    let text = json!({"type": "content", "content": {"type": "text", "text": "compiling\nok\n[exit status 0]"}});
    assert_eq!(tools.len(), 2, "{updates:?}");
    assert_eq!(tools[0]["content"], json!([text]));
    assert_eq!(
        tools[1]["content"],
        json!([{"type": "diff", "path": "/w/a", "oldText": "a", "newText": "b"}, text])
    );
    for u in &updates {
        assert!(!u.to_string().contains("term-1"), "{u}");
    }
}
