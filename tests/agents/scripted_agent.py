#!/usr/bin/env python3
"""A tiny scripted ACP agent for fault tests (our own, not a reference peer).

Behaviour is chosen by the first argument:
  flood   after session/new, stream session/update notifications forever
  crash   on session/prompt, send two updates then exit with status 3 mid-turn
  stubborn  ignore stdin EOF and SIGTERM-less shutdown: keep running until killed
  lossy   advertise loadSession, but replay only one made-up update on session/load
  forgetful  advertise loadSession, but answer session/load with one made-up update and then
          the error gemini-cli 0.61 gives; on session/prompt echo every text block it got
  mix     sessions mix-0, mix-1, ... ($AGENT_SESSION_PREFIX before each when set); a prompt
          whose first text block reads "updates=N big=B perm=P" gets N updates of varied
          sizes, one update of B KiB, P permission requests (not waited for), then its response
  otel    agentInfo in initialize; session "otel-session"; each prompt sends a plan, a completed
          `read` tool call, a failed `execute` tool call, a usage_update and a message, and
          answers with token usage; every line received is logged to $AGENT_LOG when set
  secrets log every line received to $AGENT_LOG, print $AGENT_STDERR_SECRET on stderr, and on
          session/prompt echo the prompt and ask the client for a terminal whose env holds
          $AGENT_TERMINAL_SECRET
  crashloop  on every session/prompt, append a line to $AGENT_LOG (when set), then exit with
          status 3 before answering
  dead    exit with status 4 at once, before reading anything
  stall   on a session/prompt whose last text block contains "stall" (the user's message: a
          re-prime transcript comes first), send one update and then never answer anything
          again (session/cancel included); other prompts get one update and end_turn
  files   on each session/prompt ask the client to read /work/notes.txt (fs/read_text_file),
          then say what came back ("read: <content>" or "read: error <code>") and end the turn
  index   answer the vendor session-index requests (`_session/rename`, `_session/archive`,
          `_session/unarchive`, `_session/steering`) with {}, as the adapters that have them do
  subagents  session "sub-session"; each prompt delegates as claude-agent-acp 0.101 does for a
          client that declares `subagents` (the subagents RFD): a `subagent_update` announcing a
          child session `sub-child-N` (N the prompt's number), the prompt as a `session_message`
          in both sessions' views, the child's tool call (after the client allows it), words and
          answer under its own ID, its answer to the parent and its end (`idle`, with its token
          usage); then a background task (`async_task_*`), a compaction with its summary, a
          `notice`, a `usage_update`, the parent's answer, and `end_turn` with its usage
Writes its pid to $AGENT_PID_FILE when set; with $AGENT_MCP_HTTP set, declares MCP servers over
HTTP (`mcpCapabilities.http`) in its initialize answer.
"""
import json
import os
import signal
import sys
import time

mode = sys.argv[1] if len(sys.argv) > 1 else "flood"
if os.environ.get("AGENT_PID_FILE"):
    with open(os.environ["AGENT_PID_FILE"], "w") as f:
        f.write(str(os.getpid()))

out = sys.stdout


def send(msg):
    out.write(json.dumps(msg, separators=(",", ":")) + "\n")
    out.flush()


def update(sid, n):
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": {
        "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"chunk {n} " + "x" * (n % 50)}}}})


if mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if mode == "dead":
    os._exit(4)
stalled = False
sessions = requests = 0
log = open(os.environ["AGENT_LOG"], "a") if mode == "secrets" or (mode == "otel" and os.environ.get("AGENT_LOG")) else None
if mode == "secrets":
    print(f"agent starting with token {os.environ['AGENT_STDERR_SECRET']}", file=sys.stderr, flush=True)

