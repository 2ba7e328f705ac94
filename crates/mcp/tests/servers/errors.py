"""An MCP server (the PyPI `mcp` package) whose tools go wrong in the ways the client must
survive: one raises, one hangs, one exits mid-call, one answers with a malformed result, one
changes the tool list. It also reports its environment and, over HTTP, the headers it got.

    python errors.py              # stdio
    python errors.py http PORT    # Streamable HTTP at http://127.0.0.1:PORT/mcp
"""

import json
import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("errors")


@server.tool()
def raises(reason: str) -> str:
    """Fails with `reason`."""
    raise ToolError(f"the disk is on fire: {reason}")


@server.tool()
async def hangs() -> str:
    """Never answers."""
    await anyio.sleep(3600)
    return "woke up"


@server.tool()
def exits() -> str:
    """Ends the whole server in the middle of the call."""
    sys.stderr.write("errors.py: going away in the middle of a call\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool()
async def malformed(ctx: Context) -> str:
    """Answers with a result that is not a tool result, then stays silent."""
    request_id = ctx.request_id
    wire_id = int(request_id) if request_id.isdigit() else request_id
    line = json.dumps(
        {"jsonrpc": "2.0", "id": wire_id, "result": {"content": "not a list", "isError": "perhaps"}}
    )
    # Straight to the pipe, ahead of the SDK's own (correct) answer, which never comes.
    os.write(1, (line + "\n").encode())
    await anyio.sleep(3600)
    return "unreachable"


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `added` and tells the client its tool list changed."""

    def added() -> str:
        """A tool that was not there at first."""
        return "I am new"

    server.add_tool(added, name="added")
    await ctx.session.send_tool_list_changed()
    return "added a tool"


@server.tool()
def environment() -> str:
    """The server's environment, as JSON."""
    return json.dumps(dict(os.environ), sort_keys=True)


@server.tool()
def authorization(ctx: Context) -> str:
    """The Authorization and X-Trace headers of the HTTP request (HTTP only)."""
    headers = ctx.headers or {}
    return json.dumps(
        {"authorization": headers.get("authorization"), "x-trace": headers.get("x-trace")}
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
