"""What our own line-at-a-time test agents share (not a reference peer): one JSON-RPC message a
line on stdout, session updates, and waiting on stdin for the client's answer to a request."""
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
