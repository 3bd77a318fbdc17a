"""An MCP client on the official Python SDK (mcp): starts a stdio server, lists its tools and
makes the calls asked, in order.

    mcp_client.py CALLS -- SERVER [ARG...]
    mcp_client.py CALLS --url URL        (Streamable HTTP; the bearer token in $MCP_BEARER)

CALLS is a JSON array of [tool, arguments] pairs; the names "resources/list" (arguments
{"cursor"}, optional: where to begin) and "resources/read" ({"uri"}) make those requests
instead, a listing going on from each page's nextCursor to the last. Prints one JSON object on
stdout: the server's name, instructions and capabilities, its tools as listed (wire form:
inputSchema, annotations), and each call's result: a tool's {"is_error", "structured", "text"}; a
listing's {"pages": [{"resources" (wire form), "next_cursor"}, ...]}, a read's {"contents"}, or
{"error": {"code", "message"}} for a request the server refused.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, MCPError, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


async def converse(read, write, calls):
    async with ClientSession(read, write) as session:
        init = await session.initialize()
        listed = await session.list_tools()
        results = []
        for name, arguments in calls:
            if name.startswith("resources/"):
                results.append(await resources(session, name, arguments))
                continue
            result = await session.call_tool(name, arguments)
            results.append({
                "is_error": bool(result.is_error),
                "structured": result.structured_content,
                "text": [c.text for c in result.content if c.type == "text"],
            })
    return init, listed, results


async def resources(session, name, arguments):
    try:
        if name == "resources/list":
            pages, cursor = [], arguments.get("cursor")
            for _ in range(100):
                listed = await session.list_resources(params=types.PaginatedRequestParams(cursor=cursor))
                pages.append({
                    "resources": [r.model_dump(mode="json", by_alias=True, exclude_none=True) for r in listed.resources],
                    "next_cursor": listed.next_cursor,
                })
                cursor = listed.next_cursor
                if cursor is None:
                    return {"pages": pages}
            raise RuntimeError(f"a listing of more than 100 pages: {pages[-1]}")
        assert name == "resources/read", name
        read = await session.read_resource(arguments["uri"])
        return {"contents": [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in read.contents]}
    except MCPError as e:
        return {"error": {"code": e.code, "message": e.message}}


async def main():
    calls = json.loads(sys.argv[1])
    if sys.argv[2] == "--url":
        headers = {"Authorization": f"Bearer {os.environ['MCP_BEARER']}"}
        async with create_mcp_http_client(headers=headers) as http:
            async with streamable_http_client(sys.argv[3], http_client=http) as streams:
                init, listed, results = await converse(streams[0], streams[1], calls)
    else:
        assert sys.argv[2] == "--", "usage: mcp_client.py CALLS -- SERVER [ARG...]"
        argv = sys.argv[3:]
        server = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ), cwd=os.getcwd())
        async with stdio_client(server) as (read, write):
            init, listed, results = await converse(read, write, calls)
    print(json.dumps({
        "server": init.server_info.name,
        "instructions": init.instructions,
        "capabilities": init.capabilities.model_dump(mode="json", by_alias=True, exclude_none=True),
        "tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools],
        "results": results,
    }))


asyncio.run(main())
