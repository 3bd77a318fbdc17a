#!/usr/bin/env python3
"""An ACP agent that edits files as the test tells it (our own, for `blame`'s tests).

agentInfo name "edit-agent"; each session/new answers a fresh session ID and the model
"edit-model-1" (`models.currentModelId`, as claude-agent-acp does). A prompt's first line is
for people; each later line is a directive, its text lines following it up to a line ".":

  write PATH        the lines are the file's whole new text: a tool call (kind edit), then
                    fs/read_text_file of PATH (an error: a new file) and fs/write_text_file
                    through the client, as the SDK example agents write
  replace PATH      the lines are the old text, a line "---", the new text: the agent replaces
                    it in the file itself and reports a tool call whose content is a `diff`
                    (path, oldText, newText), as claude-agent-acp and codex-acp do
  run COMMAND       the agent runs COMMAND with sh in the session's directory itself and
                    reports it as an `execute` tool call (rawInput.command)

PATH is relative to the session's cwd, or absolute. Then one message chunk and end_turn.
"""
import json
import os
import subprocess
import sys

out = sys.stdout
cwds = {}
calls = 0
next_id = 0


def send(msg):
    out.write(json.dumps(msg, separators=(",", ":")) + "\n")
    out.flush()


def ask(method, params):
    """A request to the client; its answer (requests from the client meanwhile are not expected)."""
    global next_id
    next_id += 1
    rid = f"edit-agent-{next_id}"
    send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("id") == rid and "method" not in msg:
            return msg
    sys.exit(0)


def update(sid, u):
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": u}})


def tool(sid, kind, title, **fields):
    global calls
    calls += 1
    call = f"call-{calls}"
    update(sid, {"sessionUpdate": "tool_call", "toolCallId": call, "title": title, "kind": kind,
                 "status": "in_progress", **fields})
    return call


def directives(text):
    lines = text.split("\n")[1:]
    i = 0
    while i < len(lines):
        head = lines[i]
        i += 1
        if not head.strip():
            continue
        verb, _, arg = head.partition(" ")
        body = []
        if verb in ("write", "replace"):
            while i < len(lines) and lines[i] != ".":
                body.append(lines[i])
                i += 1
            i += 1
        yield verb, arg, body


def prompt(sid, text):
    cwd = cwds[sid]
    for verb, arg, body in directives(text):
        path = arg if os.path.isabs(arg) else os.path.join(cwd, arg)
        if verb == "write":
            call = tool(sid, "edit", f"Write {arg}", locations=[{"path": path}])
            ask("fs/read_text_file", {"sessionId": sid, "path": path})
            content = "".join(line + "\n" for line in body)
            ask("fs/write_text_file", {"sessionId": sid, "path": path, "content": content})
            update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": call, "status": "completed"})
        elif verb == "replace":
            cut = body.index("---")
            old = "".join(line + "\n" for line in body[:cut])
            new = "".join(line + "\n" for line in body[cut + 1:])
            with open(path) as f:
                whole = f.read()
            assert whole.count(old) == 1, f"{old!r} not once in {path}"
            diff = [{"type": "diff", "path": path, "oldText": old, "newText": new}]
            call = tool(sid, "edit", f"Edit {arg}", content=diff)
            with open(path, "w") as f:
                f.write(whole.replace(old, new))
            update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": call, "status": "completed",
                         "content": diff})
        elif verb == "run":
            call = tool(sid, "execute", arg, rawInput={"command": arg})
            subprocess.run(["sh", "-c", arg], cwd=cwd, check=True)
            update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": call, "status": "completed"})
    update(sid, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "done"}})


for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    method, mid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": 1, "agentCapabilities": {},
            "agentInfo": {"name": "edit-agent", "version": "0.1"}}})
    elif method == "session/new":
        sid = f"edit-{os.getpid()}-{len(cwds)}"
        cwds[sid] = params["cwd"]
        send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": sid, "models": {
            "currentModelId": "edit-model-1",
            "availableModels": [{"modelId": "edit-model-1", "name": "Edit model 1"}]}}})
    elif method == "session/prompt":
        sid = params["sessionId"]
        text = "".join(b.get("text", "") for b in params.get("prompt", []) if b.get("type") == "text")
        prompt(sid, text)
        send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})
    elif mid is not None and method is not None:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": f"no {method}"}})
