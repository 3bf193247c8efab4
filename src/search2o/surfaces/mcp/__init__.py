"""The MCP server: search tools for an external model, under the caller's access rights.

MCP is a surface of its own kind: not a conversation client, it gives a model (Claude,
ChatGPT, an IDE agent) the tools ``search``, ``fetch`` and ``search_knowledge`` and returns
findings, not an answer. It is served at ``/mcp`` of the API (:class:`McpEndpoint`,
Streamable HTTP, stateless) and by ``search2o mcp`` over stdio (:func:`serve_stdio`); see
docs/mcp.md. It needs the ``mcp`` extra (``pip install 'search2o[mcp]'``): using it
without it raises :class:`~search2o.errors.ConfigError` saying so.

Modules are imported by their full names: this package re-exports nothing, so its extension
(:mod:`.extension`) and settings load without the rest of it.
"""
