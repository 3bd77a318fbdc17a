"""An ACP client on the Python SDK 0.12.1's remote transports (``acp.http``, ``acp.ws``).

Our own test driver around the SDK's client transport (the peer under test is the transport):
  sdk_remote.py --url URL --transport http|ws [--token T] [--cwd DIR]
                [--session ID (--load|--resume)] [--prompt TEXT]... [--permission allow|reject|never]
                [--drop-after N] [--list] [--linger SECONDS] [--h2c] [--fs TEXT]
One JSON object per line on stdout: initialized, list, loaded, resumed, session, update,
permission, fs, result, error (then exit 1). --fs: declare fs.readTextFile and answer every
read with TEXT (event fs). --list: session/list after initialize (and no
session/new unless there are prompts). --drop-after N: after N session/update notifications during
the first prompt, exit at once without closing anything (a laptop lid). A prompt the host refuses
because another client's turn runs in the session ("session busy") is sent again after 0.25 s
(event busy). --linger: stay connected
that long after the last step (to answer requests that arrive). Otherwise the connection is closed
cleanly before exit 0 (HTTP: the SDK's DELETE; WebSocket: a close frame). Diagnostics on stderr.
"""

import argparse
import asyncio
import json
import os
import sys
from typing import Any

from acp import connect_to_agent, text_block
from acp.interfaces import Client
from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation


def emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


class Recorder(Client):
    def __init__(self, permission: str, drop_after: int | None, fs: str | None) -> None:
        self.fs = fs
        self.permission = permission
        self.drop_after = drop_after
        self.updates = 0
        self.prompting = False

    async def request_permission(self, session_id: str, tool_call: Any, options: Any, **kwargs: Any) -> Any:
        options = [plain(o) for o in options]
        if self.permission == "never":
            emit({"event": "permission", "request": {"sessionId": session_id, "options": options}, "answer": None})
            await asyncio.Event().wait()
        kind = "allow" if self.permission == "allow" else "reject"
        chosen = next((o for o in options if str(o.get("kind", "")).startswith(kind)), options[0])
        answer = {"outcome": {"outcome": "selected", "optionId": chosen["optionId"]}}
        emit({"event": "permission", "request": {"sessionId": session_id, "toolCall": plain(tool_call), "options": options}, "answer": answer})
        return answer

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        emit({"event": "update", "sessionId": session_id, "update": plain(update)})
        if not self.prompting:
            return
        self.updates += 1
        if self.drop_after is not None and self.updates >= self.drop_after:
            os._exit(0)

    async def write_text_file(self, *args: Any, **kwargs: Any) -> None:
        return None

    async def read_text_file(self, *args: Any, **kwargs: Any) -> Any:
        emit({"event": "fs", "path": kwargs.get("path")})
        return {"content": self.fs or ""}


def is_busy(error: Exception) -> bool:
    """The host refused a prompt because another client's turn runs in the session."""
    return getattr(error, "code", None) == -32000 and "busy" in str(error)


async def prompt_when_free(conn: Any, session_id: str, text: str) -> Any:
    """session/prompt; refused while another client's turn runs, it is sent again shortly."""
    for _ in range(400):
        try:
            return await conn.prompt(session_id=session_id, prompt=[text_block(text)])
        except Exception as error:
            if not is_busy(error):
                raise
            emit({"event": "busy"})
            await asyncio.sleep(0.25)
    raise RuntimeError("the session stayed busy")


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--transport", choices=["http", "ws"], required=True)
    parser.add_argument("--token")
    parser.add_argument("--cwd", default=os.getcwd())
    parser.add_argument("--session")
    parser.add_argument("--load", action="store_true")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--prompt", action="append", default=[])
    parser.add_argument("--permission", choices=["allow", "reject", "never"], default="allow")
    parser.add_argument("--drop-after", type=int)
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--h2c", action="store_true", help="HTTP/2 by prior knowledge on http://")
    parser.add_argument("--linger", type=float, default=0.0)
    parser.add_argument("--fs", help="declare fs.readTextFile and answer every read with this text")
    args = parser.parse_args()

    headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
    if args.transport == "http":
        from acp.http import create_http_stream

        client = None
        if args.h2c:
            import httpx

            client = httpx.AsyncClient(http1=False, http2=True, timeout=httpx.Timeout(30.0, read=None))
        transport = create_http_stream(args.url, headers=headers, client=client)
    else:
        from acp.ws import create_websocket_stream

        url = args.url.replace("http://", "ws://", 1).replace("https://", "wss://", 1)
        try:
            transport = await create_websocket_stream(url, headers=headers)
        except Exception as error:  # a refused handshake (401, ...) or no server
            emit({"event": "error", "message": f"{type(error).__name__}: {error}"})
            return 1
    recorder = Recorder(args.permission, args.drop_after, args.fs)
    conn = connect_to_agent(recorder, transport)
    try:
        init = await conn.initialize(
            protocol_version=1,
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=args.fs is not None, write_text_file=False),
                terminal=False,
            ),
            client_info=Implementation(name="acp-journal-tests", version="0"),
        )
        emit({"event": "initialized", "agentCapabilities": plain(init.agent_capabilities)})
        if args.list:
            listed = await conn.list_sessions()
            emit({"event": "list", "sessions": plain(listed)["sessions"], "nextCursor": listed.next_cursor})
            if not args.session and not args.prompt:
                return 0
        if args.session:
            session_id = args.session
            if args.resume:
                await conn.resume_session(session_id=session_id, cwd=args.cwd, mcp_servers=[])
                emit({"event": "resumed"})
            else:
                await conn.load_session(session_id=session_id, cwd=args.cwd, mcp_servers=[])
                emit({"event": "loaded"})
        else:
            session = await conn.new_session(cwd=args.cwd, mcp_servers=[])
            session_id = session.session_id
        emit({"event": "session", "sessionId": session_id})
        for i, text in enumerate(args.prompt):
            recorder.prompting = i == 0
            result = await prompt_when_free(conn, session_id, text)
            recorder.prompting = False
            emit({"event": "result", "stopReason": plain(result.stop_reason)})
        if args.linger:
            await asyncio.sleep(args.linger)
    except Exception as error:  # the test reads it
        emit({"event": "error", "message": f"{type(error).__name__}: {error}"})
        return 1
    finally:
        await conn.close()
        await transport.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
