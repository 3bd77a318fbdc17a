#!/usr/bin/env python3
"""A loopback stand-in for the Anthropic Messages API (our own), just enough for the adapters'
requests: `POST /v1/messages` (streamed as server-sent events, or not), `count_tokens`, and `{}`
for anything else. No key is checked and nothing leaves the machine.

Each answer says what the model was shown: "You said: <the last user text>. I can see N user
messages." (user text blocks, Claude Code's <system-reminder> blocks left out), so a test can tell
whether a restored session kept its context. Prints the port on stdout; with $MODEL_LOG set,
appends one JSON line per request ({"path", "model", "stream", "users"}).
"""
import http.server
import json
import os
import sys

LOG = os.environ.get("MODEL_LOG")


def user_texts(req):
    texts = []
    for msg in req.get("messages") or []:
        if msg.get("role") != "user":
            continue
        content = msg.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for block in blocks:
            text = block.get("text") if isinstance(block, dict) and block.get("type") == "text" else None
            if text and not text.lstrip().startswith("<system-reminder>"):
                texts.append(text)
    return texts


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, kind="application/json"):
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.reply(200, b"{}")

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            req = json.loads(raw)
        except ValueError:
            req = {}
        users = user_texts(req)
        if LOG:
            with open(LOG, "a") as log:
                log.write(json.dumps({"path": self.path, "model": req.get("model"),
                                      "stream": bool(req.get("stream")), "users": users}) + "\n")
        if self.path.startswith("/v1/messages/count_tokens"):
            return self.reply(200, json.dumps({"input_tokens": 10}).encode())
        if not self.path.startswith("/v1/messages"):
            return self.reply(200, b"{}")
        last = users[-1].strip().splitlines()[0] if users and users[-1].strip() else ""
        text = f"You said: {last}. I can see {len(users)} user messages."
        model = req.get("model") or "claude"
        usage = {"input_tokens": 10, "output_tokens": 5}
        if not req.get("stream"):
            return self.reply(200, json.dumps({
                "id": "msg_loop", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                "stop_sequence": None, "usage": usage}).encode())
        events = [
            ("message_start", {"type": "message_start", "message": {
                "id": "msg_loop", "type": "message", "role": "assistant", "model": model, "content": [],
                "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": text}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                               "usage": {"output_tokens": 5}}),
            ("message_stop", {"type": "message_stop"}),
        ]
        body = b"".join(f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in events)
        self.reply(200, body, "text/event-stream")


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
sys.stdout.close()
server.serve_forever()
