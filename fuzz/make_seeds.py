#!/usr/bin/env python3
"""Regenerate the committed seed corpus (fuzz/corpus/<target>/seed-*) from journals/.

- journal_reader: the sample segments as they are on disk.
- journal_lines:  byte 0 (keep CRCs as they are: they are right) + the decompressed segments.
- proxy:          the recorded sessions replayed as proxy input (see fuzz_targets/proxy.rs), under
                  several configurations, plus a hand-written load served from the journal.
- replay:         a recorded session as the replay target's recording (side byte + line), then
                  the same client lines again, as a live client would send them.
Needs the zstd CLI. Run from anywhere: python3 fuzz/make_seeds.py
"""
import json
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"

# Step bytes of the proxy target.
CLIENT, AGENT, STDERR, EOF, HISTORY, SESSIONS = 0, 5, 10, 12, 13, 14
# Config byte: load mode in bits 0-1 (off, auto, journal, agent), redact bit 2, re-prime bit 3.
CONFIGS = {"off": 0x04, "auto": 0x0D, "journal": 0x0E, "agent": 0x07}


def write(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / f"seed-{name}").write_bytes(data)


def step(op, body):
    return bytes([op]) + body + b"\n"


def segments():
    return sorted((ROOT / "journals").glob("*/**/*.acpj.zst"))


def proxy_steps(plain):
    """The messages of a decompressed segment as proxy steps, in wire order."""
    lines = plain.splitlines()
    init = json.loads(lines[0]).get("initialize") or {}
    out = b""
    if "request" in init:
        out += step(CLIENT, msg(init["request"]))
    if "response" in init:
        out += step(AGENT, msg(init["response"]))
    for line in lines[1:]:
        rec = json.loads(line)
        if "msg" in rec:
            out += step(CLIENT if rec["from"] == "client" else AGENT, msg(rec["msg"]))
        elif "stderr" in rec:
            for text in rec["stderr"].splitlines():
                out += step(STDERR, text.encode())
    return out


def replay_input(plain):
    """A session segment as the replay target's input: the recording, `--`, the client's lines."""
    recording, client = b"", b""
    for line in plain.splitlines()[1:]:
        rec = json.loads(line)
        if "msg" in rec and not rec.get("proxy"):
            body = msg(rec["msg"])
            recording += (b"0" if rec["from"] == "client" else b"1") + body + b"\n"
            if rec["from"] == "client":
                client += body + b"\n"
    return recording + b"--\n" + client


