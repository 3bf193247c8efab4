"""Where the MCP server is reached: its URL, its metadata URL, documents' URLs, the allowlists.

Everything here is computed from the settings alone, so every API process behind a load
balancer answers with the same URLs and accepts the same ``Host`` and ``Origin`` values.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from search2o.config import Settings
from search2o.surfaces.mcp.settings import mcp_settings

__all__ = ["ENDPOINT_PATH", "METADATA_PATH", "McpUrls"]

ENDPOINT_PATH = "/mcp"
"""The path of the Streamable HTTP endpoint."""

METADATA_PATH = "/.well-known/oauth-protected-resource" + ENDPOINT_PATH
"""Its RFC 9728 metadata: the well-known name inserted before the resource's path (section 3.1)."""

# Names of this machine a local client may send as Host/Origin, on any port (the SDK's
# default for a server bound to loopback).
_LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")
_LOOPBACK_ORIGINS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")


def _default_base(host: str, port: int) -> str:
    """Return ``http://host:port`` for the bind address.

    An unspecified one (all interfaces) is reached on loopback from this machine.
    """
    name = host.strip() or "127.0.0.1"
    try:
        address = ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return f"http://{name}:{port}"
    if address.is_unspecified:
        return f"http://127.0.0.1:{port}"
    if address.version == 6:
        return f"http://[{address}]:{port}"
    return f"http://{address}:{port}"


@dataclass(frozen=True)
class McpUrls:
    """The addresses of one server, from :meth:`of`.

    Attributes:
        base: ``mcp.public_url``, default ``http://<host>:<port>`` (no trailing slash).
        audience: the ``aud`` an identity provider's access token must hold: ``mcp.audience``,
            default :attr:`endpoint` (RFC 8707 resource indicator; MCP authorization spec).

    """

    base: str
    audience: str
    allowed_hosts: tuple[str, ...]
    allowed_origins: tuple[str, ...]

    @classmethod
    def of(cls, settings: Settings) -> McpUrls:
        """Compute the addresses from ``settings`` (``mcp``, ``host``, ``port``)."""
        mcp = mcp_settings(settings)
        base = mcp.public_url or _default_base(settings.host, settings.port)
        parts = urlsplit(base)
        hostname = parts.hostname or ""
        bracketed = f"[{hostname}]" if ":" in hostname else hostname
        hosts = mcp.allowed_hosts
        if hosts is None:
            # A client omits the port when it is the scheme's default, so both forms pass.
            hosts = list(dict.fromkeys([*_LOOPBACK_HOSTS, parts.netloc, bracketed]))
        origins = mcp.allowed_origins
        if origins is None:
            origins = list(dict.fromkeys([*_LOOPBACK_ORIGINS, f"{parts.scheme}://{parts.netloc}"]))
        return cls(
            base=base,
            audience=mcp.audience or base + ENDPOINT_PATH,
            allowed_hosts=tuple(hosts),
            allowed_origins=tuple(origins),
        )

    @property
    def endpoint(self) -> str:
        """The MCP endpoint, ``<base>/mcp``: the protected resource of RFC 9728."""
        return self.base + ENDPOINT_PATH

    @property
    def metadata(self) -> str:
        """The endpoint's protected resource metadata URL (RFC 9728, section 3.1)."""
        return self.base + METADATA_PATH

    def document(self, document_id: int) -> str:
        """Return the URL a client cites for a document: ``GET /v1/documents/{id}/text`` of the API.

        It answers the document's text to a caller who may read it and 404 to anyone else,
        like the ``fetch`` tool.
        """
        return f"{self.base}/v1/documents/{document_id}/text"
