"""The MCP endpoint's OAuth 2.0 Protected Resource Metadata (RFC 9728).

Served at ``/.well-known/oauth-protected-resource/mcp`` (section 3.1: the well-known name
inserted before the resource's path) and, for clients that look at the host's root first, at
``/.well-known/oauth-protected-resource``; a 401 from ``/mcp`` names the first in
``WWW-Authenticate``'s ``resource_metadata`` (section 5.1). The document (section 2):

* ``resource``: the endpoint's URL (``<mcp.public_url>/mcp``);
* ``authorization_servers``: the identity provider ``mcp.oidc_issuer``, only when one is set
  (the member is optional; without one, clients send an API token the user was given by
  ``search2o tokens issue``);
* ``bearer_methods_supported``: ``["header"]`` (RFC 6750 section 2.1; MCP sends no other);
* ``resource_name``.

It is public (nothing in it is secret), so any origin may read it (``Access-Control-Allow-
Origin: *``) and caches may keep it an hour.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from search2o.surfaces.mcp.settings import McpSettings
from search2o.surfaces.mcp.urls import McpUrls

__all__ = ["ROOT_METADATA_PATH", "metadata_document", "metadata_endpoint"]

ROOT_METADATA_PATH = "/.well-known/oauth-protected-resource"
"""The metadata at the host's root, for clients that look there before the path-based name."""


def metadata_document(urls: McpUrls, settings: McpSettings) -> dict[str, Any]:
    """Return the RFC 9728 document of the MCP endpoint (see the module docstring)."""
    document: dict[str, Any] = {"resource": urls.endpoint}
    if settings.oidc_issuer is not None:
        document["authorization_servers"] = [settings.oidc_issuer]
    document["bearer_methods_supported"] = ["header"]
    document["resource_name"] = "search2o"
    return document


def metadata_endpoint(document: dict[str, Any]) -> Any:
    """Return a Starlette endpoint answering ``GET`` with ``document``."""

    async def endpoint(request: Request) -> JSONResponse:
        return JSONResponse(
            document,
            headers={"Cache-Control": "public, max-age=3600", "Access-Control-Allow-Origin": "*"},
        )

    return endpoint