def msg(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


def load_from_journal():
    """An agent without loadSession; the client loads a recorded session with MCP secrets, the
    journal answers, the proxy brings a new agent session up and re-primes the next prompt."""
    s = b""
    s += step(CLIENT, msg({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": 1, "clientCapabilities": {"session": {"notices": {}}}}}))
    s += step(AGENT, msg({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentCapabilities": {
        "sessionCapabilities": {}}}}))
    s += step(CLIENT, msg({"jsonrpc": "2.0", "id": 1, "method": "session/load", "params": {
        "sessionId": "old", "cwd": "/w", "mcpServers": [{"name": "m", "command": "x", "args": [],
                                                        "env": [{"name": "TOKEN", "value": "hunter2"}]}]}}))
    s += step(HISTORY, b"\x01" + msg({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": "old", "update": {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hi"}}}}))
    s += step(HISTORY, b"\x02" + b"xx|User: hi sk-ant-abcdefghijklmnopqrstuvwxyz|code")
    s += step(AGENT, msg({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": "new-1", "update": {"sessionUpdate": "available_commands_update", "availableCommands": []}}}))
    s += step(AGENT, msg({"jsonrpc": "2.0", "id": "acp-journal:0", "result": {"sessionId": "new-1", "modes": {
        "currentModeId": "ask", "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}]}}}))
    s += step(AGENT, msg({"jsonrpc": "2.0", "id": "acp-journal:1", "result": {}}))
    s += step(CLIENT, msg({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {
        "sessionId": "old", "prompt": [{"type": "text", "text": "again, key ghp_abcdefghijklmnopqrstuvwxyz0123456789"}]}}))
    s += step(AGENT, msg({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "new-1", "update": {
        "sessionUpdate": "tool_call", "toolCallId": "t1", "title": "ls"}}}))
    s += step(AGENT, msg({"jsonrpc": "2.0", "id": 5, "method": "terminal/create", "params": {
        "sessionId": "new-1", "command": "ls", "env": [{"name": "PW", "value": "pw"}]}}))
    s += step(CLIENT, msg({"jsonrpc": "2.0", "id": 5, "result": {"terminalId": "t"}}))
    s += step(AGENT, msg({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}))
    s += step(CLIENT, msg({"jsonrpc": "2.0", "id": 3, "method": "session/list", "params": {}}))
    s += step(SESSIONS, b"old,other,third")
    s += step(CLIENT, msg({"jsonrpc": "2.0", "id": 4, "method": "session/close", "params": {"sessionId": "old"}}))
    s += step(CLIENT, msg({"jsonrpc": "2.0", "id": 6, "method": "session/resume", "params": {"sessionId": "gone"}}))
    s += step(HISTORY, b"\x00")
    s += step(CLIENT, msg({"jsonrpc": "2.0", "id": 7, "method": "session/delete", "params": {"sessionId": "old"}}))
    s += step(STDERR, b"warn: token xoxb-1234567890-abcdefghij")
    s += step(EOF, b"\x01")
    return s


def resume_v2_from_journal():
    """ACP v2: an agent that lost the session fails the client's resume with replay; the journal
    answers, the proxy brings a new agent session up, the turn runs and the agent dies in it."""
    s = b""
    s += step(CLIENT, msg({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": 2, "info": {"name": "ed", "version": "1"}, "capabilities": {}}}))
    s += step(AGENT, msg({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 2, "info": {
        "name": "a", "version": "1"}, "capabilities": {"session": {}}}}))
    s += step(CLIENT, msg({"jsonrpc": "2.0", "id": 1, "method": "session/resume", "params": {
        "sessionId": "old", "cwd": "/w", "replayFrom": {"type": "start"}}}))
    s += step(AGENT, msg({"jsonrpc": "2.0", "id": 1, "error": {"code": -32002, "message": "Resource not found"}}))
    s += step(HISTORY, b"\x01" + msg({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": "old", "update": {"sessionUpdate": "user_message", "messageId": "m", "content": [{"type": "text", "text": "hi"}]}}}))
    s += step(HISTORY, b"\x02" + b"xx|User: hi|")
    s += step(AGENT, msg({"jsonrpc": "2.0", "id": "acp-journal:0", "result": {"sessionId": "new-1"}}))
    s += step(CLIENT, msg({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {
        "sessionId": "old", "prompt": [{"type": "text", "text": "again"}]}}))
    s += step(AGENT, msg({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "new-1", "update": {
        "sessionUpdate": "user_message", "messageId": "m2", "content": [{"type": "text", "text": "again"}]}}}))
    s += step(AGENT, msg({"jsonrpc": "2.0", "id": 2, "result": {"messageId": "m2"}}))
    s += step(AGENT, msg({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "new-1", "update": {
        "sessionUpdate": "state_update", "state": "running"}}}))
    s += step(AGENT, msg({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "new-1", "update": {
        "sessionUpdate": "tool_call_update", "toolCallId": "t1", "title": "ls", "status": "in_progress"}}}))
    s += step(CLIENT, msg({"jsonrpc": "2.0", "id": 3, "method": "session/resume", "params": {
        "sessionId": "x", "cwd": "/w", "replayFrom": {"type": "weird"}}}))
    s += step(EOF, b"\x05")
    return s


def main():
    for seg in segments():
        parts = seg.relative_to(ROOT / "journals").parts
        name = f"{parts[0]}-{parts[1]}"
        raw = seg.read_bytes()
        plain = subprocess.run(["zstd", "-dc", str(seg)], check=True, capture_output=True).stdout
        write("journal_reader", name, raw)
        write("journal_lines", name, b"\x00" + plain)
        steps = proxy_steps(plain)
        if parts[1] == "sessions":
            for config, byte in CONFIGS.items():
                write("proxy", f"{name}-{config}", bytes([byte]) + steps)
            write("replay", name, replay_input(plain))
    for config, byte in CONFIGS.items():
        write("proxy", f"load-{config}", bytes([byte]) + load_from_journal())
        write("proxy", f"resume-v2-{config}", bytes([byte]) + resume_v2_from_journal())


if __name__ == "__main__":
    main()
