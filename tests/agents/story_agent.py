#!/usr/bin/env python3
"""A deterministic ACP agent of our own, for rerun/diff tests (not a reference peer).

Each prompt turn: a message, a `read` tool call on notes.txt that asks permission and reads the
file through the client, a closing message echoing the prompt, and `end_turn`.
With the argument `changed`, the same agent with two edits: the tool call's title and the
closing message differ. Everything else (ids, order, kinds, statuses) is the same.
"""
import sys
import uuid

from line_agent import answer_to, run, send, text, update

changed = len(sys.argv) > 1 and sys.argv[1] == "changed"
next_id = 0


def ask(method, params):
    """Send a request to the client and wait for its answer (requests from it are not expected)."""
    global next_id
    rid = next_id
    next_id += 1
    send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    return answer_to(rid)


def prompt(mid, sid, words):
    title = "Read notes.md" if changed else "Read notes.txt"
    text(sid, "Let me look at your notes.")
    tool = {"toolCallId": "read-1", "title": title, "kind": "read", "status": "pending",
            "locations": [{"path": "/work/notes.txt"}]}
    update(sid, {"sessionUpdate": "tool_call", **tool})
    answer = ask("session/request_permission", {"sessionId": sid, "toolCall": tool, "options": [
        {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
        {"optionId": "no", "name": "Reject", "kind": "reject_once"}]})
    allowed = answer.get("result", {}).get("outcome", {}).get("optionId") == "yes"
    content = ""
    if allowed:
        read = ask("fs/read_text_file", {"sessionId": sid, "path": "/work/notes.txt"})
        content = read.get("result", {}).get("content", "")
    update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": "read-1",
                 "status": "completed" if allowed else "failed",
                 "content": [{"type": "content", "content": {"type": "text", "text": content}}]})
    closing = "All done" if changed else "Done"
    text(sid, f"{closing}: {words} ({len(content)} bytes of notes)")
    send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})


print("story agent ready", file=sys.stderr, flush=True)
run("story-agent", lambda: f"story-{uuid.uuid4().hex}", prompt)
