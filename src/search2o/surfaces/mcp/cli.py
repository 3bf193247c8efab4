"""``search2o mcp``: the MCP server over stdio, for a client on this machine (docs/mcp.md)."""

from __future__ import annotations

from search2o.cli.common import handle_errors, open_runtime
from search2o.cli.knowledge import AsOpt

__all__ = ["mcp_stdio"]


@handle_errors
def mcp_stdio(as_user: AsOpt = None) -> None:
    """Serve the MCP tools search, fetch and search_knowledge on stdin/stdout.

    For MCP clients that start the server themselves (Claude Desktop, Claude Code, Cursor,
    VS Code). It searches as the --as user (default: the local user), under their access
    rights; needs the `mcp` extra.
    """
    from search2o.surfaces.mcp.settings import EXTRA

    EXTRA.check("`search2o mcp`")
    from search2o.surfaces.mcp.stdio import serve_stdio

    with open_runtime() as runtime:
        serve_stdio(runtime, runtime.principal_for(as_user))
