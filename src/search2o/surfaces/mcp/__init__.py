"""The MCP server: search tools for an external model, under the caller's access rights.

MCP is a surface of its own kind: not a conversation client, it gives a model (Claude,
ChatGPT, an IDE agent) the tools ``search``, ``fetch`` and ``search_knowledge`` and returns
findings, not an answer. It is served at ``/mcp`` of the API (:class:`McpEndpoint`,
Streamable HTTP, stateless) and by ``search2o mcp`` over stdio (:func:`serve_stdio`); see
docs/mcp.md. It needs the ``mcp`` extra (``pip install 'search2o[mcp]'``): importing this
package without it raises :class:`~search2o.errors.ConfigError` saying so.
"""

from search2o.errors import ConfigError

try:
    import joserfc  # noqa: F401 - only checked here; search2o.surfaces.mcp.oidc uses it

    import mcp  # noqa: F401 - only checked here; the modules below use it
except ImportError as exc:  # pragma: no cover - the extra is installed wherever tests run
    raise ConfigError(
        f"the MCP server needs the `mcp` extra ({exc.name} is not installed): "
        "pip install 'search2o[mcp]'"
    ) from exc

from search2o.surfaces.mcp.http import McpEndpoint
from search2o.surfaces.mcp.server import build_mcp_server
from search2o.surfaces.mcp.stdio import serve_stdio
from search2o.surfaces.mcp.urls import McpUrls

__all__ = ["McpEndpoint", "McpUrls", "build_mcp_server", "serve_stdio"]
