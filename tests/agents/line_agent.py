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


def run(name, new_session, prompt, lists=False):
    """Serve the client until stdin ends: `initialize` answered as agent `name` (ACP v1, no
    capabilities; with `lists`, `sessionCapabilities.list`, and `session/list` answered with
    the sessions made, as an adapter that keeps its own list does), `session/new` with the ID
    `new_session()` makes, each `session/prompt` handed to `prompt(id, session, text)` (which
    answers it), other requests refused, notifications ignored."""
    made = []
    for line in sys.stdin:
        msg = json.loads(line)
        method, mid = msg.get("method"), msg.get("id")
        if method == "initialize":
            caps = {"sessionCapabilities": {"list": {}}} if lists else {}
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": 1, "agentCapabilities": caps,
                "agentInfo": {"name": name, "version": "1.0.0"}}})
        elif method == "session/new":
            made.append({"sessionId": new_session(), "cwd": msg["params"].get("cwd", "/")})
            send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": made[-1]["sessionId"]}})
        elif method == "session/list" and lists:
            send({"jsonrpc": "2.0", "id": mid, "result": {"sessions": made[::-1]}})
        elif method == "session/prompt":
            params = msg["params"]
            prompt(mid, params["sessionId"], " ".join(b.get("text", "") for b in params["prompt"]))
        elif mid is not None:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "Method not found"}})
