#!/usr/bin/env python3
"""A loopback stand-in for the Anthropic Messages API and the OpenAI Responses API (our own), just
enough for the adapters' requests: `POST /v1/messages` (streamed as server-sent events, or not),
`count_tokens`, `POST /v1/responses` (streamed), and `{}` for anything else. No key is checked and
nothing leaves the machine.

Each answer says what the model was shown: "You said: <the last user text>. I can see N user
messages." (user text blocks, Claude Code's <system-reminder> blocks left out), so a test can tell
whether a restored session kept its context. Prints the port on stdout; with $MODEL_LOG set,
appends one JSON line per request ({"path", "model", "stream", "users"}); with $MODEL_HEADERS set,
each request's path, headers and body size.

Scripted delegation (the Messages API): a request that offers the `Agent` (or `Task`) tool and
whose last user text starts with "DELEGATE: <task>" is answered with a call of that tool (a
general-purpose subagent told "<task>"); the subagent's own request (its user text is the task)
is answered "Subagent report: <task>"; and once the tool's result is in the conversation, the
model answers "You said: ..." as usual.

Scripted recall (the Messages API): a request that offers an MCP tool named
`mcp__<server>__search_sessions` (acp-journal's history server, `--offer-history`) and whose last
user text starts with "RECALL: <query>" is answered with a call of that tool ({"query": <query>});
once its result is in the conversation, the model answers as usual. The log line of each request
also holds the tools offered (`tools`) and the text of the tool results in the conversation
(`tool_results`).

Scripted edits (the Messages API): a request that offers the `Read` and `Edit` tools and whose
last user text's first line is "EDIT: {json}" (`file_path`, `old_string`, `new_string`) is
answered with a call of `Read` of that file, then, once its result is in, a call of `Edit` with
that input (Claude Code edits only a file it has read), then "You said: ..." as usual.

Scripted edits (the Responses API): a request that offers codex's `apply_patch` tool and whose
last user text's first line is "EDIT: {json}" (the same fields) is answered with a call of
`apply_patch` whose patch, in codex's grammar (`*** Begin Patch`, `*** Update File: <file_path>`,
`@@`, `-` each line of `old_string`, `+` each of `new_string`, `*** End Patch`), replaces
`old_string` with `new_string`: a `custom_tool_call` (`input`: the patch) when the tool is
`custom` (freeform), a `function_call` (`arguments`: `{"input": patch}`) when it is a `function`;
once the call's output is in the request's input (after that user text), the model answers
"You said: ..." as usual.
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


def tool_results(req):
    """The text of every tool result in the conversation."""
    texts = []
    for msg in req.get("messages") or []:
        content = msg.get("content")
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            inner = block.get("content")
            if isinstance(inner, str):
                texts.append(inner)
            for part in inner if isinstance(inner, list) else []:
                if isinstance(part, dict) and part.get("type") == "text":
                    texts.append(part.get("text", ""))
    return texts


def tool_result_count(req):
    """How many tool results the conversation holds."""
    count = 0
    for msg in req.get("messages") or []:
        content = msg.get("content")
        if isinstance(content, list):
            count += sum(1 for b in content if isinstance(b, dict) and b.get("type") == "tool_result")
    return count


def has_tool_result(req):
    """Whether a tool's result is in the conversation (the delegation came back)."""
    return tool_result_count(req) > 0


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

    def body(self):
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            raw = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return raw
                raw += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def do_POST(self):
        raw = self.body()
        if os.environ.get("MODEL_HEADERS"):
            with open(os.environ["MODEL_HEADERS"], "a") as log:
                log.write(f"{self.path} {dict(self.headers)} {len(raw)}\n")
        try:
            req = json.loads(raw)
        except ValueError:
            req = {}
        users = user_texts(req)
        if LOG:
            with open(LOG, "a") as log:
                log.write(json.dumps({"path": self.path, "model": req.get("model"),
                                      "stream": bool(req.get("stream")), "users": users,
                                      "tools": [t.get("name") for t in req.get("tools") or []
                                                if isinstance(t, dict)],
                                      "tool_results": tool_results(req)}) + "\n")
        if self.path.rstrip("/").endswith("/responses"):
            return self.openai_responses(req)
        if self.path.startswith("/v1/messages/count_tokens"):
            return self.reply(200, json.dumps({"input_tokens": 10}).encode())
        if not self.path.startswith("/v1/messages"):
            return self.reply(200, b"{}")
        last = users[-1].strip().splitlines()[0] if users and users[-1].strip() else ""
        text = f"You said: {last}. I can see {len(users)} user messages."
        model = req.get("model") or "claude"
        usage = {"input_tokens": 10, "output_tokens": 5}
        delegation = self.delegation(req, last) or self.edit(req, last)
        if delegation is not None:
            return self.tool_use(req, model, *delegation)
        recall = self.recall(req, last)
        if recall is not None:
            return self.tool_use(req, model, *recall)
        if last.startswith("DELEGATED: ") and not has_tool_result(req):
            text = f"Subagent report: {last[len('DELEGATED: '):]}"
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

    def delegation(self, req, last):
        """(tool name, input) when this request should delegate, else None."""
        tools = {t.get("name") for t in req.get("tools") or [] if isinstance(t, dict)}
        tool = next((n for n in ("Agent", "Task") if n in tools), None)
        if tool is None or not last.startswith("DELEGATE: ") or has_tool_result(req):
            return None
        task = last[len("DELEGATE: "):]
        return tool, {"description": "Explore the task", "subagent_type": "general-purpose",
                      "prompt": f"DELEGATED: {task}"}

    def recall(self, req, last):
        """(tool name, input) when this request should search the journal's history, else None."""
        tools = [t.get("name") or "" for t in req.get("tools") or [] if isinstance(t, dict)]
        found = sorted((n for n in tools if n.startswith("mcp__") and n.endswith("__search_sessions")),
                       key=lambda n: "acp-journal-history" not in n)
        tool = found[0] if found else None
        if tool is None or not last.startswith("RECALL: ") or has_tool_result(req):
            return None
        return tool, {"query": last[len("RECALL: "):]}

    def edit(self, req, last):
        """(tool name, input) for the next step of a scripted edit, else None."""
        tools = {t.get("name") for t in req.get("tools") or [] if isinstance(t, dict)}
        if not last.startswith("EDIT: ") or not {"Read", "Edit"} <= tools:
            return None
        edit = json.loads(last[len("EDIT: "):])
        steps = [("Read", {"file_path": edit["file_path"]}), ("Edit", edit)]
        done = tool_result_count(req)
        return steps[done] if done < len(steps) else None

    def tool_use(self, req, model, name, tool_input):
        """A streamed (or whole) answer that calls tool `name` with `tool_input`."""
        block = {"type": "tool_use", "id": f"toolu_{name.lower()}_{tool_result_count(req) + 1}", "name": name,
                 "input": tool_input}
        if not req.get("stream"):
            return self.reply(200, json.dumps({
                "id": "msg_delegate", "type": "message", "role": "assistant", "model": model,
                "content": [block], "stop_reason": "tool_use", "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 5}}).encode())
        events = [
            ("message_start", {"type": "message_start", "message": {
                "id": "msg_delegate", "type": "message", "role": "assistant", "model": model, "content": [],
                "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": dict(block, input={})}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "input_json_delta", "partial_json": json.dumps(tool_input)}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                               "usage": {"output_tokens": 5}}),
            ("message_stop", {"type": "message_stop"}),
        ]
        body = b"".join(f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in events)
        self.reply(200, body, "text/event-stream")

    def openai_responses(self, req):
        """The OpenAI Responses API, streamed (what codex sends)."""
        users = []
        for item in req.get("input") or []:
            if item.get("role") != "user":
                continue
            for part in item.get("content") or []:
                text = part.get("text") if isinstance(part, dict) else None
                if text and part.get("type") == "input_text" and not text.lstrip().startswith("<"):
                    users.append(text)
        if LOG:
            with open(LOG, "a") as log:
                log.write(json.dumps({"path": self.path, "model": req.get("model"),
                                      "stream": bool(req.get("stream")), "users": users}) + "\n")
        last = users[-1].strip().splitlines()[0] if users and users[-1].strip() else ""
        text = f"You said: {last}. I can see {len(users)} user messages."
        model = req.get("model") or "gpt"
        call = self.patch(req, last)
        if call is not None:
            # The call's input streamed as the API streams it: the item without it, then a delta.
            field, kind = (("input", "response.custom_tool_call_input.delta") if call["type"] == "custom_tool_call"
                           else ("arguments", "response.function_call_arguments.delta"))
            delta = {"type": kind, "item_id": call["id"], "output_index": 0, "delta": call[field]}
            return self.responses_stream(model, dict(call, status="in_progress", **{field: ""}), [delta], call)
        item = {"type": "message", "id": "msg_loop", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
        delta = {"type": "response.output_text.delta", "item_id": "msg_loop", "output_index": 0,
                 "content_index": 0, "delta": text}
        self.responses_stream(model, dict(item, status="in_progress", content=[]), [delta], item)

    def patch(self, req, last):
        """The `apply_patch` call (a Responses API output item) for a scripted edit, else None."""
        tool = next((t for t in req.get("tools") or []
                     if isinstance(t, dict) and t.get("name") == "apply_patch"), None)
        if tool is None or not last.startswith("EDIT: "):
            return None
        items = req.get("input") or []
        asked = max((i for i, item in enumerate(items)
                     if isinstance(item, dict) and item.get("role") == "user"), default=-1)
        answered = any(isinstance(item, dict) and item.get("type") in
                       ("custom_tool_call_output", "function_call_output") for item in items[asked + 1:])
        if answered:
            return None
        edit = json.loads(last[len("EDIT: "):])
        lines = ["*** Begin Patch", f"*** Update File: {edit['file_path']}", "@@"]
        lines += [f"-{line}" for line in edit["old_string"].splitlines()]
        lines += [f"+{line}" for line in edit["new_string"].splitlines()]
        patch = "\n".join(lines + ["*** End Patch"]) + "\n"
        if tool.get("type") == "custom":
            return {"type": "custom_tool_call", "id": "ctc_edit", "call_id": "call_edit", "status": "completed",
                    "name": "apply_patch", "input": patch}
        return {"type": "function_call", "id": "fc_edit", "call_id": "call_edit", "status": "completed",
                "name": "apply_patch", "arguments": json.dumps({"input": patch})}

    def responses_stream(self, model, item, deltas, done=None):
        """A streamed Responses API answer with one output item: `item` added (as it starts),
        `deltas`, then `done` (default: `item`) done and the response completed with it."""
        done = done or item
        response = {"id": "resp_loop", "object": "response", "model": model, "status": "completed",
                    "output": [done], "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                                                "input_tokens_details": {"cached_tokens": 0},
                                                "output_tokens_details": {"reasoning_tokens": 0}}}
        events = [
            ("response.created", {"type": "response.created", "response": dict(response, status="in_progress", output=[])}),
            ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}),
            *((d["type"], d) for d in deltas),
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": done}),
            ("response.completed", {"type": "response.completed", "response": response}),
        ]
        body = b"".join(f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in events)
        self.reply(200, body, "text/event-stream")


class Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # A client killed mid-request (the tests kill agents) is no error of ours.
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


server = Server(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
sys.stdout.close()
server.serve_forever()
