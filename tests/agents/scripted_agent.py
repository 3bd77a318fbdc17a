#!/usr/bin/env python3
"""A tiny scripted ACP agent for fault tests (our own, not a reference peer).

Behaviour is chosen by the first argument:
  flood   after session/new, stream session/update notifications forever
  crash   on session/prompt, send two updates then exit with status 3 mid-turn
  stubborn  ignore stdin EOF and SIGTERM-less shutdown: keep running until killed
  lossy   advertise loadSession, but replay only one made-up update on session/load
  secrets log every line received to $AGENT_LOG, print $AGENT_STDERR_SECRET on stderr, and on
          session/prompt echo the prompt and ask the client for a terminal whose env holds
          $AGENT_TERMINAL_SECRET
Writes its pid to $AGENT_PID_FILE when set.
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
log = open(os.environ["AGENT_LOG"], "a") if mode == "secrets" else None
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
    if method == "initialize":
        caps = {"loadSession": True} if mode == "lossy" else {}
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": 1, "agentCapabilities": caps}})
    elif method == "session/load" and mode == "lossy":
        sid = msg["params"]["sessionId"]
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": {
            "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "lossy replay"}}}})
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": f"{mode}-session"}})
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