for line in sys.stdin:
    if log:
        log.write(line)
        log.flush()
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    method, mid = msg.get("method"), msg.get("id")
    if stalled:
        continue
    if method == "initialize":
        caps = {"loadSession": True} if mode in ("lossy", "forgetful") else {}
        if os.environ.get("AGENT_MCP_HTTP"):
            caps["mcpCapabilities"] = {"http": True}
        result = {"protocolVersion": 1, "agentCapabilities": caps}
        if mode == "otel":
            result["agentInfo"] = {"name": "scripted-otel", "version": "0.1"}
        send({"jsonrpc": "2.0", "id": mid, "result": result})
    elif method == "session/load" and mode == "lossy":
        sid = msg["params"]["sessionId"]
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": {
            "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "lossy replay"}}}})
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
    elif method == "session/load" and mode == "forgetful":
        sid = msg["params"]["sessionId"]
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": {
            "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "partial replay"}}}})
        send({"jsonrpc": "2.0", "id": mid, "error": {
            "code": -32603, "message": "No previous sessions found for this project."}})
    elif method == "session/new" and mode == "mix":
        prefix = os.environ.get("AGENT_SESSION_PREFIX", "")
        send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": f"{prefix}mix-{sessions}"}})
        sessions += 1
    elif method == "session/prompt" and mode == "mix":
        sid = msg["params"]["sessionId"]
        blocks = msg["params"].get("prompt") or [{}]
        spec = dict(kv.split("=") for kv in blocks[0].get("text", "").split() if "=" in kv)
        for n in range(int(spec.get("updates", 0))):
            update(sid, n)
        big = int(spec.get("big", 0))
        if big:
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": {
                "sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "t" * (big << 10)}}}})
        for n in range(int(spec.get("perm", 0))):
            requests += 1
            send({"jsonrpc": "2.0", "id": f"perm-{requests}", "method": "session/request_permission", "params": {
                "sessionId": sid, "toolCall": {"toolCallId": f"tool-{requests}"},
                "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}]}})
        send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})
    elif method == "session/prompt" and mode == "crashloop":
        if os.environ.get("AGENT_LOG"):
            with open(os.environ["AGENT_LOG"], "a") as f:
                f.write("session/prompt\n")
        os._exit(3)
    elif method == "session/prompt" and mode == "stall":
        sid = msg["params"]["sessionId"]
        update(sid, 1)
        blocks = msg["params"].get("prompt") or [{}]
        if "stall" in blocks[-1].get("text", ""):
            stalled = True
        else:
            send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})
    elif method == "session/prompt" and mode == "otel":
        sid = msg["params"]["sessionId"]
        def su(u):
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": u}})
        su({"sessionUpdate": "plan", "entries": [{"content": "look", "priority": "high", "status": "pending"}]})
        su({"sessionUpdate": "tool_call", "toolCallId": "read-1", "title": "Read notes.txt", "kind": "read",
            "status": "in_progress", "rawInput": {"path": "notes.txt"}})
        su({"sessionUpdate": "tool_call_update", "toolCallId": "read-1", "status": "completed", "rawOutput": "notes"})
        su({"sessionUpdate": "tool_call", "toolCallId": "run-1", "title": "Run make", "kind": "execute"})
        su({"sessionUpdate": "tool_call_update", "toolCallId": "run-1", "status": "failed"})
        su({"sessionUpdate": "usage_update", "used": 900, "size": 200000, "cost": {"amount": 0.25, "currency": "USD"}})
        su({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "done"}})
        send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn", "usage": {
            "inputTokens": 120, "outputTokens": 30, "totalTokens": 150, "cachedReadTokens": 100, "cachedWriteTokens": 7}}})
    elif method == "session/prompt" and mode == "files":
        sid = msg["params"]["sessionId"]
        requests += 1
        rid = f"read-{requests}"
        send({"jsonrpc": "2.0", "id": rid, "method": "fs/read_text_file",
              "params": {"sessionId": sid, "path": "/work/notes.txt"}})
        said = "no answer"
        for reply in sys.stdin:
            got = json.loads(reply)
            if got.get("id") == rid and "method" not in got:
                said = got["result"].get("content") if "result" in got else f"error {got['error'].get('code')}"
                break
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": {
            "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"read: {said}"}}}})
        send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})
    elif method == "session/prompt" and mode == "subagents":
        sid = msg["params"]["sessionId"]
        requests += 1
        child = f"sub-child-{requests}"
        asked = " ".join(b.get("text", "") for b in msg["params"].get("prompt") or [])
        def su(session, u):
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": u}})
        text = lambda t: [{"type": "text", "text": t}]
        su(sid, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "I'll ask a subagent."}})
        su(sid, {"sessionUpdate": "subagent_update", "sessionId": child, "title": "Explore the task",
                 "description": "general-purpose", "capabilities": {"cancel": {}}, "state": {"state": "running"}})
        tool_use = f"toolu_{requests}"
        message = {"sessionUpdate": "session_message", "messageId": tool_use, "senderSessionId": sid,
                   "recipientSessionId": child, "content": text(f"DELEGATED: {asked}")}
        su(sid, dict(message, recipientMessageId=tool_use))
        su(child, dict(message, senderMessageId=tool_use))
        su(child, {"sessionUpdate": "tool_call", "toolCallId": f"grep-{requests}", "title": "Grep TODO",
                   "kind": "search", "status": "pending"})
        rid = f"perm-{requests}"
        send({"jsonrpc": "2.0", "id": rid, "method": "session/request_permission", "params": {
            "sessionId": child, "toolCall": {"toolCallId": f"grep-{requests}", "title": "Grep TODO"},
            "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                        {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]}})
        for reply in sys.stdin:
            got = json.loads(reply)
            if got.get("id") == rid and "method" not in got:
                break
        su(child, {"sessionUpdate": "tool_call_update", "toolCallId": f"grep-{requests}", "status": "completed",
                   "content": [{"type": "content", "content": {"type": "text", "text": "a.rs:3: TODO"}}]})
        su(child, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Found 2 TODOs in a.rs."}})
        su(sid, {"sessionUpdate": "session_message", "messageId": f"{tool_use}:reply", "senderSessionId": child,
                 "recipientSessionId": sid, "content": text("Found 2 TODOs in a.rs.")})
        su(sid, {"sessionUpdate": "subagent_update", "sessionId": child, "state": {
            "state": "idle", "stopReason": "end_turn", "usage": {"inputTokens": 40, "outputTokens": 12, "totalTokens": 52}}})
        task = f"task-{requests}"
        su(sid, {"sessionUpdate": "async_task_spawned", "asyncTaskId": task, "name": "cargo build",
                 "taskType": "local_bash", "description": "building the project", "showInTranscript": True, "canStop": True})
        su(sid, {"sessionUpdate": "async_task_progress", "asyncTaskId": task, "summary": "compiling 12 crates"})
        su(sid, {"sessionUpdate": "async_task_state_update", "asyncTaskId": task, "state": "completed", "summary": "built"})
        compaction = f"compaction-{requests}"
        su(sid, {"sessionUpdate": "compaction_update", "compactionId": compaction, "status": "in_progress"})
        su(sid, {"sessionUpdate": "compaction_summary_chunk", "compactionId": compaction,
                 "content": {"type": "text", "text": "Earlier: the user asked for the TODOs."}})
        su(sid, {"sessionUpdate": "compaction_update", "compactionId": compaction, "status": "completed"})
        su(sid, {"sessionUpdate": "notice", "severity": "info", "title": "Context compacted",
                 "description": "older turns summarized"})
        su(sid, {"sessionUpdate": "usage_update", "used": 1200, "size": 200000, "cost": {"amount": 0.01, "currency": "USD"}})
        su(sid, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "The subagent found 2 TODOs."}})
        send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn", "usage": {
            "inputTokens": 100, "outputTokens": 20, "totalTokens": 120}}})
    elif mode == "index" and method in ("_session/rename", "_session/archive", "_session/unarchive",
                                        "_session/steering"):
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
    elif method == "session/new":
        sid = "sub-session" if mode == "subagents" else f"{mode}-session"
        send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": sid}})
        if mode == "flood":
            n = 0
            while True:
                update(f"{mode}-session", n)
                n += 1
    elif method == "session/prompt":
        sid = msg["params"]["sessionId"]
        update(sid, 1)
        update(sid, 2)
        if mode == "crash":
            os._exit(3)
        if mode == "forgetful":
            said = " | ".join(b.get("text", "") for b in msg["params"]["prompt"])
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": {
                "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "you said: " + said}}}})
        if mode == "secrets":
            said = msg["params"]["prompt"][-1].get("text", "")
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": {
                "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "you said: " + said}}}})
            send({"jsonrpc": "2.0", "id": "term-1", "method": "terminal/create", "params": {"sessionId": sid,
                  "command": "env", "env": [{"name": "DB_PASSWORD", "value": os.environ["AGENT_TERMINAL_SECRET"]}]}})
        send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})

if mode == "stubborn":
    while True:
        time.sleep(1)
