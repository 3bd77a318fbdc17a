"""What our own line-at-a-time test agents share (not a reference peer): one JSON-RPC message a
line on stdout, session updates, waiting on stdin for the client's answer to a request, and the
loop that answers the client's requests."""
import json
import sys


def send(msg):
    sys.stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def update(sid, update):
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}})


def text(sid, words):
    update(sid, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": words}})


def answer_to(rid):
    """Read until the client's answer to our request `rid` (other lines are not expected); the
    agent ends if stdin does."""
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("id") == rid and "method" not in msg:
            return msg
    sys.exit(0)


def run(name, new_session, prompt):
    """Serve the client until stdin ends: `initialize` answered as agent `name` (ACP v1, no
    capabilities), `session/new` with the ID `new_session()` makes, each `session/prompt` handed
    to `prompt(id, session, text)` (which answers it), other requests refused, notifications
    ignored."""
    for line in sys.stdin:
        msg = json.loads(line)
        method, mid = msg.get("method"), msg.get("id")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": 1, "agentCapabilities": {},
                "agentInfo": {"name": name, "version": "1.0.0"}}})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": new_session()}})
        elif method == "session/prompt":
            params = msg["params"]
            prompt(mid, params["sessionId"], " ".join(b.get("text", "") for b in params["prompt"]))
        elif mid is not None:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "Method not found"}})
