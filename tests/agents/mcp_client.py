"""An MCP client on the official Python SDK (mcp): starts a stdio server, lists its tools and
makes the calls asked, in order.

    mcp_client.py CALLS -- SERVER [ARG...]
    mcp_client.py CALLS --url URL        (Streamable HTTP; the bearer token in $MCP_BEARER)

CALLS is a JSON array of [tool, arguments] pairs. Prints one JSON object on stdout: the server's
name and instructions, its tools as listed (wire form: inputSchema, annotations), and each call's
result ({"is_error", "structured", "text"}).
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


async def converse(read, write, calls):
    async with ClientSession(read, write) as session:
        init = await session.initialize()
        listed = await session.list_tools()
        results = []
        for name, arguments in calls:
            result = await session.call_tool(name, arguments)
            results.append({
                "is_error": bool(result.is_error),
                "structured": result.structured_content,
                "text": [c.text for c in result.content if c.type == "text"],
            })
    return init, listed, results


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
        "tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools],
        "results": results,
    }))


asyncio.run(main())
