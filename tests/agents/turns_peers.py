"""The two ends of scripts/callgrind-turns.sh, around the proxy under test.

`turns_peers.py agent`: answers `initialize` and `session/new`, and each `session/prompt` with an
`agent_message_chunk`, a `usage_update` and the response (the proxy bench's `__turns` agent).
`turns_peers.py agent --flood N`: answers each prompt with N updates of a mix (six in ten a
message chunk of 1 to 12 words, two a tool call's output line, one a tool call, one a thought;
170 to 260 bytes a line), written at once, then the response (scripts/callgrind-turns.sh
`--flood`).
`turns_peers.py client N -- COMMAND...`: starts COMMAND (the proxy in front of the agent),
plays `initialize`, `session/new` and N prompts one at a time (each waits for its response),
then closes the proxy's stdin and waits for it to end.
"""

import json
import subprocess
import sys


def agent(flood=None):
    used = 0
    out = sys.stdout
    for line in sys.stdin:
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        if method == "initialize":
            result = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}
            replies = [{"jsonrpc": "2.0", "id": rid, "result": result}]
        elif method == "session/new":
            replies = [{"jsonrpc": "2.0", "id": rid, "result": {"sessionId": "turns-1"}}]
        elif method == "session/prompt" and flood is not None:
            replies = []
            done = {"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}}
            out.write("\n".join(flood_updates(flood) + [json.dumps(done)]) + "\n")
        elif method == "session/prompt":
            used += 1200
            update = lambda u: {"jsonrpc": "2.0", "method": "session/update",
                                "params": {"sessionId": "turns-1", "update": u}}
            replies = [
                update({"sessionUpdate": "agent_message_chunk", "content": {
                    "type": "text", "text": "Done: the splitter keeps the terminator and the tests pass."}}),
                update({"sessionUpdate": "usage_update", "used": used, "size": 200000,
                        "cost": {"amount": 0.0123, "currency": "USD"}}),
                {"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}},
            ]
        else:
            continue
        for reply in replies:
            out.write(json.dumps(reply, separators=(",", ":")) + "\n")
        out.flush()


def flood_updates(count):
    """The `--flood` agent's updates of one prompt, as lines (the same every run)."""
    words = 0
    lines = []
    for i in range(count):
        kind = i % 10
        if kind < 6:
            words = words % 12 + 1
            update = {"sessionUpdate": "agent_message_chunk",
                      "content": {"type": "text", "text": "word " * words}}
        elif kind < 8:
            update = {"sessionUpdate": "tool_call_update", "toolCallId": f"call-{i // 10}",
                      "status": "in_progress", "content": [{"type": "content", "content": {
                          "type": "text", "text": f"line {i} of output\n"}}]}
        elif kind == 8:
            update = {"sessionUpdate": "tool_call", "toolCallId": f"call-{i // 10}",
                      "title": "Read src/main.rs", "kind": "read", "status": "pending",
                      "locations": [{"path": "/repo/src/main.rs", "line": i}]}
        else:
            update = {"sessionUpdate": "agent_thought_chunk",
                      "content": {"type": "text", "text": "thinking about it"}}
        lines.append(json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": "turns-1", "update": update}}, separators=(",", ":")))
    return lines


def client(turns, command):
    proxy = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def ask(rid, method, params):
        proxy.stdin.write((json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                       "params": params}) + "\n").encode())
        proxy.stdin.flush()
        for line in proxy.stdout:
            if json.loads(line).get("id") == rid:
                return
        raise SystemExit("the proxy ended before answering " + method)

    ask(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    ask(1, "session/new", {"cwd": "/tmp", "mcpServers": []})
    prompt = [{"type": "text", "text": "Make the line splitter keep the terminator."}]
    for n in range(turns):
        ask(2 + n, "session/prompt", {"sessionId": "turns-1", "prompt": prompt})
    proxy.stdin.close()
    proxy.wait()


if __name__ == "__main__":
    if sys.argv[1] == "agent":
        agent(int(sys.argv[3]) if sys.argv[2:3] == ["--flood"] else None)
    else:
        client(int(sys.argv[2]), sys.argv[4:])
