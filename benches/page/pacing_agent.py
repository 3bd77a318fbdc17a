"""A stdio ACP agent for the page bench: each prompt is answered with N `agent_message_chunk`
updates, one every PACE_MS milliseconds, each stamped with the wall clock when it was written
("t=<unix microseconds> i=<index>\n"), then the prompt's response.

  pacing_agent.py N PACE_MS
"""

import asyncio
import json
import sys
import time


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


async def main():
    n, pace = int(sys.argv[1]), float(sys.argv[2]) / 1000
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    sessions = 0
    while line := await reader.readline():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, mid = msg.get("method"), msg.get("id")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": 1, "agentCapabilities": {}}})
        elif method == "session/new":
            sessions += 1
            send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": f"pace-{sessions}"}})
        elif method == "session/prompt":
            sid = msg["params"]["sessionId"]
            start = time.monotonic()
            for i in range(n):
                # Paced from the start, so a late wake-up does not slow the rest.
                await asyncio.sleep(max(0.0, start + i * pace - time.monotonic()))
                text = f"t={time.time_ns() // 1000} i={i}\n"
                send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": {
                    "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}})
            send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})
        elif mid is not None and method is not None:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "Method not found"}})


asyncio.run(main())
