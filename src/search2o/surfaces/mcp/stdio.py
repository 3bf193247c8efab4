"""``search2o mcp``: the MCP server over stdio, for a client on this machine.

The client (Claude Desktop, Claude Code, an IDE) starts the command and speaks JSON-RPC on its
standard input and output (MCP "stdio" transport), in either protocol era. There is no token:
whoever can run the command can open the database, so it acts as the user it is started for
(``--as``, default the local user) and searches under that user's access rights. Logs go to
standard error; standard output carries the protocol only.
"""

from __future__ import annotations

import anyio

from search2o.accounts import Principal
from search2o.runtime import Runtime
from search2o.surfaces.mcp.server import build_mcp_server
from search2o.surfaces.mcp.urls import McpUrls

__all__ = ["serve_stdio"]


def serve_stdio(runtime: Runtime, principal: Principal) -> None:
    """Serve MCP on stdin/stdout as ``principal`` until the client closes stdin."""
    server = build_mcp_server(runtime, McpUrls.of(runtime.settings), lambda: principal)
    anyio.run(server.run_stdio_async)
